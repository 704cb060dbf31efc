// The epilogue of a heavy kernel: elementwise post-ops applied to the output tile while it is
// in registers, before the store. Post-ops never change a template's knob space
// (DESIGN.md, decision 4).
#pragma once

#include "support/dtype.h"
#include "support/error.h"

#include <string>
#include <vector>

namespace tunec {

enum class PostOpKind {
  BiasPerColumn,  ///< y += bias[n] (output channel)
  Relu,           ///< y = max(y, 0)
  Clip,           ///< y = min(max(y, lo), hi)
  AddTensor,      ///< y += addend[m][n] (a residual input with its own row stride)
  Gelu,           ///< y = 0.5 y (1 + erf(y / sqrt 2)) (the exact, erf form)
  Scale,          ///< y *= lo (a scalar, e.g. attention's 1 / sqrt(d))
  LeakyRelu,      ///< y = y < 0 ? lo * y : y
  HardSigmoid,    ///< y = clip(lo * y + hi, 0, 1)
  HardSwish,      ///< y = y * clip(y / 6 + 1/2, 0, 1)
  Sigmoid,        ///< y = 1 / (1 + exp(-y))
  Swish,          ///< y = y / (1 + exp(-lo y)) (SiLU at lo = 1)
  Tanh,           ///< y = tanh(y)
  Exp,            ///< y = exp(y)
  Round,          ///< y = round(y), half to even (a quantization round trip's: NaN -> 0 when lo)
  ScalePerColumn, ///< y *= scale[n] (per output channel: a layer scale, a channel affine)
  PReluPerColumn, ///< y = y < 0 ? slope[n] * y : y (the slopes in the column-scale vector)
  /// Each output row normalized (LayerNorm over the last axis, epsilon lo, the scale and bias
  /// from the kernel's norm parameters) once the row is complete: the last op, matmul only.
  LayerNormRow,
  /// y = clamp(round(y / lo) + hi, 0, 255), round half to even (ONNX QuantizeLinear to u8 with
  /// scale lo and zero point hi; NaN gives the zero point): the requantizing last op of a kernel
  /// whose C is u8 (the next int8 layer's A).
  QuantizeU8,
  /// y += (addend[m][n] - hi) * lo with a u8 addend: a residual DequantizeLinear (scale lo, zero
  /// point hi) read in the epilogue as the u8 tensor it dequantizes, bit for bit the
  /// DequantizeLinear's f32 (the difference is exact, then one rounding) added as AddTensor's.
  AddDequantizedU8,
};

struct PostOp {
  PostOpKind kind;
  float lo = 0.f;
  float hi = 0.f;
  bool operator==(const PostOp&) const = default;
};

/// Post-ops in application order.
using Epilogue = std::vector<PostOp>;

/// "bias+relu", "" for none: for kernel names and printing.
std::string epilogueName(const Epilogue& epilogue);
/// True for the post-ops that read an addend tensor.
inline bool readsAddend(PostOpKind kind) {
  return kind == PostOpKind::AddTensor || kind == PostOpKind::AddDequantizedU8;
}
/// True when the epilogue reads a bias vector / an addend tensor.
bool epilogueNeedsBias(const Epilogue& epilogue);
bool epilogueNeedsAddend(const Epilogue& epilogue);
bool epilogueNeedsColumnScale(const Epilogue& epilogue);
/// True for the post-ops that read the column-scale vector (a multiplier, PRelu's slopes).
inline bool readsColumnScale(PostOpKind kind) {
  return kind == PostOpKind::ScalePerColumn || kind == PostOpKind::PReluPerColumn;
}

/// The epilogue lattice: whether an epilogue that applies `sofar` can apply `next` after it,
/// with the reason when it cannot (one bias vector and one addend tensor per kernel). The
/// fusion plan asks it for every post-op through the template that runs the anchor
/// (templates/template.h); nothing else decides what an epilogue takes. One vector of each
/// kind per kernel: a bias, a column scale, an addend.
Status epilogueAccepts(const Epilogue& sofar, const PostOp& next);

/// The element type of the epilogue's addend when the kernel's C is `dst`: u8 for
/// AddDequantizedU8, else C's own (f32, or bf16 for a bf16 C); f32 beside a u8 C.
DType epilogueAddendType(const Epilogue& epilogue, DType dst);

/// Whether a kernel with this epilogue can store a C of `dst`: a u8 C is written by the
/// requantizing epilogue (QuantizeU8 last; a residual addend is f32 or a dequantized u8), and
/// only a u8 C is.
Status checkEpilogueStores(const Epilogue& epilogue, DType dst);

} // namespace tunec
