// Reference Softmax/LogSoftmax/Hardmax, LayerNormalization, BatchNormalization (inference) and
// InstanceNormalization, in double.
#include "ir/op_registry.h"
#include "reference/kernels.h"

#include <cmath>
#include <limits>

namespace tunec::reference {

namespace {

// Views x as [outer, axisSize, inner] around `axis` (or [outer, rest] for coerce2d).
void splitAround(const Shape& s, int64_t axis, bool coerce2d, int64_t& outer, int64_t& len,
                 int64_t& inner) {
  outer = 1;
  len = 1;
  inner = 1;
  for (int i = 0; i < s.rank(); ++i) {
    if (i < axis)
      outer *= s[i];
    else if (i == axis || coerce2d)
      len *= s[i];
    else
      inner *= s[i];
  }
}

Status softmaxFamily(const Node& node, const Tensor& xt, Tensor& yt) {
  const auto& a = std::get<SoftmaxAttrs>(node.attrs);
  TUNEC_ASSIGN_OR_RETURN(int64_t axis, normalizeAxis(a.axis, xt.shape().rank()));
  int64_t outer, len, inner;
  splitAround(xt.shape(), axis, a.coerce2d, outer, len, inner);
  std::vector<double> x = toDoubles(xt), y(x.size());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      auto at = [&](int64_t j) { return static_cast<size_t>((o * len + j) * inner + i); };
      double mx = -std::numeric_limits<double>::infinity();
      int64_t arg = 0;
      for (int64_t j = 0; j < len; ++j)
        if (x[at(j)] > mx) {
          mx = x[at(j)];
          arg = j;
        }
      if (node.kind == OpKind::Hardmax) {
        for (int64_t j = 0; j < len; ++j) y[at(j)] = j == arg ? 1 : 0;
        continue;
      }
      double sum = 0;
      for (int64_t j = 0; j < len; ++j) sum += std::exp(x[at(j)] - mx);
      for (int64_t j = 0; j < len; ++j)
        y[at(j)] = node.kind == OpKind::LogSoftmax ? x[at(j)] - mx - std::log(sum)
                                                   : std::exp(x[at(j)] - mx) / sum;
    }
  fromDoubles(yt, y);
  return {};
}

Status layerNorm(const Node& node, Inputs in, Outputs out) {
  const auto& a = std::get<NormAttrs>(node.attrs);
  const Shape& s = in[0]->shape();
  TUNEC_ASSIGN_OR_RETURN(int64_t axis, normalizeAxis(a.axis, s.rank()));
  int64_t outer = 1, len = 1;
  for (int i = 0; i < s.rank(); ++i) (i < axis ? outer : len) *= s[i];
  Shape normShape(std::vector<int64_t>(s.dims().begin() + axis, s.dims().end()));
  std::vector<double> x = toDoubles(*in[0]), y(x.size());
  std::vector<double> scale = toDoubles(*in[1]);
  std::vector<int64_t> scaleOff = broadcastOffsets(in[1]->shape(), normShape);
  std::vector<double> bias;
  std::vector<int64_t> biasOff;
  if (in.size() > 2 && in[2]) {
    bias = toDoubles(*in[2]);
    biasOff = broadcastOffsets(in[2]->shape(), normShape);
  }
  std::vector<double> means(static_cast<size_t>(outer)), invStd(static_cast<size_t>(outer));
  for (int64_t o = 0; o < outer; ++o) {
    const double* row = &x[static_cast<size_t>(o * len)];
    // RMSNormalization: the mean square about 0.
    const bool rms = node.kind == OpKind::RMSNormalization;
    double mean = 0, var = 0;
    for (int64_t j = 0; j < len && !rms; ++j) mean += row[j];
    mean /= static_cast<double>(len);
    for (int64_t j = 0; j < len; ++j) var += (row[j] - mean) * (row[j] - mean);
    var /= static_cast<double>(len);
    double inv = 1.0 / std::sqrt(var + static_cast<double>(a.epsilon));
    means[static_cast<size_t>(o)] = mean;
    invStd[static_cast<size_t>(o)] = inv;
    for (int64_t j = 0; j < len; ++j) {
      auto uj = static_cast<size_t>(j);
      double v = (row[j] - mean) * inv * scale[static_cast<size_t>(scaleOff[uj])];
      if (!bias.empty()) v += bias[static_cast<size_t>(biasOff[uj])];
      y[static_cast<size_t>(o * len + j)] = v;
    }
  }
  fromDoubles(out[0], y);
  if (out.size() > 1) fromDoubles(out[1], means);
  if (out.size() > 2) fromDoubles(out[2], invStd);
  return {};
}

Status channelNorm(const Node& node, Inputs in, Tensor& yt) {
  const auto& a = std::get<NormAttrs>(node.attrs);
  const Shape& s = in[0]->shape();
  int64_t n = s[0], c = s[1], plane = s.numel() / (n * c);
  std::vector<double> x = toDoubles(*in[0]), y(x.size());
  std::vector<double> scale = toDoubles(*in[1]), bias = toDoubles(*in[2]);
  std::vector<double> mean, var;
  if (node.kind == OpKind::BatchNormalization) {
    mean = toDoubles(*in[3]);
    var = toDoubles(*in[4]);
  }
  for (int64_t b = 0; b < n; ++b)
    for (int64_t ch = 0; ch < c; ++ch) {
      auto uc = static_cast<size_t>(ch);
      const double* src = &x[static_cast<size_t>((b * c + ch) * plane)];
      double* dst = &y[static_cast<size_t>((b * c + ch) * plane)];
      double mu, sigma2;
      if (node.kind == OpKind::BatchNormalization) {
        mu = mean[uc];
        sigma2 = var[uc];
      } else {
        mu = 0;
        sigma2 = 0;
        for (int64_t i = 0; i < plane; ++i) mu += src[i];
        mu /= static_cast<double>(plane);
        for (int64_t i = 0; i < plane; ++i) sigma2 += (src[i] - mu) * (src[i] - mu);
        sigma2 /= static_cast<double>(plane);
      }
      double inv = 1.0 / std::sqrt(sigma2 + static_cast<double>(a.epsilon));
      for (int64_t i = 0; i < plane; ++i) dst[i] = (src[i] - mu) * inv * scale[uc] + bias[uc];
    }
  fromDoubles(yt, y);
  return {};
}

} // namespace

Status normalize(const Node& node, Inputs in, Outputs out) {
  switch (node.kind) {
  case OpKind::Softmax:
  case OpKind::LogSoftmax:
  case OpKind::Hardmax:
    return softmaxFamily(node, *in[0], out[0]);
  case OpKind::LayerNormalization:
  case OpKind::RMSNormalization:
    return layerNorm(node, in, out);
  default:
    return channelNorm(node, in, out[0]);
  }
}

} // namespace tunec::reference
