// A small FMA-throughput probe: the machine's measured fp32 peak, against which kernels report
// their percentage.
#pragma once

#include "codegen/jit.h"

namespace tunec {

/// Measured single-core fp32 FMA peak in GFLOP/s for `isa` (a JIT-compiled loop of independent
/// vector FMAs; the fastest of nine timed runs, since noise only slows it down).
Expected<double> measureFmaPeak(Jit& jit, Isa isa);

} // namespace tunec
