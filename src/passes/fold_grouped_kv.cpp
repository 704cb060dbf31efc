// Grouped-query attention without repeating the K/V heads: a MatMul whose B is a shared K or V
// repeated per query head (HuggingFace's repeat_kv: Unsqueeze at axis 2, Expand to rep copies,
// Reshape to heads = kv_heads x rep; K then transposed) multiplies the query heads that share a
// K/V head as the rows of one matrix instead:
//   MatMul(A [b, kvh*rep, n, k], repeat(X) [b, kvh*rep, k, c])
//     = Reshape(MatMul(Reshape(A, [b, kvh, rep*n, k]), X' [b, kvh, k, c]), [b, kvh*rep, n, c])
// (query head h = g*rep + r is rows r*n.. of group g: the same bytes of a dense A). The repeat's
// copies are never made, and each K/V head is read once for rep times the rows.
#include "passes/passes.h"
#include "passes/pattern.h"
#include "passes/rewriter.h"

namespace tunec::passes {

namespace {

struct Repeat {
  ValueId kv;      ///< [b, kvh, t, d]
  Dim rep;         ///< copies of each K/V head
  bool transposed; ///< B = Transpose(repeat(kv)) of the last two axes
};

// B = [Transpose_{0,1,3,2}](Reshape(Expand(Unsqueeze(kv, axis 2))))
std::optional<Repeat> repeatOf(const Graph& g, ValueId b, const std::vector<int>& uses) {
  auto single = [&](ValueId v) { return uses[static_cast<size_t>(v)] == 1; };
  Repeat r{kNoValue, Dim(1), false};
  if (const Node* t = producerOf(g, b, OpKind::Transpose)) {
    const auto& perm = std::get<TransposeAttrs>(t->attrs).perm;
    if (perm != std::vector<int64_t>{0, 1, 3, 2} || !single(b)) return std::nullopt;
    r.transposed = true;
    b = t->inputs[0];
  }
  const Node* reshape = producerOf(g, b, OpKind::Reshape);
  if (!reshape || !single(b)) return std::nullopt;
  ValueId e = reshape->inputs[0];
  const Node* expand = producerOf(g, e, OpKind::Expand);
  if (!expand || !single(e)) return std::nullopt;
  ValueId u = expand->inputs[0];
  const Node* unsqueeze = producerOf(g, u, OpKind::Unsqueeze);
  if (!unsqueeze || !single(u) ||
      std::get<AxesAttrs>(unsqueeze->attrs).axes != std::vector<int64_t>{2})
    return std::nullopt;
  const Shape& kv = g.value(unsqueeze->inputs[0]).type.shape;
  const Shape& ex = g.value(e).type.shape;
  const Shape& rs = g.value(b).type.shape;
  if (kv.rank() != 4 || ex.rank() != 5 || rs.rank() != 4) return std::nullopt;
  // [b, kvh, t, d] -> [b, kvh, rep, t, d] -> [b, kvh*rep, t, d]
  if (ex.dim(0) != kv.dim(0) || ex.dim(1) != kv.dim(1) || ex.dim(3) != kv.dim(2) ||
      ex.dim(4) != kv.dim(3) || !ex.dim(2).isStatic() || rs.dim(0) != kv.dim(0) ||
      !(rs.dim(1) == kv.dim(1) * ex.dim(2)) || rs.dim(2) != kv.dim(2) || rs.dim(3) != kv.dim(3))
    return std::nullopt;
  r.kv = unsqueeze->inputs[0];
  r.rep = ex.dim(2);
  return r;
}

} // namespace

Expected<Graph> foldGroupedKv(const Graph& graph) {
  std::vector<int> uses = useCounts(graph);
  GraphRewriter rw(graph);
  for (size_t id = 0; id < graph.nodes().size(); ++id) {
    const Node& mm = graph.nodes()[id];
    auto rep = mm.kind == OpKind::MatMul && mm.inputs.size() == 2
                   ? repeatOf(graph, mm.inputs[1], uses)
                   : std::nullopt;
    if (!rep || graph.value(mm.inputs[0]).type.shape.rank() != 4 ||
        graph.value(mm.inputs[0]).type.dtype != DType::F32) {
      TUNEC_TRY(rw.copy(mm));
      continue;
    }
    const Shape& as = graph.value(mm.inputs[0]).type.shape;
    const Shape& kv = graph.value(rep->kv).type.shape;
    const Dim groups = kv.dim(1);
    // A's heads [b, kvh*rep, n, k] as [b, kvh, rep*n, k].
    std::vector<Dim> a{as.dim(0), groups, rep->rep * as.dim(2), as.dim(3)};
    TUNEC_ASSIGN_OR_RETURN(auto a2, rw.add(mm.name + ".grouped_a", OpKind::Reshape, ReshapeAttrs{a},
                                           {rw.map(mm.inputs[0])}, {mm.name + ".grouped_a"}));
    ValueId b = rw.map(rep->kv);
    if (rep->transposed) {
      TUNEC_ASSIGN_OR_RETURN(auto bt,
                             rw.add(mm.name + ".grouped_b", OpKind::Transpose,
                                    TransposeAttrs{{0, 1, 3, 2}}, {b}, {mm.name + ".grouped_b"}));
      b = bt[0];
    }
    TUNEC_ASSIGN_OR_RETURN(auto y2, rw.add(mm.name + ".grouped", OpKind::MatMul, NoAttrs{},
                                           {a2[0], b}, {mm.name + ".grouped"}));
    const Shape& ys = graph.value(mm.outputs[0]).type.shape;
    TUNEC_ASSIGN_OR_RETURN(auto y, rw.add(mm.name, OpKind::Reshape, ReshapeAttrs{ys.symbolicDims()},
                                          {y2[0]}, {graph.value(mm.outputs[0]).name}));
    rw.replace(mm.outputs[0], y[0]);
  }
  return rw.finish();
}

} // namespace tunec::passes
