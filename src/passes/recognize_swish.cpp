// Swish recognition: x * sigmoid(x) (PyTorch's SiLU, exported as Sigmoid and Mul) and
// x * sigmoid(alpha x) become one Swish op, a one-to-one op that an anchor's epilogue takes
// whole. Left as two nodes, x has two uses and the fusion plan must stop at the anchor.
#include "passes/passes.h"
#include "passes/pattern.h"
#include "passes/rewriter.h"

#include <map>
#include <set>

namespace tunec::passes {

namespace {

struct Match {
  ValueId x;
  float alpha;
  std::vector<NodeId> interior; ///< the Sigmoid, and the Mul by alpha when there is one
};

// root = Mul(x, s) or Mul(s, x); s = Sigmoid(t) with one use; t = x, or t = Mul(x, alpha) with
// one use and alpha a float scalar constant.
std::optional<Match> matchSwish(const Graph& g, const Node& root, const std::vector<int>& uses) {
  if (root.kind != OpKind::Mul || root.inputs.size() != 2) return std::nullopt;
  if (g.value(root.outputs[0]).type.dtype != DType::F32) return std::nullopt;
  for (int side = 0; side < 2; ++side) {
    ValueId x = root.inputs[static_cast<size_t>(side)];
    ValueId s = root.inputs[static_cast<size_t>(1 - side)];
    const Node* sigmoid = producerOf(g, s, OpKind::Sigmoid);
    if (!sigmoid || uses[static_cast<size_t>(s)] != 1) continue;
    // The product must not broadcast: x and sigmoid(.) of the output's shape.
    if (g.value(x).type.shape != g.value(root.outputs[0]).type.shape) continue;
    ValueId t = sigmoid->inputs[0];
    if (t == x) return Match{x, 1.f, {g.value(s).producer}};
    const Node* scale = producerOf(g, t, OpKind::Mul);
    if (!scale || uses[static_cast<size_t>(t)] != 1) continue;
    ValueId c = otherInput(*scale, x);
    auto alpha = scalarConstant(g, c);
    if (c == kNoValue || !alpha || g.value(t).type.shape != g.value(x).type.shape) continue;
    return Match{x, static_cast<float>(*alpha), {g.value(s).producer, g.value(t).producer}};
  }
  return std::nullopt;
}

} // namespace

Expected<Graph> recognizeSwish(const Graph& graph) {
  std::vector<int> uses = useCounts(graph);
  std::map<NodeId, Replacement> roots;
  std::set<NodeId> interior;
  for (size_t n = 0; n < graph.nodes().size(); ++n)
    if (auto m = matchSwish(graph, graph.nodes()[n], uses)) {
      roots.emplace(static_cast<NodeId>(n),
                    Replacement{OpKind::Swish, AlphaBetaAttrs{m->alpha, 0.f}, {m->x}});
      interior.insert(m->interior.begin(), m->interior.end());
    }
  return replaceMatches(graph, roots, interior, ".swish");
}

} // namespace tunec::passes
