// Quantize round trips as float arithmetic: DequantizeLinear(QuantizeLinear(x, s, z), s, z) with
// the same per-tensor parameters (a fake quantization: how QDQ models mark every activation
// between two quantized layers) is s * clip(round(x / s), lo - z, hi - z), with [lo, hi] the
// range of z's type. In f32 ops the pair joins the fused elementwise chains (and is vectorized)
// instead of two per-element integer steps (a QDQ CNN from PyTorch: 5.3 -> 0.40 ms). Until
// tunec has int8 kernels this is how a QDQ model's activations run. The values are the pair's
// (round is half to even, as QuantizeLinear rounds) but for two edges: a NaN stays NaN where
// the pair gives the zero point's value, and where a producer's epilogue absorbs the division
// as a multiplication by 1 / s, an exact tie x / s = k + 1/2 may round to the other neighbour
// (one quantization step). A pair whose quantized value other nodes read too (an int8 layer's u8
// input, from lower-quantized-layers) stays: the u8 tensor is computed anyway, and its
// dequantization is exact (ResNet-50's identity branches: the block output's u8 is the next
// block's input, its DequantizeLinear the residual addend of the block's last kernel).
#include "passes/passes.h"
#include "passes/pattern.h"
#include "passes/rewriter.h"

namespace tunec::passes {

namespace {

// The QuantizeLinear a DequantizeLinear undoes with the same parameters, or nullptr (a zero or
// negative scale is left to the ops).
const Node* roundTripOf(const Graph& g, const Node& dq) {
  const Node* quant = producerOf(g, dq.inputs[0], OpKind::QuantizeLinear);
  return quant && sameTensorQuantization(g, *quant, dq) ? quant : nullptr;
}

} // namespace

Expected<Graph> lowerQuantizeRoundTrips(const Graph& graph) {
  GraphRewriter rw(graph);
  // Quantized values that a node other than a DequantizeLinear reads (or the model returns).
  std::vector<bool> readAsIntegers(graph.values().size(), false);
  for (const Node& n : graph.nodes())
    for (ValueId in : n.inputs)
      if (in != kNoValue && n.kind != OpKind::DequantizeLinear)
        readAsIntegers[static_cast<size_t>(in)] = true;
  for (ValueId out : graph.outputs()) readAsIntegers[static_cast<size_t>(out)] = true;
  for (const Node& node : graph.nodes()) {
    const Node* quant = node.kind == OpKind::DequantizeLinear ? roundTripOf(graph, node) : nullptr;
    if (quant && readAsIntegers[static_cast<size_t>(quant->outputs[0])]) quant = nullptr;
    if (!quant) {
      TUNEC_TRY(rw.copy(node));
      continue;
    }
    DType type = graph.value(quant->outputs[0]).type.dtype;
    auto [lo, hi] = integerRange(type);
    double z = static_cast<double>(graph.value(quant->inputs[2]).constant->getInt(0));
    ValueId x = rw.map(quant->inputs[0]), s = rw.map(quant->inputs[1]);
    const std::string& name = node.name;
    TUNEC_ASSIGN_OR_RETURN(auto divided,
                           rw.add(name + ".div", OpKind::Div, NoAttrs{}, {x, s}, {name + ".div"}));
    TUNEC_ASSIGN_OR_RETURN(auto rounded, rw.add(name + ".round", OpKind::Round, NoAttrs{},
                                                {divided[0]}, {name + ".round"}));
    TUNEC_ASSIGN_OR_RETURN(auto clipped,
                           rw.add(name + ".clip", OpKind::Clip, ClipAttrs{lo - z, hi - z},
                                  {rounded[0]}, {name + ".clip"}));
    TUNEC_ASSIGN_OR_RETURN(auto scaled, rw.add(name, OpKind::Mul, NoAttrs{}, {clipped[0], s},
                                               {graph.value(node.outputs[0]).name}));
    rw.replace(node.outputs[0], scaled[0]);
  }
  return rw.finish();
}

} // namespace tunec::passes
