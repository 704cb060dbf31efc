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

struct ModelTasks {
  std::vector<tuner::Task> tasks; ///< in the order the models first run them
  size_t heavyKernels = 0;        ///< before deduplication
};

Expected<ModelTasks> modelTasks(const std::vector<std::string>& models, const InputDims& inputDims,
                                const Target& target, int threads,
                                driver::Precision precision = driver::Precision::Fp32);

} // namespace tunec::cli
