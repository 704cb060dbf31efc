// The calling convention of every generated heavy kernel: one pointer to a KernelArgs. Each
// operand has a named slot, null when the kernel does not read it, so that new operands
// (int8 requantization's per-channel scales and zero points, the weight-sum compensation of
// s8 activations) need a slot, not a new ABI. The layout is part of the model format
// (ModelPlan::kFormatVersion): append slots, never reorder them.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tunec::rt {

/// Slot numbers: a kernel step's tensors are its arguments in this order (-1: null).
enum KernelArgSlot : int {
  kArgSrc = 0,      ///< activations: A of a matmul, the convolution input
  kArgWei,          ///< weights: the packed constant, or B of a matmul of computed operands
  kArgDst,          ///< the output
  kArgBias,         ///< per output channel
  kArgResidual,     ///< the addend of a fused residual add, in the output's layout
  kArgScales,       ///< per output channel (requantization)
  kArgZeroPoints,   ///< source and destination zero points
  kArgCompensation, ///< per output column (weight sums, for s8 activations)
  kArgValues,       ///< the second computed operand of a fused matmul pair (attention's V)
  kArgNormParams,   ///< a row normalization after the epilogue: scale[n] then bias[n]
  kArgChannelScale, ///< per (image, input channel): a scale of the input (squeeze-excite)
  kArgExtents,      ///< the run's extents (ModelPlan::extents, int64_t), set by the executor
  kArgSlots,
};

struct KernelArgs {
  const void* src = nullptr;
  const void* wei = nullptr;
  void* dst = nullptr;
  const void* bias = nullptr;
  const void* residual = nullptr;
  const float* scales = nullptr;
  const int32_t* zeroPoints = nullptr;
  const int32_t* compensation = nullptr;
  const void* values = nullptr;
  const float* normParams = nullptr;
  const float* channelScale = nullptr;
  const int64_t* extents = nullptr;
};

static_assert(sizeof(KernelArgs) == kArgSlots * sizeof(void*), "one pointer per slot");
static_assert(offsetof(KernelArgs, compensation) == kArgCompensation * sizeof(void*));
static_assert(offsetof(KernelArgs, values) == kArgValues * sizeof(void*));
static_assert(offsetof(KernelArgs, normParams) == kArgNormParams * sizeof(void*));
static_assert(offsetof(KernelArgs, channelScale) == kArgChannelScale * sizeof(void*));
static_assert(offsetof(KernelArgs, extents) == kArgExtents * sizeof(void*));

/// The arguments of a kernel that reads the first five slots (every fp32 kernel).
inline KernelArgs kernelArgs(const void* src, const void* wei, void* dst, const void* bias,
                             const void* residual) {
  KernelArgs args;
  args.src = src;
  args.wei = wei;
  args.dst = dst;
  args.bias = bias;
  args.residual = residual;
  return args;
}

/// A generated kernel.
using KernelFn = void (*)(const KernelArgs* args);

} // namespace tunec::rt
