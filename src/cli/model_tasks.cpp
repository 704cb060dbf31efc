// Import, the graph pipeline and the heavy kernels of each model, merged by workload key.
#include "cli/model_tasks.h"

#include "cli/flag_values.h"
#include "cli/load_model.h"
#include "cli/pipeline.h"
#include "driver/compile_model.h"
#include "templates/isa.h"

#include <algorithm>
#include <fstream>
#include <sstream>

namespace tunec::cli {

double LengthHistogram::share(int64_t lo, int64_t hi) const {
  double in = 0;
  for (auto it = counts.lower_bound(lo); it != counts.end() && it->first <= hi; ++it)
    in += it->second;
  return total > 0 ? in / total : 0;
}

Expected<LengthHistogram> readHistogram(const std::string& spec, const InputDims& inputDims) {
  auto eq = spec.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == spec.size())
    return makeError("--histogram '", spec, "' is not of the form NAME=FILE (e.g. ",
                     "sequence=lengths.txt)");
  LengthHistogram h;
  h.symbol = spec.substr(0, eq);
  const std::string path = spec.substr(eq + 1);
  auto range = inputDims.ranges.find(h.symbol);
  if (range == inputDims.ranges.end())
    return makeError("--histogram '", spec, "': '", h.symbol, "' has no bounds: give them with ",
                     "--dim ", h.symbol, "=MIN..MAX");
  std::ifstream in(path);
  if (!in) return makeError("--histogram: cannot read ", path);
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (auto hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    std::istringstream fields(line);
    std::string value, count, extra;
    if (!(fields >> value)) continue;
    fields >> count >> extra;
    auto v = parseInteger("histogram value", value, range->second.first, range->second.second);
    auto c = count.empty() ? Expected<int64_t>(1)
                           : parseInteger("histogram count", count, 0, int64_t{1} << 50);
    if (!v || !c || !extra.empty())
      return makeError(path, ":", number, ": '", line, "' is not a value of '", h.symbol,
                       "' within ", range->second.first, "..", range->second.second,
                       " and an optional count: ",
                       !v   ? v.error().message()
                       : !c ? c.error().message()
                            : "too many fields");
    h.counts[*v] += static_cast<double>(*c);
    h.total += static_cast<double>(*c);
  }
  if (h.total <= 0) return makeError("--histogram: ", path, " holds no runs");
  return h;
}

Expected<ModelTasks> modelTasks(const std::vector<std::string>& models, const InputDims& inputDims,
                                const Target& target, int threads, driver::Precision precision,
                                const LengthHistogram* histogram) {
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
      // A size bucket's kernel weighs as the share of the runs in its bucket (a floor keeps a
      // bucket the histogram never saw in the job).
      const double weight = histogram && k.bucketExtent == histogram->symbol
                                ? std::max(histogram->share(k.bucketLo, k.bucketHi), 1e-3)
                                : 1.0;
      auto [it, fresh] = index.emplace(task.key, out.tasks.size());
      if (fresh) {
        task.weight = weight;
        out.tasks.push_back(std::move(task));
      } else {
        out.tasks[it->second].weight += weight;
      }
    }
  }
  return out;
}

} // namespace tunec::cli
