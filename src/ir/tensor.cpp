// Tensor storage and the dtype-generic element accessors used by the reference ops.
#include "ir/tensor.h"

#include "support/error.h"

#include <cstdlib>
#include <cstring>
#include <limits>
#include <new>

namespace tunec {

namespace {
std::shared_ptr<std::byte[]> allocate(size_t bytes) {
  size_t rounded = (bytes + 63) / 64 * 64;
  if (rounded == 0) rounded = 64;
  void* p = std::aligned_alloc(64, rounded);
  if (!p) throw std::bad_alloc();
  std::memset(p, 0, rounded);
  return std::shared_ptr<std::byte[]>(static_cast<std::byte*>(p),
                                      [](std::byte* q) { std::free(q); });
}
} // namespace

Tensor::Tensor(DType dtype, Shape shape)
    : dtype_(dtype), shape_(std::move(shape)), data_(allocate(byteSize())) {}

double Tensor::getDouble(int64_t i) const {
  const std::byte* p = data_.get();
  switch (dtype_) {
  case DType::F32:
    return reinterpret_cast<const float*>(p)[i];
  case DType::F64:
    return reinterpret_cast<const double*>(p)[i];
  case DType::F16:
    return halfToFloat(reinterpret_cast<const uint16_t*>(p)[i]);
  case DType::BF16:
    return bf16ToFloat(reinterpret_cast<const uint16_t*>(p)[i]);
  case DType::I8:
    return reinterpret_cast<const int8_t*>(p)[i];
  case DType::U8:
    return reinterpret_cast<const uint8_t*>(p)[i];
  case DType::I16:
    return reinterpret_cast<const int16_t*>(p)[i];
  case DType::U16:
    return reinterpret_cast<const uint16_t*>(p)[i];
  case DType::I32:
    return reinterpret_cast<const int32_t*>(p)[i];
  case DType::U32:
    return reinterpret_cast<const uint32_t*>(p)[i];
  case DType::I64:
    return static_cast<double>(reinterpret_cast<const int64_t*>(p)[i]);
  case DType::U64:
    return static_cast<double>(reinterpret_cast<const uint64_t*>(p)[i]);
  case DType::Bool:
    return reinterpret_cast<const uint8_t*>(p)[i] ? 1.0 : 0.0;
  }
  return 0;
}

int64_t Tensor::getInt(int64_t i) const {
  const std::byte* p = data_.get();
  switch (dtype_) {
  case DType::I64:
    return reinterpret_cast<const int64_t*>(p)[i];
  case DType::U64:
    return static_cast<int64_t>(reinterpret_cast<const uint64_t*>(p)[i]);
  case DType::I32:
    return reinterpret_cast<const int32_t*>(p)[i];
  case DType::U32:
    return reinterpret_cast<const uint32_t*>(p)[i];
  case DType::I16:
    return reinterpret_cast<const int16_t*>(p)[i];
  case DType::U16:
    return reinterpret_cast<const uint16_t*>(p)[i];
  case DType::I8:
    return reinterpret_cast<const int8_t*>(p)[i];
  case DType::U8:
    return reinterpret_cast<const uint8_t*>(p)[i];
  case DType::Bool:
    return reinterpret_cast<const uint8_t*>(p)[i] ? 1 : 0;
  default:
    return static_cast<int64_t>(getDouble(i));
  }
}

namespace {
// Float to integer conversion that is defined for every input (NaN -> 0, saturating range).
template <typename I> I toIntegral(double v) {
  if (v != v) return 0;
  if (v <= static_cast<double>(std::numeric_limits<I>::min())) return std::numeric_limits<I>::min();
  if (v >= static_cast<double>(std::numeric_limits<I>::max())) return std::numeric_limits<I>::max();
  return static_cast<I>(v);
}
} // namespace

void Tensor::setDouble(int64_t i, double v) {
  std::byte* p = data_.get();
  switch (dtype_) {
  case DType::F32:
    reinterpret_cast<float*>(p)[i] = static_cast<float>(v);
    return;
  case DType::F64:
    reinterpret_cast<double*>(p)[i] = v;
    return;
  case DType::F16:
    reinterpret_cast<uint16_t*>(p)[i] = floatToHalf(static_cast<float>(v));
    return;
  case DType::BF16:
    reinterpret_cast<uint16_t*>(p)[i] = floatToBf16(static_cast<float>(v));
    return;
  case DType::I8:
    reinterpret_cast<int8_t*>(p)[i] = toIntegral<int8_t>(v);
    return;
  case DType::U8:
    reinterpret_cast<uint8_t*>(p)[i] = toIntegral<uint8_t>(v);
    return;
  case DType::I16:
    reinterpret_cast<int16_t*>(p)[i] = toIntegral<int16_t>(v);
    return;
  case DType::U16:
    reinterpret_cast<uint16_t*>(p)[i] = toIntegral<uint16_t>(v);
    return;
  case DType::I32:
    reinterpret_cast<int32_t*>(p)[i] = toIntegral<int32_t>(v);
    return;
  case DType::U32:
    reinterpret_cast<uint32_t*>(p)[i] = toIntegral<uint32_t>(v);
    return;
  case DType::I64:
    reinterpret_cast<int64_t*>(p)[i] = toIntegral<int64_t>(v);
    return;
  case DType::U64:
    reinterpret_cast<uint64_t*>(p)[i] = toIntegral<uint64_t>(v);
    return;
  case DType::Bool:
    reinterpret_cast<uint8_t*>(p)[i] = v != 0 ? 1 : 0;
    return;
  }
}

void Tensor::setInt(int64_t i, int64_t v) {
  std::byte* p = data_.get();
  switch (dtype_) {
  case DType::I64:
    reinterpret_cast<int64_t*>(p)[i] = v;
    return;
  case DType::U64:
    reinterpret_cast<uint64_t*>(p)[i] = static_cast<uint64_t>(v);
    return;
  case DType::I32:
    reinterpret_cast<int32_t*>(p)[i] = static_cast<int32_t>(v);
    return;
  case DType::U32:
    reinterpret_cast<uint32_t*>(p)[i] = static_cast<uint32_t>(v);
    return;
  case DType::I16:
    reinterpret_cast<int16_t*>(p)[i] = static_cast<int16_t>(v);
    return;
  case DType::U16:
    reinterpret_cast<uint16_t*>(p)[i] = static_cast<uint16_t>(v);
    return;
  case DType::I8:
    reinterpret_cast<int8_t*>(p)[i] = static_cast<int8_t>(v);
    return;
  case DType::U8:
    reinterpret_cast<uint8_t*>(p)[i] = static_cast<uint8_t>(v);
    return;
  case DType::Bool:
    reinterpret_cast<uint8_t*>(p)[i] = v != 0 ? 1 : 0;
    return;
  default:
    setDouble(i, static_cast<double>(v));
    return;
  }
}

Tensor Tensor::reshaped(Shape shape) const {
  TUNEC_ASSERT(shape.numel() == numel(),
               "reshape " << shape_.toString() << " to " << shape.toString());
  Tensor t = *this;
  t.shape_ = std::move(shape);
  return t;
}

Tensor Tensor::clone() const {
  Tensor t(dtype_, shape_);
  if (byteSize()) std::memcpy(t.data(), data(), byteSize());
  return t;
}

std::string Tensor::typeString() const {
  return std::string(dtypeName(dtype_)) + "[" + shape_.toString() + "]";
}

} // namespace tunec
