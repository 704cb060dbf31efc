// Operand views: which Transposes the matmul template reads or writes in place.
#include "passes/operand_views.h"

#include "passes/rewriter.h"

namespace tunec::passes {

namespace {

std::vector<int64_t> permutation(const Node& transpose, int rank) {
  std::vector<int64_t> perm = std::get<TransposeAttrs>(transpose.attrs).perm;
  if (perm.empty()) // ONNX's default: reverse the dimensions
    for (int d = rank - 1; d >= 0; --d) perm.push_back(d);
  return perm;
}

// Batch counts of a MatMul's operands, as lowerMatmul splits them: 0 when it does not compile
// the pair (broadcast batch dimensions).
struct MatmulBatches {
  int64_t a = 0, b = 0;
  bool batched = false; ///< one matrix pair per batch (else B is shared and A's batch is folded)
};

MatmulBatches batchesOf(const Graph& g, const Node& mm) {
  const Shape& as = g.value(mm.inputs[0]).type.shape;
  const Shape& bs = g.value(mm.inputs[1]).type.shape;
  MatmulBatches r;
  if (as.rank() < 2 || bs.rank() < 2 || as.numel() == 0 || bs.numel() == 0) return r;
  int64_t k = as[as.rank() - 1], n = bs[bs.rank() - 1];
  r.a = as.numel() / (as[as.rank() - 2] * k);
  r.b = bs.numel() / (k * n);
  r.batched = r.b > 1 && r.a == r.b && as.rank() == bs.rank() &&
              std::equal(as.dims().begin(), as.dims().end() - 2, bs.dims().begin());
  return r;
}

} // namespace

bool matrixView(const Shape& shape, const std::vector<int64_t>& strides, MatrixView& view) {
  int r = shape.rank();
  if (r < 2) return false;
  int64_t batchStride = 0;
  int lastBatch = -1;
  for (int d = 0; d < r - 2; ++d) {
    if (shape[d] == 1) continue;
    if (lastBatch >= 0 &&
        strides[static_cast<size_t>(lastBatch)] != strides[static_cast<size_t>(d)] * shape[d])
      return false; // two batch dimensions that are not one run of memory
    lastBatch = d;
    batchStride = strides[static_cast<size_t>(d)];
  }
  view.batchStride = batchStride;
  view.rowStride = strides[static_cast<size_t>(r - 2)];
  view.colStride = strides[static_cast<size_t>(r - 1)];
  return view.colStride == 1 || view.rowStride == 1;
}

namespace {

// True when `t` is the last node of its kernel and every node before it there is a reshape (a
// view): then nothing but the MatMul reads what the Transpose would have written.
bool endsViewKernel(const Graph& g, const FusedKernel& k, NodeId t) {
  if (k.nodes.back() != t || k.anchor >= 0) return false;
  for (size_t i = 0; i + 1 < k.nodes.size(); ++i) {
    OpKind kind = g.node(k.nodes[i]).kind;
    if (kind != OpKind::Reshape && kind != OpKind::Flatten && kind != OpKind::Squeeze &&
        kind != OpKind::Unsqueeze)
      return false;
  }
  return true;
}

} // namespace

OperandViews planOperandViews(const Graph& graph, const FusionPlan& fusion) {
  OperandViews views;
  views.folded.assign(graph.nodes().size(), false);
  std::vector<int> uses = useCounts(graph); // a model output counts as a use
  std::vector<NodeId> consumer(graph.values().size(), -1);
  for (size_t n = 0; n < graph.nodes().size(); ++n)
    for (ValueId in : graph.nodes()[n].inputs)
      if (in != kNoValue) consumer[static_cast<size_t>(in)] = static_cast<NodeId>(n);
  // Every value asked about has a node reading it: one use means no other reader and no model
  // output.
  auto onlyUse = [&](ValueId v) { return uses[static_cast<size_t>(v)] == 1; };
  auto kernelOf = [&](NodeId n) -> const FusedKernel& {
    return fusion.kernels[static_cast<size_t>(fusion.kernelOf[static_cast<size_t>(n)])];
  };

  for (size_t id = 0; id < graph.nodes().size(); ++id) {
    const Node& mm = graph.nodes()[id];
    if (mm.kind != OpKind::MatMul || mm.inputs.size() != 2 || mm.outputs.size() != 1) continue;
    // Strides of a symbolic shape are extents of the run: of its transposes, a B that swaps the
    // last two axes is read as it is stored (BatchedMatmul's transposed B); others are copied.
    if (!graph.value(mm.inputs[0]).type.shape.isStatic() ||
        !graph.value(mm.inputs[1]).type.shape.isStatic()) {
      ValueId v = mm.inputs[1];
      NodeId t = graph.value(v).producer;
      if (t < 0 || graph.node(t).kind != OpKind::Transpose || !onlyUse(v) ||
          !endsViewKernel(graph, kernelOf(t), t) || views.folded[static_cast<size_t>(t)])
        continue;
      const int rank = graph.value(v).type.shape.rank();
      std::vector<int64_t> perm = permutation(graph.node(t), rank), swapped(perm.size());
      for (int d = 0; d < rank; ++d) swapped[static_cast<size_t>(d)] = d;
      if (rank < 2) continue;
      std::swap(swapped[static_cast<size_t>(rank - 1)], swapped[static_cast<size_t>(rank - 2)]);
      const Value& x = graph.value(graph.node(t).inputs[0]);
      if (perm != swapped || x.type.dtype != DType::F32 || x.constant) continue;
      views.bTransposed[static_cast<NodeId>(id)] = graph.node(t).inputs[0];
      views.folded[static_cast<size_t>(t)] = true;
      continue;
    }
    MatmulBatches batches = batchesOf(graph, mm);
    if (batches.a == 0 || (!batches.batched && batches.b != 1)) continue;
    auto node = static_cast<NodeId>(id);
    // Inputs: A, and B when it is computed (a constant B is packed at compile time).
    for (size_t i = 0; i < 2; ++i) {
      ValueId v = mm.inputs[i];
      NodeId t = graph.value(v).producer;
      // (A Transpose already folded into the MatMul before it writes its output: the input
      // it would read in place is never materialized.)
      if (t < 0 || graph.node(t).kind != OpKind::Transpose || !onlyUse(v) ||
          !endsViewKernel(graph, kernelOf(t), t) || views.folded[static_cast<size_t>(t)])
        continue;
      ValueId base = graph.node(t).inputs[0];
      const Value& x = graph.value(base);
      if (x.type.dtype != DType::F32 || x.constant) continue;
      if (i == 0 && !batches.batched && batches.a != 1) continue; // A's batch folds into M
      const Shape& s = graph.value(v).type.shape;
      std::vector<int64_t> xs = x.type.shape.strides(), strides;
      for (int64_t p : permutation(graph.node(t), s.rank()))
        strides.push_back(xs[static_cast<size_t>(p)]);
      MatrixView view;
      if (!matrixView(s, strides, view)) continue;
      view.base = base;
      (i == 0 ? views.a : views.b)[node] = view;
      views.folded[static_cast<size_t>(t)] = true;
    }
    // The output, when nothing follows the MatMul in its kernel (alone, or attention's P V)
    // and a Transpose alone reads it.
    ValueId r = mm.outputs[0];
    NodeId t = consumer[static_cast<size_t>(r)];
    if (kernelOf(node).nodes.back() != node || !onlyUse(r) || t < 0 ||
        graph.node(t).kind != OpKind::Transpose || kernelOf(t).nodes.front() != t ||
        (!batches.batched && batches.a != 1))
      continue;
    ValueId y = graph.node(t).outputs[0];
    const Shape& rs = graph.value(r).type.shape;
    std::vector<int64_t> ys = graph.value(y).type.shape.strides(), strides(ys.size());
    std::vector<int64_t> perm = permutation(graph.node(t), rs.rank());
    for (size_t j = 0; j < perm.size(); ++j) strides[static_cast<size_t>(perm[j])] = ys[j];
    MatrixView view;
    if (!matrixView(rs, strides, view) || view.colStride != 1) continue;
    // A permutation of a dense tensor puts C's batches one after the other or interleaves them
    // row by row (heads), never over each other; MatmulWorkload::check verifies it.
    view.base = y;
    views.c[node] = view;
    views.folded[static_cast<size_t>(t)] = true;
  }
  return views;
}

} // namespace tunec::passes
