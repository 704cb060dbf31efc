// Resize as Resample steps, one per resampled axis (ir/resize.h decides each axis's taps):
// the axis viewed as [outer, length, inner] of the layout the input has (plain, or NHWC, where
// a spatial axis's inner run is its channels), the innermost axis first, through arena
// temporaries; linear and cubic sum f32 taps, nearest copies elements of any type.
#include "driver/light_ops.h"
#include "ir/resize.h"

#include <cstring>

namespace tunec::driver {

bool lowerResize(Lowering& l, const Node& n) {
  const Graph& g = l.graph();
  const auto& a = std::get<ResizeAttrs>(n.attrs);
  const Value& x = g.value(n.inputs[0]);
  const Shape& xs = x.type.shape;
  const DType dt = x.type.dtype;
  if (a.mode != ResizeMode::Nearest && dt != DType::F32) {
    l.unsupported(n, std::string(a.mode == ResizeMode::Linear ? "linear" : "cubic") +
                         " resizing of " + std::string(dtypeName(dt)) +
                         " is not compiled (f32 only; nearest takes any type)");
    return false;
  }
  const std::string label = lightLabel(n);
  Phys phys;
  int in = l.tensorAny(n.inputs[0], phys);
  // The logical axes in physical order, and the physical dims as they are resampled.
  std::vector<int> order;
  for (int d = 0; d < xs.rank(); ++d) order.push_back(d);
  if (phys == Phys::Nhwc) order = {0, 2, 3, 1};
  std::vector<int64_t> dims;
  for (int d : order) dims.push_back(xs[d]);
  std::vector<size_t> passes; // positions in `order`, innermost first
  for (size_t p = order.size(); p-- > 0;)
    if (resizesAxis(a, order[p], dims[p])) passes.push_back(p);
  if (passes.empty()) {
    l.defineAlias(n.outputs[0], in, phys);
    return true;
  }
  const auto elem = static_cast<int64_t>(dtypeSize(dt));
  int out = l.defineOutput(n.outputs[0], phys);
  int from = in;
  for (size_t step = 0; step < passes.size(); ++step) {
    const size_t p = passes[step];
    const int axis = order[p];
    const ResizeTaps t = resizeTaps(a, axis, dims[p]);
    rt::ResampleParams params{1, dims[p], a.sizes[static_cast<size_t>(axis)], 1, t.taps, elem};
    for (size_t k = 0; k < p; ++k) params.outer *= dims[k];
    for (size_t k = p + 1; k < dims.size(); ++k) params.inner *= dims[k];
    dims[p] = params.outLength;
    const int64_t outputs = params.outer * params.outLength * params.inner;
    const bool last = step + 1 == passes.size();
    int to = last ? out : l.addArenaTensor(outputs * elem);
    rt::Step s;
    s.kind = rt::StepKind::Resample;
    s.label = passes.size() == 1 ? label : label + " (axis " + std::to_string(axis) + ")";
    s.tensors = {to, from};
    s.ints.resize(sizeof(params) / sizeof(int64_t));
    std::memcpy(s.ints.data(), &params, sizeof(params));
    s.ints.insert(s.ints.end(), t.index.begin(), t.index.end());
    if (t.taps > 1) s.floats.assign(t.weight.begin(), t.weight.end());
    s.flops = t.taps > 1 ? 2.0 * static_cast<double>(outputs * t.taps) : 0.0;
    s.bytes = (params.outer * params.inLength * params.inner + outputs) * elem;
    l.addStep(std::move(s), {from}, {to});
    from = to;
  }
  return true;
}

} // namespace tunec::driver
