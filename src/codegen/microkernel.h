// The batch-reduce GEMM microkernel: C[mr x nr] (+)= sum over b of A_b[mr x k] * B_b[k x nr],
// generated as LLVM IR per (ISA, mr, nr), with the epilogue applied in registers.
#pragma once

#include "codegen/jit.h"
#include "templates/knobs.h"
#include "templates/post_ops.h"

#include <algorithm>
#include <cstdint>
#include <string>

namespace tunec {

/// What to generate. Contract (checked by checkMicrokernelSpec): nr is a multiple of the ISA's
/// f32 lanes; 1 <= nValid <= nr (columns past nValid are neither loaded nor stored); the
/// accumulators plus the B vectors plus one broadcast fit the vector register file.
struct MicrokernelSpec {
  Isa isa = Isa::Avx512;
  int mr = 8;
  int nr = 32;
  int nValid = 32; ///< valid columns of the tile (masked tail when < nr)
  bool aTransposed =
      false; ///< A element (i, k) at A[k*lda + i] (packed panels, transA) instead of A[i*lda + k]
  bool prefetchC = true; ///< prefetch the C tile for writing at kernel start
  Epilogue epilogue;
  int kUnroll = 1; ///< k steps per loop trip (a remainder loop handles k % kUnroll)
  /// > 0: A rows come in groups of this many (row i at (i / g) * ldaGroup + (i % g) * lda),
  /// e.g. a conv tile spanning several output rows of g pixels each.
  int aRowGroup = 0;
  /// Prefetch a stream of B into L2 while computing: at k step kk of batch element bi the kernel
  /// prefetches the cache line at prefetchB + (bi*k + kk)*ldb. The loop nest points it at the
  /// next B panel, so weights that come cold from memory (a model's layers each read their
  /// weights once) arrive before the tiles that need them instead of stalling the first one.
  bool prefetchB = false;
  /// With prefetchB: the B row a k step prefetches is kk rounded down to a multiple of this
  /// (1, 2 or 4), so a call covers 1/group of the rows of its line column and the loop nest can
  /// spread one panel's prefetches over group times more tiles (smoother DRAM traffic; the
  /// repeated prefetches of a line are dropped by the cache).
  int prefetchBGroup = 1;
  /// With prefetchB: a k step prefetches this many adjacent lines of its B row (1 to 8), so
  /// that fewer tiles than a row has line columns (a panel that 1 to 3 tiles of 64 columns read)
  /// still prefetch the whole next panel; see PanelPrefetch.
  int prefetchBLines = 1;
  /// Prefetch the A rows a few cache lines ahead into L1, one row per k step in turn. For tiles
  /// whose rows alias in L1 (aRowsAliasInL1): more rows than ways in one set evict each other
  /// before the next k steps read them (a stride-2 conv over 512 channels: 4 KiB apart).
  bool prefetchA = false;
  /// A is src, B is wei, the accumulators acc, C (the epilogue's output) dst; the k-step
  /// strategy is chosen by these and the ISA (kstep.h).
  KernelTypes types = {};
  /// Row kk of batch element bi's B is multiplied by kScale[bi * k + kk] (a per-input-channel
  /// scale of A applied to B in registers: squeeze-excite's channel gate in a 1x1 conv).
  bool scaleK = false;
  /// AMX: the caller loaded amxPalette() once for its task (ldtilecfg costs a quarter of a
  /// short kernel call), so the kernel does not configure the tiles itself.
  bool tilesConfigured = false;
  /// AMX: which operand's tiles are read once per call from L2 (tileloaddt1) so that the other,
  /// reused by the next calls, stays in L1: 'a', 'b' or 0 for neither.
  char amxStreamed = 0;
  /// AMX: A's rows are read where they are, lda elements apart (a convolution's input pixels),
  /// instead of from the 1 KiB tiles the matmul's loop nest packs; k is a whole number of steps.
  bool aRowsInPlace = false;
  /// Row i of C and of the addend is at pixel cRows[i] (times ldc and ldAdd), and a negative
  /// entry skips the row: a convolution's tile of virtual pixels, some of them padding columns
  /// (conv2d_amx_kernel.cpp).
  bool cRowMap = false;
};

/// How the tiles that read one B panel in turn share the prefetch of the next panel, whose rows
/// are `columns` cache lines wide: tile t prefetches `lines` adjacent line columns from
/// firstLine(t), in the rows of phase (t / slots()) % group (MicrokernelSpec::prefetchBGroup and
/// prefetchBLines). As many tiles as columns: a line column each; more, up to 4 times as many:
/// the rows are spread over them too; fewer (the 1 to 3 row tiles of 1 to 16 rows): each tile
/// takes several columns, so every line of the next panel is prefetched. (Before, a panel of
/// 64 columns read by 3 tiles left its fourth column to the hardware prefetcher, which found it
/// or not by the weights' address: BERT-base at 16 tokens took 27 or 37 ms by where in its page
/// the constants began, AMD EPYC Zen 4.)
struct PanelPrefetch {
  int group = 1;
  int lines = 1;
  int64_t columns = 1;
  /// The distinct first columns the tiles take in turn.
  int64_t slots() const { return (columns + lines - 1) / lines; }
  /// The first line column tile t prefetches.
  int64_t firstLine(int64_t tile) const {
    return std::min((tile % slots()) * lines, columns - lines);
  }
  int64_t phase(int64_t tile) const { return (tile / slots()) % group; }
};

/// The prefetch plan for a panel of width nr (a line column is 16 columns: 16 floats, bf16
/// pairs or i8 quads) that `tiles` tiles read in turn (at least one: the fewest a block has).
PanelPrefetch panelPrefetchFor(int64_t tiles, int nr);

/// True when more than 8 rows of an A tile (row offsets as the spec describes them, in elements
/// of `elemBytes`) fall into one set of a 4 KiB-period L1.
bool aRowsAliasInL1(int rows, int64_t lda, int group, int64_t ldaGroup, size_t elemBytes);

/// Runtime flags of a call.
enum MicrokernelFlags : int32_t {
  kUkrAccumulate = 1,    ///< add the existing C tile (later K blocks)
  kUkrApplyEpilogue = 2, ///< apply the post-ops (last K block)
};

/// Signature of a generated microkernel. B_b element (k, j) is at B_b[k*ldb + j] and must be
/// readable for all nr columns (packed panels are zero-padded); C and the addend (of the type
/// epilogueAddendType names) use row strides ldc and ldAdd; bias is indexed by column; ldaGroup
/// is read only by row-grouped kernels;
/// prefetchB only by kernels generated with spec.prefetchB (a prefetch never faults, any address
/// is valid); kScale only by kernels generated with spec.scaleK; columnScale (indexed by column,
/// as the bias) by epilogues with a ScalePerColumn; cRows (mr entries) only by kernels generated
/// with spec.cRowMap. Generated code names these arguments through
/// codegen::MicrokernelArgs (microkernel_emitter.h), whose list is this one.
using MicrokernelFn = void (*)(const float* const* a, const float* const* b, float* c, int64_t k,
                               int64_t lda, int64_t ldb, int64_t ldc, int64_t batch, int32_t flags,
                               const float* bias, const void* addend, int64_t ldAdd,
                               int64_t ldaGroup, const float* prefetchB, const float* kScale,
                               const float* columnScale, const int64_t* cRows);

/// Checks the generator's contract; the error says which limit a tile breaks.
Status checkMicrokernelSpec(const MicrokernelSpec& spec);
/// Vector registers the tile needs: accumulators, B vectors and one broadcast.
int microkernelRegisters(const MicrokernelSpec& spec);
/// dtype_op_MRxNR_isa name, e.g. "tunec_f32_brgemm_8x32_avx512" (plus tail/variant suffixes).
std::string microkernelName(const MicrokernelSpec& spec);
/// Generates, optimizes and JIT-compiles one microkernel.
Expected<MicrokernelFn> compileMicrokernel(Jit& jit, const MicrokernelSpec& spec);

} // namespace tunec
