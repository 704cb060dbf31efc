// One post-op of an epilogue on a vector in registers, as LLVM IR: shared by the microkernel's
// and the depthwise kernel's epilogues.
#pragma once

#include "templates/post_ops.h"

#include <llvm/IR/IRBuilder.h>

namespace tunec::codegen {

/// `op` applied to the float vector `v`. `column` (the op's per-column vector: the bias, or the
/// column scale) and `addend` are the vectors at this tile position, loaded by the caller when
/// the op reads them (nullptr otherwise).
llvm::Value* emitPostOp(llvm::IRBuilder<>& b, const PostOp& op, llvm::Value* v, llvm::Value* column,
                        llvm::Value* addend);

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
