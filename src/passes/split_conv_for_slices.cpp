// A Conv (one group) whose result, maybe through one-to-one activations, is read only by
// channel Slices is split into one Conv per Slice over those output channels' weights and bias:
// the same arithmetic, and each part a whole result that its consumer can take in place (the
// branch of ShuffleNet's downsampling unit, whose halves land in both halves of the shuffled
// output after order-concat-for-gathers).
#include "ir/op_registry.h"
#include "passes/passes.h"
#include "passes/pattern.h"
#include "passes/rewriter.h"

#include <cstring>
#include <map>
#include <set>

namespace tunec::passes {

namespace {

// A Slice of only the channels of a 4-d value (axis 1, step 1): its [lo, hi).
std::optional<std::pair<int64_t, int64_t>> channelRange(const Graph& graph, const Node& slice) {
  if (slice.kind != OpKind::Slice || graph.value(slice.inputs[0]).type.shape.rank() != 4)
    return std::nullopt;
  return slicedRange(graph, slice, 1);
}

struct Split {
  NodeId conv;
  std::vector<NodeId> chain; ///< the activations after it, in order
};

// Rows [lo, hi) of a constant whose first dimension is the output channel.
Tensor rows(const Tensor& t, int64_t lo, int64_t hi) {
  std::vector<int64_t> dims = t.shape().dims();
  int64_t per = t.numel() / dims[0];
  dims[0] = hi - lo;
  Tensor out(t.dtype(), Shape(dims));
  size_t bytes = static_cast<size_t>(per) * dtypeSize(t.dtype());
  std::memcpy(out.dataAs<uint8_t>(), t.dataAs<uint8_t>() + static_cast<size_t>(lo) * bytes,
              static_cast<size_t>(hi - lo) * bytes);
  return out;
}

} // namespace

Expected<Graph> splitConvForSlices(const Graph& graph) {
  std::vector<int> uses = useCounts(graph);
  std::vector<std::vector<NodeId>> readers = readersOf(graph);
  std::map<NodeId, Split> bySlice; // each Slice -> the Conv (and chain) it takes a part of
  std::set<NodeId> dropped;
  for (size_t n = 0; n < graph.nodes().size(); ++n) {
    const Node& conv = graph.nodes()[n];
    if (!splitsByOutputChannels(graph, conv)) continue;
    Split split{static_cast<NodeId>(n), {}};
    ValueId v = conv.outputs[0];
    while (uses[static_cast<size_t>(v)] == 1 && readers[static_cast<size_t>(v)].size() == 1 &&
           isChannelwiseActivation(graph.node(readers[static_cast<size_t>(v)][0]).kind)) {
      split.chain.push_back(readers[static_cast<size_t>(v)][0]);
      v = graph.node(split.chain.back()).outputs[0];
    }
    const std::vector<NodeId>& slices = readers[static_cast<size_t>(v)];
    bool all = !slices.empty() && uses[static_cast<size_t>(v)] == static_cast<int>(slices.size());
    for (NodeId s : slices) all = all && channelRange(graph, graph.node(s));
    if (!all) continue;
    for (NodeId s : slices) bySlice.emplace(s, split);
    dropped.insert(split.conv);
    dropped.insert(split.chain.begin(), split.chain.end());
  }
  if (bySlice.empty()) return graph;
  GraphRewriter rw(graph);
  for (size_t n = 0; n < graph.nodes().size(); ++n) {
    const Node& node = graph.nodes()[n];
    if (dropped.count(static_cast<NodeId>(n))) continue;
    auto it = bySlice.find(static_cast<NodeId>(n));
    if (it == bySlice.end()) {
      TUNEC_TRY(rw.copy(node));
      continue;
    }
    auto [lo, hi] = *channelRange(graph, node);
    const Node& conv = graph.node(it->second.conv);
    std::string name = conv.name + ".oc" + std::to_string(lo);
    std::vector<ValueId> inputs = {
        rw.map(conv.inputs[0]),
        rw.constant(name + ".weight", rows(*graph.value(conv.inputs[1]).constant, lo, hi))};
    if (conv.inputs.size() > 2 && conv.inputs[2] != kNoValue)
      inputs.push_back(
          rw.constant(name + ".bias", rows(*graph.value(conv.inputs[2]).constant, lo, hi)));
    TUNEC_ASSIGN_OR_RETURN(auto outs,
                           rw.add(name, OpKind::Conv, conv.attrs, inputs, {name + "_output"}));
    ValueId v = outs[0];
    for (NodeId a : it->second.chain) {
      const Node& act = graph.node(a);
      std::string an = act.name + ".oc" + std::to_string(lo);
      TUNEC_ASSIGN_OR_RETURN(auto o, rw.add(an, act.kind, act.attrs, {v}, {an + "_output"}));
      v = o[0];
    }
    rw.replace(node.outputs[0], v);
  }
  return rw.finish();
}

} // namespace tunec::passes
