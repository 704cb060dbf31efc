// The dot-product k-steps: one step consumes a k group of `group` elements of A and B, whose
// products one instruction sums into each accumulator lane. A's elements (i, kk .. kk + g - 1)
// are adjacent in a row, so one 32-bit load is the group, broadcast to every lane; B is packed
// in k-group panels, [k / g][nr][g], so one 64-byte load holds 16 columns' groups.
//  - bf16 (AVX512-BF16): k-pairs, `vdpbf16ps` adds a.even * b.even + a.odd * b.odd to each f32
//    accumulator; the products of two bf16 values are exact in f32, so only the accumulation
//    rounds.
//  - int8 (AVX512-VNNI): k-quads of u8 A and s8 B, `vpdpbusd` adds the four products to each
//    i32 accumulator, exactly (wrapping is out of reach below K = 65793); the accumulators
//    become f32 (round to nearest) for the epilogue. B's panels are the layout AMX reads.
//  - int8 (AVX2): the same quads on ymm, vpmaddubsw + vpmaddwd + vpaddd (tile_ops.h); exact for
//    the 7-bit weights (|b| <= 64) the compiler gives it (emitMatmulKernel checks them).
// A new element type of this kind is one row: its group, element and accumulator types and its
// dot instruction (codegen/tile_ops.h, where each has its twin).
#include "codegen/kstep.h"
#include "codegen/tile_ops.h"

#include <llvm/IR/Intrinsics.h>

namespace tunec::codegen {

namespace {

using DotFn = llvm::Value* (*)(ModuleBuilder&, llvm::IRBuilder<>&, llvm::Value* acc, llvm::Value* a,
                               llvm::Value* b);

struct GroupDot {
  int group;        ///< k elements per step
  llvm::Type* elem; ///< an element of A and B in memory
  bool i32Sums;     ///< i32 accumulators (converted for the epilogue), else f32
  DotFn dot;        ///< the instruction, or its twin
};

class GroupDotStep final : public KStepStrategy {
public:
  GroupDotStep(ModuleBuilder& mb, const MicrokernelSpec& spec, GroupDot d)
      : mb_(mb), spec_(spec), d_(d), i32_(mb.i32()), vec_(mb.f32Vector()),
        lanes_(static_cast<int>(vec_->getNumElements())),
        groups_(llvm::FixedVectorType::get(i32_, static_cast<unsigned>(lanes_))),
        nv_(spec.nr / lanes_), prefetch_(llvm::Intrinsic::getDeclaration(
                                   &mb.module(), llvm::Intrinsic::prefetch, {mb.ptr()})) {}

  llvm::Type* accumulatorType() const override {
    return d_.i32Sums ? static_cast<llvm::Type*>(groups_) : vec_;
  }
  int kPerStep() const override { return d_.group; }

  std::vector<llvm::Value*> step(llvm::IRBuilder<>& b, const KStepOperands& in, llvm::Value* kk,
                                 const std::vector<llvm::Value*>& acc) const override {
    const int mr = spec_.mr, g = d_.group;
    // Group row kk / g of the packed panel: g * nr values, at kk * nr (ldb = nr).
    llvm::Value* bRow = b.CreateGEP(d_.elem, in.bBase, b.CreateMul(kk, in.ldb));
    if (in.prefetchB) { // read prefetch into L2 (prefetcht1), as the f32 step does
      llvm::Value* row =
          spec_.prefetchBGroup > 1 ? b.CreateAnd(kk, b.getInt64(-g * spec_.prefetchBGroup)) : kk;
      llvm::Value* at = b.CreateGEP(d_.elem, in.prefetchB, b.CreateMul(row, in.ldb));
      for (int line = 0; line < spec_.prefetchBLines; ++line) // 16 groups a line
        b.CreateCall(prefetch_, {b.CreateGEP(d_.elem, at, b.getInt64(16 * g * line)), b.getInt32(0),
                                 b.getInt32(2), b.getInt32(1)});
    }
    std::vector<llvm::Value*> bv(static_cast<size_t>(nv_));
    for (int j = 0; j < nv_; ++j)
      bv[static_cast<size_t>(j)] = b.CreateAlignedLoad(
          groups_, b.CreateGEP(d_.elem, bRow, b.getInt64(g * j * lanes_)), llvm::Align(4), "bv");
    if (spec_.prefetchA) {
      // Row (kk / g) mod mr of A, two cache lines ahead, into L1: every row is touched at least
      // once per line's worth of groups while mr <= 16.
      llvm::Value* r = b.CreateURem(b.CreateUDiv(kk, b.getInt64(g)), b.getInt64(mr));
      llvm::Value* at =
          b.CreateAdd(b.CreateAdd(aRowOffset(b, spec_, in, r), kk),
                      b.getInt64(128 / mb_.module().getDataLayout().getTypeAllocSize(d_.elem)));
      b.CreateCall(prefetch_, {b.CreateGEP(d_.elem, in.aBase, at), b.getInt32(0), b.getInt32(3),
                               b.getInt32(1)});
    }
    std::vector<llvm::Value*> out(acc.size());
    for (int i = 0; i < mr; ++i) {
      llvm::Value* row = aRowOffset(b, spec_, in, b.getInt64(i));
      llvm::Value* group = b.CreateAlignedLoad(
          i32_, b.CreateGEP(d_.elem, in.aBase, b.CreateAdd(row, kk)), llvm::Align(1), "agroup");
      llvm::Value* splat = b.CreateVectorSplat(static_cast<unsigned>(lanes_), group);
      for (int j = 0; j < nv_; ++j) {
        size_t idx = static_cast<size_t>(i * nv_ + j);
        out[idx] = d_.dot(mb_, b, acc[idx], splat, bv[static_cast<size_t>(j)]);
      }
    }
    return out;
  }

  std::vector<llvm::Value*> toF32(llvm::IRBuilder<>& b,
                                  const std::vector<llvm::Value*>& acc) const override {
    if (!d_.i32Sums) return acc;
    std::vector<llvm::Value*> out;
    for (llvm::Value* a : acc) out.push_back(b.CreateSIToFP(a, vec_));
    return out;
  }

private:
  ModuleBuilder& mb_;
  const MicrokernelSpec& spec_;
  GroupDot d_;
  llvm::Type* i32_;
  llvm::FixedVectorType* vec_;
  int lanes_;
  llvm::FixedVectorType* groups_;
  int nv_;
  llvm::Function* prefetch_;
};

} // namespace

std::unique_ptr<KStepStrategy> makeBf16DotStep(ModuleBuilder& mb, const MicrokernelSpec& spec) {
  return std::make_unique<GroupDotStep>(
      mb, spec, GroupDot{2, llvm::Type::getInt16Ty(mb.context()), false, emitDotBf16Pairs});
}

std::unique_ptr<KStepStrategy> makeU8S8DotStep(ModuleBuilder& mb, const MicrokernelSpec& spec) {
  return std::make_unique<GroupDotStep>(
      mb, spec, GroupDot{4, llvm::Type::getInt8Ty(mb.context()), true, emitDotU8S8Quads});
}

std::unique_ptr<KStepStrategy> makeU8S8MaddStep(ModuleBuilder& mb, const MicrokernelSpec& spec) {
  return std::make_unique<GroupDotStep>(
      mb, spec, GroupDot{4, llvm::Type::getInt8Ty(mb.context()), true, emitDotU8S8QuadsAvx2});
}

} // namespace tunec::codegen
