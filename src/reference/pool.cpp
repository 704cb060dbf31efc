// Reference pooling: MaxPool, AveragePool, LpPool (1-d to 3-d) and the global pools.
#include "reference/kernels.h"

#include <cmath>
#include <limits>

namespace tunec::reference {

namespace {

Status globalPool(const Node& node, const Tensor& x, Tensor& y) {
  std::vector<double> v = toDoubles(x);
  int64_t planes = x.shape()[0] * x.shape()[1];
  int64_t size = x.numel() / planes;
  std::vector<double> r(static_cast<size_t>(planes));
  for (int64_t p = 0; p < planes; ++p) {
    const double* src = &v[static_cast<size_t>(p * size)];
    double acc = node.kind == OpKind::GlobalMaxPool ? -std::numeric_limits<double>::infinity() : 0;
    for (int64_t i = 0; i < size; ++i)
      acc = node.kind == OpKind::GlobalMaxPool ? std::max(acc, src[i]) : acc + src[i];
    r[static_cast<size_t>(p)] =
        node.kind == OpKind::GlobalMaxPool ? acc : acc / static_cast<double>(size);
    // Integers (move-quantized-values) average to the nearest one, ties to even.
    if (isInteger(y.dtype())) r[static_cast<size_t>(p)] = std::nearbyint(r[static_cast<size_t>(p)]);
  }
  fromDoubles(y, r);
  return {};
}

} // namespace

Status pool(const Node& node, Inputs in, Outputs out) {
  if (node.kind == OpKind::GlobalAveragePool || node.kind == OpKind::GlobalMaxPool)
    return globalPool(node, *in[0], out[0]);
  const auto& a = std::get<PoolAttrs>(node.attrs);
  const Shape& xs = in[0]->shape();
  const Shape& ys = out[0].shape();
  size_t r = a.kernel.size();
  // Pad to three spatial dims, as the reference convolution does.
  int64_t inD[3] = {1, 1, 1}, outD[3] = {1, 1, 1}, k[3] = {1, 1, 1}, st[3] = {1, 1, 1},
          padB[3] = {0, 0, 0}, padE[3] = {0, 0, 0}, dil[3] = {1, 1, 1};
  for (size_t i = 0; i < r; ++i) {
    size_t d = 3 - r + i;
    inD[d] = xs[static_cast<int>(i) + 2];
    outD[d] = ys[static_cast<int>(i) + 2];
    k[d] = a.kernel[i];
    st[d] = a.strides[i];
    padB[d] = a.pads[i];
    padE[d] = a.pads[i + r];
    dil[d] = a.dilations[i];
  }
  std::vector<double> x = toDoubles(*in[0]);
  std::vector<double> y(static_cast<size_t>(ys.numel()));
  std::vector<double> indices(out.size() > 1 ? y.size() : 0);
  int64_t planes = xs[0] * xs[1];
  int64_t inPlane = inD[0] * inD[1] * inD[2], outPlane = outD[0] * outD[1] * outD[2];
  for (int64_t p = 0; p < planes; ++p)
    for (int64_t od = 0; od < outD[0]; ++od)
      for (int64_t oh = 0; oh < outD[1]; ++oh)
        for (int64_t ow = 0; ow < outD[2]; ++ow) {
          double acc = node.kind == OpKind::MaxPool ? -std::numeric_limits<double>::infinity() : 0;
          int64_t count = 0, padCount = 0, argmax = 0;
          for (int64_t kd = 0; kd < k[0]; ++kd)
            for (int64_t kh = 0; kh < k[1]; ++kh)
              for (int64_t kw = 0; kw < k[2]; ++kw) {
                int64_t id = od * st[0] - padB[0] + kd * dil[0];
                int64_t ih = oh * st[1] - padB[1] + kh * dil[1];
                int64_t iw = ow * st[2] - padB[2] + kw * dil[2];
                bool inPadded =
                    id < inD[0] + padE[0] && ih < inD[1] + padE[1] && iw < inD[2] + padE[2];
                if (inPadded) ++padCount;
                if (id < 0 || ih < 0 || iw < 0 || id >= inD[0] || ih >= inD[1] || iw >= inD[2])
                  continue;
                int64_t offset = (id * inD[1] + ih) * inD[2] + iw;
                double v = x[static_cast<size_t>(p * inPlane + offset)];
                ++count;
                if (node.kind == OpKind::MaxPool) {
                  if (v > acc) {
                    acc = v;
                    argmax = p * inPlane + offset;
                  }
                } else if (node.kind == OpKind::LpPool) {
                  acc += std::pow(std::fabs(v), static_cast<double>(a.p));
                } else {
                  acc += v;
                }
              }
          if (node.kind == OpKind::AveragePool)
            acc /= static_cast<double>(a.countIncludePad ? padCount : count);
          if (node.kind == OpKind::LpPool) acc = std::pow(acc, 1.0 / static_cast<double>(a.p));
          size_t o = static_cast<size_t>(p * outPlane + (od * outD[1] + oh) * outD[2] + ow);
          y[o] = acc;
          if (!indices.empty()) indices[o] = static_cast<double>(argmax);
        }
  fromDoubles(out[0], y);
  if (out.size() > 1) fromDoubles(out[1], indices);
  return {};
}

} // namespace tunec::reference
