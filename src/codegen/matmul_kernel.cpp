// The matmul loop nest in LLVM IR. Structure (BLIS): an optional parallel loop over blocks of
// one dimension (hoisted outermost), the batch loop, the three block loops in the configured
// order, then per block: pack A (optional), loop over nr panels, loop over mr panels, call the
// microkernel. Tiles at the M and N edges call tail variants whose sizes are static. With a
// run-time M (an extent of the run, read from KernelArgs::extents), every row count a tile can
// have is a variant, the M loops and the parallel split run to the run's M, and nothing reads or
// writes a row past it.
#include "codegen/matmul_kernel.h"

#include "codegen/kernel_emitters.h"
#include "codegen/microkernel_emitter.h"
#include "runtime/packing.h"

#include <cstdlib>
#include <map>
#include <optional>

namespace tunec {

namespace {

using codegen::ModuleBuilder;

struct Dims {
  int64_t m, n, k;
};

class MatmulEmitter : codegen::EmitterBase {
public:
  MatmulEmitter(ModuleBuilder& mb, const MatmulWorkload& w, const MatmulConfig& c,
                const Epilogue& e, RunTimeRows rows)
      : EmitterBase(mb), w_(w), c_(c), epilogue_(e), rows_(rows) {
    // A row normalization ends the epilogue: the tiles apply the rest, then a pass over the
    // complete rows of C (in cache) normalizes them.
    if (!epilogue_.empty() && epilogue_.back().kind == PostOpKind::LayerNormRow) {
      normEpsilon_ = epilogue_.back().lo;
      epilogue_.pop_back();
    }
  }

  void emit(const std::string& entryName) {
    emitKernels();
    llvm::Function* task = emitTask(entryName + "_task");
    llvm::Function* norm = normEpsilon_ ? emitNormTask(entryName + "_norm") : nullptr;
    emitEntry(entryName, task, norm);
  }

  // Rows of C per normalization task: about 16 KiB of them.
  int64_t normRows() const { return std::max<int64_t>(1, 4096 / w_.n); }

  // Normalizes C's rows [t * normRows, ...) in place (tunec_layer_norm_rows_f32).
  llvm::Function* emitNormTask(const std::string& name) {
    std::vector<llvm::Value*> fields;
    llvm::Function* fn = mb_.beginTask(b_, name, 3, fields);
    loadM(fields[2]);
    llvm::Value* first = b_.CreateMul(fn->getArg(1), i64(normRows()));
    llvm::Value* count = min(i64(normRows()), b_.CreateSub(b_.CreateMul(i64(w_.batch), m_), first));
    llvm::FunctionCallee normRows =
        mb_.declare("tunec_layer_norm_rows_f32",
                    llvm::FunctionType::get(
                        b_.getVoidTy(),
                        {mb_.ptr(), mb_.i64(), mb_.i64(), mb_.i64(), mb_.ptr(), mb_.f32()}, false));
    b_.CreateCall(normRows, {gep(fields[0], b_.CreateMul(first, i64(w_.cLd()))), count, i64(w_.n),
                             i64(w_.cLd()), fields[1],
                             llvm::ConstantFP::get(mb_.f32(), static_cast<double>(*normEpsilon_))});
    b_.CreateRetVoid();
    return fn;
  }

private:
  // Microkernel variants: full tile, and the static M/N tails.
  void emitKernels() {
    // An f32 A of a bf16 GEMM is converted into bf16 rows per block: the microkernel reads those.
    const bool converted = convertsA(w_.types) || amx();
    bool aTransposed = !converted && (c_.packA || w_.transA);
    int mTail = static_cast<int>(w_.m % c_.mr), nTail = static_cast<int>(w_.n % c_.nr);
    auto make = [&](int rows, int cols, const std::string& suffix) {
      MicrokernelSpec spec{c_.isa, rows, c_.nr, cols, aTransposed, true, epilogue_};
      spec.types = w_.types;
      if (converted && !isInt8Gemm(w_.types)) spec.types.src = DType::BF16;
      spec.prefetchB = !amx() && prefetchNextPanel();
      spec.prefetchBGroup = amx() ? 1 : prefetch().group;
      spec.prefetchBLines = amx() ? 1 : prefetch().lines;
      spec.tilesConfigured = amx(); // emitTask loads the palette
      if (amx()) spec.amxStreamed = amxStreamed();
      spec.prefetchA =
          !aTransposed && !converted && aRowsAliasInL1(rows, w_.aLd(), 0, 0, w_.types.srcBytes());
      return codegen::emitMicrokernel(mb_, spec, "ukr_" + suffix, true,
                                      rows == c_.mr && cols == c_.nr);
    };
    kernels_[0] = make(c_.mr, c_.nr, "full");
    kernels_[1] = nTail ? make(c_.mr, nTail, "ntail") : kernels_[0];
    kernels_[2] = mTail ? make(mTail, c_.nr, "mtail") : kernels_[0];
    kernels_[3] = mTail ? (nTail ? make(mTail, nTail, "mntail") : kernels_[2]) : kernels_[1];
    // A run-time M: a tile has any row count up to mr; variant 2 * (rows - 1) + (N tail).
    if (runTimeM())
      for (int rows = 1; rows <= c_.mr; ++rows) {
        std::string r = std::to_string(rows);
        llvm::Function* full = rows == c_.mr ? kernels_[0] : make(rows, c_.nr, "rows" + r);
        rowKernels_.push_back(full);
        rowKernels_.push_back(
            nTail ? (rows == c_.mr ? kernels_[1] : make(rows, nTail, "rows" + r + "_ntail"))
                  : full);
      }
  }

  bool runTimeM() const { return rows_.active(); }
  // The M of this function's run: the run's extent, or the static M.
  void loadM(llvm::Value* extents) {
    m_ = runTimeM()
             ? b_.CreateLoad(mb_.i64(), b_.CreateGEP(mb_.i64(), extents, i64(rows_.extent)), "m")
             : i64(w_.m);
  }

  // AMX reads A as whole tiles packed per block (tunec_pack_a_bf16_tiles or, for the int8
  // GEMM, tunec_pack_a_u8_tiles).
  bool amx() const { return c_.isa == Isa::Amx; }
  int64_t kGroup() const { return tunec::kGroup(c_.isa, w_.types); }
  // The element type of the packed or converted A: u8 for the int8 GEMM, else bf16.
  DType aPackType() const { return isInt8Gemm(w_.types) ? DType::U8 : DType::BF16; }

  // The panel loop is outside the tile loop of a block: the B panel is reused from L1 by the
  // block's row tiles and A streams, unless the block has one row tile and A's tile is what the
  // panels reuse. (Measured on the Xeon, 1024^3: streaming either operand is within 5-10% of
  // streaming neither; this rule was the best of the three in both loop orders.)
  char amxStreamed() const { return std::min(c_.mc, w_.m) <= c_.mr ? 'b' : 'a'; }

  // Prefetching the next B panel pays when B comes cold from memory (constant weights in a
  // model) and when the A block, this panel and the next fit in L2 together; otherwise the
  // prefetch evicts what the next tiles read.
  bool prefetchNextPanel() const {
    if (!w_.constantB) return false;
    int64_t kc = std::min(c_.kc, w_.k), mc = std::min(c_.mc, w_.m);
    auto aBytes = static_cast<int64_t>(w_.types.srcBytes()),
         bBytes = static_cast<int64_t>(w_.types.weiBytes());
    return mc * kc * aBytes + 2 * kc * c_.nr * bBytes <= mb_.target().l2;
  }

  // How the mr tiles of an M block share the prefetch of the next panel (PanelPrefetch). At a
  // run-time M, from its smallest: every line is prefetched by the tiles of the smallest M (a
  // larger one prefetches some twice), where a plan for the bound left a quarter of the next
  // panel cold at the bucket's low end (M = 33 of 33..48: 24% slower, BERT-base on Zen 4).
  // Only whole tiles share it: a tail tile of a few rows runs its k loop in a fraction of a
  // whole one's time, and the lines it was given arrived late (M = 7 as tiles of 6 and 1:
  // BERT-base at 7 tokens 30.8 ms where the 1..16 bucket's kernel, its tiles each prefetching
  // the whole panel, ran 16.9).
  PanelPrefetch prefetch() const {
    const int64_t m = runTimeM() ? std::min(rows_.min, w_.m) : w_.m;
    return panelPrefetchFor(std::max<int64_t>(1, std::min(c_.mc, m) / c_.mr), c_.nr);
  }

  llvm::Function* emitTask(const std::string& name) {
    std::vector<llvm::Value*> fields;
    llvm::Function* fn = mb_.beginTask(b_, name, 7, fields);
    llvm::Value* t = fn->getArg(1);
    loadM(fields[6]);
    a_ = fields[0];
    bArg_ = fields[1];
    cArg_ = fields[2];
    bias_ = fields[3];
    addend_ = fields[4];
    scales_ = fields[5];
    aArr_ = b_.CreateAlloca(mb_.ptr(), i64(1));
    bArr_ = b_.CreateAlloca(mb_.ptr(), i64(1));
    auto aBytes = static_cast<int64_t>(w_.types.srcBytes()),
         bBytes = static_cast<int64_t>(w_.types.weiBytes());
    if (c_.packA) aPack_ = mb_.emitScratch(b_, 0, c_.mc * c_.kc * aBytes);
    if (convertsA(w_.types) || amx()) { // rows of whole k groups (AMX: and whole tiles)
      int64_t rows = amx() ? (c_.mc + 15) / 16 * 16 : c_.mc;
      aPack_ = mb_.emitScratch(b_, 0,
                               rows * ((c_.kc + kGroup() - 1) / kGroup() * kGroup()) *
                                   static_cast<int64_t>(dtypeSize(aPackType())));
    }
    // One palette for every AMX variant, loaded once per task on its thread.
    if (amx()) codegen::makeTileOps(mb_)->configure(b_, codegen::amxPalette());
    if (!w_.constantB)
      bPack_ = mb_.emitScratch(b_, 1, codegen::matmulPackedBElements(w_, c_) * bBytes);
    // Ranges of the batch and block loops; the parallel one covers block t only.
    llvm::Value* bLo = i64(0);
    llvm::Value* bHi = i64(w_.batch);
    ranges_['m'] = {i64(0), m_};
    ranges_['n'] = {i64(0), i64(w_.n)};
    ranges_['k'] = {i64(0), i64(w_.k)};
    if (c_.parallel == MatmulParallel::Batch) {
      bLo = t;
      bHi = b_.CreateAdd(t, i64(1));
    } else if (c_.parallel == MatmulParallel::M || c_.parallel == MatmulParallel::N) {
      char d = c_.parallel == MatmulParallel::M ? 'm' : 'n';
      int64_t block = d == 'm' ? c_.mc : c_.nc;
      llvm::Value* lo = b_.CreateMul(t, i64(block));
      ranges_[d] = {lo, min(b_.CreateAdd(lo, i64(block)), d == 'm' ? m_ : i64(w_.n))};
    }
    const KernelTypes& types = w_.types;
    mb_.forLoop(b_, bLo, bHi, 1, "batch", [&](llvm::Value* batch) {
      aBatch_ = gep(types.src, a_, b_.CreateMul(batch, i64(w_.aStride())));
      cBatch_ = gep(types.dst, cArg_, b_.CreateMul(batch, i64(w_.cStride())));
      addBatch_ = gep(epilogueAddendType(epilogue_, types.dst), addend_,
                      b_.CreateMul(batch, i64(w_.m * w_.n)));
      llvm::Value* bRaw =
          w_.broadcastB ? bArg_ : gep(types.wei, bArg_, b_.CreateMul(batch, i64(w_.bStride())));
      if (w_.constantB) {
        bPanels_ = w_.broadcastB
                       ? bArg_
                       : gep(types.wei, bArg_,
                             b_.CreateMul(batch, i64(codegen::matmulPackedBElements(w_, c_))));
      } else { // packed per call
        codegen::emitPackComputedB(mb_, b_, w_, c_, false, bRaw, bPack_);
        bPanels_ = bPack_;
      }
      emitBlockLoops(0);
    });
    b_.CreateRetVoid();
    return fn;
  }

  void emitBlockLoops(size_t level) {
    if (level == 3) {
      emitBlock();
      return;
    }
    char d = c_.loopDim(static_cast<int>(level));
    int64_t step = d == 'm' ? c_.mc : d == 'n' ? c_.nc : c_.kc;
    mb_.forLoop(b_, ranges_[d].first, ranges_[d].second, step, std::string(1, d) + "blk",
                [&](llvm::Value* iv) {
                  blockStart_[d] = iv;
                  emitBlockLoops(level + 1);
                });
  }

  // One (mc x nc x kc) block: pack A, then the nr and mr panel loops around the microkernel.
  void emitBlock() {
    llvm::Value* ic = blockStart_['m'];
    llvm::Value* jc = blockStart_['n'];
    llvm::Value* pc = blockStart_['k'];
    llvm::Value* mcur = min(i64(c_.mc), b_.CreateSub(m_, ic));
    llvm::Value* ncur = min(i64(c_.nc), b_.CreateSub(i64(w_.n), jc));
    llvm::Value* kcur = min(i64(c_.kc), b_.CreateSub(i64(w_.k), pc));
    llvm::Value* accumulate =
        b_.CreateSelect(b_.CreateICmpSGT(pc, i64(0)), b_.getInt32(kUkrAccumulate), b_.getInt32(0));
    llvm::Value* last = b_.CreateSelect(b_.CreateICmpSGE(b_.CreateAdd(pc, kcur), i64(w_.k)),
                                        b_.getInt32(kUkrApplyEpilogue), b_.getInt32(0));
    llvm::Value* flags = b_.CreateOr(accumulate, last);
    // A element (i, k) of the block.
    int64_t lda = w_.aLd();
    const KernelTypes& t = w_.types;
    llvm::Value* aBlock = w_.transA
                              ? gep(t.src, aBatch_, b_.CreateAdd(b_.CreateMul(pc, i64(lda)), ic))
                              : gep(t.src, aBatch_, b_.CreateAdd(b_.CreateMul(ic, i64(lda)), pc));
    // Rows of the converted block: kcur rounded up to whole k groups (zeros after the last k).
    llvm::Value* kcPairs = b_.CreateAnd(b_.CreateAdd(kcur, i64(kGroup() - 1)), i64(-kGroup()));
    if (amx() && isInt8Gemm(t)) {
      llvm::FunctionCallee pack = mb_.declare(
          "tunec_pack_a_u8_tiles",
          llvm::FunctionType::get(
              b_.getVoidTy(), {mb_.ptr(), mb_.i64(), mb_.i64(), mb_.i64(), mb_.i64(), mb_.ptr()},
              false));
      b_.CreateCall(pack, {aBlock, i64(lda), mcur, kcur, kcPairs, aPack_});
    } else if (amx()) {
      llvm::FunctionCallee pack = codegen::declarePackABf16Tiles(mb_);
      b_.CreateCall(pack, {aBlock, b_.getInt32(w_.types.src == DType::BF16), i64(lda),
                           b_.getInt32(w_.transA), mcur, kcur, kcPairs, aPack_});
    } else if (convertsA(w_.types)) {
      llvm::FunctionCallee pack = mb_.declare(
          "tunec_pack_a_f32_to_bf16",
          llvm::FunctionType::get(
              b_.getVoidTy(), {mb_.ptr(), mb_.i64(), mb_.i32(), mb_.i64(), mb_.i64(), mb_.ptr()},
              false));
      b_.CreateCall(pack, {aBlock, i64(lda), b_.getInt32(w_.transA), mcur, kcur, aPack_});
    }
    if (c_.packA) {
      llvm::FunctionCallee pack = mb_.declare(
          "tunec_pack_a_f32", llvm::FunctionType::get(b_.getVoidTy(),
                                                      {mb_.ptr(), mb_.i64(), mb_.i32(), mb_.i64(),
                                                       mb_.i64(), mb_.i64(), mb_.ptr()},
                                                      false));
      b_.CreateCall(pack,
                    {aBlock, i64(lda), b_.getInt32(w_.transA), mcur, kcur, i64(c_.mr), aPack_});
    }
    mb_.forLoop(b_, i64(0), ncur, c_.nr, "jr", [&](llvm::Value* jr) {
      llvm::Value* col = b_.CreateAdd(jc, jr);
      llvm::Value* panel = b_.CreateSDiv(col, i64(c_.nr));
      const int64_t panelElements = codegen::matmulPanelElements(w_, c_);
      llvm::Value* bPtr =
          gep(t.wei, bPanels_,
              b_.CreateAdd(b_.CreateMul(panel, i64(panelElements)), b_.CreateMul(pc, i64(c_.nr))));
      b_.CreateStore(bPtr, bArr_);
      // The next panel (this one at the last): each mr tile prefetches one of its cache-line
      // columns, so the first ceil(nr/16) tiles of this panel bring all of it into L2.
      int64_t panels = (w_.n + c_.nr - 1) / c_.nr;
      llvm::Value* nextPanel = min(b_.CreateAdd(panel, i64(1)), i64(panels - 1));
      llvm::Value* nextB = gep(
          t.wei, bPanels_,
          b_.CreateAdd(b_.CreateMul(nextPanel, i64(panelElements)), b_.CreateMul(pc, i64(c_.nr))));
      llvm::Value* nTail = b_.CreateICmpSLT(b_.CreateSub(ncur, jr), i64(c_.nr));
      mb_.forLoop(b_, i64(0), mcur, c_.mr, "ir", [&](llvm::Value* ir) {
        llvm::Value* row = b_.CreateAdd(ic, ir);
        llvm::Value* aPtr;
        llvm::Value* ldaV;
        if (convertsA(t) || amx()) {
          aPtr = gep(aPackType(), aPack_, b_.CreateMul(ir, kcPairs));
          ldaV = kcPairs;
        } else if (c_.packA) {
          aPtr = gep(aPack_, b_.CreateMul(ir, kcur));
          ldaV = i64(c_.mr);
        } else {
          aPtr =
              w_.transA ? gep(t.src, aBlock, ir) : gep(t.src, aBlock, b_.CreateMul(ir, i64(lda)));
          ldaV = i64(lda);
        }
        b_.CreateStore(aPtr, aArr_);
        llvm::Value* cPtr =
            gep(t.dst, cBatch_, b_.CreateAdd(b_.CreateMul(row, i64(w_.cLd())), col));
        if (w_.splitN) { // part col / splitN of C, its own dense m x splitN matrix
          llvm::Value* part = b_.CreateSDiv(col, i64(w_.splitN));
          llvm::Value* local = b_.CreateSub(col, b_.CreateMul(part, i64(w_.splitN)));
          cPtr = gep(t.dst, cBatch_,
                     b_.CreateAdd(b_.CreateMul(part, i64(w_.m * w_.splitN)),
                                  b_.CreateAdd(b_.CreateMul(row, i64(w_.splitN)), local)));
        }
        llvm::Value* addPtr = gep(epilogueAddendType(epilogue_, t.dst), addBatch_,
                                  b_.CreateAdd(b_.CreateMul(row, i64(w_.n)), col));
        llvm::Value* biasPtr = gep(bias_, col);
        llvm::Value* mTail = b_.CreateICmpSLT(b_.CreateSub(mcur, ir), i64(c_.mr));
        llvm::Value* which = mb_.tileVariant(b_, mTail, nTail);
        if (runTimeM()) { // 2 * (rows - 1) + (N tail)
          llvm::Value* rows = min(i64(c_.mr), b_.CreateSub(mcur, ir));
          which =
              b_.CreateOr(b_.CreateShl(b_.CreateTrunc(b_.CreateSub(rows, i64(1)), mb_.i32()), 1),
                          b_.CreateZExt(nTail, mb_.i32()));
        }
        // Tile t prefetches its line columns of the next panel (PanelPrefetch).
        // A line is 16 floats, 16 bf16 pairs (32 values) of one pair row, or 16 i8 quads.
        int64_t lineElems = 64 / static_cast<int64_t>(t.weiBytes()),
                rowElems = lineElems / 16 * c_.nr;
        llvm::Value* pf =
            gep(t.wei, nextB,
                codegen::emitPanelPrefetchOffset(b_, prefetch(), b_.CreateSDiv(ir, i64(c_.mr)),
                                                 lineElems, rowElems));
        codegen::MicrokernelArgs args;
        args.a = aArr_, args.b = bArr_, args.c = cPtr;
        args.k = amx() ? kcPairs : kcur; // AMX: whole tile rows
        args.lda = ldaV, args.ldb = i64(c_.nr), args.ldc = i64(w_.cLd()), args.batch = i64(1);
        args.flags = flags, args.bias = biasPtr, args.addend = addPtr, args.ldAdd = i64(w_.n);
        args.prefetchB = pf, args.columnScale = gep(scales_, col);
        if (runTimeM())
          emitRowsCall(which, args.list(mb_));
        else
          mb_.emitVariantCall(b_, which, kernels_, args.list(mb_));
      });
    });
  }

  void emitEntry(const std::string& name, llvm::Function* task, llvm::Function* norm) {
    auto args = mb_.beginKernelEntry(b_, name);
    loadM(args[rt::kArgExtents]);
    std::vector<llvm::Value*> fields = {
        args[rt::kArgSrc],      args[rt::kArgWei],    args[rt::kArgDst],    args[rt::kArgBias],
        args[rt::kArgResidual], args[rt::kArgScales], args[rt::kArgExtents]};
    int64_t tasks = 1;
    if (c_.parallel == MatmulParallel::Batch) tasks = w_.batch;
    if (c_.parallel == MatmulParallel::M) tasks = (w_.m + c_.mc - 1) / c_.mc;
    if (c_.parallel == MatmulParallel::N) tasks = (w_.n + c_.nc - 1) / c_.nc;
    if (runTimeM() && c_.parallel == MatmulParallel::M) // the run's blocks, not the bound's
      mb_.emitRunTasksDynamic(b_, task, fields,
                              b_.CreateSDiv(b_.CreateAdd(m_, i64(c_.mc - 1)), i64(c_.mc)),
                              w_.threads);
    else
      mb_.emitRunTasks(b_, task, fields, tasks, w_.threads);
    if (norm) {
      llvm::Value* rows = b_.CreateMul(i64(w_.batch), m_);
      std::vector<llvm::Value*> normFields = {args[rt::kArgDst], args[rt::kArgNormParams],
                                              args[rt::kArgExtents]};
      if (runTimeM())
        mb_.emitRunTasksDynamic(
            b_, norm, normFields,
            b_.CreateSDiv(b_.CreateAdd(rows, i64(normRows() - 1)), i64(normRows())), w_.threads);
      else
        mb_.emitRunTasks(b_, norm, normFields, (w_.batch * w_.m + normRows() - 1) / normRows(),
                         w_.threads);
    }
    b_.CreateRetVoid();
  }

  // Calls rowKernels_[which] (a run-time M's tile of any row count).
  void emitRowsCall(llvm::Value* which, llvm::ArrayRef<llvm::Value*> args) {
    llvm::Function* fn = b_.GetInsertBlock()->getParent();
    auto* done = llvm::BasicBlock::Create(b_.getContext(), "rows.done", fn);
    auto* first = llvm::BasicBlock::Create(b_.getContext(), "rows.0", fn);
    llvm::SwitchInst* sw = b_.CreateSwitch(which, first, static_cast<unsigned>(rowKernels_.size()));
    b_.SetInsertPoint(first);
    b_.CreateCall(rowKernels_[0], args);
    b_.CreateBr(done);
    for (size_t v = 1; v < rowKernels_.size(); ++v) {
      auto* block = llvm::BasicBlock::Create(b_.getContext(), "rows." + std::to_string(v), fn);
      sw->addCase(b_.getInt32(static_cast<uint32_t>(v)), block);
      b_.SetInsertPoint(block);
      b_.CreateCall(rowKernels_[v], args);
      b_.CreateBr(done);
    }
    b_.SetInsertPoint(done);
  }

  const MatmulWorkload& w_;
  const MatmulConfig& c_;
  Epilogue epilogue_;
  RunTimeRows rows_;
  llvm::Value* m_ = nullptr; ///< the M of the function being emitted (loadM)
  std::vector<llvm::Function*> rowKernels_;
  std::optional<float> normEpsilon_;
  llvm::Function* kernels_[4] = {};
  std::map<char, std::pair<llvm::Value*, llvm::Value*>> ranges_;
  std::map<char, llvm::Value*> blockStart_;
  llvm::Value *a_ = nullptr, *bArg_ = nullptr, *cArg_ = nullptr, *bias_ = nullptr,
              *addend_ = nullptr, *scales_ = nullptr;
  llvm::Value *aArr_ = nullptr, *bArr_ = nullptr, *aPack_ = nullptr, *bPack_ = nullptr;
  llvm::Value *aBatch_ = nullptr, *cBatch_ = nullptr, *addBatch_ = nullptr, *bPanels_ = nullptr;
};

} // namespace

namespace codegen {

Expected<PackedWeights> emitMatmulKernel(ModuleBuilder& mb, const std::string& symbol,
                                         const MatmulWorkload& w, const MatmulConfig& c,
                                         const Epilogue& e, const float* constantB,
                                         RunTimeRows rows) {
  TUNEC_TRY(validateMatmulConfig(w, c));
  // A run-time M is the folded rows of one dense A and C: no batch, no split of C.
  TUNEC_ASSERT(!rows.active() || (w.batch == 1 && !w.splitN),
               "matmul: a run-time M needs one batch and an unsplit C");
  for (size_t i = 0; i < e.size(); ++i)
    if (e[i].kind == PostOpKind::LayerNormRow &&
        (i + 1 != e.size() || w.splitN || (w.batch > 1 && w.cStride() != w.m * w.cLd())))
      return makeError("matmul: a row normalization must end the epilogue of a matmul whose C "
                       "rows are one run (no split, no strided batches)");
  TUNEC_TRY(checkTargetSupports(mb.target(), c.isa, w.types));
  TUNEC_TRY(checkEpilogueStores(e, w.types.dst));
  if (w.types.dst != DType::F32 && !e.empty() && e.back().kind == PostOpKind::LayerNormRow)
    return makeError("matmul: a row normalization needs an f32 C");
  if (w.constantB && !constantB) return makeError("internal: constant B data is required");
  if (c.isa == Isa::Avx2 && isInt8Gemm(w.types)) // vpmaddubsw's s16 pair sums must not saturate
    TUNEC_TRY(checkAvx2Int8Weights(constantB, (w.broadcastB ? 1 : w.batch) * w.k * w.n, "matmul"));
  PackedWeights packed;
  if (w.constantB) packed = packMatmulB(w, c, constantB);
  MatmulEmitter(mb, w, c, e, rows).emit(symbol);
  return packed;
}

} // namespace codegen

Expected<MatmulKernel> compileMatmul(Jit& jit, const MatmulWorkload& workload,
                                     const MatmulConfig& config, const Epilogue& epilogue,
                                     const float* constantB) {
  auto module = jit.newModule(config.isa, "tunec_matmul");
  std::string name = module->module().getModuleIdentifier(); // unique within the JIT
  TUNEC_ASSIGN_OR_RETURN(
      codegen::PackedWeights packed,
      codegen::emitMatmulKernel(*module, name, workload, config, epilogue, constantB));
  MatmulKernel kernel;
  kernel.workload_ = workload;
  kernel.config_ = config;
  kernel.packedB_ = std::move(packed);
  TUNEC_ASSIGN_OR_RETURN(void* address, jit.addAndLookup(std::move(module), name));
  kernel.fn_ = reinterpret_cast<rt::KernelFn>(address);
  return kernel;
}

} // namespace tunec
