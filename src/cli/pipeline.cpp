// The graph pass pipeline.
#include "cli/pipeline.h"

#include "ir/printer.h"
#include "ir/verifier.h"
#include "passes/passes.h"

namespace tunec::cli {

const std::vector<PassEntry>& graphPipeline() {
  static const std::vector<PassEntry> pipeline = {
      // First: constant scales no arithmetic can honour are refused by name, before any rewrite
      // computes with them.
      {"check-quantization", passes::checkQuantization},
      // An f16 model computes in f32 (no f16 arithmetic on these CPUs), before any pass reads
      // its constants or ops.
      {"compute-half-in-float", passes::computeHalfInFloat},
      // The QuantizeLinear of constant weights (a fake-quant export's) becomes s8 weights; the
      // DequantizeLinear nodes stay for lower-quantized-layers to read.
      {"fold-constants-but-dequantization", passes::foldConstantsButDequantization},
      // Then quantization reaches each layer through pools and reshapes, and the integer Clip of
      // a narrow-range fake quantization is an f32 one before its QuantizeLinear.
      {"propagate-quantization", passes::propagateQuantization},
      // Before fold-constants, which would dequantize the s8 weights to f32: quantized linear
      // layers become int8 kernels.
      {"lower-quantized-layers", passes::lowerQuantizedLayers},
      // First: whatever is computed from constants only (e.g. batch-norm statistics written as
      // arithmetic on initializers) becomes a constant that later rewrites can read.
      {"fold-constants", passes::foldConstants},
      // Needs constant Conv weights and BatchNormalization statistics (after fold-constants).
      {"fold-batch-norm", passes::foldBatchNorm},
      // The batch norms no Conv absorbed, as Mul + Add: before simplify-algebra and
      // fold-channel-affine, which may fold them further (into a following Conv's neighbour).
      {"decompose-batch-norm", passes::decomposeBatchNorm},
      // Pattern recognition reads scalar constants (0.5, sqrt 2, epsilon): after folding.
      {"recognize-gelu", passes::recognizeGelu},
      {"recognize-layer-norm", passes::recognizeLayerNorm},
      {"recognize-swish", passes::recognizeSwish},
      {"fold-grouped-kv", passes::foldGroupedKv},
      // Before simplify-algebra, which would collapse the shuffle's reshape chain.
      {"recognize-channel-shuffle", passes::recognizeChannelShuffle},
      {"fold-slice-of-gather", passes::foldSliceOfGather},
      // After recognition, so that the recognizers see the forms PyTorch exports.
      {"simplify-algebra", passes::simplifyAlgebra},
      // After simplify-algebra has turned Sub/Div by constants into Add/Mul.
      {"fold-channel-affine", passes::foldChannelAffine},
      // The channel shuffle's Concat and Gathers as ranges read and written in place: the
      // Concat reordered so that each Gather reads one range (its parts of Gathers then cut by
      // fold-slice-of-gather, its parts of Convs split from them), permutations moved past
      // depthwise Convs, then absorbed into the weights of the Convs that read them. After
      // fold-batch-norm and fold-channel-affine, which leave the weights final.
      {"order-concat-for-gathers", passes::orderConcatForGathers},
      {"fold-slice-of-gather", passes::foldSliceOfGather},
      {"split-conv-for-slices", passes::splitConvForSlices},
      {"push-gathers-through-depthwise", passes::pushGathersThroughDepthwise},
      {"absorb-channel-gathers", passes::absorbChannelGathers},
      // Before lower-quantize-round-trips: the pooled and moved integers are read as integers,
      // so the quantization before the pool stays (a requantizing epilogue) and is not lowered
      // to f32.
      {"move-quantized-values", passes::moveQuantizedValues},
      // After simplify-algebra, whose Div-by-constant to Mul would round differently at ties:
      // this pass's x / s must stay a division, as QuantizeLinear divides. After
      // fold-constants, which has folded the round trips of constant weights to f32 weights.
      {"lower-quantize-round-trips", passes::lowerQuantizeRoundTrips},
      // After it: a lowered round trip's division by its scale is a Div that folds too.
      {"fold-requantization-scale", passes::foldRequantizationScale},
      // After it: the dequantizations left are of u8 values the int8 layers read too.
      {"hoist-quantization", passes::hoistQuantization},
      // Last: after the rewrites above have put every bias next to its MatMul.
      {"merge-sibling-matmuls", passes::mergeSiblingMatmuls},
  };
  return pipeline;
}

Expected<Graph>
runGraphPipeline(Graph graph,
                 const std::function<void(const std::string&, const Graph&, bool)>& afterPass,
                 std::vector<std::pair<std::string, std::string>>* keptFloat) {
  for (const PassEntry& pass : graphPipeline()) {
    if (keptFloat && pass.run == passes::lowerQuantizedLayers)
      *keptFloat = passes::quantizedLayersKeptFloat(graph);
    std::string before = afterPass ? printGraph(graph) : std::string();
    auto next = pass.run(graph);
    if (!next) return next.error().withContext(std::string("pass ") + pass.name);
    if (Status s = verifyGraph(*next); !s)
      return s.error().withContext(std::string("internal: graph after pass ") + pass.name +
                                   " fails verification");
    graph = std::move(*next);
    if (afterPass) afterPass(pass.name, graph, printGraph(graph) != before);
  }
  return graph;
}

} // namespace tunec::cli
