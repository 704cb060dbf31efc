// The checks a tuning record passes before it joins a database (`tunec db import`, `merge`,
// `verify` and the Python package's Database).
#pragma once

#include "tuning_db/database.h"

#include <optional>
#include <string>

namespace tunec::cli {

/// Checks a record: workload and config parse, the version is not newer than this build's, and
/// for this build's version the config is a valid point of its template's knob space and the time
/// is plausible.
Status validateRecord(const db::Record& r);

/// What `tunec db best` (and the Python package's Database.best) looks up: the best ok record
/// of a workload for `target` at this build's version of the workload's template.
struct BestLookup {
  bool anyRecords = false; ///< the database has records of the workload at all
  int templateVersion = 0;
  std::optional<db::BestRecord> best;
};
/// An error when the workload's records name a template this build does not know.
Expected<BestLookup> lookUpBest(db::TuningDatabase& db, const std::string& workloadKey,
                                const db::TargetInfo& target, bool compatible);

} // namespace tunec::cli
