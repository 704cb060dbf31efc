// The checks a tuning record passes before it joins a database (`tunec db import`, `merge`,
// `verify` and the Python package's Database).
#pragma once

#include "tuning_db/database.h"

namespace tunec::cli {

/// Checks a record: workload and config parse, the version is not newer than this build's, and
/// for this build's version the config is a valid point of its template's knob space and the time
/// is plausible.
Status validateRecord(const db::Record& r);

} // namespace tunec::cli
