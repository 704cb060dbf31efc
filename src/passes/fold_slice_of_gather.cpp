// A Slice of a Gather by constant indices, slicing only the gathered axis with step 1, is a
// Gather by the sliced indices: one copy instead of two (after a channel shuffle, ShuffleNet's
// chunk into two branches reads the input's channels directly). The Gather goes when nothing
// else reads it.
#include "ir/op_registry.h"
#include "passes/passes.h"
#include "passes/pattern.h"
#include "passes/rewriter.h"

namespace tunec::passes {

namespace {

// The indices of Gather `g` restricted to what `slice` keeps, or nullopt when the Slice does
// more than cut the gathered axis (another axis, or a step).
std::optional<Tensor> slicedIndices(const Graph& graph, const Node& slice, const Node& gather) {
  const Value& idx = graph.value(gather.inputs[1]);
  if (!idx.constant || idx.type.shape.rank() != 1 ||
      (idx.type.dtype != DType::I64 && idx.type.dtype != DType::I32))
    return std::nullopt;
  const Shape& xs = graph.value(gather.outputs[0]).type.shape;
  auto axis = normalizeAxis(std::get<AxisAttrs>(gather.attrs).axis, xs.rank());
  if (!axis) return std::nullopt;
  const auto& a = std::get<SliceAttrs>(slice.attrs);
  if (a.starts.size() != static_cast<size_t>(xs.rank())) return std::nullopt;
  for (int d = 0; d < xs.rank(); ++d) {
    size_t i = static_cast<size_t>(d);
    bool whole = a.starts[i] == 0 && a.steps[i] == 1 && a.counts[i] == xs[d];
    if (d != *axis && !whole) return std::nullopt;
    if (d == *axis && a.steps[i] != 1) return std::nullopt;
  }
  size_t ax = static_cast<size_t>(*axis);
  Tensor out(DType::I64, Shape{a.counts[ax]});
  for (int64_t k = 0; k < a.counts[ax]; ++k)
    out.dataAs<int64_t>()[k] = static_cast<int64_t>(idx.constant->getDouble(a.starts[ax] + k));
  return out;
}

} // namespace

Expected<Graph> foldSliceOfGather(const Graph& graph) {
  GraphRewriter rw(graph);
  bool changed = false;
  for (const Node& node : graph.nodes()) {
    const Node* gather =
        node.kind == OpKind::Slice ? producerOf(graph, node.inputs[0], OpKind::Gather) : nullptr;
    std::optional<Tensor> indices;
    if (gather) indices = slicedIndices(graph, node, *gather);
    if (!indices) {
      TUNEC_TRY(rw.copy(node));
      continue;
    }
    ValueId idx = rw.constant(node.name + ".gather_indices", *indices);
    TUNEC_ASSIGN_OR_RETURN(std::vector<ValueId> outs,
                           rw.add(node.name + ".gather", OpKind::Gather, gather->attrs,
                                  {rw.map(gather->inputs[0]), idx},
                                  {graph.value(node.outputs[0]).name}));
    rw.replace(node.outputs[0], outs[0]);
    changed = true;
  }
  if (!changed) return graph;
  return rw.finish();
}

} // namespace tunec::passes
