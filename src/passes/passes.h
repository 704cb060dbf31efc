// The graph passes, one per file, each a function from Graph to Graph.
#pragma once

#include "ir/graph.h"

#include <string>
#include <utility>
#include <vector>

namespace tunec::passes {

/// Evaluates every node whose inputs are all constant (with the reference ops) and replaces
/// its outputs by constants (fold_constants.cpp).
/// Refuses constant quantization scales no arithmetic can honour (NaN, infinite, zero, negative,
/// subnormal), and dequantizations whose values overflow f32, naming the node: the first pass.
Expected<Graph> checkQuantization(const Graph& graph);

/// An f16 model's ops computed in f32, as ONNX Runtime's CPU provider runs them: f16 constants
/// converted, Casts between f16 and f32 dropped, f16 inputs and outputs cast at the model's
/// edges (compute_half_in_float.cpp).
Expected<Graph> computeHalfInFloat(const Graph& graph);

Expected<Graph> foldConstants(const Graph& graph);

/// foldConstants but for DequantizeLinear, whose constant s8 weights lower-quantized-layers reads:
/// the QuantizeLinear of a constant (a fake-quant export's f32 weights, and whatever arithmetic
/// on initializers computes them) becomes the integer initializer a converted export holds, with
/// ONNX's rounding (half to even) and saturation (fold_constants.cpp).
Expected<Graph> foldConstantsButDequantization(const Graph& graph);

/// Folds an inference BatchNormalization that follows a Conv (whose output has no other use)
/// into the Conv's weights and bias (fold_batch_norm.cpp).
Expected<Graph> foldBatchNorm(const Graph& graph);

/// Rewrites every inference BatchNormalization left after fold-batch-norm (one no Conv
/// absorbed) as a per-channel Mul and Add (decompose_batch_norm.cpp).
Expected<Graph> decomposeBatchNorm(const Graph& graph);

/// Folds a per-output-channel constant Mul or Add after a Conv (whose output has no other use)
/// into the Conv's weights and bias (fold_channel_affine.cpp).
Expected<Graph> foldChannelAffine(const Graph& graph);

/// Simplifies by algebraic properties: identities, Sub/Div by constants to Add/Mul, constants
/// gathered by associativity, transposes composed, reshape chains collapsed (simplify_algebra.cpp).
Expected<Graph> simplifyAlgebra(const Graph& graph);

/// QuantizeLinear(op(DequantizeLinear(q, s, z), ...), s, z) with the same per-tensor parameters
/// as op(q, ...) for a max pool or a data movement (Reshape, Flatten, Transpose, Slice, Concat,
/// ...): the integers pooled and moved (move_quantized_values.cpp).
Expected<Graph> moveQuantizedValues(const Graph& graph);

/// Carries quantization through the ops that only select, move or max values, as a fake-quant
/// export leaves it: op(DequantizeLinear(q)) becomes DequantizeLinear(op(q)), a QuantizeLinear of a
/// DequantizeLinear of the same parameters cancels, and a Clip of quantized integers or a Relu of
/// dequantized ones becomes an f32 one before the QuantizeLinear (propagate_quantization.cpp).
Expected<Graph> propagateQuantization(const Graph& graph);

/// Rewrites DequantizeLinear(QuantizeLinear(x, s, z), s, z) with per-tensor parameters as the
/// f32 arithmetic s * clip(round(x / s), lo - z, hi - z) (lower_quantize_round_trips.cpp).
Expected<Graph> lowerQuantizeRoundTrips(const Graph& graph);

/// Folds the output scale s of the QuantizeLinear (or a lowered round trip's division) after an
/// int8 layer's (sums + k) x scale into the scale, f32(scale / s), as QLinearConv computes it
/// (fold_requantization_scale.cpp).
Expected<Graph> foldRequantizationScale(const Graph& graph);

/// Moves each QuantizeLinear and DequantizeLinear of a computed value (constant scale and zero
/// point) right after the node producing that value, so that the kernels after it can read it
/// (hoist_quantization.cpp).
Expected<Graph> hoistQuantization(const Graph& graph);

/// MatMul/Gemm/Conv of a dequantized u8 activation and dequantized constant s8 weights as an
/// IntegerMatMul/IntegerConv (the int8 kernel's exact sums) times the column scale plus the
/// zero point's correction (lower_quantized_layers.cpp).
Expected<Graph> lowerQuantizedLayers(const Graph& graph);

/// The quantized layers (Conv, MatMul, Gemm reading a DequantizeLinear) that lower-quantized-
/// layers leaves in fp32, each with why: for the compile report.
std::vector<std::pair<std::string, std::string>> quantizedLayersKeptFloat(const Graph& graph);

/// Replaces PyTorch's exported erf form of GELU, x * 0.5 * (1 + erf(x / sqrt 2)), by one Gelu
/// op (recognize_gelu.cpp).
Expected<Graph> recognizeGelu(const Graph& graph);

/// Replaces PyTorch's opset-13 decomposition of layer_norm over the last axis by one
/// LayerNormalization op (recognize_layer_norm.cpp).
Expected<Graph> recognizeLayerNorm(const Graph& graph);

/// Replaces x * sigmoid(x) (SiLU) and x * sigmoid(alpha x) by one Swish op
/// (recognize_swish.cpp).
Expected<Graph> recognizeSwish(const Graph& graph);

/// Grouped-query attention: a MatMul of query heads by K or V heads repeated for them
/// (Unsqueeze, Expand, Reshape, for K a Transpose) becomes one MatMul per K/V head with the
/// query heads that share it as rows, between Reshapes (views) (fold_grouped_kv.cpp).
Expected<Graph> foldGroupedKv(const Graph& graph);

/// Replaces a channel shuffle (Reshape to [N, g, C/g, H, W], Transpose (0, 2, 1, 3, 4), Reshape
/// back) by a Gather of the channels with a constant permutation (recognize_channel_shuffle.cpp).
Expected<Graph> recognizeChannelShuffle(const Graph& graph);

/// Replaces a Slice of a constant-index Gather along the gathered axis by a Gather of the sliced
/// indices (fold_slice_of_gather.cpp).
Expected<Graph> foldSliceOfGather(const Graph& graph);

/// Rebuilds a Concat read only by constant-index Gathers that partition its channels from slices
/// of its inputs, ordered so that each Gather reads one contiguous range
/// (order_concat_for_gathers.cpp).
Expected<Graph> orderConcatForGathers(const Graph& graph);

/// Splits a one-group Conv (and the activations after it) read only by channel Slices into one
/// Conv per Slice over its output channels (split_conv_for_slices.cpp).
Expected<Graph> splitConvForSlices(const Graph& graph);

/// Moves a channel permutation (a constant-index Gather) from before a depthwise Conv to after
/// it, permuting the filters (push_gathers_through_depthwise.cpp).
Expected<Graph> pushGathersThroughDepthwise(const Graph& graph);

/// Absorbs a Gather that permutes a contiguous channel range into the weights of the one-group
/// Conv reading it, which then reads the range (a Slice) itself (absorb_channel_gathers.cpp).
Expected<Graph> absorbChannelGathers(const Graph& graph);

/// Merges MatMuls of one input by constant weights of one shape (and their bias adds) into one
/// MatMul and a Split of its output (merge_sibling_matmuls.cpp).
Expected<Graph> mergeSiblingMatmuls(const Graph& graph);

} // namespace tunec::passes
