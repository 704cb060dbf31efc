// Arena planning by liveness, greedy by size, with the live-set lower bound for comparison.
#include "passes/memory_plan.h"

#include <algorithm>

namespace tunec::passes {

namespace {

int64_t align(int64_t bytes) {
  return (bytes + MemoryPlan::kAlignment - 1) / MemoryPlan::kAlignment * MemoryPlan::kAlignment;
}

} // namespace

ArenaLayout planArena(const std::vector<ArenaRequest>& requests) {
  ArenaLayout layout;
  layout.offsets.assign(requests.size(), 0);
  int steps = 0;
  for (const ArenaRequest& r : requests) {
    layout.totalBytes += align(r.bytes);
    steps = std::max(steps, r.last + 1);
  }
  // Lower bound: the largest sum of sizes live at one step.
  std::vector<int64_t> live(static_cast<size_t>(steps) + 1, 0);
  for (const ArenaRequest& r : requests)
    for (int t = r.first; t <= r.last; ++t) live[static_cast<size_t>(t)] += align(r.bytes);
  layout.lowerBoundBytes = *std::max_element(live.begin(), live.end());
  // Greedy by size (largest first; ties by earlier start).
  std::vector<size_t> order(requests.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const ArenaRequest &x = requests[a], &y = requests[b];
    return align(x.bytes) != align(y.bytes) ? align(x.bytes) > align(y.bytes) : x.first < y.first;
  });
  std::vector<size_t> placed;
  for (size_t index : order) {
    const ArenaRequest& cur = requests[index];
    std::vector<std::pair<int64_t, int64_t>> busy; // [begin, end) of overlapping-in-time buffers
    for (size_t other : placed) {
      const ArenaRequest& o = requests[other];
      if (o.first <= cur.last && cur.first <= o.last)
        busy.emplace_back(layout.offsets[other], layout.offsets[other] + align(o.bytes));
    }
    std::sort(busy.begin(), busy.end());
    int64_t offset = 0;
    for (const auto& [begin, end] : busy) {
      if (offset + align(cur.bytes) <= begin) break;
      offset = std::max(offset, end);
    }
    layout.offsets[index] = offset;
    layout.peakBytes = std::max(layout.peakBytes, offset + align(cur.bytes));
    placed.push_back(index);
  }
  return layout;
}

MemoryPlan planMemory(const Graph& graph) {
  MemoryPlan plan;
  plan.offsets.assign(graph.values().size(), -1);
  std::vector<bool> isOutput(graph.values().size(), false);
  for (ValueId out : graph.outputs()) isOutput[static_cast<size_t>(out)] = true;
  std::vector<int> lastUse(graph.values().size(), -1);
  for (size_t n = 0; n < graph.nodes().size(); ++n)
    for (ValueId in : graph.nodes()[n].inputs)
      if (in != kNoValue) lastUse[static_cast<size_t>(in)] = static_cast<int>(n);
  std::vector<ValueId> values;
  std::vector<ArenaRequest> requests;
  for (size_t n = 0; n < graph.nodes().size(); ++n)
    for (ValueId out : graph.nodes()[n].outputs) {
      const Value& v = graph.value(out);
      if (isOutput[static_cast<size_t>(out)] || v.constant) continue;
      int64_t bytes = v.type.shape.numel() * static_cast<int64_t>(dtypeSize(v.type.dtype));
      // An output nothing reads still needs its buffer while its producer runs.
      int last = std::max(lastUse[static_cast<size_t>(out)], static_cast<int>(n));
      values.push_back(out);
      requests.push_back({bytes, static_cast<int>(n), last});
    }
  ArenaLayout layout = planArena(requests);
  for (size_t i = 0; i < values.size(); ++i)
    plan.offsets[static_cast<size_t>(values[i])] = layout.offsets[i];
  plan.tensors = static_cast<int64_t>(values.size());
  plan.peakBytes = layout.peakBytes;
  plan.totalBytes = layout.totalBytes;
  plan.lowerBoundBytes = layout.lowerBoundBytes;
  return plan;
}

} // namespace tunec::passes
