// The AMX reduction core: a grid of C tiles (up to 4 of 16 rows x 16 f32 or i32) with its A and
// B tiles, at most 8 tiles in all. Per k step of one 64-byte tile row (32 bf16 or 64 int8): the A
// tiles (packed as whole 1 KiB tiles by tunec_pack_a_bf16_tiles or tunec_pack_a_u8_tiles), the B
// tiles (16 columns each of the k-pair panels [k/2][nr][2] of the bf16 path, or the k-quad panels
// [k/4][nr][4] of i8, so a B tile row is one pair or quad row of 16 columns) and one tdpbf16ps
// (tdpbusd) per C tile. Every tile is 16 rows of 64 bytes in all variants (amxPalette), so the
// loop nest loads the palette once per task and an M tail computes the zero rows its packed A is
// padded with (and the epilogue drops them). A convolution's A rows are read in place instead
// (spec.aRowsInPlace: its input pixels, lda apart) and its C rows through a row map
// (spec.cRowMap: rows that are padding columns are dropped); the C tiles are stored to a 64-byte
// aligned scratch that the shared epilogue reads (microkernel.cpp), i32 sums converted to f32
// first. K (the k argument) is a multiple of the k step: the loop nest pads A's rows and B's panels
// with zeros.
#include "codegen/microkernel_emitter.h"
#include "codegen/tile_ops.h"

#include <algorithm>

namespace tunec::codegen {

namespace {

/// The tile indices of a spec: C tiles first (row-major over the grid), then A, then B.
struct TileGrid {
  int rowTiles, colTiles;
  int c(int ti, int tj) const { return ti * colTiles + tj; }
  int a(int ti) const { return rowTiles * colTiles + ti; }
  int b(int tj) const { return rowTiles * colTiles + rowTiles + tj; }
};

} // namespace

TilePalette amxPalette() {
  TilePalette palette;
  palette.rows.fill(16);
  palette.colsb.fill(64);
  return palette;
}

llvm::Function* emitAmxMicrokernel(ModuleBuilder& mb, const MicrokernelSpec& spec,
                                   const std::string& name, bool internal, bool inlined) {
  llvm::LLVMContext& ctx = mb.context();
  llvm::Type* ptr = mb.ptr();
  // Elements of A and B as the tiles hold them: bf16 (i16) pairs, or u8 and i8 quads (i8). One
  // tile row is 64 bytes of k: 32 bf16 or 64 int8 values.
  const bool int8 = isInt8Gemm(spec.types);
  llvm::Type* elem = int8 ? llvm::Type::getInt8Ty(ctx) : llvm::Type::getInt16Ty(ctx);
  const int64_t kStep = int8 ? 64 : 32;
  llvm::FixedVectorType* vecTy = mb.f32Vector();
  llvm::Function* fn = createMicrokernelFunction(mb, name, internal, inlined);
  const MicrokernelArgs params = MicrokernelArgs::of(fn);
  llvm::Value *aPtrs = params.a, *bPtrs = params.b, *k = params.k, *lda = params.lda,
              *ldb = params.ldb, *batch = params.batch;

  const TileGrid grid{(spec.mr + 15) / 16, spec.nr / 16};
  const TilePalette palette = amxPalette();

  auto* entry = llvm::BasicBlock::Create(ctx, "entry", fn);
  llvm::IRBuilder<> b(entry);
  // The C tiles as stored for the epilogue: rowTiles * 16 rows of nr f32 (i32 for int8).
  const int cRows = grid.rowTiles * 16;
  llvm::Type* accTy = int8 ? mb.i32() : mb.f32();
  auto* scratch = b.CreateAlloca(accTy, b.getInt64(cRows * spec.nr), "ctiles");
  scratch->setAlignment(llvm::Align(64));
  std::unique_ptr<TileOps> tiles = makeTileOps(mb);
  if (spec.tilesConfigured)
    tiles->assumeConfigured(b, palette);
  else
    tiles->configure(b, palette);
  for (int ti = 0; ti < grid.rowTiles; ++ti)
    for (int tj = 0; tj < grid.colTiles; ++tj) tiles->zero(b, grid.c(ti, tj));

  // A comes in tiles (tunec_pack_a_*_tiles), or its rows are read in place, lda elements apart.
  const int64_t elemBytes = int8 ? 1 : 2;
  llvm::Value* aStride =
      spec.aRowsInPlace ? b.CreateMul(lda, b.getInt64(elemBytes)) : b.getInt64(64);
  llvm::Value* bStride = b.CreateMul(ldb, b.getInt64(4)); // bytes between pair or quad rows
  mb.forLoop(b, b.getInt64(0), batch, 1, "batch", [&](llvm::Value* bi) {
    llvm::Value* aBase = b.CreateLoad(ptr, b.CreateGEP(ptr, aPtrs, bi), "a");
    llvm::Value* bBase = b.CreateLoad(ptr, b.CreateGEP(ptr, bPtrs, bi), "bp");
    mb.forLoop(b, b.getInt64(0), k, kStep, "kt", [&](llvm::Value* kk) {
      // Pair (quad) row kk / 2 (kk / 4) at kk * nr; a tile is 16 columns, 64 bytes of a row.
      for (int tj = 0; tj < grid.colTiles; ++tj)
        tiles->load(
            b, grid.b(tj),
            b.CreateGEP(elem, bBase, b.CreateAdd(b.CreateMul(kk, ldb), b.getInt64(kStep * tj))),
            bStride, spec.amxStreamed == 'b');
      for (int ti = 0; ti < grid.rowTiles; ++ti) {
        // Row block ti at 16 ti lda; its k step at 16 kk in packed tiles (16 rows of kStep
        // values a step), or at kk along the rows read in place.
        llvm::Value* rows = b.CreateMul(b.getInt64(16 * ti), lda);
        llvm::Value* step = spec.aRowsInPlace ? kk : b.CreateMul(kk, b.getInt64(16));
        tiles->load(b, grid.a(ti), b.CreateGEP(elem, aBase, b.CreateAdd(rows, step)), aStride,
                    spec.amxStreamed == 'a');
        for (int tj = 0; tj < grid.colTiles; ++tj) {
          if (int8)
            tiles->dotInt8(b, TileIntDot::Busd, grid.c(ti, tj), grid.a(ti), grid.b(tj));
          else
            tiles->dotBf16(b, grid.c(ti, tj), grid.a(ti), grid.b(tj));
        }
      }
    });
  });
  llvm::Value* cStride = b.getInt64(4 * spec.nr);
  for (int ti = 0; ti < grid.rowTiles; ++ti)
    for (int tj = 0; tj < grid.colTiles; ++tj)
      tiles->store(b, grid.c(ti, tj),
                   b.CreateGEP(accTy, scratch, b.getInt64(16 * ti * spec.nr + 16 * tj)), cStride);
  auto* i32Vec = llvm::FixedVectorType::get(mb.i32(), 16);
  emitTileEpilogue(
      mb, b, spec,
      [&](int i, int j) -> llvm::Value* {
        llvm::Value* at = b.CreateGEP(accTy, scratch, b.getInt64(i * spec.nr + 16 * j));
        if (!int8) return b.CreateAlignedLoad(vecTy, at, llvm::Align(64));
        // The exact i32 sums, rounded to the nearest f32 for the epilogue.
        return b.CreateSIToFP(b.CreateAlignedLoad(i32Vec, at, llvm::Align(64)), vecTy);
      },
      params);
  b.CreateRetVoid();
  return fn;
}

} // namespace tunec::codegen
