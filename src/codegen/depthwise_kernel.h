// Code generation for the depthwise conv2d template (NHWC, packed per-channel filters).
#pragma once

#include "codegen/jit.h"
#include "codegen/weight_packing.h"
#include "runtime/kernel_args.h"
#include "templates/depthwise_template.h"
#include "templates/post_ops.h"

#include <memory>
#include <span>

namespace tunec {

/// A compiled depthwise convolution with its epilogue (bias per channel, residual addend, ...,
/// and last a LayerNorm of each output pixel's channels: normParams = its scale then shift).
class DepthwiseKernel {
public:
  /// The kernel's operands, as tests and the tuner call it: `in` and `out` of the workload's
  /// source and destination types (f32, or the u8 input and f32 or u8 output of an int8 one).
  void run(const void* in, void* out, const float* bias = nullptr, const float* addend = nullptr,
           const float* columnScale = nullptr, const float* normParams = nullptr) const {
    rt::KernelArgs args = rt::kernelArgs(in, packedWeights_.data.get(), out, bias, addend);
    args.scales = columnScale;
    args.normParams = normParams;
    fn_(&args);
  }
  /// The packed weights the kernel reads.
  std::span<const std::byte> packedWeights() const { return packedWeights_.view(); }

private:
  friend Expected<DepthwiseKernel> compileDepthwise(Jit&, const DepthwiseWorkload&,
                                                    const DepthwiseConfig&, const Epilogue&,
                                                    const float*);
  rt::KernelFn fn_ = nullptr;
  codegen::PackedWeights packedWeights_;
};

/// Validates, packs the weights (ONNX C x 1 x KH x KW) to KH x KW x C (channel-padded), generates
/// and JIT-compiles the kernel.
Expected<DepthwiseKernel> compileDepthwise(Jit& jit, const DepthwiseWorkload& workload,
                                           const DepthwiseConfig& config, const Epilogue& epilogue,
                                           const float* weights);

} // namespace tunec
