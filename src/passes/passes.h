// The graph passes, one per file, each a function from Graph to Graph.
#pragma once

#include "ir/graph.h"

namespace tunec::passes {

/// Evaluates every node whose inputs are all constant (with the reference ops) and replaces
/// its outputs by constants (fold_constants.cpp).
Expected<Graph> foldConstants(const Graph& graph);

/// Folds an inference BatchNormalization that follows a Conv (whose output has no other use)
/// into the Conv's weights and bias (fold_batch_norm.cpp).
Expected<Graph> foldBatchNorm(const Graph& graph);

} // namespace tunec::passes
