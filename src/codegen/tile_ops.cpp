// The AMX tile instructions and the AVX-512 dot products, as instructions or as twins
// (tile_ops.h). A twin tile is 16 rows of 64 bytes in a stack buffer; a load or store moves the
// configured rows and bytes per row; the dots compute what ../shared/amx/README.md states:
// tdpbf16ps sums the even and the odd products of its k-pairs in two f32 partial sums from +0
// (fused multiply-adds), then adds their sum into C, every input read with subnormals as zero and
// every result flushed to zero; the integer dots add the exact sum of their byte products into C,
// wrapping; vdpbf16ps adds the odd product first, then the even one.
#include "codegen/tile_ops.h"

#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/IntrinsicsX86.h>

namespace tunec::codegen {

std::array<uint8_t, 64> TilePalette::bytes() const {
  std::array<uint8_t, 64> cfg{};
  cfg[0] = 1; // palette 1
  for (size_t t = 0; t < 8; ++t) {
    cfg[16 + 2 * t] = static_cast<uint8_t>(colsb[t] & 0xff);
    cfg[17 + 2 * t] = static_cast<uint8_t>(colsb[t] >> 8);
    cfg[48 + t] = static_cast<uint8_t>(rows[t]);
  }
  return cfg;
}

namespace {

/// Subnormals as signed zeros (DAZ on an input, FTZ on a result): the value's bits, for any
/// float or vector of floats.
llvm::Value* flushSubnormal(llvm::IRBuilder<>& b, llvm::Value* x) {
  llvm::Type* ty = x->getType();
  llvm::Type* intTy = ty->isVectorTy()
                          ? llvm::VectorType::getInteger(llvm::cast<llvm::VectorType>(ty))
                          : static_cast<llvm::Type*>(b.getInt32Ty());
  llvm::Value* bits = b.CreateBitCast(x, intTy);
  llvm::Value* exponent = b.CreateAnd(bits, llvm::ConstantInt::get(intTy, 0x7f800000));
  llvm::Value* isSub = b.CreateICmpEQ(exponent, llvm::ConstantInt::get(intTy, 0));
  llvm::Value* signOnly = b.CreateAnd(bits, llvm::ConstantInt::get(intTy, 0x80000000u));
  return b.CreateBitCast(b.CreateSelect(isSub, signOnly, bits), ty);
}

class RealTileOps final : public TileOps {
public:
  explicit RealTileOps(ModuleBuilder& mb) : mb_(mb) {}

  void configure(llvm::IRBuilder<>& b, const TilePalette& palette) override {
    std::array<uint8_t, 64> cfg = palette.bytes();
    auto* data = llvm::ConstantDataArray::get(mb_.context(), llvm::ArrayRef<uint8_t>(cfg));
    auto* global = new llvm::GlobalVariable(mb_.module(), data->getType(), true,
                                            llvm::GlobalValue::PrivateLinkage, data, "tilecfg");
    global->setAlignment(llvm::Align(64));
    b.CreateCall(intrinsic(llvm::Intrinsic::x86_ldtilecfg), {global});
  }
  void assumeConfigured(llvm::IRBuilder<>&, const TilePalette&) override {}
  void zero(llvm::IRBuilder<>& b, int tile) override {
    b.CreateCall(intrinsic(llvm::Intrinsic::x86_tilezero), {b.getInt8(tile)});
  }
  void load(llvm::IRBuilder<>& b, int tile, llvm::Value* ptr, llvm::Value* stride,
            bool streamed) override {
    b.CreateCall(
        intrinsic(streamed ? llvm::Intrinsic::x86_tileloaddt164 : llvm::Intrinsic::x86_tileloadd64),
        {b.getInt8(tile), ptr, stride});
  }
  void store(llvm::IRBuilder<>& b, int tile, llvm::Value* ptr, llvm::Value* stride) override {
    b.CreateCall(intrinsic(llvm::Intrinsic::x86_tilestored64), {b.getInt8(tile), ptr, stride});
  }
  void dotBf16(llvm::IRBuilder<>& b, int c, int a, int bt) override {
    b.CreateCall(intrinsic(llvm::Intrinsic::x86_tdpbf16ps),
                 {b.getInt8(c), b.getInt8(a), b.getInt8(bt)});
  }
  void dotInt8(llvm::IRBuilder<>& b, TileIntDot kind, int c, int a, int bt) override {
    llvm::Intrinsic::ID id = kind == TileIntDot::Busd   ? llvm::Intrinsic::x86_tdpbusd
                             : kind == TileIntDot::Bssd ? llvm::Intrinsic::x86_tdpbssd
                             : kind == TileIntDot::Bsud ? llvm::Intrinsic::x86_tdpbsud
                                                        : llvm::Intrinsic::x86_tdpbuud;
    b.CreateCall(intrinsic(id), {b.getInt8(c), b.getInt8(a), b.getInt8(bt)});
  }

private:
  llvm::Function* intrinsic(llvm::Intrinsic::ID id) {
    return llvm::Intrinsic::getDeclaration(&mb_.module(), id);
  }
  ModuleBuilder& mb_;
};

class TwinTileOps final : public TileOps {
public:
  explicit TwinTileOps(ModuleBuilder& mb) : mb_(mb) {}

  void configure(llvm::IRBuilder<>& b, const TilePalette& palette) override {
    palette_ = palette;
    // The tile file lives in the function's entry block; LDTILECFG zeroes every tile.
    llvm::Function* fn = b.GetInsertBlock()->getParent();
    llvm::IRBuilder<> entry(&fn->getEntryBlock(), fn->getEntryBlock().begin());
    auto* alloca = entry.CreateAlloca(b.getInt8Ty(), b.getInt64(8 * kTileBytes), "tiles");
    alloca->setAlignment(llvm::Align(64));
    tiles_ = alloca;
    b.CreateMemSet(tiles_, b.getInt8(0), 8 * kTileBytes, llvm::MaybeAlign(64));
  }
  void assumeConfigured(llvm::IRBuilder<>& b, const TilePalette& palette) override {
    // The twin's tile file is this function's own; zeroed so that its contents are defined.
    configure(b, palette);
  }
  void zero(llvm::IRBuilder<>& b, int tile) override {
    b.CreateMemSet(tileRow(b, tile, 0), b.getInt8(0), kTileBytes, llvm::MaybeAlign(64));
  }
  void load(llvm::IRBuilder<>& b, int tile, llvm::Value* ptr, llvm::Value* stride, bool) override {
    // The configured rows and bytes; the rest of each row reads as zero.
    zero(b, tile);
    for (int r = 0; r < rows(tile); ++r)
      b.CreateMemCpy(tileRow(b, tile, r), llvm::MaybeAlign(64),
                     b.CreateGEP(b.getInt8Ty(), ptr, b.CreateMul(b.getInt64(r), stride)),
                     llvm::MaybeAlign(1), colsb(tile));
  }
  void store(llvm::IRBuilder<>& b, int tile, llvm::Value* ptr, llvm::Value* stride) override {
    for (int r = 0; r < rows(tile); ++r)
      b.CreateMemCpy(b.CreateGEP(b.getInt8Ty(), ptr, b.CreateMul(b.getInt64(r), stride)),
                     llvm::MaybeAlign(1), tileRow(b, tile, r), llvm::MaybeAlign(64), colsb(tile));
  }

  void dotBf16(llvm::IRBuilder<>& b, int c, int a, int bt) override {
    const int m = rows(c), n = colsb(c) / 4, pairs = colsb(a) / 4;
    llvm::Type* f32 = mb_.f32();
    llvm::Type* i16 = b.getInt16Ty();
    llvm::Function* fma =
        llvm::Intrinsic::getDeclaration(&mb_.module(), llvm::Intrinsic::fma, {f32});
    forEachElement(b, m, n, [&](llvm::Value* i, llvm::Value* j) {
      // Two partial sums from +0 over this instruction's k-pairs, then added into C.
      llvm::Value* sums[2] = {llvm::ConstantFP::get(f32, 0.0), llvm::ConstantFP::get(f32, 0.0)};
      llvm::Value* aRow =
          b.CreateGEP(b.getInt8Ty(), tileRow(b, a, 0), b.CreateMul(i, b.getInt64(64)));
      for (int p = 0; p < pairs; ++p) {
        llvm::Value* bRow =
            b.CreateGEP(b.getInt8Ty(), tileRow(b, bt, p), b.CreateMul(j, b.getInt64(4)));
        for (int q = 0; q < 2; ++q) {
          llvm::Value* av = b.CreateLoad(i16, b.CreateConstGEP1_64(i16, aRow, 2 * p + q));
          llvm::Value* bv = b.CreateLoad(i16, b.CreateConstGEP1_64(i16, bRow, q));
          llvm::Value* x = flushSubnormal(b, bf16ToF32(b, av, f32));
          llvm::Value* y = flushSubnormal(b, bf16ToF32(b, bv, f32));
          sums[q] = flushSubnormal(b, b.CreateCall(fma, {x, y, sums[q]}));
        }
      }
      llvm::Value* cp = cElement(b, c, i, j);
      llvm::Value* old = flushSubnormal(b, b.CreateLoad(f32, cp));
      llvm::Value* add = flushSubnormal(b, b.CreateFAdd(sums[0], sums[1]));
      b.CreateStore(flushSubnormal(b, b.CreateFAdd(old, add)), cp);
    });
  }

  void dotInt8(llvm::IRBuilder<>& b, TileIntDot kind, int c, int a, int bt) override {
    const int m = rows(c), n = colsb(c) / 4, quads = colsb(a) / 4;
    const bool aSigned = kind == TileIntDot::Bssd || kind == TileIntDot::Bsud;
    const bool bSigned = kind == TileIntDot::Busd || kind == TileIntDot::Bssd;
    llvm::Type* i8 = b.getInt8Ty();
    llvm::Type* i32 = b.getInt32Ty();
    forEachElement(b, m, n, [&](llvm::Value* i, llvm::Value* j) {
      llvm::Value* aRow = b.CreateGEP(i8, tileRow(b, a, 0), b.CreateMul(i, b.getInt64(64)));
      llvm::Value* cp = cElement(b, c, i, j);
      llvm::Value* sum = b.CreateLoad(i32, cp);
      for (int p = 0; p < quads; ++p) {
        llvm::Value* bRow = b.CreateGEP(i8, tileRow(b, bt, p), b.CreateMul(j, b.getInt64(4)));
        for (int q = 0; q < 4; ++q) {
          llvm::Value* av = b.CreateLoad(i8, b.CreateConstGEP1_64(i8, aRow, 4 * p + q));
          llvm::Value* bv = b.CreateLoad(i8, b.CreateConstGEP1_64(i8, bRow, q));
          llvm::Value* x = aSigned ? b.CreateSExt(av, i32) : b.CreateZExt(av, i32);
          llvm::Value* y = bSigned ? b.CreateSExt(bv, i32) : b.CreateZExt(bv, i32);
          sum = b.CreateAdd(sum, b.CreateMul(x, y)); // wraps, as the instruction does
        }
      }
      b.CreateStore(sum, cp);
    });
  }

private:
  static constexpr int kTileBytes = 1024;
  int rows(int t) const { return palette_.rows[static_cast<size_t>(t)]; }
  int colsb(int t) const { return palette_.colsb[static_cast<size_t>(t)]; }
  llvm::Value* tileRow(llvm::IRBuilder<>& b, int tile, int row) {
    TUNEC_ASSERT(tiles_, "a tile operation before configure()");
    return b.CreateConstGEP1_64(b.getInt8Ty(), tiles_, tile * kTileBytes + row * 64);
  }
  llvm::Value* cElement(llvm::IRBuilder<>& b, int c, llvm::Value* i, llvm::Value* j) {
    llvm::Value* offset =
        b.CreateAdd(b.CreateMul(i, b.getInt64(64)), b.CreateMul(j, b.getInt64(4)));
    return b.CreateGEP(b.getInt8Ty(), tileRow(b, c, 0), offset);
  }
  // for i < m, j < n: body(i, j), as loops (the twin's code stays small).
  void forEachElement(llvm::IRBuilder<>& b, int m, int n,
                      const std::function<void(llvm::Value*, llvm::Value*)>& body) {
    mb_.forLoop(b, b.getInt64(0), b.getInt64(m), 1, "twin.i", [&](llvm::Value* i) {
      mb_.forLoop(b, b.getInt64(0), b.getInt64(n), 1, "twin.j",
                  [&](llvm::Value* j) { body(i, j); });
    });
  }

  ModuleBuilder& mb_;
  TilePalette palette_;
  llvm::Value* tiles_ = nullptr;
};

} // namespace

std::unique_ptr<TileOps> makeTileOps(ModuleBuilder& mb) {
  if (mb.twins()) return std::make_unique<TwinTileOps>(mb);
  return std::make_unique<RealTileOps>(mb);
}

llvm::Value* emitDotBf16Pairs(ModuleBuilder& mb, llvm::IRBuilder<>& b, llvm::Value* acc,
                              llvm::Value* a, llvm::Value* bv) {
  if (!mb.twins()) {
    llvm::Function* dot =
        llvm::Intrinsic::getDeclaration(&mb.module(), llvm::Intrinsic::x86_avx512bf16_dpbf16ps_512);
    llvm::Type* pairs = dot->getFunctionType()->getParamType(1);
    return b.CreateCall(dot, {acc, b.CreateBitCast(a, pairs), b.CreateBitCast(bv, pairs)});
  }
  auto* vecTy = llvm::cast<llvm::FixedVectorType>(acc->getType());
  auto* intTy = llvm::VectorType::getInteger(vecTy);
  llvm::Function* fma =
      llvm::Intrinsic::getDeclaration(&mb.module(), llvm::Intrinsic::fma, {vecTy});
  auto half = [&](llvm::Value* pairBits, bool odd) {
    llvm::Value* x = b.CreateBitCast(pairBits, intTy);
    x = odd ? b.CreateAnd(x, llvm::ConstantInt::get(intTy, 0xffff0000u)) : b.CreateShl(x, 16);
    return flushSubnormal(b, b.CreateBitCast(x, vecTy));
  };
  llvm::Value* t =
      flushSubnormal(b, b.CreateCall(fma, {half(a, true), half(bv, true), flushSubnormal(b, acc)}));
  return flushSubnormal(b, b.CreateCall(fma, {half(a, false), half(bv, false), t}));
}

llvm::Value* emitDotU8S8Quads(ModuleBuilder& mb, llvm::IRBuilder<>& b, llvm::Value* acc,
                              llvm::Value* a, llvm::Value* bv) {
  if (!mb.twins()) {
    llvm::Function* dot =
        llvm::Intrinsic::getDeclaration(&mb.module(), llvm::Intrinsic::x86_avx512_vpdpbusd_512);
    return b.CreateCall(dot, {acc, a, bv});
  }
  auto* bytes = llvm::FixedVectorType::get(b.getInt8Ty(), 64);
  auto* wide = llvm::FixedVectorType::get(b.getInt32Ty(), 64);
  llvm::Value* x = b.CreateZExt(b.CreateBitCast(a, bytes), wide);
  llvm::Value* y = b.CreateSExt(b.CreateBitCast(bv, bytes), wide);
  llvm::Value* products = b.CreateMul(x, y);
  llvm::Value* sum = acc;
  for (int q = 0; q < 4; ++q) {
    std::vector<int> lanes;
    for (int j = 0; j < 16; ++j) lanes.push_back(4 * j + q);
    sum = b.CreateAdd(sum, b.CreateShuffleVector(products, lanes));
  }
  return sum;
}

namespace {
// Lanes 2i and 2i + 1 of `v` added: a vector of half the lanes (the twins' pair sums).
llvm::Value* addAdjacentPairs(llvm::IRBuilder<>& b, llvm::Value* v) {
  const int half =
      static_cast<int>(llvm::cast<llvm::FixedVectorType>(v->getType())->getNumElements()) / 2;
  std::vector<int> even, odd;
  for (int j = 0; j < half; ++j) even.push_back(2 * j), odd.push_back(2 * j + 1);
  return b.CreateAdd(b.CreateShuffleVector(v, even), b.CreateShuffleVector(v, odd));
}
} // namespace

llvm::Value* emitDotU8S8QuadsAvx2(ModuleBuilder& mb, llvm::IRBuilder<>& b, llvm::Value* acc,
                                  llvm::Value* a, llvm::Value* bv) {
  auto* bytes = llvm::FixedVectorType::get(b.getInt8Ty(), 32);
  auto* shorts = llvm::FixedVectorType::get(b.getInt16Ty(), 16);
  llvm::Value* ones = llvm::ConstantInt::get(shorts, 1);
  llvm::Value* pairs = nullptr;
  if (!mb.twins()) {
    llvm::Function* maddubs =
        llvm::Intrinsic::getDeclaration(&mb.module(), llvm::Intrinsic::x86_avx2_pmadd_ub_sw);
    pairs = b.CreateCall(maddubs, {b.CreateBitCast(a, bytes), b.CreateBitCast(bv, bytes)});
  } else {
    auto* wide = llvm::FixedVectorType::get(b.getInt32Ty(), 32);
    llvm::Value* products = b.CreateMul(b.CreateZExt(b.CreateBitCast(a, bytes), wide),
                                        b.CreateSExt(b.CreateBitCast(bv, bytes), wide));
    auto* wide16 = llvm::FixedVectorType::get(b.getInt32Ty(), 16);
    llvm::Value* sum = addAdjacentPairs(b, products);
    llvm::Value* hi = llvm::ConstantInt::get(wide16, 32767);
    llvm::Value* lo = llvm::ConstantInt::get(wide16, static_cast<uint64_t>(-32768), true);
    sum = b.CreateSelect(b.CreateICmpSGT(sum, hi), hi, sum);
    sum = b.CreateSelect(b.CreateICmpSLT(sum, lo), lo, sum);
    pairs = b.CreateTrunc(sum, shorts);
  }
  llvm::Value* quads = nullptr;
  if (!mb.twins()) {
    llvm::Function* maddwd =
        llvm::Intrinsic::getDeclaration(&mb.module(), llvm::Intrinsic::x86_avx2_pmadd_wd);
    quads = b.CreateCall(maddwd, {pairs, ones});
  } else {
    auto* wide = llvm::FixedVectorType::get(b.getInt32Ty(), 16);
    quads = addAdjacentPairs(b, b.CreateSExt(pairs, wide));
  }
  return b.CreateAdd(acc, quads);
}

llvm::Value* bf16ToF32(llvm::IRBuilder<>& b, llvm::Value* bits, llvm::Type* f32Ty) {
  llvm::Type* ty = bits->getType();
  llvm::Type* i32Ty = ty->isVectorTy() ? static_cast<llvm::Type*>(llvm::VectorType::get(
                                             b.getInt32Ty(), llvm::cast<llvm::VectorType>(ty)))
                                       : b.getInt32Ty();
  llvm::Value* wide = ty == i32Ty ? bits : b.CreateZExt(bits, i32Ty);
  return b.CreateBitCast(b.CreateShl(wide, 16), f32Ty);
}

llvm::Value* emitRoundToBf16(ModuleBuilder& mb, llvm::IRBuilder<>& b, llvm::Value* v) {
  auto* vecTy = llvm::cast<llvm::FixedVectorType>(v->getType());
  auto* halfTy = llvm::FixedVectorType::get(b.getInt16Ty(), vecTy->getNumElements());
  if (!mb.twins()) {
    TUNEC_ASSERT(vecTy->getNumElements() == 16, "vcvtneps2bf16 rounds one zmm of 16 floats");
    llvm::Function* cvt = llvm::Intrinsic::getDeclaration(
        &mb.module(), llvm::Intrinsic::x86_avx512bf16_cvtneps2bf16_512);
    return b.CreateBitCast(b.CreateCall(cvt, {v}), halfTy);
  }
  auto* intTy = llvm::VectorType::getInteger(vecTy);
  auto k = [&](uint32_t c) { return llvm::ConstantInt::get(intTy, c); };
  llvm::Value* x = b.CreateBitCast(v, intTy);
  llvm::Value* magnitude = b.CreateAnd(x, k(0x7fffffffu));
  llvm::Value* exponentZero = b.CreateICmpEQ(b.CreateAnd(x, k(0x7f800000u)), k(0));
  llvm::Value* nan = b.CreateICmpUGT(magnitude, k(0x7f800000u));
  llvm::Value* rounded =
      b.CreateAdd(x, b.CreateAdd(k(0x7fffu), b.CreateAnd(b.CreateLShr(x, 16), k(1))));
  llvm::Value* out = b.CreateSelect(nan, b.CreateOr(x, k(0x400000u)), rounded);
  out = b.CreateSelect(exponentZero, b.CreateAnd(x, k(0x80000000u)), out);
  return b.CreateTrunc(b.CreateLShr(out, 16), halfTy);
}

} // namespace tunec::codegen
