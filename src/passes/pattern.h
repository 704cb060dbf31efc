// Helpers for passes that recognize decomposed forms (GELU, LayerNorm) in the graph.
#pragma once

#include "ir/graph.h"

#include <optional>

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

} // namespace tunec::passes
