// Row normalizations as loop kernels: softmax (and its log and hard forms) over an axis, layer
// norm over the trailing axes, instance norm as a layer norm of each plane then its per-channel
// scale and bias.
#include "driver/light_ops.h"
#include "ir/op_registry.h"

#include <algorithm>

namespace tunec::driver {

void addLayerNormStep(Lowering& l, const std::string& label, std::vector<int> tensors,
                      const DimExpr& rows, const DimExpr& cols, float epsilon, bool rms) {
  rt::Step step;
  step.kind = rt::StepKind::LayerNorm;
  step.label = label;
  step.tensors = tensors;
  if (rms)
    l.setInts(step, {rows, cols, DimExpr(1)});
  else
    l.setInts(step, {rows, cols});
  step.floats = {epsilon};
  l.addStep(std::move(step), {tensors[1], tensors[2], tensors[3]},
            {tensors[0], tensors[4], tensors[5]});
}

bool lowerSoftmax(Lowering& l, const Node& n) {
  const Graph& g = l.graph();
  if (!allF32(g, n)) {
    l.unsupported(n, "only f32 tensors are compiled for this op");
    return false;
  }
  const Shape& xs = g.value(n.inputs[0]).type.shape;
  const auto& a = std::get<SoftmaxAttrs>(n.attrs);
  auto axis = static_cast<size_t>(normalizeAxis(a.axis, xs.rank()));
  // Rows of `len` elements `inner` apart, `outer` of them: extents of the run where symbolic.
  std::vector<DimExpr> d = Lowering::extentsOf(xs);
  auto product = [&](size_t from, size_t to) {
    DimExpr p(1);
    for (size_t i = from; i < to; ++i) p = p * d[i];
    return p;
  };
  DimExpr len = a.coerce2d ? product(axis, d.size()) : d[axis];
  DimExpr inner = a.coerce2d ? DimExpr(1) : product(axis + 1, d.size());
  int in = l.tensorIn(n.inputs[0], Phys::Plain);
  int out = l.defineOutput(n.outputs[0], Phys::Plain);
  rt::Step step;
  step.kind = rt::StepKind::Softmax;
  step.label = lightLabel(n);
  step.tensors = {out, in};
  l.setInts(step,
            {product(0, axis), len, inner,
             DimExpr(n.kind == OpKind::LogSoftmax ? 1 : (n.kind == OpKind::Hardmax ? 2 : 0))});
  l.addStep(std::move(step), {in}, {out});
  return true;
}

bool lowerNormalization(Lowering& l, const Node& n) {
  const Graph& g = l.graph();
  const Shape& xs = g.value(n.inputs[0]).type.shape;
  const Shape& ys = g.value(n.outputs[0]).type.shape;
  std::string label = lightLabel(n);
  if (!allF32(g, n)) {
    l.unsupported(n, "only f32 tensors are compiled for this op");
    return false;
  }
  switch (n.kind) {
  case OpKind::Softmax:
  case OpKind::LogSoftmax:
  case OpKind::Hardmax:
    return lowerSoftmax(l, n);
  case OpKind::InstanceNormalization: {
    // Each (n, c) plane normalized as a LayerNorm row without affine, then scale and bias per
    // channel in one elementwise pass over the output.
    const auto& a = std::get<NormAttrs>(n.attrs);
    if (xs.rank() < 2 || n.inputs.size() != 3) {
      l.unsupported(n, "InstanceNormalization needs an input of rank >= 2, a scale and a bias");
      return false;
    }
    int64_t rows = xs[0] * xs[1], cols = product(xs.dims(), 2, xs.dims().size());
    std::vector<float> ones(static_cast<size_t>(std::max<int64_t>(cols, 1)), 1.f);
    int unitScale = l.addConstant(ones);
    int in = l.tensorIn(n.inputs[0], Phys::Plain);
    int out = l.defineOutput(n.outputs[0], Phys::Plain);
    addLayerNormStep(l, label, {out, in, unitScale, -1, -1, -1}, rows, cols, a.epsilon);
    std::vector<int64_t> perChannel(static_cast<size_t>(ys.rank()), 0);
    perChannel[1] = 1;
    int scale = l.tensorIn(n.inputs[1], Phys::Plain), bias = l.tensorIn(n.inputs[2], Phys::Plain);
    l.addElementwise(label + " (scale, bias)", out, ys, Phys::Plain, 0, ys.strides(),
                     {{out, ys.strides(), 0}, {scale, perChannel, 0}, {bias, perChannel, 0}},
                     {{rt::EwOp::Mul, 0, -1, -2}, {rt::EwOp::Add, 0, 0, -3}});
    return true;
  }
  case OpKind::LayerNormalization:
  case OpKind::RMSNormalization: {
    const auto& a = std::get<NormAttrs>(n.attrs);
    auto axis = static_cast<size_t>(normalizeAxis(a.axis, xs.rank()));
    int64_t rows = product(xs.dims(), 0, axis), cols = product(xs.dims(), axis, xs.dims().size());
    Shape normShape(
        std::vector<int64_t>(xs.dims().begin() + static_cast<long>(axis), xs.dims().end()));
    // Scale and bias over the normalized dims: as they are, or broadcast once at compile time.
    auto param = [&](ValueId v) -> int {
      const Value& pv = g.value(v);
      if (pv.type.shape.numel() == cols) return l.tensorIn(v, Phys::Plain);
      if (!pv.constant) return -2;
      std::vector<int64_t> strides =
          Lowering::broadcastStrides(pv.type.shape, pv.type.shape.strides(), normShape);
      std::vector<float> full(static_cast<size_t>(cols));
      std::vector<int64_t> nd = normShape.dims();
      for (int64_t i = 0; i < cols; ++i) {
        int64_t rest = i, off = 0;
        for (size_t d = nd.size(); d-- > 0;) {
          off += rest % nd[d] * strides[d];
          rest /= nd[d];
        }
        full[static_cast<size_t>(i)] = pv.constant->dataAs<float>()[off];
      }
      return l.addConstant(full);
    };
    bool hasBias = n.inputs.size() > 2 && n.inputs[2] != kNoValue;
    int scale = param(n.inputs[1]);
    int bias = hasBias ? param(n.inputs[2]) : -1;
    if (scale == -2 || bias == -2) {
      l.unsupported(n, "a computed scale or bias that broadcasts is not compiled");
      return false;
    }
    int in = l.tensorIn(n.inputs[0], Phys::Plain);
    int out = l.defineOutput(n.outputs[0], Phys::Plain);
    int mean = n.outputs.size() > 1 ? l.defineOutput(n.outputs[1], Phys::Plain) : -1;
    int invStd = n.outputs.size() > 2 ? l.defineOutput(n.outputs[2], Phys::Plain) : -1;
    addLayerNormStep(l, label, {out, in, scale, bias, mean, invStd}, rows, cols, a.epsilon,
                     n.kind == OpKind::RMSNormalization);
    return true;
  }
  default:
    TUNEC_ASSERT(false, "lowerNormalization: not a normalization op");
    return false;
  }
}

} // namespace tunec::driver
