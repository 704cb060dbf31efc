// A Slice of a Gather by constant indices, slicing only the gathered axis with step 1, is a
// Gather by the sliced indices: one copy instead of two (after a channel shuffle, ShuffleNet's
// chunk into two branches reads the input's channels directly). The Gather goes when nothing
// else reads it.
#include "ir/op_registry.h"
#include "passes/passes.h"
#include "passes/pattern.h"
#include "passes/rewriter.h"

#include <map>

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
  std::map<NodeId, Replacement> roots;
  for (size_t n = 0; n < graph.nodes().size(); ++n) {
    const Node& node = graph.nodes()[n];
    const Node* gather =
        node.kind == OpKind::Slice ? producerOf(graph, node.inputs[0], OpKind::Gather) : nullptr;
    if (!gather) continue;
    if (std::optional<Tensor> indices = slicedIndices(graph, node, *gather))
      roots.emplace(
          static_cast<NodeId>(n),
          Replacement{OpKind::Gather, gather->attrs, {gather->inputs[0]}, {std::move(*indices)}});
  }
  // The Gathers stay for their other readers; one read by nothing else is dead and goes.
  if (roots.empty()) return graph;
  return replaceMatches(graph, roots, {}, ".gather");
}

} // namespace tunec::passes
