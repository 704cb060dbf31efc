// The matmul template: Gemm/MatMul (batched, transposed operands) and 1x1 convolution as a
// BLIS-style loop nest of cache blocks around the brgemm microkernel.
#pragma once

#include "support/error.h"
#include "support/target.h"
#include "templates/isa.h"
#include "templates/knobs.h"

#include <nlohmann/json.hpp>

namespace tunec {

/// Bumped whenever the template's code or the meaning of a knob changes, so that old tuning
/// records are not applied silently (DESIGN.md, decision 7).
inline constexpr int kMatmulTemplateVersion = 1;

/// C[b] (M x N) = op(A[b]) (M x K) * op(B[b]) (K x N), row-major, of the element types in `types`.
///
/// Operands are dense by default. A computed operand may instead be a strided view of a larger
/// tensor (the heads of attention, read in place of a Transpose): a leading dimension (the
/// distance between rows as stored) and a batch stride, both in elements; 0 means dense.
struct MatmulWorkload {
  KernelTypes types; ///< A is src, B is wei, C is dst
  int64_t batch = 1;
  int64_t m = 0, n = 0, k = 0;
  bool transA = false;    ///< A stored K x M
  bool transB = false;    ///< B stored N x K
  bool constantB = true;  ///< B is a constant, pre-packed at compile time
  bool broadcastB = true; ///< one B for every batch (weights); else one per batch
  int threads = 1;
  /// The weights come from memory, as in a model whose constants exceed the L3: the tuner
  /// times the kernel with its packed weights evicted. A measurement condition, not a code
  /// change; part of the key ("cold_weights": true, absent when false) so that cold and warm
  /// measurements never compete.
  bool coldWeights = false;
  int64_t lda = 0, ldb = 0, ldc = 0;             ///< 0: dense
  int64_t strideA = 0, strideB = 0, strideC = 0; ///< between batches; 0: dense
  /// > 0: C is stored as n / splitN dense m x splitN matrices one after the other (sibling
  /// matmuls of one input merged into one, each output its own tensor); "split_n" in the key.
  int64_t splitN = 0;

  /// The layout actually used: the given leading dimension and batch stride, or the dense one.
  int64_t aLd() const { return lda ? lda : transA ? m : k; }
  int64_t bLd() const { return ldb ? ldb : transB ? k : n; }
  int64_t cLd() const { return splitN ? splitN : ldc ? ldc : n; }
  int64_t aStride() const { return strideA ? strideA : m * k; }
  int64_t bStride() const { return strideB ? strideB : k * n; }
  int64_t cStride() const { return strideC ? strideC : m * n; }
  /// Elements spanned by each operand, from the first to one past the last it touches.
  int64_t aExtent() const;
  int64_t bExtent() const;
  int64_t cExtent() const;
  bool dense() const { return !lda && !ldb && !ldc && !strideA && !strideB && !strideC; }

  double flops() const { return 2.0 * static_cast<double>(batch * m * n * k); }
  Status check() const;
  /// Canonical JSON: the workload key (DESIGN.md, decision 4).
  nlohmann::json toJson() const;
  static Expected<MatmulWorkload> fromJson(const nlohmann::json& j);
};

/// Order of the three block loops, outermost first (spelled "nkm" ... in records).
enum class MatmulLoopOrder : uint8_t { Nkm, Nmk, Mkn, Mnk, Knm, Kmn };
/// The loop whose blocks are split across threads.
enum class MatmulParallel : uint8_t { None, Batch, M, N };

template <> struct Spellings<MatmulLoopOrder> {
  static constexpr std::pair<MatmulLoopOrder, std::string_view> values[] = {
      {MatmulLoopOrder::Nkm, "nkm"}, {MatmulLoopOrder::Nmk, "nmk"}, {MatmulLoopOrder::Mkn, "mkn"},
      {MatmulLoopOrder::Mnk, "mnk"}, {MatmulLoopOrder::Knm, "knm"}, {MatmulLoopOrder::Kmn, "kmn"}};
};
template <> struct Spellings<MatmulParallel> {
  static constexpr std::pair<MatmulParallel, std::string_view> values[] = {
      {MatmulParallel::None, "none"},
      {MatmulParallel::Batch, "batch"},
      {MatmulParallel::M, "m"},
      {MatmulParallel::N, "n"}};
};

/// A point of the knob space.
struct MatmulConfig {
  Isa isa = Isa::Avx512;
  int mr = 8, nr = 32;                   ///< register tile
  int64_t mc = 128, nc = 1024, kc = 256; ///< cache blocks
  MatmulLoopOrder loopOrder = MatmulLoopOrder::Nkm;
  MatmulParallel parallel = MatmulParallel::None;
  bool packA = true; ///< copy A blocks into mr-row panels

  /// The dimension ('m', 'n' or 'k') of block loop `level` (0 outermost).
  char loopDim(int level) const { return spell(loopOrder)[static_cast<size_t>(level)]; }

  nlohmann::json toJson() const;
  static Expected<MatmulConfig> fromJson(const nlohmann::json& j);
  bool operator==(const MatmulConfig&) const = default;
};

/// Checks a config against the workload and ISA (register file, block multiples, orders).
Status validateMatmulConfig(const MatmulWorkload& w, const MatmulConfig& c);
/// Cache-aware analytical default (BLIS-style: kc from L1, mc from L2, nc from L3).
MatmulConfig defaultMatmulConfig(const MatmulWorkload& w, Isa isa, const Target& target);
/// Candidate values of every knob for this workload.
KnobSpace matmulKnobSpace(const MatmulWorkload& w, Isa isa);
/// Builds a config from one value per knob of `space` (matmulKnobSpace's knobs, set by name);
/// mc and nc are rounded down to multiples of mr and nr and all blocks clamped to the problem,
/// so that most points of the space map to a legal config (still check with
/// validateMatmulConfig).
Expected<MatmulConfig> matmulConfigFromKnobs(const MatmulWorkload& w, Isa isa,
                                             const KnobSpace& space,
                                             const std::vector<nlohmann::json>& values);

/// A matmul's M read at run time: extents[extent] of the run (KernelArgs::extents), from `min` to
/// the workload's M (a size bucket). The kernel's loops and tails run to the run's M; what it
/// decides once for all of them (how a B panel's prefetches are spread over the row tiles) holds
/// from the smallest.
struct RunTimeRows {
  int32_t extent = -1; ///< -1: M is static
  int64_t min = 1;
  bool active() const { return extent >= 0; }
};

} // namespace tunec
