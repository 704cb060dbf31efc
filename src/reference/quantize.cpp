// Reference QuantizeLinear and DequantizeLinear, in float32 as ONNX defines them:
// q = saturate(rint(x / scale) + zero_point), rounding half to even; x = (q - zero_point) * scale.
#include "reference/kernels.h"

#include <algorithm>
#include <cmath>

namespace tunec::reference {

namespace {

// The index of the scale (and zero point) element of element `linear` of a tensor of `shape`.
int64_t scaleIndex(const Shape& shape, const Tensor& scale, int64_t axis, int64_t linear) {
  if (scale.shape().rank() == 0) return 0;
  int64_t inner = 1;
  for (int d = static_cast<int>(axis) + 1; d < shape.rank(); ++d) inner *= shape[d];
  return linear / inner % shape[static_cast<int>(axis)];
}

} // namespace

float quantizeValue(float x, float scale, int64_t zeroPoint, DType to) {
  auto [lo, hi] = integerRange(to);
  float q = std::nearbyint(x / scale); // the default rounding mode: half to even
  if (std::isnan(q)) return static_cast<float>(zeroPoint);
  return static_cast<float>(std::clamp(static_cast<double>(q) + zeroPoint, lo, hi));
}

Status quantize(const Node& node, Inputs in, Outputs out) {
  const Tensor &x = *in[0], &scale = *in[1], &zp = *in[2];
  Tensor& y = out[0];
  int64_t axis = std::get<QuantAttrs>(node.attrs).axis;
  for (int64_t i = 0; i < x.numel(); ++i) {
    int64_t s = scaleIndex(x.shape(), scale, axis, i);
    auto sc = static_cast<float>(scale.getDouble(s));
    if (node.kind == OpKind::QuantizeLinear)
      y.setInt(i, static_cast<int64_t>(quantizeValue(static_cast<float>(x.getDouble(i)), sc,
                                                     zp.getInt(s), y.dtype())));
    else
      y.setDouble(i, static_cast<float>(x.getInt(i) - zp.getInt(s)) * sc);
  }
  return {};
}

} // namespace tunec::reference
