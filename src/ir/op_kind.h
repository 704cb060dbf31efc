// The closed set of operators tunec knows, with their DNNFusion mapping type.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace tunec {

/// X(name, attribute struct): every op tunec knows. The attribute struct is the op's typed
/// attributes (op_attrs.h); ONNX names equal the op names here.
// One line per op family (kept by hand):
// clang-format off
#define TUNEC_OP_LIST(X)                                                                           \
  /* unary elementwise */                                                                          \
  X(Abs, NoAttrs) X(Acos, NoAttrs) X(Acosh, NoAttrs) X(Asin, NoAttrs) X(Asinh, NoAttrs)            \
  X(Atan, NoAttrs) X(Atanh, NoAttrs) X(Ceil, NoAttrs) X(Cos, NoAttrs) X(Cosh, NoAttrs)             \
  X(Erf, NoAttrs) X(Exp, NoAttrs) X(Floor, NoAttrs) X(HardSwish, NoAttrs) X(Identity, NoAttrs)     \
  X(IsInf, IsInfAttrs) X(IsNaN, NoAttrs) X(Log, NoAttrs) X(Mish, NoAttrs) X(Neg, NoAttrs)          \
  X(Not, NoAttrs) X(Reciprocal, NoAttrs) X(Relu, NoAttrs) X(Round, RoundAttrs) X(Sigmoid, NoAttrs)    \
  X(Sign, NoAttrs) X(Sin, NoAttrs) X(Sinh, NoAttrs) X(Softplus, NoAttrs) X(Softsign, NoAttrs)      \
  X(Sqrt, NoAttrs) X(Tan, NoAttrs) X(Tanh, NoAttrs) X(Gelu, GeluAttrs) X(Celu, AlphaBetaAttrs)     \
  X(Swish, AlphaBetaAttrs) X(Elu, AlphaBetaAttrs) X(HardSigmoid, AlphaBetaAttrs) X(LeakyRelu, AlphaBetaAttrs)               \
  X(Selu, AlphaBetaAttrs) X(ThresholdedRelu, AlphaBetaAttrs) X(Clip, ClipAttrs)                    \
  X(Cast, CastAttrs) X(Dropout, NoAttrs)                                                           \
  /* quantization: x, scale (scalar, or per axis), zero point; elementwise */                      \
  X(QuantizeLinear, QuantAttrs) X(DequantizeLinear, QuantAttrs)                                    \
  /* binary and variadic elementwise, numpy broadcasting */                                        \
  X(Add, NoAttrs) X(Sub, NoAttrs) X(Mul, NoAttrs) X(Div, NoAttrs) X(Pow, NoAttrs)                  \
  X(Mod, ModAttrs) X(PRelu, NoAttrs) X(Max, NoAttrs) X(Min, NoAttrs) X(Sum, NoAttrs)               \
  X(Mean, NoAttrs) X(Equal, NoAttrs) X(Less, NoAttrs) X(LessOrEqual, NoAttrs)                      \
  X(Greater, NoAttrs) X(GreaterOrEqual, NoAttrs) X(And, NoAttrs) X(Or, NoAttrs) X(Xor, NoAttrs)    \
  X(BitwiseAnd, NoAttrs) X(BitwiseOr, NoAttrs) X(BitwiseXor, NoAttrs) X(Where, NoAttrs)            \
  /* heavy anchors; IntegerMatMul and IntegerConv (tunec's own): u8 activations x constant s8  */ \
  /* weights, the exact sums as f32 */                                                             \
  X(Conv, ConvAttrs) X(Gemm, GemmAttrs) X(MatMul, NoAttrs) X(IntegerMatMul, NoAttrs) X(MatMulNBits, BlockQuantAttrs)               \
  X(IntegerConv, ConvAttrs)                                                                        \
  /* normalizations and reductions */                                                              \
  X(Softmax, SoftmaxAttrs) X(LogSoftmax, SoftmaxAttrs) X(Hardmax, SoftmaxAttrs)                    \
  X(LayerNormalization, NormAttrs) X(RMSNormalization, NormAttrs) X(BatchNormalization, NormAttrs)                                \
  X(InstanceNormalization, NormAttrs) X(MaxPool, PoolAttrs) X(AveragePool, PoolAttrs)              \
  X(LpPool, PoolAttrs) X(GlobalAveragePool, NoAttrs) X(GlobalMaxPool, NoAttrs)                     \
  X(ReduceMean, ReduceAttrs) X(ReduceSum, ReduceAttrs) X(ReduceMax, ReduceAttrs)                   \
  X(ReduceMin, ReduceAttrs) X(ReduceProd, ReduceAttrs) X(ReduceL1, ReduceAttrs)                    \
  X(ReduceL2, ReduceAttrs) X(ReduceSumSquare, ReduceAttrs) X(ReduceLogSum, ReduceAttrs)            \
  X(ReduceLogSumExp, ReduceAttrs) X(ArgMax, ArgReduceAttrs) X(ArgMin, ArgReduceAttrs)              \
  /* data movement */                                                                              \
  X(Reshape, ReshapeAttrs) X(Flatten, AxisAttrs) X(Squeeze, AxesAttrs) X(Unsqueeze, AxesAttrs)     \
  X(Transpose, TransposeAttrs) X(Concat, AxisAttrs) X(Split, SplitAttrs) X(Slice, SliceAttrs)      \
  X(Gather, AxisAttrs) X(GatherElements, AxisAttrs) X(Expand, ReshapeAttrs) X(Tile, TileAttrs)     \
  X(Pad, PadAttrs) X(ConstantOfShape, ConstantOfShapeAttrs) X(Trilu, TriluAttrs) X(DepthToSpace, DepthToSpaceAttrs)     \
  X(SpaceToDepth, DepthToSpaceAttrs) X(Resize, ResizeAttrs)
// clang-format on

enum class OpKind : uint16_t {
#define TUNEC_OP_ENUM(name, attrs) name,
  TUNEC_OP_LIST(TUNEC_OP_ENUM)
#undef TUNEC_OP_ENUM
};

/// Number of op kinds.
int opKindCount();
/// The op's name, equal to its ONNX op type.
std::string_view opName(OpKind kind);
/// Looks an op up by its ONNX op type.
std::optional<OpKind> findOp(std::string_view name);

/// DNNFusion's classification of how output elements depend on input elements; fusion reads
/// this, never lists of op names (DESIGN.md, decision 3).
enum class MappingType : uint8_t {
  OneToOne,   ///< each output element from the same-index input element(s): Relu, Add
  OneToMany,  ///< each input element feeds several outputs: Expand, broadcasts, Tile
  ManyToMany, ///< each output reads many inputs: Conv, MatMul, Softmax, reductions, pooling
  Reorganize, ///< output is the input's elements regrouped in order: Reshape, Flatten, Slice
  Shuffle,    ///< output is a permutation of the input: Transpose, Gather, DepthToSpace
};
std::string_view mappingTypeName(MappingType type);

} // namespace tunec
