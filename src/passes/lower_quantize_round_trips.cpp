// Quantize round trips as float arithmetic: DequantizeLinear(QuantizeLinear(x, s, z), s, z) with
// the same per-tensor parameters (a fake quantization: how QDQ models mark every activation
// between two quantized layers) is s * clip(round(x / s), lo - z, hi - z), with [lo, hi] the
// range of z's type. In f32 ops the pair joins the fused elementwise chains (and is vectorized)
// instead of two per-element integer steps (a QDQ CNN from PyTorch: 5.3 -> 0.40 ms). Until
// tunec has int8 kernels this is how a QDQ model's activations run. The values are the pair's
// (round is half to even, as QuantizeLinear rounds; the Round's nan_to_zero gives a NaN the zero
// point's value, 0, as the pair does) but for one edge: where a producer's epilogue absorbs the
// division as a multiplication by 1 / s, an exact tie x / s = k + 1/2 may round to the other
// neighbour (one quantization step). A pair whose quantized value other nodes read too (an int8
// layer's u8 input, from lower-quantized-layers) stays: the u8 tensor is computed anyway, and its
// dequantization is exact (ResNet-50's identity branches: the block output's u8 is the next
// block's input, its DequantizeLinear the residual addend of the block's last kernel). So does a
// pair whose dequantized value only an Add reads whose other operand is dequantized later: the
// Add joins the epilogue of that later branch's kernel, which then reads this pair's u8 tensor
// as its addend instead of an f32 round trip (ResNet-50's downsampling blocks: the last conv of
// the main branch writes u8, and the downsampling conv adds it; fusion_plan's
// dequantizedAddend).
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

// Where the branch of a dequantized operand ends: the node whose result its QuantizeLinear
// quantizes, else the node that computes its quantized input (-1: a model input).
NodeId branchEnd(const Graph& g, const Node& dq) {
  const Node* quant = producerOf(g, dq.inputs[0], OpKind::QuantizeLinear);
  return quant ? g.value(quant->inputs[0]).producer : g.value(dq.inputs[0]).producer;
}

// Whether the only reader of the round trip's DequantizeLinear `dq` (`reader`, when it has one)
// is an Add of another dequantized operand whose branch ends later: the Add then joins the epilogue
// of that branch's kernel (the fusion plan grows kernels in the graph's order), which reads dq's u8
// input in its place.
bool isLaterBranchsAddend(const Graph& g, const Node& dq, const Node* reader) {
  const ValueId v = dq.outputs[0];
  if (!reader || reader->kind != OpKind::Add || reader->inputs.size() != 2) return false;
  const ValueId other = reader->inputs[0] == v ? reader->inputs[1] : reader->inputs[0];
  const Node* otherDq = producerOf(g, other, OpKind::DequantizeLinear);
  return other != v && otherDq && g.value(other).type == g.value(v).type &&
         branchEnd(g, dq) < branchEnd(g, *otherDq);
}

} // namespace

Expected<Graph> lowerQuantizeRoundTrips(const Graph& graph) {
  GraphRewriter rw(graph);
  // Quantized values that a node other than a DequantizeLinear reads (or the model returns);
  // each value's readers (a model output counts as two) and its last one.
  const size_t values = graph.values().size();
  std::vector<bool> readAsIntegers(values, false);
  std::vector<int> readers(values, 0);
  std::vector<const Node*> reader(values, nullptr);
  for (const Node& n : graph.nodes())
    for (ValueId in : n.inputs) {
      if (in == kNoValue) continue;
      if (n.kind != OpKind::DequantizeLinear) readAsIntegers[static_cast<size_t>(in)] = true;
      ++readers[static_cast<size_t>(in)];
      reader[static_cast<size_t>(in)] = &n;
    }
  for (ValueId out : graph.outputs()) readAsIntegers[static_cast<size_t>(out)] = true;
  for (ValueId out : graph.outputs()) readers[static_cast<size_t>(out)] += 2;
  for (const Node& node : graph.nodes()) {
    const Node* quant = node.kind == OpKind::DequantizeLinear ? roundTripOf(graph, node) : nullptr;
    const auto out = static_cast<size_t>(node.outputs[0]);
    if (quant && (readAsIntegers[static_cast<size_t>(quant->outputs[0])] ||
                  (readers[out] == 1 && isLaterBranchsAddend(graph, node, reader[out]))))
      quant = nullptr;
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
    TUNEC_ASSIGN_OR_RETURN(auto rounded, rw.add(name + ".round", OpKind::Round, RoundAttrs{true},
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
