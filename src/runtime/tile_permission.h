// The AMX tile state is off for a Linux process until it asks for it (arch_prctl
// ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA); a tile instruction before that dies with SIGILL. The
// JIT, model.so's loader and the tuner's worker ask once per process, before any AMX kernel runs.
#pragma once

#include "support/error.h"

namespace tunec {

/// Asks the kernel for the tile state (once per process; later calls return the first answer).
/// The error names the refusal and what to do.
Status requestAmxPermission();

} // namespace tunec
