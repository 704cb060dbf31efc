// The reference executor: plain, obviously-correct implementations of every op; the oracle
// for tests and for the tuner's correctness check.
#pragma once

#include "ir/graph.h"

#include <span>
#include <vector>

namespace tunec {

/// Runs one node. `inputs` has one entry per node input (nullptr for an omitted optional one);
/// `outputs` are allocated with the node's inferred output types. Errors are data-dependent
/// failures (e.g. a Gather index out of range) and name the value.
Status runReferenceNode(const Node& node, std::span<const Tensor* const> inputs,
                        std::span<Tensor> outputs);

/// The output tensors of `node` (zeros), or an error naming the node, the output, its type and
/// bytes when they exceed this machine's memory or cannot be allocated (instead of the process's
/// generic out-of-memory): what the reference executor and constant folding evaluate into.
Expected<std::vector<Tensor>> allocateOutputs(const Graph& graph, const Node& node);

/// Runs a whole graph on one tensor per graph input (in graph input order) and returns one
/// tensor per graph output. Checks each input's dtype and shape and names the input on error.
Expected<std::vector<Tensor>> runReference(const Graph& graph, const std::vector<Tensor>& inputs);

} // namespace tunec
