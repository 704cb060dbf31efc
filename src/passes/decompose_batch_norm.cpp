// Stand-alone batch norm: an inference BatchNormalization that no Conv absorbed (pre-activation
// blocks, BN -> ReLU -> Conv as in DenseNet) becomes x * s + t with per-channel constants
// s = gamma / sqrt(var + epsilon) and t = beta - mean * s, broadcast along the channel axis (1).
// The Mul and Add are one-to-one ops: they fuse into the neighbouring elementwise chain.
#include "passes/passes.h"
#include "passes/rewriter.h"

#include <cmath>

namespace tunec::passes {

Expected<Graph> decomposeBatchNorm(const Graph& graph) {
  GraphRewriter rw(graph);
  for (const Node& node : graph.nodes()) {
    bool constantStats = node.kind == OpKind::BatchNormalization;
    for (size_t i = 1; constantStats && i < 5; ++i)
      constantStats = graph.value(node.inputs[i]).constant.has_value();
    const TensorType& x = graph.value(node.inputs[0]).type;
    if (!constantStats || x.dtype != DType::F32 || x.shape.rank() < 2) {
      TUNEC_TRY(rw.copy(node));
      continue;
    }
    float epsilon = std::get<NormAttrs>(node.attrs).epsilon;
    const Tensor& gamma = *graph.value(node.inputs[1]).constant;
    const Tensor& beta = *graph.value(node.inputs[2]).constant;
    const Tensor& mean = *graph.value(node.inputs[3]).constant;
    const Tensor& var = *graph.value(node.inputs[4]).constant;
    int64_t channels = x.shape[1];
    // [C, 1, ..., 1]: broadcasts against N x C x spatial...
    std::vector<int64_t> dims(static_cast<size_t>(x.shape.rank() - 1), 1);
    dims[0] = channels;
    Tensor scale(DType::F32, Shape(dims)), shift(DType::F32, Shape(dims));
    for (int64_t c = 0; c < channels; ++c) {
      double s = gamma.getDouble(c) / std::sqrt(var.getDouble(c) + static_cast<double>(epsilon));
      scale.setDouble(c, s);
      shift.setDouble(c, beta.getDouble(c) - mean.getDouble(c) * s);
    }
    ValueId sId = rw.constant(node.name + ".bn_scale", std::move(scale));
    ValueId tId = rw.constant(node.name + ".bn_shift", std::move(shift));
    TUNEC_ASSIGN_OR_RETURN(std::vector<ValueId> scaled,
                           rw.add(node.name + ".scale", OpKind::Mul, NoAttrs{},
                                  {rw.map(node.inputs[0]), sId}, {node.name + ".scaled"}));
    TUNEC_ASSIGN_OR_RETURN(std::vector<ValueId> out,
                           rw.add(node.name, OpKind::Add, NoAttrs{}, {scaled[0], tId},
                                  {graph.value(node.outputs[0]).name}));
    rw.replace(node.outputs[0], out[0]);
  }
  return rw.finish();
}

} // namespace tunec::passes
