// Max pooling of quantized values in their integers: QuantizeLinear(MaxPool(DequantizeLinear(q,
// s, z)), s, z) with the same per-tensor scale and zero point (how a QDQ model pools between two
// quantized layers: ResNet-50's stem) is MaxPool(q), a u8 or s8 pool. Dequantizing is monotone
// (s > 0), so the max of the dequantized window is the dequantized max; quantizing it back with
// the same parameters returns the integer: (m - z) s / s is within 255 * 2^-22 of m - z, far from
// a rounding boundary. The pool reads a quarter of the bytes, and the layer before it writes its
// u8 output through a requantizing epilogue instead of a dequantized f32 one.
#include "passes/passes.h"
#include "passes/rewriter.h"

#include <cmath>

namespace tunec::passes {

namespace {

// A per-tensor parameter: a scalar constant.
const Tensor* scalar(const Graph& g, ValueId v) {
  if (v == kNoValue || !g.value(v).constant || g.value(v).type.shape.numel() != 1) return nullptr;
  return &*g.value(v).constant;
}

// Whether dequantize `dq` and quantize `q` have the same scale (a positive normal number) and
// zero point, and q's integers are dq's type.
bool sameQuantization(const Graph& g, const Node& dq, const Node& q) {
  if (dq.inputs.size() < 3 || q.inputs.size() < 3) return false;
  const Tensor *ds = scalar(g, dq.inputs[1]), *dz = scalar(g, dq.inputs[2]);
  const Tensor *qs = scalar(g, q.inputs[1]), *qz = scalar(g, q.inputs[2]);
  if (!ds || !dz || !qs || !qz) return false;
  const double s = ds->getDouble(0);
  return s == qs->getDouble(0) && std::isnormal(s) && s > 0 && s < 1e30 &&
         dz->getInt(0) == qz->getInt(0) &&
         g.value(dq.inputs[0]).type.dtype == g.value(q.outputs[0]).type.dtype;
}

} // namespace

Expected<Graph> poolQuantizedValues(const Graph& graph) {
  const std::vector<std::vector<NodeId>> readers = readersOf(graph);
  const std::vector<int> uses = useCounts(graph);
  GraphRewriter rw(graph);
  std::vector<bool> skip(graph.nodes().size(), false);
  for (const Node& node : graph.nodes()) {
    const auto id = static_cast<size_t>(&node - graph.nodes().data());
    if (skip[id]) continue;
    const bool pool = node.kind == OpKind::MaxPool || node.kind == OpKind::GlobalMaxPool;
    const ValueId out = node.outputs.empty() ? kNoValue : node.outputs[0];
    const NodeId dqId = pool ? graph.value(node.inputs[0]).producer : -1;
    const auto& users = pool ? readers[static_cast<size_t>(out)] : std::vector<NodeId>{};
    // One output (no indices), read once, by a QuantizeLinear undoing the input's dequantization.
    if (!pool || node.outputs.size() != 1 || dqId < 0 || uses[static_cast<size_t>(out)] != 1 ||
        users.size() != 1 || graph.node(dqId).kind != OpKind::DequantizeLinear ||
        graph.node(users[0]).kind != OpKind::QuantizeLinear ||
        !sameQuantization(graph, graph.node(dqId), graph.node(users[0]))) {
      TUNEC_TRY(rw.copy(node));
      continue;
    }
    const Node& quantize = graph.node(users[0]);
    const ValueId integers = graph.node(dqId).inputs[0];
    TUNEC_ASSIGN_OR_RETURN(auto pooled, rw.add(node.name, node.kind, node.attrs, {rw.map(integers)},
                                               {graph.value(quantize.outputs[0]).name}));
    rw.replace(quantize.outputs[0], pooled[0]);
    skip[static_cast<size_t>(users[0])] = true; // the quantization it replaces
  }
  return rw.finish();
}

} // namespace tunec::passes
