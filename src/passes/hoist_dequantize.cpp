// Dequantizations scheduled early: each DequantizeLinear of a computed value (its scale and zero
// point constants) moves right after the node producing that value. A QDQ model dequantizes a
// residual branch's input where the exporter met the Add, after the branch's convolutions; moved
// up, it is computed before the branch's last kernel starts, so that kernel adds it in its
// epilogue (the fusion plan joins only post-ops whose other inputs are ready) and requantizes
// the sum for the next block: ResNet-50's Add, ReLU and QuantizeLinear leave their element loops.
// A dequantization is an element step of one input: moving it changes no value, only how long
// its f32 result lives.
#include "passes/passes.h"
#include "passes/rewriter.h"

namespace tunec::passes {

Expected<Graph> hoistDequantize(const Graph& graph) {
  GraphRewriter rw(graph);
  const size_t count = graph.nodes().size();
  std::vector<std::vector<const Node*>> after(count); // by producer
  std::vector<bool> moved(count, false);
  for (size_t i = 0; i < count; ++i) {
    const Node& n = graph.nodes()[i];
    if (n.kind != OpKind::DequantizeLinear || n.inputs.empty()) continue;
    const NodeId producer = graph.value(n.inputs[0]).producer;
    bool parameters = true;
    for (size_t k = 1; k < n.inputs.size(); ++k)
      parameters = parameters && (n.inputs[k] == kNoValue || graph.value(n.inputs[k]).constant);
    if (producer < 0 || !parameters || static_cast<size_t>(producer) + 1 >= i) continue;
    after[static_cast<size_t>(producer)].push_back(&n);
    moved[i] = true;
  }
  for (size_t i = 0; i < count; ++i) {
    if (moved[i]) continue;
    TUNEC_TRY(rw.copy(graph.nodes()[i]));
    for (const Node* dq : after[i]) TUNEC_TRY(rw.copy(*dq));
  }
  return rw.finish();
}

} // namespace tunec::passes
