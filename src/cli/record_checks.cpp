// Record validation: the template's knob space and a plausibility bound on the time.
#include "cli/record_checks.h"

#include "templates/template.h"
#include "tuner/measure_protocol.h"

#include <algorithm>
#include <cstdio>

namespace tunec::cli {

Status validateRecord(const db::Record& r) {
  auto fail = [&](const Error& e) {
    return Error("config does not fit template '" + r.templateName().substr(0, 40) +
                 "': " + e.message());
  };
  auto kind = parseTemplateName(r.templateName());
  if (!kind)
    return makeError("unknown template '", r.templateName().substr(0, 40), "' (",
                     spellingList<TemplateKind>(), ")");
  auto w = parseWorkload(r.workload);
  if (!w) return fail(w.error());
  auto c = parseConfig(*kind, r.config);
  if (!c) return fail(c.error());
  if (r.templateVersion > templateVersion(*kind))
    return makeError("template version ", r.templateVersion, " is newer than this tunec's ",
                     templateVersion(*kind));
  // An older version's knob space is not this build's: such a record is kept (its workload and
  // config parse) but never used.
  if (r.templateVersion < templateVersion(*kind)) return {};
  if (Status s = validateConfig(*w, *c); !s) return fail(s.error());
  return tuner::checkPlausible(r, workloadFlops(*w), workloadThreads(*w), workloadTypes(*w));
}

Expected<BestLookup> lookUpBest(db::TuningDatabase& db, const std::string& workloadKey,
                                const db::TargetInfo& target, bool compatible) {
  TUNEC_ASSIGN_OR_RETURN(std::vector<db::Record> records, db.recordsOf(workloadKey));
  BestLookup found;
  if (records.empty()) return found;
  found.anyRecords = true;
  auto kind = parseTemplateName(records.front().templateName());
  if (!kind)
    return makeError("records of workload ", workloadKey, " have an unknown template '",
                     records.front().templateName().substr(0, 40), "'");
  found.templateVersion = templateVersion(*kind);
  TUNEC_ASSIGN_OR_RETURN(
      found.best, db.best(workloadKey, target, found.templateVersion,
                          compatible ? db::TargetMatch::IsaFeatures : db::TargetMatch::Exact));
  return found;
}

} // namespace tunec::cli
