// The tuning tasks of one or more models: their heavy kernels' distinct workloads, each weighted
// by how often the models run it (`tunec tune`, `tunec report --model`).
#pragma once

#include "driver/compile_model.h"
#include "frontend/onnx_importer.h"
#include "ir/shape.h"
#include "support/target.h"
#include "tuner/task.h"

#include <map>
#include <string>
#include <vector>

namespace tunec::cli {

/// How often a symbol takes each value in the runs the model serves (`tune --histogram
/// sequence=FILE`): each bucket's kernels weigh as its share of the runs.
struct LengthHistogram {
  std::string symbol;
  std::map<int64_t, double> counts; ///< value -> how many runs
  double total = 0;
  /// The share of the runs whose value lies in [lo, hi].
  double share(int64_t lo, int64_t hi) const;
};
/// Reads NAME=FILE: FILE has a line per value ("LENGTH", or "LENGTH COUNT"; blank lines and
/// lines from '#' on are skipped); NAME must be a --dim symbol and each value within its bounds.
/// The error names the file and line.
Expected<LengthHistogram> readHistogram(const std::string& spec, const InputDims& inputDims);

struct ModelTasks {
  std::vector<tuner::Task> tasks; ///< in the order the models first run them
  size_t heavyKernels = 0;        ///< before deduplication
};

Expected<ModelTasks> modelTasks(const std::vector<std::string>& models, const InputDims& inputDims,
                                const Target& target, int threads,
                                driver::Precision precision = driver::Precision::Fp32,
                                const LengthHistogram* histogram = nullptr);

} // namespace tunec::cli
