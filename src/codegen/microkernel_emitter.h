// Internal to codegen: emits a microkernel function into a module (drivers inline it).
#pragma once

#include "codegen/microkernel.h"
#include "codegen/module_builder.h"
#include "codegen/tile_ops.h"
#include "templates/matmul_template.h"

#include <functional>

namespace tunec::codegen {

/// Emits the microkernel as a function with the MicrokernelFn signature. The spec must satisfy
/// checkMicrokernelSpec. An internal kernel is inlined into its caller when `inlined` (the full
/// tile of a loop nest) and kept out of line otherwise (tail tiles: less code to optimize).
llvm::Function* emitMicrokernel(ModuleBuilder& mb, const MicrokernelSpec& spec,
                                const std::string& name, bool internal, bool inlined = false);

/// The microkernel's arguments in their order, each with its LLVM type (MicrokernelFn spells
/// the same list in C): the one list of the function type, the callee's parameters and every
/// call, so that a call site names what it passes.
#define TUNEC_MICROKERNEL_ARGS(X)                                                                  \
  X(a, ptr)                                                                                        \
  X(b, ptr)                                                                                        \
  X(c, ptr)                                                                                        \
  X(k, i64)                                                                                        \
  X(lda, i64)                                                                                      \
  X(ldb, i64)                                                                                      \
  X(ldc, i64)                                                                                      \
  X(batch, i64)                                                                                    \
  X(flags, i32)                                                                                    \
  X(bias, ptr)                                                                                     \
  X(addend, ptr)                                                                                   \
  X(ldAdd, i64)                                                                                    \
  X(ldaGroup, i64)                                                                                 \
  X(prefetchB, ptr)                                                                                \
  X(kScale, ptr)                                                                                   \
  X(columnScale, ptr)                                                                              \
  X(cRows, ptr)

/// The element offset in the next B panel where tile `tile` (an i64 index of the tiles that read
/// the panel in turn) starts its prefetches (MicrokernelArgs::prefetchB): line column
/// p.firstLine(tile) of the rows of phase p.phase(tile); a line column is lineElems elements of
/// a packed row, a phase's first row rowElems elements on.
llvm::Value* emitPanelPrefetchOffset(llvm::IRBuilder<>& b, const PanelPrefetch& p,
                                     llvm::Value* tile, int64_t lineElems, int64_t rowElems);

/// The arguments of one microkernel call, or the parameters of a microkernel function, by name.
struct MicrokernelArgs {
#define TUNEC_MICROKERNEL_FIELD(name, type) llvm::Value* name = nullptr;
  TUNEC_MICROKERNEL_ARGS(TUNEC_MICROKERNEL_FIELD)
#undef TUNEC_MICROKERNEL_FIELD
  /// The parameters of `fn` (made by createMicrokernelFunction).
  static MicrokernelArgs of(llvm::Function* fn);
  /// The argument list of a call: a field left unset passes a null pointer or 0 (the kernel
  /// reads such an argument only when its spec says it has one).
  std::vector<llvm::Value*> list(ModuleBuilder& mb) const;
};

/// A function of the MicrokernelFn signature (C noalias), inlined into its caller when internal
/// and `inlined`, kept out of line when internal otherwise: the one declaration of every
/// reduction core's entry.
llvm::Function* createMicrokernelFunction(ModuleBuilder& mb, const std::string& name, bool internal,
                                          bool inlined);

/// The shared epilogue of every reduction core (vector k steps and AMX tiles): for each row i and
/// f32 vector j of the tile, acc(i, j) (+ C when accumulating), the post-ops (last K block), then
/// the store of f32 or bf16 C, the last vector of a row masked to spec.nValid. It reads the
/// kernel's c, ldc, flags, bias, addend, ldAdd and columnScale from `params`.
void emitTileEpilogue(ModuleBuilder& mb, llvm::IRBuilder<>& b, const MicrokernelSpec& spec,
                      const std::function<llvm::Value*(int, int)>& acc,
                      const MicrokernelArgs& params);

/// The call packing a computed B of `w` (at `raw`: f32 when `fromF32`, else of w.types.wei)
/// into the panels the microkernels of `c` read, at `packed`: f32 panels, or bf16 k-pair panels,
/// on AMX each in its slot of k padded to a tile row (tunec_pack_b_*_slots). The matmul packs a
/// computed B per call, the attention its K and V per head.
void emitPackComputedB(ModuleBuilder& mb, llvm::IRBuilder<>& b, const MatmulWorkload& w,
                       const MatmulConfig& c, bool fromF32, llvm::Value* raw, llvm::Value* packed);

/// tunec_pack_a_bf16_tiles (runtime/packing.h) declared in the module: A (f32 or bf16) packed
/// into AMX's 1 KiB tiles, for the matmul's blocks and the attention's Q.
llvm::FunctionCallee declarePackABf16Tiles(ModuleBuilder& mb);

/// The palette of every AMX kernel: all 8 tiles 16 rows of 64 bytes (C tiles of 16x16 f32, A and
/// B tiles of 16 rows of one k step). One for all tail variants, so that a loop nest loads it once
/// per task (MicrokernelSpec::tilesConfigured).
TilePalette amxPalette();

/// The AMX reduction core (amx_microkernel.cpp): C tiles instead of vector accumulators, with the
/// same signature and epilogue as emitMicrokernel, which calls it for spec.isa == Isa::Amx.
llvm::Function* emitAmxMicrokernel(ModuleBuilder& mb, const MicrokernelSpec& spec,
                                   const std::string& name, bool internal, bool inlined);

} // namespace tunec::codegen
