// Tensor: a dtype, a static shape and a 64-byte aligned, shared buffer of elements.
#pragma once

#include "ir/shape.h"
#include "support/dtype.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace tunec {

/// A dense row-major tensor. Copies share the buffer (like a handle); `clone()` deep-copies.
class Tensor {
public:
  Tensor() = default;
  /// A zero-filled tensor.
  Tensor(DType dtype, Shape shape);

  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  int64_t numel() const { return shape_.numel(); }
  size_t byteSize() const { return static_cast<size_t>(numel()) * dtypeSize(dtype_); }
  bool empty() const { return !data_; }

  std::byte* data() { return data_.get(); }
  const std::byte* data() const { return data_.get(); }
  template <typename T> T* dataAs() { return reinterpret_cast<T*>(data_.get()); }
  template <typename T> const T* dataAs() const { return reinterpret_cast<const T*>(data_.get()); }

  /// Element i converted to double (f16/bf16 widened, integers converted, bool 0/1).
  double getDouble(int64_t i) const;
  /// Stores v into element i, rounded/converted to the tensor's dtype (C++ conversion rules;
  /// floats to integers truncate toward zero).
  void setDouble(int64_t i, double v);
  /// Element i as int64 (floats truncated); exact for all integer dtypes except u64 > 2^63.
  int64_t getInt(int64_t i) const;
  void setInt(int64_t i, int64_t v);

  /// Same data, new shape with the same element count.
  Tensor reshaped(Shape shape) const;
  Tensor clone() const;
  /// "f32[2x3]".
  std::string typeString() const;

private:
  DType dtype_ = DType::F32;
  Shape shape_;
  std::shared_ptr<std::byte[]> data_;
};

} // namespace tunec
