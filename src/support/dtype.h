// Element types of tensors: the one list shared by the IR, the runtime, the templates and the
// plans of compiled models (which store an element type as its enumerator's number or name).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <utility>

namespace tunec {

/// X(enumerator, name, bytes, kind): every element type tunec knows, in the order of the
/// enumerators (their numbers are stored in model plans: append, never reorder). f32, bf16, f16,
/// i8, u8, i32, i64 and bool are what kernels compute with; the others exist so that models
/// and conformance cases that carry them import and run.
#define TUNEC_DTYPE_LIST(X)                                                                        \
  X(F32, "f32", 4, Float)                                                                          \
  X(F64, "f64", 8, Float)                                                                          \
  X(F16, "f16", 2, Float)                                                                          \
  X(BF16, "bf16", 2, Float)                                                                        \
  X(I8, "i8", 1, Signed)                                                                           \
  X(U8, "u8", 1, Unsigned)                                                                         \
  X(I16, "i16", 2, Signed)                                                                         \
  X(U16, "u16", 2, Unsigned)                                                                       \
  X(I32, "i32", 4, Signed)                                                                         \
  X(U32, "u32", 4, Unsigned)                                                                       \
  X(I64, "i64", 8, Signed)                                                                         \
  X(U64, "u64", 8, Unsigned)                                                                       \
  X(Bool, "bool", 1, Bool)

enum class DType : uint8_t {
#define TUNEC_DTYPE_ENUMERATOR(e, name, bytes, kind) e,
  TUNEC_DTYPE_LIST(TUNEC_DTYPE_ENUMERATOR)
#undef TUNEC_DTYPE_ENUMERATOR
};

/// The largest enumerator, for range checks of stored numbers.
inline constexpr DType kLastDType = DType::Bool;

enum class DTypeKind : uint8_t { Float, Signed, Unsigned, Bool };

/// Size of one element in bytes.
constexpr size_t dtypeSize(DType type) {
  switch (type) {
#define TUNEC_DTYPE_SIZE(e, name, bytes, kind)                                                     \
  case DType::e:                                                                                   \
    return bytes;
    TUNEC_DTYPE_LIST(TUNEC_DTYPE_SIZE)
#undef TUNEC_DTYPE_SIZE
  }
  return 0;
}

constexpr DTypeKind dtypeKind(DType type) {
  switch (type) {
#define TUNEC_DTYPE_KIND(e, name, bytes, kind)                                                     \
  case DType::e:                                                                                   \
    return DTypeKind::kind;
    TUNEC_DTYPE_LIST(TUNEC_DTYPE_KIND)
#undef TUNEC_DTYPE_KIND
  }
  return DTypeKind::Bool;
}

/// Short lowercase name: "f32", "i64", "bool" (as workloads, plans and messages spell it).
constexpr std::string_view dtypeName(DType type) {
  switch (type) {
#define TUNEC_DTYPE_NAME(e, name, bytes, kind)                                                     \
  case DType::e:                                                                                   \
    return name;
    TUNEC_DTYPE_LIST(TUNEC_DTYPE_NAME)
#undef TUNEC_DTYPE_NAME
  }
  return "?";
}

/// Parses a name printed by dtypeName.
constexpr std::optional<DType> parseDType(std::string_view name) {
#define TUNEC_DTYPE_PARSE(e, spelling, bytes, kind)                                                \
  if (name == spelling) return DType::e;
  TUNEC_DTYPE_LIST(TUNEC_DTYPE_PARSE)
#undef TUNEC_DTYPE_PARSE
  return std::nullopt;
}

/// The element type stored as number `n` (a plan's), if there is one.
constexpr std::optional<DType> dtypeFromNumber(int64_t n) {
  if (n < 0 || n > static_cast<int64_t>(kLastDType)) return std::nullopt;
  return static_cast<DType>(n);
}

/// True for f32, f64, f16 and bf16.
constexpr bool isFloat(DType type) {
  return dtypeKind(type) == DTypeKind::Float;
}
/// True for the signed and unsigned integer types (not bool).
constexpr bool isInteger(DType type) {
  return dtypeKind(type) == DTypeKind::Signed || dtypeKind(type) == DTypeKind::Unsigned;
}

/// The smallest and largest value of an integer type, as doubles (what quantization saturates
/// to: u8 0..255, i8 -128..127); {0, 0} for the other types.
constexpr std::pair<double, double> integerRange(DType type) {
  double bits = 8.0 * static_cast<double>(dtypeSize(type));
  double span = 1.0;
  for (int i = 0; i < static_cast<int>(bits) - 1; ++i) span *= 2; // 2^(bits - 1)
  switch (dtypeKind(type)) {
  case DTypeKind::Signed:
    return {-span, span - 1};
  case DTypeKind::Unsigned:
    return {0.0, 2 * span - 1};
  case DTypeKind::Float:
  case DTypeKind::Bool:
    break;
  }
  return {0.0, 0.0};
}

/// bf16 <-> f32 with round-to-nearest-even (NaN preserved).
uint16_t floatToBf16(float value);
float bf16ToFloat(uint16_t bits);
/// IEEE half <-> f32 with round-to-nearest-even.
uint16_t floatToHalf(float value);
float halfToFloat(uint16_t bits);

} // namespace tunec
