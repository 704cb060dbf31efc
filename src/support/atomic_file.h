// Writing a file so that readers see the old file or the complete new one, never a part.
#pragma once

#include "support/error.h"

#include <functional>
#include <ostream>
#include <string>

namespace tunec {

/// Writes `path` through a temporary file beside it: `write` fills the stream, then the file is
/// flushed, fsync'ed and renamed over `path`. On any failure (a full disk, a write error, an
/// Error from `write`) the temporary file is removed, `path` is left as it was, and the error
/// names the path.
Status writeFileAtomically(const std::string& path,
                           const std::function<Status(std::ostream&)>& write);

} // namespace tunec
