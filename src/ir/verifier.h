// Structural and type checks of a Graph; run between passes in debug builds.
#pragma once

#include "ir/graph.h"

namespace tunec {

/// Checks topological order, defined inputs, re-inferred types and outputs; the error names
/// the offending node.
Status verifyGraph(const Graph& graph);

} // namespace tunec
