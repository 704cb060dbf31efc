// A stable, readable text form of a Graph (used by tests and `tunec inspect`).
#pragma once

#include "ir/graph.h"

#include <string>

namespace tunec {

/// Prints the graph: inputs, constants (type only), one line per node with typed attributes.
std::string printGraph(const Graph& graph);
/// Prints one node's attributes as "{name=value ...}", or "" when it has none.
std::string printAttrs(const OpAttrs& attrs);

} // namespace tunec
