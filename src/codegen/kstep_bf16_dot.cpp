// The bf16 k-step (AVX512-BF16): one step consumes a k-pair. A's elements (i, kk) and
// (i, kk + 1) are adjacent in a row, so one 32-bit load is the pair, broadcast to every lane;
// B is packed in k-pair (VNNI) order, [k / 2][nr][2], so one 64-byte load holds 16 columns'
// pairs; `vdpbf16ps` adds a.even * b.even + a.odd * b.odd to each f32 accumulator. The products
// of two bf16 values are exact in f32, so only the accumulation rounds.
#include "codegen/kstep.h"
#include "codegen/tile_ops.h"

#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/IntrinsicsX86.h>

namespace tunec::codegen {

namespace {

class Bf16DotStep final : public KStepStrategy {
public:
  Bf16DotStep(ModuleBuilder& mb, const MicrokernelSpec& spec)
      : mb_(mb), spec_(spec), i16_(llvm::Type::getInt16Ty(mb.context())), i32_(mb.i32()),
        vec_(mb.f32Vector()), lanes_(static_cast<int>(vec_->getNumElements())),
        pairs_(llvm::FixedVectorType::get(i32_, static_cast<unsigned>(lanes_))),
        nv_(spec.nr / lanes_), prefetch_(llvm::Intrinsic::getDeclaration(
                                   &mb.module(), llvm::Intrinsic::prefetch, {mb.ptr()})) {}

  llvm::Type* accumulatorType() const override { return vec_; }
  int kPerStep() const override { return 2; }

  std::vector<llvm::Value*> step(llvm::IRBuilder<>& b, const KStepOperands& in, llvm::Value* kk,
                                 const std::vector<llvm::Value*>& acc) const override {
    const int mr = spec_.mr;
    // Pair row kk / 2 of the packed panel: 2 * nr bf16 values, at kk * nr (ldb = nr).
    llvm::Value* bRow = b.CreateGEP(i16_, in.bBase, b.CreateMul(kk, in.ldb));
    if (in.prefetchB) { // read prefetch into L2 (prefetcht1), as the f32 step does
      llvm::Value* row =
          spec_.prefetchBGroup > 1 ? b.CreateAnd(kk, b.getInt64(-2 * spec_.prefetchBGroup)) : kk;
      b.CreateCall(prefetch_, {b.CreateGEP(i16_, in.prefetchB, b.CreateMul(row, in.ldb)),
                               b.getInt32(0), b.getInt32(2), b.getInt32(1)});
    }
    std::vector<llvm::Value*> bv(static_cast<size_t>(nv_));
    for (int j = 0; j < nv_; ++j)
      bv[static_cast<size_t>(j)] = b.CreateAlignedLoad(
          pairs_, b.CreateGEP(i16_, bRow, b.getInt64(2 * j * lanes_)), llvm::Align(4), "bv");
    if (spec_.prefetchA) {
      // Row (kk / 2) mod mr of A, 64 values (two cache lines) ahead, into L1: every row is
      // touched at least once per 16 pairs (one line) while mr <= 16.
      llvm::Value* r = b.CreateURem(b.CreateLShr(kk, b.getInt64(1)), b.getInt64(mr));
      llvm::Value* at = b.CreateAdd(b.CreateAdd(aRowOffset(b, spec_, in, r), kk), b.getInt64(64));
      b.CreateCall(prefetch_,
                   {b.CreateGEP(i16_, in.aBase, at), b.getInt32(0), b.getInt32(3), b.getInt32(1)});
    }
    std::vector<llvm::Value*> out(acc.size());
    for (int i = 0; i < mr; ++i) {
      llvm::Value* row = aRowOffset(b, spec_, in, b.getInt64(i));
      llvm::Value* pair = b.CreateAlignedLoad(
          i32_, b.CreateGEP(i16_, in.aBase, b.CreateAdd(row, kk)), llvm::Align(2), "apair");
      llvm::Value* splat = b.CreateVectorSplat(static_cast<unsigned>(lanes_), pair);
      for (int j = 0; j < nv_; ++j) {
        size_t idx = static_cast<size_t>(i * nv_ + j);
        out[idx] = emitDotBf16Pairs(mb_, b, acc[idx], splat, bv[static_cast<size_t>(j)]);
      }
    }
    return out;
  }

private:
  ModuleBuilder& mb_;
  const MicrokernelSpec& spec_;
  llvm::Type* i16_;
  llvm::Type* i32_;
  llvm::FixedVectorType* vec_;
  int lanes_;
  llvm::FixedVectorType* pairs_;
  int nv_;
  llvm::Function* prefetch_;
};

} // namespace

std::unique_ptr<KStepStrategy> makeBf16DotStep(ModuleBuilder& mb, const MicrokernelSpec& spec) {
  return std::make_unique<Bf16DotStep>(mb, spec);
}

} // namespace tunec::codegen
