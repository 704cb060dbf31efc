// The op registry: per op kind its arity, mapping type, type inference and FLOP count.
#pragma once

#include "ir/graph.h"

#include <span>
#include <vector>

namespace tunec {

/// Everything the compiler knows about an op kind independent of any backend.
struct OpInfo {
  OpKind kind;
  std::string_view name;
  MappingType mapping;
  int minInputs;
  int maxInputs; ///< -1: variadic
  int minOutputs;
  int maxOutputs; ///< -1: variadic
  /// Infers output types from the attributes and input types (nullptr entries for omitted
  /// optional inputs). Errors describe the mismatch without naming the node.
  Expected<std::vector<TensorType>> (*infer)(const OpAttrs& attrs,
                                             std::span<const TensorType* const> inputs,
                                             int numOutputs);
  /// Floating-point operations (a multiply-add counts 2) of one execution.
  int64_t (*flops)(const Node& node, const Graph& graph);
};

/// The registry entry of an op kind.
const OpInfo& opInfo(OpKind kind);

/// Infers the output types of a node (used by Graph::addNode and the verifier).
Expected<std::vector<TensorType>> inferNodeTypes(const Graph& graph, OpKind kind,
                                                 const OpAttrs& attrs,
                                                 std::span<const ValueId> inputs, int numOutputs);

/// Normalizes a possibly negative axis against a rank; error when out of range (a scalar
/// accepts axis 0 and -1, as ops over "the last axis" of a scalar do).
Expected<int64_t> normalizeAxis(int64_t axis, int rank);
/// As normalizeAxis for an axis that indexes one of the input's dimensions (Concat, Split,
/// Gather, Squeeze, reductions): a scalar has none.
Expected<int64_t> normalizeDimAxis(int64_t axis, int rank);

/// Numpy-style broadcast of shapes; error names both shapes.
Expected<Shape> broadcastShapes(const Shape& a, const Shape& b);

/// Output spatial size of a sliding window (conv or pool).
int64_t slidingOutputSize(int64_t in, int64_t kernel, int64_t stride, int64_t padBegin,
                          int64_t padEnd, int64_t dilation, bool ceilMode);

} // namespace tunec
