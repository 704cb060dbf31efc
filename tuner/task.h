// A tuning task: one heavy-kernel workload of a template (the tuning key, DESIGN.md decision 4),
// with its knob space and the template's functions, independent of the template's C++ types.
#pragma once

#include "support/error.h"
#include "templates/isa.h"
#include "templates/knobs.h"

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace tunec::tuner {

struct Task {
  std::string templ;       ///< matmul | conv2d | depthwise
  nlohmann::json workload; ///< canonical workload JSON
  std::string key;         ///< workload key in the tuning database
  int templateVersion = 0;
  double flops = 0;
  int threads = 1;
  Isa isa = Isa::Avx2;
  double weight = 1; ///< occurrences in the model
  std::string label; ///< for progress lines
  KnobSpace space;
  nlohmann::json defaultConfig;
  /// One value per knob (space order) to a config JSON, or an error when no legal config maps
  /// there.
  std::function<Expected<nlohmann::json>(const std::vector<nlohmann::json>&)> fromKnobs;
  /// Validates a config JSON against the workload.
  std::function<Status(const nlohmann::json&)> validate;
};

/// The task of a workload JSON (its "template" field picks the template) on `target`, whose
/// widest ISA its configs use and whose caches its default config fits.
Expected<Task> makeTask(const nlohmann::json& workload, const Target& target);

} // namespace tunec::tuner
