// Fused attention: O = softmax(epilogue(Q K)) V per batch element (a head), as one kernel that
// never writes the score matrix to memory. Built from the two matmuls it fuses, each with its
// own workload and config (tuned as matmuls): per head, K and V are packed once into the
// panels the microkernels read, then for each block of query rows the Q K tiles go into a
// per-thread score buffer (with the first matmul's epilogue: attention's scale, a mask), each
// row is replaced in place by exp(x - its maximum) while it is in cache (P, not yet divided by
// its sum), the P V tiles are written to O, and O's rows are divided by the sums (64 columns
// per row for BERT's heads instead of the 128 of P).
#pragma once

#include "codegen/jit.h"
#include "runtime/kernel_args.h"
#include "templates/matmul_template.h"
#include "templates/post_ops.h"

namespace tunec {

struct AttentionParts {
  MatmulWorkload qk; ///< S = Q K: A is Q, B is K (computed), C the scores (never stored)
  MatmulConfig qkConfig;
  Epilogue qkEpilogue; ///< on S before the softmax: Scale, AddTensor (a mask of S's shape), ...
  MatmulWorkload av;   ///< O = P V: A is P (the scores), B is V (computed), C is O
  MatmulConfig avConfig;
  /// Keys per block of the online softmax (rounded up to the scores' panel width); 0: all keys
  /// in one block when a block of score rows holds them, else blocks that fit L1.
  int64_t keyBlock = 0;
};

/// Whether the two matmuls form an attention the kernel computes (shapes that chain, computed
/// B operands, an epilogue without a bias vector); the error says which condition fails.
Status checkAttention(const AttentionParts& parts);

/// Keys per block of scores: all of them when the fewest rows of scores a block takes (a
/// multiple of both mr) fit half of L2, else an online softmax over blocks that fit half of L1
/// (or parts.keyBlock); a multiple of the first matmul's nr, or the padded key count.
int64_t attentionKeyBlock(const AttentionParts& parts, const Target& target);

/// Rows of scores one block holds: a multiple of both matmuls' mr, within half of L1 (the
/// scores are written, soft-maxed and read as P V's A while they stay there).
int64_t attentionRowBlock(const AttentionParts& parts, const Target& target);

namespace codegen {
class ModuleBuilder;
/// Emits the kernel (an rt::KernelFn) as `symbol`: src = Q, wei = K, values = V, dst = O,
/// residual = the first matmul's addend.
Status emitAttentionKernel(ModuleBuilder& mb, const std::string& symbol, const AttentionParts& p);
} // namespace codegen

/// A compiled attention kernel (the fp32 call tests make).
class AttentionKernel {
public:
  void run(const float* q, const float* k, const float* v, float* o,
           const float* mask = nullptr) const {
    rt::KernelArgs args = rt::kernelArgs(q, k, o, nullptr, mask);
    args.values = v;
    fn_(&args);
  }

private:
  friend Expected<AttentionKernel> compileAttention(Jit&, const AttentionParts&);
  rt::KernelFn fn_ = nullptr;
};

Expected<AttentionKernel> compileAttention(Jit& jit, const AttentionParts& parts);

} // namespace tunec
