// FMA peak probe: independent accumulator chains of vector FMAs, enough to cover the FMA latency
// on both pipes (2 pipes x 4-5 cycles), few enough that they and the two operands stay in the
// register file: 16 chains spill on AVX2's 16 ymm registers (measured on Zen 3: 47-51 GFLOP/s,
// below the 65 GFLOP/s a 512^3 GEMM reaches; 12 chains: the true peak). Timed over a fixed
// iteration count.
#include "codegen/peak_probe.h"

#include "codegen/module_builder.h"

#include <algorithm>
#include <chrono>
#include <llvm/IR/Intrinsics.h>
#include <vector>

namespace tunec {

Expected<double> measureFmaPeak(Jit& jit, Isa isa) {
  const int kChains = std::min(16, isaInfo(isa).vectorRegisters - 4);
  auto module = jit.newModule(isa, "tunec_fma_probe");
  std::string name = module->module().getModuleIdentifier();
  codegen::ModuleBuilder& mb = *module;
  llvm::FixedVectorType* vec = mb.f32Vector();
  auto* fnTy = llvm::FunctionType::get(mb.f32(), {mb.i64()}, false);
  llvm::Function* fn = mb.createFunction(name, fnTy);
  llvm::IRBuilder<> b(llvm::BasicBlock::Create(mb.context(), "entry", fn));
  llvm::BasicBlock* entry = b.GetInsertBlock();
  auto* loop = llvm::BasicBlock::Create(mb.context(), "loop", fn);
  auto* exit = llvm::BasicBlock::Create(mb.context(), "exit", fn);
  b.CreateBr(loop);
  b.SetInsertPoint(loop);
  llvm::PHINode* i = b.CreatePHI(mb.i64(), 2);
  i->addIncoming(b.getInt64(0), entry);
  llvm::Function* fma = llvm::Intrinsic::getDeclaration(&mb.module(), llvm::Intrinsic::fma, {vec});
  llvm::Value* x = llvm::ConstantFP::get(vec, 0.999999);
  llvm::Value* y = llvm::ConstantFP::get(vec, 1e-7);
  std::vector<llvm::PHINode*> acc;
  std::vector<llvm::Value*> next;
  for (int c = 0; c < kChains; ++c) {
    acc.push_back(b.CreatePHI(vec, 2));
    acc.back()->addIncoming(llvm::ConstantFP::get(vec, 1.0 + c), entry);
  }
  for (int c = 0; c < kChains; ++c)
    next.push_back(b.CreateCall(fma, {acc[static_cast<size_t>(c)], x, y}));
  for (int c = 0; c < kChains; ++c)
    acc[static_cast<size_t>(c)]->addIncoming(next[static_cast<size_t>(c)], loop);
  llvm::Value* inext = b.CreateAdd(i, b.getInt64(1));
  i->addIncoming(inext, loop);
  b.CreateCondBr(b.CreateICmpSLT(inext, fn->getArg(0)), loop, exit);
  b.SetInsertPoint(exit);
  llvm::Value* sum = next[0];
  for (int c = 1; c < kChains; ++c) sum = b.CreateFAdd(sum, next[static_cast<size_t>(c)]);
  b.CreateRet(b.CreateExtractElement(sum, b.getInt64(0)));
  TUNEC_ASSIGN_OR_RETURN(void* address, jit.addAndLookup(std::move(module), name));
  auto probe = reinterpret_cast<float (*)(int64_t)>(address);

  const int64_t iterations = 8'000'000;
  const double flopsPerCall =
      2.0 * kChains * isaInfo(isa).f32Lanes() * static_cast<double>(iterations);
  volatile float sink = probe(iterations / 10); // warm up
  std::vector<double> rates;
  for (int run = 0; run < 9; ++run) {
    auto t0 = std::chrono::steady_clock::now();
    sink = sink + probe(iterations);
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    rates.push_back(flopsPerCall / s / 1e9);
  }
  // Noise (a busy neighbour, clock drift) only slows the probe down: the fastest run is the peak.
  return *std::max_element(rates.begin(), rates.end());
}

} // namespace tunec
