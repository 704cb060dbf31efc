// The op registry: arity, mapping type, shape/dtype inference and FLOP count of every op.
#include "ir/op_registry.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <numeric>

namespace tunec {

std::string_view mappingTypeName(MappingType type) {
  switch (type) {
  case MappingType::OneToOne:
    return "one-to-one";
  case MappingType::OneToMany:
    return "one-to-many";
  case MappingType::ManyToMany:
    return "many-to-many";
  case MappingType::Reorganize:
    return "reorganize";
  case MappingType::Shuffle:
    return "shuffle";
  }
  return "?";
}

namespace {

constexpr std::string_view kOpNames[] = {
#define TUNEC_OP_NAME(name, attrs) #name,
    TUNEC_OP_LIST(TUNEC_OP_NAME)
#undef TUNEC_OP_NAME
};

using Inputs = std::span<const TensorType* const>;
using InferResult = Expected<std::vector<TensorType>>;

std::string dimsToString(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? "," : "") + std::to_string(dims[i]);
  return s + "]";
}

TensorType plainType(DType dtype, Shape shape) {
  return TensorType{dtype, std::move(shape), {}};
}

// ---- elementwise ---------------------------------------------------------------------------

InferResult inferSameAsFirst(const OpAttrs&, Inputs in, int) {
  return std::vector{plainType(in[0]->dtype, in[0]->shape)};
}

InferResult inferBoolUnary(const OpAttrs&, Inputs in, int) {
  return std::vector{plainType(DType::Bool, in[0]->shape)};
}

InferResult inferCast(const OpAttrs& attrs, Inputs in, int) {
  return std::vector{plainType(std::get<CastAttrs>(attrs).to, in[0]->shape)};
}

// QuantizeLinear (f32 -> the zero point's u8/i8) and DequantizeLinear (u8/i8/i32 -> f32): a
// scalar scale (per tensor) or one per element of the axis, a zero point of the scale's shape.
InferResult inferQuantize(bool quantize, const OpAttrs& attrs, Inputs in) {
  const TensorType &x = *in[0], &scale = *in[1], &zp = *in[2];
  int64_t axis = std::get<QuantAttrs>(attrs).axis;
  if (scale.dtype != DType::F32) return makeError("the scale must be f32");
  if (scale.shape.rank() > 1) return makeError("the scale must be a scalar or 1-d (per axis)");
  if (scale.shape.rank() == 1 &&
      (axis < 0 || axis >= x.shape.rank() || scale.shape[0] != x.shape[axis]))
    return makeError("a per-axis scale needs one element per index of axis ", axis, " of ",
                     x.shape.toString());
  if (zp.shape != scale.shape) return makeError("the zero point must have the scale's shape");
  if (quantize) {
    if (x.dtype != DType::F32) return makeError("QuantizeLinear input must be f32");
    if (zp.dtype != DType::U8 && zp.dtype != DType::I8)
      return makeError("the zero point must be u8 or i8 (", dtypeName(zp.dtype),
                       " is not supported)");
    return std::vector{plainType(zp.dtype, x.shape)};
  }
  if (x.dtype != DType::U8 && x.dtype != DType::I8 && x.dtype != DType::I32)
    return makeError("DequantizeLinear input must be u8, i8 or i32 (", dtypeName(x.dtype),
                     " is not supported)");
  if (zp.dtype != x.dtype) return makeError("the zero point must have the input's type");
  return std::vector{plainType(DType::F32, x.shape)};
}

InferResult inferQuantizeLinear(const OpAttrs& attrs, Inputs in, int) {
  return inferQuantize(true, attrs, in);
}
InferResult inferDequantizeLinear(const OpAttrs& attrs, Inputs in, int) {
  return inferQuantize(false, attrs, in);
}

Expected<Shape> broadcastAll(Inputs in) {
  Shape out;
  bool first = true;
  for (const TensorType* t : in) {
    if (!t) continue;
    if (first) {
      out = t->shape;
      first = false;
      continue;
    }
    TUNEC_ASSIGN_OR_RETURN(out, broadcastShapes(out, t->shape));
  }
  return out;
}

Status checkSameDType(Inputs in, size_t from, size_t to) {
  for (size_t i = from + 1; i < to && i < in.size(); ++i)
    if (in[i] && in[from] && in[i]->dtype != in[from]->dtype)
      return makeError("inputs have different element types ", dtypeName(in[from]->dtype), " and ",
                       dtypeName(in[i]->dtype));
  return {};
}

InferResult inferBroadcast(const OpAttrs&, Inputs in, int) {
  TUNEC_TRY(checkSameDType(in, 0, in.size()));
  TUNEC_ASSIGN_OR_RETURN(Shape shape, broadcastAll(in));
  return std::vector{plainType(in[0]->dtype, shape)};
}

// Pow: the exponent may have another type; the result has the base's type.
InferResult inferBroadcastFirstType(const OpAttrs&, Inputs in, int) {
  TUNEC_ASSIGN_OR_RETURN(Shape shape, broadcastAll(in));
  return std::vector{plainType(in[0]->dtype, shape)};
}

InferResult inferCompare(const OpAttrs&, Inputs in, int) {
  TUNEC_TRY(checkSameDType(in, 0, in.size()));
  TUNEC_ASSIGN_OR_RETURN(Shape shape, broadcastAll(in));
  return std::vector{plainType(DType::Bool, shape)};
}

InferResult inferWhere(const OpAttrs&, Inputs in, int) {
  if (in[0]->dtype != DType::Bool)
    return makeError("condition must be bool, not ", dtypeName(in[0]->dtype));
  TUNEC_TRY(checkSameDType(in, 1, 3));
  TUNEC_ASSIGN_OR_RETURN(Shape shape, broadcastAll(in));
  return std::vector{plainType(in[1]->dtype, shape)};
}

// ---- heavy ops -----------------------------------------------------------------------------

InferResult inferConv(const OpAttrs& attrs, Inputs in, int) {
  const auto& a = std::get<ConvAttrs>(attrs);
  const Shape& x = in[0]->shape;
  const Shape& w = in[1]->shape;
  size_t spatial = a.kernel.size();
  if (x.rank() < 3 || static_cast<size_t>(x.rank()) != spatial + 2 || w.rank() != x.rank())
    return makeError("input ", x.toString(), " and weight ", w.toString(), " do not fit a ",
                     spatial, "-d convolution");
  if (a.group <= 0 || x[1] % a.group != 0 || w[0] % a.group != 0)
    return makeError("group ", a.group, " does not divide input channels ", x[1],
                     " and output channels ", w[0]);
  if (w[1] * a.group != x[1])
    return makeError("weight ", w.toString(), " expects ", w[1] * a.group,
                     " input channels but the input ", x.toString(), " has ", x[1]);
  if (in.size() > 2 && in[2] && (in[2]->shape.rank() != 1 || in[2]->shape[0] != w[0]))
    return makeError("bias ", in[2]->shape.toString(), " must have ", w[0], " elements");
  TUNEC_TRY(checkSameDType(in, 0, in.size()));
  for (int d = 1; d < x.rank(); ++d)
    if (!x.dim(d).isStatic())
      return makeError("input ", x.toString(), " has a symbolic dimension ", d,
                       ": a convolution takes a symbolic batch only");
  std::vector<Dim> out = {x.dim(0), Dim(w[0])};
  for (size_t i = 0; i < spatial; ++i) {
    int d = static_cast<int>(i) + 2;
    if (w[d] != a.kernel[i])
      return makeError("kernel_shape ", dimsToString(a.kernel), " does not match weight ",
                       w.toString());
    int64_t o = slidingOutputSize(x[d], a.kernel[i], a.strides[i], a.pads[i], a.pads[i + spatial],
                                  a.dilations[i], false);
    if (o <= 0)
      return makeError("output spatial size ", o, " is not positive for input ", x.toString());
    out.push_back(Dim(o));
  }
  return std::vector{plainType(in[0]->dtype, Shape(out))};
}

InferResult inferGemm(const OpAttrs& attrs, Inputs in, int) {
  const auto& a = std::get<GemmAttrs>(attrs);
  const Shape& sa = in[0]->shape;
  const Shape& sb = in[1]->shape;
  if (sa.rank() != 2 || sb.rank() != 2)
    return makeError("A ", sa.toString(), " and B ", sb.toString(), " must be 2-d");
  Dim m = sa.dim(a.transA ? 1 : 0), k = sa.dim(a.transA ? 0 : 1);
  Dim kb = sb.dim(a.transB ? 1 : 0), n = sb.dim(a.transB ? 0 : 1);
  if (k != kb)
    return makeError("inner dimensions differ: A ", sa.toString(),
                     (a.transA ? " (transposed)" : ""), ", B ", sb.toString(),
                     (a.transB ? " (transposed)" : ""));
  TUNEC_TRY(checkSameDType(in, 0, in.size()));
  Shape out(std::vector<Dim>{m, n});
  if (in.size() > 2 && in[2]) {
    auto b = broadcastShapes(in[2]->shape, out);
    if (!b || !(*b == out))
      return makeError("C ", in[2]->shape.toString(), " does not broadcast to ", out.toString());
  }
  return std::vector{plainType(in[0]->dtype, out)};
}

InferResult inferMatMul(const OpAttrs&, Inputs in, int) {
  Shape a = in[0]->shape, b = in[1]->shape;
  if (a.rank() == 0 || b.rank() == 0) return makeError("operands must not be scalars");
  TUNEC_TRY(checkSameDType(in, 0, 2));
  bool aVec = a.rank() == 1, bVec = b.rank() == 1;
  std::vector<Dim> da = a.symbolicDims(), db = b.symbolicDims();
  if (aVec) da.insert(da.begin(), Dim(1));
  if (bVec) db.push_back(Dim(1));
  if (da[da.size() - 1] != db[db.size() - 2])
    return makeError("inner dimensions differ: ", in[0]->shape.toString(), " x ",
                     in[1]->shape.toString());
  Shape batchA(std::vector<Dim>(da.begin(), da.end() - 2));
  Shape batchB(std::vector<Dim>(db.begin(), db.end() - 2));
  TUNEC_ASSIGN_OR_RETURN(Shape batch, broadcastShapes(batchA, batchB));
  std::vector<Dim> out = batch.symbolicDims();
  if (!aVec) out.push_back(da[da.size() - 2]);
  if (!bVec) out.push_back(db[db.size() - 1]);
  return std::vector{plainType(in[0]->dtype, Shape(out))};
}

// A [..., K] times weights given as codes [N, K] (u8, below 2^bits), scales and zero points
// [N, blocks of K] (f32): [..., N] f32.
InferResult inferMatMulNBits(const OpAttrs& attrs, Inputs in, int) {
  const auto& q = std::get<BlockQuantAttrs>(attrs);
  const Shape& a = in[0]->shape;
  const Shape& codes = in[1]->shape;
  if (in[0]->dtype != DType::F32 || in[1]->dtype != DType::U8 || in[2]->dtype != DType::F32 ||
      in[3]->dtype != DType::F32)
    return makeError("MatMulNBits takes f32 A, u8 codes, f32 scales and zero points");
  if (q.bits < 1 || q.bits > 8 || q.block < 1)
    return makeError("bits ", q.bits, " and block ", q.block, " are out of range");
  if (a.rank() < 1 || codes.rank() != 2 || a.dim(a.rank() - 1) != Dim(codes[1]))
    return makeError("A ", a.toString(), " and codes ", codes.toString(),
                     " are not [..., K] and [N, K]");
  const int64_t blocks = (codes[1] + q.block - 1) / q.block;
  for (int i = 2; i < 4; ++i)
    if (!(in[static_cast<size_t>(i)]->shape == Shape{codes[0], blocks}))
      return makeError("input ", i, " is ", in[static_cast<size_t>(i)]->shape.toString(),
                       ", expected ", codes[0], " x ", blocks);
  std::vector<Dim> out = a.symbolicDims();
  out.back() = Dim(codes[0]);
  return std::vector{plainType(DType::F32, Shape(out))};
}

// u8 A x s8 B with MatMul's shapes: the integer sums, as f32 (passes/lower_quantized_layers.cpp).
InferResult inferIntegerMatMul(const OpAttrs& attrs, Inputs in, int numOutputs) {
  if (in[0]->dtype != DType::U8 || in[1]->dtype != DType::I8)
    return makeError("IntegerMatMul multiplies a u8 A by an s8 B, not ", dtypeName(in[0]->dtype),
                     " by ", dtypeName(in[1]->dtype));
  TensorType a = *in[0], b = *in[1];
  a.dtype = b.dtype = DType::F32;
  const TensorType* asF32[] = {&a, &b};
  return inferMatMul(attrs, Inputs(asF32, 2), numOutputs);
}

// u8 X x s8 W with Conv's shapes: the integer sums over windows whose padding reads padValue,
// as f32 (passes/lower_quantized_layers.cpp).
InferResult inferIntegerConv(const OpAttrs& attrs, Inputs in, int numOutputs) {
  if (in[0]->dtype != DType::U8 || in[1]->dtype != DType::I8)
    return makeError("IntegerConv convolves a u8 input with s8 weights, not ",
                     dtypeName(in[0]->dtype), " with ", dtypeName(in[1]->dtype));
  if (const int64_t pad = std::get<ConvAttrs>(attrs).padValue; pad < 0 || pad > 255)
    return makeError("IntegerConv's pad_value ", pad, " is not a u8");
  TensorType x = *in[0], w = *in[1];
  x.dtype = w.dtype = DType::F32;
  const TensorType* asF32[] = {&x, &w};
  return inferConv(attrs, Inputs(asF32, 2), numOutputs);
}

// ---- normalization, pooling, reduction ------------------------------------------------------

InferResult inferSoftmax(const OpAttrs& attrs, Inputs in, int) {
  TUNEC_TRY(normalizeAxis(std::get<SoftmaxAttrs>(attrs).axis, in[0]->shape.rank()).status());
  return std::vector{plainType(in[0]->dtype, in[0]->shape)};
}

InferResult inferLayerNorm(const OpAttrs& attrs, Inputs in, int numOutputs) {
  const Shape& x = in[0]->shape;
  TUNEC_ASSIGN_OR_RETURN(int64_t axis, normalizeAxis(std::get<NormAttrs>(attrs).axis, x.rank()));
  std::vector<Dim> all = x.symbolicDims();
  std::vector<Dim> norm(all.begin() + axis, all.end());
  for (size_t i = 1; i < 3 && i < in.size(); ++i) {
    if (!in[i]) continue;
    auto b = broadcastShapes(in[i]->shape, Shape(norm));
    if (!b || !(*b == Shape(norm)))
      return makeError("scale/bias ", in[i]->shape.toString(), " does not broadcast to ",
                       Shape(norm).toString());
  }
  std::vector<TensorType> out{plainType(in[0]->dtype, x)};
  std::vector<Dim> stat = all;
  for (size_t i = static_cast<size_t>(axis); i < stat.size(); ++i) stat[i] = Dim(1);
  for (int i = 1; i < numOutputs; ++i) out.push_back(plainType(DType::F32, Shape(stat)));
  return out;
}

InferResult inferChannelNorm(const OpAttrs&, Inputs in, int) {
  const Shape& x = in[0]->shape;
  if (x.rank() < 2) return makeError("input ", x.toString(), " needs a channel dimension");
  for (size_t i = 1; i < in.size(); ++i)
    if (in[i] && (in[i]->shape.rank() != 1 || in[i]->shape[0] != x[1]))
      return makeError("per-channel input ", i, " has shape ", in[i]->shape.toString(),
                       ", expected ", x[1], " elements");
  return std::vector{plainType(in[0]->dtype, x)};
}

InferResult inferPool(const OpAttrs& attrs, Inputs in, int numOutputs) {
  const auto& a = std::get<PoolAttrs>(attrs);
  const Shape& x = in[0]->shape;
  size_t spatial = a.kernel.size();
  if (static_cast<size_t>(x.rank()) != spatial + 2)
    return makeError("input ", x.toString(), " does not fit a ", spatial, "-d window");
  for (int d = 1; d < x.rank(); ++d)
    if (!x.dim(d).isStatic())
      return makeError("input ", x.toString(), " has a symbolic dimension ", d,
                       ": a pool takes a symbolic batch only");
  std::vector<Dim> out = {x.dim(0), x.dim(1)};
  for (size_t i = 0; i < spatial; ++i) {
    int64_t o = slidingOutputSize(x[static_cast<int>(i) + 2], a.kernel[i], a.strides[i], a.pads[i],
                                  a.pads[i + spatial], a.dilations[i], a.ceilMode);
    if (o <= 0) return makeError("output size ", o, " is not positive for input ", x.toString());
    out.push_back(Dim(o));
  }
  std::vector<TensorType> result{plainType(in[0]->dtype, Shape(out))};
  if (numOutputs > 1) result.push_back(plainType(DType::I64, Shape(out)));
  return result;
}

InferResult inferGlobalPool(const OpAttrs&, Inputs in, int) {
  std::vector<Dim> out = in[0]->shape.symbolicDims();
  if (out.size() < 3) return makeError("input ", in[0]->shape.toString(), " has no spatial dims");
  for (size_t i = 2; i < out.size(); ++i) out[i] = Dim(1);
  return std::vector{plainType(in[0]->dtype, Shape(out))};
}

Expected<Shape> reducedShape(const Shape& x, const std::vector<int64_t>& axes, bool keepDims) {
  std::vector<bool> reduce(static_cast<size_t>(x.rank()), axes.empty());
  for (int64_t a : axes) {
    TUNEC_ASSIGN_OR_RETURN(int64_t axis, normalizeDimAxis(a, x.rank()));
    reduce[static_cast<size_t>(axis)] = true;
  }
  std::vector<Dim> out;
  for (int i = 0; i < x.rank(); ++i) {
    if (!reduce[static_cast<size_t>(i)])
      out.push_back(x.dim(i));
    else if (keepDims)
      out.push_back(Dim(1));
  }
  return Shape(out);
}

InferResult inferReduce(const OpAttrs& attrs, Inputs in, int) {
  const auto& a = std::get<ReduceAttrs>(attrs);
  TUNEC_ASSIGN_OR_RETURN(Shape out, reducedShape(in[0]->shape, a.axes, a.keepDims));
  return std::vector{plainType(in[0]->dtype, out)};
}

InferResult inferArgReduce(const OpAttrs& attrs, Inputs in, int) {
  const auto& a = std::get<ArgReduceAttrs>(attrs);
  TUNEC_ASSIGN_OR_RETURN(Shape out, reducedShape(in[0]->shape, {a.axis}, a.keepDims));
  return std::vector{plainType(DType::I64, out)};
}

// ---- data movement --------------------------------------------------------------------------

InferResult inferReshape(const OpAttrs& attrs, Inputs in, int) {
  Shape out(std::get<ReshapeAttrs>(attrs).shape);
  auto elements = [](const Shape& s) {
    DimExpr n(1);
    for (const Dim& d : s.symbolicDims()) n = n * d.expr;
    return n;
  };
  if (!in[0]->shape.isStatic() || !out.isStatic()) {
    if (!(elements(out) == elements(in[0]->shape)))
      return makeError("cannot reshape ", in[0]->shape.toString(), " (",
                       elements(in[0]->shape).toString(), " elements) to ", out.toString(), " (",
                       elements(out).toString(), " elements)");
    return std::vector{plainType(in[0]->dtype, out)};
  }
  if (out.numel() != in[0]->shape.numel())
    return makeError("cannot reshape ", in[0]->shape.toString(), " (", in[0]->shape.numel(),
                     " elements) to ", out.toString(), " (", out.numel(), " elements)");
  return std::vector{plainType(in[0]->dtype, out)};
}

InferResult inferFlatten(const OpAttrs& attrs, Inputs in, int) {
  const Shape& x = in[0]->shape;
  int64_t axis = std::get<AxisAttrs>(attrs).axis;
  if (axis < 0) axis += x.rank();
  if (axis < 0 || axis > x.rank())
    return makeError("axis ", axis, " out of range for rank ", x.rank());
  Dim outer(1), inner(1);
  for (int i = 0; i < x.rank(); ++i) {
    Dim& part = i < axis ? outer : inner;
    part = part * x.dim(i);
  }
  return std::vector{plainType(in[0]->dtype, Shape(std::vector<Dim>{outer, inner}))};
}

InferResult inferSqueeze(const OpAttrs& attrs, Inputs in, int) {
  const Shape& x = in[0]->shape;
  const auto& axes = std::get<AxesAttrs>(attrs).axes;
  std::vector<bool> drop(static_cast<size_t>(x.rank()), false);
  for (int64_t a : axes) {
    TUNEC_ASSIGN_OR_RETURN(int64_t axis, normalizeDimAxis(a, x.rank()));
    if (x.dim(static_cast<int>(axis)) != Dim(1))
      return makeError("cannot squeeze axis ", axis, " of size ",
                       x.dim(static_cast<int>(axis)).toString());
    drop[static_cast<size_t>(axis)] = true;
  }
  std::vector<Dim> out;
  for (int i = 0; i < x.rank(); ++i) {
    bool d = axes.empty() ? x.dim(i) == Dim(1) : drop[static_cast<size_t>(i)];
    if (!d) out.push_back(x.dim(i));
  }
  return std::vector{plainType(in[0]->dtype, Shape(out))};
}

InferResult inferUnsqueeze(const OpAttrs& attrs, Inputs in, int) {
  const Shape& x = in[0]->shape;
  const auto& axes = std::get<AxesAttrs>(attrs).axes;
  int rank = x.rank() + static_cast<int>(axes.size());
  std::vector<bool> inserted(static_cast<size_t>(rank), false);
  for (int64_t a : axes) {
    TUNEC_ASSIGN_OR_RETURN(int64_t axis, normalizeAxis(a, rank));
    if (inserted[static_cast<size_t>(axis)]) return makeError("axis ", a, " repeated");
    inserted[static_cast<size_t>(axis)] = true;
  }
  std::vector<Dim> out;
  int src = 0;
  for (int i = 0; i < rank; ++i)
    out.push_back(inserted[static_cast<size_t>(i)] ? Dim(1) : x.dim(src++));
  return std::vector{plainType(in[0]->dtype, Shape(out))};
}

InferResult inferTranspose(const OpAttrs& attrs, Inputs in, int) {
  const Shape& x = in[0]->shape;
  const auto& perm = std::get<TransposeAttrs>(attrs).perm;
  if (static_cast<int>(perm.size()) != x.rank())
    return makeError("perm ", dimsToString(perm), " does not match rank ", x.rank());
  std::vector<bool> seen(perm.size(), false);
  std::vector<Dim> out;
  for (int64_t p : perm) {
    if (p < 0 || p >= x.rank() || seen[static_cast<size_t>(p)])
      return makeError("perm ", dimsToString(perm), " is not a permutation");
    seen[static_cast<size_t>(p)] = true;
    out.push_back(x.dim(static_cast<int>(p)));
  }
  return std::vector{plainType(in[0]->dtype, Shape(out))};
}

InferResult inferConcat(const OpAttrs& attrs, Inputs in, int) {
  const Shape& first = in[0]->shape;
  TUNEC_ASSIGN_OR_RETURN(int64_t axis,
                         normalizeDimAxis(std::get<AxisAttrs>(attrs).axis, first.rank()));
  TUNEC_TRY(checkSameDType(in, 0, in.size()));
  std::vector<Dim> out = first.symbolicDims();
  out[static_cast<size_t>(axis)] = Dim(0);
  for (const TensorType* t : in) {
    if (t->shape.rank() != first.rank()) return makeError("inputs have different ranks");
    for (int i = 0; i < first.rank(); ++i)
      if (i != axis && t->shape.dim(i) != first.dim(i))
        return makeError("inputs ", first.toString(), " and ", t->shape.toString(),
                         " differ outside axis ", axis);
    out[static_cast<size_t>(axis)] =
        out[static_cast<size_t>(axis)] + t->shape.dim(static_cast<int>(axis));
  }
  return std::vector{plainType(in[0]->dtype, Shape(out))};
}

InferResult inferSplit(const OpAttrs& attrs, Inputs in, int numOutputs) {
  const auto& a = std::get<SplitAttrs>(attrs);
  const Shape& x = in[0]->shape;
  TUNEC_ASSIGN_OR_RETURN(int64_t axis, normalizeDimAxis(a.axis, x.rank()));
  if (static_cast<int>(a.sizes.size()) != numOutputs)
    return makeError(a.sizes.size(), " split sizes for ", numOutputs, " outputs");
  int64_t total = std::accumulate(a.sizes.begin(), a.sizes.end(), int64_t{0});
  if (total != x[static_cast<int>(axis)])
    return makeError("split sizes ", dimsToString(a.sizes), " do not sum to ",
                     x[static_cast<int>(axis)]);
  std::vector<TensorType> out;
  for (int64_t s : a.sizes) {
    std::vector<int64_t> d = x.dims();
    d[static_cast<size_t>(axis)] = s;
    out.push_back(plainType(in[0]->dtype, Shape(d)));
  }
  return out;
}

InferResult inferSlice(const OpAttrs& attrs, Inputs in, int) {
  const auto& a = std::get<SliceAttrs>(attrs);
  if (static_cast<int>(a.counts.size()) != in[0]->shape.rank() ||
      (a.startsAtRunTime() && a.runTimeStarts.size() != a.counts.size()))
    return makeError("slice has ", a.counts.size(), " dims (", a.runTimeStarts.size(),
                     " run-time starts) for rank ", in[0]->shape.rank());
  if (!a.extents.empty()) return std::vector{plainType(in[0]->dtype, Shape(a.extents))};
  return std::vector{plainType(in[0]->dtype, Shape(a.counts))};
}

InferResult inferGather(const OpAttrs& attrs, Inputs in, int) {
  const Shape& x = in[0]->shape;
  TUNEC_ASSIGN_OR_RETURN(int64_t axis, normalizeDimAxis(std::get<AxisAttrs>(attrs).axis, x.rank()));
  if (!isInteger(in[1]->dtype))
    return makeError("indices must be integers, not ", dtypeName(in[1]->dtype));
  if (!x.dim(static_cast<int>(axis)).isStatic())
    return makeError("the gathered axis ", axis, " of ", x.toString(), " is symbolic");
  std::vector<Dim> out;
  for (int i = 0; i < axis; ++i) out.push_back(x.dim(i));
  for (const Dim& d : in[1]->shape.symbolicDims()) out.push_back(d);
  for (int i = static_cast<int>(axis) + 1; i < x.rank(); ++i) out.push_back(x.dim(i));
  return std::vector{plainType(in[0]->dtype, Shape(out))};
}

InferResult inferGatherElements(const OpAttrs& attrs, Inputs in, int) {
  const Shape& x = in[0]->shape;
  TUNEC_TRY(normalizeAxis(std::get<AxisAttrs>(attrs).axis, x.rank()).status());
  if (in[1]->shape.rank() != x.rank()) return makeError("indices rank differs from data rank");
  return std::vector{plainType(in[0]->dtype, in[1]->shape)};
}

InferResult inferExpand(const OpAttrs& attrs, Inputs in, int) {
  TUNEC_ASSIGN_OR_RETURN(Shape out,
                         broadcastShapes(in[0]->shape, Shape(std::get<ReshapeAttrs>(attrs).shape)));
  return std::vector{plainType(in[0]->dtype, out)};
}

InferResult inferTile(const OpAttrs& attrs, Inputs in, int) {
  const auto& r = std::get<TileAttrs>(attrs).repeats;
  if (static_cast<int>(r.size()) != in[0]->shape.rank())
    return makeError("repeats ", dimsToString(r), " do not match rank ", in[0]->shape.rank());
  std::vector<int64_t> out = in[0]->shape.dims();
  for (size_t i = 0; i < out.size(); ++i) out[i] *= r[i];
  return std::vector{plainType(in[0]->dtype, Shape(out))};
}

InferResult inferPad(const OpAttrs& attrs, Inputs in, int) {
  const auto& p = std::get<PadAttrs>(attrs).pads;
  const Shape& x = in[0]->shape;
  if (static_cast<int>(p.size()) != 2 * x.rank())
    return makeError("pads ", dimsToString(p), " do not have 2 x rank ", x.rank(), " entries");
  std::vector<int64_t> out = x.dims();
  for (size_t i = 0; i < out.size(); ++i) {
    out[i] += p[i] + p[i + out.size()];
    if (out[i] < 0) return makeError("pads ", dimsToString(p), " make dim ", i, " negative");
  }
  return std::vector{plainType(in[0]->dtype, Shape(out))};
}

InferResult inferConstantOfShape(const OpAttrs& attrs, Inputs, int) {
  const auto& a = std::get<ConstantOfShapeAttrs>(attrs);
  return std::vector{plainType(a.dtype, Shape(a.shape))};
}

InferResult inferTrilu(const OpAttrs&, Inputs in, int) {
  if (in[0]->shape.rank() < 2) return makeError("Trilu needs an input of rank 2 or more");
  return std::vector{plainType(in[0]->dtype, in[0]->shape)};
}

InferResult inferResize(const OpAttrs& attrs, Inputs in, int) {
  const auto& a = std::get<ResizeAttrs>(attrs);
  const Shape& x = in[0]->shape;
  if (static_cast<int>(a.sizes.size()) != x.rank() || a.scales.size() != a.sizes.size())
    return makeError("Resize to ", dimsToString(a.sizes), " does not match rank ", x.rank());
  for (size_t i = 0; i < a.sizes.size(); ++i)
    if (a.sizes[i] < 0 || !(a.scales[i] > 0) || !std::isfinite(a.scales[i]))
      return makeError("Resize: axis ", i, " has size ", a.sizes[i], " and scale ", a.scales[i]);
  return std::vector{plainType(in[0]->dtype, Shape(a.sizes))};
}

InferResult inferDepthToSpace(const OpAttrs& attrs, Inputs in, int, bool toSpace) {
  const Shape& x = in[0]->shape;
  int64_t b = std::get<DepthToSpaceAttrs>(attrs).blockSize;
  if (x.rank() != 4 || b <= 0) return makeError("needs a 4-d input and a positive block size");
  if (toSpace) {
    if (x[1] % (b * b))
      return makeError("channels ", x[1], " not divisible by blocksize^2 ", b * b);
    return std::vector{plainType(in[0]->dtype, Shape{x[0], x[1] / (b * b), x[2] * b, x[3] * b})};
  }
  if (x[2] % b || x[3] % b)
    return makeError("spatial dims of ", x.toString(), " not divisible by ", b);
  return std::vector{plainType(in[0]->dtype, Shape{x[0], x[1] * b * b, x[2] / b, x[3] / b})};
}
InferResult inferD2S(const OpAttrs& a, Inputs in, int n) {
  return inferDepthToSpace(a, in, n, true);
}
InferResult inferS2D(const OpAttrs& a, Inputs in, int n) {
  return inferDepthToSpace(a, in, n, false);
}

// ---- FLOP counts ----------------------------------------------------------------------------

int64_t outputElements(const Node& node, const Graph& graph) {
  return graph.value(node.outputs[0]).type.shape.numel();
}
int64_t inputElements(const Node& node, const Graph& graph) {
  return graph.value(node.inputs[0]).type.shape.numel();
}
int64_t noFlops(const Node&, const Graph&) {
  return 0;
}

int64_t convFlops(const Node& node, const Graph& graph) {
  const Shape& w = graph.value(node.inputs[1]).type.shape;
  int64_t perOutput = 1;
  for (int i = 1; i < w.rank(); ++i) perOutput *= w[i];
  return 2 * outputElements(node, graph) * perOutput;
}

int64_t gemmFlops(const Node& node, const Graph& graph) {
  const auto& a = std::get<GemmAttrs>(node.attrs);
  const Shape& sa = graph.value(node.inputs[0]).type.shape;
  int64_t k = a.transA ? sa[0] : sa[1];
  return 2 * outputElements(node, graph) * k;
}

int64_t matmulFlops(const Node& node, const Graph& graph) {
  const Shape& sa = graph.value(node.inputs[0]).type.shape;
  return 2 * outputElements(node, graph) * sa[sa.rank() - 1];
}

int64_t poolFlops(const Node& node, const Graph& graph) {
  const auto& a = std::get<PoolAttrs>(node.attrs);
  int64_t window = 1;
  for (int64_t k : a.kernel) window *= k;
  return outputElements(node, graph) * window;
}

int64_t matmulNBitsFlops(const Node& node, const Graph& graph) {
  const Shape& codes = graph.value(node.inputs[1]).type.shape;
  return 2 * outputElements(node, graph) * codes[1];
}

// The inference functions that carry symbolic dimensions (Shape::dim) from their inputs to their
// outputs; the others see only the bounds, so a symbolic input to them is an error, never a
// shape silently fixed at its bound.
bool carriesSymbols(decltype(OpInfo::infer) infer) {
  static const decltype(OpInfo::infer) kCarriers[] = {inferSameAsFirst,
                                                      inferBoolUnary,
                                                      inferCast,
                                                      inferQuantizeLinear,
                                                      inferDequantizeLinear,
                                                      inferBroadcast,
                                                      inferBroadcastFirstType,
                                                      inferCompare,
                                                      inferWhere,
                                                      inferConv,
                                                      inferGemm,
                                                      inferMatMul,
                                                      inferIntegerMatMul,
                                                      inferIntegerConv,
                                                      inferSoftmax,
                                                      inferLayerNorm,
                                                      inferChannelNorm,
                                                      inferPool,
                                                      inferGlobalPool,
                                                      inferReduce,
                                                      inferArgReduce,
                                                      inferFlatten,
                                                      inferSqueeze,
                                                      inferUnsqueeze,
                                                      inferTranspose,
                                                      inferConcat,
                                                      inferGather,
                                                      inferReshape,
                                                      inferExpand,
                                                      inferMatMulNBits,
                                                      inferTrilu,
                                                      inferSlice};
  return std::find(std::begin(kCarriers), std::end(kCarriers), infer) != std::end(kCarriers);
}

// ---- the table --------------------------------------------------------------------------------

struct Row {
  MappingType mapping;
  int minIn, maxIn, minOut, maxOut;
  decltype(OpInfo::infer) infer;
  decltype(OpInfo::flops) flops;
};

constexpr auto O2O = MappingType::OneToOne;
constexpr auto O2M = MappingType::OneToMany;
constexpr auto M2M = MappingType::ManyToMany;
constexpr auto REORG = MappingType::Reorganize;
constexpr auto SHUF = MappingType::Shuffle;

Row rowFor(OpKind kind) {
  const Row unary{O2O, 1, 1, 1, 1, inferSameAsFirst, outputElements};
  const Row binary{O2O, 2, 2, 1, 1, inferBroadcast, outputElements};
  const Row compare{O2O, 2, 2, 1, 1, inferCompare, outputElements};
  const Row reduce{M2M, 1, 1, 1, 1, inferReduce, inputElements};
  switch (kind) {
  case OpKind::IsInf:
  case OpKind::IsNaN:
    return {O2O, 1, 1, 1, 1, inferBoolUnary, outputElements};
  case OpKind::Cast:
    return {O2O, 1, 1, 1, 1, inferCast, noFlops};
  case OpKind::QuantizeLinear:
    return {O2O, 3, 3, 1, 1, inferQuantizeLinear, outputElements};
  case OpKind::DequantizeLinear:
    return {O2O, 3, 3, 1, 1, inferDequantizeLinear, outputElements};
  case OpKind::Identity:
    return {O2O, 1, 1, 1, 1, inferSameAsFirst, noFlops};
  case OpKind::Dropout:
    return {O2O, 1, 3, 1, 1, inferSameAsFirst, noFlops};
  case OpKind::Clip:
    return unary;
  case OpKind::Pow:
    return {O2O, 2, 2, 1, 1, inferBroadcastFirstType, outputElements};
  case OpKind::Add:
  case OpKind::Sub:
  case OpKind::Mul:
  case OpKind::Div:
  case OpKind::Mod:
  case OpKind::PRelu:
  case OpKind::BitwiseAnd:
  case OpKind::BitwiseOr:
  case OpKind::BitwiseXor:
    return binary;
  case OpKind::Max:
  case OpKind::Min:
  case OpKind::Sum:
  case OpKind::Mean:
    return {O2O, 1, -1, 1, 1, inferBroadcast, outputElements};
  case OpKind::Equal:
  case OpKind::Less:
  case OpKind::LessOrEqual:
  case OpKind::Greater:
  case OpKind::GreaterOrEqual:
  case OpKind::And:
  case OpKind::Or:
  case OpKind::Xor:
    return compare;
  case OpKind::Where:
    return {O2O, 3, 3, 1, 1, inferWhere, outputElements};
  case OpKind::Conv:
    return {M2M, 2, 3, 1, 1, inferConv, convFlops};
  case OpKind::Gemm:
    return {M2M, 2, 3, 1, 1, inferGemm, gemmFlops};
  case OpKind::MatMul:
    return {M2M, 2, 2, 1, 1, inferMatMul, matmulFlops};
  case OpKind::MatMulNBits:
    return {M2M, 4, 4, 1, 1, inferMatMulNBits, matmulNBitsFlops};
  case OpKind::IntegerMatMul:
    return {M2M, 2, 2, 1, 1, inferIntegerMatMul, matmulFlops};
  case OpKind::IntegerConv:
    return {M2M, 2, 2, 1, 1, inferIntegerConv, convFlops};
  case OpKind::Softmax:
  case OpKind::LogSoftmax:
  case OpKind::Hardmax:
    return {M2M, 1, 1, 1, 1, inferSoftmax, inputElements};
  case OpKind::LayerNormalization:
    return {M2M, 2, 3, 1, 3, inferLayerNorm, inputElements};
  case OpKind::RMSNormalization:
    return {M2M, 2, 2, 1, 1, inferLayerNorm, inputElements};
  case OpKind::BatchNormalization:
    return {O2M, 5, 5, 1, 1, inferChannelNorm, inputElements};
  case OpKind::InstanceNormalization:
    return {M2M, 3, 3, 1, 1, inferChannelNorm, inputElements};
  case OpKind::MaxPool:
    return {M2M, 1, 1, 1, 2, inferPool, poolFlops};
  case OpKind::AveragePool:
  case OpKind::LpPool:
    return {M2M, 1, 1, 1, 1, inferPool, poolFlops};
  case OpKind::GlobalAveragePool:
  case OpKind::GlobalMaxPool:
    return {M2M, 1, 1, 1, 1, inferGlobalPool, inputElements};
  case OpKind::ReduceMean:
  case OpKind::ReduceSum:
  case OpKind::ReduceMax:
  case OpKind::ReduceMin:
  case OpKind::ReduceProd:
  case OpKind::ReduceL1:
  case OpKind::ReduceL2:
  case OpKind::ReduceSumSquare:
  case OpKind::ReduceLogSum:
  case OpKind::ReduceLogSumExp:
    return reduce;
  case OpKind::ArgMax:
  case OpKind::ArgMin:
    return {M2M, 1, 1, 1, 1, inferArgReduce, inputElements};
  case OpKind::Reshape:
    return {REORG, 1, 1, 1, 1, inferReshape, noFlops};
  case OpKind::Flatten:
    return {REORG, 1, 1, 1, 1, inferFlatten, noFlops};
  case OpKind::Squeeze:
    return {REORG, 1, 1, 1, 1, inferSqueeze, noFlops};
  case OpKind::Unsqueeze:
    return {REORG, 1, 1, 1, 1, inferUnsqueeze, noFlops};
  case OpKind::Transpose:
    return {SHUF, 1, 1, 1, 1, inferTranspose, noFlops};
  case OpKind::Concat:
    return {REORG, 1, -1, 1, 1, inferConcat, noFlops};
  case OpKind::Split:
    return {REORG, 1, 1, 1, -1, inferSplit, noFlops};
  case OpKind::Slice:
    return {REORG, 1, 1, 1, 1, inferSlice, noFlops};
  case OpKind::Gather:
    return {SHUF, 2, 2, 1, 1, inferGather, noFlops};
  case OpKind::GatherElements:
    return {SHUF, 2, 2, 1, 1, inferGatherElements, noFlops};
  case OpKind::Expand:
    return {O2M, 1, 1, 1, 1, inferExpand, noFlops};
  case OpKind::Tile:
    return {O2M, 1, 1, 1, 1, inferTile, noFlops};
  case OpKind::Pad:
    return {REORG, 1, 1, 1, 1, inferPad, noFlops};
  case OpKind::ConstantOfShape:
    return {O2M, 0, 0, 1, 1, inferConstantOfShape, noFlops};
  case OpKind::DepthToSpace:
    return {SHUF, 1, 1, 1, 1, inferD2S, noFlops};
  case OpKind::Trilu:
    return {REORG, 1, 1, 1, 1, inferTrilu, noFlops};
  case OpKind::SpaceToDepth:
    return {SHUF, 1, 1, 1, 1, inferS2D, noFlops};
  case OpKind::Resize:
    return {M2M, 1, 1, 1, 1, inferResize, outputElements};
  default:
    return unary;
  }
}

std::vector<OpInfo> buildTable() {
  std::vector<OpInfo> table;
  for (int i = 0; i < opKindCount(); ++i) {
    auto kind = static_cast<OpKind>(i);
    Row r = rowFor(kind);
    table.push_back(OpInfo{kind, kOpNames[i], r.mapping, r.minIn, r.maxIn, r.minOut, r.maxOut,
                           r.infer, r.flops});
  }
  return table;
}

} // namespace

int opKindCount() {
  return static_cast<int>(std::size(kOpNames));
}

std::string_view opName(OpKind kind) {
  return kOpNames[static_cast<size_t>(kind)];
}

std::optional<OpKind> findOp(std::string_view name) {
  for (size_t i = 0; i < std::size(kOpNames); ++i)
    if (kOpNames[i] == name) return static_cast<OpKind>(i);
  return std::nullopt;
}

const OpInfo& opInfo(OpKind kind) {
  static const std::vector<OpInfo> table = buildTable();
  return table[static_cast<size_t>(kind)];
}

Expected<std::vector<TensorType>> inferNodeTypes(const Graph& graph, OpKind kind,
                                                 const OpAttrs& attrs,
                                                 std::span<const ValueId> inputs, int numOutputs) {
  const OpInfo& info = opInfo(kind);
  int n = static_cast<int>(inputs.size());
  if (n < info.minInputs || (info.maxInputs >= 0 && n > info.maxInputs))
    return makeError("takes ", info.minInputs, (info.maxInputs == info.minInputs ? "" : " or more"),
                     " inputs, got ", n);
  if (numOutputs < info.minOutputs || (info.maxOutputs >= 0 && numOutputs > info.maxOutputs))
    return makeError("has at most ", info.maxOutputs, " outputs, ", numOutputs, " requested");
  std::vector<const TensorType*> types;
  for (int i = 0; i < n; ++i) {
    ValueId v = inputs[static_cast<size_t>(i)];
    if (v == kNoValue && i < info.minInputs) return makeError("required input ", i, " is missing");
    types.push_back(v == kNoValue ? nullptr : &graph.value(v).type);
  }
  for (size_t i = 0; i < types.size(); ++i)
    if (types[i] && !types[i]->shape.isStatic() && !carriesSymbols(info.infer))
      return makeError("input ", i, " has the symbolic shape ", types[i]->shape.toString(),
                       ", and tunec does not carry symbolic dimensions through ", info.name,
                       " yet: fix them with --input-shape");
  return info.infer(attrs, types, numOutputs);
}

Expected<int64_t> normalizeDimAxis(int64_t axis, int rank) {
  if (rank == 0) return makeError("axis ", axis, " names a dimension, but the input is a scalar");
  return normalizeAxis(axis, rank);
}

Expected<int64_t> normalizeAxis(int64_t axis, int rank) {
  int64_t a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= std::max(rank, 1))
    return makeError("axis ", axis, " is out of range for rank ", rank);
  return a;
}

Expected<Shape> broadcastShapes(const Shape& a, const Shape& b) {
  // A symbolic dimension broadcasts with 1 or with itself: tunec takes a symbol for an extent
  // that is never the 1 that would broadcast (ONNX Runtime's symbolic shapes do the same).
  int rank = std::max(a.rank(), b.rank());
  std::vector<Dim> out(static_cast<size_t>(rank));
  const Dim one(1);
  for (int i = 0; i < rank; ++i) {
    int ia = a.rank() - rank + i, ib = b.rank() - rank + i;
    Dim da = ia >= 0 ? a.dim(ia) : one, db = ib >= 0 ? b.dim(ib) : one;
    if (da != db && da != one && db != one)
      return makeError("shapes ", a.toString(), " and ", b.toString(), " do not broadcast");
    out[static_cast<size_t>(i)] = da == one ? db : da;
  }
  return Shape(out);
}

int64_t slidingOutputSize(int64_t in, int64_t kernel, int64_t stride, int64_t padBegin,
                          int64_t padEnd, int64_t dilation, bool ceilMode) {
  int64_t span = (kernel - 1) * dilation + 1;
  int64_t room = in + padBegin + padEnd - span;
  if (room < 0) return 0;
  int64_t out = (ceilMode ? (room + stride - 1) / stride : room / stride) + 1;
  // With ceil mode the last window must start inside the input or the begin padding.
  if (ceilMode && (out - 1) * stride >= in + padBegin) --out;
  return out;
}

} // namespace tunec
