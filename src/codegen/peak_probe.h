// A small FMA-throughput probe: the machine's measured fp32 peak, against which kernels report
// their percentage.
#pragma once

#include "codegen/jit.h"
#include "templates/knobs.h"
#include "templates/template.h"

#include <map>
#include <memory>
#include <string>

namespace tunec {

/// Measured single-core fp32 FMA peak in GFLOP/s for `isa` (a JIT-compiled loop of independent
/// vector FMAs; the fastest of nine timed runs, since noise only slows it down).
Expected<double> measureFmaPeak(Jit& jit, Isa isa);

/// Measured single-core peak of AVX512-BF16's `vdpbf16ps` in GFLOP/s (two multiplies and two
/// adds per f32 lane), the roof of the bf16 GEMM; an error on a target without avx512_bf16.
Expected<double> measureBf16DotPeak(Jit& jit);

/// Measured single-core peak of the int8 GEMM's vector strategy on `isa` in GOP/s (four u8 x s8
/// products and adds per i32 lane): AVX512-VNNI's `vpdpbusd`, or on AVX2 `vpmaddubsw` +
/// `vpmaddwd` + `vpaddd`.
Expected<double> measureInt8DotPeak(Jit& jit, Isa isa);

/// Measured single-core peak of AMX's `tdpbf16ps` in GFLOP/s, or with `int8` of `tdpbusd` in
/// GOP/s (the AMX kernel's 2x2 grid of independent tile dots); an error on a target without AMX.
Expected<double> measureAmxPeak(Jit& jit, bool int8);

/// The roof of one reduction strategy and the instruction it is named for.
struct ReductionPeak {
  double gflops;
  const char* instruction; ///< "FMA", "vdpbf16ps", "tdpbf16ps"
};
/// The peak of the strategy that kernels of these element types use on `isa` (the one choice of
/// roof for bench-op, tune-op's progress and the profile).
Expected<ReductionPeak> measureReductionPeak(Jit& jit, Isa isa, const KernelTypes& types);

/// The roof of a workload's kernel on the JIT's target (its ISA by kernelIsa: AMX for a bf16 or
/// int8 matmul where the target has it), one thread, each strategy probed once on first use; 0
/// when it cannot be measured. For tune's progress lines.
class ReductionRoofs {
public:
  explicit ReductionRoofs(std::unique_ptr<Jit> jit) : jit_(std::move(jit)) {}
  double of(const Workload& w);

private:
  std::unique_ptr<Jit> jit_;
  std::map<std::string, double> measured_; ///< by instruction and ISA
};

} // namespace tunec
