// Element type facts and the 16-bit float conversions.
#include "ir/dtype.h"

#include <bit>
#include <cmath>
#include <cstring>

namespace tunec {

size_t dtypeSize(DType type) {
  switch (type) {
  case DType::F64:
  case DType::I64:
  case DType::U64:
    return 8;
  case DType::F32:
  case DType::I32:
  case DType::U32:
    return 4;
  case DType::F16:
  case DType::BF16:
  case DType::I16:
  case DType::U16:
    return 2;
  case DType::I8:
  case DType::U8:
  case DType::Bool:
    return 1;
  }
  return 0;
}

namespace {
constexpr std::string_view kNames[] = {"f32", "f64", "f16", "bf16", "i8",  "u8",  "i16",
                                       "u16", "i32", "u32", "i64",  "u64", "bool"};
} // namespace

std::string_view dtypeName(DType type) {
  return kNames[static_cast<int>(type)];
}

std::optional<DType> parseDType(std::string_view name) {
  for (size_t i = 0; i < std::size(kNames); ++i)
    if (kNames[i] == name) return static_cast<DType>(i);
  return std::nullopt;
}

bool isFloat(DType type) {
  return type == DType::F32 || type == DType::F64 || type == DType::F16 || type == DType::BF16;
}

bool isInteger(DType type) {
  return !isFloat(type) && type != DType::Bool;
}

uint16_t floatToBf16(float value) {
  uint32_t bits = std::bit_cast<uint32_t>(value);
  if (std::isnan(value)) return static_cast<uint16_t>((bits >> 16) | 0x40);
  uint32_t rounding = 0x7fff + ((bits >> 16) & 1);
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

float bf16ToFloat(uint16_t bits) {
  return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16);
}

uint16_t floatToHalf(float value) {
  uint32_t x = std::bit_cast<uint32_t>(value);
  uint32_t sign = (x >> 16) & 0x8000;
  uint32_t absBits = x & 0x7fffffff;
  if (absBits >= 0x7f800000) // inf or nan
    return static_cast<uint16_t>(sign | 0x7c00 | (absBits > 0x7f800000 ? 0x200 : 0));
  if (absBits >= 0x477ff000) return static_cast<uint16_t>(sign | 0x7c00); // overflow to inf
  if (absBits < 0x38800000) {                                             // subnormal or zero
    float magnitude = std::bit_cast<float>(absBits);
    // Scale so that the half subnormal unit (2^-24) becomes 1 and round to nearest even.
    float scaled = magnitude * 16777216.0f;
    auto mant = static_cast<uint32_t>(std::nearbyint(scaled));
    return static_cast<uint16_t>(sign | mant);
  }
  uint32_t mant = absBits & 0x7fffff;
  uint32_t exp = (absBits >> 23) - 127 + 15;
  uint32_t half = (exp << 10) | (mant >> 13);
  uint32_t rest = mant & 0x1fff;
  if (rest > 0x1000 || (rest == 0x1000 && (half & 1))) ++half;
  return static_cast<uint16_t>(sign | half);
}

float halfToFloat(uint16_t bits) {
  uint32_t sign = (static_cast<uint32_t>(bits) & 0x8000) << 16;
  uint32_t exp = (bits >> 10) & 0x1f;
  uint32_t mant = bits & 0x3ff;
  if (exp == 0) {
    float magnitude = std::ldexp(static_cast<float>(mant), -24);
    return sign ? -magnitude : magnitude;
  }
  if (exp == 31) return std::bit_cast<float>(sign | 0x7f800000 | (mant << 13));
  return std::bit_cast<float>(sign | ((exp - 15 + 127) << 23) | (mant << 13));
}

} // namespace tunec
