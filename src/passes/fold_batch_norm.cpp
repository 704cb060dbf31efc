// Batch-norm folding: Conv -> BatchNormalization (inference) becomes one Conv with
// W' = W * s and B' = (B - mean) * s + beta, where s = gamma / sqrt(var + epsilon).
#include "passes/passes.h"
#include "passes/rewriter.h"

#include <cmath>
#include <map>
#include <set>

namespace tunec::passes {

namespace {

// The Conv producing a BatchNormalization's input when it can absorb it, or nullptr.
const Node* absorbingConv(const Graph& graph, const Node& bn, const std::vector<int>& uses) {
  ValueId x = bn.inputs[0];
  const Value& v = graph.value(x);
  if (v.producer < 0 || uses[static_cast<size_t>(x)] != 1) return nullptr;
  const Node& conv = graph.node(v.producer);
  if (conv.kind != OpKind::Conv || v.type.dtype != DType::F32) return nullptr;
  if (!graph.value(conv.inputs[1]).constant) return nullptr;
  if (conv.inputs.size() > 2 && conv.inputs[2] != kNoValue && !graph.value(conv.inputs[2]).constant)
    return nullptr;
  for (size_t i = 1; i < 5; ++i)
    if (!graph.value(bn.inputs[i]).constant) return nullptr;
  return &conv;
}

} // namespace

Expected<Graph> foldBatchNorm(const Graph& graph) {
  std::vector<int> uses = useCounts(graph);
  std::map<NodeId, NodeId> bnOfConv; // conv node -> the batch norm it absorbs
  std::set<NodeId> absorbed;
  for (size_t n = 0; n < graph.nodes().size(); ++n) {
    const Node& node = graph.nodes()[n];
    if (node.kind != OpKind::BatchNormalization) continue;
    if (absorbingConv(graph, node, uses)) {
      bnOfConv[graph.value(node.inputs[0]).producer] = static_cast<NodeId>(n);
      absorbed.insert(static_cast<NodeId>(n));
    }
  }
  GraphRewriter rw(graph);
  for (size_t n = 0; n < graph.nodes().size(); ++n) {
    const Node& node = graph.nodes()[n];
    if (absorbed.count(static_cast<NodeId>(n))) {
      rw.replace(node.outputs[0], rw.map(node.inputs[0])); // the folded conv produces the result
      continue;
    }
    auto folded = bnOfConv.find(static_cast<NodeId>(n));
    if (folded == bnOfConv.end()) {
      TUNEC_TRY(rw.copy(node));
      continue;
    }
    const Node& bn = graph.node(folded->second);
    float epsilon = std::get<NormAttrs>(bn.attrs).epsilon;
    const Tensor& w = *graph.value(node.inputs[1]).constant;
    const Tensor& gamma = *graph.value(bn.inputs[1]).constant;
    const Tensor& beta = *graph.value(bn.inputs[2]).constant;
    const Tensor& mean = *graph.value(bn.inputs[3]).constant;
    const Tensor& var = *graph.value(bn.inputs[4]).constant;
    int64_t oc = w.shape()[0], perChannel = w.numel() / oc;
    Tensor newW = w.clone(), newB(DType::F32, Shape{oc});
    bool hasBias = node.inputs.size() > 2 && node.inputs[2] != kNoValue;
    for (int64_t c = 0; c < oc; ++c) {
      double s = gamma.getDouble(c) / std::sqrt(var.getDouble(c) + static_cast<double>(epsilon));
      for (int64_t i = 0; i < perChannel; ++i)
        newW.setDouble(c * perChannel + i, w.getDouble(c * perChannel + i) * s);
      double b = hasBias ? graph.value(node.inputs[2]).constant->getDouble(c) : 0.0;
      newB.setDouble(c, (b - mean.getDouble(c)) * s + beta.getDouble(c));
    }
    ValueId wId = rw.constant(graph.value(node.inputs[1]).name + ".bn_folded", std::move(newW));
    ValueId bId = rw.constant(node.name + ".bias.bn_folded", std::move(newB));
    TUNEC_ASSIGN_OR_RETURN(std::vector<ValueId> outs, rw.add(node.name, OpKind::Conv, node.attrs,
                                                             {rw.map(node.inputs[0]), wId, bId},
                                                             {graph.value(bn.outputs[0]).name}));
    rw.replace(node.outputs[0], outs[0]);
  }
  return rw.finish();
}

} // namespace tunec::passes
