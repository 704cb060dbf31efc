// One converter per ONNX op: attributes (opset-dependent forms) to typed attributes, constant
// shape-defining inputs to attribute values.
#include "frontend/onnx_ops.h"

#include "frontend/onnx_tensor.h"
#include "ir/op_registry.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <numeric>

namespace tunec::onnx_import {

// ---- AttrReader -------------------------------------------------------------------------------

const onnx::AttributeProto* AttrReader::find(const std::string& name) const {
  read_.insert(name);
  for (const auto& a : node_.attribute())
    if (a.name() == name) return &a;
  return nullptr;
}

bool AttrReader::has(const std::string& name) const {
  return find(name) != nullptr;
}

int64_t AttrReader::getInt(const std::string& name, int64_t fallback) const {
  const auto* a = find(name);
  return a ? a->i() : fallback;
}

float AttrReader::getFloat(const std::string& name, float fallback) const {
  const auto* a = find(name);
  return a ? a->f() : fallback;
}

std::string AttrReader::getString(const std::string& name, const std::string& fallback) const {
  const auto* a = find(name);
  return a ? a->s() : fallback;
}

std::optional<std::vector<int64_t>> AttrReader::getInts(const std::string& name) const {
  const auto* a = find(name);
  if (!a) return std::nullopt;
  return std::vector<int64_t>(a->ints().begin(), a->ints().end());
}

std::optional<std::vector<float>> AttrReader::getFloats(const std::string& name) const {
  const auto* a = find(name);
  if (!a) return std::nullopt;
  return std::vector<float>(a->floats().begin(), a->floats().end());
}

const onnx::TensorProto* AttrReader::getTensor(const std::string& name) const {
  const auto* a = find(name);
  return a && a->has_t() ? &a->t() : nullptr;
}

std::vector<std::string> AttrReader::unread() const {
  std::vector<std::string> names;
  for (const auto& a : node_.attribute())
    if (!read_.count(a.name())) names.push_back(a.name());
  return names;
}

Expected<std::optional<Tensor>> ConvertContext::constantInput(size_t i, const char* role) {
  if (!hasInput(i)) return std::optional<Tensor>();
  Value& v = graph.value(inputs[i]);
  if (v.constant) return std::optional<Tensor>(*v.constant);
  bool isModelInput =
      std::find(graph.inputs().begin(), graph.inputs().end(), inputs[i]) != graph.inputs().end();
  if (isModelInput && options.bindInput) {
    if (auto bound = options.bindInput(v.name)) {
      if (bound->dtype() != v.type.dtype || !(bound->shape() == v.type.shape))
        return makeError("value bound to input '", v.name, "' is ", bound->typeString(),
                         ", expected ", v.type.toString());
      graph.bindInput(inputs[i], *bound);
      return std::optional<Tensor>(*bound);
    }
  }
  return makeError("input '", v.name, "' (the ", role,
                   ") must be a compile-time constant because tunec compiles static shapes; "
                   "export the model with constant shapes (e.g. torch.onnx.export with "
                   "do_constant_folding=True and no dynamic_axes)");
}

bool ConvertContext::onlyCastToFloat() const {
  if (!readers || proto.output_size() == 0) return false;
  auto it = readers->find(proto.output(0));
  if (it == readers->end()) return false;
  for (const onnx::NodeProto* reader : it->second) {
    if (!reader || reader->op_type() != "Cast") return false; // null: a model output
    bool toFloat = false;
    for (const auto& a : reader->attribute())
      toFloat = toFloat || (a.name() == "to" && a.i() == onnx::TensorProto::FLOAT);
    if (!toFloat) return false;
  }
  return !it->second.empty();
}

Expected<std::optional<std::vector<Dim>>> ConvertContext::shapeInput(size_t i, const char* role) {
  if (hasInput(i) && shapeValues)
    if (auto it = shapeValues->find(inputs[i]); it != shapeValues->end())
      return std::optional<std::vector<Dim>>(it->second.elements);
  TUNEC_ASSIGN_OR_RETURN(auto t, constantInput(i, role));
  if (!t) return std::optional<std::vector<Dim>>();
  std::vector<Dim> dims;
  for (int64_t k = 0; k < t->numel(); ++k) dims.push_back(Dim(t->getInt(k)));
  return std::optional<std::vector<Dim>>(std::move(dims));
}

namespace {

using Result = Expected<Conversion>;

std::vector<int64_t> tensorInts(const Tensor& t) {
  std::vector<int64_t> v(static_cast<size_t>(t.numel()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = t.getInt(static_cast<int64_t>(i));
  return v;
}

Result simple(ConvertContext& ctx, OpKind kind, OpAttrs attrs = NoAttrs{}) {
  return Conversion{kind, std::move(attrs), ctx.inputs};
}

Expected<std::vector<int64_t>> normalizeAxes(std::vector<int64_t> axes, int rank) {
  for (auto& a : axes) {
    TUNEC_ASSIGN_OR_RETURN(a, normalizeDimAxis(a, rank));
  }
  std::sort(axes.begin(), axes.end());
  if (std::adjacent_find(axes.begin(), axes.end()) != axes.end())
    return makeError("axes repeat an axis");
  return axes;
}

template <OpKind K> Result convertPlain(ConvertContext& ctx) {
  return simple(ctx, K);
}

Result convertRound(ConvertContext& ctx) {
  return simple(ctx, OpKind::Round, RoundAttrs{});
}

template <OpKind K> Result convertAlpha(ConvertContext& ctx) {
  AlphaBetaAttrs a;
  switch (K) {
  case OpKind::Celu:
  case OpKind::Elu:
  case OpKind::Swish:
  case OpKind::ThresholdedRelu:
    a.alpha = ctx.attrs.getFloat("alpha", 1.0f);
    break;
  case OpKind::LeakyRelu:
    a.alpha = ctx.attrs.getFloat("alpha", 0.01f);
    break;
  case OpKind::HardSigmoid:
    a.alpha = ctx.attrs.getFloat("alpha", 0.2f);
    a.beta = ctx.attrs.getFloat("beta", 0.5f);
    break;
  case OpKind::Selu:
    a.alpha = ctx.attrs.getFloat("alpha", 1.67326319217681884765625f);
    a.beta = ctx.attrs.getFloat("gamma", 1.05070102214813232421875f);
    break;
  default:
    break;
  }
  return simple(ctx, K, a);
}

Result convertGelu(ConvertContext& ctx) {
  std::string approx = ctx.attrs.getString("approximate", "none");
  if (approx != "none" && approx != "tanh")
    return makeError("approximate='", approx, "' is not none or tanh");
  return Conversion{OpKind::Gelu, GeluAttrs{approx == "tanh"}, {ctx.inputs[0]}};
}

Result convertIsInf(ConvertContext& ctx) {
  IsInfAttrs a{ctx.attrs.getInt("detect_positive", 1) != 0,
               ctx.attrs.getInt("detect_negative", 1) != 0};
  return simple(ctx, OpKind::IsInf, a);
}

Result convertCast(ConvertContext& ctx) {
  ctx.attrs.getInt("saturate", 1); // opset 19: of float8 targets only, which are refused
  int to = static_cast<int>(ctx.attrs.getInt("to", 0));
  auto dtype = dtypeFromOnnx(to);
  if (!dtype) return makeError("cast to ", onnxTypeName(to), " is not supported");
  return simple(ctx, OpKind::Cast, CastAttrs{*dtype});
}

Result convertClip(ConvertContext& ctx) {
  ClipAttrs a;
  if (ctx.opset < 11) {
    a.min = ctx.attrs.getFloat("min", -INFINITY);
    a.max = ctx.attrs.getFloat("max", INFINITY);
  } else {
    TUNEC_ASSIGN_OR_RETURN(auto lo, ctx.constantInput(1, "min"));
    TUNEC_ASSIGN_OR_RETURN(auto hi, ctx.constantInput(2, "max"));
    if (lo) a.min = lo->getDouble(0);
    if (hi) a.max = hi->getDouble(0);
  }
  return Conversion{OpKind::Clip, a, {ctx.inputs[0]}};
}

Result convertDropout(ConvertContext& ctx) {
  ctx.attrs.ignore("ratio");
  ctx.attrs.ignore("seed");
  if (ctx.attrs.getInt("is_test", 1) == 0)
    return makeError("training-mode Dropout (is_test=0) is not supported");
  if (ctx.opset >= 12) {
    TUNEC_ASSIGN_OR_RETURN(auto training, ctx.constantInput(2, "training_mode"));
    if (training && training->getInt(0) != 0) {
      // Training mode drops at random unless the ratio is a constant 0 (exporters emit that
      // for a model in train mode with p = 0): then it is the identity, as in inference.
      TUNEC_ASSIGN_OR_RETURN(auto ratio, ctx.constantInput(1, "ratio"));
      if (!ratio || ratio->numel() != 1 || ratio->getDouble(0) != 0.0)
        return makeError("training_mode=true with a ratio other than a constant 0 is not "
                         "supported: it drops values at random (tunec compiles inference: export "
                         "the model in eval mode)");
    }
  }
  Conversion c{OpKind::Dropout, NoAttrs{}, {ctx.inputs[0]}};
  if (ctx.numOutputs > 1) {
    // In inference nothing is dropped: the mask is all true (PyTorch exports it for a model in
    // train mode with p = 0).
    Tensor mask(DType::Bool, ctx.inputType(0).shape);
    for (int64_t i = 0; i < mask.numel(); ++i) mask.setInt(i, 1);
    c.constantOutputs.emplace_back(1, std::move(mask));
  }
  return c;
}

Result convertMod(ConvertContext& ctx) {
  return simple(ctx, OpKind::Mod, ModAttrs{ctx.attrs.getInt("fmod", 0) != 0});
}

// Old opsets (< 7) had explicit broadcast/axis attributes on binary ops; the default forms
// match numpy broadcasting only when broadcast is 0 or the axis is the trailing one.
template <OpKind K> Result convertBinary(ConvertContext& ctx) {
  if (ctx.attrs.getInt("broadcast", 0) != 0 && ctx.attrs.has("axis"))
    return makeError("legacy broadcast with an explicit axis (opset < 7) is not supported");
  ctx.attrs.ignore("consumed_inputs");
  return simple(ctx, K);
}

// ---- convolution and pooling ------------------------------------------------------------------

struct Window {
  std::vector<int64_t> kernel, strides, pads, dilations;
};

Expected<Window> readWindow(ConvertContext& ctx, std::vector<int64_t> kernel, const Shape& x,
                            bool pooling) {
  size_t r = kernel.size();
  Window w;
  w.kernel = std::move(kernel);
  w.strides = ctx.attrs.getInts("strides").value_or(std::vector<int64_t>(r, 1));
  w.dilations = ctx.attrs.getInts("dilations").value_or(std::vector<int64_t>(r, 1));
  w.pads = ctx.attrs.getInts("pads").value_or(std::vector<int64_t>(2 * r, 0));
  if (w.strides.size() != r || w.dilations.size() != r || w.pads.size() != 2 * r)
    return makeError("strides/dilations/pads do not match a ", r, "-d kernel");
  for (size_t i = 0; i < r; ++i)
    if (w.strides[i] <= 0 || w.dilations[i] <= 0 || w.kernel[i] <= 0)
      return makeError("kernel, strides and dilations must be positive");
  // A pad is at least 0; a pooling pad is, as ONNX Runtime requires, smaller than the (dilated)
  // kernel: a window entirely in the padding would pool nothing of the input.
  for (size_t i = 0; i < 2 * r; ++i) {
    int64_t extent = (w.kernel[i % r] - 1) * w.dilations[i % r] + 1;
    if (w.pads[i] < 0 || (pooling && w.pads[i] >= extent))
      return makeError("pads: pad ", i, " is ", w.pads[i], "; a pad must be at least 0",
                       pooling ? " and less than the kernel extent " + std::to_string(extent) : "");
  }
  std::string autoPad = ctx.attrs.getString("auto_pad", "NOTSET");
  if (autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER") {
    for (size_t i = 0; i < r; ++i) {
      int64_t in = x[static_cast<int>(i) + 2];
      int64_t out = (in + w.strides[i] - 1) / w.strides[i];
      int64_t total = std::max<int64_t>(0, (out - 1) * w.strides[i] +
                                               (w.kernel[i] - 1) * w.dilations[i] + 1 - in);
      int64_t small = total / 2, large = total - small;
      w.pads[i] = autoPad == "SAME_UPPER" ? small : large;
      w.pads[i + r] = autoPad == "SAME_UPPER" ? large : small;
    }
  } else if (autoPad == "VALID") {
    std::fill(w.pads.begin(), w.pads.end(), 0);
  } else if (autoPad != "NOTSET") {
    return makeError("auto_pad='", autoPad, "' is not NOTSET, SAME_UPPER, SAME_LOWER or VALID");
  }
  return w;
}

Result convertConv(ConvertContext& ctx) {
  const Shape& x = ctx.inputType(0).shape;
  const Shape& wShape = ctx.inputType(1).shape;
  if (wShape.rank() < 3)
    return makeError("weight ", wShape.toString(), " must have rank 3 or more");
  std::vector<int64_t> kernel =
      ctx.attrs.getInts("kernel_shape")
          .value_or(std::vector<int64_t>(wShape.dims().begin() + 2, wShape.dims().end()));
  if (x.rank() != static_cast<int>(kernel.size()) + 2)
    return makeError("input ", x.toString(), " does not fit kernel_shape of rank ", kernel.size());
  TUNEC_ASSIGN_OR_RETURN(Window w, readWindow(ctx, kernel, x, false));
  ConvAttrs a{w.kernel, w.strides, w.pads, w.dilations, ctx.attrs.getInt("group", 1)};
  return simple(ctx, OpKind::Conv, a);
}

// ---- quantized operators, canonicalized to QuantizeLinear / DequantizeLinear around float ops
// (Shapes and types are copied, never referenced: adding a node or a constant moves the graph's
// values.)
// (QOperator: QLinearMatMul, QLinearConv; integer: MatMulInteger, ConvInteger). The graph then
// has one quantized form, whatever the exporter wrote.

// A node of the expansion of the current ONNX node; its output is named after the node's first
// output and `part`.
Expected<ValueId> addPart(ConvertContext& ctx, const std::string& part, OpKind kind, OpAttrs attrs,
                          std::vector<ValueId> inputs) {
  std::string name = ctx.proto.output(0) + "/" + part;
  TUNEC_ASSIGN_OR_RETURN(
      NodeId id, ctx.graph.addNode(name, kind, std::move(attrs), std::move(inputs), {name}));
  return ctx.graph.node(id).outputs[0];
}

// A constant of the expansion.
ValueId addPartConstant(ConvertContext& ctx, const std::string& part, Tensor value) {
  return ctx.graph.addConstant(ctx.proto.output(0) + "/" + part, std::move(value));
}

// A scale or zero point as DequantizeLinear / QuantizeLinear take it: a 1-element 1-d tensor
// that is not per axis becomes a scalar; `axis` is where a longer 1-d one runs.
Expected<ValueId> quantParameter(ConvertContext& ctx, ValueId v, const std::string& part,
                                 int64_t axisLength) {
  const Shape s = ctx.graph.value(v).type.shape;
  if (s.rank() == 1 && s[0] == 1 && axisLength != 1)
    return addPart(ctx, part, OpKind::Reshape, ReshapeAttrs{{}}, {v});
  if (s.rank() > 1)
    return makeError("a scale or zero point of shape ", s.toString(), " is not supported");
  return v;
}

// DequantizeLinear(x, scale, zeroPoint) along `axis` of x (zeroPoint kNoValue: zeros).
Expected<ValueId> dequantizePart(ConvertContext& ctx, const std::string& part, ValueId x,
                                 ValueId scale, ValueId zeroPoint, int64_t axis) {
  const Shape xs = ctx.graph.value(x).type.shape;
  int64_t length = axis >= 0 && axis < xs.rank() ? xs[static_cast<int>(axis)] : 1;
  TUNEC_ASSIGN_OR_RETURN(scale, quantParameter(ctx, scale, part + ".scale", length));
  const Shape ss = ctx.graph.value(scale).type.shape;
  if (zeroPoint == kNoValue)
    zeroPoint =
        addPartConstant(ctx, part + ".zero_point", Tensor(ctx.graph.value(x).type.dtype, ss));
  else {
    TUNEC_ASSIGN_OR_RETURN(zeroPoint, quantParameter(ctx, zeroPoint, part + ".zp", length));
  }
  return addPart(ctx, part, OpKind::DequantizeLinear, QuantAttrs{ss.rank() ? axis : 0},
                 {x, scale, zeroPoint});
}

// A scalar f32 constant of the expansion.
ValueId scalarPart(ConvertContext& ctx, const std::string& part, double value) {
  Tensor t(DType::F32, Shape{});
  t.setDouble(0, value);
  return addPartConstant(ctx, part, std::move(t));
}

// QuantizeLinear / DequantizeLinear: per-tensor or per-axis, u8 and i8 (DequantizeLinear also
// i32, as bias quantization uses). A missing zero point becomes a constant of zeros (of
// output_dtype, default u8, for QuantizeLinear; of the input's type for DequantizeLinear), so
// that the IR op always has three inputs.
// DequantizeLinear with block_size (opset 21) of constant 2-d codes [K, N] blockwise along K
// (axis 0), as ONNX Runtime's int4 quantizer writes a MatMul's weight in QDQ form: the f32
// weight (for any reader) and, for a MatMul reading it, the codes as tunec's MatMulNBits takes
// them (convertMatMul): unsigned codes (a signed code and zero point offset by 2^(bits-1): the
// same differences), float scales and zero points [N, blocks].
Result convertBlockDequantize(ConvertContext& ctx, int64_t block) {
  const int64_t axis = ctx.attrs.getInt("axis", 1);
  ctx.attrs.getInt("output_dtype", 0);
  TUNEC_ASSIGN_OR_RETURN(auto x, ctx.constantInput(0, "blockwise-quantized codes"));
  TUNEC_ASSIGN_OR_RETURN(auto scale, ctx.constantInput(1, "block scales"));
  TUNEC_ASSIGN_OR_RETURN(auto zp, ctx.constantInput(2, "block zero points"));
  if (!x || !scale || x->shape().rank() != 2 || (axis != 0 && axis != -2) ||
      (x->dtype() != DType::I8 && x->dtype() != DType::U8) || scale->dtype() != DType::F32)
    return makeError("blockwise DequantizeLinear (block_size ", block, ") is supported for ",
                     "constant int4/uint4/int8/uint8 weights [K, N] blocked along axis 0 with f32 ",
                     "scales, not ", x ? x->typeString() : std::string("a computed input"),
                     " along axis ", axis);
  const int64_t k = x->shape()[0], n = x->shape()[1], blocks = (k + block - 1) / block;
  if (block < 1 || scale->shape() != Shape({blocks, n}) ||
      (zp && (zp->shape() != scale->shape() || zp->dtype() != x->dtype())))
    return makeError("block scales ", scale->shape().toString(), " and zero points of codes ",
                     x->shape().toString(), " in blocks of ", block, " must be [", blocks, ", ", n,
                     "] (the zero points of the codes' type)");
  const bool isSigned = x->dtype() == DType::I8;
  int64_t lo = 0, hi = 0;
  for (int64_t i = 0; i < x->numel(); ++i) {
    lo = std::min(lo, x->getInt(i));
    hi = std::max(hi, x->getInt(i));
  }
  const int64_t bits = isSigned ? (lo >= -8 && hi <= 7 ? 4 : 8) : (hi <= 15 ? 4 : 8);
  const int64_t offset = isSigned ? int64_t{1} << (bits - 1) : 0;
  BlockQuantized q{Tensor(DType::U8, Shape({n, k})), Tensor(DType::F32, Shape({n, blocks})),
                   Tensor(DType::F32, Shape({n, blocks})), bits, block};
  Tensor weight(DType::F32, Shape({k, n}));
  for (int64_t row = 0; row < k; ++row)
    for (int64_t col = 0; col < n; ++col) {
      const int64_t at = (row / block) * n + col;
      const int64_t code = x->getInt(row * n + col), zero = zp ? zp->getInt(at) : 0;
      const auto s = static_cast<float>(scale->getDouble(at));
      weight.setDouble(row * n + col, static_cast<double>(static_cast<float>(code - zero) * s));
      q.codes.setInt(col * k + row, code + offset);
      q.scales.setDouble(col * blocks + row / block, s);
      q.zeroPoints.setDouble(col * blocks + row / block, static_cast<double>(zero + offset));
    }
  if (ctx.blockQuantized) ctx.blockQuantized->emplace(ctx.proto.output(0), std::move(q));
  return Conversion{
      OpKind::Identity, NoAttrs{}, {addPartConstant(ctx, "weight", std::move(weight))}};
}

// MatMul(A, B): of a blockwise-dequantized constant B (convertBlockDequantize) and an f32 A,
// tunec's MatMulNBits of its codes, which the weight-only kernels run; otherwise as it is.
Result convertMatMul(ConvertContext& ctx) {
  if (!ctx.blockQuantized || ctx.inputType(0).dtype != DType::F32)
    return Conversion{OpKind::MatMul, NoAttrs{}, ctx.inputs};
  auto it = ctx.blockQuantized->find(ctx.proto.input(1));
  if (it == ctx.blockQuantized->end()) return Conversion{OpKind::MatMul, NoAttrs{}, ctx.inputs};
  const BlockQuantized& q = it->second;
  std::vector<ValueId> in = {ctx.inputs[0], addPartConstant(ctx, "codes", q.codes),
                             addPartConstant(ctx, "scales", q.scales),
                             addPartConstant(ctx, "zero_points", q.zeroPoints)};
  // Accuracy level 4 (int8 activations where the target has VNNI), as ONNX Runtime's fusion of
  // DequantizeLinear and MatMul into its MatMulNBits sets by default.
  return Conversion{OpKind::MatMulNBits, BlockQuantAttrs{q.bits, q.block, 4}, in};
}

template <bool Quantize> Result convertQuantize(ConvertContext& ctx) {
  if (const int64_t block = ctx.attrs.getInt("block_size", 0); block != 0) {
    if (Quantize) return makeError("blocked QuantizeLinear (block_size) is not supported");
    return convertBlockDequantize(ctx, block);
  }
  ctx.attrs.getInt("saturate", 1); // only float8 types saturate otherwise
  int64_t axis = ctx.attrs.getInt("axis", 1);
  int outputType = static_cast<int>(ctx.attrs.getInt("output_dtype", 0));
  ValueId scaleValue = ctx.inputs[1];
  ValueId zeroPoint = ctx.hasInput(2) ? ctx.inputs[2] : kNoValue;
  if (ctx.inputType(1).shape.rank() == 1) {
    const Shape x = ctx.inputType(0).shape;
    TUNEC_ASSIGN_OR_RETURN(axis, normalizeDimAxis(axis, x.rank()));
    // A 1-element scale (PyTorch's per-tensor export) is per tensor, not per axis.
    TUNEC_ASSIGN_OR_RETURN(scaleValue,
                           quantParameter(ctx, scaleValue, "scale", x[static_cast<int>(axis)]));
    if (zeroPoint != kNoValue) {
      TUNEC_ASSIGN_OR_RETURN(zeroPoint,
                             quantParameter(ctx, zeroPoint, "zp", x[static_cast<int>(axis)]));
    }
  }
  const TensorType scale = ctx.graph.value(scaleValue).type;
  if (scale.shape.rank() == 0) axis = 0; // a per-tensor scale has no axis
  if (zeroPoint == kNoValue) {
    DType type = ctx.inputType(0).dtype;
    if (Quantize) {
      auto t = outputType ? dtypeFromOnnx(outputType) : std::optional<DType>(DType::U8);
      if (!t) return makeError("output_dtype ", onnxTypeName(outputType), " is not supported");
      type = *t;
    }
    zeroPoint = ctx.graph.addConstant(ctx.proto.name() + ".zero_point", Tensor(type, scale.shape));
  }
  return Conversion{Quantize ? OpKind::QuantizeLinear : OpKind::DequantizeLinear,
                    QuantAttrs{axis},
                    {ctx.inputs[0], scaleValue, zeroPoint}};
}

// QLinearMatMul(a, a_scale, a_zp, b, b_scale, b_zp, y_scale, y_zp) =
//   QuantizeLinear(MatMul(DQ(a), DQ(b)), y_scale, y_zp); per-row a and per-column b scales.
Result convertQLinearMatMul(ConvertContext& ctx) {
  const auto& in = ctx.inputs;
  int ra = ctx.inputType(0).shape.rank(), rb = ctx.inputType(3).shape.rank();
  TUNEC_ASSIGN_OR_RETURN(ValueId a, dequantizePart(ctx, "a", in[0], in[1], in[2], ra - 2));
  TUNEC_ASSIGN_OR_RETURN(ValueId b, dequantizePart(ctx, "b", in[3], in[4], in[5], rb - 1));
  TUNEC_ASSIGN_OR_RETURN(ValueId y, addPart(ctx, "matmul", OpKind::MatMul, NoAttrs{}, {a, b}));
  int ry = ctx.graph.value(y).type.shape.rank();
  int64_t n = ctx.graph.value(y).type.shape[ry - 1];
  TUNEC_ASSIGN_OR_RETURN(ValueId ys, quantParameter(ctx, in[6], "y.scale", n));
  TUNEC_ASSIGN_OR_RETURN(ValueId yz, quantParameter(ctx, in[7], "y.zp", n));
  return Conversion{OpKind::QuantizeLinear,
                    QuantAttrs{ctx.graph.value(ys).type.shape.rank() ? ry - 1 : 0},
                    {y, ys, yz}};
}

// QLinearConv(x, x_scale, x_zp, w, w_scale, w_zp, y_scale, y_zp, B) =
//   QuantizeLinear(Conv(DQ(x), DQ(w) per output channel, DQ(B, x_scale * w_scale)), y_scale, y_zp)
Result convertQLinearConv(ConvertContext& ctx) {
  const std::vector<ValueId> in = ctx.inputs;
  ctx.inputs = {in[0], in[3]}; // the window attributes, read as Conv reads them
  auto conv = convertConv(ctx);
  ctx.inputs = in;
  if (!conv) return conv.error();
  TUNEC_ASSIGN_OR_RETURN(ValueId x, dequantizePart(ctx, "x", in[0], in[1], in[2], 1));
  TUNEC_ASSIGN_OR_RETURN(ValueId w, dequantizePart(ctx, "w", in[3], in[4], in[5], 0));
  std::vector<ValueId> convIn = {x, w};
  if (ctx.hasInput(8)) {
    // The i32 bias is quantized with scale x_scale * w_scale and zero point 0.
    int64_t oc = ctx.inputType(3).shape[0];
    const TensorType& biasType = ctx.inputType(8);
    if (biasType.dtype != DType::I32 || !(biasType.shape == Shape{oc}))
      return makeError("QLinearConv's bias '", ctx.proto.input(8), "' is ", biasType.toString(),
                       ": it must be an int32 vector of the weights' ", oc,
                       " output channels (quantized with x_scale * w_scale, zero point 0)");
    TUNEC_ASSIGN_OR_RETURN(ValueId xs, quantParameter(ctx, in[1], "bias.xs", oc));
    TUNEC_ASSIGN_OR_RETURN(ValueId ws, quantParameter(ctx, in[4], "bias.ws", oc));
    TUNEC_ASSIGN_OR_RETURN(ValueId bs,
                           addPart(ctx, "bias.scale", OpKind::Mul, NoAttrs{}, {xs, ws}));
    TUNEC_ASSIGN_OR_RETURN(ValueId b, dequantizePart(ctx, "bias", in[8], bs, kNoValue, 0));
    convIn.push_back(b);
  }
  TUNEC_ASSIGN_OR_RETURN(ValueId y, addPart(ctx, "conv", OpKind::Conv, conv->attrs, convIn));
  int64_t oc = ctx.graph.value(y).type.shape[1];
  TUNEC_ASSIGN_OR_RETURN(ValueId ys, quantParameter(ctx, in[6], "y.scale", oc));
  TUNEC_ASSIGN_OR_RETURN(ValueId yz, quantParameter(ctx, in[7], "y.zp", oc));
  return Conversion{OpKind::QuantizeLinear,
                    QuantAttrs{ctx.graph.value(ys).type.shape.rank() ? 1 : 0},
                    {y, ys, yz}};
}

// MatMulInteger(a, b, a_zp, b_zp) and ConvInteger(x, w, x_zp, w_zp): the exact int32 sums of
// the products (q - zero point), wrapping as ONNX Runtime's do. Zero points: MatMulInteger's
// a_zero_point per tensor, per row ([M], or [..., M, 1]) and b_zero_point per tensor or per
// column ([N], or [..., 1, N]); ConvInteger's x_zero_point per tensor and w_zero_point per
// tensor or per output channel ([M]).
//
// Two forms, one decision (integerSumBound): where every partial sum provably stays below 2^24
// in magnitude, f32 holds each exactly in any order, and the op becomes
// Cast(MatMul/Conv(DQ(a, 1, a_zp), DQ(b, 1, b_zp)), i32), which the int8 and f32 kernels run
// (lower_quantized_layers.cpp); otherwise it stays in integers: MatMul/Conv of the i32
// operands (q - zero point), which the reference and the runtime's integer steps sum in
// integers (lower_integer.cpp).

// The zero point of an integer product's operand (`role`, of shape `x`), checked against the
// forms ONNX allows: per tensor; along `axis` of x as a vector ([M] rows of a, [N] columns of
// b, [M] output channels of w; `axis` -1: none); or, for a MatMul's operands, of x's rank with
// 1 at `ones` (a's [..., M, 1], b's [..., 1, N]).
Status checkIntegerZeroPoint(const ConvertContext& ctx, size_t input, const char* role,
                             const Shape& x, int axis, int ones) {
  if (!ctx.hasInput(input)) return {};
  const Shape& z = ctx.inputType(input).shape;
  if (z.numel() == 1 && z.rank() <= 1) return {};
  if (axis >= 0 && z.rank() == 1 && z.dim(0) == x.dim(axis)) return {};
  if (ones >= 0 && z.rank() == x.rank()) {
    bool fits = z.dim(ones) == Dim(1);
    for (int d = 0; d < x.rank(); ++d)
      fits = fits && (d == ones || z.dim(d) == x.dim(d) || z.dim(d) == Dim(1));
    if (fits) return {};
  }
  std::string forms = "a scalar";
  if (axis >= 0) forms += ", a vector of its " + x.dim(axis).toString() + " " + role;
  if (ones >= 0) forms += ", or of the operand's rank with 1 at axis " + std::to_string(ones);
  const bool conv = ctx.proto.op_type() == "ConvInteger";
  const char* name = input == 2 ? (conv ? "x_zero_point" : "a_zero_point")
                                : (conv ? "w_zero_point" : "b_zero_point");
  return makeError(ctx.proto.op_type(), "'s ", name, " '", ctx.proto.input(input), "' is ",
                   ctx.inputType(input).toString(), ": it must be ", forms, " (its operand is ",
                   x.toString(), ")");
}

// A bound on every partial sum of the products: 255 (the largest |q - zero point| of 8-bit
// codes, and of a u8 activation code itself, which the int8 kernels sum before the zero point's
// correction) times the largest sum of |c - zero point| over one output's terms of the constant
// operand c (b's column, a's row, w's output channel); 255 * 255 per term when neither operand
// is constant; nullopt when c's zero point is computed or not per tensor or per `axis`.
std::optional<double> integerSumBound(const ConvertContext& ctx, bool conv) {
  const int rb = ctx.inputType(1).shape.rank();
  for (size_t c : {size_t{1}, size_t{0}}) {
    const Value& v = ctx.graph.value(ctx.inputs[c]);
    if (!v.constant || (c == 0 && conv)) continue;
    const Value* z = ctx.hasInput(c + 2) ? &ctx.graph.value(ctx.inputs[c + 2]) : nullptr;
    if (z && (!z->constant || z->type.shape.rank() > 1)) return std::nullopt;
    const Tensor& t = *v.constant;
    const Shape& s = t.shape();
    // The operand's elements grouped by output: outputs x (lines of `length`, `stride` apart).
    int64_t outputs = 0, length = 0, stride = 0, inner = 1;
    if (conv) { // w [M, C/group, kernel...]: a channel's window
      outputs = s[0], length = s[0] ? t.numel() / s[0] : 0, stride = 1;
    } else if (c == 1) { // b [..., K, N]: a column, K long, N apart
      inner = rb >= 2 ? s[rb - 1] : 1, length = rb >= 2 ? s[rb - 2] : s[0];
      outputs = length ? t.numel() / length : 0, stride = inner;
    } else { // a [..., M, K]: a row
      length = s.dims().back(), outputs = length ? t.numel() / length : 0, stride = 1;
    }
    double worst = 0;
    for (int64_t o = 0; o < outputs; ++o) {
      // Output o's first term, and its zero point (per channel, per column or per row).
      const int64_t first = stride == 1 ? o * length : (o / inner) * inner * length + o % inner;
      const int64_t axisIndex = conv     ? o
                                : c == 1 ? o % inner
                                         : o % (s.rank() >= 2 ? s[s.rank() - 2] : 1);
      const int64_t zero = z ? z->constant->getInt(z->constant->numel() == 1 ? 0 : axisIndex) : 0;
      double sum = 0;
      for (int64_t i = 0; i < length; ++i)
        sum += static_cast<double>(std::abs(t.getInt(first + i * stride) - zero));
      worst = std::max(worst, sum);
    }
    return 255.0 * worst;
  }
  const Shape& a = ctx.inputType(0).shape;
  const Shape& w = ctx.inputType(1).shape;
  if (!a.isStatic() || !w.isStatic()) return std::nullopt;
  // (An empty operand sums nothing.)
  return 255.0 * 255.0 *
         static_cast<double>(conv ? (w[0] ? w.numel() / w[0] : 0) : a[a.rank() - 1]);
}

// An operand of the integer form: Cast(q, i32) - Cast(zero point, i32), the zero point
// reshaped to `zeroShape` when it is a vector (a's rows [M, 1], w's channels [M, 1, 1, 1]).
Expected<ValueId> integerOperand(ConvertContext& ctx, const std::string& part, size_t input,
                                 const std::vector<Dim>& zeroShape) {
  TUNEC_ASSIGN_OR_RETURN(ValueId q, addPart(ctx, part + ".i32", OpKind::Cast, CastAttrs{DType::I32},
                                            {ctx.inputs[input]}));
  if (!ctx.hasInput(input + 2)) return q;
  TUNEC_ASSIGN_OR_RETURN(ValueId z, addPart(ctx, part + ".zp.i32", OpKind::Cast,
                                            CastAttrs{DType::I32}, {ctx.inputs[input + 2]}));
  const Shape& zs = ctx.inputType(input + 2).shape;
  if (zs.rank() == 1 && zs.numel() != 1 && !zeroShape.empty()) {
    TUNEC_ASSIGN_OR_RETURN(
        z, addPart(ctx, part + ".zp.shaped", OpKind::Reshape, ReshapeAttrs{zeroShape}, {z}));
  }
  return addPart(ctx, part + ".centered", OpKind::Sub, NoAttrs{}, {q, z});
}

// A tensor of ones.
Tensor onesOf(DType dtype, Shape shape) {
  Tensor t(dtype, std::move(shape));
  for (int64_t i = 0; i < t.numel(); ++i) t.setDouble(i, 1.0);
  return t;
}

// An operand of the f32 form: DequantizeLinear(q, 1, zero point) along `axis` of the operand
// when the zero point is a vector (its scale then ones of its length).
Expected<ValueId> unitDequantized(ConvertContext& ctx, const std::string& part, size_t input,
                                  int64_t axis) {
  ValueId scale = scalarPart(ctx, part + ".one", 1.0);
  if (ctx.hasInput(input + 2)) {
    const Shape& zs = ctx.inputType(input + 2).shape;
    if (zs.rank() == 1 && zs.numel() != 1)
      scale = addPartConstant(ctx, part + ".ones", onesOf(DType::F32, zs));
  }
  return dequantizePart(ctx, part, ctx.inputs[input], scale,
                        ctx.hasInput(input + 2) ? ctx.inputs[input + 2] : kNoValue, axis);
}

// The int8 kernels' form of an integer product with constant 8-bit weights w (ConvInteger's
// [M, C, kh, kw], MatMulInteger's [K, N]) and a u8 activation x: the layer
// (lower_quantized_layers.cpp)
//   T = Conv/MatMul(DQ(x, 1, x_zp), DQ(w - shift, 1, 0)),  shift 128 for u8 weights (w - 128
//   is s8 exactly), 0 for s8 ones,
// plus, where the weights' zero point is not the shift, the rest of sum (x - x_zp)(w - w_zp):
//   (shift - w_zp[o]) x S,  S the sums of (x - x_zp) over one output's terms (a convolution's
//   window: a 1x1 int8 layer of ones, then a Conv of ones over the window, padded taps reading
//   x_zp adding 0; a matmul's row: an int8 layer of a column of ones),
// both sums of integers, each exact in f32 where 255 x the largest sum of |w - shift| over an
// output's terms, and 255 x their count x |shift - w_zp|, add up below 2^24 (then bit for bit
// the exact int32 sums). Beyond it only where the model reads the output through a Cast to f32
// (ONNX Runtime's dynamic quantization): T is then the kernels' exact int32 sum rounded once to
// f32 (as that Cast rounds the exact sum), the correction exact, their sum rounded once more
// (within an ulp of the Cast's value); every value is integral, so the Cast to i32 is exact.

// The weights shifted to s8 and, per output o, shift - w_zp[o]; `terms` weights per output,
// output o's i-th at `at(o, i)`; nullopt where the sums are not exact in f32 and not read
// through a Cast to f32.
struct ShiftedWeights {
  Tensor codes;
  std::vector<double> rest; ///< shift - zero point, per output
  bool corrects = false;
};
std::optional<ShiftedWeights> shiftWeights(const ConvertContext& ctx, const Tensor& codes,
                                           const Tensor* zeroPoints, int64_t outputs, int64_t terms,
                                           const std::function<int64_t(int64_t, int64_t)>& at) {
  const int64_t shift = codes.dtype() == DType::U8 ? 128 : 0;
  ShiftedWeights s{Tensor(DType::I8, codes.shape()), {}, false};
  for (int64_t i = 0; i < codes.numel(); ++i) s.codes.setInt(i, codes.getInt(i) - shift);
  double boundT = 0, boundS = 0;
  for (int64_t o = 0; o < outputs; ++o) {
    const int64_t zero = zeroPoints ? zeroPoints->getInt(zeroPoints->numel() == 1 ? 0 : o) : 0;
    s.rest.push_back(static_cast<double>(shift - zero));
    s.corrects = s.corrects || shift != zero;
    double sum = 0;
    for (int64_t i = 0; i < terms; ++i)
      sum += static_cast<double>(std::abs(codes.getInt(at(o, i)) - shift));
    boundT = std::max(boundT, 255.0 * sum);
    boundS = std::max(boundS, 255.0 * static_cast<double>(terms * std::abs(shift - zero)));
  }
  if (boundT + boundS >= 16777216.0 && !ctx.onlyCastToFloat()) return std::nullopt;
  return s;
}

// The constant weights (input 1) and their zero point (input 3, constant or absent), or nullopt.
std::optional<std::pair<Tensor, std::optional<Tensor>>> constantWeights(const ConvertContext& ctx) {
  const Value& w = ctx.graph.value(ctx.inputs[1]);
  if (!w.constant || ctx.inputType(0).dtype != DType::U8) return std::nullopt;
  std::optional<Tensor> zero;
  if (ctx.hasInput(3)) {
    const Value& z = ctx.graph.value(ctx.inputs[3]);
    if (!z.constant) return std::nullopt;
    zero = *z.constant;
  }
  return std::pair{*w.constant, zero};
}

// Constant s8 codes as an int8 layer's weights: DequantizeLinear(codes, 1, 0) along `axis`.
Expected<ValueId> unitWeights(ConvertContext& ctx, const std::string& part, Tensor codes,
                              int64_t axis) {
  return dequantizePart(ctx, part, addPartConstant(ctx, part + ".s8", std::move(codes)),
                        scalarPart(ctx, part + ".one", 1.0), kNoValue, axis);
}

// y + (shift - w_zp[o]) x sums: the weights' zero point's rest (ShiftedWeights), per output
// along the axis `restShape` gives it.
Expected<ValueId> addZeroPointRest(ConvertContext& ctx, const std::string& part, ValueId y,
                                   ValueId sums, const ShiftedWeights& shifted, Shape restShape) {
  Tensor rest(DType::F32, std::move(restShape));
  for (int64_t o = 0; o < rest.numel(); ++o)
    rest.setDouble(o, shifted.rest[static_cast<size_t>(o)]);
  TUNEC_ASSIGN_OR_RETURN(
      ValueId correction,
      addPart(ctx, part + ".correction", OpKind::Mul, NoAttrs{},
              {sums, addPartConstant(ctx, part + ".zero_points", std::move(rest))}));
  return addPart(ctx, "corrected", OpKind::Add, NoAttrs{}, {y, correction});
}

Expected<std::optional<ValueId>> int8ConvForm(ConvertContext& ctx, const ConvAttrs& attrs) {
  auto weights = constantWeights(ctx);
  if (attrs.group != 1 || attrs.kernel.size() != 2 || !weights ||
      (ctx.hasInput(2) && !ctx.graph.value(ctx.inputs[2]).constant))
    return std::optional<ValueId>();
  const Tensor& codes = weights->first;
  const int64_t oc = codes.shape()[0], window = oc ? codes.numel() / oc : 0;
  auto shifted = shiftWeights(ctx, codes, weights->second ? &*weights->second : nullptr, oc, window,
                              [&](int64_t o, int64_t i) { return o * window + i; });
  if (!shifted) return std::optional<ValueId>();
  TUNEC_ASSIGN_OR_RETURN(ValueId a, unitDequantized(ctx, "a", 0, 1));
  TUNEC_ASSIGN_OR_RETURN(ValueId b, unitWeights(ctx, "b", shifted->codes, 0));
  TUNEC_ASSIGN_OR_RETURN(ValueId y, addPart(ctx, "float", OpKind::Conv, attrs, {a, b}));
  if (!shifted->corrects) return std::optional<ValueId>(y);
  // The channel sums as an int8 layer of its own (a 1x1 Conv of s8 ones, reading x where the
  // main layer reads it), then the window's sums of them in f32.
  TUNEC_ASSIGN_OR_RETURN(
      ValueId units,
      unitWeights(ctx, "window.units", onesOf(DType::I8, {1, codes.shape()[1], 1, 1}), 0));
  ConvAttrs pointwise{{1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1};
  TUNEC_ASSIGN_OR_RETURN(ValueId channels,
                         addPart(ctx, "window.channels", OpKind::Conv, pointwise, {a, units}));
  TUNEC_ASSIGN_OR_RETURN(
      ValueId sums,
      addPart(ctx, "window.sums", OpKind::Conv, attrs,
              {channels,
               addPartConstant(ctx, "window.ones",
                               onesOf(DType::F32, {1, 1, attrs.kernel[0], attrs.kernel[1]}))}));
  TUNEC_ASSIGN_OR_RETURN(y, addZeroPointRest(ctx, "window", y, sums, *shifted, Shape{1, oc, 1, 1}));
  return std::optional<ValueId>(y);
}

// A MatMulInteger of a u8 activation with a per-tensor zero point (constant, or computed: the
// dynamic int8 layer) and constant 2-d weights [K, N] with a zero point per tensor or column.
Expected<std::optional<ValueId>> int8MatMulForm(ConvertContext& ctx) {
  auto weights = constantWeights(ctx);
  if (!weights || ctx.inputType(1).shape.rank() != 2 ||
      (ctx.hasInput(2) && ctx.inputType(2).shape.numel() != 1))
    return std::optional<ValueId>();
  const Tensor& codes = weights->first;
  const int64_t k = codes.shape()[0], n = codes.shape()[1];
  auto shifted = shiftWeights(ctx, codes, weights->second ? &*weights->second : nullptr, n, k,
                              [&](int64_t o, int64_t i) { return i * n + o; });
  if (!shifted) return std::optional<ValueId>();
  const int ra = ctx.inputType(0).shape.rank();
  TUNEC_ASSIGN_OR_RETURN(ValueId a, unitDequantized(ctx, "a", 0, ra - 2));
  TUNEC_ASSIGN_OR_RETURN(ValueId b, unitWeights(ctx, "b", shifted->codes, 1));
  TUNEC_ASSIGN_OR_RETURN(ValueId y, addPart(ctx, "float", OpKind::MatMul, NoAttrs{}, {a, b}));
  if (!shifted->corrects) return std::optional<ValueId>(y);
  // The row sums as an int8 layer of its own (a column of s8 ones): they read the u8 codes the
  // main layer reads (an f32 ReduceSum would read the quantization's f32 round trip, which the
  // passes may compute by another route).
  TUNEC_ASSIGN_OR_RETURN(ValueId units,
                         unitWeights(ctx, "row.units", onesOf(DType::I8, {k, 1}), 1));
  TUNEC_ASSIGN_OR_RETURN(ValueId sums,
                         addPart(ctx, "row.sums", OpKind::MatMul, NoAttrs{}, {a, units}));
  TUNEC_ASSIGN_OR_RETURN(y, addZeroPointRest(ctx, "row", y, sums, *shifted, Shape{n}));
  return std::optional<ValueId>(y);
}

template <OpKind K> Result convertInteger(ConvertContext& ctx) {
  constexpr bool conv = K == OpKind::Conv;
  OpAttrs attrs = NoAttrs{};
  if (conv) {
    TUNEC_ASSIGN_OR_RETURN(Conversion c, convertConv(ctx));
    attrs = c.attrs;
  }
  for (size_t i : {size_t{0}, size_t{1}})
    if (const DType t = ctx.inputType(i).dtype; t != DType::U8 && t != DType::I8)
      return makeError(ctx.proto.op_type(), " multiplies 8-bit integers, not ",
                       ctx.inputType(i).toString(), " (input '", ctx.proto.input(i), "')");
  const Shape a = ctx.inputType(0).shape, b = ctx.inputType(1).shape;
  const int ra = a.rank(), rb = b.rank();
  if (ra == 0 || rb == 0)
    return makeError(ctx.proto.op_type(), " multiplies tensors, not the scalar ",
                     ctx.inputType(ra == 0 ? 0 : 1).toString(), " (input '",
                     ctx.proto.input(ra == 0 ? 0 : 1), "')");
  if (conv) {
    TUNEC_TRY(checkIntegerZeroPoint(ctx, 2, "", a, -1, -1));
    TUNEC_TRY(checkIntegerZeroPoint(ctx, 3, "output channels", b, 0, -1));
  } else {
    TUNEC_TRY(
        checkIntegerZeroPoint(ctx, 2, "rows", a, ra >= 2 ? ra - 2 : -1, ra >= 2 ? ra - 1 : -1));
    TUNEC_TRY(
        checkIntegerZeroPoint(ctx, 3, "columns", b, rb >= 2 ? rb - 1 : -1, rb >= 2 ? rb - 2 : -1));
  }
  const auto vectorZero = [&](size_t i) {
    return ctx.hasInput(i) && ctx.inputType(i).shape.numel() != 1;
  };
  {
    std::optional<ValueId> y;
    if constexpr (conv) {
      TUNEC_ASSIGN_OR_RETURN(y, int8ConvForm(ctx, std::get<ConvAttrs>(attrs)));
    } else {
      TUNEC_ASSIGN_OR_RETURN(y, int8MatMulForm(ctx));
    }
    if (y) return Conversion{OpKind::Cast, CastAttrs{DType::I32, true}, {*y}};
  }
  // The f32 form takes per-tensor and vector zero points (DequantizeLinear's per-axis ones).
  const bool f32Form = !(vectorZero(2) && ctx.inputType(2).shape.rank() > 1) &&
                       !(vectorZero(3) && ctx.inputType(3).shape.rank() > 1);
  if (const auto bound = integerSumBound(ctx, conv); f32Form && bound && *bound < 16777216.0) {
    TUNEC_ASSIGN_OR_RETURN(ValueId x, unitDequantized(ctx, "a", 0, conv ? 1 : ra - 2));
    TUNEC_ASSIGN_OR_RETURN(ValueId w, unitDequantized(ctx, "b", 1, conv ? 0 : rb - 1));
    TUNEC_ASSIGN_OR_RETURN(ValueId y, addPart(ctx, "float", K, attrs, {x, w}));
    // Every sum is an integer below 2^24: the Cast is exact (and ONNX Runtime's Cast of it
    // back to f32, which its dynamic quantization writes next, the identity).
    return Conversion{OpKind::Cast, CastAttrs{DType::I32, true}, {y}};
  }
  std::vector<Dim> rows, channels;
  if (!conv && ra >= 2) rows = {a.dim(ra - 2), Dim(1)};
  if (conv) channels = std::vector<Dim>(static_cast<size_t>(rb), Dim(1)), channels[0] = b.dim(0);
  TUNEC_ASSIGN_OR_RETURN(ValueId x, integerOperand(ctx, "a", 0, rows));
  TUNEC_ASSIGN_OR_RETURN(ValueId w, integerOperand(ctx, "b", 1, channels));
  return Conversion{K, attrs, {x, w}};
}

// Whether every element of `v` is >= 0 (or NaN) whatever the model's inputs: a constant of
// such elements, or an op that makes them (Relu, Sigmoid, Softmax, Abs, Exp) or keeps them
// (pools, data movement, linear and nearest resizing, Add, Mul, Max of one, Clip at >= 0). What
// a ReLU network's activations are: their dynamic quantization's zero point is 0.
bool provablyNonNegative(const Graph& g, ValueId v, int depth = 0) {
  const Value& value = g.value(v);
  if (value.constant) {
    for (int64_t i = 0; i < value.constant->numel(); ++i)
      if (value.constant->getDouble(i) < 0) return false;
    return true;
  }
  if (value.producer < 0 || depth > 48) return false;
  const Node& n = g.node(value.producer);
  auto input = [&](size_t i) { return provablyNonNegative(g, n.inputs[i], depth + 1); };
  // Data movement (regrouped or permuted elements, DNNFusion's mapping types) keeps its data
  // input's signs: Concat's every input, the others' first (a Pad's value, Trilu's zeros too).
  const MappingType mapping = opInfo(n.kind).mapping;
  if (mapping == MappingType::Reorganize || mapping == MappingType::Shuffle) {
    if (n.kind == OpKind::Pad && std::get<PadAttrs>(n.attrs).value < 0) return false;
    const size_t data = n.kind == OpKind::Concat ? n.inputs.size() : 1;
    for (size_t i = 0; i < data; ++i)
      if (!input(i)) return false;
    return true;
  }
  switch (n.kind) {
  case OpKind::Relu:
  case OpKind::Sigmoid:
  case OpKind::Softmax:
  case OpKind::Abs:
  case OpKind::Exp:
    return true;
  case OpKind::MaxPool:
  case OpKind::AveragePool:
  case OpKind::GlobalAveragePool:
  case OpKind::GlobalMaxPool:
  case OpKind::Identity:
  case OpKind::Expand:
  case OpKind::Tile:
    return input(0);
  case OpKind::Resize:
    return std::get<ResizeAttrs>(n.attrs).mode != ResizeMode::Cubic && input(0);
  case OpKind::Clip:
    return std::get<ClipAttrs>(n.attrs).min >= 0 || input(0);
  case OpKind::Max:
    for (size_t i = 0; i < n.inputs.size(); ++i)
      if (input(i)) return true;
    return false;
  case OpKind::Add:
  case OpKind::Mul:
    for (size_t i = 0; i < n.inputs.size(); ++i)
      if (!input(i)) return false;
    return true;
  default:
    return false;
  }
}

// DynamicQuantizeLinear(x) -> (y u8, y_scale, y_zero_point), as ONNX defines it: the range
// [min(x, 0), max(x, 0)] over 255 steps, the zero point saturated then rounded. Of an x that is
// never negative, min(x, 0) is 0: the zero point is the constant 0 (a ReLU network's
// activations; the int8 convolutions then take them), the scale max(x, 0) / 255.
Result convertDynamicQuantizeLinear(ConvertContext& ctx) {
  ValueId x = ctx.inputs[0];
  if (ctx.inputType(0).dtype != DType::F32)
    return makeError("DynamicQuantizeLinear input must be f32");
  if (provablyNonNegative(ctx.graph, x)) {
    std::vector<int64_t> axes;
    for (int d = 0; d < ctx.inputType(0).shape.rank(); ++d) axes.push_back(d);
    TUNEC_ASSIGN_OR_RETURN(ValueId hi,
                           addPart(ctx, "max", OpKind::ReduceMax, ReduceAttrs{axes, false}, {x}));
    TUNEC_ASSIGN_OR_RETURN(
        hi, addPart(ctx, "max0", OpKind::Max, NoAttrs{}, {hi, scalarPart(ctx, "zero", 0.0)}));
    TUNEC_ASSIGN_OR_RETURN(ValueId scale, addPart(ctx, "scale", OpKind::Div, NoAttrs{},
                                                  {hi, scalarPart(ctx, "steps", 255.0)}));
    ValueId zp = addPartConstant(ctx, "zp", Tensor(DType::U8, Shape{}));
    Conversion c{OpKind::QuantizeLinear, QuantAttrs{0}, {x, scale, zp}};
    c.valueOutputs = {{1, scale}, {2, zp}};
    return c;
  }
  std::vector<int64_t> all;
  for (int d = 0; d < ctx.inputType(0).shape.rank(); ++d) all.push_back(d);
  ReduceAttrs everything{all, false};
  TUNEC_ASSIGN_OR_RETURN(ValueId lo, addPart(ctx, "min", OpKind::ReduceMin, everything, {x}));
  TUNEC_ASSIGN_OR_RETURN(ValueId hi, addPart(ctx, "max", OpKind::ReduceMax, everything, {x}));
  ValueId zero = scalarPart(ctx, "zero", 0.0);
  TUNEC_ASSIGN_OR_RETURN(lo, addPart(ctx, "min0", OpKind::Min, NoAttrs{}, {lo, zero}));
  TUNEC_ASSIGN_OR_RETURN(hi, addPart(ctx, "max0", OpKind::Max, NoAttrs{}, {hi, zero}));
  TUNEC_ASSIGN_OR_RETURN(ValueId range, addPart(ctx, "range", OpKind::Sub, NoAttrs{}, {hi, lo}));
  TUNEC_ASSIGN_OR_RETURN(ValueId scale, addPart(ctx, "scale", OpKind::Div, NoAttrs{},
                                                {range, scalarPart(ctx, "steps", 255.0)}));
  TUNEC_ASSIGN_OR_RETURN(ValueId ratio, addPart(ctx, "ratio", OpKind::Div, NoAttrs{}, {lo, scale}));
  TUNEC_ASSIGN_OR_RETURN(ValueId zp, addPart(ctx, "zp.f", OpKind::Neg, NoAttrs{}, {ratio}));
  TUNEC_ASSIGN_OR_RETURN(zp, addPart(ctx, "zp.saturated", OpKind::Clip, ClipAttrs{0, 255}, {zp}));
  TUNEC_ASSIGN_OR_RETURN(zp, addPart(ctx, "zp.rounded", OpKind::Round, RoundAttrs{}, {zp}));
  TUNEC_ASSIGN_OR_RETURN(zp, addPart(ctx, "zp", OpKind::Cast, CastAttrs{DType::U8}, {zp}));
  Conversion c{OpKind::QuantizeLinear, QuantAttrs{0}, {x, scale, zp}};
  c.valueOutputs = {{1, scale}, {2, zp}};
  return c;
}

template <OpKind K> Result convertPool(ConvertContext& ctx) {
  const Shape& x = ctx.inputType(0).shape;
  auto kernel = ctx.attrs.getInts("kernel_shape");
  if (!kernel) return makeError("kernel_shape is required");
  if (x.rank() != static_cast<int>(kernel->size()) + 2)
    return makeError("input ", x.toString(), " does not fit kernel_shape of rank ", kernel->size());
  TUNEC_ASSIGN_OR_RETURN(Window w, readWindow(ctx, *kernel, x, true));
  PoolAttrs a{w.kernel,
              w.strides,
              w.pads,
              w.dilations,
              ctx.attrs.getInt("ceil_mode", 0) != 0,
              ctx.attrs.getInt("count_include_pad", 0) != 0,
              ctx.attrs.getInt("p", 2)};
  if (ctx.attrs.getInt("storage_order", 0) != 0)
    return makeError("storage_order=1 (column-major indices) is not supported");
  return simple(ctx, K, a);
}

// ---- matmul family ----------------------------------------------------------------------------

Result convertGemm(ConvertContext& ctx) {
  ctx.attrs.ignore("broadcast");
  for (const char* flag : {"transA", "transB"})
    if (int64_t v = ctx.attrs.getInt(flag, 0); v != 0 && v != 1)
      return makeError(flag, "=", v, " must be 0 or 1");
  GemmAttrs a{ctx.attrs.getFloat("alpha", 1.f), ctx.attrs.getFloat("beta", 1.f),
              ctx.attrs.getInt("transA", 0) != 0, ctx.attrs.getInt("transB", 0) != 0};
  return simple(ctx, OpKind::Gemm, a);
}

// ---- normalization ----------------------------------------------------------------------------

template <OpKind K> Result convertSoftmax(ConvertContext& ctx) {
  bool legacy = ctx.opset < 13;
  SoftmaxAttrs a{ctx.attrs.getInt("axis", legacy ? 1 : -1), legacy};
  TUNEC_ASSIGN_OR_RETURN(a.axis, normalizeDimAxis(a.axis, ctx.inputType(0).shape.rank()));
  return simple(ctx, K, a);
}

Result convertLayerNorm(ConvertContext& ctx) {
  if (ctx.attrs.getInt("stash_type", 1) != 1)
    return makeError("stash_type other than float is not supported");
  NormAttrs a{ctx.attrs.getInt("axis", -1), ctx.attrs.getFloat("epsilon", 1e-5f)};
  TUNEC_ASSIGN_OR_RETURN(a.axis, normalizeAxis(a.axis, ctx.inputType(0).shape.rank()));
  return simple(ctx, OpKind::LayerNormalization, a);
}

Result convertBatchNorm(ConvertContext& ctx) {
  ctx.attrs.ignore("momentum");
  ctx.attrs.ignore("is_test");
  ctx.attrs.ignore("consumed_inputs");
  if (ctx.attrs.getInt("training_mode", 0) != 0)
    return makeError("training_mode=1 is not supported (inference only)");
  if (ctx.attrs.getInt("spatial", 1) != 1) return makeError("spatial=0 is not supported");
  if (ctx.numOutputs > 1)
    return makeError("running mean/variance outputs (training) are not supported");
  return simple(ctx, OpKind::BatchNormalization,
                NormAttrs{1, ctx.attrs.getFloat("epsilon", 1e-5f)});
}

Result convertInstanceNorm(ConvertContext& ctx) {
  return simple(ctx, OpKind::InstanceNormalization,
                NormAttrs{1, ctx.attrs.getFloat("epsilon", 1e-5f)});
}

// ---- reductions -------------------------------------------------------------------------------

template <OpKind K> Result convertReduce(ConvertContext& ctx) {
  int rank = ctx.inputType(0).shape.rank();
  bool axesAsInput = (K == OpKind::ReduceSum && ctx.opset >= 13) || ctx.opset >= 18;
  std::vector<int64_t> axes;
  if (axesAsInput) {
    TUNEC_ASSIGN_OR_RETURN(auto t, ctx.constantInput(1, "axes"));
    if (t) axes = tensorInts(*t);
  } else {
    axes = ctx.attrs.getInts("axes").value_or(std::vector<int64_t>{});
  }
  bool keepDims = ctx.attrs.getInt("keepdims", 1) != 0;
  if (axes.empty() && ctx.attrs.getInt("noop_with_empty_axes", 0) != 0)
    return Conversion{OpKind::Identity, NoAttrs{}, {ctx.inputs[0]}};
  TUNEC_ASSIGN_OR_RETURN(axes, normalizeAxes(axes, rank));
  return Conversion{K, ReduceAttrs{axes, keepDims}, {ctx.inputs[0]}};
}

template <OpKind K> Result convertArgReduce(ConvertContext& ctx) {
  ArgReduceAttrs a{ctx.attrs.getInt("axis", 0), ctx.attrs.getInt("keepdims", 1) != 0,
                   ctx.attrs.getInt("select_last_index", 0) != 0};
  TUNEC_ASSIGN_OR_RETURN(a.axis, normalizeDimAxis(a.axis, ctx.inputType(0).shape.rank()));
  return simple(ctx, K, a);
}

// ---- data movement ----------------------------------------------------------------------------

// A target with symbolic entries (a shape value computed from the input's dimensions): 0 copies
// the input's dimension, -1 is the exact quotient of the element counts.
Result convertSymbolicReshape(ConvertContext& ctx, std::vector<Dim> target, bool allowZero) {
  const Shape& x = ctx.inputType(0).shape;
  DimExpr elements(1), known(1);
  for (const Dim& d : x.symbolicDims()) elements = elements * d.expr;
  int inferred = -1;
  for (size_t i = 0; i < target.size(); ++i) {
    if (target[i] == Dim(0) && !allowZero) {
      if (static_cast<int>(i) >= x.rank())
        return makeError("shape entry 0 at ", i, " has no input dim to copy");
      target[i] = x.dim(static_cast<int>(i));
    }
    if (target[i] == Dim(-1)) {
      if (inferred >= 0) return makeError("shape has more than one -1");
      inferred = static_cast<int>(i);
      continue;
    }
    known = known * target[i].expr;
  }
  if (inferred >= 0) {
    auto rest = elements.divideExactly(known);
    if (!rest)
      return makeError("cannot infer the -1 in shape: ", elements.toString(),
                       " elements do not divide by ", known.toString());
    target[static_cast<size_t>(inferred)] = dimWithin(*rest, ctx.options.inputDims.ranges);
  }
  return Conversion{OpKind::Reshape, ReshapeAttrs{target}, {ctx.inputs[0]}};
}

Result convertReshape(ConvertContext& ctx) {
  std::vector<int64_t> target;
  bool allowZero = ctx.attrs.getInt("allowzero", 0) != 0;
  if (ctx.opset < 5) {
    target = ctx.attrs.getInts("shape").value_or(std::vector<int64_t>{});
  } else {
    TUNEC_ASSIGN_OR_RETURN(auto dims, ctx.shapeInput(1, "target shape"));
    if (!dims) return makeError("the shape input is required");
    bool symbolic = !ctx.inputType(0).shape.isStatic();
    for (const Dim& d : *dims) symbolic = symbolic || !d.isStatic();
    if (symbolic) return convertSymbolicReshape(ctx, *dims, allowZero);
    for (const Dim& d : *dims) target.push_back(*d.expr.constant());
  }
  const Shape& x = ctx.inputType(0).shape;
  int64_t known = 1;
  int inferred = -1;
  for (size_t i = 0; i < target.size(); ++i) {
    if (target[i] == 0 && !allowZero) {
      if (static_cast<int>(i) >= x.rank())
        return makeError("shape entry 0 at ", i, " has no input dim to copy");
      target[i] = x[static_cast<int>(i)];
    }
    if (target[i] == -1) {
      if (inferred >= 0) return makeError("shape has more than one -1");
      inferred = static_cast<int>(i);
      continue;
    }
    if (target[i] < 0) return makeError("shape entry ", target[i], " is negative");
    known *= target[i];
  }
  if (inferred >= 0) {
    if (known == 0 || x.numel() % known != 0)
      return makeError("cannot infer the -1 in shape: ", x.numel(), " elements do not divide by ",
                       known);
    target[static_cast<size_t>(inferred)] = x.numel() / known;
  }
  return Conversion{OpKind::Reshape, ReshapeAttrs{{target.begin(), target.end()}}, {ctx.inputs[0]}};
}

Result convertFlatten(ConvertContext& ctx) {
  int64_t axis = ctx.attrs.getInt("axis", 1);
  int rank = ctx.inputType(0).shape.rank();
  if (axis < 0) axis += rank;
  return simple(ctx, OpKind::Flatten, AxisAttrs{axis});
}

template <OpKind K> Result convertSqueezeFamily(ConvertContext& ctx) {
  std::vector<int64_t> axes;
  if (ctx.opset >= 13) {
    TUNEC_ASSIGN_OR_RETURN(auto t, ctx.constantInput(1, "axes"));
    if (t) axes = tensorInts(*t);
  } else {
    axes = ctx.attrs.getInts("axes").value_or(std::vector<int64_t>{});
  }
  int rank = ctx.inputType(0).shape.rank();
  if (K == OpKind::Unsqueeze) rank += static_cast<int>(axes.size());
  TUNEC_ASSIGN_OR_RETURN(axes, normalizeAxes(axes, rank));
  return Conversion{K, AxesAttrs{axes}, {ctx.inputs[0]}};
}

Result convertTranspose(ConvertContext& ctx) {
  int rank = ctx.inputType(0).shape.rank();
  std::vector<int64_t> reversed(static_cast<size_t>(rank));
  std::iota(reversed.rbegin(), reversed.rend(), 0);
  return simple(ctx, OpKind::Transpose,
                TransposeAttrs{ctx.attrs.getInts("perm").value_or(reversed)});
}

Result convertConcat(ConvertContext& ctx) {
  TUNEC_ASSIGN_OR_RETURN(
      int64_t axis, normalizeDimAxis(ctx.attrs.getInt("axis", 1), ctx.inputType(0).shape.rank()));
  return simple(ctx, OpKind::Concat, AxisAttrs{axis});
}

Result convertSplit(ConvertContext& ctx) {
  const Shape& x = ctx.inputType(0).shape;
  TUNEC_ASSIGN_OR_RETURN(int64_t axis, normalizeDimAxis(ctx.attrs.getInt("axis", 0), x.rank()));
  std::vector<int64_t> sizes;
  if (ctx.opset >= 13) {
    TUNEC_ASSIGN_OR_RETURN(auto t, ctx.constantInput(1, "split sizes"));
    if (t) sizes = tensorInts(*t);
  } else {
    sizes = ctx.attrs.getInts("split").value_or(std::vector<int64_t>{});
  }
  int64_t n = ctx.attrs.getInt("num_outputs", ctx.numOutputs);
  if (n < 1 || n > 65536) return makeError("Split into ", n, " outputs");
  int64_t len = x[static_cast<int>(axis)];
  if (sizes.empty()) {
    int64_t chunk = (len + n - 1) / n;
    for (int64_t i = 0; i < n; ++i) sizes.push_back(std::min(chunk, len - i * chunk));
    if (ctx.opset < 18 && len % n != 0)
      return makeError("axis size ", len, " does not split evenly into ", n, " outputs");
  }
  return Conversion{OpKind::Split, SplitAttrs{axis, sizes}, {ctx.inputs[0]}};
}

// A slice whose end is symbolic (positions[:, :sequence], a constant table cut to the run's
// length): from 0 with step 1 along its axis, the end within the axis for every value of the
// symbols, so that no clamping depends on them.
Result convertPrefixSlice(ConvertContext& ctx, const std::vector<Dim>& ends) {
  const Shape& x = ctx.inputType(0).shape;
  TUNEC_ASSIGN_OR_RETURN(auto s, ctx.constantInput(1, "starts"));
  TUNEC_ASSIGN_OR_RETURN(auto a, ctx.constantInput(3, "axes"));
  TUNEC_ASSIGN_OR_RETURN(auto st, ctx.constantInput(4, "steps"));
  std::vector<int64_t> starts = s ? tensorInts(*s) : std::vector<int64_t>{};
  std::vector<int64_t> axes = a ? tensorInts(*a) : std::vector<int64_t>{};
  if (axes.empty())
    for (size_t i = 0; i < ends.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  if (starts.size() != ends.size() || axes.size() != ends.size())
    return makeError("starts, ends and axes have different lengths");
  SliceAttrs out;
  out.starts.assign(static_cast<size_t>(x.rank()), 0);
  out.steps.assign(static_cast<size_t>(x.rank()), 1);
  out.extents = x.symbolicDims();
  for (size_t i = 0; i < axes.size(); ++i) {
    TUNEC_ASSIGN_OR_RETURN(int64_t axis, normalizeDimAxis(axes[i], x.rank()));
    const Dim dim = x.dim(static_cast<int>(axis));
    const Dim& end = ends[i];
    bool prefix = starts[i] == 0 && dim.isStatic() && end.min >= 0 && end.max <= dim.max &&
                  (!st || tensorInts(*st)[i] == 1);
    if (!prefix && !end.isStatic())
      return makeError("a slice to the symbolic end ", end.toString(), " is compiled from 0 with ",
                       "step 1 within its axis only (here start ", starts[i], ", axis size ",
                       dim.toString(), ")");
    if (!prefix)
      return makeError("a slice with a symbolic end slices its other axes from 0 to their end");
    out.extents[static_cast<size_t>(axis)] = end;
  }
  for (const Dim& d : out.extents) out.counts.push_back(d.max);
  return Conversion{OpKind::Slice, out, {ctx.inputs[0]}};
}

Result convertSlice(ConvertContext& ctx) {
  const Shape& x = ctx.inputType(0).shape;
  std::vector<int64_t> starts, ends, axes, steps;
  if (ctx.opset < 10) {
    starts = ctx.attrs.getInts("starts").value_or(std::vector<int64_t>{});
    ends = ctx.attrs.getInts("ends").value_or(std::vector<int64_t>{});
    axes = ctx.attrs.getInts("axes").value_or(std::vector<int64_t>{});
  } else {
    TUNEC_ASSIGN_OR_RETURN(auto symbolicEnds, ctx.shapeInput(2, "ends"));
    bool symbolic = false;
    for (const Dim& d : symbolicEnds.value_or(std::vector<Dim>{})) symbolic |= !d.isStatic();
    if (symbolic) return convertPrefixSlice(ctx, *symbolicEnds);
    TUNEC_ASSIGN_OR_RETURN(auto s, ctx.constantInput(1, "starts"));
    TUNEC_ASSIGN_OR_RETURN(auto e, ctx.constantInput(2, "ends"));
    TUNEC_ASSIGN_OR_RETURN(auto a, ctx.constantInput(3, "axes"));
    TUNEC_ASSIGN_OR_RETURN(auto st, ctx.constantInput(4, "steps"));
    if (!s || !e) return makeError("starts and ends are required");
    starts = tensorInts(*s);
    ends = tensorInts(*e);
    if (a) axes = tensorInts(*a);
    if (st) steps = tensorInts(*st);
  }
  if (axes.empty())
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size())
    return makeError("starts, ends, axes and steps have different lengths");
  SliceAttrs out;
  out.starts.assign(static_cast<size_t>(x.rank()), 0);
  out.steps.assign(static_cast<size_t>(x.rank()), 1);
  out.counts = x.dims();
  for (size_t i = 0; i < axes.size(); ++i) {
    TUNEC_ASSIGN_OR_RETURN(int64_t axis, normalizeDimAxis(axes[i], x.rank()));
    int64_t dim = x[static_cast<int>(axis)], step = steps[i];
    if (step == 0) return makeError("slice step is 0");
    int64_t start = starts[i], end = ends[i];
    if (start < 0) start += dim;
    if (end < 0) end += dim;
    if (step > 0) {
      start = std::clamp<int64_t>(start, 0, dim);
      end = std::clamp<int64_t>(end, 0, dim);
    } else {
      start = std::clamp<int64_t>(start, -1, dim - 1);
      end = std::clamp<int64_t>(end, -1, dim - 1);
    }
    int64_t count =
        step > 0 ? (end - start + step - 1) / step : (start - end + (-step) - 1) / (-step);
    auto ua = static_cast<size_t>(axis);
    out.starts[ua] = count > 0 ? start : 0;
    out.steps[ua] = step;
    out.counts[ua] = std::max<int64_t>(count, 0);
    const Dim d = x.dim(static_cast<int>(axis));
    if (!d.isStatic() && (out.starts[ua] != 0 || step != 1 || out.counts[ua] != dim))
      return makeError("slices the symbolic axis ", axis, " (", d.toString(), ") with constant ",
                       "bounds (", starts[i], "..", ends[i], "); tunec compiles such a slice on ",
                       "static axes, or to a symbolic end from 0");
  }
  if (!x.isStatic()) {
    // Constant bounds on static axes; the symbolic ones are kept whole.
    out.extents = x.symbolicDims();
    for (size_t d = 0; d < out.extents.size(); ++d)
      if (out.extents[d].isStatic()) out.extents[d] = Dim(out.counts[d]);
  }
  return Conversion{OpKind::Slice, out, {ctx.inputs[0]}};
}

template <OpKind K> Result convertGather(ConvertContext& ctx) {
  TUNEC_ASSIGN_OR_RETURN(
      int64_t axis, normalizeDimAxis(ctx.attrs.getInt("axis", 0), ctx.inputType(0).shape.rank()));
  return simple(ctx, K, AxisAttrs{axis});
}

Result convertExpand(ConvertContext& ctx) {
  TUNEC_ASSIGN_OR_RETURN(auto target, ctx.shapeInput(1, "target shape"));
  if (!target) return makeError("the shape input is required");
  return Conversion{OpKind::Expand, ReshapeAttrs{*target}, {ctx.inputs[0]}};
}

// Trilu(input, k): the upper or lower triangle of the last two axes (a causal mask's
// torch.triu), k a constant.
Result convertTrilu(ConvertContext& ctx) {
  TUNEC_ASSIGN_OR_RETURN(auto k, ctx.constantInput(1, "k"));
  if (k && k->numel() != 1) return makeError("k must be a scalar");
  TriluAttrs a{k ? k->getInt(0) : 0, ctx.attrs.getInt("upper", 1) != 0};
  return Conversion{OpKind::Trilu, a, {ctx.inputs[0]}};
}

// The value a table of (name, value) pairs gives `name`, or an error naming the attribute.
template <typename T, size_t N>
Expected<T> namedValue(const std::pair<const char*, T> (&table)[N], const std::string& name,
                       const char* attribute) {
  for (const auto& [key, value] : table)
    if (name == key) return value;
  return makeError(attribute, " '", name, "' is not one ONNX defines");
}

// ConvTranspose(x, w [C, M/group, k...], bias) as the convolution it equals: x with stride - 1
// zeros between its elements along each spatial axis (a Reshape that adds a unit axis after
// each, a Pad of zeros along them, a Reshape back), padded by (k - 1) d - pad at each end (plus
// output_padding at the end; a negative amount crops), then a Conv of stride 1 and the same
// dilations whose weights are w's with input and output channels swapped within each group and
// the window reversed. The same products and sums (the zeros add nothing); pads from
// output_shape or auto_pad as ONNX defines them.
Result convertConvTranspose(ConvertContext& ctx) {
  const Shape x = ctx.inputType(0).shape;
  TUNEC_ASSIGN_OR_RETURN(auto wt, ctx.constantInput(1, "weights"));
  if (!wt) return makeError("the weights input is required");
  const Tensor w = *wt;
  const int r = x.rank() - 2;
  if (r < 1 || w.shape().rank() != r + 2)
    return makeError("input ", x.toString(), " and weights ", w.shape().toString(),
                     " are not of a ConvTranspose with 1 to 3 spatial axes");
  if (!x.isStatic()) return makeError("ConvTranspose of a symbolic shape is not compiled yet");
  const int64_t group = ctx.attrs.getInt("group", 1), c = x[1];
  if (group < 1 || c % group || w.shape()[0] != c)
    return makeError("weights ", w.shape().toString(), " do not fit ", c, " input channels in ",
                     group, " groups");
  const int64_t cg = c / group, mg = w.shape()[1], m = mg * group;
  const auto rs = static_cast<size_t>(r);
  std::vector<int64_t> kernel(w.shape().dims().begin() + 2, w.shape().dims().end());
  if (auto k = ctx.attrs.getInts("kernel_shape"); k && *k != kernel)
    return makeError("kernel_shape ", Shape(*k).toString(), " differs from the weights' ",
                     Shape(kernel).toString());
  auto ints = [&](const char* name, int64_t fill, size_t n) {
    return ctx.attrs.getInts(name).value_or(std::vector<int64_t>(n, fill));
  };
  std::vector<int64_t> strides = ints("strides", 1, rs), dilations = ints("dilations", 1, rs),
                       pads = ints("pads", 0, 2 * rs), extra = ints("output_padding", 0, rs);
  std::vector<int64_t> outputShape = ints("output_shape", 0, 0);
  const std::string autoPad = ctx.attrs.getString("auto_pad", "NOTSET");
  if (strides.size() != rs || dilations.size() != rs || pads.size() != 2 * rs || extra.size() != rs)
    return makeError("strides/dilations/pads/output_padding do not match a ", r, "-d kernel");
  for (size_t i = 0; i < rs; ++i)
    if (strides[i] < 1 || dilations[i] < 1 || kernel[i] < 1 || extra[i] < 0 || pads[i] < 0 ||
        pads[i + rs] < 0)
      return makeError("kernel, strides and dilations must be positive, pads and "
                       "output_padding at least 0");
  if (outputShape.size() == rs + 2) outputShape.erase(outputShape.begin(), outputShape.begin() + 2);
  if (!outputShape.empty() && outputShape.size() != rs)
    return makeError("output_shape ", Shape(outputShape).toString(), " does not match ", r,
                     " spatial axes");
  if (outputShape.empty() && (autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER"))
    for (size_t i = 0; i < rs; ++i) outputShape.push_back(x[static_cast<int>(i) + 2] * strides[i]);
  if (autoPad == "VALID")
    std::fill(pads.begin(), pads.end(), 0);
  else if (autoPad != "NOTSET" && autoPad != "SAME_UPPER" && autoPad != "SAME_LOWER")
    return makeError("auto_pad='", autoPad, "' is not NOTSET, SAME_UPPER, SAME_LOWER or VALID");
  if (!outputShape.empty())
    for (size_t i = 0; i < rs; ++i) {
      const int64_t total = strides[i] * (x[static_cast<int>(i) + 2] - 1) + extra[i] +
                            (kernel[i] - 1) * dilations[i] + 1 - outputShape[i];
      // Floor division (ONNX's reference): a negative total (an output_shape past the
      // natural size) pads the end.
      const int64_t half = total >= 0 ? total / 2 : -((-total + 1) / 2);
      pads[i] = autoPad == "SAME_UPPER" ? half : total - half;
      pads[i + rs] = total - pads[i];
    }
  // A 2-d window as large as its stride, unpadded and undilated (a U-Net's or a detector's
  // upsampling by 2x2 / stride 2) writes each output element from one input element: a 1x1
  // Conv to M x kh x kw channels, then each pixel's channels moved to its kh x kw window
  // (Reshape, Transpose, Reshape), without the spread form's zeros.
  bool disjoint = r == 2 && (!ctx.hasInput(2) || ctx.graph.value(ctx.inputs[2]).constant);
  for (size_t i = 0; i < rs; ++i)
    disjoint = disjoint && kernel[i] == strides[i] && dilations[i] == 1 && pads[i] == 0 &&
               pads[i + rs] == 0 && extra[i] == 0;
  if (disjoint) {
    const int64_t kh = kernel[0], kw = kernel[1], taps = kh * kw;
    Tensor pointwise(w.dtype(), Shape{m * taps, cg, 1, 1});
    for (int64_t g = 0; g < group; ++g)
      for (int64_t o = 0; o < mg; ++o)
        for (int64_t t = 0; t < taps; ++t)
          for (int64_t i = 0; i < cg; ++i)
            pointwise.setDouble((((g * mg + o) * taps + t) * cg) + i,
                                w.getDouble(((g * cg + i) * mg + o) * taps + t));
    std::vector<ValueId> inputs = {ctx.inputs[0],
                                   addPartConstant(ctx, "pointwise", std::move(pointwise))};
    if (ctx.hasInput(2)) {
      const Tensor bias = *ctx.graph.value(ctx.inputs[2]).constant;
      Tensor spread(bias.dtype(), Shape{m * taps});
      for (int64_t i = 0; i < m * taps; ++i) spread.setDouble(i, bias.getDouble(i / taps));
      inputs.push_back(addPartConstant(ctx, "pointwise.bias", std::move(spread)));
    }
    ConvAttrs a{{1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}, group};
    TUNEC_ASSIGN_OR_RETURN(ValueId y, addPart(ctx, "pointwise", OpKind::Conv, a, inputs));
    const int64_t n = x[0], h = x[2], wd = x[3];
    TUNEC_ASSIGN_OR_RETURN(
        y, addPart(ctx, "windows", OpKind::Reshape,
                   ReshapeAttrs{{Dim(n), Dim(m), Dim(kh), Dim(kw), Dim(h), Dim(wd)}}, {y}));
    TUNEC_ASSIGN_OR_RETURN(
        y, addPart(ctx, "placed", OpKind::Transpose, TransposeAttrs{{0, 1, 4, 2, 5, 3}}, {y}));
    return Conversion{
        OpKind::Reshape, ReshapeAttrs{{Dim(n), Dim(m), Dim(h * kh), Dim(wd * kw)}}, {y}};
  }
  // The weights as a Conv's: [M, C/group, k...], channels swapped per group, window reversed.
  Shape ws(std::vector<int64_t>{m, cg});
  std::vector<int64_t> wd = ws.dims();
  wd.insert(wd.end(), kernel.begin(), kernel.end());
  Tensor flipped(w.dtype(), Shape(wd));
  const int64_t taps = Shape(kernel).numel();
  const std::vector<int64_t> ks = Shape(kernel).strides();
  for (int64_t g = 0; g < group; ++g)
    for (int64_t o = 0; o < mg; ++o)
      for (int64_t i = 0; i < cg; ++i)
        for (int64_t t = 0; t < taps; ++t) {
          int64_t reversed = 0;
          for (size_t d = 0; d < rs; ++d)
            reversed += (kernel[d] - 1 - t / ks[d] % kernel[d]) * ks[d];
          flipped.setDouble(((g * mg + o) * cg + i) * taps + t,
                            w.getDouble(((g * cg + i) * mg + o) * taps + reversed));
        }
  // x with stride - 1 zeros after each element (and after the last: cropped below).
  ValueId in = ctx.inputs[0];
  std::vector<int64_t> begin(rs), end(rs);
  bool spread = false;
  for (size_t i = 0; i < rs; ++i) {
    begin[i] = (kernel[i] - 1) * dilations[i] - pads[i];
    end[i] = (kernel[i] - 1) * dilations[i] - pads[i + rs] + extra[i] - (strides[i] - 1);
    spread = spread || strides[i] > 1;
  }
  if (spread) {
    std::vector<Dim> split = {x.dim(0), x.dim(1)}, merged = {x.dim(0), x.dim(1)};
    PadAttrs zeros{PadMode::Constant, std::vector<int64_t>(2 * (rs * 2 + 2), 0), 0.0};
    for (size_t i = 0; i < rs; ++i) {
      split.push_back(x.dim(static_cast<int>(i) + 2));
      split.push_back(Dim(1));
      merged.push_back(Dim(x[static_cast<int>(i) + 2] * strides[i]));
      zeros.pads[2 * rs + 2 + 2 + 2 * i + 1] = strides[i] - 1; // the end of unit axis i
    }
    TUNEC_ASSIGN_OR_RETURN(in, addPart(ctx, "split", OpKind::Reshape, ReshapeAttrs{split}, {in}));
    TUNEC_ASSIGN_OR_RETURN(in, addPart(ctx, "spread", OpKind::Pad, zeros, {in}));
    TUNEC_ASSIGN_OR_RETURN(in, addPart(ctx, "merged", OpKind::Reshape, ReshapeAttrs{merged}, {in}));
  }
  // The borders: what is negative is cropped here, the rest is the Conv's padding.
  ConvAttrs a{kernel, std::vector<int64_t>(rs, 1), std::vector<int64_t>(2 * rs, 0), dilations,
              group};
  PadAttrs crop{PadMode::Constant, std::vector<int64_t>(2 * rs + 4, 0), 0.0};
  bool crops = false;
  for (size_t i = 0; i < rs; ++i) {
    a.pads[i] = std::max<int64_t>(begin[i], 0);
    a.pads[i + rs] = std::max<int64_t>(end[i], 0);
    crop.pads[i + 2] = std::min<int64_t>(begin[i], 0);
    crop.pads[i + 2 + rs + 2] = std::min<int64_t>(end[i], 0);
    crops = crops || begin[i] < 0 || end[i] < 0;
  }
  if (crops) {
    TUNEC_ASSIGN_OR_RETURN(in, addPart(ctx, "cropped", OpKind::Pad, crop, {in}));
  }
  std::vector<ValueId> inputs = {in, addPartConstant(ctx, "weights", std::move(flipped))};
  if (ctx.hasInput(2)) inputs.push_back(ctx.inputs[2]);
  return Conversion{OpKind::Conv, a, inputs};
}

// Resize (opsets 10 to 19) and Upsample (7 and 9): the output dims and each axis's scale
// decided here from constant scales or sizes (ONNX's rules: a scale gives floor(length x
// scale); sizes give their scale as size / length, or one scale for all the given axes under
// keep_aspect_ratio_policy, the sizes then round(length x scale)). Opset 10 and Upsample map
// coordinates asymmetrically, nearest by ONNX Runtime's rule for them (floor when enlarging).
Result convertResize(ConvertContext& ctx) {
  const Shape& x = ctx.inputType(0).shape;
  if (!x.isStatic())
    return makeError("Resize of the symbolic shape ", x.toString(),
                     " is not compiled yet; give the input a static shape (--input-shape)");
  const int rank = x.rank();
  const bool upsample = ctx.proto.op_type() == "Upsample";
  const bool legacy = upsample || ctx.opset < 11;
  ResizeAttrs a;
  std::string mode = ctx.attrs.getString("mode", "nearest");
  if (mode == "nearest")
    a.mode = ResizeMode::Nearest;
  else if (mode == "linear" || mode == "bilinear")
    a.mode = ResizeMode::Linear;
  else if (mode == "cubic" && !legacy)
    a.mode = ResizeMode::Cubic;
  else
    return makeError("mode '", mode, "' is not a Resize mode (nearest, linear, cubic)");
  if (legacy) {
    a.coordinates = ResizeCoordinates::Asymmetric;
    a.nearest = NearestRounding::Simple;
  } else {
    static const std::pair<const char*, ResizeCoordinates> kCoordinates[] = {
        {"half_pixel", ResizeCoordinates::HalfPixel},
        {"pytorch_half_pixel", ResizeCoordinates::PytorchHalfPixel},
        {"align_corners", ResizeCoordinates::AlignCorners},
        {"asymmetric", ResizeCoordinates::Asymmetric},
        {"tf_half_pixel_for_nn", ResizeCoordinates::TfHalfPixelForNn},
        {"half_pixel_symmetric", ResizeCoordinates::HalfPixelSymmetric}};
    std::string c = ctx.attrs.getString("coordinate_transformation_mode", "half_pixel");
    if (c == "tf_crop_and_resize")
      return makeError("coordinate_transformation_mode 'tf_crop_and_resize' (a crop by its roi "
                       "input) is not supported yet");
    TUNEC_ASSIGN_OR_RETURN(a.coordinates,
                           namedValue(kCoordinates, c, "coordinate_transformation_mode"));
    static const std::pair<const char*, NearestRounding> kNearest[] = {
        {"round_prefer_floor", NearestRounding::RoundPreferFloor},
        {"round_prefer_ceil", NearestRounding::RoundPreferCeil},
        {"floor", NearestRounding::Floor},
        {"ceil", NearestRounding::Ceil}};
    TUNEC_ASSIGN_OR_RETURN(
        a.nearest, namedValue(kNearest, ctx.attrs.getString("nearest_mode", "round_prefer_floor"),
                              "nearest_mode"));
    a.cubicA = ctx.attrs.getFloat("cubic_coeff_a", -0.75f);
    a.excludeOutside = ctx.attrs.getInt("exclude_outside", 0) != 0;
    if (ctx.attrs.getInt("antialias", 0) != 0)
      return makeError("antialias=1 (a wider filter when shrinking) is not supported yet");
    ctx.attrs.getFloat("extrapolation_value", 0.f); // tf_crop_and_resize's only (refused above)
  }
  // The axes the scales or sizes are given for (opset 18's axes; all of them before).
  std::vector<int64_t> axes;
  if (auto given = ctx.attrs.getInts("axes")) {
    for (int64_t axis : *given) {
      TUNEC_ASSIGN_OR_RETURN(int64_t normalized, normalizeDimAxis(axis, rank));
      if (std::find(axes.begin(), axes.end(), normalized) != axes.end())
        return makeError("axes repeat axis ", axis);
      axes.push_back(normalized);
    }
  } else {
    for (int64_t d = 0; d < rank; ++d) axes.push_back(d);
  }
  std::vector<double> scales;
  std::vector<int64_t> sizes;
  if (upsample && ctx.opset < 9) {
    auto given = ctx.attrs.getFloats("scales");
    if (!given) return makeError("the scales attribute is required");
    scales.assign(given->begin(), given->end());
  } else {
    size_t scalesAt = legacy ? 1 : 2;
    TUNEC_ASSIGN_OR_RETURN(auto s, ctx.constantInput(scalesAt, "scales"));
    if (s && s->numel() > 0)
      for (int64_t i = 0; i < s->numel(); ++i) scales.push_back(s->getDouble(i));
    if (!legacy) {
      TUNEC_ASSIGN_OR_RETURN(auto z, ctx.constantInput(3, "sizes"));
      if (z && z->numel() > 0) sizes = tensorInts(*z);
    }
  }
  if (scales.empty() == sizes.empty())
    return makeError(scales.empty()
                         ? "neither scales nor sizes is given"
                         : "both scales and sizes are given (one of them must be empty)");
  size_t given = scales.empty() ? sizes.size() : scales.size();
  if (given != axes.size())
    return makeError(scales.empty() ? "sizes" : "scales", " has ", given, " entries for ",
                     axes.size(), " axes");
  a.sizes = x.dims();
  a.scales.assign(static_cast<size_t>(rank), 1.0);
  if (!scales.empty()) {
    for (size_t i = 0; i < axes.size(); ++i) {
      double scale = scales[i];
      if (!(scale > 0) || !std::isfinite(scale))
        return makeError("scale ", scale, " of axis ", axes[i], " is not positive and finite");
      auto d = static_cast<size_t>(axes[i]);
      a.scales[d] = scale;
      a.sizes[d] = static_cast<int64_t>(std::floor(static_cast<double>(x.dims()[d]) * scale));
    }
  }
  // keep_aspect_ratio_policy applies to sizes only.
  std::string policy = ctx.attrs.getString("keep_aspect_ratio_policy", "stretch");
  if (!sizes.empty()) {
    if (policy != "stretch" && policy != "not_larger" && policy != "not_smaller")
      return makeError("keep_aspect_ratio_policy '", policy, "' is not one ONNX defines");
    double common = policy == "not_larger" ? INFINITY : 0.0;
    for (size_t i = 0; i < axes.size(); ++i) {
      int64_t length = x.dims()[static_cast<size_t>(axes[i])];
      if (sizes[i] < 0 || length == 0)
        return makeError("size ", sizes[i], " of axis ", axes[i], " (of length ", length,
                         ") cannot be resized to");
      double scale = static_cast<double>(sizes[i]) / static_cast<double>(length);
      common = policy == "not_larger" ? std::min(common, scale) : std::max(common, scale);
    }
    for (size_t i = 0; i < axes.size(); ++i) {
      auto d = static_cast<size_t>(axes[i]);
      double length = static_cast<double>(x.dims()[d]);
      if (policy == "stretch") {
        a.sizes[d] = sizes[i];
        a.scales[d] = static_cast<double>(sizes[i]) / length;
      } else {
        a.scales[d] = common;
        a.sizes[d] = static_cast<int64_t>(std::nearbyint(common * length));
      }
    }
  }
  for (size_t d = 0; d < a.sizes.size(); ++d)
    if (a.sizes[d] < 1 && x.dims()[d] > 0)
      return makeError("axis ", d, " of length ", x.dims()[d], " would be resized to ", a.sizes[d]);
  return Conversion{OpKind::Resize, a, {ctx.inputs[0]}};
}

// Range(start, limit, delta) of constants is a constant; with a symbolic limit (the arange of
// the run's length that causal masks compare) it is the prefix of the bound's table: the values
// are the same at every length, only the count is the run's.
Result convertRange(ConvertContext& ctx) {
  const auto& inputs = ctx.graph.inputs();
  for (size_t i = 0; i < 3; ++i) {
    ValueId v = ctx.inputs[i];
    bool shape = ctx.shapeValues && ctx.shapeValues->count(v);
    bool bindable = std::find(inputs.begin(), inputs.end(), v) != inputs.end();
    if (!ctx.graph.value(v).constant && !shape && !bindable)
      return makeError("a Range of computed values is not supported: its start, limit and delta ",
                       "must be constants or the model's dimensions ('", ctx.graph.value(v).name,
                       "' is computed)");
  }
  TUNEC_ASSIGN_OR_RETURN(auto start, ctx.shapeInput(0, "start"));
  TUNEC_ASSIGN_OR_RETURN(auto limit, ctx.shapeInput(1, "limit"));
  TUNEC_ASSIGN_OR_RETURN(auto delta, ctx.shapeInput(2, "delta"));
  if (!start || !limit || !delta || start->size() != 1 || limit->size() != 1 || delta->size() != 1)
    return makeError("start, limit and delta must be scalars");
  DType dtype = ctx.inputType(0).dtype;
  if (!isInteger(dtype)) {
    TUNEC_ASSIGN_OR_RETURN(auto s, ctx.constantInput(0, "start"));
    TUNEC_ASSIGN_OR_RETURN(auto l, ctx.constantInput(1, "limit"));
    TUNEC_ASSIGN_OR_RETURN(auto d, ctx.constantInput(2, "delta"));
    double first = s->getDouble(0), step = d->getDouble(0);
    if (step == 0) return makeError("delta is 0");
    double n = std::max(std::ceil((l->getDouble(0) - first) / step), 0.0);
    if (n > (1 << 24)) return makeError("Range of ", n, " elements");
    Tensor t(dtype, Shape({static_cast<int64_t>(n)}));
    for (int64_t i = 0; i < t.numel(); ++i) t.setDouble(i, first + static_cast<double>(i) * step);
    return Conversion{OpKind::Identity, NoAttrs{}, {addPartConstant(ctx, "values", std::move(t))}};
  }
  auto first = (*start)[0].expr.constant(), step = (*delta)[0].expr.constant();
  if (!first || !step)
    return makeError("Range from ", (*start)[0].toString(), " by ", (*delta)[0].toString(),
                     ": tunec compiles a Range of symbolic start or delta only when they are ",
                     "constants (a symbolic limit is fine)");
  if (*step != 1 && !(*limit)[0].isStatic())
    return makeError("Range to the symbolic limit ", (*limit)[0].toString(), " by ", *step,
                     ": only a step of 1 is compiled to a symbolic limit");
  if (*step == 0) return makeError("delta is 0");
  const Dim& end = (*limit)[0];
  auto count = [&](int64_t l) {
    return std::max<int64_t>((l - *first + *step + (*step > 0 ? -1 : 1)) / *step, 0);
  };
  int64_t n = count(end.max);
  if (n > (1 << 24)) return makeError("Range of ", n, " elements");
  Tensor t(dtype, Shape({n}));
  for (int64_t i = 0; i < n; ++i) t.setInt(i, *first + i * *step);
  ValueId table = addPartConstant(ctx, "values", std::move(t));
  if (end.isStatic()) return Conversion{OpKind::Identity, NoAttrs{}, {table}};
  if (end.min < *first)
    return makeError("Range from ", *first, " to ", end.toString(), ", which may be below it (",
                     end.min, "..", end.max, "): give the symbols bounds that keep it positive");
  Dim length = dimWithin(end.expr - DimExpr(*first), ctx.options.inputDims.ranges);
  SliceAttrs a{{0}, {1}, {length.max}, {length}, {}};
  return Conversion{OpKind::Slice, a, {table}};
}

Result convertTile(ConvertContext& ctx) {
  TUNEC_ASSIGN_OR_RETURN(auto t, ctx.constantInput(1, "repeats"));
  if (!t) return makeError("the repeats input is required");
  return Conversion{OpKind::Tile, TileAttrs{tensorInts(*t)}, {ctx.inputs[0]}};
}

Result convertPad(ConvertContext& ctx) {
  PadAttrs a;
  std::string mode = ctx.attrs.getString("mode", "constant");
  if (mode == "constant")
    a.mode = PadMode::Constant;
  else if (mode == "reflect")
    a.mode = PadMode::Reflect;
  else if (mode == "edge")
    a.mode = PadMode::Edge;
  else
    return makeError("pad mode '", mode, "' is not supported (constant, reflect, edge)");
  int rank = ctx.inputType(0).shape.rank();
  if (ctx.opset < 11) {
    a.pads =
        ctx.attrs.getInts(ctx.opset < 2 ? "paddings" : "pads").value_or(std::vector<int64_t>{});
    a.value = ctx.attrs.getFloat("value", 0.f);
  } else {
    TUNEC_ASSIGN_OR_RETURN(auto p, ctx.constantInput(1, "pads"));
    TUNEC_ASSIGN_OR_RETURN(auto v, ctx.constantInput(2, "constant value"));
    TUNEC_ASSIGN_OR_RETURN(auto axesT, ctx.constantInput(3, "axes"));
    if (!p) return makeError("the pads input is required");
    std::vector<int64_t> pads = tensorInts(*p);
    if (v && v->numel() > 0) a.value = v->getDouble(0);
    if (axesT) {
      std::vector<int64_t> axes = tensorInts(*axesT);
      if (pads.size() != 2 * axes.size()) return makeError("pads do not have 2 entries per axis");
      a.pads.assign(static_cast<size_t>(2 * rank), 0);
      for (size_t i = 0; i < axes.size(); ++i) {
        TUNEC_ASSIGN_OR_RETURN(int64_t axis, normalizeDimAxis(axes[i], rank));
        a.pads[static_cast<size_t>(axis)] = pads[i];
        a.pads[static_cast<size_t>(axis + rank)] = pads[i + axes.size()];
      }
    } else {
      a.pads = pads;
    }
  }
  return Conversion{OpKind::Pad, a, {ctx.inputs[0]}};
}

// Of a symbolic shape (torch.full((n, n), v) at the run's length), the value expanded to it.
Result convertConstantOfShape(ConvertContext& ctx) {
  TUNEC_ASSIGN_OR_RETURN(auto dims, ctx.shapeInput(0, "shape"));
  if (!dims) return makeError("the shape input is required");
  ConstantOfShapeAttrs a{{}, DType::F32, 0.0};
  if (const onnx::TensorProto* value = ctx.attrs.getTensor("value")) {
    TUNEC_ASSIGN_OR_RETURN(Tensor v, tensorFromProto(*value, ctx.baseDir));
    if (v.numel() != 1) return makeError("value must have one element");
    a.dtype = v.dtype();
    a.value = v.getDouble(0);
  }
  bool symbolic = false;
  for (const Dim& d : *dims) {
    symbolic = symbolic || !d.isStatic();
    a.shape.push_back(d.max);
  }
  if (!symbolic) return Conversion{OpKind::ConstantOfShape, a, {}};
  Tensor scalar(a.dtype, Shape());
  scalar.setDouble(0, a.value);
  return Conversion{OpKind::Expand, ReshapeAttrs{*dims}, {addPartConstant(ctx, "value", scalar)}};
}

template <OpKind K> Result convertDepthToSpace(ConvertContext& ctx) {
  DepthToSpaceAttrs a{ctx.attrs.getInt("blocksize", 0), false};
  if (K == OpKind::DepthToSpace) {
    std::string mode = ctx.attrs.getString("mode", "DCR");
    if (mode != "DCR" && mode != "CRD") return makeError("mode '", mode, "' is not DCR or CRD");
    a.columnRowDepth = mode == "CRD";
  }
  return simple(ctx, K, a);
}

// ---- ONNX Runtime's QOperator ops (com.microsoft), as its quantizer writes them: each the float
// op between DequantizeLinear of its quantized inputs and a QuantizeLinear of its result, as
// ONNX Runtime's documentation defines them (docs/ContribOperators.md). Per-tensor parameters;
// a missing zero point is 0 of the input's type, and the output has the first input's type.

// A quantized data input: the input's index, and those of its scale and zero point.
struct QuantizedInput {
  size_t value, scale, zero;
};

// DequantizeLinear of a quantized data input (per tensor).
Expected<ValueId> dequantizeInput(ConvertContext& ctx, const std::string& part, QuantizedInput q) {
  if (!ctx.hasInput(q.value) || !ctx.hasInput(q.scale))
    return makeError("input ", q.value, " and its scale (input ", q.scale, ") are required");
  const DType type = ctx.inputType(q.value).dtype;
  if (type != DType::U8 && type != DType::I8)
    return makeError("quantized input ", q.value, " is ", dtypeName(type), ", not u8 or s8");
  if (ctx.inputType(q.scale).shape.numel() != 1)
    return makeError("input ", q.value, " has a scale of shape ",
                     ctx.inputType(q.scale).shape.toString(), " (one scale per tensor expected)");
  TUNEC_ASSIGN_OR_RETURN(ValueId scale, quantParameter(ctx, ctx.inputs[q.scale], part + ".s", -1));
  ValueId zero = kNoValue;
  if (ctx.hasInput(q.zero)) {
    TUNEC_ASSIGN_OR_RETURN(zero, quantParameter(ctx, ctx.inputs[q.zero], part + ".z", -1));
  }
  return dequantizePart(ctx, part, ctx.inputs[q.value], scale, zero, 0);
}

// QuantizeLinear of the float result `y` with the scale and zero point at inputs `scale` and
// `zero` (a missing zero point: 0 of `type`).
Result quantizeResult(ConvertContext& ctx, ValueId y, size_t scale, size_t zero, DType type) {
  if (!ctx.hasInput(scale)) return makeError("the output scale (input ", scale, ") is required");
  TUNEC_ASSIGN_OR_RETURN(ValueId ys, quantParameter(ctx, ctx.inputs[scale], "y.scale", -1));
  ValueId yz = kNoValue;
  if (ctx.hasInput(zero)) {
    TUNEC_ASSIGN_OR_RETURN(yz, quantParameter(ctx, ctx.inputs[zero], "y.zp", -1));
  } else {
    yz = addPartConstant(ctx, "y.zp", Tensor(type, Shape{}));
  }
  if (ctx.graph.value(ys).type.shape.numel() != 1)
    return makeError("the output scale has shape ", ctx.graph.value(ys).type.shape.toString(),
                     " (one scale per tensor expected)");
  return Conversion{OpKind::QuantizeLinear, QuantAttrs{0}, {y, ys, yz}};
}

// The float op of `kind` on the dequantized `inputs`, quantized with (inputs[ys], inputs[yz]).
Result qlinear(ConvertContext& ctx, const std::vector<QuantizedInput>& inputs, OpKind kind,
               OpAttrs attrs, size_t ys, size_t yz) {
  std::vector<ValueId> floats;
  for (size_t i = 0; i < inputs.size(); ++i) {
    TUNEC_ASSIGN_OR_RETURN(ValueId x, dequantizeInput(ctx, "x" + std::to_string(i), inputs[i]));
    floats.push_back(x);
  }
  TUNEC_ASSIGN_OR_RETURN(ValueId y, addPart(ctx, "float", kind, std::move(attrs), floats));
  return quantizeResult(ctx, y, ys, yz, ctx.inputType(inputs[0].value).dtype);
}

// QLinearAdd, QLinearMul(A, A_scale, A_zp, B, B_scale, B_zp, C_scale, C_zp) = Q(DQ(A) op DQ(B)).
template <OpKind K> Result convertQLinearBinary(ConvertContext& ctx) {
  return qlinear(ctx, {{0, 1, 2}, {3, 4, 5}}, K, NoAttrs{}, 6, 7);
}

// QLinearSigmoid(X, X_scale, X_zp, Y_scale, Y_zp); QLinearLeakyRelu the same, with alpha.
template <OpKind K> Result convertQLinearUnary(ConvertContext& ctx) {
  OpAttrs attrs = NoAttrs{};
  if (K == OpKind::LeakyRelu) attrs = AlphaBetaAttrs{ctx.attrs.getFloat("alpha", 0.01f), 0.f};
  return qlinear(ctx, {{0, 1, 2}}, K, attrs, 3, 4);
}

// QLinearGlobalAveragePool(X, x_scale, x_zp, y_scale, y_zp), NCHW or (channels_last) NHWC.
Result convertQLinearGlobalAveragePool(ConvertContext& ctx) {
  const int rank = ctx.inputType(0).shape.rank();
  if (rank < 3) return makeError("input of rank ", rank, " has no spatial axes");
  if (ctx.attrs.getInt("channels_last", 0) == 0)
    return qlinear(ctx, {{0, 1, 2}}, OpKind::GlobalAveragePool, NoAttrs{}, 3, 4);
  std::vector<int64_t> spatial;
  for (int d = 1; d < rank - 1; ++d) spatial.push_back(d);
  return qlinear(ctx, {{0, 1, 2}}, OpKind::ReduceMean, ReduceAttrs{spatial, true}, 3, 4);
}

// QLinearAveragePool(X, x_scale, x_zp, y_scale, y_zp) with AveragePool's attributes.
Result convertQLinearAveragePool(ConvertContext& ctx) {
  if (ctx.attrs.getInt("channels_last", 0) != 0)
    return makeError("channels_last=1 is not supported (NCHW only)");
  const std::vector<ValueId> in = ctx.inputs;
  ctx.inputs = {in[0]}; // the window attributes, read as AveragePool reads them
  auto pool = convertPool<OpKind::AveragePool>(ctx);
  ctx.inputs = in;
  if (!pool) return pool.error();
  return qlinear(ctx, {{0, 1, 2}}, OpKind::AveragePool, pool->attrs, 3, 4);
}

// QLinearSoftmax(X, X_scale, x_zp, y_scale, y_zp): `opset` names the Softmax it computes (before
// 13: over the axes from `axis` on, flattened).
Result convertQLinearSoftmax(ConvertContext& ctx) {
  const bool legacy = ctx.attrs.getInt("opset", 13) < 13;
  SoftmaxAttrs a{ctx.attrs.getInt("axis", legacy ? 1 : -1), legacy};
  TUNEC_ASSIGN_OR_RETURN(a.axis, normalizeDimAxis(a.axis, ctx.inputType(0).shape.rank()));
  return qlinear(ctx, {{0, 1, 2}}, OpKind::Softmax, a, 3, 4);
}

// QLinearConcat(Y_scale, Y_zp, X0, X0_scale, X0_zp, X1, ...) along `axis`.
Result convertQLinearConcat(ConvertContext& ctx) {
  if (ctx.inputs.size() < 5 || (ctx.inputs.size() - 2) % 3 != 0)
    return makeError("takes Y_scale, Y_zero_point, then (X, X_scale, X_zero_point) per input; ",
                     ctx.inputs.size(), " inputs given");
  std::vector<QuantizedInput> parts;
  for (size_t i = 2; i < ctx.inputs.size(); i += 3) parts.push_back({i, i + 1, i + 2});
  TUNEC_ASSIGN_OR_RETURN(
      int64_t axis, normalizeDimAxis(ctx.attrs.getInt("axis", 0), ctx.inputType(2).shape.rank()));
  return qlinear(ctx, parts, OpKind::Concat, AxisAttrs{axis}, 0, 1);
}

// QGemm(A, a_scale, a_zp, B, b_scale, b_zp, C, y_scale, y_zp) = alpha DQ(A) DQ(B) + DQ(C, a_scale
// b_scale), quantized with y_scale and y_zp when given (else f32): B per tensor or per output
// column, C an int32 bias of the product's scale.
Result convertQGemm(ConvertContext& ctx) {
  const bool transA = ctx.attrs.getInt("transA", 0) != 0,
             transB = ctx.attrs.getInt("transB", 0) != 0;
  const float alpha = ctx.attrs.getFloat("alpha", 1.f);
  TUNEC_ASSIGN_OR_RETURN(ValueId a, dequantizeInput(ctx, "a", {0, 1, 2}));
  if (ctx.inputType(3).shape.rank() != 2) return makeError("B must be 2-d");
  const int bAxis = transB ? 0 : 1;
  const int64_t n = ctx.inputType(3).shape[bAxis];
  TUNEC_ASSIGN_OR_RETURN(ValueId b,
                         dequantizePart(ctx, "b", ctx.inputs[3], ctx.inputs[4],
                                        ctx.hasInput(5) ? ctx.inputs[5] : kNoValue, bAxis));
  std::vector<ValueId> gemmIn = {a, b};
  if (ctx.hasInput(6)) {
    TUNEC_ASSIGN_OR_RETURN(ValueId as, quantParameter(ctx, ctx.inputs[1], "bias.as", n));
    TUNEC_ASSIGN_OR_RETURN(ValueId bs, quantParameter(ctx, ctx.inputs[4], "bias.bs", n));
    TUNEC_ASSIGN_OR_RETURN(ValueId cs,
                           addPart(ctx, "bias.scale", OpKind::Mul, NoAttrs{}, {as, bs}));
    TUNEC_ASSIGN_OR_RETURN(ValueId c, dequantizePart(ctx, "bias", ctx.inputs[6], cs, kNoValue, 0));
    gemmIn.push_back(c);
  }
  GemmAttrs attrs{alpha, 1.f, transA, transB};
  if (!ctx.hasInput(7)) return Conversion{OpKind::Gemm, attrs, gemmIn};
  TUNEC_ASSIGN_OR_RETURN(ValueId y, addPart(ctx, "float", OpKind::Gemm, attrs, gemmIn));
  return quantizeResult(ctx, y, 7, 8, ctx.inputType(0).dtype);
}

// MatMulIntegerToFloat(A, B, a_scale, b_scale, a_zp, b_zp, bias) = DQ(A) DQ(B) + bias, B's scale
// and zero point per tensor or per column.
Result convertMatMulIntegerToFloat(ConvertContext& ctx) {
  const int ra = ctx.inputType(0).shape.rank(), rb = ctx.inputType(1).shape.rank();
  TUNEC_ASSIGN_OR_RETURN(ValueId a,
                         dequantizePart(ctx, "a", ctx.inputs[0], ctx.inputs[2],
                                        ctx.hasInput(4) ? ctx.inputs[4] : kNoValue, ra - 2));
  TUNEC_ASSIGN_OR_RETURN(ValueId b,
                         dequantizePart(ctx, "b", ctx.inputs[1], ctx.inputs[3],
                                        ctx.hasInput(5) ? ctx.inputs[5] : kNoValue, rb - 1));
  if (!ctx.hasInput(6)) return Conversion{OpKind::MatMul, NoAttrs{}, {a, b}};
  TUNEC_ASSIGN_OR_RETURN(ValueId y, addPart(ctx, "float", OpKind::MatMul, NoAttrs{}, {a, b}));
  return Conversion{OpKind::Add, NoAttrs{}, {y, ctx.inputs[6]}};
}

// MatMulNBits(A, B, scales, zero_points, g_idx, bias): A [..., K] times the weight W [N, K]
// transposed, W quantized blockwise along K to `bits`-bit codes (packed low bits first into
// B [N, blocks, block_size * bits / 8] bytes): W[n, k] = (code - zero_point) * scale of (n,
// k / block_size), the zero point packed like the codes (default 2^(bits - 1)) or a float.
// It becomes tunec's MatMulNBits of one code a byte and float scales and zero points (-> Add of
// the bias): the 4- and 8-bit ones run on the weight-only kernel, the others dequantized.
Result convertMatMulNBits(ConvertContext& ctx) {
  const int64_t k = ctx.attrs.getInt("K", 0), n = ctx.attrs.getInt("N", 0);
  const int64_t bits = ctx.attrs.getInt("bits", 4), block = ctx.attrs.getInt("block_size", 0);
  // The compute type: 4 allows int8 activations (the int8 dot-product kernel where the target
  // has one), anything else f32.
  const int64_t accuracy = ctx.attrs.getInt("accuracy_level", 0);
  if (bits != 2 && bits != 4 && bits != 8)
    return makeError("bits ", bits, " is not supported (2, 4 or 8)");
  if (k < 1 || n < 1 || block < 16 || (block & (block - 1)) != 0 || k > (int64_t{1} << 20) ||
      n > (int64_t{1} << 20))
    return makeError("K ", k, ", N ", n, " and block_size ", block,
                     " must be positive, block_size a power of two of at least 16");
  if (ctx.hasInput(4)) return makeError("g_idx (input 4, deprecated) is not supported");
  const Shape& as = ctx.inputType(0).shape;
  if (as.rank() < 1 || as[as.rank() - 1] != k)
    return makeError("A ", as.toString(), " does not end in K = ", k);
  const int64_t blocks = (k + block - 1) / block, blob = block * bits / 8;
  TUNEC_ASSIGN_OR_RETURN(auto b, ctx.constantInput(1, "quantized weights"));
  TUNEC_ASSIGN_OR_RETURN(auto scales, ctx.constantInput(2, "scales"));
  TUNEC_ASSIGN_OR_RETURN(auto zp, ctx.constantInput(3, "zero points"));
  if (!b || !scales) return makeError("B (input 1) and scales (input 2) are required");
  if (b->dtype() != DType::U8 || b->numel() != n * blocks * blob)
    return makeError("B is ", b->typeString(), ", expected u8 of ", n, " x ", blocks, " x ", blob,
                     " (N x blocks x block bytes)");
  if (scales->numel() != n * blocks)
    return makeError("scales has ", scales->numel(),
                     " elements, expected N x blocks = ", n * blocks);
  const int64_t zpBytes = (blocks * bits + 7) / 8;
  const bool zpPacked = zp && zp->dtype() == DType::U8;
  if (zp && ((zpPacked && zp->numel() != n * zpBytes) || (!zpPacked && zp->numel() != n * blocks)))
    return makeError("zero_points has ", zp->numel(), " elements, expected ",
                     zpPacked ? n * zpBytes : n * blocks);
  const int64_t mask = (int64_t{1} << bits) - 1, perByte = 8 / bits;
  auto code = [&](const uint8_t* bytes, int64_t i) {
    return static_cast<uint8_t>((bytes[i / perByte] >> ((i % perByte) * bits)) & mask);
  };
  Tensor codes(DType::U8, Shape({n, k}));
  Tensor scale(DType::F32, Shape({n, blocks})), zero(DType::F32, Shape({n, blocks}));
  auto* c = codes.dataAs<uint8_t>();
  for (int64_t col = 0; col < n; ++col)
    for (int64_t blk = 0; blk < blocks; ++blk) {
      const int64_t at = col * blocks + blk;
      scale.setDouble(at, scales->getDouble(at));
      double z = static_cast<double>(int64_t{1} << (bits - 1));
      if (zpPacked)
        z = code(zp->dataAs<uint8_t>() + col * zpBytes, blk);
      else if (zp)
        z = zp->getDouble(at);
      zero.setDouble(at, z);
      const uint8_t* q = b->dataAs<uint8_t>() + at * blob;
      for (int64_t i = 0; i < block && blk * block + i < k; ++i)
        c[col * k + blk * block + i] = code(q, i);
    }
  std::vector<ValueId> in = {ctx.inputs[0], addPartConstant(ctx, "codes", std::move(codes)),
                             addPartConstant(ctx, "scales", std::move(scale)),
                             addPartConstant(ctx, "zero_points", std::move(zero))};
  BlockQuantAttrs attrs{bits, block, accuracy};
  if (!ctx.hasInput(5)) return Conversion{OpKind::MatMulNBits, attrs, in};
  TUNEC_ASSIGN_OR_RETURN(ValueId y, addPart(ctx, "float", OpKind::MatMulNBits, attrs, in));
  return Conversion{OpKind::Add, NoAttrs{}, {y, ctx.inputs[5]}};
}

// DynamicQuantizeMatMul(A, B, b_scale, b_zp, bias) = MatMul(DQ(DynamicQuantizeLinear(A)), DQ(B))
// + bias: A quantized per run to u8 as ONNX Runtime does, B per tensor or per column.
Result convertDynamicQuantizeMatMul(ConvertContext& ctx) {
  const std::vector<ValueId> in = ctx.inputs;
  ctx.inputs = {in[0]};
  auto quantized = convertDynamicQuantizeLinear(ctx);
  ctx.inputs = in;
  if (!quantized) return quantized.error();
  TUNEC_ASSIGN_OR_RETURN(ValueId aq,
                         addPart(ctx, "a.q", quantized->kind, quantized->attrs, quantized->inputs));
  TUNEC_ASSIGN_OR_RETURN(ValueId a, addPart(ctx, "a", OpKind::DequantizeLinear, QuantAttrs{0},
                                            {aq, quantized->inputs[1], quantized->inputs[2]}));
  const int rb = ctx.inputType(1).shape.rank();
  TUNEC_ASSIGN_OR_RETURN(ValueId b, dequantizePart(ctx, "b", in[1], in[2],
                                                   ctx.hasInput(3) ? in[3] : kNoValue, rb - 1));
  if (!ctx.hasInput(4)) return Conversion{OpKind::MatMul, NoAttrs{}, {a, b}};
  TUNEC_ASSIGN_OR_RETURN(ValueId y, addPart(ctx, "float", OpKind::MatMul, NoAttrs{}, {a, b}));
  return Conversion{OpKind::Add, NoAttrs{}, {y, in[4]}};
}

// ---- ONNX Runtime's transformer optimizer's fused ops (com.microsoft), as it writes a BERT:
// each rewritten to the standard ops tunec recognizes and fuses (LayerNorm in an epilogue, Gelu).

// com.microsoft.Gelu(X): the erf form.
Result convertMsGelu(ConvertContext& ctx) {
  return Conversion{OpKind::Gelu, GeluAttrs{false}, {ctx.inputs[0]}};
}

// com.microsoft.BiasGelu(A, B) = Gelu(A + B); FastGelu(X, bias) = the tanh form of X + bias.
template <bool Tanh> Result convertBiasGelu(ConvertContext& ctx) {
  ValueId x = ctx.inputs[0];
  if (ctx.hasInput(1)) {
    TUNEC_ASSIGN_OR_RETURN(x, addPart(ctx, "biased", OpKind::Add, NoAttrs{}, {x, ctx.inputs[1]}));
  }
  return Conversion{OpKind::Gelu, GeluAttrs{Tanh}, {x}};
}

// The outputs a skip normalization may have besides its first: mean and inv_std_var (training
// outputs: an error when read), and input_skip_bias_sum (the sum it normalized), by index.
Status skipNormalizationOutputs(ConvertContext& ctx, ValueId sum, Conversion& c) {
  for (int i : {1, 2})
    if (i < ctx.numOutputs && !ctx.proto.output(i).empty())
      return makeError("output ", i, " (", i == 1 ? "mean" : "inv_std_var",
                       ") is read: only the normalized output and the sum are supported");
  for (int i : {1, 2, 3}) // 1 and 2 unnamed: mapped anywhere, never read
    if (i < ctx.numOutputs) c.valueOutputs.emplace_back(i, sum);
  return {};
}

// x / sqrt(mean(x^2 over the last axis) + epsilon) * scale: RMS normalization.
Expected<ValueId> rmsNormalize(ConvertContext& ctx, ValueId x, ValueId scale, float epsilon) {
  const int rank = ctx.graph.value(x).type.shape.rank();
  return addPart(ctx, "rms_norm", OpKind::RMSNormalization, NormAttrs{rank - 1, epsilon},
                 {x, scale});
}

// RMSNormalization (opset 23): over the axes from `axis`, in float.
Result convertRmsNormalization(ConvertContext& ctx) {
  const int rank = ctx.inputType(0).shape.rank();
  TUNEC_ASSIGN_OR_RETURN(int64_t axis, normalizeAxis(ctx.attrs.getInt("axis", -1), rank));
  if (ctx.attrs.getInt("stash_type", 1) != 1)
    return makeError("stash_type other than float is not supported");
  return Conversion{OpKind::RMSNormalization,
                    NormAttrs{axis, ctx.attrs.getFloat("epsilon", 1e-5f)},
                    {ctx.inputs[0], ctx.inputs[1]}};
}

// SkipLayerNormalization(input, skip, gamma, beta, bias) = LayerNorm(input + skip + bias) over
// the last axis; SkipSimplifiedLayerNormalization(input, skip, gamma, bias) the RMS form.
template <bool Simplified> Result convertSkipNormalization(ConvertContext& ctx) {
  const float epsilon = ctx.attrs.getFloat("epsilon", 1e-5f);
  TUNEC_ASSIGN_OR_RETURN(ValueId sum, addPart(ctx, "skip_sum", OpKind::Add, NoAttrs{},
                                              {ctx.inputs[0], ctx.inputs[1]}));
  const size_t biasInput = Simplified ? 3 : 4;
  if (ctx.hasInput(biasInput)) {
    TUNEC_ASSIGN_OR_RETURN(
        sum, addPart(ctx, "skip_bias_sum", OpKind::Add, NoAttrs{}, {sum, ctx.inputs[biasInput]}));
  }
  Conversion c;
  if (Simplified) {
    TUNEC_ASSIGN_OR_RETURN(ValueId y, rmsNormalize(ctx, sum, ctx.inputs[2], epsilon));
    c = Conversion{OpKind::Identity, NoAttrs{}, {y}};
  } else {
    ValueId beta = ctx.hasInput(3)
                       ? ctx.inputs[3]
                       : addPartConstant(ctx, "beta", Tensor(DType::F32, ctx.inputType(2).shape));
    const int rank = ctx.graph.value(sum).type.shape.rank();
    c = Conversion{
        OpKind::LayerNormalization, NormAttrs{rank - 1, epsilon}, {sum, ctx.inputs[2], beta}};
  }
  TUNEC_TRY(skipNormalizationOutputs(ctx, sum, c));
  return c;
}

// SimplifiedLayerNormalization(X, scale): RMS normalization over the last axis.
Result convertSimplifiedLayerNorm(ConvertContext& ctx) {
  const int rank = ctx.inputType(0).shape.rank();
  TUNEC_ASSIGN_OR_RETURN(int64_t axis, normalizeAxis(ctx.attrs.getInt("axis", -1), rank));
  if (axis != rank - 1) return makeError("only the last axis is supported, not ", axis);
  if (ctx.attrs.getInt("stash_type", 1) != 1)
    return makeError("stash_type other than float is not supported");
  if (ctx.numOutputs > 1 && !ctx.proto.output(1).empty())
    return makeError("output 1 (inv_std_var) is read: only the normalized output is supported");
  TUNEC_ASSIGN_OR_RETURN(ValueId y, rmsNormalize(ctx, ctx.inputs[0], ctx.inputs[1],
                                                 ctx.attrs.getFloat("epsilon", 1e-5f)));
  Conversion c{OpKind::Identity, NoAttrs{}, {y}};
  if (ctx.numOutputs > 1) c.valueOutputs.emplace_back(1, y);
  return c;
}

// [0, count) of axis `axis` of a 2-d table, the other axis whole: a slice, symbolic when `count`
// is (position embeddings up to the sequence, key positions up to the keys); the table itself
// when that is all of it.
Expected<ValueId> prefixOf(ConvertContext& ctx, const std::string& part, ValueId table, int axis,
                           const Dim& count) {
  const Shape t = ctx.graph.value(table).type.shape;
  if (t.rank() != 2 || count.max > t[axis])
    return makeError("a table of shape ", t.toString(), " has no ", count.expr.toString(),
                     " entries along axis ", axis);
  if (count.isStatic() && count.max == t[axis]) return table;
  std::vector<Dim> extents = {Dim(t[0]), Dim(t[1])};
  extents[static_cast<size_t>(axis)] = count;
  SliceAttrs a;
  a.starts = {0, 0};
  a.steps = {1, 1};
  for (const Dim& d : extents) a.counts.push_back(d.max);
  if (!count.isStatic()) a.extents = std::move(extents);
  return addPart(ctx, part, OpKind::Slice, a, {table});
}

// Positions 0 .. count - 1 as a [1, count] row of `dtype`: the prefix of a table as long as the
// bound (symbolic where count is).
Expected<ValueId> positionsRow(ConvertContext& ctx, const std::string& part, DType dtype,
                               const Dim& count) {
  Tensor table(dtype, Shape{1, count.max});
  for (int64_t j = 0; j < count.max; ++j) table.setDouble(j, static_cast<double>(j));
  return prefixOf(ctx, part, addPartConstant(ctx, part + ".table", std::move(table)), 1, count);
}

// Rows [from, from + count) of a constant (a packed weight's Q, K or V part), along `axis`.
Expected<ValueId> constantPart(ConvertContext& ctx, const std::string& part, size_t input, int axis,
                               int64_t from, int64_t count) {
  TUNEC_ASSIGN_OR_RETURN(auto whole, ctx.constantInput(input, part.c_str()));
  if (!whole) return makeError("input ", input, " (", part, ") is required");
  const Shape& shape = whole->shape();
  std::vector<int64_t> dims = shape.dims();
  dims[static_cast<size_t>(axis)] = count;
  Tensor out(whole->dtype(), Shape(dims));
  int64_t inner = 1;
  for (int d = axis + 1; d < shape.rank(); ++d) inner *= shape[d];
  const int64_t outer = shape.numel() / (shape[axis] * inner);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t r = 0; r < count; ++r)
      for (int64_t i = 0; i < inner; ++i)
        out.setDouble((o * count + r) * inner + i,
                      whole->getDouble((o * shape[axis] + from + r) * inner + i));
  return addPartConstant(ctx, part, std::move(out));
}

// The 0/1 mask [B, T] whose ones `lengths` counts per row (ReduceSum over axis 1 of its Cast, as
// EmbedLayerNormalization's mask_index is built), or nullopt. ONNX Runtime's optimizer writes such
// lengths for masks of right padding, a prefix of ones, so the mask stands for them exactly; and
// it runs at symbolic shapes, where the count would not.
std::optional<ValueId> countedMask(const Graph& g, ValueId lengths) {
  const NodeId count = g.value(lengths).producer;
  if (count < 0 || g.node(count).kind != OpKind::ReduceSum) return std::nullopt;
  const auto& reduce = std::get<ReduceAttrs>(g.node(count).attrs);
  if (reduce.keepDims || reduce.axes != std::vector<int64_t>{1}) return std::nullopt;
  const NodeId cast = g.value(g.node(count).inputs[0]).producer;
  if (cast < 0 || g.node(cast).kind != OpKind::Cast) return std::nullopt;
  const ValueId mask = g.node(cast).inputs[0];
  if (g.value(mask).type.shape.rank() != 2) return std::nullopt;
  return mask;
}

// The additive mask of ONNX Runtime's Attention from its mask_index: (1 - mask) x filter for a
// raw mask of 0/1 ([B, T], [B, S, T] or [B, 1, T, T]); key positions below each row's length for
// a 1-d [B] index of valid lengths (right padding); broadcast to the scores [B, N, S, T].
Expected<ValueId> attentionMask(ConvertContext& ctx, const Dim& keys, float filter) {
  const Shape m = ctx.inputType(3).shape;
  ValueId mask = kNoValue;
  if (auto raw = countedMask(ctx.graph, ctx.inputs[3])) {
    mask = *raw;
  } else if (m.rank() == 1) {
    const Dim batch = ctx.inputType(0).shape.dim(0);
    if (!(m.dim(0).expr == batch.expr))
      return makeError("mask_index of shape ", m.toString(), " (left padding's end and start ",
                       "positions, 2 x batch) is not supported: only valid lengths, one per row");
    TUNEC_ASSIGN_OR_RETURN(ValueId table,
                           positionsRow(ctx, "mask.key_positions", DType::F32, keys));
    TUNEC_ASSIGN_OR_RETURN(ValueId lengths, addPart(ctx, "mask.lengths", OpKind::Cast,
                                                    CastAttrs{DType::F32}, {ctx.inputs[3]}));
    TUNEC_ASSIGN_OR_RETURN(
        lengths, addPart(ctx, "mask.lengths_column", OpKind::Unsqueeze, AxesAttrs{{1}}, {lengths}));
    TUNEC_ASSIGN_OR_RETURN(mask,
                           addPart(ctx, "mask.valid", OpKind::Less, NoAttrs{}, {table, lengths}));
  } else if (m.rank() >= 2 && m.rank() <= 4) {
    mask = ctx.inputs[3];
  } else {
    return makeError("mask_index of rank ", m.rank(), " is not supported");
  }
  TUNEC_ASSIGN_OR_RETURN(ValueId ones,
                         addPart(ctx, "mask.f32", OpKind::Cast, CastAttrs{DType::F32}, {mask}));
  TUNEC_ASSIGN_OR_RETURN(ValueId masked, addPart(ctx, "mask.masked", OpKind::Sub, NoAttrs{},
                                                 {scalarPart(ctx, "mask.one", 1.0), ones}));
  TUNEC_ASSIGN_OR_RETURN(ValueId add, addPart(ctx, "mask.add", OpKind::Mul, NoAttrs{},
                                              {masked, scalarPart(ctx, "mask.filter", filter)}));
  const int rank = ctx.graph.value(add).type.shape.rank(); // [B, T] or [B, S, T] or 4-d
  if (rank == 4) return add;
  return addPart(ctx, "mask.heads", OpKind::Unsqueeze,
                 AxesAttrs{rank == 2 ? std::vector<int64_t>{1, 2} : std::vector<int64_t>{1}},
                 {add});
}

// The tail both attention ops share: scores [B, N, S, T] + the additive mask (if any) + the
// attention_bias input (if given), Softmax over the keys, x V, heads back after the positions:
// [B, S, N, H].
Expected<ValueId> attend(ConvertContext& ctx, ValueId scores, ValueId mask, size_t biasInput,
                         ValueId v) {
  if (mask != kNoValue) {
    TUNEC_ASSIGN_OR_RETURN(scores,
                           addPart(ctx, "scores.masked", OpKind::Add, NoAttrs{}, {scores, mask}));
  }
  if (ctx.hasInput(biasInput)) {
    TUNEC_ASSIGN_OR_RETURN(scores, addPart(ctx, "scores.biased", OpKind::Add, NoAttrs{},
                                           {scores, ctx.inputs[biasInput]}));
  }
  TUNEC_ASSIGN_OR_RETURN(ValueId probs,
                         addPart(ctx, "probs", OpKind::Softmax, SoftmaxAttrs{3, false}, {scores}));
  TUNEC_ASSIGN_OR_RETURN(ValueId context,
                         addPart(ctx, "context", OpKind::MatMul, NoAttrs{}, {probs, v}));
  return addPart(ctx, "context.transposed", OpKind::Transpose, TransposeAttrs{{0, 2, 1, 3}},
                 {context});
}

// com.microsoft.Attention(input [B, S, Hin], weights [Hin, Hq + Hk + Hv], bias, mask_index,
// past, attention_bias): multi-head self-attention as its definition computes it, written as a
// plain export writes it (a MatMul and bias per Q, K and V; heads by Reshape and Transpose;
// Q K^T x scale + mask, Softmax, x V), which tunec fuses into its attention kernel.
Result convertMsAttention(ConvertContext& ctx) {
  const int64_t heads = ctx.attrs.getInt("num_heads", 0);
  if (heads <= 0) return makeError("num_heads must be positive");
  if (ctx.attrs.getInt("unidirectional", 0) != 0)
    return makeError("unidirectional (causal) attention is not supported yet");
  if (ctx.hasInput(4) || (ctx.numOutputs > 1 && !ctx.proto.output(1).empty()))
    return makeError("past and present key/value states are not supported yet");
  if (ctx.hasInput(6)) return makeError("past_sequence_length is not supported");
  if (ctx.attrs.getInt("do_rotary", 0) != 0) return makeError("do_rotary is not supported");
  const Shape x = ctx.inputType(0).shape, w = ctx.inputType(1).shape;
  if (x.rank() != 3 || w.rank() != 2 || w[0] != x[2])
    return makeError("input ", x.toString(), " and weights ", w.toString(),
                     " are not [batch, sequence, hidden] and [hidden, 3 x hidden]");
  std::vector<int64_t> sizes =
      ctx.attrs.getInts("qkv_hidden_sizes").value_or(std::vector<int64_t>(3, w[1] / 3));
  if (sizes.size() != 3 || sizes[0] + sizes[1] + sizes[2] != w[1] || sizes[0] != sizes[1] ||
      sizes[0] % heads != 0 || sizes[2] % heads != 0)
    return makeError("qkv_hidden_sizes [", sizes.size() > 0 ? sizes[0] : 0, ", ...] do not split ",
                     "the weights' ", w[1], " columns into Q, K and V of ", heads, " heads");
  const int64_t headSize = sizes[0] / heads, valueSize = sizes[2] / heads;
  const float scale = ctx.attrs.getFloat("scale", 1.f / std::sqrt(static_cast<float>(headSize)));
  const float filter = ctx.attrs.getFloat("mask_filter_value", -10000.f);
  const Dim batch = x.dim(0), sequence = x.dim(1);
  std::vector<ValueId> qkv;
  const char* names[] = {"q", "k", "v"};
  int64_t column = 0;
  for (int i = 0; i < 3; ++i) {
    const std::string n = names[i];
    TUNEC_ASSIGN_OR_RETURN(ValueId wi, constantPart(ctx, n + ".weight", 1, 1, column, sizes[i]));
    TUNEC_ASSIGN_OR_RETURN(ValueId bi, constantPart(ctx, n + ".bias", 2, 0, column, sizes[i]));
    column += sizes[i];
    TUNEC_ASSIGN_OR_RETURN(
        ValueId y, addPart(ctx, n + ".matmul", OpKind::MatMul, NoAttrs{}, {ctx.inputs[0], wi}));
    TUNEC_ASSIGN_OR_RETURN(y, addPart(ctx, n + ".biased", OpKind::Add, NoAttrs{}, {y, bi}));
    const int64_t size = i == 2 ? valueSize : headSize;
    TUNEC_ASSIGN_OR_RETURN(y, addPart(ctx, n + ".heads", OpKind::Reshape,
                                      ReshapeAttrs{{batch, sequence, Dim(heads), Dim(size)}}, {y}));
    const std::vector<int64_t> perm =
        i == 1 ? std::vector<int64_t>{0, 2, 3, 1} : std::vector<int64_t>{0, 2, 1, 3};
    TUNEC_ASSIGN_OR_RETURN(
        y, addPart(ctx, n + ".transposed", OpKind::Transpose, TransposeAttrs{perm}, {y}));
    qkv.push_back(y);
  }
  TUNEC_ASSIGN_OR_RETURN(ValueId scores,
                         addPart(ctx, "scores", OpKind::MatMul, NoAttrs{}, {qkv[0], qkv[1]}));
  TUNEC_ASSIGN_OR_RETURN(scores, addPart(ctx, "scores.scaled", OpKind::Mul, NoAttrs{},
                                         {scores, scalarPart(ctx, "scale", scale)}));
  ValueId mask = kNoValue;
  if (ctx.hasInput(3)) {
    TUNEC_ASSIGN_OR_RETURN(mask, attentionMask(ctx, sequence, filter));
  }
  TUNEC_ASSIGN_OR_RETURN(ValueId context, attend(ctx, scores, mask, 5, qkv[2]));
  return Conversion{OpKind::Reshape, ReshapeAttrs{{batch, sequence, Dim(sizes[2])}}, {context}};
}

// Axis `axis` of x restricted to [from, from + count) (static bounds), the other axes whole: a
// Slice, symbolic where x's shape is.
Expected<ValueId> sliceAxis(ConvertContext& ctx, const std::string& part, ValueId x, int axis,
                            int64_t from, int64_t count) {
  const Shape xs = ctx.graph.value(x).type.shape;
  SliceAttrs a;
  std::vector<Dim> extents;
  for (int d = 0; d < xs.rank(); ++d) {
    a.starts.push_back(d == axis ? from : 0);
    a.steps.push_back(1);
    extents.push_back(d == axis ? Dim(count) : xs.dim(d));
    a.counts.push_back(extents.back().max);
  }
  if (!xs.isStatic()) a.extents = std::move(extents);
  return addPart(ctx, part, OpKind::Slice, a, {x});
}

// Rows [first, first + count) of a 2-d table, the columns whole; `first` may be symbolic (the
// past length: this run's positions), a slice at run-time starts then.
Expected<ValueId> rowsOf(ConvertContext& ctx, const std::string& part, ValueId table,
                         const Dim& first, const Dim& count) {
  const Shape t = ctx.graph.value(table).type.shape;
  if (t.rank() != 2 || !t.isStatic() || first.max + count.max > t[0])
    return makeError("a table of shape ", t.toString(), " has no rows ", first.toString(), "..",
                     first.toString(), "+", count.toString(), " (up to ", first.max + count.max,
                     "): bound the symbols (--dim) so that they stay within its rows");
  SliceAttrs a;
  a.starts = {first.isStatic() ? first.max : 0, 0};
  a.steps = {1, 1};
  a.counts = {count.max, t[1]};
  if (!first.isStatic()) a.runTimeStarts = {first.expr, DimExpr(0)};
  if (!count.isStatic()) a.extents = {count, Dim(t[1])};
  return addPart(ctx, part, OpKind::Slice, a, {table});
}

// Rotary position embedding of x [B, N, S, H] (heads before positions) by the angles' cos and
// sin [S, R/2] or [B, 1, S, R/2], R <= H: the first R values of each head rotated in halves
// (x1 x cos - x2 x sin, x2 x cos + x1 x sin) or, interleaved, in adjacent pairs; the rest kept.
Expected<ValueId> rotary(ConvertContext& ctx, const std::string& part, ValueId x, ValueId cos,
                         ValueId sin, bool interleaved) {
  const Shape xs = ctx.graph.value(x).type.shape;
  const Shape cs = ctx.graph.value(cos).type.shape;
  if (xs.rank() != 4 || cs.rank() < 1)
    return makeError("rotary embedding of ", xs.toString(), " by angles ", cs.toString(),
                     ": not [batch, heads, sequence, head size] and [..., R/2]");
  const int64_t head = xs[3], half = cs[cs.rank() - 1], rotated = 2 * half;
  if (rotated > head || rotated == 0)
    return makeError("rotary angles of shape ", cs.toString(), " do not fit heads of ", head,
                     " values (", xs.toString(), ")");
  ValueId part1 = kNoValue, part2 = kNoValue, rest = kNoValue, c = cos, s = sin;
  ValueId in = x;
  if (rotated < head) {
    TUNEC_ASSIGN_OR_RETURN(in, sliceAxis(ctx, part + ".rotated", x, 3, 0, rotated));
    TUNEC_ASSIGN_OR_RETURN(rest, sliceAxis(ctx, part + ".kept", x, 3, rotated, head - rotated));
  }
  std::vector<Dim> pairs = {xs.dim(0), xs.dim(1), xs.dim(2), Dim(half), Dim(2)};
  if (interleaved) { // [B, N, S, R/2, 2]: pair j is (2j, 2j + 1)
    TUNEC_ASSIGN_OR_RETURN(
        in, addPart(ctx, part + ".pairs", OpKind::Reshape, ReshapeAttrs{pairs}, {in}));
    TUNEC_ASSIGN_OR_RETURN(part1, sliceAxis(ctx, part + ".even", in, 4, 0, 1));
    TUNEC_ASSIGN_OR_RETURN(part2, sliceAxis(ctx, part + ".odd", in, 4, 1, 1));
    const auto last = static_cast<int64_t>(cs.rank());
    TUNEC_ASSIGN_OR_RETURN(
        c, addPart(ctx, part + ".cos", OpKind::Unsqueeze, AxesAttrs{{last}}, {cos}));
    TUNEC_ASSIGN_OR_RETURN(
        s, addPart(ctx, part + ".sin", OpKind::Unsqueeze, AxesAttrs{{last}}, {sin}));
  } else {
    TUNEC_ASSIGN_OR_RETURN(part1, sliceAxis(ctx, part + ".first", in, 3, 0, half));
    TUNEC_ASSIGN_OR_RETURN(part2, sliceAxis(ctx, part + ".second", in, 3, half, half));
  }
  auto mul = [&](const std::string& n, ValueId a, ValueId b) {
    return addPart(ctx, part + "." + n, OpKind::Mul, NoAttrs{}, {a, b});
  };
  TUNEC_ASSIGN_OR_RETURN(ValueId a1, mul("x1cos", part1, c));
  TUNEC_ASSIGN_OR_RETURN(ValueId b1, mul("x2sin", part2, s));
  TUNEC_ASSIGN_OR_RETURN(ValueId a2, mul("x2cos", part2, c));
  TUNEC_ASSIGN_OR_RETURN(ValueId b2, mul("x1sin", part1, s));
  TUNEC_ASSIGN_OR_RETURN(ValueId o1,
                         addPart(ctx, part + ".out1", OpKind::Sub, NoAttrs{}, {a1, b1}));
  TUNEC_ASSIGN_OR_RETURN(ValueId o2,
                         addPart(ctx, part + ".out2", OpKind::Add, NoAttrs{}, {a2, b2}));
  const int64_t axis = interleaved ? 4 : 3;
  TUNEC_ASSIGN_OR_RETURN(ValueId out,
                         addPart(ctx, part + ".joined", OpKind::Concat, AxisAttrs{axis}, {o1, o2}));
  if (interleaved) {
    TUNEC_ASSIGN_OR_RETURN(
        out, addPart(ctx, part + ".unpaired", OpKind::Reshape,
                     ReshapeAttrs{{xs.dim(0), xs.dim(1), xs.dim(2), Dim(rotated)}}, {out}));
  }
  if (rest == kNoValue) return out;
  return addPart(ctx, part + ".whole", OpKind::Concat, AxisAttrs{3}, {out, rest});
}

// The rotary angles of positions [first, first + count) (a run's tokens after its past) from
// the [positions, R/2] tables, or of `positions` ([B, S] or [1, S] ids) when given: [S, R/2] or
// [B, 1, S, R/2].
Expected<std::pair<ValueId, ValueId>> rotaryAngles(ConvertContext& ctx, size_t cosInput,
                                                   size_t sinInput, ValueId positions,
                                                   const Dim& first, const Dim& count) {
  if (!ctx.hasInput(cosInput) || !ctx.hasInput(sinInput))
    return makeError("rotary embedding needs cos_cache and sin_cache");
  std::pair<ValueId, ValueId> angles;
  ValueId* out[] = {&angles.first, &angles.second};
  const char* names[] = {"cos", "sin"};
  for (int i = 0; i < 2; ++i) {
    ValueId table = ctx.inputs[i == 0 ? cosInput : sinInput];
    const std::string n = names[i];
    if (positions != kNoValue) {
      TUNEC_ASSIGN_OR_RETURN(ValueId rows, addPart(ctx, n + ".positions", OpKind::Gather,
                                                   AxisAttrs{0}, {table, positions}));
      if (ctx.graph.value(rows).type.shape.rank() == 3) { // [B, S, R/2] -> [B, 1, S, R/2]
        TUNEC_ASSIGN_OR_RETURN(
            rows, addPart(ctx, n + ".heads", OpKind::Unsqueeze, AxesAttrs{{1}}, {rows}));
      }
      *out[i] = rows;
    } else {
      TUNEC_ASSIGN_OR_RETURN(*out[i], rowsOf(ctx, n + ".rows", table, first, count));
    }
  }
  return angles;
}

// x [B, S, N x H] -> [B, N, S, H].
Expected<ValueId> splitHeads(ConvertContext& ctx, const std::string& part, ValueId x, int64_t heads,
                             int64_t head) {
  const Shape xs = ctx.graph.value(x).type.shape;
  TUNEC_ASSIGN_OR_RETURN(ValueId y,
                         addPart(ctx, part + ".heads", OpKind::Reshape,
                                 ReshapeAttrs{{xs.dim(0), xs.dim(1), Dim(heads), Dim(head)}}, {x}));
  return addPart(ctx, part + ".transposed", OpKind::Transpose, TransposeAttrs{{0, 2, 1, 3}}, {y});
}

// com.microsoft.GroupQueryAttention(query, key, value, past_key, past_value, seqlens_k,
// total_sequence_length, cos_cache, sin_cache, position_ids, attention_bias): causal attention
// of num_heads query heads over kv_num_heads K/V heads with the past (BNSH) before this run's
// keys, as ONNX Runtime's generation builder writes decoders. Written as a plain export writes
// it: heads by Reshape and Transpose, the rotary embedding of Q and K, present = Concat(past,
// new), the K/V heads repeated by Unsqueeze/Expand/Reshape (which fold-grouped-kv reads as
// stored), Q K^T x scale + the causal mask, Softmax, x V. The positions of the run's tokens
// are past .. past + sequence - 1 by the shapes (a batch without padding: seqlens_k must be
// past + sequence - 1 in each row, as ONNX Runtime's own prompt and token steps give it).
Result convertGroupQueryAttention(ConvertContext& ctx) {
  const int64_t heads = ctx.attrs.getInt("num_heads", 0),
                kvHeads = ctx.attrs.getInt("kv_num_heads", 0);
  if (heads <= 0 || kvHeads <= 0 || heads % kvHeads != 0)
    return makeError("num_heads ", heads, " must be a positive multiple of kv_num_heads ", kvHeads);
  if (ctx.attrs.getInt("local_window_size", -1) != -1)
    return makeError("local_window_size (sliding-window attention) is not supported yet");
  if (ctx.attrs.getFloat("softcap", 0.f) != 0.f) return makeError("softcap is not supported yet");
  if (ctx.attrs.getInt("smooth_softmax", 0) != 0 || ctx.attrs.getInt("qk_output", 0) != 0 ||
      ctx.attrs.getInt("sliding_window_cache", 0) != 0)
    return makeError("smooth_softmax, qk_output and sliding_window_cache are not supported");
  for (size_t i = 11; i < ctx.inputs.size(); ++i)
    if (ctx.hasInput(i))
      return makeError("input ", i, " (head_sink, a quantized cache's scales or Q/K norms) is ",
                       "not supported");
  for (const char* cache : {"k_quant_type", "v_quant_type"})
    if (ctx.attrs.getString(cache, "NONE") != "NONE")
      return makeError(cache, " (a quantized K/V cache) is not supported");
  ctx.attrs.getInt("kv_cache_bit_width", 0);    // of a quantized cache only
  ctx.attrs.getFloat("qk_norm_epsilon", 1e-6f); // of the Q/K norms only, refused below
  const bool causal = ctx.attrs.getInt("causal", 1) != 0;
  const bool rotate = ctx.attrs.getInt("do_rotary", 0) != 0;
  const bool interleaved = ctx.attrs.getInt("rotary_interleaved", 0) != 0;
  const float scale = ctx.attrs.getFloat("scale", 0.f);
  const Shape qs = ctx.inputType(0).shape;
  if (qs.rank() != 3 || !qs.dim(2).isStatic())
    return makeError("query ", qs.toString(), " is not [batch, sequence, hidden]");
  const bool packed = !ctx.hasInput(1);
  if (packed == ctx.hasInput(2))
    return makeError("key and value are given together, or neither (packed QKV)");
  const int64_t width = qs[2], units = packed ? heads + 2 * kvHeads : heads;
  if (width % units != 0)
    return makeError("query's ", width, " values are not ", units, " heads of one size");
  const int64_t head = width / units;
  ValueId q = ctx.inputs[0], k = kNoValue, v = kNoValue;
  if (packed) {
    TUNEC_ASSIGN_OR_RETURN(q, sliceAxis(ctx, "q", ctx.inputs[0], 2, 0, heads * head));
    TUNEC_ASSIGN_OR_RETURN(k, sliceAxis(ctx, "k", ctx.inputs[0], 2, heads * head, kvHeads * head));
    TUNEC_ASSIGN_OR_RETURN(
        v, sliceAxis(ctx, "v", ctx.inputs[0], 2, (heads + kvHeads) * head, kvHeads * head));
  } else {
    k = ctx.inputs[1], v = ctx.inputs[2];
    for (ValueId x : {k, v})
      if (ctx.graph.value(x).type.shape.rank() != 3 ||
          ctx.graph.value(x).type.shape[2] != kvHeads * head)
        return makeError("key and value ", ctx.graph.value(x).type.shape.toString(), " are not [",
                         "batch, sequence, ", kvHeads, " x ", head, "]");
  }
  TUNEC_ASSIGN_OR_RETURN(q, splitHeads(ctx, "q", q, heads, head));
  TUNEC_ASSIGN_OR_RETURN(k, splitHeads(ctx, "k", k, kvHeads, head));
  TUNEC_ASSIGN_OR_RETURN(v, splitHeads(ctx, "v", v, kvHeads, head));
  const Dim batch = qs.dim(0), sequence = qs.dim(1);
  Dim past(0);
  if (ctx.hasInput(3) != ctx.hasInput(4))
    return makeError("past_key and past_value are given together or not at all");
  if (ctx.hasInput(3)) {
    const Shape ps = ctx.inputType(3).shape;
    if (ps.rank() != 4 || ps[1] != kvHeads || ps[3] != head || !(ps.dim(0) == batch))
      return makeError("past_key ", ps.toString(), " is not [batch, ", kvHeads, ", past, ", head,
                       "] (BNSH)");
    past = ps.dim(2);
  }
  if (rotate) {
    TUNEC_ASSIGN_OR_RETURN(
        auto angles,
        rotaryAngles(ctx, 7, 8, ctx.hasInput(9) ? ctx.inputs[9] : kNoValue, past, sequence));
    TUNEC_ASSIGN_OR_RETURN(q, rotary(ctx, "q.rotary", q, angles.first, angles.second, interleaved));
    TUNEC_ASSIGN_OR_RETURN(k, rotary(ctx, "k.rotary", k, angles.first, angles.second, interleaved));
  }
  if (ctx.hasInput(3)) {
    TUNEC_ASSIGN_OR_RETURN(
        k, addPart(ctx, "present_key", OpKind::Concat, AxisAttrs{2}, {ctx.inputs[3], k}));
    TUNEC_ASSIGN_OR_RETURN(
        v, addPart(ctx, "present_value", OpKind::Concat, AxisAttrs{2}, {ctx.inputs[4], v}));
  }
  const ValueId presentK = k, presentV = v;
  const Dim total = past + sequence;
  if (heads != kvHeads) { // repeat_kv: [B, kv, T, H] -> [B, kv, g, T, H] -> [B, heads, T, H]
    const Dim group(heads / kvHeads);
    ValueId* kv[] = {&k, &v};
    const char* names[] = {"k", "v"};
    for (int i = 0; i < 2; ++i) {
      const std::string n = names[i];
      TUNEC_ASSIGN_OR_RETURN(
          ValueId x, addPart(ctx, n + ".grouped", OpKind::Unsqueeze, AxesAttrs{{2}}, {*kv[i]}));
      TUNEC_ASSIGN_OR_RETURN(
          x, addPart(ctx, n + ".repeated", OpKind::Expand,
                     ReshapeAttrs{{batch, Dim(kvHeads), group, total, Dim(head)}}, {x}));
      TUNEC_ASSIGN_OR_RETURN(*kv[i],
                             addPart(ctx, n + ".all_heads", OpKind::Reshape,
                                     ReshapeAttrs{{batch, Dim(heads), total, Dim(head)}}, {x}));
    }
  }
  TUNEC_ASSIGN_OR_RETURN(ValueId kT, addPart(ctx, "k.transposed_keys", OpKind::Transpose,
                                             TransposeAttrs{{0, 1, 3, 2}}, {k}));
  TUNEC_ASSIGN_OR_RETURN(ValueId scores,
                         addPart(ctx, "scores", OpKind::MatMul, NoAttrs{}, {q, kT}));
  TUNEC_ASSIGN_OR_RETURN(
      scores,
      addPart(
          ctx, "scores.scaled", OpKind::Mul, NoAttrs{},
          {scores, scalarPart(ctx, "scale",
                              scale != 0.f ? scale : 1.0 / std::sqrt(static_cast<double>(head)))}));
  ValueId mask = kNoValue;
  if (causal && !(sequence == Dim(1))) {
    // Key j is masked for the query at position p = past + i where j > p: -FLT_MAX added.
    Tensor rows(DType::F32, Shape{total.max, 1});
    for (int64_t j = 0; j < total.max; ++j) rows.setDouble(j, static_cast<double>(j));
    TUNEC_ASSIGN_OR_RETURN(ValueId positions,
                           rowsOf(ctx, "mask.query_positions",
                                  addPartConstant(ctx, "mask.rows", std::move(rows)), past,
                                  sequence));
    TUNEC_ASSIGN_OR_RETURN(ValueId keys,
                           positionsRow(ctx, "mask.key_positions", DType::F32, total));
    TUNEC_ASSIGN_OR_RETURN(ValueId later,
                           addPart(ctx, "mask.later", OpKind::Less, NoAttrs{}, {positions, keys}));
    TUNEC_ASSIGN_OR_RETURN(later,
                           addPart(ctx, "mask.f32", OpKind::Cast, CastAttrs{DType::F32}, {later}));
    TUNEC_ASSIGN_OR_RETURN(
        mask,
        addPart(ctx, "mask.add", OpKind::Mul, NoAttrs{},
                {later, scalarPart(ctx, "mask.lowest",
                                   static_cast<double>(std::numeric_limits<float>::lowest()))}));
  }
  TUNEC_ASSIGN_OR_RETURN(ValueId context, attend(ctx, scores, mask, 10, v));
  Conversion c{OpKind::Reshape, ReshapeAttrs{{batch, sequence, Dim(heads * head)}}, {context}};
  if (ctx.numOutputs > 1 && !ctx.proto.output(1).empty()) c.valueOutputs.push_back({1, presentK});
  if (ctx.numOutputs > 2 && !ctx.proto.output(2).empty()) c.valueOutputs.push_back({2, presentV});
  return c;
}

// com.microsoft.RotaryEmbedding(input, position_ids, cos_cache, sin_cache): input [B, S, N x H]
// (num_heads, or H from rotary_embedding_dim) or [B, N, S, H]; position_ids [B, S], or one
// offset [1] for positions offset .. offset + S - 1.
Result convertRotaryEmbedding(ConvertContext& ctx) {
  if (ctx.attrs.getInt("is_packed_batching", 0) != 0)
    return makeError("is_packed_batching is not supported");
  if (ctx.attrs.getFloat("scale", 1.f) != 1.f)
    return makeError("a position scale other than 1 is not supported");
  const Shape xs = ctx.inputType(0).shape;
  const Shape ps = ctx.inputType(1).shape;
  const Shape cs = ctx.inputType(2).shape;
  if (cs.rank() != 2) return makeError("cos_cache ", cs.toString(), " is not [positions, R/2]");
  ValueId x = ctx.inputs[0];
  int64_t heads = ctx.attrs.getInt("num_heads", 0);
  const int64_t rotaryDim = ctx.attrs.getInt("rotary_embedding_dim", 0);
  if (rotaryDim > 0 && rotaryDim != 2 * cs[1])
    return makeError("rotary_embedding_dim ", rotaryDim, " is not twice cos_cache's ", cs[1],
                     " columns");
  if (xs.rank() == 3) {
    if (heads <= 0) // the whole head rotated: its size is twice the angles'
      heads = xs[2] % (2 * cs[1]) == 0 ? xs[2] / (2 * cs[1]) : 0;
    if (heads <= 0 || xs[2] % heads != 0)
      return makeError("input ", xs.toString(),
                       " is not [batch, sequence, heads x head size]: ", "give num_heads");
    TUNEC_ASSIGN_OR_RETURN(x, splitHeads(ctx, "input", x, heads, xs[2] / heads));
  } else if (xs.rank() != 4) {
    return makeError("input ", xs.toString(), " is not 3-d or 4-d");
  }
  const Dim sequence = xs.rank() == 3 ? xs.dim(1) : xs.dim(2);
  std::pair<ValueId, ValueId> angles;
  if (ps.rank() == 2) {
    TUNEC_ASSIGN_OR_RETURN(angles, rotaryAngles(ctx, 2, 3, ctx.inputs[1], Dim(0), sequence));
  } else if (ps.numel() != 1 || ps.rank() > 1) {
    return makeError("position_ids of shape ", ps.toString(), " are neither [batch, sequence] ",
                     "nor one offset");
  } else if (ctx.graph.value(ctx.inputs[1]).constant) {
    TUNEC_ASSIGN_OR_RETURN(auto offset, ctx.constantInput(1, "position offset"));
    TUNEC_ASSIGN_OR_RETURN(angles,
                           rotaryAngles(ctx, 2, 3, kNoValue, Dim(offset->getInt(0)), sequence));
  } else { // an offset known at run time: positions offset + [0, S), gathered
    TUNEC_ASSIGN_OR_RETURN(ValueId steps,
                           positionsRow(ctx, "positions.steps", DType::I64, sequence));
    TUNEC_ASSIGN_OR_RETURN(ValueId offset, addPart(ctx, "positions.offset", OpKind::Cast,
                                                   CastAttrs{DType::I64}, {ctx.inputs[1]}));
    TUNEC_ASSIGN_OR_RETURN(ValueId positions, addPart(ctx, "positions", OpKind::Add, NoAttrs{},
                                                      {steps, offset})); // [1, S]
    TUNEC_ASSIGN_OR_RETURN(angles, rotaryAngles(ctx, 2, 3, positions, Dim(0), sequence));
  }
  const bool interleaved = ctx.attrs.getInt("interleaved", 0) != 0;
  TUNEC_ASSIGN_OR_RETURN(ValueId y,
                         rotary(ctx, "rotary", x, angles.first, angles.second, interleaved));
  if (xs.rank() == 4) return Conversion{OpKind::Identity, NoAttrs{}, {y}};
  TUNEC_ASSIGN_OR_RETURN(
      y, addPart(ctx, "output.transposed", OpKind::Transpose, TransposeAttrs{{0, 2, 1, 3}}, {y}));
  return Conversion{OpKind::Reshape, ReshapeAttrs{{xs.dim(0), xs.dim(1), xs.dim(2)}}, {y}};
}

// com.microsoft.EmbedLayerNormalization(input_ids, segment_ids, word_embedding,
// position_embedding, segment_embedding, gamma, beta, mask, position_ids) = LayerNorm(word[ids]
// + position[position_ids or 0..S-1] + segment[segment_ids]); its mask_index output is each
// row's count of mask ones (the valid lengths Attention reads), and embedding_sum the sum.
Result convertEmbedLayerNorm(ConvertContext& ctx) {
  if (ctx.attrs.getInt("mask_index_type", 1) != 1)
    return makeError("mask_index_type other than 1 (one valid length per row) is not supported");
  const Shape ids = ctx.inputType(0).shape;
  if (ids.rank() != 2) return makeError("input_ids ", ids.toString(), " is not [batch, sequence]");
  TUNEC_ASSIGN_OR_RETURN(ValueId sum, addPart(ctx, "word", OpKind::Gather, AxisAttrs{0},
                                              {ctx.inputs[2], ctx.inputs[0]}));
  ValueId position = kNoValue;
  if (ctx.hasInput(8)) {
    TUNEC_ASSIGN_OR_RETURN(position, addPart(ctx, "position", OpKind::Gather, AxisAttrs{0},
                                             {ctx.inputs[3], ctx.inputs[8]}));
  } else {
    TUNEC_ASSIGN_OR_RETURN(position, prefixOf(ctx, "position", ctx.inputs[3], 0, ids.dim(1)));
  }
  TUNEC_ASSIGN_OR_RETURN(sum,
                         addPart(ctx, "word_position", OpKind::Add, NoAttrs{}, {sum, position}));
  if (ctx.hasInput(1) && ctx.hasInput(4)) {
    TUNEC_ASSIGN_OR_RETURN(ValueId segment, addPart(ctx, "segment", OpKind::Gather, AxisAttrs{0},
                                                    {ctx.inputs[4], ctx.inputs[1]}));
    TUNEC_ASSIGN_OR_RETURN(sum, addPart(ctx, "embeddings", OpKind::Add, NoAttrs{}, {sum, segment}));
  }
  const float epsilon = ctx.attrs.getFloat("epsilon", 1e-12f);
  Conversion c{
      OpKind::LayerNormalization, NormAttrs{2, epsilon}, {sum, ctx.inputs[5], ctx.inputs[6]}};
  if (ctx.numOutputs > 1 && !ctx.proto.output(1).empty()) {
    ValueId lengths = kNoValue;
    if (ctx.hasInput(7)) {
      // The lengths as f32 (exact below 2^24), which the Attention that reads them compares with
      // key positions in f32 (where ONNX Runtime writes int32): symbolic shapes compute in f32.
      TUNEC_ASSIGN_OR_RETURN(ValueId ones, addPart(ctx, "mask.f32", OpKind::Cast,
                                                   CastAttrs{DType::F32}, {ctx.inputs[7]}));
      TUNEC_ASSIGN_OR_RETURN(
          lengths, addPart(ctx, "mask_index", OpKind::ReduceSum, ReduceAttrs{{1}, false}, {ones}));
    } else {
      if (!ids.isStatic()) return makeError("mask_index without a mask needs a static shape");
      Tensor full(DType::F32, Shape{ids[0]});
      for (int64_t b = 0; b < ids[0]; ++b) full.setDouble(b, static_cast<double>(ids[1]));
      lengths = addPartConstant(ctx, "mask_index", std::move(full));
    }
    c.valueOutputs.emplace_back(1, lengths);
  }
  if (ctx.numOutputs > 2) c.valueOutputs.emplace_back(2, sum);
  return c;
}

const std::map<std::string, Converter>& converters() {
  static const std::map<std::string, Converter> table = {
#define PLAIN(name) {#name, convertPlain<OpKind::name>},
      PLAIN(Abs) PLAIN(Acos) PLAIN(Acosh) PLAIN(Asin) PLAIN(Asinh) PLAIN(Atan) PLAIN(Atanh) PLAIN(
          Ceil) PLAIN(Cos) PLAIN(Cosh) PLAIN(Erf) PLAIN(Exp) PLAIN(Floor) PLAIN(HardSwish)
          PLAIN(Identity) PLAIN(IsNaN) PLAIN(Log) PLAIN(Mish) PLAIN(Neg) PLAIN(Not) PLAIN(
              Reciprocal) PLAIN(Relu) PLAIN(Sigmoid) PLAIN(Sign) PLAIN(Sin) PLAIN(Sinh)
              PLAIN(Softplus) PLAIN(Softsign) PLAIN(Sqrt) PLAIN(Tan) PLAIN(Tanh) PLAIN(PRelu) PLAIN(
                  Max) PLAIN(Min) PLAIN(Sum) PLAIN(Mean) PLAIN(Equal) PLAIN(Less) PLAIN(LessOrEqual)
                  PLAIN(Greater) PLAIN(GreaterOrEqual) PLAIN(And) PLAIN(Or) PLAIN(Xor)
                      PLAIN(BitwiseAnd) PLAIN(BitwiseOr) PLAIN(BitwiseXor) PLAIN(Where)
                          PLAIN(GlobalAveragePool) PLAIN(GlobalMaxPool)
#undef PLAIN
#define BINARY(name) {#name, convertBinary<OpKind::name>},
                              BINARY(Add) BINARY(Sub) BINARY(Mul) BINARY(Div) BINARY(Pow)
#undef BINARY
#define ALPHA(name) {#name, convertAlpha<OpKind::name>},
                                  ALPHA(Celu) ALPHA(Elu) ALPHA(HardSigmoid) ALPHA(LeakyRelu)
                                      ALPHA(Selu) ALPHA(Swish) ALPHA(ThresholdedRelu)
#undef ALPHA
#define REDUCE(name) {#name, convertReduce<OpKind::name>},
                                          REDUCE(ReduceMean) REDUCE(ReduceSum) REDUCE(ReduceMax)
                                              REDUCE(ReduceMin) REDUCE(ReduceProd) REDUCE(ReduceL1)
                                                  REDUCE(ReduceL2) REDUCE(ReduceSumSquare)
                                                      REDUCE(ReduceLogSum) REDUCE(ReduceLogSumExp)
#undef REDUCE
                                                          {"Gelu", convertGelu},
      {"IsInf", convertIsInf},
      {"Cast", convertCast},
      {"QuantizeLinear", convertQuantize<true>},
      {"DequantizeLinear", convertQuantize<false>},
      {"QLinearMatMul", convertQLinearMatMul},
      {"MatMul", convertMatMul},
      {"QLinearConv", convertQLinearConv},
      {"MatMulInteger", convertInteger<OpKind::MatMul>},
      {"Round", convertRound},
      {"DynamicQuantizeLinear", convertDynamicQuantizeLinear},
      {"ConvInteger", convertInteger<OpKind::Conv>},
      {"Clip", convertClip},
      {"Dropout", convertDropout},
      {"Mod", convertMod},
      {"Conv", convertConv},
      {"MaxPool", convertPool<OpKind::MaxPool>},
      {"AveragePool", convertPool<OpKind::AveragePool>},
      {"LpPool", convertPool<OpKind::LpPool>},
      {"Gemm", convertGemm},
      {"Softmax", convertSoftmax<OpKind::Softmax>},
      {"LogSoftmax", convertSoftmax<OpKind::LogSoftmax>},
      {"Hardmax", convertSoftmax<OpKind::Hardmax>},
      {"LayerNormalization", convertLayerNorm},
      {"BatchNormalization", convertBatchNorm},
      {"InstanceNormalization", convertInstanceNorm},
      {"ArgMax", convertArgReduce<OpKind::ArgMax>},
      {"ArgMin", convertArgReduce<OpKind::ArgMin>},
      {"Reshape", convertReshape},
      {"Flatten", convertFlatten},
      {"Squeeze", convertSqueezeFamily<OpKind::Squeeze>},
      {"Unsqueeze", convertSqueezeFamily<OpKind::Unsqueeze>},
      {"Transpose", convertTranspose},
      {"Concat", convertConcat},
      {"Split", convertSplit},
      {"Slice", convertSlice},
      {"Gather", convertGather<OpKind::Gather>},
      {"GatherElements", convertGather<OpKind::GatherElements>},
      {"Expand", convertExpand},
      {"Range", convertRange},
      {"Trilu", convertTrilu},
      {"Resize", convertResize},
      {"ConvTranspose", convertConvTranspose},
      {"Upsample", convertResize},
      {"Tile", convertTile},
      {"Pad", convertPad},
      {"ConstantOfShape", convertConstantOfShape},
      {"DepthToSpace", convertDepthToSpace<OpKind::DepthToSpace>},
      {"SpaceToDepth", convertDepthToSpace<OpKind::SpaceToDepth>},
      // ONNX Runtime's quantizer (QOperator form).
      {"com.microsoft.QLinearAdd", convertQLinearBinary<OpKind::Add>},
      {"com.microsoft.QLinearMul", convertQLinearBinary<OpKind::Mul>},
      {"com.microsoft.QLinearSigmoid", convertQLinearUnary<OpKind::Sigmoid>},
      {"com.microsoft.QLinearLeakyRelu", convertQLinearUnary<OpKind::LeakyRelu>},
      {"com.microsoft.QLinearGlobalAveragePool", convertQLinearGlobalAveragePool},
      {"com.microsoft.QLinearAveragePool", convertQLinearAveragePool},
      {"com.microsoft.QLinearSoftmax", convertQLinearSoftmax},
      {"com.microsoft.QLinearConcat", convertQLinearConcat},
      {"com.microsoft.QGemm", convertQGemm},
      {"com.microsoft.MatMulIntegerToFloat", convertMatMulIntegerToFloat},
      {"com.microsoft.MatMulNBits", convertMatMulNBits},
      {"com.microsoft.DynamicQuantizeMatMul", convertDynamicQuantizeMatMul},
      // ONNX Runtime's transformer optimizer.
      {"com.microsoft.Gelu", convertMsGelu},
      {"com.microsoft.BiasGelu", convertBiasGelu<false>},
      {"com.microsoft.FastGelu", convertBiasGelu<true>},
      {"com.microsoft.SkipLayerNormalization", convertSkipNormalization<false>},
      {"com.microsoft.SkipSimplifiedLayerNormalization", convertSkipNormalization<true>},
      {"com.microsoft.SimplifiedLayerNormalization", convertSimplifiedLayerNorm},
      {"RMSNormalization", convertRmsNormalization},
      {"com.microsoft.Attention", convertMsAttention},
      {"com.microsoft.GroupQueryAttention", convertGroupQueryAttention},
      {"com.microsoft.RotaryEmbedding", convertRotaryEmbedding},
      {"com.microsoft.EmbedLayerNormalization", convertEmbedLayerNorm},
  };
  return table;
}

} // namespace

Converter findConverter(const std::string& opType) {
  auto it = converters().find(opType);
  return it == converters().end() ? nullptr : it->second;
}

std::optional<std::string_view> onnxOpExpansion(std::string_view onnxOp) {
  static const std::pair<std::string_view, std::string_view> kExpansions[] = {
      {"QLinearConv", "DequantizeLinear -> Conv -> QuantizeLinear"},
      {"QLinearMatMul", "DequantizeLinear -> MatMul -> QuantizeLinear"},
      {"ConvInteger", "DequantizeLinear -> Conv -> Cast, or Conv of int32 values"},
      {"Upsample", "Resize (asymmetric coordinates)"},
      {"ConvTranspose", "zeros spread by Reshape, Pad, Reshape -> Conv of reversed weights"},
      {"MatMulInteger", "DequantizeLinear -> MatMul -> Cast, or MatMul of int32 values"},
      {"DynamicQuantizeLinear", "ReduceMin, ReduceMax -> scale, zero point -> QuantizeLinear"},
      {"com.microsoft.QLinearAdd", "DequantizeLinear -> Add -> QuantizeLinear"},
      {"com.microsoft.QLinearMul", "DequantizeLinear -> Mul -> QuantizeLinear"},
      {"com.microsoft.QLinearSigmoid", "DequantizeLinear -> Sigmoid -> QuantizeLinear"},
      {"com.microsoft.QLinearLeakyRelu", "DequantizeLinear -> LeakyRelu -> QuantizeLinear"},
      {"com.microsoft.QLinearGlobalAveragePool",
       "DequantizeLinear -> GlobalAveragePool -> QuantizeLinear"},
      {"com.microsoft.QLinearAveragePool", "DequantizeLinear -> AveragePool -> QuantizeLinear"},
      {"com.microsoft.QLinearSoftmax", "DequantizeLinear -> Softmax -> QuantizeLinear"},
      {"com.microsoft.QLinearConcat", "DequantizeLinear -> Concat -> QuantizeLinear"},
      {"com.microsoft.QGemm", "DequantizeLinear -> Gemm (-> QuantizeLinear)"},
      {"com.microsoft.MatMulIntegerToFloat", "DequantizeLinear -> MatMul (-> Add)"},
      {"com.microsoft.MatMulNBits", "MatMulNBits (-> Add)"},
      {"com.microsoft.DynamicQuantizeMatMul",
       "DynamicQuantizeLinear -> DequantizeLinear -> MatMul (-> Add)"},
      {"com.microsoft.Gelu", "Gelu"},
      {"com.microsoft.BiasGelu", "Add -> Gelu"},
      {"com.microsoft.FastGelu", "(Add ->) Gelu (tanh)"},
      {"com.microsoft.SkipLayerNormalization", "Add -> LayerNormalization"},
      {"Range", "a constant; of a symbolic limit, a Slice of the bound's values"},
      {"com.microsoft.SkipSimplifiedLayerNormalization", "Add -> RMSNormalization"},
      {"com.microsoft.SimplifiedLayerNormalization", "RMSNormalization"},
      {"com.microsoft.GroupQueryAttention",
       "Concat (present K/V) -> MatMul -> Softmax -> MatMul, with the rotary embedding"},
      {"com.microsoft.RotaryEmbedding", "Slice -> Mul -> Sub/Add -> Concat"}};
  for (const auto& [op, expansion] : kExpansions)
    if (op == onnxOp) return expansion;
  return std::nullopt;
}

std::vector<std::string> supportedOnnxOps() {
  std::vector<std::string> names;
  for (const auto& [name, fn] : converters()) names.push_back(name);
  names.push_back("Constant");
  names.push_back("Shape");
  names.push_back("Size");
  std::sort(names.begin(), names.end());
  return names;
}

} // namespace tunec::onnx_import
