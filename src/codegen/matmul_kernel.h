// Code generation for the matmul template: a loop nest over cache blocks, in LLVM IR, around
// the brgemm microkernel; constant B pre-packed once at compile time.
#pragma once

#include "codegen/jit.h"
#include "codegen/weight_packing.h"
#include "runtime/kernel_args.h"
#include "templates/matmul_template.h"
#include "templates/post_ops.h"

#include <memory>
#include <span>

namespace tunec {

/// A compiled matmul: C = A * B, then the epilogue (bias per column of C, residual addend of
/// C's shape, dense even where C is strided).
class MatmulKernel {
public:
  /// `b` is read only when the workload's B is not constant (the packed copy is used otherwise).
  /// An fp32 kernel's operands, as fp32 tests and the tuner call it.
  /// `normParams` (scale then bias, n each) when the epilogue ends in a row normalization.
  void run(const float* a, const float* b, float* c, const float* bias = nullptr,
           const float* addend = nullptr, const float* normParams = nullptr,
           const float* columnScale = nullptr) const {
    runTyped(a, b, c, bias, addend, normParams, columnScale);
  }
  /// Operands of the workload's element types (bf16: uint16_t bits); bias, normalization
  /// parameters and column scales are f32 whatever the types.
  void runTyped(const void* a, const void* b, void* c, const float* bias = nullptr,
                const void* addend = nullptr, const float* normParams = nullptr,
                const float* columnScale = nullptr) const {
    rt::KernelArgs args =
        rt::kernelArgs(a, packedB_.empty() ? b : packedB_.data.get(), c, bias, addend);
    args.normParams = normParams;
    args.scales = columnScale;
    fn_(&args);
  }
  const MatmulWorkload& workload() const { return workload_; }
  const MatmulConfig& config() const { return config_; }
  /// The pre-packed constant B (empty when B is computed at run time).
  std::span<const std::byte> packedWeights() const { return packedB_.view(); }

private:
  friend Expected<MatmulKernel> compileMatmul(Jit&, const MatmulWorkload&, const MatmulConfig&,
                                              const Epilogue&, const float*);
  rt::KernelFn fn_ = nullptr;
  codegen::PackedWeights packedB_;
  MatmulWorkload workload_;
  MatmulConfig config_;
};

/// Validates the config, generates and JIT-compiles the kernel. `constantB` (the workload's B
/// in its stored layout) is required when the workload's B is constant.
Expected<MatmulKernel> compileMatmul(Jit& jit, const MatmulWorkload& workload,
                                     const MatmulConfig& config, const Epilogue& epilogue,
                                     const float* constantB);

} // namespace tunec
