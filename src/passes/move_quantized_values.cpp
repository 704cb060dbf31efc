// Quantized values pooled and moved in their integers: QuantizeLinear(op(DequantizeLinear(q, s,
// z), ...), s, z), with the same per-tensor scale and zero point on every data input and the
// output, is op(q, ...) on the u8 (or s8) values, for an op that only selects, moves or
// maxes values: MaxPool, GlobalMaxPool, Reshape, Flatten, Squeeze, Unsqueeze, Transpose,
// Slice, Concat (how a QDQ model pools and reshapes between two quantized layers: ResNet-50's
// stem, a classifier's Flatten). Dequantizing is monotone (s > 0) and elementwise, so the op of
// the dequantized values is the dequantized op of the integers; quantizing it back with the same
// parameters returns the integers: (m - z) s / s is within 255 * 2^-22 of m - z, far from a
// rounding boundary. The op reads a quarter of the bytes, and the layer before it writes its u8
// output through a requantizing epilogue instead of a dequantized f32 one.
// A GlobalAveragePool over an odd number n < 181 of pixels (ResNet-50's and MobileNetV2's 7x7)
// moves too, as the integers' mean rounded to the nearest integer: the quantized mean of the
// dequantized values is round(sum(q) / n), whose argument is an integer over an odd n, so never a
// tie but at least 1/(2n) from one, while the f32 arithmetic of the dequantized graph strays at
// most n * 255 * 2^-24 (< 1/(2n) for n < 181) from the exact mean.
#include "passes/passes.h"
#include "passes/pattern.h"
#include "passes/rewriter.h"

#include <cmath>

namespace tunec::passes {

namespace {

// Whether dequantize `dq` and quantize `q` apply the same per-tensor quantization (its scale a
// normal number, below 1e30), and q's integers are dq's type.
bool sameQuantization(const Graph& g, const Node& dq, const Node& q) {
  if (dq.kind != OpKind::DequantizeLinear) return false;
  const auto quantization = tensorQuantization(g, dq);
  return quantization && quantization == tensorQuantization(g, q) &&
         g.value(dq.inputs[0]).type.dtype == g.value(q.outputs[0]).type.dtype;
}

// How many leading inputs of `n` are data (the rest: shapes, axes, starts), or 0 when the op
// does not only select, move or max its values.
size_t dataInputs(const Graph& g, const Node& n) {
  switch (n.kind) {
  case OpKind::GlobalAveragePool: { // an odd number of pixels, below 181 (above)
    const Shape& x = g.value(n.inputs[0]).type.shape;
    const int64_t pixels = x.rank() == 4 ? x[2] * x[3] : 0;
    return pixels % 2 == 1 && pixels < 181 ? 1 : 0;
  }
  default:
    return selectedInputs(n);
  }
}

} // namespace

Expected<Graph> moveQuantizedValues(const Graph& graph) {
  const std::vector<std::vector<NodeId>> readers = readersOf(graph);
  const std::vector<int> uses = useCounts(graph);
  GraphRewriter rw(graph);
  std::vector<bool> skip(graph.nodes().size(), false);
  for (const Node& node : graph.nodes()) {
    const auto id = static_cast<size_t>(&node - graph.nodes().data());
    if (skip[id]) continue;
    const size_t data = dataInputs(graph, node);
    const ValueId out = node.outputs.empty() ? kNoValue : node.outputs[0];
    // The output read once, by a QuantizeLinear undoing every data input's dequantization.
    const std::vector<NodeId>* users = data ? &readers[static_cast<size_t>(out)] : nullptr;
    bool match = users && uses[static_cast<size_t>(out)] == 1 && users->size() == 1 &&
                 graph.node((*users)[0]).kind == OpKind::QuantizeLinear;
    for (size_t i = 0; match && i < data; ++i) {
      const NodeId producer = graph.value(node.inputs[i]).producer;
      match =
          producer >= 0 && sameQuantization(graph, graph.node(producer), graph.node((*users)[0]));
    }
    if (!match) {
      TUNEC_TRY(rw.copy(node));
      continue;
    }
    const Node& quantize = graph.node((*users)[0]);
    std::vector<ValueId> inputs;
    for (size_t i = 0; i < node.inputs.size(); ++i)
      inputs.push_back(rw.map(i < data ? graph.node(graph.value(node.inputs[i]).producer).inputs[0]
                                       : node.inputs[i]));
    TUNEC_ASSIGN_OR_RETURN(auto moved, rw.add(node.name, node.kind, node.attrs, inputs,
                                              {graph.value(quantize.outputs[0]).name}));
    rw.replace(quantize.outputs[0], moved[0]);
    skip[static_cast<size_t>((*users)[0])] = true; // the quantization it replaces
  }
  return rw.finish();
}

} // namespace tunec::passes
