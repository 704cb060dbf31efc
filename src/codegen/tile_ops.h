// Internal to codegen: the AMX tile instructions and the AVX-512 dot products, each emitted
// either as the instruction or as its twin: plain LLVM IR over memory with exactly the silicon's
// arithmetic (../shared/amx/README.md: measured on the Xeon). The switch sits at the single
// instruction (ModuleBuilder::twins()), so the kernel around it (packing, tile shapes, K blocking,
// the epilogue, the loop nest) is the same code for both; twin kernels are for tests only (the JIT
// of a twin build refuses to write objects).
#pragma once

#include "codegen/module_builder.h"

#include <array>
#include <memory>

namespace tunec::codegen {

/// A tile configuration (palette 1): rows and bytes per row of each of the 8 tiles; unused tiles
/// have 0 rows. Static per kernel variant.
struct TilePalette {
  std::array<int, 8> rows{};
  std::array<int, 8> colsb{};
  /// The 64-byte LDTILECFG memory image.
  std::array<uint8_t, 64> bytes() const;
};

/// The integer dot of a tile: A's and B's bytes signed (s) or unsigned (u).
enum class TileIntDot { Busd, Bssd, Bsud, Buud };

/// The tile operations of one function. configure() first (at the function's entry, outside its
/// loops); tiles are then referred to by index 0-7 as in the palette.
class TileOps {
public:
  virtual ~TileOps() = default;
  virtual void configure(llvm::IRBuilder<>& b, const TilePalette& palette) = 0;
  /// Instead of configure(): the caller of this function loaded `palette`; the tiles' contents
  /// are unknown until zeroed or loaded.
  virtual void assumeConfigured(llvm::IRBuilder<>& b, const TilePalette& palette) = 0;
  virtual void zero(llvm::IRBuilder<>& b, int tile) = 0;
  /// Rows of the tile from ptr, `stride` (i64) bytes apart. `streamed`: the rows are read once
  /// from L2 (tileloaddt1, which keeps them out of L1 so that the operand reused from L1 stays);
  /// the same values either way.
  virtual void load(llvm::IRBuilder<>& b, int tile, llvm::Value* ptr, llvm::Value* stride,
                    bool streamed = false) = 0;
  virtual void store(llvm::IRBuilder<>& b, int tile, llvm::Value* ptr, llvm::Value* stride) = 0;
  /// tdpbf16ps: C (f32) += A (bf16 pairs) * B (bf16 pairs, VNNI rows).
  virtual void dotBf16(llvm::IRBuilder<>& b, int c, int a, int bt) = 0;
  /// tdpb[su][su]d: C (s32) += A (byte quads) * B (byte quads, VNNI rows).
  virtual void dotInt8(llvm::IRBuilder<>& b, TileIntDot kind, int c, int a, int bt) = 0;
};

/// The instruction or its twin, as mb.twins() says.
std::unique_ptr<TileOps> makeTileOps(ModuleBuilder& mb);

/// vdpbf16ps on one zmm: acc (<16 x float>) + the pair products of a and b (each 16 bf16 pairs,
/// as <16 x i32>), per lane fma(a.even, b.even, fma(a.odd, b.odd, acc)) with DAZ/FTZ.
llvm::Value* emitDotBf16Pairs(ModuleBuilder& mb, llvm::IRBuilder<>& b, llvm::Value* acc,
                              llvm::Value* a, llvm::Value* bv);
/// vpdpbusd on one zmm: acc (<16 x i32>) + per lane the four u8 (a) x s8 (b) products of its
/// quad, wrapping.
llvm::Value* emitDotU8S8Quads(ModuleBuilder& mb, llvm::IRBuilder<>& b, llvm::Value* acc,
                              llvm::Value* a, llvm::Value* bv);

/// The AVX2 int8 dot on one ymm: acc (<8 x i32>) + per lane the four u8 (a) x s8 (b) products
/// of its quad, as vpmaddubsw (the two products of each pair summed with signed saturation to
/// s16), vpmaddwd by ones (the two pairs to s32) and vpaddd: equal to vpdpbusd while no pair sum
/// leaves s16, which 7-bit weights (|b| <= 64) guarantee; beyond, the pair sum saturates.
llvm::Value* emitDotU8S8QuadsAvx2(ModuleBuilder& mb, llvm::IRBuilder<>& b, llvm::Value* acc,
                                  llvm::Value* a, llvm::Value* bv);
/// bf16 bits (i16 or a vector of i16 or of i32 holding them in the low half) as f32, exactly:
/// a bf16 is the upper half of its f32.
llvm::Value* bf16ToF32(llvm::IRBuilder<>& b, llvm::Value* bits, llvm::Type* f32Ty);
/// vcvtneps2bf16 on one zmm: <16 x float> to <16 x i16>, round to nearest even, denormal inputs
/// as signed zeros, NaNs quieted (the twin: that arithmetic as integer IR, any width).
llvm::Value* emitRoundToBf16(ModuleBuilder& mb, llvm::IRBuilder<>& b, llvm::Value* v);

} // namespace tunec::codegen
