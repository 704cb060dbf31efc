// One post-op of an epilogue on a vector in registers, as LLVM IR, and a whole epilogue with
// its requantizing end: shared by the microkernel's and the depthwise kernel's epilogues.
#pragma once

#include "templates/post_ops.h"

#include <llvm/ADT/STLFunctionalExtras.h>
#include <llvm/IR/IRBuilder.h>
#include <utility>

namespace tunec::codegen {

/// `op` applied to the float vector `v`. `column` (the op's per-column vector: the bias, or the
/// column scale) and `addend` are the vectors at this tile position, loaded by the caller when
/// the op reads them (nullptr otherwise); an AddDequantizedU8's addend is the u8 lanes as
/// stored (a vector of i8), which the op dequantizes.
llvm::Value* emitPostOp(llvm::IRBuilder<>& b, const PostOp& op, llvm::Value* v, llvm::Value* column,
                        llvm::Value* addend);

/// The operands of a post-op at this tile position: its column vector (the bias, or the column
/// scale) and its addend, each loaded only when the op reads it (nullptr otherwise).
using PostOpOperands = llvm::function_ref<std::pair<llvm::Value*, llvm::Value*>(const PostOp&)>;

/// `epilogue` applied to the f32 vector `v`: the post-ops in order (emitPostOp), the f32 result.
/// A requantizing epilogue (QuantizeU8 last) ends in one sequence instead, which returns the u8
/// results as i32 lanes in [0, 255] for the caller to narrow: the division by the output scale,
/// the clamp to the integers that stay in [0, 255] once the zero point is added (a Relu or a
/// Clip just before the quantization folded into its bounds: they commute with the division and
/// with rounding), and round half to even by adding 1.5 * 2^23, whose bits minus the constant's
/// (less the zero point) are the result. Bit for bit QuantizeLinear's, with its zero point for a
/// NaN: free when the lower bound is 0 (the clamp turns NaN into it), else a select (which
/// measured no cost on int8 MobileNetV2 and ResNet-50, AMD EPYC Zen 5).
llvm::Value* emitEpilogue(llvm::IRBuilder<>& b, const Epilogue& epilogue, llvm::Value* v,
                          PostOpOperands operands);

/// max(bound, v) per lane as one x86 max: v where either is NaN (so a NaN v is kept).
llvm::Value* maxKeepingNan(llvm::IRBuilder<>& b, llvm::Value* bound, llvm::Value* v);
/// exp(x) per lane: the formula of rt::fast_exp, its multiply-adds fused where the target has
/// FMA (relative error < 3e-7 for normal results).
llvm::Value* emitExp(llvm::IRBuilder<>& b, llvm::Value* x);
/// exp(x) per lane for x <= 0 or -inf (a softmax's x - max): emitExp's polynomial with one
/// exponent add instead of its overflow-safe scaling and clamps; 0 below -87.33654, NaN for
/// NaN.
llvm::Value* emitExpNonPositive(llvm::IRBuilder<>& b, llvm::Value* x);
/// erf(x) per lane: Eigen's rational approximation on [-4, 4], absolute error < 4e-7.
llvm::Value* emitErf(llvm::IRBuilder<>& b, llvm::Value* x);
/// tanh(x) per lane: rt::fast_tanh's rational form, absolute error < 4e-7; NaN stays NaN.
llvm::Value* emitTanh(llvm::IRBuilder<>& b, llvm::Value* x);
/// GELU per lane as PyTorch computes it in float, 0.5 x (1 + erf(x / sqrt 2)), with emitErf:
/// absolute error < 3e-7 max(1, |x|). (The loop kernel's rt::fast_gelu keeps 2e-6 relative
/// accuracy in the negative tail through erfc and exp, at two to three times the cost; in an
/// epilogue the math is the whole cost of the fusion.)
llvm::Value* emitGelu(llvm::IRBuilder<>& b, llvm::Value* x);

} // namespace tunec::codegen
