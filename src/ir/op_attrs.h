// Typed attributes of every op (DESIGN.md, decision 2): converted once at the ONNX boundary.
#pragma once

#include "ir/tensor.h"
#include "support/dtype.h"

#include <cstdint>
#include <limits>
#include <variant>
#include <vector>

namespace tunec {

struct NoAttrs {
  bool operator==(const NoAttrs&) const = default;
};

/// Two scalar parameters of activation functions: Elu/Celu/LeakyRelu/ThresholdedRelu use alpha;
/// HardSigmoid uses alpha and beta; Selu uses alpha and gamma (stored in beta).
struct AlphaBetaAttrs {
  float alpha = 0.f;
  float beta = 0.f;
  bool operator==(const AlphaBetaAttrs&) const = default;
};

/// Gelu: exact (erf) or the tanh approximation.
struct GeluAttrs {
  bool tanhApproximation = false;
  bool operator==(const GeluAttrs&) const = default;
};

/// Round: half to even, as ONNX's; `nanToZero` (tunec's, for the quantization round trips that
/// lower-quantize-round-trips writes as float arithmetic) makes a NaN 0, as QuantizeLinear makes a
/// NaN its zero point, whose dequantized value is 0.
struct RoundAttrs {
  bool nanToZero = false;
  bool operator==(const RoundAttrs&) const = default;
};

/// Whether a Round node's attributes make a NaN 0.
inline bool roundsNanToZero(const RoundAttrs* a) {
  return a && a->nanToZero;
}

struct IsInfAttrs {
  bool detectPositive = true;
  bool detectNegative = true;
  bool operator==(const IsInfAttrs&) const = default;
};

/// Clip bounds; constant at compile time (ONNX opset >= 11 passes them as inputs).
struct ClipAttrs {
  double min = -std::numeric_limits<double>::infinity();
  double max = std::numeric_limits<double>::infinity();
  bool operator==(const ClipAttrs&) const = default;
};

struct CastAttrs {
  DType to = DType::F32;
  /// Asserted by the producer: the input's values are integers that `to` holds exactly (an
  /// integer product's exact f32 form cast to i32), so a Cast back to the input's type is the
  /// identity (simplify-algebra drops the pair).
  bool exact = false;
  bool operator==(const CastAttrs&) const = default;
};

/// QuantizeLinear and DequantizeLinear (inputs {x, scale, zero point}; the importer supplies a
/// zero point of zeros when the model omits it): the axis of per-axis scales (normalized; a
/// scalar scale is per-tensor).
struct QuantAttrs {
  int64_t axis = 1;
  bool operator==(const QuantAttrs&) const = default;
};

/// Mod: integer modulo with the divisor's sign (fmod=false) or C fmod (fmod=true).
struct ModAttrs {
  bool fmod = false;
  bool operator==(const ModAttrs&) const = default;
};

/// Convolution over the trailing spatial dims of an N x C x spatial... input. Pads are
/// begin values for each spatial dim then end values (ONNX order); auto_pad is resolved.
struct ConvAttrs {
  std::vector<int64_t> kernel;
  std::vector<int64_t> strides;
  std::vector<int64_t> pads;
  std::vector<int64_t> dilations;
  int64_t group = 1;
  /// What the padding reads: 0 for Conv; an IntegerConv's u8 input zero point (a padded tap of
  /// the quantized input then dequantizes to 0, as the float convolution's zero padding does).
  int64_t padValue = 0;
  bool operator==(const ConvAttrs&) const = default;
};

/// Y = alpha * op(A) * op(B) + beta * C.
struct GemmAttrs {
  float alpha = 1.f;
  float beta = 1.f;
  bool transA = false;
  bool transB = false;
  bool operator==(const GemmAttrs&) const = default;
};

/// Softmax-family axis; `coerce2d` is the opset < 13 meaning (flatten to 2-D at axis).
struct SoftmaxAttrs {
  int64_t axis = -1;
  bool coerce2d = false;
  bool operator==(const SoftmaxAttrs&) const = default;
};

/// Normalization: LayerNormalization normalizes dims [axis, rank); BatchNormalization and
/// InstanceNormalization use channel axis 1.
struct NormAttrs {
  int64_t axis = 1;
  float epsilon = 1e-5f;
  bool operator==(const NormAttrs&) const = default;
};

/// Pooling window over trailing spatial dims; pads as in ConvAttrs; p is LpPool's norm.
struct PoolAttrs {
  std::vector<int64_t> kernel;
  std::vector<int64_t> strides;
  std::vector<int64_t> pads;
  std::vector<int64_t> dilations;
  bool ceilMode = false;
  bool countIncludePad = false;
  int64_t p = 2;
  bool operator==(const PoolAttrs&) const = default;
};

/// Reduction over `axes` (normalized, sorted; empty with noopWithEmptyAxes=false means all).
struct ReduceAttrs {
  std::vector<int64_t> axes;
  bool keepDims = true;
  bool operator==(const ReduceAttrs&) const = default;
};

struct ArgReduceAttrs {
  int64_t axis = 0;
  bool keepDims = true;
  bool selectLastIndex = false;
  bool operator==(const ArgReduceAttrs&) const = default;
};

/// Target shape of Reshape (fully resolved: no 0 or -1; a dimension may be symbolic, computed
/// from the input's) or of Expand (the ONNX shape operand).
struct ReshapeAttrs {
  std::vector<Dim> shape;
  bool operator==(const ReshapeAttrs&) const = default;
};

/// A single (possibly negative, normalized by inference) axis: Flatten, Concat, Gather.
struct AxisAttrs {
  int64_t axis = 0;
  bool operator==(const AxisAttrs&) const = default;
};

/// Squeeze/Unsqueeze axes (normalized, sorted).
struct AxesAttrs {
  std::vector<int64_t> axes;
  bool operator==(const AxesAttrs&) const = default;
};

struct TransposeAttrs {
  std::vector<int64_t> perm;
  bool operator==(const TransposeAttrs&) const = default;
};

struct SplitAttrs {
  int64_t axis = 0;
  std::vector<int64_t> sizes; ///< one per output
  bool operator==(const SplitAttrs&) const = default;
};

/// Slice with one entry per input dim: start (clamped), step (non-zero) and element count.
struct SliceAttrs {
  std::vector<int64_t> starts;
  std::vector<int64_t> steps;
  std::vector<int64_t> counts; ///< the bounds of `extents` when it is set
  /// A symbolic slice's counts (a prefix of run-time length: positions[:, :sequence]); empty for
  /// a static one.
  std::vector<Dim> extents;
  /// Starts read at run time, one a dimension (rows [past, past + sequence) of a table of
  /// rotary angles); empty when `starts` are all constant. Only a symbolic graph has them, and
  /// only compiled code runs them (no folding, no reference).
  std::vector<DimExpr> runTimeStarts = {};
  bool startsAtRunTime() const { return !runTimeStarts.empty(); }
  bool operator==(const SliceAttrs&) const = default;
};

struct TileAttrs {
  std::vector<int64_t> repeats;
  bool operator==(const TileAttrs&) const = default;
};

enum class PadMode : uint8_t { Constant, Reflect, Edge };
/// Pad: begin values for every dim, then end values (may be negative: crop).
struct PadAttrs {
  PadMode mode = PadMode::Constant;
  std::vector<int64_t> pads;
  double value = 0.0;
  bool operator==(const PadAttrs&) const = default;
};

/// ConstantOfShape: output shape and fill value (a one-element tensor of the output dtype).
struct ConstantOfShapeAttrs {
  std::vector<int64_t> shape;
  DType dtype = DType::F32;
  double value = 0.0;
  bool operator==(const ConstantOfShapeAttrs&) const = default;
};

/// Trilu: the upper (j - i >= k) or lower (j - i <= k) triangle of the last two axes kept, the
/// rest zero.
struct TriluAttrs {
  int64_t k = 0;
  bool upper = true;
  bool operator==(const TriluAttrs&) const = default;
};

/// MatMulNBits: weight codes of `bits` bits, a scale and zero point per `block` of K.
struct BlockQuantAttrs {
  int64_t bits = 4;
  int64_t block = 32;
  /// ONNX Runtime's accuracy_level: 4 allows int8 activations (quantized per block).
  int64_t accuracyLevel = 0;
  bool operator==(const BlockQuantAttrs&) const = default;
};

struct DepthToSpaceAttrs {
  int64_t blockSize = 1;
  bool columnRowDepth = false; ///< DepthToSpace mode CRD (else DCR)
  bool operator==(const DepthToSpaceAttrs&) const = default;
};

enum class ResizeMode : uint8_t { Nearest, Linear, Cubic };
/// How an output coordinate maps to an input one (ONNX Resize's coordinate_transformation_mode;
/// tf_crop_and_resize is refused at import).
enum class ResizeCoordinates : uint8_t {
  HalfPixel,
  PytorchHalfPixel,
  AlignCorners,
  Asymmetric,
  TfHalfPixelForNn,
  HalfPixelSymmetric,
};
/// Nearest mode's choice between the two inputs around a coordinate (ONNX's nearest_mode;
/// Simple: ONNX Runtime's rule for opset 10 and Upsample, floor where an axis grows and ceil
/// where it shrinks).
enum class NearestRounding : uint8_t { RoundPreferFloor, RoundPreferCeil, Floor, Ceil, Simple };

/// Resize (and Upsample): the output dims and, per axis, the scale of the coordinate
/// transform (the given scale, or output / input length when sizes were given). An axis whose
/// output length equals its input's and whose scale is 1 is not resampled.
struct ResizeAttrs {
  ResizeMode mode = ResizeMode::Nearest;
  ResizeCoordinates coordinates = ResizeCoordinates::HalfPixel;
  NearestRounding nearest = NearestRounding::RoundPreferFloor;
  double cubicA = -0.75;
  bool excludeOutside = false;
  std::vector<int64_t> sizes;
  std::vector<double> scales;
  bool operator==(const ResizeAttrs&) const = default;
};

/// The attributes of any op; the alternative is fixed by the op kind (TUNEC_OP_LIST).
using OpAttrs =
    std::variant<NoAttrs, AlphaBetaAttrs, GeluAttrs, IsInfAttrs, ClipAttrs, CastAttrs, QuantAttrs,
                 ModAttrs, ConvAttrs, GemmAttrs, SoftmaxAttrs, NormAttrs, PoolAttrs, ReduceAttrs,
                 ArgReduceAttrs, ReshapeAttrs, AxisAttrs, AxesAttrs, TransposeAttrs, SplitAttrs,
                 SliceAttrs, TileAttrs, PadAttrs, ConstantOfShapeAttrs, DepthToSpaceAttrs,
                 BlockQuantAttrs, TriluAttrs, RoundAttrs, ResizeAttrs>;

} // namespace tunec
