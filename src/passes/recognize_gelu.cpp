// GELU recognition: PyTorch's exported x * 0.5 * (1 + erf(x / sqrt(2))) becomes one Gelu op.
#include "passes/passes.h"
#include "passes/pattern.h"
#include "passes/rewriter.h"

#include <cmath>
#include <map>
#include <set>

namespace tunec::passes {

namespace {

struct Match {
  ValueId x;
  std::vector<NodeId> interior; ///< nodes absorbed besides the root
};

// root = Mul(m1, 0.5); m1 = Mul(x, a); a = Add(erf, 1); erf = Erf(d); d = Div(x, sqrt 2) or
// Mul(x, 1/sqrt 2). Every interior value has one use.
std::optional<Match> matchGelu(const Graph& g, const Node& root, const std::vector<int>& uses) {
  if (root.kind != OpKind::Mul) return std::nullopt;
  auto single = [&](ValueId v) { return uses[static_cast<size_t>(v)] == 1; };
  for (int side = 0; side < 2; ++side) {
    ValueId half = root.inputs[static_cast<size_t>(side)],
            m1v = root.inputs[static_cast<size_t>(1 - side)];
    if (!isScalar(g, half, 0.5)) continue;
    const Node* m1 = producerOf(g, m1v, OpKind::Mul);
    if (!m1 || !single(m1v)) continue;
    for (int s2 = 0; s2 < 2; ++s2) {
      ValueId x = m1->inputs[static_cast<size_t>(s2)], av = m1->inputs[static_cast<size_t>(1 - s2)];
      const Node* add = producerOf(g, av, OpKind::Add);
      if (!add || !single(av)) continue;
      ValueId erfv = kNoValue;
      if (isScalar(g, add->inputs[1], 1.0))
        erfv = add->inputs[0];
      else if (isScalar(g, add->inputs[0], 1.0))
        erfv = add->inputs[1];
      const Node* erf = producerOf(g, erfv, OpKind::Erf);
      if (!erf || !single(erfv)) continue;
      ValueId dv = erf->inputs[0];
      const Node* d = producerOf(g, dv);
      if (!d || !single(dv) || d->inputs[0] != x) continue;
      bool scaled =
          (d->kind == OpKind::Div && isScalar(g, d->inputs[1], std::sqrt(2.0), 1e-4)) ||
          (d->kind == OpKind::Mul && isScalar(g, d->inputs[1], 1.0 / std::sqrt(2.0), 1e-4));
      if (!scaled) continue;
      return Match{x,
                   {g.value(m1v).producer, g.value(av).producer, g.value(erfv).producer,
                    g.value(dv).producer}};
    }
  }
  return std::nullopt;
}

} // namespace

Expected<Graph> recognizeGelu(const Graph& graph) {
  std::vector<int> uses = useCounts(graph);
  std::map<NodeId, Replacement> roots;
  std::set<NodeId> interior;
  for (size_t n = 0; n < graph.nodes().size(); ++n)
    if (auto m = matchGelu(graph, graph.nodes()[n], uses)) {
      roots.emplace(static_cast<NodeId>(n), Replacement{OpKind::Gelu, GeluAttrs{false}, {m->x}});
      interior.insert(m->interior.begin(), m->interior.end());
    }
  return replaceMatches(graph, roots, interior, ".gelu");
}

} // namespace tunec::passes
