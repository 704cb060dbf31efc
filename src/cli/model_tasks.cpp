// Import, the graph pipeline and the heavy kernels of each model, merged by workload key.
#include "cli/model_tasks.h"

#include "cli/load_model.h"
#include "cli/pipeline.h"
#include "driver/compile_model.h"
#include "templates/isa.h"

namespace tunec::cli {

Expected<ModelTasks> modelTasks(const std::vector<std::string>& models, const InputDims& inputDims,
                                const Target& target, int threads, driver::Precision precision) {
  driver::CompileOptions co;
  co.precision = precision;
  co.threads = threads;
  co.target = target;
  co.isa = widestIsa(target);
  co.buckets = inputDims.buckets;
  ModelTasks out;
  std::map<std::string, size_t> index;
  for (const std::string& path : models) {
    // A dynamic batch of images tunes the kernels of one image, which every batch runs.
    TUNEC_ASSIGN_OR_RETURN(CompileInput input, loadForCompile(path, inputDims));
    TUNEC_ASSIGN_OR_RETURN(Graph optimized, runGraphPipeline(std::move(input.graph), nullptr));
    TUNEC_ASSIGN_OR_RETURN(std::vector<driver::HeavyKernel> kernels,
                           driver::extractHeavyKernels(optimized, co));
    out.heavyKernels += kernels.size();
    for (const driver::HeavyKernel& k : kernels) {
      tuner::Task task = tuner::makeTask(k.workload, target);
      auto [it, fresh] = index.emplace(task.key, out.tasks.size());
      if (fresh)
        out.tasks.push_back(std::move(task));
      else
        out.tasks[it->second].weight += 1;
    }
  }
  return out;
}

} // namespace tunec::cli
