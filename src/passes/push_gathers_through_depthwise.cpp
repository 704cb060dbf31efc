// A depthwise Conv of a channel permutation, DW(Gather(x, p)), is the permutation of a
// depthwise Conv of x with its filters and bias permuted the other way: Gather(DW'(x), p). The
// Gather moves past the channel-wise op, to where a group-1 Conv can absorb it into its weights
// (absorb-channel-gathers): ShuffleNet's downsampling unit reads the shuffled output with a
// depthwise Conv and a pointwise one, and neither then needs the shuffle copied.
#include "ir/op_registry.h"
#include "passes/passes.h"
#include "passes/pattern.h"
#include "passes/rewriter.h"

#include <cstring>
#include <map>

namespace tunec::passes {

namespace {

// The constant indices of a Gather along axis 1 of a 4-d value when they permute all of its
// channels.
std::optional<std::vector<int64_t>> channelPermutation(const Graph& graph, const Node& gather) {
  const Shape& xs = graph.value(gather.inputs[0]).type.shape;
  if (xs.rank() != 4) return std::nullopt;
  auto p = constantGatherIndices(graph, gather, 1);
  if (!p || static_cast<int64_t>(p->size()) != xs[1] || permutedRangeStart(*p) != 0)
    return std::nullopt;
  return p;
}

// Rows of `t` (first dimension the channel) placed so that row j lands at p[j].
Tensor scatterRows(const Tensor& t, const std::vector<int64_t>& p) {
  Tensor out(t.dtype(), t.shape());
  size_t bytes = t.byteSize() / p.size();
  for (size_t j = 0; j < p.size(); ++j)
    std::memcpy(out.dataAs<uint8_t>() + static_cast<size_t>(p[j]) * bytes,
                t.dataAs<uint8_t>() + j * bytes, bytes);
  return out;
}

} // namespace

Expected<Graph> pushGathersThroughDepthwise(const Graph& graph) {
  std::map<NodeId, std::vector<int64_t>> moved; // depthwise Conv -> the permutation
  for (size_t n = 0; n < graph.nodes().size(); ++n) {
    const Node& conv = graph.nodes()[n];
    if (conv.kind != OpKind::Conv) continue;
    const Shape& xs = graph.value(conv.inputs[0]).type.shape;
    const Value& w = graph.value(conv.inputs[1]);
    bool hasBias = conv.inputs.size() > 2 && conv.inputs[2] != kNoValue;
    if (xs.rank() != 4 || std::get<ConvAttrs>(conv.attrs).group != xs[1] || !w.constant ||
        w.type.shape[0] != xs[1] || (hasBias && !graph.value(conv.inputs[2]).constant))
      continue;
    if (const Node* g = producerOf(graph, conv.inputs[0], OpKind::Gather))
      if (auto p = channelPermutation(graph, *g)) moved.emplace(static_cast<NodeId>(n), *p);
  }
  if (moved.empty()) return graph;
  GraphRewriter rw(graph);
  for (size_t n = 0; n < graph.nodes().size(); ++n) {
    const Node& node = graph.nodes()[n];
    auto it = moved.find(static_cast<NodeId>(n));
    if (it == moved.end()) {
      TUNEC_TRY(rw.copy(node));
      continue;
    }
    const Node& gather = *producerOf(graph, node.inputs[0]);
    std::vector<ValueId> inputs = {
        rw.map(gather.inputs[0]),
        rw.constant(node.name + ".weight",
                    scatterRows(*graph.value(node.inputs[1]).constant, it->second))};
    if (node.inputs.size() > 2 && node.inputs[2] != kNoValue)
      inputs.push_back(rw.constant(node.name + ".bias",
                                   scatterRows(*graph.value(node.inputs[2]).constant, it->second)));
    std::string name = node.name + ".unpermuted";
    TUNEC_ASSIGN_OR_RETURN(auto conv,
                           rw.add(name, OpKind::Conv, node.attrs, inputs, {name + "_output"}));
    TUNEC_ASSIGN_OR_RETURN(auto outs, rw.add(node.name, OpKind::Gather, gather.attrs,
                                             {conv[0], rw.map(gather.inputs[1])},
                                             {graph.value(node.outputs[0]).name}));
    rw.replace(node.outputs[0], outs[0]);
  }
  return rw.finish();
}

} // namespace tunec::passes
