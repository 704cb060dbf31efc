// Element types of tensors, their sizes and names.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace tunec {

/// Element type of a tensor. f32/bf16/f16/i8/u8/i32/i64/bool are what kernels use; the others
/// exist so that models and conformance cases that carry them can be imported and checked.
enum class DType : uint8_t { F32, F64, F16, BF16, I8, U8, I16, U16, I32, U32, I64, U64, Bool };

/// Size of one element in bytes.
size_t dtypeSize(DType type);
/// Short lowercase name: "f32", "i64", "bool".
std::string_view dtypeName(DType type);
/// Parses a name printed by dtypeName.
std::optional<DType> parseDType(std::string_view name);
/// True for f32, f64, f16 and bf16.
bool isFloat(DType type);
/// True for the signed and unsigned integer types (not bool).
bool isInteger(DType type);

/// bf16 <-> f32 with round-to-nearest-even (NaN preserved).
uint16_t floatToBf16(float value);
float bf16ToFloat(uint16_t bits);
/// IEEE half <-> f32 with round-to-nearest-even.
uint16_t floatToHalf(float value);
float halfToFloat(uint16_t bits);

} // namespace tunec
