// The conv2d loop nest in LLVM IR: an optional parallel loop (hoisted), the batch loop, the
// output-channel panel and output-row block loops in the configured order, then per output
// row the tiles of owBlock pixels; each tile is one brgemm call reducing over (kh, kw, input
// channel block). Padding is applied once per call by copying the input into a zero-padded
// buffer, so every window read is in bounds; kernel rows that fall wholly into the top or
// bottom padding for a tile are left out of its reduction.
#include "codegen/conv2d_kernel.h"

#include "codegen/kernel_emitters.h"
#include "codegen/microkernel_emitter.h"
#include "runtime/packing.h"

#include <map>

namespace tunec {

namespace {

using codegen::ModuleBuilder;

class Conv2dEmitter : codegen::EmitterBase {
public:
  // With `subsampledFrom`, w is subsampledWorkload(*subsampledFrom): the entry copies its input's
  // pixels that the strided 1x1 reads, rounded to bf16 (subsamplesInput).
  Conv2dEmitter(ModuleBuilder& mb, const Conv2dWorkload& w, const Conv2dConfig& c,
                const Epilogue& e, const Conv2dWorkload* subsampledFrom)
      : EmitterBase(mb), w_(w), c_(c), epilogue_(e), from_(subsampledFrom) {
    hp_ = w.h + w.padTop + w.padBottom;
    wp_ = w.w + w.padLeft + w.padRight;
    // A padded input is copied dense first (NCHW reordered, an int8 group's channels rounded up
    // to quads: icKernelPerGroup); an unpadded one is read in place, in_ld apart. A bf16
    // convolution of an f32 input reads a dense bf16 copy, padded or not; of a bf16 input (a
    // bf16 kernel's output), a padded copy or the input in place, as u8 inputs.
    aType_ = isBf16Gemm(w.types) ? DType::BF16 : w.types.src;
    icg_ = w.icKernelPerGroup();
    copies_ = w.copiesInput() || convertsA(w.types);
    inLd_ = copies_ ? w.groups * icg_ : w.inPixelStride();
    outLd_ = w.outPixelStride();
    panelsPerGroup_ = (w.ocPerGroup() + c.ocBlock - 1) / c.ocBlock;
    panels_ = w.groups * panelsPerGroup_;
    icBlocks_ = icg_ / c.icBlock;
    // With one group, one input-channel block and dilation_w = 1, the kw taps of a kernel row
    // read adjacent pixels, so (kw, ic) is one contiguous run of kw*ic floats in the NHWC input
    // and in the packed weights: a kernel row becomes one batch entry of k = kw*ic (conv1's 7x7
    // over 3 channels: 7 entries of k = 21 instead of 49 of k = 3).
    mergeKw_ = w.groups == 1 && icBlocks_ == 1 && w.dilationW == 1 && inLd_ == icg_;
    kwEntries_ = mergeKw_ ? 1 : w.kw;
    entryK_ = mergeKw_ ? w.kw * icg_ : c.icBlock;
    batch_ = w.kh * kwEntries_ * icBlocks_;
    ohBlocks_ = (w.oh() + c.ohBlock - 1) / c.ohBlock;
    group_ = kGroup(c.isa, w.types);
  }

  void emit(const std::string& entryName) {
    // With rows_per_tile > 1 a tile is rowsPerTile whole rows (row groups of OW pixels) and the
    // only row tail is at the last row block; otherwise a tile is owBlock pixels of one row.
    int group = c_.rowsPerTile > 1 ? static_cast<int>(w_.ow()) : 0;
    int tileRows = static_cast<int>(c_.owBlock * c_.rowsPerTile);
    int owTail = c_.rowsPerTile > 1 ? static_cast<int>((w_.oh() % c_.rowsPerTile) * w_.ow())
                                    : static_cast<int>(w_.ow() % c_.owBlock);
    int ocTail = static_cast<int>(w_.ocPerGroup() % c_.ocBlock);
    auto make = [&](int rows, int cols, const std::string& suffix) {
      MicrokernelSpec spec{c_.isa, rows, c_.ocBlock, cols, false, true, epilogue_};
      spec.types = w_.types;
      spec.types.src = aType_;
      spec.aRowGroup = group;
      spec.prefetchB = prefetchNextPanel();
      spec.prefetchBGroup = prefetch().group;
      spec.prefetchBLines = prefetch().lines;
      spec.prefetchA = aRowsAliasInL1(rows, w_.strideW * inLd_, group, w_.strideH * wp_ * inLd_,
                                      dtypeSize(aType_));
      spec.scaleK = w_.channelScale;
      return codegen::emitMicrokernel(mb_, spec, "ukr_" + suffix, true,
                                      rows == tileRows && cols == c_.ocBlock);
    };
    kernels_[0] = make(tileRows, c_.ocBlock, "full");
    kernels_[1] = ocTail ? make(tileRows, ocTail, "octail") : kernels_[0];
    kernels_[2] = owTail ? make(owTail, c_.ocBlock, "owtail") : kernels_[0];
    kernels_[3] = owTail ? (ocTail ? make(owTail, ocTail, "bothtail") : kernels_[2]) : kernels_[1];
    emitEntry(entryName, emitTask(entryName + "_task"));
  }

private:
  llvm::Function* emitTask(const std::string& name) {
    std::vector<llvm::Value*> fields;
    llvm::Function* fn = mb_.beginTask(b_, name, 7, fields);
    llvm::Value* t = fn->getArg(1);
    in_ = fields[0];
    weights_ = fields[1];
    out_ = fields[2];
    bias_ = fields[3];
    addend_ = fields[4];
    scale_ = fields[5];
    columnScale_ = fields[6];
    aArr_ = b_.CreateAlloca(mb_.ptr(), i64(batch_));
    bArr_ = b_.CreateAlloca(mb_.ptr(), i64(batch_));
    codegen::emitConv2dTaskLoops(
        mb_, b_, c_, t, w_.n, ohBlocks_, panels_,
        [&](llvm::Value* n, llvm::Value* panel, llvm::Value* ohBlock) {
          llvm::Value* ohLo = b_.CreateMul(ohBlock, i64(c_.ohBlock));
          llvm::Value* ohHi = min(b_.CreateAdd(ohLo, i64(c_.ohBlock)), i64(w_.oh()));
          mb_.forLoop(b_, ohLo, ohHi, c_.rowsPerTile, "oh.row",
                      [&](llvm::Value* oh) { emitRow(n, panel, oh, ohHi); });
        });
    b_.CreateRetVoid();
    return fn;
  }

  void emitRow(llvm::Value* n, llvm::Value* panel, llvm::Value* oh, llvm::Value* ohHi) {
    const int64_t ic = inLd_, icg = icg_, nr = c_.ocBlock;
    const DType wei = w_.types.wei; // bf16 and i8 panels hold k groups: the same element counts
    llvm::Value* panelWeights =
        gep(wei, weights_, b_.CreateMul(panel, i64(w_.kh * w_.kw * icg * nr)));
    // The next panel (this one at the last), prefetched one cache-line column per tile.
    llvm::Value* nextWeights = gep(wei, weights_,
                                   b_.CreateMul(min(b_.CreateAdd(panel, i64(1)), i64(panels_ - 1)),
                                                i64(w_.kh * w_.kw * icg * nr)));
    // Panel p covers output channels [g*OCg + lp*nr, +nr) of group g = p / panelsPerGroup.
    llvm::Value* group = b_.CreateSDiv(panel, i64(panelsPerGroup_));
    llvm::Value* localOc = b_.CreateMul(b_.CreateSRem(panel, i64(panelsPerGroup_)), i64(nr));
    llvm::Value* oc0 = b_.CreateAdd(b_.CreateMul(group, i64(w_.ocPerGroup())), localOc);
    llvm::Value* ocTail = b_.CreateICmpSGT(b_.CreateAdd(localOc, i64(nr)), i64(w_.ocPerGroup()));
    llvm::Value* icBase = b_.CreateMul(group, i64(icg));
    // B pointers depend only on the panel; A row bases on (n, oh): fill both once per row.
    llvm::Value* rowBase = b_.CreateMul(
        b_.CreateAdd(b_.CreateMul(n, i64(hp_)), b_.CreateMul(oh, i64(w_.strideH))), i64(wp_));
    for (int64_t kh = 0; kh < w_.kh; ++kh)
      for (int64_t kw = 0; kw < kwEntries_; ++kw)
        for (int64_t cb = 0; cb < icBlocks_; ++cb) {
          int64_t idx = (kh * kwEntries_ + kw) * icBlocks_ + cb;
          llvm::Value* pixel =
              b_.CreateAdd(rowBase, i64(kh * w_.dilationH * wp_ + kw * w_.dilationW));
          llvm::Value* a = gep(aType_, in_,
                               b_.CreateAdd(b_.CreateMul(pixel, i64(ic)),
                                            b_.CreateAdd(icBase, i64(cb * c_.icBlock))));
          b_.CreateStore(a, b_.CreateGEP(mb_.ptr(), rowArr(), i64(idx)));
          b_.CreateStore(
              gep(wei, panelWeights, i64(((kh * w_.kw + kw) * icg + cb * c_.icBlock) * nr)),
              b_.CreateGEP(mb_.ptr(), bArr_, i64(idx)));
        }
    llvm::Value* outRow =
        b_.CreateMul(b_.CreateAdd(b_.CreateMul(n, i64(w_.oh())), oh), i64(w_.ow()));
    int64_t owStep = c_.rowsPerTile > 1 ? w_.ow() : c_.owBlock;
    mb_.forLoop(b_, i64(0), i64(w_.ow()), owStep, "ow", [&](llvm::Value* ow0) {
      llvm::Value* shift = b_.CreateMul(ow0, i64(w_.strideW * ic));
      mb_.forLoop(b_, i64(0), i64(batch_), 1, "fill", [&](llvm::Value* idx) {
        llvm::Value* base = b_.CreateLoad(mb_.ptr(), b_.CreateGEP(mb_.ptr(), rowArr(), idx));
        b_.CreateStore(gep(aType_, base, shift), b_.CreateGEP(mb_.ptr(), aArr_, idx));
      });
      llvm::Value* pixel0 = b_.CreateAdd(outRow, ow0);
      llvm::Value* cOff = b_.CreateAdd(b_.CreateMul(pixel0, i64(outLd_)), oc0);
      // The addend is a dense tensor of the output's shape.
      llvm::Value* addOff = b_.CreateAdd(b_.CreateMul(pixel0, i64(w_.oc)), oc0);
      llvm::Value* owTail =
          c_.rowsPerTile > 1 ? b_.CreateICmpSGT(b_.CreateAdd(oh, i64(c_.rowsPerTile)), ohHi)
                             : b_.CreateICmpSGT(b_.CreateAdd(ow0, i64(c_.owBlock)), i64(w_.ow()));
      llvm::Value* which = mb_.tileVariant(b_, owTail, ocTail);
      auto [firstTap, taps] = validTapRows(oh, ohHi);
      // Tile t of the panel prefetches its line columns of the next panel (PanelPrefetch).
      // A line is 16 floats, 16 bf16 pairs (32 values) of one pair row, or 16 i8 quads.
      int64_t lineElems = 16 * group_, rowElems = group_ * nr;
      llvm::Value* tile = b_.CreateAdd(b_.CreateMul(b_.CreateSDiv(oh, i64(c_.rowsPerTile)),
                                                    i64((w_.ow() + owStep - 1) / owStep)),
                                       b_.CreateSDiv(ow0, i64(owStep)));
      llvm::Value* pfOffset =
          codegen::emitPanelPrefetchOffset(b_, prefetch(), tile, lineElems, rowElems);
      codegen::MicrokernelArgs args;
      args.a = b_.CreateGEP(mb_.ptr(), aArr_, firstTap);
      args.b = b_.CreateGEP(mb_.ptr(), bArr_, firstTap);
      args.c = gep(w_.types.dst, out_, cOff);
      args.k = i64(entryK_), args.lda = i64(w_.strideW * ic), args.ldb = i64(nr);
      args.ldc = i64(outLd_), args.batch = taps, args.flags = b_.getInt32(kUkrApplyEpilogue);
      args.bias = gep(bias_, oc0);
      args.addend = gep(epilogueAddendType(epilogue_, w_.types.dst), addend_, addOff);
      args.ldAdd = i64(w_.oc), args.ldaGroup = i64(w_.strideH * wp_ * ic);
      args.prefetchB =
          gep(wei, nextWeights, b_.CreateAdd(b_.CreateMul(firstTap, i64(entryK_ * nr)), pfOffset));
      // Image n's input-channel scales; entry bi (channel block bi of a 1x1) reads from bi * k
      // on (MicrokernelSpec::scaleK).
      args.kScale = gep(scale_, b_.CreateMul(n, i64(w_.ic)));
      args.columnScale = gep(columnScale_, oc0);
      mb_.emitVariantCall(b_, which, kernels_, args.list(mb_));
    });
  }

  // The batch entries (first, count) of the kernel rows kh that read real input for some
  // output row of the tile starting at row oh; the others read only top or bottom padding and
  // are skipped (at 14x14 a 3x3 pad-1 conv saves 5% of its FLOPs, at 7x7 10%). Entries are
  // kh-major, so the rows kept are one contiguous range. A tile with no such row (a pad larger
  // than the kernel) keeps every entry: the input buffer is padded, the result stays exact.
  std::pair<llvm::Value*, llvm::Value*> validTapRows(llvm::Value* oh, llvm::Value* ohHi) {
    int64_t perRow = kwEntries_ * icBlocks_;
    // An int8 input padded with a nonzero zero point: its padded taps add zero point times the
    // weights, which the correction (the same for every pixel) takes out, so all of them run.
    if ((w_.padTop == 0 && w_.padBottom == 0) || w_.aZeroPoint) return {i64(0), i64(batch_)};
    llvm::Value* last = b_.CreateSub(min(b_.CreateAdd(oh, i64(c_.rowsPerTile)), ohHi), i64(1));
    // Row r reads input row r*sH - padTop + kh*dH: it is in [0, h) for kh in [lo(r), hi(r)).
    // Both bounds fall as r grows, so the tile's union is [lo(last row), hi(first row)).
    llvm::Value* lowNum = b_.CreateSub(i64(w_.padTop), b_.CreateMul(last, i64(w_.strideH)));
    llvm::Value* lo = b_.CreateSDiv(b_.CreateAdd(lowNum, i64(w_.dilationH - 1)), i64(w_.dilationH));
    lo = b_.CreateSelect(b_.CreateICmpSGT(lowNum, i64(0)), lo, i64(0));
    llvm::Value* highNum =
        b_.CreateSub(i64(w_.h - 1 + w_.padTop), b_.CreateMul(oh, i64(w_.strideH)));
    llvm::Value* hi = b_.CreateAdd(b_.CreateSDiv(highNum, i64(w_.dilationH)), i64(1));
    hi = b_.CreateSelect(b_.CreateICmpSLT(highNum, i64(0)), i64(0), min(hi, i64(w_.kh)));
    llvm::Value* any = b_.CreateICmpSLT(lo, hi);
    llvm::Value* first = b_.CreateSelect(any, b_.CreateMul(lo, i64(perRow)), i64(0));
    llvm::Value* count =
        b_.CreateSelect(any, b_.CreateMul(b_.CreateSub(hi, lo), i64(perRow)), i64(batch_));
    return {first, count};
  }

  // The next weight panel is prefetched while this one is in use only when both fit in 3/4
  // of L2 with room for the input rows; otherwise the prefetch would evict the panel that the
  // next tiles still read (measured: 512->512 3x3 at 14x14, 590 KB panels, 5-15% slower).
  bool prefetchNextPanel() const {
    int64_t panelBytes =
        w_.kh * w_.kw * icg_ * c_.ocBlock * static_cast<int64_t>(w_.types.weiBytes());
    return 2 * panelBytes * 4 <= mb_.target().l2 * 3;
  }

  // How the tiles of one visit of the panel (an oh block) share the prefetch of the next
  // (PanelPrefetch).
  PanelPrefetch prefetch() const {
    int64_t owStep = c_.rowsPerTile > 1 ? w_.ow() : c_.owBlock;
    return panelPrefetchFor((c_.ohBlock + c_.rowsPerTile - 1) / c_.rowsPerTile *
                                ((w_.ow() + owStep - 1) / owStep),
                            c_.ocBlock);
  }

  llvm::Value* rowArr() {
    if (!rowArr_) {
      llvm::IRBuilder<>::InsertPointGuard guard(b_);
      llvm::Function* fn = b_.GetInsertBlock()->getParent();
      b_.SetInsertPoint(&fn->getEntryBlock(), fn->getEntryBlock().begin());
      rowArr_ = b_.CreateAlloca(mb_.ptr(), i64(batch_));
    }
    return rowArr_;
  }

  void emitEntry(const std::string& name, llvm::Function* task) {
    auto args = mb_.beginKernelEntry(b_, name);
    llvm::Value* in = args[rt::kArgSrc];
    if (from_)
      in = codegen::emitSubsampledInput(mb_, b_, in, *from_, 0);
    else if (copies_ && isBf16Gemm(w_.types))
      in = mb_.emitBf16Nhwc(b_, in, w_.types.src, w_.inPixelStride(), w_.n, w_.h, w_.w, w_.ic,
                            w_.padTop, w_.padLeft, hp_, wp_);
    else if (copies_)
      in = mb_.emitPaddedNhwc(b_, in, w_.n, w_.h, w_.w, w_.ic, w_.padTop, w_.padLeft, hp_, wp_,
                              w_.types.src, 0, w_.nchwInput, w_.aZeroPoint, inLd_);
    int64_t tasks = c_.parallel == Conv2dParallel::N    ? w_.n
                    : c_.parallel == Conv2dParallel::Oh ? ohBlocks_
                    : c_.parallel == Conv2dParallel::Oc ? panels_
                                                        : 1;
    mb_.emitRunTasks(b_, task,
                     {in, args[rt::kArgWei], args[rt::kArgDst], args[rt::kArgBias],
                      args[rt::kArgResidual], args[rt::kArgChannelScale], args[rt::kArgScales]},
                     tasks, w_.threads);
    b_.CreateRetVoid();
  }

  const Conv2dWorkload& w_;
  const Conv2dConfig& c_;
  const Epilogue& epilogue_;
  const Conv2dWorkload* from_ = nullptr; ///< the strided 1x1 whose input pixels the entry copies
  int64_t hp_, wp_, icg_, inLd_, outLd_, panelsPerGroup_, panels_, icBlocks_, batch_, ohBlocks_;
  int64_t group_ = 1; ///< input channels per k group of the packed weights (kGroup)
  bool mergeKw_ = false;
  bool copies_ = false;      ///< the entry copies the input dense (padded, reordered, or to bf16)
  DType aType_ = DType::F32; ///< what the microkernels read as A
  int64_t kwEntries_ = 1, entryK_ = 1; ///< batch entries per kernel row, k of each entry
  llvm::Function* kernels_[4] = {};
  llvm::Value *in_ = nullptr, *weights_ = nullptr, *out_ = nullptr, *bias_ = nullptr,
              *addend_ = nullptr, *scale_ = nullptr, *columnScale_ = nullptr;
  llvm::Value *aArr_ = nullptr, *bArr_ = nullptr, *rowArr_ = nullptr;
};

} // namespace

namespace codegen {

llvm::Value* emitSubsampledInput(ModuleBuilder& mb, llvm::IRBuilder<>& b, llvm::Value* in,
                                 const Conv2dWorkload& from, int64_t extra) {
  return mb.emitSubsampledNhwc(b, in, from.types.src, from.inPixelStride(), from.n, from.h, from.w,
                               from.ic, from.strideH, from.strideW, extra);
}

void emitConv2dTaskLoops(
    ModuleBuilder& mb, llvm::IRBuilder<>& b, const Conv2dConfig& c, llvm::Value* task,
    int64_t images, int64_t ohTrips, int64_t panels,
    const std::function<void(llvm::Value*, llvm::Value*, llvm::Value*)>& body) {
  std::map<std::string, std::pair<llvm::Value*, llvm::Value*>> ranges = {
      {"n", {b.getInt64(0), b.getInt64(images)}},
      {"oh", {b.getInt64(0), b.getInt64(ohTrips)}},
      {"oc", {b.getInt64(0), b.getInt64(panels)}}};
  if (c.parallel != Conv2dParallel::None)
    ranges[std::string(spell(c.parallel))] = {task, b.CreateAdd(task, b.getInt64(1))};
  const bool ocOuter = c.loopOrder == Conv2dLoopOrder::OcOh;
  const std::string outer = ocOuter ? "oc" : "oh", inner = ocOuter ? "oh" : "oc";
  mb.forLoop(b, ranges["n"].first, ranges["n"].second, 1, "n", [&](llvm::Value* n) {
    mb.forLoop(b, ranges[outer].first, ranges[outer].second, 1, outer, [&](llvm::Value* o) {
      mb.forLoop(b, ranges[inner].first, ranges[inner].second, 1, inner,
                 [&](llvm::Value* i) { body(n, ocOuter ? o : i, ocOuter ? i : o); });
    });
  });
}

Expected<PackedWeights> emitConv2dKernel(ModuleBuilder& mb, const std::string& symbol,
                                         const Conv2dWorkload& w, const Conv2dConfig& c,
                                         const Epilogue& e, const float* weights) {
  TUNEC_TRY(validateConv2dConfig(w, c));
  TUNEC_TRY(checkTargetSupports(mb.target(), c.isa, w.types));
  if (c.isa == Isa::Avx2 && isInt8Gemm(w.types)) // vpmaddubsw's s16 pair sums must not saturate
    TUNEC_TRY(checkAvx2Int8Weights(weights, w.oc * w.icPerGroup() * w.kh * w.kw, "conv2d"));
  TUNEC_TRY(checkEpilogueStores(e, w.types.dst));
  // A strided 1x1 whose input is copied anyway copies only the pixels it reads, and runs as the
  // 1x1 of stride 1 over them (the same output, tiles and weights).
  const bool subsampled = subsamplesInput(w, c.isa);
  const Conv2dWorkload kernel = subsampled ? subsampledWorkload(w) : w;
  if (c.isa == Isa::Amx)
    emitAmxConv2dLoopNest(mb, symbol, kernel, c, e, subsampled ? &w : nullptr);
  else
    Conv2dEmitter(mb, kernel, c, e, subsampled ? &w : nullptr).emit(symbol);
  return packConv2dWeights(w, c, weights);
}

} // namespace codegen

Expected<Conv2dKernel> compileConv2d(Jit& jit, const Conv2dWorkload& workload,
                                     const Conv2dConfig& config, const Epilogue& epilogue,
                                     const float* weights) {
  auto module = jit.newModule(config.isa, "tunec_conv2d");
  std::string name = module->module().getModuleIdentifier();
  TUNEC_ASSIGN_OR_RETURN(
      codegen::PackedWeights packed,
      codegen::emitConv2dKernel(*module, name, workload, config, epilogue, weights));
  Conv2dKernel kernel;
  kernel.workload_ = workload;
  kernel.config_ = config;
  kernel.packedWeights_ = std::move(packed);
  TUNEC_ASSIGN_OR_RETURN(void* address, jit.addAndLookup(std::move(module), name));
  kernel.fn_ = reinterpret_cast<rt::KernelFn>(address);
  return kernel;
}

} // namespace tunec
