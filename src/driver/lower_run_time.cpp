// Light ops of symbolic shape over the run's extents: a step's ints that depend on a symbol are
// run-time ints (rt::RunTimeInt) the executor sets from each run's shapes; tensors are dense at
// the run's shape, in buffers sized for the bounds.
#include "driver/light_ops.h"
#include "ir/op_registry.h"
#include "runtime/typed_kernels.h"

namespace tunec::driver {

bool hasSymbolicShape(const Graph& g, const Node& n) {
  // A slice at run-time starts reads the run's extents even where its shapes are static.
  if (n.kind == OpKind::Slice && std::get<SliceAttrs>(n.attrs).startsAtRunTime()) return true;
  for (ValueId v : n.inputs)
    if (v != kNoValue && !g.value(v).type.shape.isStatic()) return true;
  for (ValueId v : n.outputs)
    if (!g.value(v).type.shape.isStatic()) return true;
  return false;
}

DimExpr extentProduct(const std::vector<DimExpr>& d, size_t from, size_t to) {
  DimExpr p(1);
  for (size_t i = from; i < to; ++i) p = p * d[i];
  return p;
}

std::vector<DimExpr> runTimeBroadcastStrides(const Shape& shape, const Shape& outShape) {
  std::vector<DimExpr> strides = Lowering::denseStrides(shape);
  std::vector<DimExpr> out(static_cast<size_t>(outShape.rank()), DimExpr(0));
  const int lead = outShape.rank() - shape.rank();
  for (int d = lead; d < outShape.rank(); ++d) {
    const Dim dim = shape.dim(d - lead);
    if (dim == Dim(1) && outShape.dim(d) != Dim(1)) continue; // broadcast: stride 0
    out[static_cast<size_t>(d)] = strides[static_cast<size_t>(d - lead)];
  }
  return out;
}

namespace {

bool lowerRunTimeLayerNorm(Lowering& l, const Node& n, const std::string& label) {
  const Graph& g = l.graph();
  const Shape& xs = g.value(n.inputs[0]).type.shape;
  const auto& a = std::get<NormAttrs>(n.attrs);
  auto axis = static_cast<size_t>(normalizeAxis(a.axis, xs.rank()));
  std::vector<DimExpr> d = Lowering::extentsOf(xs);
  DimExpr cols = extentProduct(d, axis, d.size());
  if (!cols.isConstant() || n.outputs.size() > 1) {
    l.unsupported(n, "a layer norm over symbolic columns, or with its mean and deviation "
                     "outputs, is not compiled yet");
    return false;
  }
  for (size_t i = 1; i < n.inputs.size(); ++i)
    if (n.inputs[i] != kNoValue && g.value(n.inputs[i]).type.shape.numel() != *cols.constant()) {
      l.unsupported(n, "a layer norm's scale or bias that broadcasts is not compiled at a "
                       "symbolic shape yet");
      return false;
    }
  int scale = l.tensorIn(n.inputs[1], Phys::Plain);
  int bias =
      n.inputs.size() > 2 && n.inputs[2] != kNoValue ? l.tensorIn(n.inputs[2], Phys::Plain) : -1;
  int in = l.tensorIn(n.inputs[0], Phys::Plain);
  int out = l.defineOutput(n.outputs[0], Phys::Plain);
  addLayerNormStep(l, label, {out, in, scale, bias, -1, -1}, extentProduct(d, 0, axis), cols,
                   a.epsilon, n.kind == OpKind::RMSNormalization);
  return true;
}

// Gather along an axis of rows at the run's extents (the embeddings of a batch of token ids):
// outer x axis x inner data, `count` indices.
bool lowerRunTimeGather(Lowering& l, const Node& n, const std::string& label) {
  const Graph& g = l.graph();
  const Value& x = g.value(n.inputs[0]);
  const Value& idx = g.value(n.inputs[1]);
  if (idx.type.dtype != DType::I64 && idx.type.dtype != DType::I32) {
    l.unsupported(n, "Gather indices must be int64 or int32");
    return false;
  }
  const Shape& xs = x.type.shape;
  auto axis = static_cast<size_t>(normalizeAxis(std::get<AxisAttrs>(n.attrs).axis, xs.rank()));
  std::vector<DimExpr> d = Lowering::extentsOf(xs), id = Lowering::extentsOf(idx.type.shape);
  int data = l.tensorIn(n.inputs[0], Phys::Plain);
  int indices = l.tensorIn(n.inputs[1], Phys::Plain);
  int out = l.defineOutput(n.outputs[0], Phys::Plain);
  rt::Step step;
  step.kind = rt::StepKind::Gather;
  step.label = label;
  step.tensors = {out, data, indices};
  l.setInts(step, {extentProduct(d, 0, axis), d[axis], extentProduct(d, axis + 1, d.size()),
                   extentProduct(id, 0, id.size()),
                   DimExpr(static_cast<int64_t>(dtypeSize(x.type.dtype))),
                   DimExpr(static_cast<int64_t>(dtypeSize(idx.type.dtype)))});
  l.addStep(std::move(step), {data, indices}, {out});
  return true;
}

// A MatMul of computed (or constant) operands at run-time extents: A [..., m, k] and
// B [..., k, n] dense, their batch dimensions equal or one of them without any.
bool lowerRunTimeMatmul(Lowering& l, const Node& n) {
  const Graph& g = l.graph();
  const Shape& as = g.value(n.inputs[0]).type.shape;
  const Shape& bs = g.value(n.inputs[1]).type.shape;
  const Shape& ys = g.value(n.outputs[0]).type.shape;
  if (!allF32(g, n) || as.rank() < 2 || bs.rank() < 2) {
    l.unsupported(n, "a matmul of symbolic shape needs f32 operands of rank >= 2");
    return false;
  }
  std::vector<DimExpr> a = Lowering::extentsOf(as), b = Lowering::extentsOf(bs),
                       y = Lowering::extentsOf(ys);
  DimExpr m = a[a.size() - 2], k = a[a.size() - 1], cols = b[b.size() - 1];
  // B read in place of a Transpose of its last two axes (operand views): stored [..., n, k].
  const auto self = static_cast<NodeId>(&n - g.nodes().data());
  const auto& transposed = l.operandViews().bTransposed;
  const auto bT = transposed.find(self);
  const ValueId bValue = bT == transposed.end() ? n.inputs[1] : bT->second;
  DimExpr aBatch = extentProduct(a, 0, a.size() - 2), bBatch = extentProduct(b, 0, b.size() - 2);
  DimExpr batch = extentProduct(y, 0, y.size() - 2);
  bool aShared = aBatch == DimExpr(1), bShared = bBatch == DimExpr(1);
  // Each batch's B is a dense matrix, one stride from the next, as B is stored: k x n, or a K/V
  // cache's rows at its capacity's pitch (rt::KvCache).
  const std::vector<DimExpr> bStrides = l.storageStrides(bValue);
  const DimExpr bStride = bStrides.size() >= 3 ? bStrides[bStrides.size() - 3] : k * cols;
  Lowering::CacheLayoutRead cacheRead(l);
  if ((!aShared && !(aBatch == batch)) || (!bShared && !(bBatch == batch))) {
    l.unsupported(n, "a matmul of symbolic shape with broadcast batch dimensions is not compiled "
                     "yet");
    return false;
  }
  int in = l.tensorIn(n.inputs[0], Phys::Plain), weights = l.tensorIn(bValue, Phys::Plain);
  int out = l.defineOutput(n.outputs[0], Phys::Plain);
  rt::Step step;
  step.kind = rt::StepKind::BatchedMatmul;
  step.label = lightLabel(n) + " " + as.toString() + " times " + bs.toString() +
               (bT == transposed.end() ? "" : " (B read transposed)");
  step.tensors = {out, in, weights};
  l.setInts(step, {batch, m, cols, k, aShared ? DimExpr(0) : m * k, bShared ? DimExpr(0) : bStride,
                   DimExpr(bT == transposed.end() ? 0 : 1)});
  step.flops = 2.0 * static_cast<double>(ys.numel()) * static_cast<double>(as[as.rank() - 1]);
  l.addStep(std::move(step), {in, weights}, {out});
  return true;
}

// A strided copy at run-time extents, any element type: dims and strides in elements.
void addRunTimeCopy(Lowering& l, const std::string& label, int out, DType dtype,
                    std::vector<DimExpr> dims, DimExpr outOffset, std::vector<DimExpr> outStrides,
                    int in, DimExpr inOffset, std::vector<DimExpr> inStrides) {
  rt::BasicTypedProgram<DimExpr> p;
  p.op = rt::TypedOp::Cast;
  p.out = dtype;
  p.in = {dtype};
  if (dims.empty()) {
    dims = {DimExpr(1)};
    outStrides = {DimExpr(1)};
    inStrides = {DimExpr(0)};
  }
  p.dims = std::move(dims);
  p.outOffset = std::move(outOffset);
  p.outStrides = std::move(outStrides);
  p.inOffsets = {std::move(inOffset)};
  p.inStrides = {std::move(inStrides)};
  rt::Step step;
  step.kind = rt::StepKind::Typed;
  step.label = label;
  std::vector<DimExpr> ints;
  p.encode(ints);
  l.setInts(step, ints);
  step.tensors = {out, in};
  l.addStep(std::move(step), {in}, {out});
}

// A slice of constant steps and constant or run-time starts (its extents the input's on the
// axes it keeps whole): strided reads from the starts' offset.
bool lowerRunTimeSlice(Lowering& l, const Node& n, const std::string& label) {
  const Graph& g = l.graph();
  const auto& a = std::get<SliceAttrs>(n.attrs);
  const Value& x = g.value(n.inputs[0]);
  const Shape& ys = g.value(n.outputs[0]).type.shape;
  std::vector<DimExpr> dense = Lowering::denseStrides(x.type.shape), strides;
  DimExpr offset(0);
  for (size_t d = 0; d < dense.size(); ++d) {
    offset = offset + dense[d] * (a.startsAtRunTime() ? a.runTimeStarts[d] : DimExpr(a.starts[d]));
    strides.push_back(dense[d] * DimExpr(a.steps[d]));
  }
  int in = l.tensorIn(n.inputs[0], Phys::Plain);
  int out = l.defineOutput(n.outputs[0], Phys::Plain);
  addRunTimeCopy(l, label, out, x.type.dtype, Lowering::extentsOf(ys), DimExpr(0),
                 Lowering::denseStrides(ys), in, offset, strides);
  return true;
}

bool lowerRunTimeExpand(Lowering& l, const Node& n, const std::string& label) {
  const Graph& g = l.graph();
  const Value& x = g.value(n.inputs[0]);
  const Shape& ys = g.value(n.outputs[0]).type.shape;
  int in = l.tensorIn(n.inputs[0], Phys::Plain);
  int out = l.defineOutput(n.outputs[0], Phys::Plain);
  addRunTimeCopy(l, label, out, x.type.dtype, Lowering::extentsOf(ys), DimExpr(0),
                 Lowering::denseStrides(ys), in, DimExpr(0),
                 runTimeBroadcastStrides(x.type.shape, ys));
  return true;
}

// Each input copied to its place along the axis (the past keys, then this run's).
bool lowerRunTimeConcat(Lowering& l, const Node& n, const std::string& label) {
  const Graph& g = l.graph();
  auto axis = static_cast<size_t>(std::get<AxisAttrs>(n.attrs).axis);
  // A K/V cache's past and present at its capacity's pitch (rt::KvCache): where a run gives one
  // buffer for both, the copy of the past is onto itself and the executor skips it.
  Lowering::CacheLayoutRead cacheRead(l);
  std::vector<DimExpr> outStrides = l.storageStrides(n.outputs[0]);
  std::vector<int> ins;
  for (ValueId v : n.inputs) ins.push_back(l.tensorIn(v, Phys::Plain));
  int out = l.defineOutput(n.outputs[0], Phys::Plain);
  DimExpr at(0);
  for (size_t i = 0; i < n.inputs.size(); ++i) {
    const Shape& xs = g.value(n.inputs[i]).type.shape;
    std::vector<DimExpr> dims = Lowering::extentsOf(xs);
    if (xs.numel() > 0)
      addRunTimeCopy(l, label + " [" + std::to_string(i) + "]", out,
                     g.value(n.inputs[i]).type.dtype, dims, at * outStrides[axis], outStrides,
                     ins[i], DimExpr(0), l.storageStrides(n.inputs[i]));
    at = at + dims[axis];
  }
  return true;
}

// A reduction over the run's extents: the reduced axes moved last by a strided copy (unless they
// are), then each row reduced, as at static shapes (lower_reduce.cpp).
bool lowerRunTimeReduce(Lowering& l, const Node& n, const std::string& label) {
  const Graph& g = l.graph();
  const Shape& xs = g.value(n.inputs[0]).type.shape;
  const auto& a = std::get<ReduceAttrs>(n.attrs);
  std::vector<bool> reduced(static_cast<size_t>(xs.rank()), a.axes.empty());
  for (int64_t axis : a.axes)
    reduced[static_cast<size_t>(axis < 0 ? axis + xs.rank() : axis)] = true;
  const std::vector<DimExpr> d = Lowering::extentsOf(xs), strides = Lowering::denseStrides(xs);
  std::vector<DimExpr> dims, from;
  DimExpr rows(1), len(1);
  bool moved = false, seenReduced = false;
  for (int pass = 0; pass < 2; ++pass)
    for (size_t i = 0; i < d.size(); ++i)
      if (reduced[i] == (pass == 1)) {
        dims.push_back(d[i]);
        from.push_back(strides[i]);
        (pass == 1 ? len : rows) = (pass == 1 ? len : rows) * d[i];
      }
  for (size_t i = 0; i < d.size(); ++i) {
    moved = moved || (seenReduced && !reduced[i]);
    seenReduced = seenReduced || reduced[i];
  }
  if (l.bound(len) == 0 || l.bound(rows) == 0) {
    l.unsupported(n, "reductions over empty tensors are not compiled");
    return false;
  }
  int in = l.tensorIn(n.inputs[0], Phys::Plain);
  if (moved) {
    std::vector<DimExpr> to(dims.size(), DimExpr(1));
    for (size_t i = dims.size(); i-- > 1;) to[i - 1] = to[i] * dims[i];
    int t = l.addArenaTensor(xs.numel() * static_cast<int64_t>(dtypeSize(DType::F32)));
    addRunTimeCopy(l, label + " (axes moved last)", t, DType::F32, dims, DimExpr(0), to, in,
                   DimExpr(0), from);
    in = t;
  }
  int out = l.defineOutput(n.outputs[0], Phys::Plain);
  rt::Step step;
  step.kind = rt::StepKind::Reduce;
  step.label = label;
  step.tensors = {out, in};
  l.setInts(step, {rows, len, DimExpr(static_cast<int64_t>(reduceKindOf(n.kind)))});
  l.addStep(std::move(step), {in}, {out});
  return true;
}

} // namespace

bool lowerTrilu(Lowering& l, const Node& n) {
  const Graph& g = l.graph();
  const auto& a = std::get<TriluAttrs>(n.attrs);
  const Value& x = g.value(n.inputs[0]);
  std::vector<DimExpr> d = Lowering::extentsOf(x.type.shape);
  int in = l.tensorIn(n.inputs[0], Phys::Plain);
  int out = l.defineOutput(n.outputs[0], Phys::Plain);
  rt::Step step;
  step.kind = rt::StepKind::Trilu;
  step.label = lightLabel(n);
  step.tensors = {out, in};
  l.setInts(step,
            {extentProduct(d, 0, d.size() - 2), d[d.size() - 2], d[d.size() - 1], DimExpr(a.k),
             DimExpr(a.upper ? 1 : 0), DimExpr(static_cast<int64_t>(dtypeSize(x.type.dtype)))});
  l.addStep(std::move(step), {in}, {out});
  return true;
}

bool lowerRunTimeKernelNodes(Lowering& l, const passes::FusedKernel& kernel) {
  const Graph& g = l.graph();
  if (kernel.split >= 0 || kernel.prologue >= 0 || kernel.dequantizedAddend >= 0 ||
      kernel.nhwcView >= 0 || kernel.plainView >= 0) {
    l.unsupported(g.node(kernel.anchor), "this fused kernel is not compiled at a symbolic shape "
                                         "yet");
    return false;
  }
  for (size_t i = 0; i < kernel.nodesInKernel(); ++i) {
    const Node& n = g.node(kernel.nodes[i]);
    if (n.kind == OpKind::MatMul) {
      if (!lowerRunTimeMatmul(l, n)) return false;
      continue;
    }
    if (lowerLight(l, {kernel.nodes[i]}, 0) != 1) return false;
  }
  return true;
}

bool lowerRunTimeLight(Lowering& l, const Node& n) {
  const std::string label = lightLabel(n);
  if (!allF32(l.graph(), n) && n.kind != OpKind::Reshape && n.kind != OpKind::Flatten &&
      n.kind != OpKind::Squeeze && n.kind != OpKind::Unsqueeze && n.kind != OpKind::Gather &&
      n.kind != OpKind::Slice && n.kind != OpKind::Expand && n.kind != OpKind::Concat) {
    l.unsupported(n, "only f32 tensors are compiled at a symbolic shape yet");
    return false;
  }
  switch (n.kind) {
  case OpKind::Reshape:
  case OpKind::Flatten:
  case OpKind::Squeeze:
  case OpKind::Unsqueeze:
    // Dense at the run's shape before and after: the same bytes, a view as when static.
    return lowerDataMovement(l, n);
  case OpKind::LayerNormalization:
  case OpKind::RMSNormalization:
    return lowerRunTimeLayerNorm(l, n, label);
  case OpKind::Gather:
    return lowerRunTimeGather(l, n, label);
  case OpKind::Transpose: {
    // A copy over the output's extents reading the input's dense strides permuted.
    const auto& perm = std::get<TransposeAttrs>(n.attrs).perm;
    const Graph& g = l.graph();
    std::vector<DimExpr> xs = Lowering::denseStrides(g.value(n.inputs[0]).type.shape), strides;
    for (int64_t p : perm) strides.push_back(xs[static_cast<size_t>(p)]);
    int in = l.tensorIn(n.inputs[0], Phys::Plain);
    int out = l.defineOutput(n.outputs[0], Phys::Plain);
    l.addRunTimeElementwise(label, out, g.value(n.outputs[0]).type.shape, {{in, strides}},
                            {{rt::EwOp::Copy, 0, -1, -1000}});
    return true;
  }
  case OpKind::Slice: {
    // A prefix whose leading dimensions are 1 (positions[:, :sequence]): the first elements of
    // its input, a view.
    const auto& a = std::get<SliceAttrs>(n.attrs);
    const Shape& xs = l.graph().value(n.inputs[0]).type.shape;
    bool leading = true, view = !a.startsAtRunTime();
    for (int d = 0; d < xs.rank(); ++d) {
      const Dim out = a.extents.empty() ? Dim(a.counts[static_cast<size_t>(d)])
                                        : a.extents[static_cast<size_t>(d)];
      bool full = out == xs.dim(d);
      view = view && a.starts[static_cast<size_t>(d)] == 0 &&
             a.steps[static_cast<size_t>(d)] == 1 && (leading || full);
      if (!(out == Dim(1) && xs.dim(d) == Dim(1))) leading = false;
      if (!full) leading = false;
    }
    if (view) {
      l.defineAlias(n.outputs[0], l.tensorIn(n.inputs[0], Phys::Plain), Phys::Plain);
      return true;
    }
    return lowerRunTimeSlice(l, n, label);
  }
  case OpKind::Expand:
    return lowerRunTimeExpand(l, n, label);
  case OpKind::Concat:
    return lowerRunTimeConcat(l, n, label);
  case OpKind::Softmax:
  case OpKind::LogSoftmax:
  case OpKind::Hardmax:
    return lowerSoftmax(l, n);
  default:
    if (isReduceOp(n.kind)) return lowerRunTimeReduce(l, n, label);
    l.unsupported(n, "a symbolic shape (" + l.graph().value(n.inputs[0]).type.shape.toString() +
                         ") is not compiled for this op yet");
    return false;
  }
}

} // namespace tunec::driver
