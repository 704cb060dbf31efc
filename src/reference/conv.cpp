// Reference convolution (1-d, 2-d, 3-d; groups, strides, pads, dilations) in double.
#include "reference/kernels.h"

namespace tunec::reference {

namespace {

/// Spatial parameters padded to three dims (depth, height, width) so one loop nest serves 1-d
/// to 3-d convolution: missing leading dims have size 1, kernel 1, stride 1, no padding.
struct Spatial3 {
  int64_t in[3] = {1, 1, 1}, out[3] = {1, 1, 1}, kernel[3] = {1, 1, 1};
  int64_t stride[3] = {1, 1, 1}, pad[3] = {0, 0, 0}, dilation[3] = {1, 1, 1};
};

Spatial3 spatialOf(const ConvAttrs& a, const Shape& x, const Shape& y) {
  Spatial3 s;
  size_t r = a.kernel.size();
  for (size_t i = 0; i < r; ++i) {
    size_t d = 3 - r + i;
    s.in[d] = x[static_cast<int>(i) + 2];
    s.out[d] = y[static_cast<int>(i) + 2];
    s.kernel[d] = a.kernel[i];
    s.stride[d] = a.strides[i];
    s.pad[d] = a.pads[i];
    s.dilation[d] = a.dilations[i];
  }
  return s;
}

} // namespace

Status conv(const Node& node, Inputs in, Outputs out) {
  const auto& a = std::get<ConvAttrs>(node.attrs);
  const Shape& xs = in[0]->shape();
  const Shape& ws = in[1]->shape();
  Tensor& y = out[0];
  Spatial3 s = spatialOf(a, xs, y.shape());
  std::vector<double> x = toDoubles(*in[0]), w = toDoubles(*in[1]);
  std::vector<double> bias;
  if (in.size() > 2 && in[2]) bias = toDoubles(*in[2]);
  int64_t n = xs[0], c = xs[1], m = ws[0], group = a.group;
  int64_t cg = c / group, mg = m / group;
  int64_t inPlane = s.in[0] * s.in[1] * s.in[2], outPlane = s.out[0] * s.out[1] * s.out[2];
  int64_t kernelSize = s.kernel[0] * s.kernel[1] * s.kernel[2];
  // Padding that reads v (IntegerConv): the convolution of x - v with zero padding, plus v
  // times each output channel's weight sum (every tap then reads v where it read 0).
  if (const auto v = static_cast<double>(a.padValue); v != 0) {
    for (double& e : x) e -= v;
    bias.resize(static_cast<size_t>(m), 0.0);
    for (int64_t oc = 0; oc < m; ++oc)
      for (int64_t i = 0; i < cg * kernelSize; ++i)
        bias[static_cast<size_t>(oc)] += v * w[static_cast<size_t>(oc * cg * kernelSize + i)];
  }
  std::vector<double> result(static_cast<size_t>(y.numel()));
  for (int64_t b = 0; b < n; ++b)
    for (int64_t oc = 0; oc < m; ++oc) {
      int64_t g = oc / mg;
      double* acc = &result[static_cast<size_t>((b * m + oc) * outPlane)];
      double init = bias.empty() ? 0.0 : bias[static_cast<size_t>(oc)];
      for (int64_t i = 0; i < outPlane; ++i) acc[i] = init;
      for (int64_t ic = 0; ic < cg; ++ic) {
        const double* plane = &x[static_cast<size_t>((b * c + g * cg + ic) * inPlane)];
        const double* kern = &w[static_cast<size_t>((oc * cg + ic) * kernelSize)];
        for (int64_t kd = 0; kd < s.kernel[0]; ++kd)
          for (int64_t kh = 0; kh < s.kernel[1]; ++kh)
            for (int64_t kw = 0; kw < s.kernel[2]; ++kw) {
              double wv = kern[(kd * s.kernel[1] + kh) * s.kernel[2] + kw];
              for (int64_t od = 0; od < s.out[0]; ++od) {
                int64_t id = od * s.stride[0] - s.pad[0] + kd * s.dilation[0];
                if (id < 0 || id >= s.in[0]) continue;
                for (int64_t oh = 0; oh < s.out[1]; ++oh) {
                  int64_t ih = oh * s.stride[1] - s.pad[1] + kh * s.dilation[1];
                  if (ih < 0 || ih >= s.in[1]) continue;
                  const double* row = plane + (id * s.in[1] + ih) * s.in[2];
                  double* accRow = acc + (od * s.out[1] + oh) * s.out[2];
                  for (int64_t ow = 0; ow < s.out[2]; ++ow) {
                    int64_t iw = ow * s.stride[2] - s.pad[2] + kw * s.dilation[2];
                    if (iw >= 0 && iw < s.in[2]) accRow[ow] += wv * row[iw];
                  }
                }
              }
            }
      }
    }
  fromSums(y, result);
  return {};
}

} // namespace tunec::reference
