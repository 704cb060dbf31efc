// Reductions as loop kernels: the reduced axes moved last (a copy, unless they already are),
// then each row reduced; a spatial mean or max of an NHWC activation as a global pool; ArgMax
// and ArgMin over an axis.
#include "driver/light_ops.h"
#include "ir/op_registry.h"

#include <map>

namespace tunec::driver {

namespace {

const std::map<OpKind, rt::ReduceKind>& reduceKinds() {
  static const std::map<OpKind, rt::ReduceKind> kinds = {
      {OpKind::ReduceSum, rt::ReduceKind::Sum},
      {OpKind::ReduceMean, rt::ReduceKind::Mean},
      {OpKind::ReduceMax, rt::ReduceKind::Max},
      {OpKind::ReduceMin, rt::ReduceKind::Min},
      {OpKind::ReduceProd, rt::ReduceKind::Prod},
      {OpKind::ReduceL1, rt::ReduceKind::L1},
      {OpKind::ReduceL2, rt::ReduceKind::L2},
      {OpKind::ReduceLogSum, rt::ReduceKind::LogSum},
      {OpKind::ReduceLogSumExp, rt::ReduceKind::LogSumExp},
      {OpKind::ReduceSumSquare, rt::ReduceKind::SumSquare}};
  return kinds;
}

} // namespace

rt::ReduceKind reduceKindOf(OpKind kind) {
  return reduceKinds().at(kind);
}

bool isReduceOp(OpKind kind) {
  return reduceKinds().count(kind) > 0;
}

namespace {

// Reductions: the reduced axes are moved last (a copy, unless they already are), then each row
// is reduced.
bool lowerReduce(Lowering& l, const Node& n) {
  const Graph& g = l.graph();
  const Shape& xs = g.value(n.inputs[0]).type.shape;
  const auto& a = std::get<ReduceAttrs>(n.attrs);
  std::vector<bool> reduced(static_cast<size_t>(xs.rank()), a.axes.empty());
  for (int64_t axis : a.axes) reduced[static_cast<size_t>(normalizeAxis(axis, xs.rank()))] = true;
  std::vector<int64_t> perm, kept;
  int64_t rows = 1, len = 1;
  for (int d = 0; d < xs.rank(); ++d)
    if (!reduced[static_cast<size_t>(d)]) {
      perm.push_back(d);
      rows *= xs[d];
    }
  for (int d = 0; d < xs.rank(); ++d)
    if (reduced[static_cast<size_t>(d)]) {
      perm.push_back(d);
      len *= xs[d];
    }
  if (len == 0 || rows == 0) {
    l.unsupported(n, "reductions over empty tensors are not compiled");
    return false;
  }
  // The mean or max over H and W of an NHWC activation (a classifier's global pool written as
  // ReduceMean) is a global pool reading it where it lies: no reorder to plain first.
  bool spatial = xs.rank() == 4 && !reduced[0] && !reduced[1] && reduced[2] && reduced[3];
  if (spatial && (n.kind == OpKind::ReduceMean || n.kind == OpKind::ReduceMax) &&
      l.producedPhys(n.inputs[0]) == Phys::Nhwc) {
    Phys phys;
    int in = l.tensorAny(n.inputs[0], phys);
    rt::PoolParams p{};
    p.isMax = n.kind == OpKind::ReduceMax;
    p.n = xs[0], p.c = xs[1], p.h = xs[2], p.w = xs[3], p.oh = 1, p.ow = 1;
    p.kh = p.h, p.kw = p.w, p.sh = p.sw = p.dh = p.dw = 1;
    std::vector<int64_t> is = Lowering::logicalStrides(xs, phys);
    int64_t outStrides[4] = {xs[1], 1, 1, 1}; // [N, C] or [N, C, 1, 1]: the same bytes
    for (size_t d = 0; d < 4; ++d) {
      p.inStride[d] = is[d];
      p.outStride[d] = outStrides[d];
    }
    int out = l.defineOutput(n.outputs[0], Phys::Plain);
    addPoolStep(l, lightLabel(n) + " (a global pool of NHWC)", p, in, out);
    return true;
  }
  // A reduction of every element (DynamicQuantizeLinear's range) reads them in whatever layout
  // they lie: no reorder of an NHWC activation first.
  Phys phys = Phys::Plain;
  int in = rows == 1 ? l.tensorAny(n.inputs[0], phys) : l.tensorIn(n.inputs[0], Phys::Plain);
  bool moved = false;
  for (size_t i = 0; i < perm.size(); ++i) moved |= perm[i] != static_cast<int64_t>(i);
  if (moved) {
    std::vector<int64_t> dims, strides, xstr = xs.strides();
    for (int64_t p : perm) {
      dims.push_back(xs[static_cast<int>(p)]);
      strides.push_back(xstr[static_cast<size_t>(p)]);
    }
    Shape ts(dims);
    int t = l.addArenaTensor(ts.numel() * static_cast<int64_t>(dtypeSize(DType::F32)));
    copyProgram(l, std::string(opName(n.kind)) + " '" + n.name + "' (axes moved last)", t, ts, 0,
                ts.strides(), in, strides, 0);
    in = t;
  }
  int out = l.defineOutput(n.outputs[0], Phys::Plain);
  rt::Step step;
  step.kind = rt::StepKind::Reduce;
  step.label = std::string(opName(n.kind)) + " '" + n.name + "'";
  step.tensors = {out, in};
  step.ints = {rows, len, static_cast<int64_t>(reduceKindOf(n.kind))};
  l.addStep(std::move(step), {in}, {out});
  return true;
}

bool lowerArgReduce(Lowering& l, const Node& n, const std::string& label) {
  const Graph& g = l.graph();
  const Value& x = g.value(n.inputs[0]);
  const Shape& xs = x.type.shape;
  const auto& a = std::get<ArgReduceAttrs>(n.attrs);
  if (xs.rank() == 0) {
    l.unsupported(n, "this input dtype is not compiled");
    return false;
  }
  auto axis = static_cast<size_t>(normalizeAxis(a.axis, xs.rank()));
  const auto& d = xs.dims();
  int in = l.tensorIn(n.inputs[0], Phys::Plain);
  int out = l.defineOutput(n.outputs[0], Phys::Plain);
  rt::Step step;
  step.kind = rt::StepKind::ArgReduce;
  step.label = label;
  step.tensors = {out, in};
  step.ints = {product(d, 0, axis),      d[axis],           product(d, axis + 1, d.size()),
               n.kind == OpKind::ArgMax, a.selectLastIndex, static_cast<int64_t>(x.type.dtype)};
  l.addStep(std::move(step), {in}, {out});
  return true;
}

} // namespace

bool lowerReduction(Lowering& l, const Node& n) {
  if (n.kind == OpKind::ArgMax || n.kind == OpKind::ArgMin)
    return lowerArgReduce(l, n, lightLabel(n));
  if (!allF32(l.graph(), n)) {
    l.unsupported(n, "only f32 tensors are compiled for this op");
    return false;
  }
  return lowerReduce(l, n);
}

} // namespace tunec::driver
