// The fusion plan: which nodes run as one kernel, decided by DNNFusion's mapping types
// (DESIGN.md, decision 3), with the reason for every boundary that was not fused.
#pragma once

#include "ir/graph.h"

#include <string>
#include <vector>

namespace tunec::passes {

struct FusedKernel {
  NodeId anchor = -1;        ///< the heavy node (Conv, Gemm, MatMul), or -1 for a loop kernel
  std::vector<NodeId> nodes; ///< in order; the anchor first when there is one
  MappingType mapping;       ///< the fused result's mapping type
};

struct FusionBoundary {
  NodeId producer, consumer;
  std::string reason; ///< why the consumer did not join the producer's kernel
};

struct FusionPlan {
  std::vector<FusedKernel> kernels;
  std::vector<FusionBoundary> boundaries;
  std::vector<int> kernelOf; ///< per node
};

/// Groups nodes into kernels: a group grows along single-consumer edges while DNNFusion's table
/// says green (or yellow and the cheap analysis agrees); an anchor (many-to-many heavy op)
/// starts its own group and absorbs the post-ops that follow it; two anchors never fuse.
FusionPlan planFusion(const Graph& graph);

/// True for the heavy ops that templates implement (Conv, Gemm, MatMul).
bool isAnchor(OpKind kind);

} // namespace tunec::passes
