// The k-step strategies of the microkernel. A strategy is what differs between ISAs and element
// types: how one step along k updates the accumulators of the register tile (today the
// broadcast FMA on f32; vdpbf16ps on bf16 k-pairs, vpdpbusd (AVX512-VNNI) or vpmaddubsw +
// vpmaddwd (AVX2) on u8 x s8 k-quads; the AMX tile ops are a core of their own) and how its
// accumulators become f32 vectors for the epilogue. The frame around it (microkernel.cpp: the
// signature, the batch-reduce and k loops with unrolling and the remainder, accumulating into C,
// the epilogue, the tail masks) is shared, so a new strategy is one class, chosen in one place
// (kStepStrategyFor).
#pragma once

#include "codegen/microkernel.h"
#include "codegen/module_builder.h"

#include <llvm/IR/IRBuilder.h>
#include <memory>
#include <vector>

namespace tunec::codegen {

/// What a k step reads, for the batch element being reduced.
struct KStepOperands {
  llvm::Value* aBase = nullptr;     ///< this batch element's A
  llvm::Value* bBase = nullptr;     ///< this batch element's B panel
  llvm::Value* lda = nullptr;       ///< A's row stride, in elements
  llvm::Value* ldb = nullptr;       ///< B's row stride, in elements
  llvm::Value* ldaGroup = nullptr;  ///< row-grouped A: the stride between groups
  llvm::Value* prefetchB = nullptr; ///< this batch element's prefetch stream, or null
  llvm::Value* kScale = nullptr;    ///< spec.scaleK: this batch element's per-k scale of B
};

class KStepStrategy {
public:
  virtual ~KStepStrategy() = default;
  /// The type of one accumulator; the tile has mr x (nr / lanes) of them.
  virtual llvm::Type* accumulatorType() const = 0;
  /// Elements of k one step consumes (1 for f32; 2 for bf16 pairs, 4 for int8 quads).
  virtual int kPerStep() const = 0;
  /// One step at k index `kk`: the accumulators after it.
  virtual std::vector<llvm::Value*> step(llvm::IRBuilder<>& b, const KStepOperands& in,
                                         llvm::Value* kk,
                                         const std::vector<llvm::Value*>& acc) const = 0;
  /// The accumulators as f32 vectors, row-major over (row, vector), for the epilogue: as they
  /// are when they are f32 (the FMA and vdpbf16ps steps); an i32 strategy converts them.
  virtual std::vector<llvm::Value*> toF32(llvm::IRBuilder<>&,
                                          const std::vector<llvm::Value*>& acc) const {
    return acc;
  }
};

/// Where row `row` (an i64) of A starts, in elements from in.aBase: row * lda, or, for a spec
/// with row groups, (row / g) * ldaGroup + (row % g) * lda. Shared by the strategies.
llvm::Value* aRowOffset(llvm::IRBuilder<>& b, const MicrokernelSpec& spec, const KStepOperands& in,
                        llvm::Value* row);

/// The f32 strategy (kstep_broadcast_fma.cpp).
std::unique_ptr<KStepStrategy> makeBroadcastFmaStep(ModuleBuilder& mb, const MicrokernelSpec& spec);

/// The bf16 strategy, vdpbf16ps on k-pairs (kstep_group_dot.cpp).
std::unique_ptr<KStepStrategy> makeBf16DotStep(ModuleBuilder& mb, const MicrokernelSpec& spec);

/// The int8 strategy, vpdpbusd on u8 x s8 k-quads into i32 (kstep_group_dot.cpp).
std::unique_ptr<KStepStrategy> makeU8S8DotStep(ModuleBuilder& mb, const MicrokernelSpec& spec);

/// The AVX2 int8 strategy, vpmaddubsw + vpmaddwd on the same quads, for 7-bit weights
/// (kstep_group_dot.cpp).
std::unique_ptr<KStepStrategy> makeU8S8MaddStep(ModuleBuilder& mb, const MicrokernelSpec& spec);

/// The strategy of a spec (its ISA and element types), chosen here and nowhere else; the spec
/// passed checkMicrokernelSpec.
std::unique_ptr<KStepStrategy> kStepStrategyFor(ModuleBuilder& mb, const MicrokernelSpec& spec);
/// Whether some strategy implements these element types on this ISA (checkMicrokernelSpec).
bool hasKStepStrategy(const MicrokernelSpec& spec);

} // namespace tunec::codegen
