// Rewriting a Graph by copying it node by node into a new one: the shared mechanism of the
// graph passes (each pass decides per node to copy it, replace it, or drop it).
#pragma once

#include "ir/graph.h"

#include <map>
#include <set>
#include <string>

namespace tunec::passes {

/// Builds the rewritten graph. Source values are mapped to new ones as nodes are copied; a
/// pass can map a source value to any new value (e.g. a folded constant) instead.
class GraphRewriter {
public:
  explicit GraphRewriter(const Graph& source);

  /// The new value standing for a source value (kNoValue stays kNoValue).
  ValueId map(ValueId source) const;
  /// From now on `source` is `replacement` (a value of the new graph).
  void replace(ValueId source, ValueId replacement) { mapping_[source] = replacement; }
  /// Copies a source node unchanged (inputs mapped).
  Status copy(const Node& node);
  /// Adds a node to the new graph; returns its outputs.
  Expected<std::vector<ValueId>> add(std::string name, OpKind kind, OpAttrs attrs,
                                     std::vector<ValueId> inputs,
                                     std::vector<std::string> outputNames);
  /// Adds a constant to the new graph.
  ValueId constant(std::string name, Tensor value) {
    return graph_.addConstant(std::move(name), std::move(value));
  }
  /// The constant data of a new value, or nullptr.
  const Tensor* constantOf(ValueId value) const;
  const Graph& target() const { return graph_; }
  /// The new graph with the mapped outputs, dead code removed.
  Graph finish();

private:
  const Graph& source_;
  Graph graph_;
  std::map<ValueId, ValueId> mapping_;
};

/// One node that takes the place of a matched subgraph: its op, attributes and inputs (source
/// values), then new constant inputs the match computed (a permutation, sliced indices).
struct Replacement {
  OpKind kind;
  OpAttrs attrs;
  std::vector<ValueId> inputs;
  std::vector<Tensor> constants = {};
};

/// Rewrites a graph in which each root node (by index) is replaced by its Replacement (named
/// after the root, producing the root's output) and the interior nodes of the matches, used
/// only inside them, are dropped; all other nodes are copied.
Expected<Graph> replaceMatches(const Graph& graph, const std::map<NodeId, Replacement>& roots,
                               const std::set<NodeId>& interior, const std::string& suffix);

/// How many source nodes use each value (model outputs count as a use).
std::vector<int> useCounts(const Graph& graph);
/// The nodes that read each value, in node order (once per input slot).
std::vector<std::vector<NodeId>> readersOf(const Graph& graph);

} // namespace tunec::passes
