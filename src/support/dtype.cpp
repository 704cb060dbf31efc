// The 16-bit float conversions.
#include "support/dtype.h"

#include <bit>
#include <cmath>
#include <cstring>

namespace tunec {

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
