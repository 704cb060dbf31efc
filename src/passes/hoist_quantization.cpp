// Quantizations scheduled early: each QuantizeLinear and DequantizeLinear of a computed value
// (its scale and zero point constants) moves right after the node producing that value, a chain
// of them in turn. A QDQ model quantizes and dequantizes a residual branch's input where the
// exporter met the Add, after the other branch's convolutions; moved up, it is computed before
// the other branch's last kernel starts, so that kernel adds it in its epilogue (the fusion plan
// joins only post-ops whose other inputs are ready; for a u8 addend, its producer's kernel must
// have taken the QuantizeLinear) and requantizes the sum for the next block: ResNet-50's Add,
// ReLU and QuantizeLinear leave their element loops. A quantization is an element step of one
// input: moving it changes no value, only how long its result lives.
#include "passes/passes.h"
#include "passes/rewriter.h"

#include <functional>

namespace tunec::passes {

Expected<Graph> hoistQuantization(const Graph& graph) {
  GraphRewriter rw(graph);
  const size_t count = graph.nodes().size();
  std::vector<std::vector<size_t>> after(count); // by producer, in the graph's order
  std::vector<bool> moved(count, false);
  for (size_t i = 0; i < count; ++i) {
    const Node& n = graph.nodes()[i];
    const bool quantization =
        n.kind == OpKind::DequantizeLinear || n.kind == OpKind::QuantizeLinear;
    if (!quantization || n.inputs.empty()) continue;
    const NodeId producer = graph.value(n.inputs[0]).producer;
    bool parameters = true;
    for (size_t k = 1; k < n.inputs.size(); ++k)
      parameters = parameters && (n.inputs[k] == kNoValue || graph.value(n.inputs[k]).constant);
    if (producer < 0 || !parameters) continue;
    after[static_cast<size_t>(producer)].push_back(i);
    moved[i] = true;
  }
  // A node, then the quantizations of its result (and theirs).
  std::function<Status(size_t)> emit = [&](size_t i) -> Status {
    TUNEC_TRY(rw.copy(graph.nodes()[i]));
    for (size_t q : after[i]) TUNEC_TRY(emit(q));
    return {};
  };
  for (size_t i = 0; i < count; ++i)
    if (!moved[i]) TUNEC_TRY(emit(i));
  return rw.finish();
}

} // namespace tunec::passes
