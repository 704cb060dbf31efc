// The conv2d loop nest on AMX tiles (int8 tdpbusd, bf16 tdpbf16ps). A tile row is one output
// pixel, and AMX loads a tile's 16 rows at one stride, so the tiles run over virtual pixels:
// v = oh * wv + x over rows of wv = ceil(padded width / stride_w) columns, where x < ow is an
// output pixel and the rest are padding columns, computed and dropped by the epilogue's row map
// (amxConv2dVirtualWidth: 3% more rows at 56x56, 29% at 7x7). In the input copy each virtual row
// is wv * stride_w pixels and an image's padded rows are stored in stride_h planes (row y in
// plane y % stride_h), so for every kernel tap (kh, kw) the pixels a tile reads are one run at
// stride stride_w: tap t's A is the copy at tapOffset(t) + v * stride_w pixels, read in place by
// the microkernel (MicrokernelSpec::aRowsInPlace), and each batch entry is one tap and input-
// channel block of whole 64-byte tile rows. A 1x1 convolution of stride 1 without padding reads
// its input where it is, and a strided one a copy of the pixels it reads (subsamplesInput). The
// last tile of an image moves back to end at the image's last virtual pixel and skips the rows the
// tile before it wrote, so no tile reads past the input.
#include "codegen/kernel_emitters.h"
#include "codegen/microkernel_emitter.h"

namespace tunec {

namespace {

using codegen::ModuleBuilder;

class AmxConv2dEmitter : codegen::EmitterBase {
public:
  AmxConv2dEmitter(ModuleBuilder& mb, const Conv2dWorkload& w, const Conv2dConfig& c,
                   const Epilogue& e, const Conv2dWorkload* subsampledFrom)
      : EmitterBase(mb), w_(w), c_(c), epilogue_(e), from_(subsampledFrom) {
    aType_ = isBf16Gemm(w.types) ? DType::BF16 : w.types.src;
    icg_ = w.icKernelPerGroup(Isa::Amx); // int8 channels rounded up to tile rows
    mr_ = c.owBlock;
    nr_ = c.ocBlock;
    wv_ = amxConv2dVirtualWidth(w);
    hp_ = w.h + w.padTop + w.padBottom;
    // Read in place: a 1x1 of stride 1 over an unconverted, unpadded input (its virtual pixels
    // are its pixels) with at least one whole tile of them, or over the subsampled copy of a
    // strided 1x1's input (with a tile of slack).
    inPlace_ = from_ || (!w.copiesInput(Isa::Amx) && !convertsA(w.types) && w.kh == 1 &&
                         w.kw == 1 && w.strideH == 1 && w.strideW == 1 && w.h * w.w >= mr_);
    if (inPlace_) wv_ = w.w;
    virtualPixels_ = w.oh() * wv_;
    cs_ = inPlace_ ? w.inPixelStride() : icg_;
    planeRows_ = (hp_ + w.strideH - 1) / w.strideH;
    imagePixels_ = inPlace_ ? w.h * w.w : w.strideH * planeRows_ * wv_ * w.strideW;
    tiles_ = (virtualPixels_ + mr_ - 1) / mr_;
    panels_ = (w.ocPerGroup() + nr_ - 1) / nr_;
    icBlocks_ = icg_ / c.icBlock;
    batch_ = w.kh * w.kw * icBlocks_;
  }

  void emit(const std::string& entryName) {
    const int ocTail = static_cast<int>(w_.ocPerGroup() % nr_);
    auto make = [&](int cols, const std::string& suffix) {
      MicrokernelSpec spec{Isa::Amx, mr_, nr_, cols, false, true, epilogue_};
      spec.types = w_.types;
      spec.types.src = aType_;
      spec.tilesConfigured = true; // emitTask loads the palette
      spec.aRowsInPlace = true;
      spec.cRowMap = true;
      return codegen::emitMicrokernel(mb_, spec, "ukr_" + suffix, true, cols == nr_);
    };
    kernels_[0] = kernels_[2] = make(nr_, "full");
    kernels_[1] = kernels_[3] = ocTail ? make(ocTail, "octail") : kernels_[0];
    emitEntry(entryName, emitTask(entryName + "_task"));
  }

private:
  llvm::Function* emitTask(const std::string& name) {
    std::vector<llvm::Value*> fields;
    llvm::Function* fn = mb_.beginTask(b_, name, 6, fields);
    llvm::Value* t = fn->getArg(1);
    in_ = fields[0], weights_ = fields[1], out_ = fields[2], bias_ = fields[3];
    addend_ = fields[4], columnScale_ = fields[5];
    aArr_ = b_.CreateAlloca(mb_.ptr(), i64(batch_));
    bArr_ = b_.CreateAlloca(mb_.ptr(), i64(batch_));
    rows_ = b_.CreateAlloca(mb_.i64(), i64(mr_));
    // One palette for both variants, loaded once per task on its thread.
    codegen::makeTileOps(mb_)->configure(b_, codegen::amxPalette());
    codegen::emitConv2dTaskLoops(
        mb_, b_, c_, t, w_.n, tiles_, panels_,
        [&](llvm::Value* n, llvm::Value* panel, llvm::Value* tile) { emitTile(n, panel, tile); });
    b_.CreateRetVoid();
    return fn;
  }

  // Tile `tile` of image n for weight panel `panel`.
  void emitTile(llvm::Value* n, llvm::Value* panel, llvm::Value* tile) {
    // The tile's first virtual pixel: the last tile ends at the image's last one.
    llvm::Value* first = b_.CreateMul(tile, i64(mr_));
    llvm::Value* v0 = min(first, i64(std::max<int64_t>(virtualPixels_ - mr_, 0)));
    // Row i's output pixel in the image, or -1: a padding column, past the image, or a row the
    // tile before this one wrote.
    mb_.forLoop(b_, i64(0), i64(mr_), 1, "row", [&](llvm::Value* i) {
      llvm::Value* v = b_.CreateAdd(v0, i);
      llvm::Value* y = b_.CreateUDiv(v, i64(wv_));
      llvm::Value* x = b_.CreateURem(v, i64(wv_));
      llvm::Value* valid = b_.CreateAnd(
          b_.CreateAnd(b_.CreateICmpSGE(v, first), b_.CreateICmpSLT(v, i64(virtualPixels_))),
          b_.CreateICmpSLT(x, i64(w_.ow())));
      llvm::Value* pixel = b_.CreateAdd(b_.CreateMul(y, i64(w_.ow())), x);
      b_.CreateStore(b_.CreateSelect(valid, pixel, i64(-1)), b_.CreateGEP(mb_.i64(), rows_, i));
    });
    // Batch entry (kh, kw, ic block): tap (kh, kw)'s pixels from v0 on, and its weights.
    const DType wei = w_.types.wei; // bf16 and i8 panels hold k groups: the same element counts
    llvm::Value* panelWeights =
        gep(wei, weights_, b_.CreateMul(panel, i64(w_.kh * w_.kw * icg_ * nr_)));
    llvm::Value* base =
        b_.CreateAdd(b_.CreateMul(n, i64(imagePixels_)), b_.CreateMul(v0, i64(w_.strideW)));
    for (int64_t kh = 0; kh < w_.kh; ++kh)
      for (int64_t kw = 0; kw < w_.kw; ++kw)
        for (int64_t cb = 0; cb < icBlocks_; ++cb) {
          const int64_t idx = (kh * w_.kw + kw) * icBlocks_ + cb;
          llvm::Value* pixel = b_.CreateAdd(base, i64(tapOffset(kh, kw)));
          llvm::Value* a =
              gep(aType_, in_, b_.CreateAdd(b_.CreateMul(pixel, i64(cs_)), i64(cb * c_.icBlock)));
          b_.CreateStore(a, b_.CreateGEP(mb_.ptr(), aArr_, i64(idx)));
          b_.CreateStore(
              gep(wei, panelWeights, i64(((kh * w_.kw + kw) * icg_ + cb * c_.icBlock) * nr_)),
              b_.CreateGEP(mb_.ptr(), bArr_, i64(idx)));
        }
    llvm::Value* oc0 = b_.CreateMul(panel, i64(nr_));
    llvm::Value* imageOut = b_.CreateMul(n, i64(w_.oh() * w_.ow()));
    codegen::MicrokernelArgs args;
    args.a = aArr_, args.b = bArr_;
    args.c = gep(w_.types.dst, out_,
                 b_.CreateAdd(b_.CreateMul(imageOut, i64(w_.outPixelStride())), oc0));
    args.k = i64(c_.icBlock), args.lda = i64(w_.strideW * cs_), args.ldb = i64(nr_);
    args.ldc = i64(w_.outPixelStride()), args.batch = i64(batch_);
    args.flags = b_.getInt32(kUkrApplyEpilogue);
    args.bias = gep(bias_, oc0);
    // The addend is a dense tensor of the output's shape.
    args.addend = gep(epilogueAddendType(epilogue_, w_.types.dst), addend_,
                      b_.CreateAdd(b_.CreateMul(imageOut, i64(w_.oc)), oc0));
    args.ldAdd = i64(w_.oc);
    args.columnScale = gep(columnScale_, oc0);
    args.cRows = rows_;
    llvm::Value* ocTail = b_.CreateICmpSGT(b_.CreateAdd(oc0, i64(nr_)), i64(w_.ocPerGroup()));
    mb_.emitVariantCall(b_, mb_.tileVariant(b_, b_.getFalse(), ocTail), kernels_, args.list(mb_));
  }

  // The pixel offset of tap (kh, kw) in an image of the copy: output row oh reads padded row
  // oh * sH + kh * dH, which is row oh + (kh * dH) / sH of plane (kh * dH) % sH.
  int64_t tapOffset(int64_t kh, int64_t kw) const {
    if (inPlace_) return 0;
    const int64_t r = kh * w_.dilationH, plane = r % w_.strideH, q = r / w_.strideH;
    return (plane * planeRows_ + q) * wv_ * w_.strideW + kw * w_.dilationW;
  }

  void emitEntry(const std::string& name, llvm::Function* task) {
    auto args = mb_.beginKernelEntry(b_, name);
    llvm::Value* in = args[rt::kArgSrc];
    if (from_) in = codegen::emitSubsampledInput(mb_, b_, in, *from_, mr_ * cs_);
    if (!inPlace_) {
      // Slack past the last image for the padding columns of its last tile and a tile larger
      // than a small image.
      const int64_t wp = wv_ * w_.strideW,
                    extra = (mr_ * w_.strideW + (w_.kw - 1) * w_.dilationW) * cs_;
      if (isBf16Gemm(w_.types))
        in = mb_.emitBf16Nhwc(b_, in, w_.types.src, w_.inPixelStride(), w_.n, w_.h, w_.w, w_.ic,
                              w_.padTop, w_.padLeft, hp_, wp, extra, w_.strideH);
      else
        in = mb_.emitPaddedNhwc(b_, in, w_.n, w_.h, w_.w, w_.ic, w_.padTop, w_.padLeft, hp_, wp,
                                w_.types.src, extra, w_.nchwInput, w_.aZeroPoint, cs_, w_.strideH,
                                w_.inPixelStride());
    }
    const int64_t tasks = c_.parallel == Conv2dParallel::N    ? w_.n
                          : c_.parallel == Conv2dParallel::Oh ? tiles_
                          : c_.parallel == Conv2dParallel::Oc ? panels_
                                                              : 1;
    mb_.emitRunTasks(b_, task,
                     {in, args[rt::kArgWei], args[rt::kArgDst], args[rt::kArgBias],
                      args[rt::kArgResidual], args[rt::kArgScales]},
                     tasks, w_.threads);
    b_.CreateRetVoid();
  }

  const Conv2dWorkload& w_;
  const Conv2dConfig& c_;
  const Epilogue& epilogue_;
  const Conv2dWorkload* from_ = nullptr; ///< the strided 1x1 whose input pixels the entry copies
  DType aType_ = DType::U8;              ///< what the microkernels read as A: u8, or the bf16 copy
  int mr_ = 32, nr_ = 32;
  bool inPlace_ = false;
  int64_t icg_ = 0, wv_ = 0, hp_ = 0, virtualPixels_ = 0, cs_ = 0, planeRows_ = 0, imagePixels_ = 0,
          tiles_ = 0, panels_ = 0, icBlocks_ = 0, batch_ = 0;
  llvm::Function* kernels_[4] = {};
  llvm::Value *in_ = nullptr, *weights_ = nullptr, *out_ = nullptr, *bias_ = nullptr,
              *addend_ = nullptr, *columnScale_ = nullptr;
  llvm::Value *aArr_ = nullptr, *bArr_ = nullptr, *rows_ = nullptr;
};

} // namespace

namespace codegen {

void emitAmxConv2dLoopNest(ModuleBuilder& mb, const std::string& symbol, const Conv2dWorkload& w,
                           const Conv2dConfig& c, const Epilogue& e,
                           const Conv2dWorkload* subsampledFrom) {
  AmxConv2dEmitter(mb, w, c, e, subsampledFrom).emit(symbol);
}

} // namespace codegen

} // namespace tunec
