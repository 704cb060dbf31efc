// Elementwise ops on any element type (integers, bool, f64, f16, bf16 and casts between them), one
// op per step, computed per element in int64 or double as the reference does. The light ops that
// are not f32 (index arithmetic, masks, comparisons, casts, integer data movement) are rare and
// small in inference graphs, so this path is written for coverage, not speed; f32 chains use the
// vectorized programs of light_kernels.h.
#pragma once

#include "runtime/model_plan.h"
#include "support/dtype.h"

#include <cstdint>
#include <vector>

namespace tunec::rt {

enum class TypedOp : int64_t {
  Cast,
  Add,
  Sub,
  Mul,
  Div,
  Mod,
  FMod,
  Pow,
  Max,
  Min,
  Equal,
  Less,
  LessOrEqual,
  Greater,
  GreaterOrEqual,
  And,
  Or,
  Xor,
  Not,
  Neg,
  Abs,
  Sign,
  Where,
  IsNaN,
  IsInfPositive,
  IsInfNegative,
  IsInf,
  BitAnd,
  BitOr,
  BitXor,
  Relu,
  QuantizeLinear,   ///< {x f32, scale f32, zero point}: saturate(rint(x / scale) + zp), u8 or i8
  DequantizeLinear, ///< {q, scale f32, zero point}: (q - zp) * scale, in float32
  kLast = DequantizeLinear,
};

/// One op over strided operands (element strides, broadcast = 0), like EwProgram.
struct TypedProgram {
  TypedOp op = TypedOp::Cast;
  DType out = DType::F32;
  std::vector<DType> in;
  std::vector<int64_t> dims, outStrides;
  int64_t outOffset = 0;
  std::vector<std::vector<int64_t>> inStrides;
  std::vector<int64_t> inOffsets;

  void encode(Step& step) const;
  static Expected<TypedProgram> decode(const Step& step);
};

/// ArgMax/ArgMin along an axis: `in` is outer x len x inner of type `type`, `out` int64
/// outer x inner; ties go to the first index, or the last with `selectLast`.
void runArgReduce(const void* in, int64_t* out, int64_t outer, int64_t len, int64_t inner,
                  bool isMax, bool selectLast, DType type);

/// GatherElements: out (shape of indices) takes data at each index with the axis coordinate
/// replaced by the index (int64 or int32, negative wraps); an index out of range is an error.
Status runGatherElements(const void* data, const void* indices, void* out,
                         const std::vector<int64_t>& dataDims,
                         const std::vector<int64_t>& indexDims, int64_t axis, int64_t elemBytes,
                         int64_t indexBytes, const std::string& label);

/// Runs the program; integer division or modulo by zero is an error naming the step.
Status runTyped(const TypedProgram& p, void* out, const void* const* inputs,
                const std::string& label);

} // namespace tunec::rt
