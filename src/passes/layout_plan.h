// Layout assignment: activations in the layout the conv template reads (NHWC), propagated
// through layout-agnostic ops, so that reorders appear only where they must.
#pragma once

#include "ir/graph.h"

#include <vector>

namespace tunec::passes {

struct Reorder {
  ValueId value;   ///< the tensor reordered
  NodeId consumer; ///< the node that needs it in another layout (-1: a model output)
  Layout to;
};

struct LayoutPlan {
  std::vector<Layout> layouts; ///< per value, as produced
  std::vector<Reorder> reorders;
};

/// Conv inputs and outputs are NHWC; elementwise ops, pooling and channel-axis concatenation
/// keep their input's layout; layout-sensitive ops (reshapes, transposes, matmuls, softmax,
/// ...) and model outputs need plain row-major, and a 4-d tensor with 1x1 spatial size is the
/// same bytes in both layouts (no reorder needed).
LayoutPlan planLayouts(const Graph& graph);

/// NHWC as a Layout of a 4-d tensor.
Layout nhwcLayout();

} // namespace tunec::passes
