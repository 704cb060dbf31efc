// Depthwise convolution in LLVM IR: per output row, tiles of owBlock pixels x channelVectors
// vectors of channels; the KH x KW window is unrolled, each input vector multiplied by the
// filter vector of its channels (no broadcast: channels are the vector lanes). int8 on AVX-512
// sums four rows of the window per vpdpbusd (depthwiseSumsInQuads).
#include "codegen/depthwise_kernel.h"

#include "codegen/kernel_emitters.h"
#include "codegen/microkernel.h"
#include "codegen/module_builder.h"
#include "codegen/post_op_emitter.h"
#include "codegen/tile_ops.h"

#include <cstdlib>
#include <llvm/IR/Intrinsics.h>
#include <optional>

namespace tunec {

namespace {

using codegen::ModuleBuilder;

class DepthwiseEmitter : codegen::EmitterBase {
public:
  DepthwiseEmitter(ModuleBuilder& mb, const DepthwiseWorkload& w, const DepthwiseConfig& c,
                   const Epilogue& e)
      : EmitterBase(mb), w_(w), c_(c), epilogue_(e) {
    // A row normalization ends the epilogue: the tiles apply the rest, then each output row of
    // the task (OW pixels of C channels, in cache) is normalized over its channels.
    if (!epilogue_.empty() && epilogue_.back().kind == PostOpKind::LayerNormRow) {
      normEpsilon_ = epilogue_.back().lo;
      epilogue_.pop_back();
    }
    lanes_ = isaInfo(c.isa).f32Lanes();
    quads_ = depthwiseSumsInQuads(w, c);
    cBlock_ = c.channelVectors * lanes_;
    cPad_ = (w.c + cBlock_ - 1) / cBlock_ * cBlock_;
    hp_ = w.h + w.padTop + w.padBottom;
    wp_ = w.w + w.padLeft + w.padRight;
  }

  void emit(const std::string& name) {
    int pixelTail = static_cast<int>(w_.ow() % c_.owBlock),
        channelTail = static_cast<int>(w_.c % cBlock_);
    tiles_[0] = emitTile(c_.owBlock, cBlock_, "tile_full");
    tiles_[1] = channelTail ? emitTile(c_.owBlock, channelTail, "tile_ctail") : tiles_[0];
    tiles_[2] = pixelTail ? emitTile(pixelTail, cBlock_, "tile_ptail") : tiles_[0];
    tiles_[3] = pixelTail
                    ? (channelTail ? emitTile(pixelTail, channelTail, "tile_both") : tiles_[2])
                    : tiles_[1];
    emitEntry(name, emitTask(name + "_task"));
  }

  int64_t cPad() const { return cPad_; }

private:
  // tile(in, weights, out, bias, addend, column scale): pointers already at the tile's first
  // pixel/channel.
  llvm::Function* emitTile(int pixels, int channels, const std::string& name) {
    llvm::Type* ptr = mb_.ptr();
    llvm::FixedVectorType* vec = mb_.f32Vector();
    auto* fnTy = llvm::FunctionType::get(b_.getVoidTy(), {ptr, ptr, ptr, ptr, ptr, ptr}, false);
    llvm::Function* fn = mb_.createFunction(name, fnTy, true);
    fn->addFnAttr(llvm::Attribute::AlwaysInline);
    b_.SetInsertPoint(llvm::BasicBlock::Create(mb_.context(), "entry", fn));
    llvm::Value *in = fn->getArg(0), *wt = fn->getArg(1), *out = fn->getArg(2),
                *bias = fn->getArg(3), *add = fn->getArg(4), *scale = fn->getArg(5);
    int vectors = (channels + lanes_ - 1) / lanes_;
    std::vector<llvm::Value*> masks(static_cast<size_t>(vectors), nullptr);
    for (int v = 0; v < vectors; ++v)
      masks[static_cast<size_t>(v)] =
          codegen::laneMask(b_, lanes_, std::min(lanes_, channels - v * lanes_));
    auto load = [&](llvm::Value* base, int64_t offset, int v) {
      return loadLanes(vec, gep(base, i64(offset)), masks[static_cast<size_t>(v)]);
    };
    // A bf16 output's addend is bf16 too (epilogueAddendType), widened as the input is.
    const bool bf16Out = w_.types.dst == DType::BF16;
    auto loadAddend = [&](int64_t offset, int v) {
      return bf16Out ? loadBf16(add, offset, v, masks) : load(add, offset, v);
    };
    // An int8 workload's u8 input and u8 output: the window's exact integer sums (in f32 for
    // the epilogue) and the requantized results (integers in [0, 255]) narrowed back.
    const bool u8Out = w_.types.dst == DType::U8;
    auto* bytes = llvm::FixedVectorType::get(b_.getInt8Ty(), static_cast<unsigned>(lanes_));
    std::vector<llvm::Value*> acc = quads_ ? sumRowQuads(pixels, vectors, masks, in, wt)
                                           : sumTaps(pixels, vectors, masks, in, wt);
    for (int p = 0; p < pixels; ++p)
      for (int v = 0; v < vectors; ++v) {
        int64_t offset = p * w_.c + v * lanes_;
        auto operands = [&](const PostOp& op) {
          return std::pair{op.kind == PostOpKind::BiasPerColumn ? load(bias, v * lanes_, v)
                           : readsColumnScale(op.kind)          ? load(scale, v * lanes_, v)
                                                                : nullptr,
                           op.kind == PostOpKind::AddTensor ? loadAddend(offset, v) : nullptr};
        };
        llvm::Value* y = codegen::emitEpilogue(b_, epilogue_,
                                               acc[static_cast<size_t>(p * vectors + v)], operands);
        llvm::Value* dst = gep(w_.types.dst, out, i64(offset));
        llvm::Align align(w_.types.dstBytes());
        if (u8Out) y = b_.CreateTrunc(y, bytes); // the requantized u8 values as i32 lanes
        if (bf16Out) y = codegen::emitRoundToBf16(mb_, b_, y);
        if (masks[static_cast<size_t>(v)])
          b_.CreateMaskedStore(y, dst, align, masks[static_cast<size_t>(v)]);
        else
          b_.CreateAlignedStore(y, dst, align);
      }
    b_.CreateRetVoid();
    return fn;
  }

  // A vector of `type` at p, its lanes past a channel tail's mask (null: none) read as zeros.
  llvm::Value* loadLanes(llvm::FixedVectorType* type, llvm::Value* p, llvm::Value* mask) {
    llvm::Align align(type->getScalarSizeInBits() / 8);
    if (!mask) return b_.CreateAlignedLoad(type, p, align);
    return b_.CreateMaskedLoad(type, p, align, mask, llvm::Constant::getNullValue(type));
  }

  // The u8 inputs of channel vector v at `offset` (elements from the tile's first), widened to
  // i32.
  llvm::Value* loadBytes(llvm::Value* in, int64_t offset, int v,
                         const std::vector<llvm::Value*>& masks) {
    auto* bytes = llvm::FixedVectorType::get(b_.getInt8Ty(), static_cast<unsigned>(lanes_));
    auto* ints = llvm::FixedVectorType::get(b_.getInt32Ty(), static_cast<unsigned>(lanes_));
    return b_.CreateZExt(
        loadLanes(bytes, gep(DType::U8, in, i64(offset)), masks[static_cast<size_t>(v)]), ints);
  }

  // The bf16 values of channel vector v at `offset` (elements from `base`), widened to f32.
  llvm::Value* loadBf16(llvm::Value* base, int64_t offset, int v,
                        const std::vector<llvm::Value*>& masks) {
    auto* halves = llvm::FixedVectorType::get(b_.getInt16Ty(), static_cast<unsigned>(lanes_));
    return codegen::bf16ToF32(
        b_, loadLanes(halves, gep(DType::BF16, base, i64(offset)), masks[static_cast<size_t>(v)]),
        mb_.f32Vector());
  }

  // The window's sums by taps: per tap, each input vector (u8 widened to the f32 integers the
  // FMA sums exactly, bf16 widened exactly) times its channels' filter value. Row-major (pixel,
  // vector) f32 sums.
  std::vector<llvm::Value*> sumTaps(int pixels, int vectors, const std::vector<llvm::Value*>& masks,
                                    llvm::Value* in, llvm::Value* wt) {
    llvm::FixedVectorType* vec = mb_.f32Vector();
    auto loadInput = [&](int64_t offset, int v) -> llvm::Value* {
      if (w_.types.src == DType::U8) return b_.CreateUIToFP(loadBytes(in, offset, v, masks), vec);
      if (w_.types.src == DType::BF16) return loadBf16(in, offset, v, masks);
      return loadLanes(vec, gep(in, i64(offset)), masks[static_cast<size_t>(v)]);
    };
    llvm::Function* fma =
        llvm::Intrinsic::getDeclaration(&mb_.module(), llvm::Intrinsic::fma, {vec});
    std::vector<llvm::Value*> acc(static_cast<size_t>(pixels * vectors),
                                  llvm::ConstantAggregateZero::get(vec));
    for (int64_t kh = 0; kh < w_.kh; ++kh)
      for (int64_t kw = 0; kw < w_.kw; ++kw)
        for (int v = 0; v < vectors; ++v) {
          llvm::Value* filter = b_.CreateAlignedLoad(
              vec, gep(wt, i64((kh * w_.kw + kw) * cPad_ + v * lanes_)), llvm::Align(4));
          for (int p = 0; p < pixels; ++p) {
            int64_t pixel = kh * w_.dilationH * wp_ + p * w_.strideW + kw * w_.dilationW;
            llvm::Value* x = loadInput(pixel * w_.c + v * lanes_, v);
            size_t idx = static_cast<size_t>(p * vectors + v);
            acc[idx] = b_.CreateCall(fma, {x, filter, acc[idx]});
          }
        }
    return acc;
  }

  // The window's sums by row quads (depthwiseSumsInQuads): for each quad of rows and each input
  // column the tile reads, one i32 vector of four rows' bytes per channel; vpdpbusd (or its
  // twin) adds its dot with the filter's (rows, kw) quad into every pixel whose window has that
  // column at kw. Columns in ascending order, so each is built once and dies soon. The i32 sums
  // are exact and become f32 (exactly: below 2^24).
  std::vector<llvm::Value*> sumRowQuads(int pixels, int vectors,
                                        const std::vector<llvm::Value*>& masks, llvm::Value* in,
                                        llvm::Value* wt) {
    auto* ints = llvm::FixedVectorType::get(b_.getInt32Ty(), static_cast<unsigned>(lanes_));
    std::vector<llvm::Value*> acc(static_cast<size_t>(pixels * vectors),
                                  llvm::ConstantAggregateZero::get(ints));
    const int64_t columns = (pixels - 1) * w_.strideW + (w_.kw - 1) * w_.dilationW + 1;
    for (int64_t q = 0; q < depthwiseRowQuads(w_); ++q)
      for (int v = 0; v < vectors; ++v)
        for (int64_t x = 0; x < columns; ++x) {
          llvm::Value* column = nullptr;
          for (int p = 0; p < pixels; ++p)
            for (int64_t kw = 0; kw < w_.kw; ++kw) {
              if (p * w_.strideW + kw * w_.dilationW != x) continue;
              if (!column)
                for (int64_t r = 0; r < 4 && 4 * q + r < w_.kh; ++r) {
                  int64_t pixel = (4 * q + r) * w_.dilationH * wp_ + x;
                  llvm::Value* row = loadBytes(in, pixel * w_.c + v * lanes_, v, masks);
                  if (r) row = b_.CreateShl(row, static_cast<uint64_t>(8 * r));
                  column = column ? b_.CreateOr(column, row) : row;
                }
              llvm::Value* filter = b_.CreateAlignedLoad(
                  ints, gep(wt, i64((q * w_.kw + kw) * cPad_ + v * lanes_)), llvm::Align(4));
              size_t idx = static_cast<size_t>(p * vectors + v);
              acc[idx] = codegen::emitDotU8S8Quads(mb_, b_, acc[idx], column, filter);
            }
        }
    for (llvm::Value*& a : acc) a = b_.CreateSIToFP(a, mb_.f32Vector());
    return acc;
  }

  llvm::Function* emitTask(const std::string& name) {
    std::vector<llvm::Value*> fields;
    llvm::Function* fn = mb_.beginTask(b_, name, 7, fields);
    llvm::Value *in = fields[0], *wt = fields[1], *out = fields[2], *bias = fields[3],
                *add = fields[4], *scale = fields[5], *normParams = fields[6];
    llvm::Value* ohLo = i64(0);
    llvm::Value* ohHi = i64(w_.oh());
    if (c_.parallel == DepthwiseParallel::Oh) {
      ohLo = fn->getArg(1);
      ohHi = b_.CreateAdd(ohLo, i64(1));
    }
    mb_.forLoop(b_, i64(0), i64(w_.n), 1, "n", [&](llvm::Value* n) {
      mb_.forLoop(b_, ohLo, ohHi, 1, "oh", [&](llvm::Value* oh) {
        llvm::Value* inRow = b_.CreateMul(
            b_.CreateAdd(b_.CreateMul(n, i64(hp_)), b_.CreateMul(oh, i64(w_.strideH))), i64(wp_));
        llvm::Value* outRow =
            b_.CreateMul(b_.CreateAdd(b_.CreateMul(n, i64(w_.oh())), oh), i64(w_.ow()));
        mb_.forLoop(b_, i64(0), i64(w_.c), cBlock_, "c", [&](llvm::Value* c0) {
          llvm::Value* cTail = b_.CreateICmpSGT(b_.CreateAdd(c0, i64(cBlock_)), i64(w_.c));
          mb_.forLoop(b_, i64(0), i64(w_.ow()), c_.owBlock, "ow", [&](llvm::Value* ow0) {
            llvm::Value* inOff = b_.CreateAdd(
                b_.CreateMul(b_.CreateAdd(inRow, b_.CreateMul(ow0, i64(w_.strideW))), i64(w_.c)),
                c0);
            llvm::Value* outOff =
                b_.CreateAdd(b_.CreateMul(b_.CreateAdd(outRow, ow0), i64(w_.c)), c0);
            llvm::Value* pTail = b_.CreateICmpSGT(b_.CreateAdd(ow0, i64(c_.owBlock)), i64(w_.ow()));
            llvm::Value* which = mb_.tileVariant(b_, pTail, cTail);
            std::vector<llvm::Value*> args = {
                gep(w_.types.src, in, inOff),
                gep(wt, c0),
                gep(w_.types.dst, out, outOff),
                gep(bias, c0),
                gep(epilogueAddendType(epilogue_, w_.types.dst), add, outOff),
                gep(scale, c0)};
            mb_.emitVariantCall(b_, which, tiles_, args);
          });
        });
        if (normEpsilon_) {
          llvm::FunctionCallee normRows = mb_.declare(
              "tunec_layer_norm_rows_f32",
              llvm::FunctionType::get(
                  b_.getVoidTy(),
                  {mb_.ptr(), mb_.i64(), mb_.i64(), mb_.i64(), mb_.ptr(), mb_.f32()}, false));
          b_.CreateCall(normRows,
                        {gep(out, b_.CreateMul(outRow, i64(w_.c))), i64(w_.ow()), i64(w_.c),
                         i64(w_.c), normParams,
                         llvm::ConstantFP::get(mb_.f32(), static_cast<double>(*normEpsilon_))});
        }
      });
    });
    b_.CreateRetVoid();
    return fn;
  }

  void emitEntry(const std::string& name, llvm::Function* task) {
    auto args = mb_.beginKernelEntry(b_, name);
    // The window is read from a zero-padded copy, so every load is in bounds; one vector of
    // slack covers the masked channel-tail loads of the last pixel.
    // An int8 input is padded with its zero point (DepthwiseWorkload::aZeroPoint), a bf16 one
    // copied as it is.
    llvm::Value* padded =
        w_.types.src == DType::BF16
            ? mb_.emitBf16Nhwc(b_, args[rt::kArgSrc], DType::BF16, w_.c, w_.n, w_.h, w_.w, w_.c,
                               w_.padTop, w_.padLeft, hp_, wp_, lanes_)
            : mb_.emitPaddedNhwc(b_, args[rt::kArgSrc], w_.n, w_.h, w_.w, w_.c, w_.padTop,
                                 w_.padLeft, hp_, wp_, w_.types.src, lanes_, false, w_.aZeroPoint);
    int64_t tasks = c_.parallel == DepthwiseParallel::Oh ? w_.oh() : 1;
    mb_.emitRunTasks(b_, task,
                     {padded, args[rt::kArgWei], args[rt::kArgDst], args[rt::kArgBias],
                      args[rt::kArgResidual], args[rt::kArgScales], args[rt::kArgNormParams]},
                     tasks, w_.threads);
    b_.CreateRetVoid();
  }

  const DepthwiseWorkload& w_;
  const DepthwiseConfig& c_;
  Epilogue epilogue_;
  std::optional<float> normEpsilon_;
  int lanes_;
  bool quads_; ///< the int8 sums by row quads on vpdpbusd (depthwiseSumsInQuads)
  int64_t cBlock_, cPad_, hp_, wp_;
  llvm::Function* tiles_[4] = {};
};

} // namespace

namespace codegen {

Expected<PackedWeights> emitDepthwiseKernel(ModuleBuilder& mb, const std::string& symbol,
                                            const DepthwiseWorkload& w, const DepthwiseConfig& c,
                                            const Epilogue& e, const float* weights) {
  TUNEC_TRY(validateDepthwiseConfig(w, c));
  for (size_t i = 0; i < e.size(); ++i) {
    if (e[i].kind == PostOpKind::LayerNormRow && i + 1 != e.size())
      return makeError("depthwise: a row normalization must end the epilogue");
    if (e[i].kind == PostOpKind::LayerNormRow && w.types.dst != DType::F32)
      return makeError("depthwise: a row normalization normalizes an f32 output, not ",
                       dtypeName(w.types.dst));
  }
  TUNEC_TRY(checkTargetSupports(mb.target(), c.isa, w.types));
  TUNEC_TRY(checkEpilogueStores(e, w.types.dst)); // a u8 output ends with its quantization
  if (epilogueAddendType(e, w.types.dst) == DType::U8)
    return makeError("depthwise: the epilogue reads an f32 addend (a u8 one, AddDequantizedU8, "
                     "is the matmul's and conv2d's)");
  DepthwiseEmitter emitter(mb, w, c, e);
  emitter.emit(symbol);
  return packDepthwiseWeights(w, c, emitter.cPad(), weights);
}

} // namespace codegen

Expected<DepthwiseKernel> compileDepthwise(Jit& jit, const DepthwiseWorkload& workload,
                                           const DepthwiseConfig& config, const Epilogue& epilogue,
                                           const float* weights) {
  auto module = jit.newModule(config.isa, "tunec_depthwise");
  std::string name = module->module().getModuleIdentifier();
  TUNEC_ASSIGN_OR_RETURN(
      codegen::PackedWeights packed,
      codegen::emitDepthwiseKernel(*module, name, workload, config, epilogue, weights));
  DepthwiseKernel kernel;
  kernel.packedWeights_ = std::move(packed);
  TUNEC_ASSIGN_OR_RETURN(void* address, jit.addAndLookup(std::move(module), name));
  kernel.fn_ = reinterpret_cast<rt::KernelFn>(address);
  return kernel;
}

} // namespace tunec
