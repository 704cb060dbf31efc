// LayerNorm recognition: PyTorch's opset-13 export of layer_norm (ReduceMean, Sub, Pow,
// ReduceMean, Add eps, Sqrt, Div, Mul gamma, Add beta over the last axis) becomes one
// LayerNormalization op; RMS normalization (Pow, ReduceMean, Add eps, Sqrt, Div or Reciprocal,
// Mul, Mul gamma) one RMSNormalization.
#include "passes/passes.h"
#include "passes/pattern.h"
#include "passes/rewriter.h"

#include <map>
#include <set>

namespace tunec::passes {

namespace {

struct Match {
  ValueId x, gamma, beta;
  float epsilon;
  int64_t axis;
  std::vector<NodeId> interior;
};

bool reducesLastAxis(const Graph& g, const Node& n) {
  if (n.kind != OpKind::ReduceMean) return false;
  const auto& a = std::get<ReduceAttrs>(n.attrs);
  int rank = g.value(n.inputs[0]).type.shape.rank();
  return a.keepDims && a.axes.size() == 1 && a.axes[0] == rank - 1;
}

// The constant operand of a binary node and the other operand.
bool splitConstant(const Graph& g, const Node& n, ValueId& constant, ValueId& other) {
  for (int i = 0; i < 2; ++i)
    if (g.value(n.inputs[static_cast<size_t>(i)]).constant) {
      constant = n.inputs[static_cast<size_t>(i)];
      other = n.inputs[static_cast<size_t>(1 - i)];
      return !g.value(other).constant;
    }
  return false;
}

std::optional<Match> matchLayerNorm(const Graph& g, const Node& root,
                                    const std::vector<int>& uses) {
  auto single = [&](ValueId v) { return uses[static_cast<size_t>(v)] == 1; };
  if (root.kind != OpKind::Add) return std::nullopt;
  ValueId beta, mulv, gamma, divv;
  if (!splitConstant(g, root, beta, mulv) || !single(mulv)) return std::nullopt;
  const Node* mul = producerOf(g, mulv, OpKind::Mul);
  if (!mul || !splitConstant(g, *mul, gamma, divv) || !single(divv)) return std::nullopt;
  const Node* div = producerOf(g, divv, OpKind::Div);
  if (!div) return std::nullopt;
  ValueId subv = div->inputs[0], sqrtv = div->inputs[1];
  const Node* sub = producerOf(g, subv, OpKind::Sub);
  const Node* sqrt = producerOf(g, sqrtv, OpKind::Sqrt);
  if (!sub || !sqrt || !single(sqrtv) || uses[static_cast<size_t>(subv)] != 2) return std::nullopt;
  ValueId x = sub->inputs[0], rm1v = sub->inputs[1];
  const Node* rm1 = producerOf(g, rm1v);
  if (!rm1 || !single(rm1v) || !reducesLastAxis(g, *rm1) || rm1->inputs[0] != x)
    return std::nullopt;
  ValueId addEpsV = sqrt->inputs[0], eps, rm2v;
  const Node* addEps = producerOf(g, addEpsV, OpKind::Add);
  if (!addEps || !single(addEpsV) || !splitConstant(g, *addEps, eps, rm2v) || !single(rm2v))
    return std::nullopt;
  auto epsValue = scalarConstant(g, eps);
  const Node* rm2 = producerOf(g, rm2v);
  if (!epsValue || !rm2 || !reducesLastAxis(g, *rm2)) return std::nullopt;
  ValueId powv = rm2->inputs[0];
  const Node* pow = producerOf(g, powv, OpKind::Pow);
  if (!pow || !single(powv) || pow->inputs[0] != subv || !isScalar(g, pow->inputs[1], 2.0, 0))
    return std::nullopt;
  const Shape& xs = g.value(x).type.shape;
  int64_t c = xs[xs.rank() - 1];
  for (ValueId p : {gamma, beta}) {
    const Shape& s = g.value(p).type.shape;
    if (s.rank() != 1 || s[0] != c) return std::nullopt;
  }
  std::vector<NodeId> interior;
  for (ValueId v : {mulv, divv, subv, sqrtv, rm1v, addEpsV, rm2v, powv})
    interior.push_back(g.value(v).producer);
  return Match{x, gamma, beta, static_cast<float>(*epsValue), xs.rank() - 1, interior};
}

// RMS normalization as decoder exports write it (HuggingFace's LlamaRMSNorm): scale * (x *
// 1/sqrt(mean(x^2) + eps)) or scale * (x / sqrt(...)), x^2 as Pow(x, 2) or Mul(x, x), 1/s as
// Div(1, s) or Reciprocal(s), over the last axis.
std::optional<Match> matchRmsNorm(const Graph& g, const Node& root, const std::vector<int>& uses) {
  auto single = [&](ValueId v) { return uses[static_cast<size_t>(v)] == 1; };
  ValueId gamma, normv;
  if (root.kind != OpKind::Mul || !splitConstant(g, root, gamma, normv) || !single(normv))
    return std::nullopt;
  const Node* norm = producerOf(g, normv);
  if (!norm || (norm->kind != OpKind::Mul && norm->kind != OpKind::Div)) return std::nullopt;
  ValueId x = norm->inputs[0], sqrtv = kNoValue, invv = kNoValue;
  if (norm->kind == OpKind::Div) {
    sqrtv = norm->inputs[1];
  } else {
    for (int i = 0; i < 2; ++i) {
      ValueId cand = norm->inputs[static_cast<size_t>(i)];
      const Node* inv = producerOf(g, cand);
      if (!inv || !single(cand)) continue;
      if (inv->kind == OpKind::Reciprocal ||
          (inv->kind == OpKind::Div && isScalar(g, inv->inputs[0], 1.0, 0))) {
        invv = cand;
        sqrtv = inv->inputs[inv->kind == OpKind::Div ? 1 : 0];
        x = norm->inputs[static_cast<size_t>(1 - i)];
        break;
      }
    }
  }
  const Node* sqrt = sqrtv == kNoValue ? nullptr : producerOf(g, sqrtv, OpKind::Sqrt);
  if (!sqrt || !single(sqrtv)) return std::nullopt;
  ValueId addEpsV = sqrt->inputs[0], eps, meanv;
  const Node* addEps = producerOf(g, addEpsV, OpKind::Add);
  if (!addEps || !single(addEpsV) || !splitConstant(g, *addEps, eps, meanv) || !single(meanv))
    return std::nullopt;
  auto epsValue = scalarConstant(g, eps);
  const Node* mean = producerOf(g, meanv);
  if (!epsValue || !mean || !reducesLastAxis(g, *mean)) return std::nullopt;
  ValueId sqv = mean->inputs[0];
  const Node* sq = producerOf(g, sqv);
  bool squares =
      sq && single(sqv) &&
      ((sq->kind == OpKind::Pow && sq->inputs[0] == x && isScalar(g, sq->inputs[1], 2.0, 0)) ||
       (sq->kind == OpKind::Mul && sq->inputs[0] == x && sq->inputs[1] == x));
  if (!squares) return std::nullopt;
  const Shape& xs = g.value(x).type.shape;
  const Shape& gs = g.value(gamma).type.shape;
  if (gs.rank() != 1 || gs[0] != xs[xs.rank() - 1] || g.value(x).type.dtype != DType::F32)
    return std::nullopt;
  std::vector<NodeId> interior;
  for (ValueId v : {normv, invv, sqrtv, addEpsV, meanv, sqv})
    if (v != kNoValue) interior.push_back(g.value(v).producer);
  return Match{x, gamma, kNoValue, static_cast<float>(*epsValue), xs.rank() - 1, interior};
}

} // namespace

Expected<Graph> recognizeLayerNorm(const Graph& graph) {
  std::vector<int> uses = useCounts(graph);
  std::map<NodeId, Replacement> roots;
  std::set<NodeId> interior;
  for (size_t n = 0; n < graph.nodes().size(); ++n)
    if (auto m = matchLayerNorm(graph, graph.nodes()[n], uses)) {
      interior.insert(m->interior.begin(), m->interior.end());
      roots.emplace(static_cast<NodeId>(n), Replacement{OpKind::LayerNormalization,
                                                        NormAttrs{m->axis, m->epsilon},
                                                        {m->x, m->gamma, m->beta}});
    } else if (auto r = matchRmsNorm(graph, graph.nodes()[n], uses)) {
      interior.insert(r->interior.begin(), r->interior.end());
      roots.emplace(
          static_cast<NodeId>(n),
          Replacement{OpKind::RMSNormalization, NormAttrs{r->axis, r->epsilon}, {r->x, r->gamma}});
    }
  return replaceMatches(graph, roots, interior, ".layer_norm");
}

} // namespace tunec::passes
