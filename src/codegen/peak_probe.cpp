// FMA peak probe: independent accumulator chains of vector FMAs, enough to cover the FMA latency
// on both pipes (2 pipes x 4-5 cycles), few enough that they and the two operands stay in the
// register file: 16 chains spill on AVX2's 16 ymm registers (measured on Zen 3: 47-51 GFLOP/s,
// below the 65 GFLOP/s a 512^3 GEMM reaches; 12 chains: the true peak). Timed over a fixed
// iteration count. The bf16 probe runs the same chains of vdpbf16ps, the bf16 GEMM's roof.
#include "codegen/peak_probe.h"

#include "codegen/module_builder.h"
#include "codegen/tile_ops.h"
#include "templates/knobs.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/IntrinsicsX86.h>
#include <vector>

namespace tunec {

namespace {

// Times kChains independent chains acc = step(acc) (one vector instruction each) in a loop and
// returns the fastest of nine runs in GFLOP/s, `flopsPerStep` per instruction.
using ChainStep = std::function<llvm::Value*(llvm::IRBuilder<>&, llvm::Value* acc)>;

Expected<double> measureChains(Jit& jit, Isa isa, const std::string& probeName,
                               const std::function<ChainStep(codegen::ModuleBuilder&)>& makeStep,
                               double flopsPerStep) {
  const int kChains = std::min(16, isaInfo(isa).vectorRegisters - 4);
  auto module = jit.newModule(isa, probeName);
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
  ChainStep step = makeStep(mb);
  std::vector<llvm::PHINode*> acc;
  std::vector<llvm::Value*> next;
  for (int c = 0; c < kChains; ++c) {
    acc.push_back(b.CreatePHI(vec, 2));
    acc.back()->addIncoming(llvm::ConstantFP::get(vec, 1.0 + c), entry);
  }
  for (int c = 0; c < kChains; ++c) next.push_back(step(b, acc[static_cast<size_t>(c)]));
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
  const double flopsPerCall = flopsPerStep * kChains * static_cast<double>(iterations);
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

} // namespace

Expected<double> measureFmaPeak(Jit& jit, Isa isa) {
  return measureChains(
      jit, isa, "tunec_fma_probe",
      [](codegen::ModuleBuilder& mb) -> ChainStep {
        llvm::FixedVectorType* vec = mb.f32Vector();
        llvm::Function* fma =
            llvm::Intrinsic::getDeclaration(&mb.module(), llvm::Intrinsic::fma, {vec});
        llvm::Value* x = llvm::ConstantFP::get(vec, 0.999999);
        llvm::Value* y = llvm::ConstantFP::get(vec, 1e-7);
        return [=](llvm::IRBuilder<>& b, llvm::Value* acc) {
          return b.CreateCall(fma, {acc, x, y});
        };
      },
      2.0 * isaInfo(isa).f32Lanes());
}

Expected<double> measureBf16DotPeak(Jit& jit) {
  TUNEC_TRY(checkTargetSupports(jit.target(), Isa::Avx512,
                                KernelTypes{DType::BF16, DType::BF16, DType::F32, DType::F32}));
  return measureChains(
      jit, Isa::Avx512, "tunec_bf16_dot_probe",
      [](codegen::ModuleBuilder& mb) -> ChainStep {
        llvm::Function* dot = llvm::Intrinsic::getDeclaration(
            &mb.module(), llvm::Intrinsic::x86_avx512bf16_dpbf16ps_512);
        llvm::Type* pairs = dot->getFunctionType()->getParamType(1);
        // Pairs of bf16 0.5 and 2^-20 (the bits 0x3f00, 0x3580): the sums stay finite.
        auto* i32s = llvm::FixedVectorType::get(mb.i32(), 16);
        llvm::Value* x =
            llvm::ConstantExpr::getBitCast(llvm::ConstantInt::get(i32s, 0x3f003f00u), pairs);
        llvm::Value* y =
            llvm::ConstantExpr::getBitCast(llvm::ConstantInt::get(i32s, 0x35803580u), pairs);
        return [=](llvm::IRBuilder<>& b, llvm::Value* acc) {
          return b.CreateCall(dot, {acc, x, y});
        };
      },
      4.0 * 16); // 16 lanes, two products and two adds each
}

Expected<double> measureInt8DotPeak(Jit& jit, Isa isa) {
  const KernelTypes int8{DType::U8, DType::I8, DType::I32, DType::F32};
  TUNEC_TRY(checkTargetSupports(jit.target(), isa, int8));
  const int lanes = isaInfo(isa).f32Lanes();
  return measureChains(
      jit, isa, isa == Isa::Avx2 ? "tunec_avx2_int8_probe" : "tunec_vnni_dot_probe",
      [isa, lanes](codegen::ModuleBuilder& mb) -> ChainStep {
        auto* i32s = llvm::FixedVectorType::get(mb.i32(), static_cast<unsigned>(lanes));
        llvm::Value* x = llvm::ConstantInt::get(i32s, 0x01010101u);
        llvm::Value* y = llvm::ConstantInt::get(i32s, 0x01ff01ffu); // +1, -1: the sums stay small
        return [=, &mb](llvm::IRBuilder<>& b, llvm::Value* acc) {
          // The chains are f32 vectors: the i32 accumulator is the same register. vpdpbusd
          // reads it; AVX2's multiplies do not, so they take their bytes from it, or LLVM would
          // hoist them out of the loop.
          llvm::Value* in = b.CreateBitCast(acc, i32s);
          llvm::Value* sum = isa == Isa::Avx2 ? codegen::emitDotU8S8QuadsAvx2(mb, b, in, in, y)
                                              : codegen::emitDotU8S8Quads(mb, b, in, x, y);
          return b.CreateBitCast(sum, acc->getType());
        };
      },
      2.0 * 4 * lanes); // four products and four adds per lane
}

Expected<double> measureAmxPeak(Jit& jit, bool int8) {
  TUNEC_TRY(checkTargetSupports(jit.target(), Isa::Amx,
                                KernelTypes{DType::BF16, DType::BF16, DType::F32, DType::F32}));
  auto module = jit.newModule(Isa::Amx, "tunec_amx_probe");
  std::string name = module->module().getModuleIdentifier();
  codegen::ModuleBuilder& mb = *module;
  auto* fnTy = llvm::FunctionType::get(mb.f32(), {mb.i64(), mb.ptr()}, false);
  llvm::Function* fn = mb.createFunction(name, fnTy);
  llvm::IRBuilder<> b(llvm::BasicBlock::Create(mb.context(), "entry", fn));
  // The kernel's 2x2 grid: C tiles 0-3, A tiles 4-5, B tiles 6-7, all 16 rows of 64 bytes; four
  // independent tdpbf16ps (tdpbusd) per trip on operands loaded once.
  codegen::TilePalette palette;
  palette.rows.fill(16);
  palette.colsb.fill(64);
  std::unique_ptr<codegen::TileOps> tiles = codegen::makeTileOps(mb);
  tiles->configure(b, palette);
  llvm::Value* buffer = fn->getArg(1);
  for (int t = 0; t < 4; ++t) tiles->zero(b, t);
  for (int t = 4; t < 8; ++t) tiles->load(b, t, buffer, b.getInt64(64));
  mb.forLoop(b, b.getInt64(0), fn->getArg(0), 1, "i", [&](llvm::Value*) {
    for (int c = 0; c < 4; ++c) {
      if (int8)
        tiles->dotInt8(b, codegen::TileIntDot::Busd, c, 4 + c / 2, 6 + c % 2);
      else
        tiles->dotBf16(b, c, 4 + c / 2, 6 + c % 2);
    }
  });
  tiles->store(b, 0, buffer, b.getInt64(64));
  b.CreateRet(b.CreateLoad(mb.f32(), buffer));
  TUNEC_ASSIGN_OR_RETURN(void* address, jit.addAndLookup(std::move(module), name));
  auto probe = reinterpret_cast<float (*)(int64_t, void*)>(address);
  // bf16 2^-7 (the sums stay finite), or the bytes 0x00 and 0x3c as int8 (i32 sums wrap).
  std::vector<uint16_t> operands(512, 0x3c00);
  const int64_t iterations = 200'000, kPerRow = int8 ? 64 : 32;
  const double flopsPerCall = 4.0 * 2 * 16 * 16 * kPerRow * static_cast<double>(iterations);
  volatile float sink = probe(iterations / 10, operands.data());
  std::vector<double> rates;
  for (int run = 0; run < 9; ++run) {
    std::fill(operands.begin(), operands.end(), 0x3c00);
    auto t0 = std::chrono::steady_clock::now();
    sink = sink + probe(iterations, operands.data());
    double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    rates.push_back(flopsPerCall / sec / 1e9);
  }
  return *std::max_element(rates.begin(), rates.end());
}

Expected<ReductionPeak> measureReductionPeak(Jit& jit, Isa isa, const KernelTypes& types) {
  if (isa == Isa::Amx) {
    const bool int8 = isInt8Gemm(types);
    TUNEC_ASSIGN_OR_RETURN(double g, measureAmxPeak(jit, int8));
    return ReductionPeak{g, int8 ? "tdpbusd" : "tdpbf16ps"};
  }
  if (isBf16Gemm(types)) {
    TUNEC_ASSIGN_OR_RETURN(double g, measureBf16DotPeak(jit));
    return ReductionPeak{g, "vdpbf16ps"};
  }
  if (isInt8Gemm(types)) {
    TUNEC_ASSIGN_OR_RETURN(double g, measureInt8DotPeak(jit, isa));
    return ReductionPeak{g, isa == Isa::Avx2 ? "vpmaddubsw" : "vpdpbusd"};
  }
  TUNEC_ASSIGN_OR_RETURN(double g, measureFmaPeak(jit, isa));
  return ReductionPeak{g, "FMA"};
}

double ReductionRoofs::of(const Workload& w) {
  const Target& target = jit_->target();
  const Isa isa = kernelIsa(w, widestIsa(target), target);
  const KernelTypes types = workloadTypes(w);
  const std::string key = std::string(isaInfo(isa).name) + (isInt8Gemm(types)   ? "/int8"
                                                            : isBf16Gemm(types) ? "/bf16"
                                                                                : "/f32");
  auto [it, fresh] = measured_.try_emplace(key, 0.0);
  if (fresh)
    if (auto peak = measureReductionPeak(*jit_, isa, types)) it->second = peak->gflops;
  return it->second;
}

} // namespace tunec
