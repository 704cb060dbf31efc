// Code generation for the conv2d template (NHWC activations, packed weights).
#pragma once

#include "codegen/jit.h"
#include "codegen/weight_packing.h"
#include "runtime/kernel_args.h"
#include "templates/conv2d_template.h"
#include "templates/post_ops.h"

#include <memory>
#include <span>

namespace tunec {

/// A compiled convolution: out (NHWC) = conv(in (NHWC), weights), then the epilogue (bias per
/// output channel, residual addend in the output's NHWC layout).
class Conv2dKernel {
public:
  /// The kernel's operands, as tests and the tuner call it: `in` and `out` of the workload's
  /// source and destination types (f32, or the u8 input and f32 or u8 output of an int8 conv).
  /// `channelScale` (n x ic) when the workload has channel_scale; `addend` of the epilogue's
  /// addend type (epilogueAddendType: f32, or u8 for AddDequantizedU8).
  void run(const void* in, void* out, const float* bias = nullptr, const void* addend = nullptr,
           const float* channelScale = nullptr, const float* columnScale = nullptr) const {
    rt::KernelArgs args = rt::kernelArgs(in, packedWeights_.data.get(), out, bias, addend);
    args.channelScale = channelScale;
    args.scales = columnScale;
    fn_(&args);
  }
  const Conv2dWorkload& workload() const { return workload_; }
  const Conv2dConfig& config() const { return config_; }
  /// The packed weights the kernel reads (the tuner evicts them to time streamed weights).
  std::span<const std::byte> packedWeights() const { return packedWeights_.view(); }

private:
  friend Expected<Conv2dKernel> compileConv2d(Jit&, const Conv2dWorkload&, const Conv2dConfig&,
                                              const Epilogue&, const float*);
  rt::KernelFn fn_ = nullptr;
  codegen::PackedWeights packedWeights_;
  Conv2dWorkload workload_;
  Conv2dConfig config_;
};

/// Validates, packs the weights (ONNX OC x IC x KH x KW) into the config's panels, generates and
/// JIT-compiles the kernel.
Expected<Conv2dKernel> compileConv2d(Jit& jit, const Conv2dWorkload& workload,
                                     const Conv2dConfig& config, const Epilogue& epilogue,
                                     const float* weights);

} // namespace tunec
