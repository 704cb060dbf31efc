// Reference reductions (ReduceMean/Sum/Max/Min/Prod/L1/L2/SumSquare/LogSum/LogSumExp) and
// ArgMax/ArgMin.
#include "ir/op_registry.h"
#include "reference/kernels.h"

#include <cmath>
#include <limits>

namespace tunec::reference {

namespace {

// For each input element, the linear index of the output element it reduces into.
std::vector<int64_t> reductionTargets(const Shape& in, const std::vector<bool>& reduced) {
  std::vector<int64_t> keptDims;
  for (int i = 0; i < in.rank(); ++i)
    keptDims.push_back(reduced[static_cast<size_t>(i)] ? 1 : in[i]);
  std::vector<int64_t> outStrides = Shape(keptDims).strides();
  std::vector<int64_t> targets(static_cast<size_t>(in.numel()));
  forEachIndex(in, [&](const std::vector<int64_t>& idx, int64_t linear) {
    int64_t t = 0;
    for (size_t d = 0; d < idx.size(); ++d)
      if (!reduced[d]) t += idx[d] * outStrides[d];
    targets[static_cast<size_t>(linear)] = t;
  });
  return targets;
}

Status argReduce(const Node& node, const Tensor& x, Tensor& y) {
  const auto& a = std::get<ArgReduceAttrs>(node.attrs);
  TUNEC_ASSIGN_OR_RETURN(int64_t axis, normalizeAxis(a.axis, x.shape().rank()));
  int64_t outer = 1, len = x.shape()[static_cast<int>(axis)], inner = 1;
  for (int i = 0; i < x.shape().rank(); ++i) {
    if (i < axis) outer *= x.shape()[i];
    if (i > axis) inner *= x.shape()[i];
  }
  std::vector<double> v = toDoubles(x);
  bool isMax = node.kind == OpKind::ArgMax;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      int64_t best = 0;
      double bestV = v[static_cast<size_t>(o * len * inner + i)];
      for (int64_t j = 1; j < len; ++j) {
        double cur = v[static_cast<size_t>((o * len + j) * inner + i)];
        bool better = isMax ? (a.selectLastIndex ? cur >= bestV : cur > bestV)
                            : (a.selectLastIndex ? cur <= bestV : cur < bestV);
        if (better) {
          best = j;
          bestV = cur;
        }
      }
      y.setInt(o * inner + i, best);
    }
  return {};
}

} // namespace

Status reduce(const Node& node, Inputs in, Outputs out) {
  if (node.kind == OpKind::ArgMax || node.kind == OpKind::ArgMin)
    return argReduce(node, *in[0], out[0]);
  const auto& a = std::get<ReduceAttrs>(node.attrs);
  const Shape& s = in[0]->shape();
  std::vector<bool> reduced(static_cast<size_t>(s.rank()), a.axes.empty());
  for (int64_t axis : a.axes) {
    TUNEC_ASSIGN_OR_RETURN(int64_t n, normalizeAxis(axis, s.rank()));
    reduced[static_cast<size_t>(n)] = true;
  }
  std::vector<int64_t> targets = reductionTargets(s, reduced);
  std::vector<double> x = toDoubles(*in[0]);
  size_t outN = static_cast<size_t>(out[0].numel());
  double init = 0;
  if (node.kind == OpKind::ReduceMax) init = -std::numeric_limits<double>::infinity();
  if (node.kind == OpKind::ReduceMin) init = std::numeric_limits<double>::infinity();
  if (node.kind == OpKind::ReduceProd) init = 1;
  std::vector<double> acc(outN, init), maxima(outN, -std::numeric_limits<double>::infinity());
  std::vector<int64_t> counts(outN, 0);
  if (node.kind == OpKind::ReduceLogSumExp)
    for (size_t i = 0; i < x.size(); ++i)
      maxima[static_cast<size_t>(targets[i])] =
          std::max(maxima[static_cast<size_t>(targets[i])], x[i]);
  for (size_t i = 0; i < x.size(); ++i) {
    auto t = static_cast<size_t>(targets[i]);
    double v = x[i];
    ++counts[t];
    switch (node.kind) {
    case OpKind::ReduceMax:
      acc[t] = std::max(acc[t], v);
      break;
    case OpKind::ReduceMin:
      acc[t] = std::min(acc[t], v);
      break;
    case OpKind::ReduceProd:
      acc[t] *= v;
      break;
    case OpKind::ReduceL1:
      acc[t] += std::fabs(v);
      break;
    case OpKind::ReduceL2:
    case OpKind::ReduceSumSquare:
      acc[t] += v * v;
      break;
    case OpKind::ReduceLogSumExp:
      acc[t] += std::exp(v - maxima[t]);
      break;
    default:
      acc[t] += v;
      break;
    }
  }
  for (size_t t = 0; t < outN; ++t) {
    switch (node.kind) {
    case OpKind::ReduceMean:
      acc[t] /= static_cast<double>(counts[t]);
      break;
    case OpKind::ReduceL2:
      acc[t] = std::sqrt(acc[t]);
      break;
    case OpKind::ReduceLogSum:
      acc[t] = std::log(acc[t]);
      break;
    case OpKind::ReduceLogSumExp:
      acc[t] = maxima[t] + std::log(acc[t]);
      break;
    default:
      break;
    }
  }
  fromDoubles(out[0], acc);
  return {};
}

} // namespace tunec::reference
