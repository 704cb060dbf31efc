// Microkernel generator: the frame of a register-tiled batch-reduce GEMM in plain LLVM IR.
// Accumulators (of the k-step strategy's type, kstep.h) are phi values carried across the batch
// and k loops; the strategy computes each k step. The C tile is added at the end (accumulators
// start at zero), then the epilogue, then the store.
#include "codegen/microkernel.h"

#include "codegen/kstep.h"
#include "codegen/microkernel_emitter.h"
#include "codegen/post_op_emitter.h"
#include "codegen/tile_ops.h"
#include "codegen/weight_packing.h"

#include <algorithm>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/IntrinsicsX86.h>
#include <vector>

namespace tunec {

int microkernelRegisters(const MicrokernelSpec& spec) {
  return tileRegisters(spec.isa, spec.mr, spec.nr);
}

Status checkMicrokernelSpec(const MicrokernelSpec& spec) {
  const IsaInfo& info = isaInfo(spec.isa);
  int lanes = info.f32Lanes();
  if (spec.mr < 1) return makeError("microkernel mr=", spec.mr, " must be at least 1");
  TUNEC_TRY(checkEpilogueStores(spec.epilogue, spec.types.dst));
  if (!codegen::hasKStepStrategy(spec))
    return makeError("microkernel: no k-step strategy for element types ",
                     kernelTypesToJson(spec.types).dump(), " on ", info.name);
  if (spec.isa == Isa::Amx) {
    if (spec.mr > 48 || spec.nr % 16 || spec.nr > 64 || amxTileCount(spec.mr, spec.nr) > 8)
      return makeError("AMX tile grid ", spec.mr, "x", spec.nr, " needs ",
                       amxTileCount(spec.mr, spec.nr),
                       " tiles (C, A and B); AMX has 8 (e.g. 32x32: 4 C + 2 A + 2 B)");
    if (spec.aTransposed || spec.aRowGroup || spec.scaleK || spec.prefetchA || spec.prefetchB ||
        spec.kUnroll != 1)
      return makeError("AMX microkernel: A is read as tiles (no transposed or grouped A, "
                       "no k scale, prefetch or unroll)");
    if (spec.aRowsInPlace && spec.mr % 16)
      return makeError("AMX microkernel: A rows read in place come in whole tiles of 16, not mr=",
                       spec.mr);
    if (spec.nValid < 1 || spec.nValid > spec.nr)
      return makeError("microkernel nValid=", spec.nValid, " must be in 1..nr=", spec.nr);
    return {};
  }
  if (spec.aRowsInPlace || spec.cRowMap)
    return makeError("microkernel: A rows in place and C row maps are the AMX core's");
  if (spec.nr < lanes || spec.nr % lanes != 0)
    return makeError("microkernel nr=", spec.nr, " must be a positive multiple of ", lanes, " for ",
                     info.name);
  if (spec.types.src == DType::BF16 && (spec.aTransposed || spec.scaleK))
    return makeError("microkernel: bf16 reads A's k-pairs from its rows (no transposed A) and "
                     "scales no input channels");
  if (spec.prefetchA && spec.aTransposed)
    return makeError("microkernel A prefetch needs a non-transposed A");
  if (spec.aRowGroup < 0 || (spec.aRowGroup > 0 && spec.aTransposed))
    return makeError("microkernel row groups need a non-transposed A and a positive size");
  if (spec.prefetchBGroup != 1 && spec.prefetchBGroup != 2 && spec.prefetchBGroup != 4)
    return makeError("microkernel B prefetch group ", spec.prefetchBGroup, " is not 1, 2 or 4");
  if (spec.prefetchBLines < 1 || spec.prefetchBLines > 8)
    return makeError("microkernel B prefetch lines ", spec.prefetchBLines, " is not in 1..8");
  if (spec.prefetchBLines > 1 && spec.prefetchBGroup > 1)
    return makeError("microkernel B prefetch: several lines a step and a row group exclude "
                     "each other (fewer tiles than line columns, or more)");
  if (spec.kUnroll < 1 || spec.kUnroll > 8)
    return makeError("microkernel k-unroll ", spec.kUnroll, " must be in 1..8");
  if (spec.nValid < 1 || spec.nValid > spec.nr)
    return makeError("microkernel nValid=", spec.nValid, " must be in 1..nr=", spec.nr);
  int regs = microkernelRegisters(spec);
  if (regs > info.vectorRegisters)
    return makeError("microkernel ", spec.mr, "x", spec.nr, " needs ", regs, " vector registers (",
                     spec.mr * (spec.nr / lanes), " accumulators, ", spec.nr / lanes,
                     " B vectors, 1 broadcast) but ", info.name, " has ", info.vectorRegisters);
  return {};
}

PanelPrefetch panelPrefetchFor(int64_t tiles, int nr) {
  PanelPrefetch p;
  p.columns = (nr + 15) / 16;
  tiles = std::max<int64_t>(tiles, 1);
  p.group = tiles >= 4 * p.columns ? 4 : tiles >= 2 * p.columns ? 2 : 1;
  if (tiles < p.columns) p.lines = static_cast<int>((p.columns + tiles - 1) / tiles);
  return p;
}

bool aRowsAliasInL1(int rows, int64_t lda, int group, int64_t ldaGroup, size_t elemBytes) {
  // Sets of a 4 KiB-period L1 (64 sets of 64-byte lines, as on Zen and Intel cores alike).
  constexpr int64_t kSets = 64;
  std::vector<int> perSet(kSets, 0);
  int worst = 0;
  for (int i = 0; i < rows; ++i) {
    int64_t offset = group > 0 ? (i / group) * ldaGroup + (i % group) * lda : i * lda;
    int64_t set = (offset * static_cast<int64_t>(elemBytes) / 64) % kSets;
    worst = std::max(worst, ++perSet[static_cast<size_t>(set)]);
  }
  return worst > 8;
}

std::string microkernelName(const MicrokernelSpec& spec) {
  std::string types(dtypeName(spec.types.src));
  if (spec.types.wei != spec.types.src) types += dtypeName(spec.types.wei);
  std::string name =
      "tunec_" + types + "_brgemm_" + std::to_string(spec.mr) + "x" + std::to_string(spec.nr);
  if (spec.nValid != spec.nr) name += "_n" + std::to_string(spec.nValid);
  if (spec.aTransposed) name += "_at";
  if (spec.kUnroll > 1) name += "_u" + std::to_string(spec.kUnroll);
  if (spec.aRowGroup > 0) name += "_g" + std::to_string(spec.aRowGroup);
  if (spec.prefetchB)
    name += "_pfb" + (spec.prefetchBGroup > 1 ? std::to_string(spec.prefetchBGroup) : "") +
            (spec.prefetchBLines > 1 ? "l" + std::to_string(spec.prefetchBLines) : "");
  if (spec.prefetchA) name += "_pfa";
  if (spec.scaleK) name += "_sk";
  name += "_" + std::string(isaInfo(spec.isa).name);
  std::string epi = epilogueName(spec.epilogue);
  for (char& c : epi)
    if (c == '+') c = '_';
  if (!epi.empty()) name += "_" + epi;
  return name;
}

namespace codegen {

void emitTileEpilogue(ModuleBuilder& mb, llvm::IRBuilder<>& b, const MicrokernelSpec& spec,
                      const std::function<llvm::Value*(int, int)>& acc,
                      const MicrokernelArgs& params) {
  llvm::Type* f32 = mb.f32();
  llvm::FixedVectorType* vecTy = mb.f32Vector();
  const int lanes = static_cast<int>(vecTy->getNumElements());
  const int mr = spec.mr;
  llvm::Value* zero = llvm::ConstantAggregateZero::get(vecTy);
  llvm::Value *c = params.c, *ldc = params.ldc, *flags = params.flags, *bias = params.bias,
              *addend = params.addend, *ldAdd = params.ldAdd, *columnScale = params.columnScale;
  const bool bf16C = spec.types.dst == DType::BF16;
  // A u8 C is the requantizing epilogue's (QuantizeU8 last, one K block: checkMicrokernelSpec):
  // written once, never read back.
  const bool u8C = spec.types.dst == DType::U8;
  llvm::Type* cElem = mb.storageType(spec.types.dst);
  int validVectors = (spec.nValid + lanes - 1) / lanes;
  int tailLanes = spec.nValid - (validVectors - 1) * lanes;
  llvm::Value* tailMask = codegen::laneMask(b, lanes, tailLanes);
  auto loadVec = [&](llvm::Value* base, llvm::Value* offset, int j) -> llvm::Value* {
    llvm::Value* p = b.CreateGEP(f32, base, offset);
    if (j == validVectors - 1 && tailMask && spec.nValid < spec.nr)
      return b.CreateMaskedLoad(vecTy, p, llvm::Align(4), tailMask, zero);
    return b.CreateAlignedLoad(vecTy, p, llvm::Align(4));
  };
  // A vector of C or of the addend as f32 (bf16 widened: its bits are a float's upper half).
  auto* halfTy = llvm::FixedVectorType::get(cElem, static_cast<unsigned>(lanes));
  auto loadC = [&](llvm::Value* base, llvm::Value* offset, int j) -> llvm::Value* {
    if (!bf16C) return loadVec(base, offset, j);
    llvm::Value* p = b.CreateGEP(cElem, base, offset);
    llvm::Value* h = nullptr;
    if (j == validVectors - 1 && tailMask && spec.nValid < spec.nr)
      h = b.CreateMaskedLoad(halfTy, p, llvm::Align(2), tailMask,
                             llvm::Constant::getNullValue(halfTy));
    else
      h = b.CreateAlignedLoad(halfTy, p, llvm::Align(2));
    return bf16ToF32(b, h, vecTy);
  };
  // A vector of a u8 addend as stored, for AddDequantizedU8 to widen.
  auto* byteTy = llvm::FixedVectorType::get(b.getInt8Ty(), static_cast<unsigned>(lanes));
  auto loadBytes = [&](llvm::Value* base, llvm::Value* offset, int j) -> llvm::Value* {
    llvm::Value* p = b.CreateGEP(b.getInt8Ty(), base, offset);
    if (j == validVectors - 1 && tailMask && spec.nValid < spec.nr)
      return b.CreateMaskedLoad(byteTy, p, llvm::Align(1), tailMask,
                                llvm::Constant::getNullValue(byteTy));
    return b.CreateAlignedLoad(byteTy, p, llvm::Align(1));
  };
  llvm::Value* accumulate =
      b.CreateICmpNE(b.CreateAnd(flags, b.getInt32(kUkrAccumulate)), b.getInt32(0));
  llvm::Value* applyEpilogue =
      b.CreateICmpNE(b.CreateAnd(flags, b.getInt32(kUkrApplyEpilogue)), b.getInt32(0));
  std::vector<llvm::Value*> biasVec(static_cast<size_t>(validVectors)),
      scaleVec(static_cast<size_t>(validVectors));
  if (epilogueNeedsBias(spec.epilogue))
    for (int j = 0; j < validVectors; ++j)
      biasVec[static_cast<size_t>(j)] = loadVec(bias, b.getInt64(j * lanes), j);
  if (epilogueNeedsColumnScale(spec.epilogue))
    for (int j = 0; j < validVectors; ++j)
      scaleVec[static_cast<size_t>(j)] = loadVec(columnScale, b.getInt64(j * lanes), j);
  llvm::Function* fn = b.GetInsertBlock()->getParent();
  for (int i = 0; i < mr; ++i) {
    // Row i's pixel: i itself, or (a row map) cRows[i], the row skipped when negative.
    llvm::Value* row = b.getInt64(i);
    llvm::BasicBlock* next = nullptr;
    if (spec.cRowMap) {
      row = b.CreateLoad(mb.i64(), b.CreateGEP(mb.i64(), params.cRows, b.getInt64(i)), "crow");
      auto* body = llvm::BasicBlock::Create(mb.context(), "crow.store", fn);
      next = llvm::BasicBlock::Create(mb.context(), "crow.next", fn);
      b.CreateCondBr(b.CreateICmpSGE(row, b.getInt64(0)), body, next);
      b.SetInsertPoint(body);
    }
    for (int j = 0; j < validVectors; ++j) {
      llvm::Value* v = acc(i, j);
      llvm::Value* cOffset = b.CreateAdd(b.CreateMul(row, ldc), b.getInt64(j * lanes));
      // The C tile is always valid memory, so it is loaded unconditionally and selected.
      if (!u8C) v = b.CreateSelect(accumulate, b.CreateFAdd(v, loadC(c, cOffset, j)), v);
      auto operands = [&](const PostOp& op) {
        llvm::Value* other = nullptr;
        if (readsAddend(op.kind)) {
          llvm::Value* offset = b.CreateAdd(b.CreateMul(row, ldAdd), b.getInt64(j * lanes));
          other = op.kind == PostOpKind::AddTensor ? loadC(addend, offset, j)
                                                   : loadBytes(addend, offset, j);
        }
        return std::pair{readsColumnScale(op.kind) ? scaleVec[static_cast<size_t>(j)]
                                                   : biasVec[static_cast<size_t>(j)],
                         other};
      };
      llvm::Value* post = emitEpilogue(b, spec.epilogue, v, operands);
      llvm::Value* p = b.CreateGEP(cElem, c, cOffset);
      llvm::Align align(spec.types.dstBytes());
      if (u8C) // QuantizeU8's u8 values as i32 lanes; a u8 C is written once, epilogue applied
        v = b.CreateTrunc(post, llvm::FixedVectorType::get(cElem, static_cast<unsigned>(lanes)));
      else if (!spec.epilogue.empty())
        v = b.CreateSelect(applyEpilogue, post, v);
      if (bf16C) v = emitRoundToBf16(mb, b, v);
      if (j == validVectors - 1 && tailMask && spec.nValid < spec.nr)
        b.CreateMaskedStore(v, p, align, tailMask);
      else
        b.CreateAlignedStore(v, p, align);
    }
    if (next) {
      b.CreateBr(next);
      b.SetInsertPoint(next);
    }
  }
}

// MicrokernelFn spells TUNEC_MICROKERNEL_ARGS in C: the two lists have the same length.
template <typename> struct Arity;
template <typename R, typename... A> struct Arity<R (*)(A...)> {
  static constexpr int value = sizeof...(A);
};
#define TUNEC_MICROKERNEL_COUNT(name, type) +1
static_assert(Arity<MicrokernelFn>::value == 0 TUNEC_MICROKERNEL_ARGS(TUNEC_MICROKERNEL_COUNT),
              "MicrokernelFn and TUNEC_MICROKERNEL_ARGS list different arguments");
#undef TUNEC_MICROKERNEL_COUNT

MicrokernelArgs MicrokernelArgs::of(llvm::Function* fn) {
  MicrokernelArgs args;
  unsigned i = 0;
#define TUNEC_MICROKERNEL_PARAM(name, type) args.name = fn->getArg(i++);
  TUNEC_MICROKERNEL_ARGS(TUNEC_MICROKERNEL_PARAM)
#undef TUNEC_MICROKERNEL_PARAM
  return args;
}

std::vector<llvm::Value*> MicrokernelArgs::list(ModuleBuilder& mb) const {
  std::vector<llvm::Value*> values;
  auto unset = [&](llvm::Type* type) -> llvm::Value* {
    return type->isPointerTy() ? static_cast<llvm::Value*>(llvm::ConstantPointerNull::get(mb.ptr()))
                               : llvm::ConstantInt::get(type, 0);
  };
#define TUNEC_MICROKERNEL_VALUE(name, type) values.push_back(name ? name : unset(mb.type()));
  TUNEC_MICROKERNEL_ARGS(TUNEC_MICROKERNEL_VALUE)
#undef TUNEC_MICROKERNEL_VALUE
  return values;
}

llvm::Function* createMicrokernelFunction(ModuleBuilder& mb, const std::string& name, bool internal,
                                          bool inlined) {
  std::vector<llvm::Type*> params;
#define TUNEC_MICROKERNEL_TYPE(name, type) params.push_back(mb.type());
  TUNEC_MICROKERNEL_ARGS(TUNEC_MICROKERNEL_TYPE)
#undef TUNEC_MICROKERNEL_TYPE
  auto* fnTy = llvm::FunctionType::get(llvm::Type::getVoidTy(mb.context()), params, false);
  llvm::Function* fn = mb.createFunction(name, fnTy, internal);
  if (internal) fn->addFnAttr(inlined ? llvm::Attribute::AlwaysInline : llvm::Attribute::NoInline);
  fn->addParamAttr(2, llvm::Attribute::NoAlias); // C
  return fn;
}

llvm::Value* emitPanelPrefetchOffset(llvm::IRBuilder<>& b, const PanelPrefetch& p,
                                     llvm::Value* tile, int64_t lineElems, int64_t rowElems) {
  llvm::Value* slots = b.getInt64(p.slots());
  llvm::Value* first = b.CreateMul(b.CreateSRem(tile, slots), b.getInt64(p.lines));
  llvm::Value* last = b.getInt64(p.columns - p.lines);
  first = b.CreateSelect(b.CreateICmpSLT(first, last), first, last);
  llvm::Value* phase = b.CreateSRem(b.CreateSDiv(tile, slots), b.getInt64(p.group));
  return b.CreateAdd(b.CreateMul(first, b.getInt64(lineElems)),
                     b.CreateMul(phase, b.getInt64(rowElems)));
}

llvm::Function* emitMicrokernel(ModuleBuilder& mb, const MicrokernelSpec& spec,
                                const std::string& name, bool internal, bool inlined) {
  if (spec.isa == Isa::Amx) return emitAmxMicrokernel(mb, spec, name, internal, inlined);
  llvm::LLVMContext& ctx = mb.context();
  llvm::Type* f32 = mb.f32();
  llvm::Type* i64 = mb.i64();
  llvm::Type* ptr = mb.ptr();
  llvm::FixedVectorType* vecTy = mb.f32Vector();
  const int lanes = static_cast<int>(vecTy->getNumElements());
  const int nv = spec.nr / lanes;
  const int mr = spec.mr;

  llvm::Function* fn = createMicrokernelFunction(mb, name, internal, inlined);
  const MicrokernelArgs params = MicrokernelArgs::of(fn);
  llvm::Value *aPtrs = params.a, *bPtrs = params.b, *c = params.c, *k = params.k, *lda = params.lda,
              *ldb = params.ldb, *batch = params.batch, *ldaGroup = params.ldaGroup,
              *prefetchB = params.prefetchB, *kScale = params.kScale;

  // The k steps are the strategy's; the loops around them are this frame's.
  std::unique_ptr<KStepStrategy> strategy = kStepStrategyFor(mb, spec);
  llvm::Type* accTy = strategy->accumulatorType();
  const int kStep = strategy->kPerStep();

  auto* entry = llvm::BasicBlock::Create(ctx, "entry", fn);
  auto* batchHead = llvm::BasicBlock::Create(ctx, "batch", fn);
  auto* kLoop = llvm::BasicBlock::Create(ctx, "k", fn);
  auto* batchLatch = llvm::BasicBlock::Create(ctx, "batch.latch", fn);
  auto* epilogue = llvm::BasicBlock::Create(ctx, "epilogue", fn);
  llvm::IRBuilder<> b(entry);

  llvm::Value* zero64 = b.getInt64(0);
  llvm::Value* one64 = b.getInt64(1);

  llvm::Function* prefetch =
      llvm::Intrinsic::getDeclaration(&mb.module(), llvm::Intrinsic::prefetch, {ptr});
  // C (and the addend) hold the destination type: f32, or bf16 rounded to nearest even.
  const bool bf16C = spec.types.dst == DType::BF16;
  llvm::Type* cElem = bf16C ? llvm::Type::getInt16Ty(ctx) : f32;
  const int lineElems = 64 / static_cast<int>(spec.types.dstBytes());
  // Prefetch the C tile for writing; it is read and written only after the k loop.
  if (spec.prefetchC) {
    for (int i = 0; i < mr; ++i)
      for (int j = 0; j < spec.nValid; j += lineElems) {
        llvm::Value* p = b.CreateGEP(
            cElem, c, b.CreateAdd(b.CreateMul(b.getInt64(i), params.ldc), b.getInt64(j)));
        b.CreateCall(prefetch, {p, b.getInt32(1), b.getInt32(3), b.getInt32(1)});
      }
  }
  b.CreateBr(batchHead);

  // batch loop header: accumulators and batch index as phis.
  b.SetInsertPoint(batchHead);
  llvm::PHINode* bi = b.CreatePHI(i64, 2, "b");
  bi->addIncoming(zero64, entry);
  std::vector<llvm::PHINode*> accBatch(static_cast<size_t>(mr * nv));
  llvm::Value* accZero = llvm::Constant::getNullValue(accTy);
  for (auto& phi : accBatch) {
    phi = b.CreatePHI(accZero->getType(), 2, "accb");
    phi->addIncoming(accZero, entry);
  }
  llvm::Value* aBase = b.CreateLoad(ptr, b.CreateGEP(ptr, aPtrs, bi), "a");
  llvm::Value* bBase = b.CreateLoad(ptr, b.CreateGEP(ptr, bPtrs, bi), "bp");
  llvm::Value* pfBase =
      spec.prefetchB ? b.CreateGEP(f32, prefetchB, b.CreateMul(b.CreateMul(bi, k), ldb)) : nullptr;

  llvm::Value* kScaleBase = spec.scaleK ? b.CreateGEP(f32, kScale, b.CreateMul(bi, k)) : nullptr;
  KStepOperands operands{aBase, bBase, lda, ldb, ldaGroup, pfBase, kScaleBase};
  auto step = [&](llvm::Value* kk, const std::vector<llvm::Value*>& in) {
    return strategy->step(b, operands, kk, in);
  };
  // A k loop from `start` (phis) while kk < limit, `unroll` steps per trip; returns the block
  // it exits from, the final k and accumulators.
  auto kLoopFrom = [&](llvm::BasicBlock* pred, llvm::Value* start,
                       const std::vector<llvm::Value*>& accIn, llvm::Value* limit, int unroll,
                       llvm::BasicBlock* body, llvm::BasicBlock* exit,
                       std::vector<llvm::Value*>& accOut) {
    b.SetInsertPoint(body);
    llvm::PHINode* kk = b.CreatePHI(i64, 2, "kk");
    kk->addIncoming(start, pred);
    std::vector<llvm::PHINode*> phis(accIn.size());
    std::vector<llvm::Value*> cur(accIn.size());
    for (size_t i = 0; i < accIn.size(); ++i) {
      phis[i] = b.CreatePHI(accTy, 2, "acc");
      phis[i]->addIncoming(accIn[i], pred);
      cur[i] = phis[i];
    }
    for (int u = 0; u < unroll; ++u)
      cur = step(u ? b.CreateAdd(kk, b.getInt64(u * kStep)) : kk, cur);
    llvm::Value* kNext = b.CreateAdd(kk, b.getInt64(unroll * kStep));
    kk->addIncoming(kNext, body);
    for (size_t i = 0; i < phis.size(); ++i) phis[i]->addIncoming(cur[i], body);
    b.CreateCondBr(b.CreateICmpSLT(kNext, limit), body, exit);
    accOut = cur;
    return kNext;
  };
  std::vector<llvm::Value*> batchAcc(accBatch.begin(), accBatch.end());
  std::vector<llvm::Value*> next;
  std::vector<std::pair<llvm::BasicBlock*, std::vector<llvm::Value*>>> latchIncoming;
  if (spec.kUnroll <= 1) {
    b.CreateBr(kLoop);
    kLoopFrom(batchHead, zero64, batchAcc, k, 1, kLoop, batchLatch, next);
    latchIncoming.push_back({kLoop, next});
  } else {
    // Unrolled trips while a whole group of kUnroll steps remains, then single steps.
    auto* remCheck = llvm::BasicBlock::Create(ctx, "k.rem.check", fn);
    auto* remLoop = llvm::BasicBlock::Create(ctx, "k.rem", fn);
    llvm::Value* kMain = b.CreateSub(k, b.CreateSRem(k, b.getInt64(spec.kUnroll * kStep)));
    b.CreateCondBr(b.CreateICmpSGT(kMain, zero64), kLoop, remCheck);
    std::vector<llvm::Value*> mainAcc;
    llvm::Value* kAfter =
        kLoopFrom(batchHead, zero64, batchAcc, kMain, spec.kUnroll, kLoop, remCheck, mainAcc);
    b.SetInsertPoint(remCheck);
    llvm::PHINode* kRem = b.CreatePHI(i64, 2, "kr");
    kRem->addIncoming(zero64, batchHead);
    kRem->addIncoming(kAfter, kLoop);
    std::vector<llvm::Value*> remAcc(batchAcc.size());
    for (size_t i = 0; i < remAcc.size(); ++i) {
      llvm::PHINode* phi = b.CreatePHI(accTy, 2, "accr");
      phi->addIncoming(batchAcc[i], batchHead);
      phi->addIncoming(mainAcc[i], kLoop);
      remAcc[i] = phi;
    }
    b.CreateCondBr(b.CreateICmpSLT(kRem, k), remLoop, batchLatch);
    latchIncoming.push_back({remCheck, remAcc});
    kLoopFrom(remCheck, kRem, remAcc, k, 1, remLoop, batchLatch, next);
    latchIncoming.push_back({remLoop, next});
  }

  b.SetInsertPoint(batchLatch);
  std::vector<llvm::Value*> latchAcc(batchAcc.size());
  if (latchIncoming.size() == 1) {
    latchAcc = latchIncoming[0].second;
  } else {
    for (size_t i = 0; i < latchAcc.size(); ++i) {
      llvm::PHINode* phi = b.CreatePHI(accTy, 2, "accl");
      for (const auto& [block, values] : latchIncoming) phi->addIncoming(values[i], block);
      latchAcc[i] = phi;
    }
  }
  next = latchAcc;
  llvm::Value* bNext = b.CreateAdd(bi, one64);
  bi->addIncoming(bNext, batchLatch);
  for (size_t i = 0; i < accBatch.size(); ++i) accBatch[i]->addIncoming(next[i], batchLatch);
  b.CreateCondBr(b.CreateICmpSLT(bNext, batch), batchHead, epilogue);

  // Epilogue: + C (when accumulating), post-ops (last K block), store; the last vector of a row
  // is masked when the tile has fewer valid columns.
  b.SetInsertPoint(epilogue);
  next = strategy->toF32(b, next); // the accumulators as f32 vectors
  emitTileEpilogue(
      mb, b, spec, [&](int i, int j) { return next[static_cast<size_t>(i * nv + j)]; }, params);
  b.CreateRetVoid();
  return fn;
}

llvm::Value* aRowOffset(llvm::IRBuilder<>& b, const MicrokernelSpec& spec, const KStepOperands& in,
                        llvm::Value* row) {
  if (spec.aRowGroup <= 0) return b.CreateMul(row, in.lda);
  llvm::Value* g = b.getInt64(spec.aRowGroup);
  return b.CreateAdd(b.CreateMul(b.CreateUDiv(row, g), in.ldaGroup),
                     b.CreateMul(b.CreateURem(row, g), in.lda));
}

std::unique_ptr<KStepStrategy> kStepStrategyFor(ModuleBuilder& mb, const MicrokernelSpec& spec) {
  TUNEC_ASSERT(hasKStepStrategy(spec), "no k-step strategy for the spec's element types");
  if (spec.types.src == DType::BF16) return makeBf16DotStep(mb, spec);
  if (isInt8Gemm(spec.types))
    return spec.isa == Isa::Avx2 ? makeU8S8MaddStep(mb, spec) : makeU8S8DotStep(mb, spec);
  return makeBroadcastFmaStep(mb, spec);
}

bool hasKStepStrategy(const MicrokernelSpec& spec) {
  if (isF32Gemm(spec.types)) return true; // the broadcast FMA, on every ISA
  // vdpbf16ps on AVX-512: bf16 A and B, f32 accumulators, an f32 or bf16 C (an f32 A is
  // converted by the loop nest before the microkernel reads it).
  // AMX: tdpbf16ps on the same operands, and tdpbusd on u8 A and i8 B into i32; vpdpbusd on
  // AVX-512 (VNNI) and vpmaddubsw + vpmaddwd on AVX2 on the same quads.
  if (isInt8Gemm(spec.types)) return true;
  return (spec.isa == Isa::Avx512 || spec.isa == Isa::Amx) && isBf16Gemm(spec.types) &&
         spec.types.src == DType::BF16;
}

void emitPackComputedB(ModuleBuilder& mb, llvm::IRBuilder<>& b, const MatmulWorkload& w,
                       const MatmulConfig& c, bool fromF32, llvm::Value* raw, llvm::Value* packed) {
  const bool bf16 = w.types.wei == DType::BF16;
  std::string name = !bf16     ? "tunec_pack_b_f32"
                     : fromF32 ? "tunec_pack_b_f32_to_bf16"
                               : "tunec_pack_b_bf16";
  std::vector<llvm::Type*> params = {mb.ptr(), mb.i64(), mb.i32(), mb.i64(), mb.i64(), mb.i64()};
  std::vector<llvm::Value*> args = {raw,
                                    b.getInt64(w.bLd()),
                                    b.getInt32(w.transB),
                                    b.getInt64(w.k),
                                    b.getInt64(w.n),
                                    b.getInt64(c.nr)};
  if (c.isa == Isa::Amx) { // each panel in its slot of k padded to a tile row
    name += "_slots";
    params.push_back(mb.i64());
    args.push_back(b.getInt64(matmulPanelElements(w, c) / c.nr));
  }
  params.push_back(mb.ptr());
  args.push_back(packed);
  b.CreateCall(mb.declare(name, llvm::FunctionType::get(b.getVoidTy(), params, false)), args);
}

llvm::FunctionCallee declarePackABf16Tiles(ModuleBuilder& mb) {
  llvm::Type* v = llvm::Type::getVoidTy(mb.context());
  return mb.declare("tunec_pack_a_bf16_tiles",
                    llvm::FunctionType::get(v,
                                            {mb.ptr(), mb.i32(), mb.i64(), mb.i32(), mb.i64(),
                                             mb.i64(), mb.i64(), mb.ptr()},
                                            false));
}

} // namespace codegen

Expected<MicrokernelFn> compileMicrokernel(Jit& jit, const MicrokernelSpec& spec) {
  TUNEC_TRY(checkMicrokernelSpec(spec));
  TUNEC_TRY(checkTargetSupports(jit.target(), spec.isa, spec.types));
  auto module = jit.newModule(spec.isa, microkernelName(spec));
  std::string name = module->module().getModuleIdentifier(); // unique within the JIT
  codegen::emitMicrokernel(*module, spec, name, false);
  TUNEC_ASSIGN_OR_RETURN(void* address, jit.addAndLookup(std::move(module), name));
  return reinterpret_cast<MicrokernelFn>(address);
}

} // namespace tunec
