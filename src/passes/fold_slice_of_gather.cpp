// A Slice of a Gather by constant indices, slicing only the gathered axis with step 1, is a
// Gather by the sliced indices: one copy instead of two (after a channel shuffle, ShuffleNet's
// chunk into two branches reads the input's channels directly). The Gather goes when nothing
// else reads it.
#include "ir/op_registry.h"
#include "passes/passes.h"
#include "passes/pattern.h"
#include "passes/rewriter.h"

#include <algorithm>
#include <map>

namespace tunec::passes {

namespace {

// The indices of Gather `g` restricted to what `slice` keeps, or nullopt when the Slice does
// more than cut the gathered axis (another axis, or a step).
std::optional<Tensor> slicedIndices(const Graph& graph, const Node& slice, const Node& gather) {
  auto axis = normalizeAxis(std::get<AxisAttrs>(gather.attrs).axis,
                            graph.value(gather.inputs[0]).type.shape.rank());
  if (!axis) return std::nullopt;
  auto indices = constantGatherIndices(graph, gather, *axis);
  auto range = slicedRange(graph, slice, *axis);
  if (!indices || !range) return std::nullopt;
  Tensor out(DType::I64, Shape{range->second - range->first});
  std::copy(indices->begin() + range->first, indices->begin() + range->second,
            out.dataAs<int64_t>());
  return out;
}

} // namespace

Expected<Graph> foldSliceOfGather(const Graph& graph) {
  std::map<NodeId, Replacement> roots;
  for (size_t n = 0; n < graph.nodes().size(); ++n) {
    const Node& node = graph.nodes()[n];
    const Node* gather =
        node.kind == OpKind::Slice && !std::get<SliceAttrs>(node.attrs).startsAtRunTime()
            ? producerOf(graph, node.inputs[0], OpKind::Gather)
            : nullptr;
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
