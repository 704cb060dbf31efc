// The channel Gather and Slice helpers of passes/pattern.h.
#include "passes/pattern.h"

#include "ir/op_registry.h"

#include <algorithm>
#include <cmath>

namespace tunec::passes {

std::optional<std::vector<int64_t>> constantGatherIndices(const Graph& graph, const Node& gather,
                                                          int64_t axis) {
  const Value& idx = graph.value(gather.inputs[1]);
  const Shape& xs = graph.value(gather.inputs[0]).type.shape;
  auto gatherAxis = normalizeAxis(std::get<AxisAttrs>(gather.attrs).axis, xs.rank());
  if (!idx.constant || idx.type.shape.rank() != 1 || !gatherAxis || *gatherAxis != axis ||
      (idx.type.dtype != DType::I64 && idx.type.dtype != DType::I32))
    return std::nullopt;
  const int64_t length = xs[static_cast<int>(axis)];
  std::vector<int64_t> out;
  for (int64_t k = 0; k < idx.type.shape.numel(); ++k) {
    auto i = static_cast<int64_t>(idx.constant->getDouble(k));
    if (i < 0) i += length;
    if (i < 0 || i >= length) return std::nullopt;
    out.push_back(i);
  }
  return out;
}

std::optional<int64_t> permutedRangeStart(const std::vector<int64_t>& indices) {
  if (indices.empty()) return std::nullopt;
  int64_t lo = *std::min_element(indices.begin(), indices.end());
  std::vector<bool> seen(indices.size(), false);
  for (int64_t i : indices) {
    int64_t o = i - lo;
    if (o >= static_cast<int64_t>(indices.size()) || seen[static_cast<size_t>(o)])
      return std::nullopt;
    seen[static_cast<size_t>(o)] = true;
  }
  return lo;
}

std::optional<std::pair<int64_t, int64_t>> slicedRange(const Graph& graph, const Node& slice,
                                                       int64_t axis) {
  if (slice.kind != OpKind::Slice) return std::nullopt;
  const Shape& xs = graph.value(slice.inputs[0]).type.shape;
  const auto& a = std::get<SliceAttrs>(slice.attrs);
  if (a.startsAtRunTime() || a.starts.size() != static_cast<size_t>(xs.rank()) || axis < 0 ||
      axis >= xs.rank())
    return std::nullopt;
  for (int d = 0; d < xs.rank(); ++d) {
    auto i = static_cast<size_t>(d);
    if (a.steps[i] != 1 || (d != axis && (a.starts[i] != 0 || a.counts[i] != xs[d])))
      return std::nullopt;
  }
  auto ax = static_cast<size_t>(axis);
  return std::make_pair(a.starts[ax], a.starts[ax] + a.counts[ax]);
}

SliceAttrs sliceAlong(const Shape& shape, int64_t axis, int64_t start, int64_t count) {
  SliceAttrs a{std::vector<int64_t>(static_cast<size_t>(shape.rank()), 0),
               std::vector<int64_t>(static_cast<size_t>(shape.rank()), 1),
               shape.dims(),
               {},
               {}};
  a.starts[static_cast<size_t>(axis)] = start;
  a.counts[static_cast<size_t>(axis)] = count;
  return a;
}

std::optional<TensorQuantization> tensorQuantization(const Graph& g, const Node& n) {
  if (n.inputs.size() < 3 || n.inputs[1] == kNoValue || n.inputs[2] == kNoValue) return {};
  const Value &scale = g.value(n.inputs[1]), &zero = g.value(n.inputs[2]);
  // Scalars (the importer makes a one-element scale one), so that no axis names a dimension.
  if (!scale.constant || !zero.constant || scale.type.shape.rank() != 0 ||
      zero.type.shape.rank() != 0)
    return {};
  const double s = scale.constant->getDouble(0);
  if (!std::isnormal(s) || s <= 0 || s >= 1e30) return {};
  return TensorQuantization{s, zero.constant->getInt(0)};
}

bool sameTensorQuantization(const Graph& graph, const Node& a, const Node& b) {
  if (a.inputs.size() < 3 || b.inputs.size() < 3) return false;
  for (size_t i : {1, 2})
    for (const Node* n : {&a, &b}) {
      if (n->inputs[i] == kNoValue) return false;
      const Value& v = graph.value(n->inputs[i]);
      if (!v.constant || v.type.shape.rank() != 0) return false;
    }
  const Tensor &as = *graph.value(a.inputs[1]).constant, &bs = *graph.value(b.inputs[1]).constant;
  const Tensor &az = *graph.value(a.inputs[2]).constant, &bz = *graph.value(b.inputs[2]).constant;
  return as.getDouble(0) == bs.getDouble(0) && as.getDouble(0) > 0 && az.getInt(0) == bz.getInt(0);
}

size_t selectedInputs(const Node& node) {
  if (node.outputs.size() != 1) return 0; // a MaxPool's indices output: not values
  switch (node.kind) {
  case OpKind::MaxPool:
  case OpKind::GlobalMaxPool:
  case OpKind::Reshape:
  case OpKind::Flatten:
  case OpKind::Squeeze:
  case OpKind::Unsqueeze:
  case OpKind::Transpose:
  case OpKind::Slice:
  case OpKind::Identity:
    return 1;
  case OpKind::Concat:
    return node.inputs.size();
  default:
    return 0;
  }
}

bool isChannelwiseActivation(OpKind kind) {
  return kind == OpKind::Relu || kind == OpKind::Sigmoid || kind == OpKind::Tanh;
}

bool splitsByOutputChannels(const Graph& graph, const Node& conv) {
  return conv.kind == OpKind::Conv && std::get<ConvAttrs>(conv.attrs).group == 1 &&
         graph.value(conv.inputs[1]).constant &&
         (conv.inputs.size() < 3 || conv.inputs[2] == kNoValue ||
          graph.value(conv.inputs[2]).constant);
}

} // namespace tunec::passes
