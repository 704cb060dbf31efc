// Index helpers shared by the reference kernels: dtype conversion, broadcasting, iteration.
#include "reference/kernels.h"

namespace tunec::reference {

std::vector<double> toDoubles(const Tensor& t) {
  std::vector<double> v(static_cast<size_t>(t.numel()));
  if (t.dtype() == DType::F32) {
    const float* p = t.dataAs<float>();
    for (size_t i = 0; i < v.size(); ++i) v[i] = p[i];
    return v;
  }
  for (size_t i = 0; i < v.size(); ++i) v[i] = t.getDouble(static_cast<int64_t>(i));
  return v;
}

void fromDoubles(Tensor& t, const std::vector<double>& values) {
  if (t.dtype() == DType::F32) {
    float* p = t.dataAs<float>();
    for (size_t i = 0; i < values.size(); ++i) p[i] = static_cast<float>(values[i]);
    return;
  }
  for (size_t i = 0; i < values.size(); ++i) t.setDouble(static_cast<int64_t>(i), values[i]);
}

void fromSums(Tensor& t, const std::vector<double>& values) {
  if (isFloat(t.dtype())) return fromDoubles(t, values);
  // Exact in int64; the width's conversion (Tensor::setInt) is the two's-complement wrap.
  for (size_t i = 0; i < values.size(); ++i)
    t.setInt(static_cast<int64_t>(i), static_cast<int64_t>(values[i]));
}

std::vector<int64_t> broadcastOffsets(const Shape& in, const Shape& out) {
  int rank = out.rank();
  std::vector<int64_t> inStrides(static_cast<size_t>(rank), 0);
  std::vector<int64_t> strides = in.strides();
  for (int i = 0; i < in.rank(); ++i) {
    int o = rank - in.rank() + i;
    inStrides[static_cast<size_t>(o)] = in[i] == 1 ? 0 : strides[static_cast<size_t>(i)];
  }
  std::vector<int64_t> offsets(static_cast<size_t>(out.numel()));
  std::vector<int64_t> idx(static_cast<size_t>(rank), 0);
  int64_t offset = 0;
  for (size_t linear = 0; linear < offsets.size(); ++linear) {
    offsets[linear] = offset;
    for (int d = rank - 1; d >= 0; --d) {
      auto ud = static_cast<size_t>(d);
      ++idx[ud];
      offset += inStrides[ud];
      if (idx[ud] < out[d]) break;
      offset -= inStrides[ud] * idx[ud];
      idx[ud] = 0;
    }
  }
  return offsets;
}

void forEachIndex(const Shape& shape,
                  const std::function<void(const std::vector<int64_t>&, int64_t)>& f) {
  int64_t n = shape.numel();
  std::vector<int64_t> idx(static_cast<size_t>(shape.rank()), 0);
  for (int64_t linear = 0; linear < n; ++linear) {
    f(idx, linear);
    for (int d = shape.rank() - 1; d >= 0; --d) {
      if (++idx[static_cast<size_t>(d)] < shape[d]) break;
      idx[static_cast<size_t>(d)] = 0;
    }
  }
}

} // namespace tunec::reference
