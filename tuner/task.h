// A tuning task: one heavy-kernel workload of a template (the tuning key, DESIGN.md decision 4),
// with its knob space and analytical default, typed (templates/template.h).
#pragma once

#include "support/error.h"
#include "templates/template.h"

#include <nlohmann/json.hpp>
#include <string>

namespace tunec::tuner {

struct Task {
  Workload workload;
  nlohmann::json workloadJson; ///< canonical, as records and the worker pipe carry it
  std::string key;             ///< workload key in the tuning database
  TemplateKind kind = TemplateKind::Matmul;
  int templateVersion = 0;
  double flops = 0;
  int threads = 1;
  Isa isa = Isa::Avx2;
  double weight = 1; ///< occurrences in the model
  std::string label; ///< for progress lines
  KnobSpace space;
  Config defaultConfig;
};

/// The task of a workload on `target`, whose widest ISA its configs use and whose caches its
/// default config fits.
Task makeTask(const Workload& workload, const Target& target);
/// The same from a workload JSON (a record's, or a model's kernel list): the one parse.
Expected<Task> makeTask(const nlohmann::json& workload, const Target& target);

} // namespace tunec::tuner
