// The AMX reduction core: a grid of C tiles (up to 4 of 16 rows x 16 f32) with its A and B tiles,
// at most 8 tiles in all. Per k step of 32 bf16 (one 64-byte tile row): the A tiles (packed as
// whole 1 KiB tiles by tunec_pack_a_bf16_tiles), the B tiles (16 columns each of the k-pair panels
// [k/2][nr][2] that the bf16 path packs, so a B tile row is one pair row of 16 columns) and one
// tdpbf16ps per C tile. Every tile is 16 rows of 64 bytes in all variants (amxPalette), so the loop
// nest loads the palette once per task and an M tail computes the zero rows its packed A is
// padded with (and the epilogue drops them); the C tiles are stored to a 64-byte aligned scratch
// that the shared epilogue reads (microkernel.cpp). K (the k argument) is a multiple of 32: the
// loop nest pads A's rows and B's panels with zeros.
#include "codegen/microkernel_emitter.h"
#include "codegen/tile_ops.h"

#include <algorithm>

namespace tunec {

int amxTileCount(int mr, int nr) {
  int rowTiles = (mr + 15) / 16, colTiles = nr / 16;
  return rowTiles * colTiles + rowTiles + colTiles;
}

} // namespace tunec

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
  llvm::Type* i16 = llvm::Type::getInt16Ty(ctx);
  llvm::FixedVectorType* vecTy = mb.f32Vector();
  llvm::Function* fn = createMicrokernelFunction(mb, name, internal, inlined);
  auto args = fn->arg_begin();
  llvm::Value *aPtrs = &args[0], *bPtrs = &args[1], *c = &args[2], *k = &args[3], *lda = &args[4],
              *ldb = &args[5], *ldc = &args[6], *batch = &args[7], *flags = &args[8],
              *bias = &args[9], *addend = &args[10], *ldAdd = &args[11], *columnScale = &args[15];

  const TileGrid grid{(spec.mr + 15) / 16, spec.nr / 16};
  const TilePalette palette = amxPalette();

  auto* entry = llvm::BasicBlock::Create(ctx, "entry", fn);
  llvm::IRBuilder<> b(entry);
  // The C tiles as stored for the epilogue: rowTiles * 16 rows of nr floats.
  const int cRows = grid.rowTiles * 16;
  auto* scratch = b.CreateAlloca(mb.f32(), b.getInt64(cRows * spec.nr), "ctiles");
  scratch->setAlignment(llvm::Align(64));
  std::unique_ptr<TileOps> tiles = makeTileOps(mb);
  if (spec.tilesConfigured)
    tiles->assumeConfigured(b, palette);
  else
    tiles->configure(b, palette);
  for (int ti = 0; ti < grid.rowTiles; ++ti)
    for (int tj = 0; tj < grid.colTiles; ++tj) tiles->zero(b, grid.c(ti, tj));

  llvm::Value* aStride = b.getInt64(64); // A comes in tiles (tunec_pack_a_bf16_tiles)
  llvm::Value* bStride = b.CreateMul(ldb, b.getInt64(4)); // bytes between pair rows
  mb.forLoop(b, b.getInt64(0), batch, 1, "batch", [&](llvm::Value* bi) {
    llvm::Value* aBase = b.CreateLoad(ptr, b.CreateGEP(ptr, aPtrs, bi), "a");
    llvm::Value* bBase = b.CreateLoad(ptr, b.CreateGEP(ptr, bPtrs, bi), "bp");
    mb.forLoop(b, b.getInt64(0), k, 32, "kt", [&](llvm::Value* kk) {
      for (int tj = 0; tj < grid.colTiles; ++tj) // pair row kk / 2 at kk * nr, 16 columns a tile
        tiles->load(b, grid.b(tj),
                    b.CreateGEP(i16, bBase, b.CreateAdd(b.CreateMul(kk, ldb), b.getInt64(32 * tj))),
                    bStride, spec.amxStreamed == 'b');
      for (int ti = 0; ti < grid.rowTiles; ++ti) {
        // Row block ti at 16 ti lda, its k step kk / 32 at 16 kk (512 values a step).
        llvm::Value* rows = b.CreateMul(b.getInt64(16 * ti), lda);
        llvm::Value* step = b.CreateMul(kk, b.getInt64(16));
        tiles->load(b, grid.a(ti), b.CreateGEP(i16, aBase, b.CreateAdd(rows, step)), aStride,
                    spec.amxStreamed == 'a');
        for (int tj = 0; tj < grid.colTiles; ++tj)
          tiles->dotBf16(b, grid.c(ti, tj), grid.a(ti), grid.b(tj));
      }
    });
  });
  llvm::Value* cStride = b.getInt64(4 * spec.nr);
  for (int ti = 0; ti < grid.rowTiles; ++ti)
    for (int tj = 0; tj < grid.colTiles; ++tj)
      tiles->store(b, grid.c(ti, tj),
                   b.CreateGEP(mb.f32(), scratch, b.getInt64(16 * ti * spec.nr + 16 * tj)),
                   cStride);
  emitTileEpilogue(mb, b, spec,
                   [&](int i, int j) -> llvm::Value* {
                     return b.CreateAlignedLoad(
                         vecTy, b.CreateGEP(mb.f32(), scratch, b.getInt64(i * spec.nr + 16 * j)),
                         llvm::Align(64));
                   },
                   {c, ldc, flags, bias, addend, ldAdd, columnScale});
  b.CreateRetVoid();
  return fn;
}

} // namespace tunec::codegen
