// Tasks of any template, through the typed template interface.
#include "tuner/task.h"

#include "tuning_db/keys.h"

namespace tunec::tuner {

Task makeTask(const Workload& workload, const Target& target) {
  Task t;
  t.workload = workload;
  t.workloadJson = toJson(workload);
  t.key = db::workloadKey(t.workloadJson);
  t.kind = templateKind(workload);
  t.templateVersion = templateVersion(t.kind);
  t.flops = workloadFlops(workload);
  t.threads = workloadThreads(workload);
  t.isa = kernelIsa(workload, widestIsa(target), target);
  t.label = workloadLabel(workload);
  t.space = knobSpace(workload, t.isa);
  t.defaultConfig = defaultConfig(workload, t.isa, target);
  return t;
}

Expected<Task> makeTask(const nlohmann::json& workload, const Target& target) {
  TUNEC_ASSIGN_OR_RETURN(Workload w, parseWorkload(workload));
  return makeTask(w, target);
}

} // namespace tunec::tuner
