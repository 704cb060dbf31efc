// Requantization as QLinearConv and QGemm compute it: an int8 layer's (sums + k[n]) x scale[n]
// (lower-quantized-layers' integer form) whose one reader divides it by a per-tensor output
// scale s - a QuantizeLinear to u8 or the division of a lowered quantize round trip, directly or
// through a Relu - becomes (sums + k[n]) x f32(scale[n] / s), and the QuantizeLinear one of
// scale 1. One multiply in the epilogue instead of a multiply and a division, and the u8 results
// are ONNX Runtime's bit for bit: its requantization multiplies the int32 sum by f32(sa sb[n] /
// s), and the two roundings of x scale / s fall on the other side of a tie now and then (2 of
// ResNet-50's 9.3 million u8 activations on one input; each such step then spreads through the
// layers after it). A Relu commutes with the multiply by a positive scale. Clip bounds, which
// would have to be divided too, keep the division.
#include "passes/passes.h"
#include "passes/pattern.h"
#include "passes/rewriter.h"

#include <cmath>
#include <set>

namespace tunec::passes {

namespace {

// Whether `x` is an int8 layer's sums plus its integer column terms.
bool isOffsetSums(const Graph& g, ValueId x) {
  const Node* add = producerOf(g, x, OpKind::Add);
  if (!add || add->inputs.size() != 2 || !g.value(add->inputs[1]).constant) return false;
  const Node* sums = producerOf(g, add->inputs[0]);
  return sums && (sums->kind == OpKind::IntegerConv || sums->kind == OpKind::IntegerMatMul);
}

// The positive, finite per-tensor scale that node `n` divides its first input by: a Div by a
// scalar constant, or a QuantizeLinear to u8 with scalar constant scale and zero point.
std::optional<float> outputScale(const Graph& g, const Node& n) {
  std::optional<double> s;
  if (n.kind == OpKind::Div && n.inputs.size() == 2) s = scalarConstant(g, n.inputs[1]);
  if (n.kind == OpKind::QuantizeLinear && n.inputs.size() == 3 &&
      g.value(n.outputs[0]).type.dtype == DType::U8 && g.value(n.inputs[2]).constant &&
      g.value(n.inputs[2]).type.shape.numel() == 1)
    s = scalarConstant(g, n.inputs[1]);
  if (!s || !(*s > 0) || !std::isfinite(*s)) return std::nullopt;
  return static_cast<float>(*s);
}

} // namespace

Expected<Graph> foldRequantizationScale(const Graph& graph) {
  const std::vector<int> uses = useCounts(graph);
  std::vector<const Node*> readers(graph.values().size(), nullptr);
  for (const Node& n : graph.nodes())
    for (ValueId in : n.inputs)
      if (in != kNoValue) readers[static_cast<size_t>(in)] = &n;
  // The one node reading `v` (nullptr when it has several, or is a model output).
  auto onlyReader = [&](ValueId v) -> const Node* {
    return uses[static_cast<size_t>(v)] == 1 ? readers[static_cast<size_t>(v)] : nullptr;
  };
  GraphRewriter rw(graph);
  std::set<const Node*> divisions; // the Divs folded away, and the QuantizeLinears rescaled
  std::set<const Node*> rescaled;
  for (const Node& node : graph.nodes()) {
    if (divisions.count(&node)) { // its input is already divided
      rw.replace(node.outputs[0], rw.map(node.inputs[0]));
      continue;
    }
    if (rescaled.count(&node)) {
      Tensor one(DType::F32, graph.value(node.inputs[1]).type.shape);
      one.dataAs<float>()[0] = 1.f;
      TUNEC_ASSIGN_OR_RETURN(
          auto q, rw.add(node.name, node.kind, node.attrs,
                         {rw.map(node.inputs[0]), rw.constant(node.name + ".unit_scale", one),
                          rw.map(node.inputs[2])},
                         {graph.value(node.outputs[0]).name}));
      rw.replace(node.outputs[0], q[0]);
      continue;
    }
    const Value* c = node.kind == OpKind::Mul && node.inputs.size() == 2
                         ? &graph.value(node.inputs[1])
                         : nullptr;
    const Node* reader = c ? onlyReader(node.outputs[0]) : nullptr;
    if (reader && reader->kind == OpKind::Relu) reader = onlyReader(reader->outputs[0]);
    const auto s =
        reader && reader->inputs[0] != kNoValue ? outputScale(graph, *reader) : std::nullopt;
    if (!s || !c->constant || c->type.dtype != DType::F32 || !isOffsetSums(graph, node.inputs[0])) {
      TUNEC_TRY(rw.copy(node));
      continue;
    }
    Tensor folded = *c->constant;
    for (int64_t i = 0; i < folded.numel(); ++i)
      folded.dataAs<float>()[i] /= *s; // one f32 division, as ONNX Runtime computes it
    TUNEC_ASSIGN_OR_RETURN(
        auto y, rw.add(node.name, OpKind::Mul, NoAttrs{},
                       {rw.map(node.inputs[0]), rw.constant(node.name + ".requantize", folded)},
                       {graph.value(node.outputs[0]).name}));
    rw.replace(node.outputs[0], y[0]);
    (reader->kind == OpKind::Div ? divisions : rescaled).insert(reader);
  }
  return rw.finish();
}

} // namespace tunec::passes
