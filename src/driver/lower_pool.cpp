// 2-d pooling as a loop kernel over the input's layout (plain or NHWC): max and average
// windows, and the global pools; a max or global average pool of quantized u8/s8 values too.
#include "driver/light_ops.h"
#include "ir/op_registry.h"

#include <cstring>

namespace tunec::driver {

void addPoolStep(Lowering& l, const std::string& label, const rt::PoolParams& p, int in, int out) {
  rt::Step step;
  step.kind = rt::StepKind::Pool;
  step.label = label;
  step.tensors = {out, in};
  step.ints.resize(sizeof(p) / sizeof(int64_t));
  std::memcpy(step.ints.data(), &p, sizeof(p));
  l.addStep(std::move(step), {in}, {out});
}

bool lowerPool(Lowering& l, const Node& n) {
  const Graph& g = l.graph();
  const Value& x = g.value(n.inputs[0]);
  const Shape& xs = x.type.shape;
  const Shape& ys = g.value(n.outputs[0]).type.shape;
  std::string label = lightLabel(n);
  // A max pool or a global average pool of quantized integers (move-quantized-values) runs on
  // its u8 or s8 values.
  const bool integerPool = (n.kind == OpKind::MaxPool || n.kind == OpKind::GlobalMaxPool ||
                            n.kind == OpKind::GlobalAveragePool) &&
                           (x.type.dtype == DType::U8 || x.type.dtype == DType::I8) &&
                           n.outputs.size() == 1 &&
                           g.value(n.outputs[0]).type.dtype == x.type.dtype;
  if (!allF32(g, n) && !integerPool) {
    l.unsupported(n, "only f32 tensors are compiled for this op");
    return false;
  }
  if (xs.rank() != 4 || n.outputs.size() != 1) {
    l.unsupported(n, "only 2-d pooling with one output is compiled");
    return false;
  }
  // Pooling keeps its input's layout (as the layout plan does).
  Phys phys;
  int in = l.tensorAny(n.inputs[0], phys);
  Phys outPhys = phys;
  rt::PoolParams p{};
  p.dtype = static_cast<int64_t>(x.type.dtype); // f32, or u8/s8 (move-quantized-values)
  bool global = n.kind == OpKind::GlobalAveragePool || n.kind == OpKind::GlobalMaxPool;
  p.isMax = n.kind == OpKind::MaxPool || n.kind == OpKind::GlobalMaxPool;
  p.n = xs[0], p.c = xs[1], p.h = xs[2], p.w = xs[3], p.oh = ys[2], p.ow = ys[3];
  p.kh = p.h, p.kw = p.w, p.sh = p.sw = p.dh = p.dw = 1;
  if (!global) {
    const auto& a = std::get<PoolAttrs>(n.attrs);
    if (a.kernel.size() != 2) {
      l.unsupported(n, "only 2-d pooling is compiled");
      return false;
    }
    p.kh = a.kernel[0], p.kw = a.kernel[1], p.sh = a.strides[0], p.sw = a.strides[1];
    p.padTop = a.pads[0], p.padLeft = a.pads[1], p.dh = a.dilations[0], p.dw = a.dilations[1];
    p.countIncludePad = a.countIncludePad;
  }
  auto is = Lowering::logicalStrides(xs, phys), os = Lowering::logicalStrides(ys, outPhys);
  for (int d = 0; d < 4; ++d) {
    p.inStride[d] = is[static_cast<size_t>(d)];
    p.outStride[d] = os[static_cast<size_t>(d)];
  }
  int out = l.defineOutput(n.outputs[0], outPhys);
  addPoolStep(l, label, p, in, out);
  return true;
}

} // namespace tunec::driver
