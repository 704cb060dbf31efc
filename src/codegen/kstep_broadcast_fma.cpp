// The f32 k-step: nr/lanes B vectors loaded (and scaled by the step's input-channel scale when
// the spec asks), each of mr A elements broadcast, mr x nr/lanes FMAs (llvm.fma; LLVM picks
// vbroadcastss or an embedded broadcast), with the optional A and B prefetches of the spec.
#include "codegen/kstep.h"

#include <llvm/IR/Intrinsics.h>

namespace tunec::codegen {

namespace {

class BroadcastFmaStep final : public KStepStrategy {
public:
  BroadcastFmaStep(ModuleBuilder& mb, const MicrokernelSpec& spec)
      : spec_(spec), f32_(mb.f32()), vec_(mb.f32Vector()),
        lanes_(static_cast<int>(vec_->getNumElements())), nv_(spec.nr / lanes_),
        fma_(llvm::Intrinsic::getDeclaration(&mb.module(), llvm::Intrinsic::fma, {vec_})),
        prefetch_(
            llvm::Intrinsic::getDeclaration(&mb.module(), llvm::Intrinsic::prefetch, {mb.ptr()})) {}

  llvm::Type* accumulatorType() const override { return vec_; }
  int kPerStep() const override { return 1; }

  std::vector<llvm::Value*> step(llvm::IRBuilder<>& b, const KStepOperands& in, llvm::Value* kk,
                                 const std::vector<llvm::Value*>& acc) const override {
    const int mr = spec_.mr;
    llvm::Value* bRow = b.CreateGEP(f32_, in.bBase, b.CreateMul(kk, in.ldb));
    if (in.prefetchB) { // read prefetch into L2 (locality 2: prefetcht1)
      llvm::Value* row =
          spec_.prefetchBGroup > 1 ? b.CreateAnd(kk, b.getInt64(-spec_.prefetchBGroup)) : kk;
      llvm::Value* at = b.CreateGEP(f32_, in.prefetchB, b.CreateMul(row, in.ldb));
      for (int line = 0; line < spec_.prefetchBLines; ++line) // 16 floats a line
        b.CreateCall(prefetch_, {b.CreateGEP(f32_, at, b.getInt64(16 * line)), b.getInt32(0),
                                 b.getInt32(2), b.getInt32(1)});
    }
    if (spec_.prefetchA) {
      // Row kk mod mr of A, four cache lines ahead, into L1: every row is touched at least once
      // per 16 k steps (one line) while mr <= 16.
      llvm::Value* r = b.CreateURem(kk, b.getInt64(mr));
      llvm::Value* at = b.CreateAdd(b.CreateAdd(aRowOffset(b, spec_, in, r), kk), b.getInt64(64));
      b.CreateCall(prefetch_,
                   {b.CreateGEP(f32_, in.aBase, at), b.getInt32(0), b.getInt32(3), b.getInt32(1)});
    }
    std::vector<llvm::Value*> bv(static_cast<size_t>(nv_));
    for (int j = 0; j < nv_; ++j)
      bv[static_cast<size_t>(j)] = b.CreateAlignedLoad(
          vec_, b.CreateGEP(f32_, bRow, b.getInt64(j * lanes_)), llvm::Align(4), "bv");
    if (in.kScale) { // B's row kk times the scale of input channel kk: nv multiplies a step
      llvm::Value* scale =
          b.CreateVectorSplat(static_cast<unsigned>(lanes_),
                              b.CreateLoad(f32_, b.CreateGEP(f32_, in.kScale, kk), "sk"));
      for (llvm::Value*& v : bv) v = b.CreateFMul(v, scale);
    }
    std::vector<llvm::Value*> out(acc.size());
    for (int i = 0; i < mr; ++i) {
      llvm::Value* index = spec_.aTransposed
                               ? b.CreateAdd(b.CreateMul(kk, in.lda), b.getInt64(i))
                               : b.CreateAdd(aRowOffset(b, spec_, in, b.getInt64(i)), kk);
      llvm::Value* scalar = b.CreateLoad(f32_, b.CreateGEP(f32_, in.aBase, index), "aik");
      llvm::Value* splat = b.CreateVectorSplat(static_cast<unsigned>(lanes_), scalar);
      for (int j = 0; j < nv_; ++j) {
        size_t idx = static_cast<size_t>(i * nv_ + j);
        out[idx] = b.CreateCall(fma_, {splat, bv[static_cast<size_t>(j)], acc[idx]});
      }
    }
    return out;
  }

private:
  const MicrokernelSpec& spec_;
  llvm::Type* f32_;
  llvm::FixedVectorType* vec_;
  int lanes_, nv_;
  llvm::Function* fma_;
  llvm::Function* prefetch_;
};

} // namespace

std::unique_ptr<KStepStrategy> makeBroadcastFmaStep(ModuleBuilder& mb,
                                                    const MicrokernelSpec& spec) {
  return std::make_unique<BroadcastFmaStep>(mb, spec);
}

} // namespace tunec::codegen
