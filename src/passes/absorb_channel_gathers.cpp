// A Conv of one group whose input is a Gather of channels that permutes a contiguous range
// [s, s + IC) of a value reads that range itself, with its weights' input channels permuted at
// compile time: Conv(Gather(x, idx), W) = Conv(Slice(x, s, IC), W') with W'[:, idx[j] - s] =
// W[:, j]. A whole range needs no Slice; a Slice of channels is read in place by the
// convolution (passes/channel_views.h). ShuffleNet's shuffled halves cost no copy this way.
#include "ir/op_registry.h"
#include "passes/passes.h"
#include "passes/pattern.h"
#include "passes/rewriter.h"

#include <cstring>
#include <map>

namespace tunec::passes {

namespace {

struct Absorbed {
  ValueId source;              ///< the Gather's data
  int64_t start;               ///< s
  std::vector<int64_t> offset; ///< idx[j] - s
};

std::optional<Absorbed> absorbable(const Graph& graph, const Node& conv) {
  const Node* g = producerOf(graph, conv.inputs[0], OpKind::Gather);
  const Value& w = graph.value(conv.inputs[1]);
  if (!g || std::get<ConvAttrs>(conv.attrs).group != 1 || !w.constant ||
      w.type.dtype != DType::F32 || graph.value(g->inputs[0]).type.shape.rank() != 4)
    return std::nullopt;
  auto indices = constantGatherIndices(graph, *g, 1);
  std::optional<int64_t> start = indices ? permutedRangeStart(*indices) : std::nullopt;
  if (!start) return std::nullopt;
  Absorbed a{g->inputs[0], *start, {}};
  for (int64_t i : *indices) a.offset.push_back(i - *start);
  return a;
}

// W [OC, IC, KH, KW] with input channel j moved to offset[j].
Tensor permuteInputChannels(const Tensor& w, const std::vector<int64_t>& offset) {
  Tensor out(w.dtype(), w.shape());
  int64_t oc = w.shape()[0], ic = w.shape()[1], taps = w.numel() / (oc * ic);
  const float* src = w.dataAs<float>();
  float* dst = out.dataAs<float>();
  for (int64_t o = 0; o < oc; ++o)
    for (int64_t j = 0; j < ic; ++j)
      std::memcpy(dst + (o * ic + offset[static_cast<size_t>(j)]) * taps, src + (o * ic + j) * taps,
                  static_cast<size_t>(taps) * sizeof(float));
  return out;
}

} // namespace

Expected<Graph> absorbChannelGathers(const Graph& graph) {
  std::map<NodeId, Absorbed> convs;
  for (size_t n = 0; n < graph.nodes().size(); ++n)
    if (const Node& node = graph.nodes()[n]; node.kind == OpKind::Conv)
      if (auto a = absorbable(graph, node)) convs.emplace(static_cast<NodeId>(n), std::move(*a));
  if (convs.empty()) return graph;
  GraphRewriter rw(graph);
  for (size_t n = 0; n < graph.nodes().size(); ++n) {
    const Node& node = graph.nodes()[n];
    auto it = convs.find(static_cast<NodeId>(n));
    if (it == convs.end()) {
      TUNEC_TRY(rw.copy(node));
      continue;
    }
    const Absorbed& a = it->second;
    const Shape& xs = graph.value(a.source).type.shape;
    auto len = static_cast<int64_t>(a.offset.size());
    ValueId in = rw.map(a.source);
    if (a.start != 0 || len != xs[1]) {
      std::string name = node.name + ".input";
      TUNEC_ASSIGN_OR_RETURN(auto outs, rw.add(name, OpKind::Slice, sliceAlong(xs, 1, a.start, len),
                                               {in}, {name + "_output"}));
      in = outs[0];
    }
    std::vector<ValueId> inputs = {
        in, rw.constant(node.name + ".weight",
                        permuteInputChannels(*graph.value(node.inputs[1]).constant, a.offset))};
    for (size_t k = 2; k < node.inputs.size(); ++k) inputs.push_back(rw.map(node.inputs[k]));
    TUNEC_ASSIGN_OR_RETURN(auto outs, rw.add(node.name, OpKind::Conv, node.attrs, inputs,
                                             {graph.value(node.outputs[0]).name}));
    rw.replace(node.outputs[0], outs[0]);
  }
  return rw.finish();
}

} // namespace tunec::passes
