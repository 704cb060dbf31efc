// Arena planning by liveness, greedy by size, with the live-set lower bound for comparison.
#include "passes/memory_plan.h"

#include <algorithm>

namespace tunec::passes {

namespace {

struct Interval {
  ValueId value;
  int64_t bytes;
  int first, last; ///< node indices: producer, last consumer
};

int64_t align(int64_t bytes) {
  return (bytes + MemoryPlan::kAlignment - 1) / MemoryPlan::kAlignment * MemoryPlan::kAlignment;
}

} // namespace

MemoryPlan planMemory(const Graph& graph) {
  MemoryPlan plan;
  plan.offsets.assign(graph.values().size(), -1);
  std::vector<bool> isOutput(graph.values().size(), false);
  for (ValueId out : graph.outputs()) isOutput[static_cast<size_t>(out)] = true;
  std::vector<int> lastUse(graph.values().size(), -1);
  for (size_t n = 0; n < graph.nodes().size(); ++n)
    for (ValueId in : graph.nodes()[n].inputs)
      if (in != kNoValue) lastUse[static_cast<size_t>(in)] = static_cast<int>(n);
  std::vector<Interval> intervals;
  for (size_t n = 0; n < graph.nodes().size(); ++n)
    for (ValueId out : graph.nodes()[n].outputs) {
      const Value& v = graph.value(out);
      if (isOutput[static_cast<size_t>(out)] || v.constant) continue;
      int64_t bytes = align(static_cast<int64_t>(v.type.shape.numel() *
                                                 static_cast<int64_t>(dtypeSize(v.type.dtype))));
      // An output nothing reads still needs its buffer while its producer runs.
      int last = std::max(lastUse[static_cast<size_t>(out)], static_cast<int>(n));
      intervals.push_back({out, bytes, static_cast<int>(n), last});
      plan.totalBytes += bytes;
    }
  plan.tensors = static_cast<int64_t>(intervals.size());
  // Lower bound: the largest sum of sizes live at one node.
  std::vector<int64_t> live(graph.nodes().size() + 1, 0);
  for (const Interval& i : intervals)
    for (int t = i.first; t <= i.last; ++t) live[static_cast<size_t>(t)] += i.bytes;
  plan.lowerBoundBytes = live.empty() ? 0 : *std::max_element(live.begin(), live.end());
  // Greedy by size (largest first; ties by earlier start).
  std::vector<Interval> order = intervals;
  std::sort(order.begin(), order.end(), [](const Interval& a, const Interval& b) {
    return a.bytes != b.bytes ? a.bytes > b.bytes : a.first < b.first;
  });
  std::vector<std::pair<int64_t, const Interval*>> placed; // (offset, interval)
  for (const Interval& cur : order) {
    std::vector<std::pair<int64_t, int64_t>> busy; // [begin, end) of overlapping-in-time tensors
    for (const auto& [offset, other] : placed)
      if (other->first <= cur.last && cur.first <= other->last)
        busy.emplace_back(offset, offset + other->bytes);
    std::sort(busy.begin(), busy.end());
    int64_t offset = 0;
    for (const auto& [begin, end] : busy) {
      if (offset + cur.bytes <= begin) break;
      offset = std::max(offset, end);
    }
    plan.offsets[static_cast<size_t>(cur.value)] = offset;
    plan.peakBytes = std::max(plan.peakBytes, offset + cur.bytes);
    placed.emplace_back(offset, &cur);
  }
  return plan;
}

} // namespace tunec::passes
