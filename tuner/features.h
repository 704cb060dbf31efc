// Features of a (workload, config) pair for the cost model: a fixed-length vector per template
// (kFeatureLength for every template, zero-padded), so that records of any shape and model share
// one model (a variable-length encoding broke TVM's model when records of other shapes were
// loaded). Each feature's meaning: docs/tuner.md. Bump kFeatureSchemaVersion when a feature's
// meaning changes.
#pragma once

#include "support/error.h"
#include "support/target.h"
#include "templates/template.h"

#include <array>
#include <nlohmann/json.hpp>
#include <string>

namespace tunec::tuner {

inline constexpr int kFeatureSchemaVersion = 4;
inline constexpr int kFeatureLength = 35;

using Features = std::array<float, kFeatureLength>;

/// The features of a config of a workload on a target with these caches. Typed: the search
/// scores thousands of candidates per batch and reads no JSON. A config of another template
/// than the workload's is an error.
Expected<Features> extractFeatures(const Workload& workload, const Config& config,
                                   const Target& target);

/// Names of the features of a template, in order (for docs and debugging).
const std::array<const char*, kFeatureLength>& featureNames(TemplateKind kind);

} // namespace tunec::tuner
