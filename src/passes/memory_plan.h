// Memory planning: every intermediate tensor gets an offset in one arena, by liveness
// (DESIGN.md, decision 9).
#pragma once

#include "ir/graph.h"

#include <cstdint>
#include <vector>

namespace tunec::passes {

struct MemoryPlan {
  static constexpr int64_t kAlignment = 64;
  std::vector<int64_t> offsets; ///< per value id; -1 for inputs, constants and model outputs
  int64_t peakBytes = 0;        ///< arena size
  int64_t totalBytes = 0;       ///< sum of all intermediate tensors (no reuse)
  int64_t lowerBoundBytes = 0;  ///< the largest set of tensors live at once
  int64_t tensors = 0;
};

/// One buffer to place: its size and the steps that define and last use it (inclusive).
struct ArenaRequest {
  int64_t bytes = 0;
  int first = 0, last = 0;
};

struct ArenaLayout {
  std::vector<int64_t> offsets; ///< per request
  int64_t peakBytes = 0, totalBytes = 0, lowerBoundBytes = 0;
};

/// Places buffers in one arena, greedy by size: largest first, each at the lowest aligned
/// offset that overlaps no placed buffer whose lifetime intersects its own; also the live-set
/// lower bound. Sizes are rounded up to kAlignment.
ArenaLayout planArena(const std::vector<ArenaRequest>& requests);

/// Plans the arena for a graph's intermediates (node outputs that are not model outputs).
/// Greedy by size: tensors in decreasing size each take the lowest aligned offset that overlaps
/// no placed tensor whose lifetime intersects its own (lifetime = producer to last consumer).
MemoryPlan planMemory(const Graph& graph);

} // namespace tunec::passes
