// The model.so file's integrity trailer: the last 16 bytes are "TUNECSUM" and the checksum64 of
// every byte before them (little-endian). The loader checks it before dlopen, so a truncated,
// edited or foreign file is an error instead of SIGBUS, SIGSEGV or SIGILL in the dynamic loader
// or a wrong answer from flipped constants.
#pragma once

#include "support/error.h"

#include <string>

namespace tunec::rt {

/// Appends the trailer to a linked library (the driver, after `cc -shared`).
Status appendArtifactTrailer(const std::string& path);

/// Checks that `path` is a regular file that ends with a trailer matching its contents; the
/// error says what is wrong and how to fix it.
Status checkArtifactFile(const std::string& path);

} // namespace tunec::rt
