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
/// `Int` is int64_t in the runtime, and the compiler's symbolic extents where a dimension is one
/// (the same int layout, each int an extent of the run).
template <typename Int> struct BasicTypedProgram {
  TypedOp op = TypedOp::Cast;
  DType out = DType::F32;
  std::vector<DType> in;
  std::vector<Int> dims, outStrides;
  Int outOffset = 0;
  std::vector<std::vector<Int>> inStrides;
  std::vector<Int> inOffsets;

  /// The step's ints: op, output type, input count, rank, the output's offset, the input types,
  /// the dims, the output's strides, then each input's offset and strides.
  void encode(std::vector<Int>& v) const {
    v = {Int(static_cast<int64_t>(op)), Int(static_cast<int64_t>(out)),
         Int(static_cast<int64_t>(in.size())), Int(static_cast<int64_t>(dims.size())), outOffset};
    for (DType t : in) v.push_back(Int(static_cast<int64_t>(t)));
    v.insert(v.end(), dims.begin(), dims.end());
    v.insert(v.end(), outStrides.begin(), outStrides.end());
    for (size_t i = 0; i < in.size(); ++i) {
      v.push_back(inOffsets[i]);
      v.insert(v.end(), inStrides[i].begin(), inStrides[i].end());
    }
  }
};

struct TypedProgram : BasicTypedProgram<int64_t> {
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
