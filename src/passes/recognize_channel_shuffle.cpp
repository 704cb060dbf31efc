// Channel shuffle recognition: ShuffleNet's Reshape [N, C, H, W] -> [N, g, C/g, H, W],
// Transpose (0, 2, 1, 3, 4), Reshape back to [N, C, H, W] becomes one Gather of the channels
// by a constant permutation (DNNFusion's shuffle type). As three nodes it is a 5-d copy the
// layouts cannot follow (the NHWC activation is reordered to plain and back); as a Gather along
// the channel axis it is an index remap that keeps the activation NHWC, and the channel Slices
// after it fold into it (fold-slice-of-gather).
#include "passes/passes.h"
#include "passes/pattern.h"
#include "passes/rewriter.h"

#include <map>
#include <set>

namespace tunec::passes {

namespace {

struct Match {
  ValueId x;
  int64_t groups;
  NodeId first, transpose;
};

// root = Reshape(t) to x's shape; t = Transpose(r, (0, 2, 1, 3, 4)) with one use; r =
// Reshape(x) to [N, g, C/g, H, W] with one use, x of rank 4.
std::optional<Match> matchShuffle(const Graph& g, const Node& root, const std::vector<int>& uses) {
  if (root.kind != OpKind::Reshape) return std::nullopt;
  const Node* transpose = producerOf(g, root.inputs[0], OpKind::Transpose);
  if (!transpose || uses[static_cast<size_t>(root.inputs[0])] != 1) return std::nullopt;
  if (std::get<TransposeAttrs>(transpose->attrs).perm != std::vector<int64_t>{0, 2, 1, 3, 4})
    return std::nullopt;
  const Node* first = producerOf(g, transpose->inputs[0], OpKind::Reshape);
  if (!first || uses[static_cast<size_t>(transpose->inputs[0])] != 1) return std::nullopt;
  ValueId x = first->inputs[0];
  const Shape& xs = g.value(x).type.shape;
  const Shape& split = g.value(first->outputs[0]).type.shape;
  if (xs.rank() != 4 || split.rank() != 5 || g.value(root.outputs[0]).type.shape != xs)
    return std::nullopt;
  if (split[0] != xs[0] || split[3] != xs[2] || split[4] != xs[3] || split[1] * split[2] != xs[1] ||
      split[1] < 2 || split[2] < 2)
    return std::nullopt;
  return Match{x, split[1], g.value(transpose->inputs[0]).producer,
               g.value(root.inputs[0]).producer};
}

} // namespace

Expected<Graph> recognizeChannelShuffle(const Graph& graph) {
  std::vector<int> uses = useCounts(graph);
  std::map<NodeId, Replacement> roots;
  std::set<NodeId> interior;
  for (size_t n = 0; n < graph.nodes().size(); ++n) {
    auto m = matchShuffle(graph, graph.nodes()[n], uses);
    if (!m) continue;
    // Output channel j * g + i is input channel i * (C / g) + j.
    int64_t c = graph.value(m->x).type.shape[1], g = m->groups;
    Tensor perm(DType::I64, Shape{c});
    for (int64_t j = 0; j < c / g; ++j)
      for (int64_t i = 0; i < g; ++i) perm.dataAs<int64_t>()[j * g + i] = i * (c / g) + j;
    roots.emplace(static_cast<NodeId>(n),
                  Replacement{OpKind::Gather, AxisAttrs{1}, {m->x}, {std::move(perm)}});
    interior.insert({m->first, m->transpose});
  }
  if (roots.empty()) return graph;
  return replaceMatches(graph, roots, interior, ".channel_shuffle");
}

} // namespace tunec::passes
