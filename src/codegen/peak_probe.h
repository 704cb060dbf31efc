// A small FMA-throughput probe: the machine's measured fp32 peak, against which kernels report
// their percentage.
#pragma once

#include "codegen/jit.h"

namespace tunec {

/// Measured single-core fp32 FMA peak in GFLOP/s for `isa` (a JIT-compiled loop of independent
/// vector FMAs; the fastest of nine timed runs, since noise only slows it down).
Expected<double> measureFmaPeak(Jit& jit, Isa isa);

/// Measured single-core peak of AVX512-BF16's `vdpbf16ps` in GFLOP/s (two multiplies and two
/// adds per f32 lane), the roof of the bf16 GEMM; an error on a target without avx512_bf16.
Expected<double> measureBf16DotPeak(Jit& jit);

} // namespace tunec
