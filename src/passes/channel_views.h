// Channel views: Concats along the channels of NHWC activations whose inputs are written in
// place by their producers, and channel Slices that convolutions read in place, instead of
// copying them (ShuffleNet's units after order-concat-for-gathers and absorb-channel-gathers:
// the branch's last conv writes its part of the shuffled output, the next unit's first conv
// reads its half where it lies). Decided here, once; the driver carries it out.
#pragma once

#include "ir/graph.h"
#include "passes/fusion_plan.h"

#include <map>
#include <set>

namespace tunec::passes {

/// Where an input of a Concat lies in the Concat's NHWC buffer.
struct ChannelSlot {
  NodeId concat = -1;
  int64_t offset = 0; ///< its first channel
};

struct ChannelViews {
  /// Concats lowered as one NHWC buffer (rank 4, axis 1, not a model output).
  std::set<NodeId> concats;
  /// Inputs of those Concats that their producer writes in place: the result of a conv2d
  /// anchor's kernel (no residual addend, no view after it), or a Gather of channels by
  /// constant indices; each read by nothing else. The Concat copies its other inputs.
  std::map<ValueId, ChannelSlot> writtenInPlace;
  /// Slices of the channels (axis 1, step 1, other axes whole) that only conv2d anchors read,
  /// unpadded and without a channel-scale prologue: a view with the source's pixel stride.
  std::set<NodeId> slices;
};

/// The channel views of a graph under its fusion plan.
ChannelViews planChannelViews(const Graph& graph, const FusionPlan& fusion);

} // namespace tunec::passes
