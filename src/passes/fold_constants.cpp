// Constant folding: nodes whose inputs are all constant become constants (reference ops).
#include "passes/passes.h"
#include "passes/rewriter.h"
#include "reference/reference.h"

#include <algorithm>

namespace tunec::passes {

namespace {

// Folds every node of constant inputs but those of `kept` kinds.
Expected<Graph> foldConstantNodes(const Graph& graph, std::initializer_list<OpKind> kept) {
  GraphRewriter rw(graph);
  for (const Node& node : graph.nodes()) {
    std::vector<const Tensor*> inputs;
    bool allConstant = std::find(kept.begin(), kept.end(), node.kind) == kept.end();
    // A value of symbolic shape (a causal mask of the run's length built from constants) is
    // computed at each run's extents: a constant holds one shape.
    for (ValueId out : node.outputs)
      allConstant = allConstant && graph.value(out).type.shape.isStatic();
    // So is a slice at run-time starts (the rotary angles of this run's positions).
    if (node.kind == OpKind::Slice && std::get<SliceAttrs>(node.attrs).startsAtRunTime())
      allConstant = false;
    for (ValueId in : node.inputs) {
      const Tensor* t = rw.constantOf(rw.map(in));
      if (in != kNoValue && !t) allConstant = false;
      inputs.push_back(t);
    }
    if (!allConstant) {
      TUNEC_TRY(rw.copy(node));
      continue;
    }
    TUNEC_ASSIGN_OR_RETURN(std::vector<Tensor> outputs, allocateOutputs(graph, node));
    Status s = runReferenceNode(node, inputs, outputs);
    if (!s) return s.error().withContext("constant folding of node '" + node.name + "'");
    for (size_t i = 0; i < outputs.size(); ++i)
      rw.replace(node.outputs[i],
                 rw.constant(graph.value(node.outputs[i]).name, std::move(outputs[i])));
  }
  return rw.finish();
}

} // namespace

Expected<Graph> foldConstants(const Graph& graph) {
  return foldConstantNodes(graph, {});
}

Expected<Graph> foldConstantsButDequantization(const Graph& graph) {
  return foldConstantNodes(graph, {OpKind::DequantizeLinear});
}

} // namespace tunec::passes
