// The fusion plan: which nodes run as one kernel, decided by DNNFusion's mapping types
// (DESIGN.md, decision 3), with the reason for every boundary that was not fused.
#pragma once

#include "ir/graph.h"
#include "templates/post_ops.h"
#include "templates/template.h"

#include <string>
#include <vector>

namespace tunec::passes {

/// One post-op of an anchor's epilogue and what it reads. The anchor's own bias (a Conv's third
/// input, a Gemm's C) is the first, with `node` the anchor itself.
struct EpilogueStep {
  NodeId node;                 ///< the graph node it computes
  PostOp op;                   ///< BiasPerColumn, AddTensor, Relu, ...
  ValueId operand = kNoValue;  ///< the bias constant or the addend the op reads
  bool mergesIntoBias = false; ///< a per-channel constant added into the bias vector before it
};

struct FusedKernel {
  NodeId anchor = -1;        ///< the heavy node (Conv, Gemm, MatMul), or -1 for a loop kernel
  std::vector<NodeId> nodes; ///< in order; the anchor first when there is one
  MappingType mapping;       ///< the fused result's mapping type
  /// Anchors only: the template that runs it, and its epilogue: the anchor's own bias, then
  /// nodes[1 .. epilogueNodes()] in order. Reshape-like views of the result may follow.
  TemplateKind templ = TemplateKind::Matmul;
  std::vector<EpilogueStep> epilogue;
  /// How many nodes after the anchor its epilogue computes.
  size_t epilogueNodes() const;
  /// Attention (the anchor is Q K): the Softmax over the scores and the MatMul of the
  /// probabilities with V, the last two nodes; -1 otherwise.
  NodeId softmax = -1, values = -1;
  /// A Split of the result along its last axis into equal parts (merged sibling matmuls): the
  /// kernel writes each part as its own dense tensor; the last node. -1 otherwise.
  NodeId split = -1;
  /// Squeeze-excite's channel scale as the prologue of a 1x1 conv anchor: the Mul (not in
  /// `nodes`; kernelOf maps it here), the activation it scales and the [N, C, 1, 1] scale.
  NodeId prologue = -1;
  ValueId prologueInput = kNoValue, channelScale = kNoValue;
  /// The DequantizeLinear of a u8 tensor whose result is the epilogue's residual addend, read
  /// by the epilogue as the u8 tensor (AddDequantizedU8; not in `nodes`, kernelOf maps it
  /// here); -1 otherwise.
  NodeId dequantizedAddend = -1;
  /// A Transpose of a matmul's [N, H, W, C] output to [N, C, H, W]: the same bytes read as
  /// NHWC, so the epilogue goes on after it with the channel on axis 1 (ConvNeXt's permute
  /// back before its layer scale and residual). -1 otherwise.
  NodeId nhwcView = -1;
  /// A Transpose(0, 2, 3, 1) of a depthwise conv's [N, C, H, W] output (NHWC in memory): the
  /// same bytes as plain [N, H, W, C] rows, which the LayerNorm after it normalizes over C
  /// (ConvNeXt's permute before its LayerNorm). -1 otherwise.
  NodeId plainView = -1;
  /// How many of `nodes` the anchor's generated kernel computes (the rest are views of it).
  size_t nodesInKernel() const {
    return softmax >= 0 || split >= 0
               ? nodes.size()
               : 1 + epilogueNodes() + (nhwcView >= 0 ? 1 : 0) + (plainView >= 0 ? 1 : 0);
  }
  /// The post-ops of the epilogue, in order (merged biases counted once).
  Epilogue postOps() const;
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
/// starts its own group and takes the one-to-one ops that follow it as long as each is a
/// post-op its template's epilogue accepts (templates/post_ops.h); two anchors never fuse. The
/// driver lowers this plan as it stands: it decides nothing about fusion itself.
FusionPlan planFusion(const Graph& graph);

/// True for the heavy ops that templates implement (Conv, Gemm, MatMul of float values and the
/// int8 layers).
bool isAnchor(const Graph& graph, const Node& node);
/// A MatMul or Conv of integer type: MatMulInteger's and ConvInteger's exact form (i32 operands
/// summed modulo 2^32 by the runtime's integer steps, driver/lower_integer.cpp), never an anchor.
bool isIntegerProduct(const Graph& graph, const Node& node);
/// True for the int8 layers (IntegerMatMul, IntegerConv: passes/lower_quantized_layers.cpp),
/// whose epilogues may requantize and read computed column scales.
bool isIntegerAnchor(OpKind kind);

/// The template that runs an anchor: a Conv whose groups are its channels, one filter each, is
/// depthwise; other Convs are conv2d; Gemm and MatMul are matmul.
TemplateKind anchorTemplate(const Graph& graph, const Node& anchor);

} // namespace tunec::passes
