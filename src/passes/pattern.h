// Helpers for passes that recognize decomposed forms (GELU, LayerNorm) in the graph, and the
// channel Gathers and Slices that the channel passes and the channel-view plan read.
#pragma once

#include "ir/graph.h"

#include <optional>
#include <utility>
#include <vector>

namespace tunec::passes {

/// The node producing a value, or nullptr for model inputs and constants.
inline const Node* producerOf(const Graph& graph, ValueId value) {
  if (value == kNoValue) return nullptr;
  NodeId p = graph.value(value).producer;
  return p < 0 ? nullptr : &graph.node(p);
}

/// The producer when it is of `kind`, else nullptr.
inline const Node* producerOf(const Graph& graph, ValueId value, OpKind kind) {
  const Node* n = producerOf(graph, value);
  return n && n->kind == kind ? n : nullptr;
}

/// The value of a one-element floating constant.
inline std::optional<double> scalarConstant(const Graph& graph, ValueId value) {
  if (value == kNoValue) return std::nullopt;
  const Value& v = graph.value(value);
  if (!v.constant || v.constant->numel() != 1 || !isFloat(v.constant->dtype())) return std::nullopt;
  return v.constant->getDouble(0);
}

/// A per-tensor quantization whose integers round-trip exactly: a scalar constant scale
/// (positive, normal, below 1e30) and zero point.
struct TensorQuantization {
  double scale = 0;
  int64_t zero = 0;
  bool operator==(const TensorQuantization&) const = default;
};
/// The TensorQuantization a QuantizeLinear/DequantizeLinear node of `graph` applies, or nullopt.
std::optional<TensorQuantization> tensorQuantization(const Graph& graph, const Node& node);

/// Whether QuantizeLinear/DequantizeLinear nodes `a` and `b` apply one per-tensor quantization:
/// scalar (rank-0) constant scales and zero points, equal, the scale positive.
bool sameTensorQuantization(const Graph& graph, const Node& a, const Node& b);

/// True when `value` is a one-element constant within `tolerance` of `expected`.
inline bool isScalar(const Graph& graph, ValueId value, double expected, double tolerance = 1e-5) {
  auto s = scalarConstant(graph, value);
  return s && *s >= expected - tolerance && *s <= expected + tolerance;
}

/// For a commutative binary node, the input that is not `known` (kNoValue if neither is).
inline ValueId otherInput(const Node& node, ValueId known) {
  if (node.inputs[0] == known) return node.inputs[1];
  if (node.inputs[1] == known) return node.inputs[0];
  return kNoValue;
}

/// The indices of a Gather along `axis` of its data when they are a constant 1-D int64/int32
/// tensor, each normalized (negative ones from the end) and in range; nullopt otherwise.
std::optional<std::vector<int64_t>> constantGatherIndices(const Graph& graph, const Node& gather,
                                                          int64_t axis);

/// s when `indices` permute the contiguous range [s, s + indices.size()); nullopt otherwise.
std::optional<int64_t> permutedRangeStart(const std::vector<int64_t>& indices);

/// [start, start + count) of `axis` when the Slice cuts only that axis, with step 1.
std::optional<std::pair<int64_t, int64_t>> slicedRange(const Graph& graph, const Node& slice,
                                                       int64_t axis);

/// The attributes of a Slice of [start, start + count) along `axis` of a value of `shape`.
SliceAttrs sliceAlong(const Shape& shape, int64_t axis, int64_t start, int64_t count);

/// One-to-one activations of one input that split-conv-for-slices carries into each part.
bool isChannelwiseActivation(OpKind kind);

/// How many leading inputs of `node` are values it only selects, moves or takes maxima of (its
/// other inputs: shapes, axes, starts): every input of a Concat, the first of a MaxPool,
/// GlobalMaxPool, Reshape, Flatten, Squeeze, Unsqueeze, Transpose, Slice or Identity with one
/// output; 0 for any other node. Such an op commutes with an elementwise monotone map (a
/// dequantization).
size_t selectedInputs(const Node& node);

/// A Conv that split-conv-for-slices can split by output channels: one group, constant weights
/// and bias.
bool splitsByOutputChannels(const Graph& graph, const Node& conv);

} // namespace tunec::passes
