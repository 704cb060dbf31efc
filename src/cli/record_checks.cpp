// Record validation: the template's knob space and a plausibility bound on the time.
#include "cli/record_checks.h"

#include "templates/template.h"

#include <algorithm>
#include <cstdio>

namespace tunec::cli {

namespace {

/// An ok record faster than its target's FMA units allow (every used core at 6 GHz, two fp32
/// FMAs per cycle at the widest vector the target has; twice that for bf16, whose vdpbf16ps
/// multiplies two pairs per lane) is a mistyped or forged time: imported, it would be "best"
/// and poison the kernel.
Status checkPlausible(const db::Record& r, double flops, int threads, const KernelTypes& types) {
  if (r.status != db::MeasureStatus::Ok || !(r.medianUs > 0)) return {};
  bool wide = std::find(r.target.isaFeatures.begin(), r.target.isaFeatures.end(), "avx512f") !=
              r.target.isaFeatures.end();
  double lanes = wide ? 16 : 8;
  double cores = std::max(1, std::min(threads, r.target.cores));
  double peak = cores * 6e9 * 2 * 2 * lanes * (isBf16Gemm(types) ? 2 : 1);
  double achieved = flops / (r.medianUs * 1e-6);
  if (achieved > peak) {
    char text[200];
    std::snprintf(text, sizeof(text),
                  "implausible time: %.3g us is %.0f GFLOP/s, above the %.0f GFLOP/s that %g "
                  "core(s) of its target can reach",
                  r.medianUs, achieved / 1e9, peak / 1e9, cores);
    return Error(text);
  }
  return {};
}

} // namespace

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
  return checkPlausible(r, workloadFlops(*w), workloadThreads(*w), workloadTypes(*w));
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
