// Light ops: a run of elementwise ops becomes one strided program (lowering.h); layout-free
// data movement (transpose, slice, concat, split, expand) becomes a copy program; reshapes are
// views; softmax, layer norm, pooling and gather have loop kernels of their own.
#include "driver/lowering.h"
#include "ir/op_registry.h"
#include "passes/pattern.h"
#include "runtime/typed_kernels.h"

#include <cfloat>
#include <cmath>
#include <cstring>
#include <map>

namespace tunec::driver {

using rt::EwInstr;
using rt::EwOp;

namespace {

// True when strides `a` and `b` walk a tensor of `shape` over the same elements (dimensions of
// extent 1 are never stepped along).
bool sameWalk(const Shape& shape, const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  for (int d = 0; d < shape.rank(); ++d)
    if (shape[d] > 1 && a[static_cast<size_t>(d)] != b[static_cast<size_t>(d)]) return false;
  return true;
}

} // namespace

std::optional<EwOp> elementwiseOp(const Node& node, float& p0, float& p1) {
  p0 = p1 = 0.f;
  switch (node.kind) {
  case OpKind::Add:
    return EwOp::Add;
  case OpKind::Sub:
    return EwOp::Sub;
  case OpKind::Mul:
    return EwOp::Mul;
  case OpKind::Div:
    return EwOp::Div;
  case OpKind::Pow:
    return EwOp::Pow;
  case OpKind::Max:
    return EwOp::Max;
  case OpKind::Min:
    return EwOp::Min;
  case OpKind::Sum:
    return EwOp::Add;
  case OpKind::Relu:
    return EwOp::Relu;
  case OpKind::LeakyRelu:
    p0 = std::get<AlphaBetaAttrs>(node.attrs).alpha;
    return EwOp::LeakyRelu;
  case OpKind::Clip: {
    const auto& a = std::get<ClipAttrs>(node.attrs);
    p0 = std::isinf(a.min) ? -INFINITY : static_cast<float>(a.min);
    p1 = std::isinf(a.max) ? INFINITY : static_cast<float>(a.max);
    return EwOp::Clip;
  }
  case OpKind::Sigmoid:
    return EwOp::Sigmoid;
  case OpKind::Tanh:
    return EwOp::Tanh;
  case OpKind::Exp:
    return EwOp::Exp;
  case OpKind::Log:
    return EwOp::Log;
  case OpKind::Sqrt:
    return EwOp::Sqrt;
  case OpKind::Neg:
    return EwOp::Neg;
  case OpKind::Abs:
    return EwOp::Abs;
  case OpKind::Erf:
    return EwOp::Erf;
  case OpKind::Gelu:
    if (std::get<GeluAttrs>(node.attrs).tanhApproximation) return std::nullopt;
    return EwOp::Gelu;
  case OpKind::Reciprocal:
    return EwOp::Reciprocal;
  case OpKind::HardSigmoid: {
    const auto& a = std::get<AlphaBetaAttrs>(node.attrs);
    p0 = a.alpha, p1 = a.beta;
    return EwOp::HardSigmoid;
  }
  case OpKind::HardSwish:
    return EwOp::HardSwish;
  case OpKind::Swish:
    p0 = std::get<AlphaBetaAttrs>(node.attrs).alpha;
    return EwOp::Swish;
  case OpKind::Softplus:
    return EwOp::Softplus;
  case OpKind::Floor:
    return EwOp::Floor;
  case OpKind::Ceil:
    return EwOp::Ceil;
  case OpKind::Round:
    return EwOp::Round;
  case OpKind::Sign:
    return EwOp::Sign;
  case OpKind::Elu:
    p0 = std::get<AlphaBetaAttrs>(node.attrs).alpha;
    return EwOp::Elu;
  case OpKind::Cos:
    return EwOp::Cos;
  case OpKind::Sin:
    return EwOp::Sin;
  case OpKind::Tan:
    return EwOp::Tan;
  case OpKind::Acos:
    return EwOp::Acos;
  case OpKind::Asin:
    return EwOp::Asin;
  case OpKind::Atan:
    return EwOp::Atan;
  case OpKind::Sinh:
    return EwOp::Sinh;
  case OpKind::Cosh:
    return EwOp::Cosh;
  case OpKind::Asinh:
    return EwOp::Asinh;
  case OpKind::Acosh:
    return EwOp::Acosh;
  case OpKind::Atanh:
    return EwOp::Atanh;
  case OpKind::Softsign:
    return EwOp::Softsign;
  case OpKind::Mish:
    return EwOp::Mish;
  case OpKind::Selu: {
    const auto& a = std::get<AlphaBetaAttrs>(node.attrs);
    p0 = a.alpha, p1 = a.beta;
    return EwOp::Selu;
  }
  case OpKind::Celu:
    p0 = std::get<AlphaBetaAttrs>(node.attrs).alpha;
    return EwOp::Celu;
  case OpKind::ThresholdedRelu:
    p0 = std::get<AlphaBetaAttrs>(node.attrs).alpha;
    return EwOp::ThresholdedRelu;
  case OpKind::PRelu:
    return EwOp::PRelu;
  case OpKind::Mean:
    return EwOp::Add;
  case OpKind::Identity:
    return EwOp::Copy;
  case OpKind::Dropout:
    return node.outputs.size() == 1 ? std::optional(EwOp::Copy) : std::nullopt;
  default:
    return std::nullopt;
  }
}

namespace {

bool allF32(const Graph& g, const Node& n) {
  for (ValueId v : n.inputs)
    if (v != kNoValue && g.value(v).type.dtype != DType::F32) return false;
  for (ValueId v : n.outputs)
    if (g.value(v).type.dtype != DType::F32) return false;
  return true;
}

bool isElementwise(const Graph& g, const Node& n) {
  float p0, p1;
  if (!elementwiseOp(n, p0, p1) || !allF32(g, n) || n.outputs.size() != 1) return false;
  bool variadic = n.kind == OpKind::Sum || n.kind == OpKind::Mean || n.kind == OpKind::Max ||
                  n.kind == OpKind::Min;
  bool binary = rt::isBinary(*elementwiseOp(n, p0, p1)) && !variadic;
  if (binary && n.inputs.size() != 2) return false;
  return !n.inputs.empty() && n.inputs.size() <= 6;
}

// A run of elementwise nodes, each consuming the previous one's output, as one program.
size_t lowerElementwiseRun(Lowering& l, const std::vector<NodeId>& nodes, size_t begin) {
  const Graph& g = l.graph();
  size_t end = begin + 1;
  while (end < nodes.size()) {
    const Node& n = g.node(nodes[end]);
    ValueId prev = g.node(nodes[end - 1]).outputs[0];
    if (!isElementwise(g, n) || std::find(n.inputs.begin(), n.inputs.end(), prev) == n.inputs.end())
      break;
    ++end;
  }
  ValueId result = g.node(nodes[end - 1]).outputs[0];
  const Shape& outShape = g.value(result).type.shape;
  // External operands, and the output layout: NHWC when an activation operand is NHWC.
  std::map<ValueId, int> inputIndex;
  std::vector<Lowering::EwOperand> operands;
  Phys outPhys = Phys::Plain;
  std::map<ValueId, bool> inRun;
  for (size_t i = begin; i < end; ++i) inRun[g.node(nodes[i]).outputs[0]] = true;
  for (size_t i = begin; i < end; ++i)
    for (ValueId v : g.node(nodes[i]).inputs) {
      if (inRun.count(v) || inputIndex.count(v)) continue;
      Phys phys;
      int t = l.tensorAny(v, phys);
      const Shape& s = g.value(v).type.shape;
      if (phys == Phys::Nhwc && outShape.rank() == 4 && s == outShape) outPhys = Phys::Nhwc;
      inputIndex[v] = static_cast<int>(operands.size());
      operands.push_back(
          {t, Lowering::broadcastStrides(s, Lowering::logicalStrides(s, phys), outShape), 0});
    }
  if (operands.size() > 8) {
    l.unsupported(g.node(nodes[begin]), "an elementwise chain with more than 8 inputs");
    return begin;
  }
  std::vector<EwInstr> code;
  std::map<ValueId, int> reg;
  std::string label;
  for (size_t i = begin; i < end; ++i) {
    const Node& n = g.node(nodes[i]);
    float p0, p1;
    EwOp op = *elementwiseOp(n, p0, p1);
    auto operand = [&](ValueId v) { return reg.count(v) ? reg[v] : -1 - inputIndex[v]; };
    int dst = static_cast<int>(i - begin) % 2;
    if (rt::isBinary(op) && n.inputs.size() == 1) {
      code.push_back({EwOp::Copy, dst, operand(n.inputs[0]), -1000});
    } else if (rt::isBinary(op)) {
      code.push_back({op, dst, operand(n.inputs[0]), operand(n.inputs[1]), p0, p1});
      for (size_t k = 2; k < n.inputs.size(); ++k)
        code.push_back({op, dst, dst, operand(n.inputs[k]), p0, p1});
    } else {
      code.push_back({op, dst, operand(n.inputs[0]), -1000, p0, p1});
    }
    if (n.kind == OpKind::Mean)
      code.push_back({EwOp::Scale, dst, dst, -1000, 1.f / static_cast<float>(n.inputs.size())});
    reg[n.outputs[0]] = dst;
    label += (label.empty() ? "" : "+") + std::string(opName(n.kind));
  }
  label += " '" + g.node(nodes[begin]).name + "'";
  // A model output is written in plain layout directly (the strides read NHWC operands).
  const auto& outs = g.outputs();
  if (std::find(outs.begin(), outs.end(), result) != outs.end()) outPhys = Phys::Plain;
  int out = l.defineOutput(result, outPhys);
  l.addElementwise(label, out, outShape, outPhys, 0, Lowering::logicalStrides(outShape, outPhys),
                   operands, std::move(code));
  return end;
}

// A plain copy program: `out` element idx = in[offset + sum(idx[d] * strides[d])].
void copyProgram(Lowering& l, const std::string& label, int out, const Shape& outShape,
                 int64_t outOffset, const std::vector<int64_t>& outStrides, int in,
                 std::vector<int64_t> inStrides, int64_t inOffset) {
  l.addElementwise(label, out, outShape, Phys::Plain, outOffset, outStrides,
                   {{in, std::move(inStrides), inOffset}}, {{EwOp::Copy, 0, -1, -1000}});
}

// A strided copy of any element type: the vectorized program for f32, a typed one otherwise.
bool copyAny(Lowering& l, const std::string& label, int out, const Shape& outShape,
             int64_t outOffset, const std::vector<int64_t>& outStrides, int in,
             std::vector<int64_t> inStrides, int64_t inOffset, DType dtype) {
  if (dtype == DType::F32) {
    copyProgram(l, label, out, outShape, outOffset, outStrides, in, std::move(inStrides), inOffset);
    return true;
  }
  rt::TypedProgram p; // typed steps take every element type
  p.op = rt::TypedOp::Cast;
  p.out = dtype;
  p.in = {dtype};
  p.dims = outShape.dims();
  p.outStrides = outStrides;
  p.outOffset = outOffset;
  p.inStrides = {std::move(inStrides)};
  p.inOffsets = {inOffset};
  rt::Step step;
  step.label = label;
  p.encode(step);
  step.tensors = {out, in};
  l.addStep(std::move(step), {in}, {out});
  return true;
}

// A LayerNorm step over rows x cols: tensors {out, in, scale, bias, mean, invStd} (-1: absent).
void addLayerNormStep(Lowering& l, const std::string& label, std::vector<int> tensors, int64_t rows,
                      int64_t cols, float epsilon) {
  rt::Step step;
  step.kind = rt::StepKind::LayerNorm;
  step.label = label;
  step.tensors = tensors;
  step.ints = {rows, cols};
  step.floats = {epsilon};
  l.addStep(std::move(step), {tensors[1], tensors[2], tensors[3]},
            {tensors[0], tensors[4], tensors[5]});
}

// Pad in reflect or edge mode: the input into the interior, then axis by axis the borders,
// copied within the output from what is already written (after axis d, every dim up to d is
// complete): edge rows read the first or last interior row with stride 0 along d, reflected
// rows read it backwards (stride -1 along d), starting one row inside the edge.
bool lowerBorderPad(Lowering& l, const Node& n, const std::string& label, DType dt) {
  const Graph& g = l.graph();
  const auto& a = std::get<PadAttrs>(n.attrs);
  const Shape& xs = g.value(n.inputs[0]).type.shape;
  const Shape& ys = g.value(n.outputs[0]).type.shape;
  auto r = static_cast<size_t>(xs.rank());
  bool reflect = a.mode == PadMode::Reflect;
  for (size_t k = 0; k < r; ++k) {
    int64_t before = a.pads[k], after = a.pads[k + r], size = xs[static_cast<int>(k)];
    if (before < 0 || after < 0) {
      l.unsupported(n, "negative pads (cropping) are compiled only in constant mode");
      return false;
    }
    if ((before > 0 || after > 0) && (reflect ? std::max(before, after) >= size : size == 0)) {
      l.unsupported(n, reflect ? "reflect padding needs pads smaller than the padded dimension"
                               : "edge padding of an empty dimension");
      return false;
    }
  }
  int in = l.tensorIn(n.inputs[0], Phys::Plain);
  int out = l.defineOutput(n.outputs[0], Phys::Plain);
  std::vector<int64_t> sy = ys.strides();
  int64_t interior = 0;
  for (size_t k = 0; k < r; ++k) interior += a.pads[k] * sy[k];
  if (xs.numel() > 0 && !copyAny(l, label, out, xs, interior, sy, in, xs.strides(), 0, dt))
    return false;
  for (size_t d = 0; d < r; ++d)
    for (bool front : {true, false}) {
      int64_t width = front ? a.pads[d] : a.pads[d + r];
      if (width == 0) continue;
      std::vector<int64_t> dims;
      int64_t base = 0; // the region's offset along every dim but d
      for (size_t k = 0; k < r; ++k) {
        dims.push_back(k < d ? ys[static_cast<int>(k)] : k == d ? width : xs[static_cast<int>(k)]);
        if (k > d) base += a.pads[k] * sy[k];
      }
      if (Shape(dims).numel() == 0) continue;
      int64_t first = a.pads[d], last = a.pads[d] + xs[static_cast<int>(d)] - 1;
      int64_t to = front ? 0 : last + 1;
      // The row the border's first row reads, and the step along d.
      int64_t from = reflect ? (front ? 2 * first : last - 1) : (front ? first : last);
      int64_t step = reflect ? -1 : 0;
      std::vector<int64_t> src = sy;
      src[d] = step * sy[d];
      if (!copyAny(l, label + " (border)", out, Shape(dims), base + to * sy[d], sy, out, src,
                   base + from * sy[d], dt))
        return false;
    }
  return true;
}

std::optional<rt::TypedOp> typedOpOf(const Node& n) {
  using T = rt::TypedOp;
  switch (n.kind) {
  case OpKind::Cast:
  case OpKind::Identity:
    return T::Cast;
  case OpKind::Dropout:
    return n.outputs.size() == 1 ? std::optional(T::Cast) : std::nullopt;
  case OpKind::Add:
    return T::Add;
  case OpKind::Sub:
    return T::Sub;
  case OpKind::Mul:
    return T::Mul;
  case OpKind::Div:
    return T::Div;
  case OpKind::Mod:
    return std::get<ModAttrs>(n.attrs).fmod ? T::FMod : T::Mod;
  case OpKind::Pow:
    return T::Pow;
  case OpKind::Max:
    return T::Max;
  case OpKind::Min:
    return T::Min;
  case OpKind::Equal:
    return T::Equal;
  case OpKind::Less:
    return T::Less;
  case OpKind::LessOrEqual:
    return T::LessOrEqual;
  case OpKind::Greater:
    return T::Greater;
  case OpKind::GreaterOrEqual:
    return T::GreaterOrEqual;
  case OpKind::And:
    return T::And;
  case OpKind::Or:
    return T::Or;
  case OpKind::Xor:
    return T::Xor;
  case OpKind::Not:
    return T::Not;
  case OpKind::Neg:
    return T::Neg;
  case OpKind::Abs:
    return T::Abs;
  case OpKind::Sign:
    return T::Sign;
  case OpKind::Where:
    return T::Where;
  case OpKind::IsNaN:
    return T::IsNaN;
  case OpKind::IsInf: {
    const auto& a = std::get<IsInfAttrs>(n.attrs);
    if (a.detectPositive && a.detectNegative) return T::IsInf;
    if (a.detectPositive) return T::IsInfPositive;
    if (a.detectNegative) return T::IsInfNegative;
    return std::nullopt;
  }
  case OpKind::BitwiseAnd:
    return T::BitAnd;
  case OpKind::BitwiseOr:
    return T::BitOr;
  case OpKind::BitwiseXor:
    return T::BitXor;
  case OpKind::Relu:
    return T::Relu;
  case OpKind::QuantizeLinear:
    return T::QuantizeLinear;
  case OpKind::DequantizeLinear:
    return T::DequantizeLinear;
  default:
    return std::nullopt;
  }
}

// One typed elementwise step (any element type, broadcasting); false when not applicable.
bool lowerTyped(Lowering& l, const Node& n) {
  const Graph& g = l.graph();
  auto op = typedOpOf(n);
  if (!op || n.outputs.size() != 1) return false;
  bool binary = (*op >= rt::TypedOp::Add && *op <= rt::TypedOp::Xor) ||
                *op == rt::TypedOp::BitAnd || *op == rt::TypedOp::BitOr ||
                *op == rt::TypedOp::BitXor;
  bool quant = *op == rt::TypedOp::QuantizeLinear || *op == rt::TypedOp::DequantizeLinear;
  size_t arity = *op == rt::TypedOp::Where || quant ? 3 : binary ? 2 : 1;
  if (n.inputs.size() != arity) return false;
  const Value& y = g.value(n.outputs[0]);
  const Shape& ys = y.type.shape;
  // A per-axis scale or zero point of a quantization: one element per index of the axis.
  auto perAxis = [&](size_t i) {
    return quant && i > 0 && g.value(n.inputs[i]).type.shape.rank() == 1;
  };
  // NHWC when the output is 4-d and every input of its shape was produced NHWC, the others
  // scalars or per-axis parameters: a quantized activation between NHWC kernels (the
  // QuantizeLinear before an int8 convolution, the DequantizeLinear after one) is not reordered.
  Phys phys = Phys::Plain;
  if (!Lowering::sameBytes(ys)) {
    bool any = false, all = true;
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      if (n.inputs[i] == kNoValue) return false;
      const Shape& xs = g.value(n.inputs[i]).type.shape;
      if (xs == ys) {
        any = true;
        all = all && l.producedPhys(n.inputs[i]) == Phys::Nhwc;
      } else if (xs.numel() != 1 && !perAxis(i)) {
        all = false;
      }
    }
    if (any && all) phys = Phys::Nhwc;
  }
  rt::TypedProgram p;
  p.op = *op;
  p.out = y.type.dtype;
  p.dims = ys.dims();
  p.outStrides = Lowering::logicalStrides(ys, phys);
  for (size_t i = 0; i < n.inputs.size(); ++i) {
    ValueId v = n.inputs[i];
    if (v == kNoValue) return false;
    const Value& x = g.value(v);
    p.in.push_back(x.type.dtype);
    if (perAxis(i)) {
      std::vector<int64_t> strides(static_cast<size_t>(ys.rank()), 0);
      strides[static_cast<size_t>(std::get<QuantAttrs>(n.attrs).axis)] = 1;
      p.inStrides.push_back(std::move(strides));
    } else {
      Phys in = x.type.shape == ys ? phys : Phys::Plain;
      p.inStrides.push_back(
          Lowering::broadcastStrides(x.type.shape, Lowering::logicalStrides(x.type.shape, in), ys));
    }
    p.inOffsets.push_back(0);
  }
  std::vector<int> ins;
  for (ValueId v : n.inputs)
    ins.push_back(l.tensorIn(v, g.value(v).type.shape == ys ? phys : Phys::Plain));
  int out = l.defineOutput(n.outputs[0], phys);
  rt::Step step;
  step.label = std::string(opName(n.kind)) + " '" + n.name + "'";
  p.encode(step);
  step.tensors = {out};
  step.tensors.insert(step.tensors.end(), ins.begin(), ins.end());
  l.addStep(std::move(step), ins, {out});
  if (quant) l.noteQuantizeStep();
  return true;
}

int64_t normalizeAxis(int64_t axis, int rank) {
  return axis < 0 ? axis + rank : axis;
}

int64_t product(const std::vector<int64_t>& d, size_t from, size_t to) {
  int64_t p = 1;
  for (size_t i = from; i < to; ++i) p *= d[i];
  return p;
}

// Reductions: the reduced axes are moved last (a copy, unless they already are), then each row
// is reduced.
bool lowerReduce(Lowering& l, const Node& n) {
  const Graph& g = l.graph();
  const Shape& xs = g.value(n.inputs[0]).type.shape;
  const auto& a = std::get<ReduceAttrs>(n.attrs);
  std::vector<bool> reduced(static_cast<size_t>(xs.rank()), a.axes.empty());
  for (int64_t axis : a.axes) reduced[static_cast<size_t>(normalizeAxis(axis, xs.rank()))] = true;
  std::vector<int64_t> perm, kept;
  int64_t rows = 1, len = 1;
  for (int d = 0; d < xs.rank(); ++d)
    if (!reduced[static_cast<size_t>(d)]) {
      perm.push_back(d);
      rows *= xs[d];
    }
  for (int d = 0; d < xs.rank(); ++d)
    if (reduced[static_cast<size_t>(d)]) {
      perm.push_back(d);
      len *= xs[d];
    }
  if (len == 0 || rows == 0) {
    l.unsupported(n, "reductions over empty tensors are not compiled");
    return false;
  }
  // The mean or max over H and W of an NHWC activation (a classifier's global pool written as
  // ReduceMean) is a global pool reading it where it lies: no reorder to plain first.
  bool spatial = xs.rank() == 4 && !reduced[0] && !reduced[1] && reduced[2] && reduced[3];
  if (spatial && (n.kind == OpKind::ReduceMean || n.kind == OpKind::ReduceMax) &&
      l.producedPhys(n.inputs[0]) == Phys::Nhwc) {
    Phys phys;
    int in = l.tensorAny(n.inputs[0], phys);
    rt::PoolParams p{};
    p.isMax = n.kind == OpKind::ReduceMax;
    p.n = xs[0], p.c = xs[1], p.h = xs[2], p.w = xs[3], p.oh = 1, p.ow = 1;
    p.kh = p.h, p.kw = p.w, p.sh = p.sw = p.dh = p.dw = 1;
    std::vector<int64_t> is = Lowering::logicalStrides(xs, phys);
    int64_t outStrides[4] = {xs[1], 1, 1, 1}; // [N, C] or [N, C, 1, 1]: the same bytes
    for (size_t d = 0; d < 4; ++d) {
      p.inStride[d] = is[d];
      p.outStride[d] = outStrides[d];
    }
    int out = l.defineOutput(n.outputs[0], Phys::Plain);
    rt::Step step;
    step.kind = rt::StepKind::Pool;
    step.label = std::string(opName(n.kind)) + " '" + n.name + "' (a global pool of NHWC)";
    step.tensors = {out, in};
    step.ints.resize(sizeof(p) / sizeof(int64_t));
    std::memcpy(step.ints.data(), &p, sizeof(p));
    l.addStep(std::move(step), {in}, {out});
    return true;
  }
  int in = l.tensorIn(n.inputs[0], Phys::Plain);
  bool moved = false;
  for (size_t i = 0; i < perm.size(); ++i) moved |= perm[i] != static_cast<int64_t>(i);
  if (moved) {
    std::vector<int64_t> dims, strides, xstr = xs.strides();
    for (int64_t p : perm) {
      dims.push_back(xs[static_cast<int>(p)]);
      strides.push_back(xstr[static_cast<size_t>(p)]);
    }
    Shape ts(dims);
    int t = l.addArenaTensor(ts.numel() * static_cast<int64_t>(dtypeSize(DType::F32)));
    copyProgram(l, std::string(opName(n.kind)) + " '" + n.name + "' (axes moved last)", t, ts, 0,
                ts.strides(), in, strides, 0);
    in = t;
  }
  static const std::map<OpKind, rt::ReduceKind> kinds = {
      {OpKind::ReduceSum, rt::ReduceKind::Sum},
      {OpKind::ReduceMean, rt::ReduceKind::Mean},
      {OpKind::ReduceMax, rt::ReduceKind::Max},
      {OpKind::ReduceMin, rt::ReduceKind::Min},
      {OpKind::ReduceProd, rt::ReduceKind::Prod},
      {OpKind::ReduceL1, rt::ReduceKind::L1},
      {OpKind::ReduceL2, rt::ReduceKind::L2},
      {OpKind::ReduceLogSum, rt::ReduceKind::LogSum},
      {OpKind::ReduceLogSumExp, rt::ReduceKind::LogSumExp},
      {OpKind::ReduceSumSquare, rt::ReduceKind::SumSquare}};
  int out = l.defineOutput(n.outputs[0], Phys::Plain);
  rt::Step step;
  step.kind = rt::StepKind::Reduce;
  step.label = std::string(opName(n.kind)) + " '" + n.name + "'";
  step.tensors = {out, in};
  step.ints = {rows, len, static_cast<int64_t>(kinds.at(n.kind))};
  l.addStep(std::move(step), {in}, {out});
  return true;
}

// The runs (src, dst, len) of a Gather of channels by `indices` (normalized), written from
// channel `at` on, appended to `runs` (joined with the last run where they go on).
void appendChannelRuns(const std::vector<int64_t>& indices, int64_t at,
                       std::vector<int64_t>& runs) {
  for (size_t k = 0; k < indices.size(); ++k) {
    int64_t i = indices[k], dst = at + static_cast<int64_t>(k);
    size_t m = runs.size();
    if (m && runs[m - 3] + runs[m - 1] == i && runs[m - 2] + runs[m - 1] == dst)
      ++runs[m - 1];
    else
      runs.insert(runs.end(), {i, dst, 1});
  }
}

void addChannelRunsStep(Lowering& l, const std::string& label, int out, int in, int64_t pixels,
                        int64_t inLd, int64_t outLd, const std::vector<int64_t>& runs) {
  rt::Step step;
  step.kind = rt::StepKind::ChannelRuns;
  step.label = label;
  step.tensors = {out, in};
  step.ints = {pixels, inLd, outLd, static_cast<int64_t>(runs.size() / 3)};
  step.ints.insert(step.ints.end(), runs.begin(), runs.end());
  l.addStep(std::move(step), {in}, {out});
}

// A Concat along the channels of NHWC activations (passes/channel_views.h): one buffer, whose
// parts its producers wrote in place; the Gathers of channels into it run here, one
// ChannelRuns step per source they read, and any other input is copied into its part.
bool lowerChannelConcat(Lowering& l, const Node& n, const std::string& label) {
  const Graph& g = l.graph();
  const Shape& ys = g.value(n.outputs[0]).type.shape;
  int out = l.concatBuffer(g.value(n.outputs[0]).producer);
  std::vector<int64_t> ystr = Lowering::logicalStrides(ys, Phys::Nhwc);
  struct Source {
    int64_t ld = 0;
    std::string name;
    std::vector<int64_t> runs; ///< (src, dst, len) triples
  };
  std::map<int, Source> sources;
  int64_t start = 0;
  for (ValueId v : n.inputs) {
    const Shape& is = g.value(v).type.shape;
    const Node* gather = passes::producerOf(g, v, OpKind::Gather);
    if (l.wroteInPlace(v)) {
      start += is[1];
      continue;
    }
    if (gather && l.channelViews().writtenInPlace.count(v)) {
      int64_t ld = 0;
      int data = l.tensorStrided(gather->inputs[0], ld);
      Source& source = sources[data];
      source.ld = ld ? ld : g.value(gather->inputs[0]).type.shape[1];
      source.name = g.value(gather->inputs[0]).name;
      // The channel views took only Gathers by constant indices in range.
      appendChannelRuns(*passes::constantGatherIndices(g, *gather, 1), start, source.runs);
      start += is[1];
      continue;
    }
    Phys phys;
    int in = l.tensorAny(v, phys);
    if (is.numel() > 0)
      copyAny(l, label, out, is, start * ystr[1], ystr, in, Lowering::logicalStrides(is, phys), 0,
              g.value(v).type.dtype);
    start += is[1];
  }
  for (auto& [data, source] : sources)
    addChannelRunsStep(l, label + " (channels of '" + source.name + "')", out, data,
                       ys[0] * ys[2] * ys[3], source.ld, ys[1], source.runs);
  return true;
}

bool lowerSingle(Lowering& l, const Node& n) {
  const Graph& g = l.graph();
  const Value& x = g.value(n.inputs[0]);
  const Shape& xs = x.type.shape;
  const Shape& ys = g.value(n.outputs[0]).type.shape;
  std::string label = std::string(opName(n.kind)) + " '" + n.name + "'";
  switch (n.kind) {
  case OpKind::Reshape:
  case OpKind::Flatten:
  case OpKind::Squeeze:
  case OpKind::Unsqueeze:
    l.defineAlias(n.outputs[0], l.tensorIn(n.inputs[0], Phys::Plain), Phys::Plain);
    return true;
  default:
    break;
  }
  if (n.kind == OpKind::GatherElements) {
    const Value& idx = g.value(n.inputs[1]);
    if (idx.type.dtype != DType::I64 && idx.type.dtype != DType::I32) {
      l.unsupported(n, "these dtypes are not compiled");
      return false;
    }
    int64_t axis = normalizeAxis(std::get<AxisAttrs>(n.attrs).axis, xs.rank());
    int data = l.tensorIn(n.inputs[0], Phys::Plain);
    int indices = l.tensorIn(n.inputs[1], Phys::Plain);
    int out = l.defineOutput(n.outputs[0], Phys::Plain);
    rt::Step step;
    step.kind = rt::StepKind::GatherElements;
    step.label = label;
    step.tensors = {out, data, indices};
    step.ints = {xs.rank(), axis, static_cast<int64_t>(dtypeSize(x.type.dtype)),
                 static_cast<int64_t>(dtypeSize(idx.type.dtype))};
    step.ints.insert(step.ints.end(), xs.dims().begin(), xs.dims().end());
    const auto& idims = idx.type.shape.dims();
    step.ints.insert(step.ints.end(), idims.begin(), idims.end());
    l.addStep(std::move(step), {data, indices}, {out});
    return true;
  }
  if (n.kind == OpKind::ArgMax || n.kind == OpKind::ArgMin) {
    const auto& a = std::get<ArgReduceAttrs>(n.attrs);
    if (xs.rank() == 0) {
      l.unsupported(n, "this input dtype is not compiled");
      return false;
    }
    auto axis = static_cast<size_t>(normalizeAxis(a.axis, xs.rank()));
    const auto& d = xs.dims();
    int in = l.tensorIn(n.inputs[0], Phys::Plain);
    int out = l.defineOutput(n.outputs[0], Phys::Plain);
    rt::Step step;
    step.kind = rt::StepKind::ArgReduce;
    step.label = label;
    step.tensors = {out, in};
    step.ints = {product(d, 0, axis),      d[axis],           product(d, axis + 1, d.size()),
                 n.kind == OpKind::ArgMax, a.selectLastIndex, static_cast<int64_t>(x.type.dtype)};
    l.addStep(std::move(step), {in}, {out});
    return true;
  }
  bool movesData = n.kind == OpKind::Tile || n.kind == OpKind::DepthToSpace ||
                   n.kind == OpKind::SpaceToDepth || n.kind == OpKind::Pad ||
                   n.kind == OpKind::Transpose || n.kind == OpKind::Expand ||
                   n.kind == OpKind::Slice || n.kind == OpKind::Split || n.kind == OpKind::Concat ||
                   n.kind == OpKind::Gather;
  // A max pool or a global average pool of quantized integers (move-quantized-values) runs on
  // its u8 or s8 values.
  const bool integerPool = (n.kind == OpKind::MaxPool || n.kind == OpKind::GlobalMaxPool ||
                            n.kind == OpKind::GlobalAveragePool) &&
                           (x.type.dtype == DType::U8 || x.type.dtype == DType::I8) &&
                           n.outputs.size() == 1 &&
                           g.value(n.outputs[0]).type.dtype == x.type.dtype;
  if (!allF32(g, n) && !movesData && !integerPool) {
    l.unsupported(n, "only f32 tensors are compiled for this op");
    return false;
  }
  DType dt = x.type.dtype;
  switch (n.kind) {
  case OpKind::Transpose: {
    // Read in the layout the input has. When the permuted strides are those of the output in
    // one of the layouts, the bytes are already in place: a view (ConvNeXt's permute of an NHWC
    // activation to [N, H, W, C] and back, DNNFusion's reorganization as an index remap).
    const auto& perm = std::get<TransposeAttrs>(n.attrs).perm;
    Phys inPhys;
    int in = l.tensorAny(n.inputs[0], inPhys);
    std::vector<int64_t> xstr = Lowering::logicalStrides(xs, inPhys), s;
    for (int64_t p : perm) s.push_back(xstr[static_cast<size_t>(p)]);
    for (Phys phys : {Phys::Plain, Phys::Nhwc})
      if ((phys == Phys::Plain || ys.rank() == 4) &&
          sameWalk(ys, s, Lowering::logicalStrides(ys, phys))) {
        l.defineAlias(n.outputs[0], in, phys);
        return true;
      }
    int out = l.defineOutput(n.outputs[0], Phys::Plain);
    return copyAny(l, label, out, ys, 0, ys.strides(), in, s, 0, dt);
  }
  case OpKind::Tile: {
    // y viewed as [r0, d0, r1, d1, ...]: the repeat dims read with stride 0.
    const auto& reps = std::get<TileAttrs>(n.attrs).repeats;
    std::vector<int64_t> dims, inStrides, xstr = xs.strides();
    for (int k = 0; k < xs.rank(); ++k) {
      dims.push_back(reps[static_cast<size_t>(k)]);
      dims.push_back(xs[k]);
      inStrides.push_back(0);
      inStrides.push_back(xstr[static_cast<size_t>(k)]);
    }
    Shape vs(dims);
    int in = l.tensorIn(n.inputs[0], Phys::Plain);
    int out = l.defineOutput(n.outputs[0], Phys::Plain);
    return copyAny(l, label, out, vs, 0, vs.strides(), in, inStrides, 0, dt);
  }
  case OpKind::DepthToSpace:
  case OpKind::SpaceToDepth: {
    const auto& a = std::get<DepthToSpaceAttrs>(n.attrs);
    int64_t b = a.blockSize;
    std::vector<int64_t> sx = xs.strides(), dims, inStrides;
    if (n.kind == OpKind::DepthToSpace) {
      // y[n, c, h*b+bh, w*b+bw] over [N, C, H, b, W, b].
      int64_t c = ys[1];
      dims = {ys[0], c, xs[2], b, xs[3], b};
      int64_t cs = sx[1];
      if (a.columnRowDepth)
        inStrides = {sx[0], b * b * cs, sx[2], b * cs, sx[3], cs};
      else
        inStrides = {sx[0], cs, sx[2], b * c * cs, sx[3], c * cs};
    } else {
      // y[n, (bh*b+bw)*C + c, h, w] over [N, b, b, C, H, W].
      dims = {xs[0], b, b, xs[1], ys[2], ys[3]};
      inStrides = {sx[0], sx[2], sx[3], sx[1], b * sx[2], b * sx[3]};
    }
    Shape vs(dims);
    int in = l.tensorIn(n.inputs[0], Phys::Plain);
    int out = l.defineOutput(n.outputs[0], Phys::Plain);
    return copyAny(l, label, out, vs, 0, vs.strides(), in, inStrides, 0, dt);
  }
  case OpKind::Pad: {
    const auto& a = std::get<PadAttrs>(n.attrs);
    if (a.mode != PadMode::Constant) return lowerBorderPad(l, n, label, dt);
    // Fill with the value, then copy the (possibly cropped) input into the interior.
    Tensor value(dt, {1});
    value.setDouble(0, a.value);
    int fill = l.addConstant(value.data(), value.byteSize());
    int in = l.tensorIn(n.inputs[0], Phys::Plain);
    int out = l.defineOutput(n.outputs[0], Phys::Plain);
    if (!copyAny(l, label + " (fill)", out, ys, 0, ys.strides(), fill,
                 std::vector<int64_t>(static_cast<size_t>(ys.rank()), 0), 0, dt))
      return false;
    std::vector<int64_t> len, sy = ys.strides(), sx = xs.strides();
    int64_t outOffset = 0, inOffset = 0;
    auto r = static_cast<size_t>(xs.rank());
    for (size_t k = 0; k < r; ++k) {
      int64_t begin = a.pads[k];
      int64_t ob = std::max<int64_t>(begin, 0), ib = std::max<int64_t>(-begin, 0);
      len.push_back(std::max<int64_t>(
          0, std::min(xs[static_cast<int>(k)] - ib, ys[static_cast<int>(k)] - ob)));
      outOffset += ob * sy[k];
      inOffset += ib * sx[k];
    }
    Shape region(len);
    if (region.numel() == 0) return true;
    return copyAny(l, label, out, region, outOffset, sy, in, sx, inOffset, dt);
  }
  case OpKind::Expand: {
    int in = l.tensorIn(n.inputs[0], Phys::Plain);
    int out = l.defineOutput(n.outputs[0], Phys::Plain);
    return copyAny(l, label, out, ys, 0, ys.strides(), in,
                   Lowering::broadcastStrides(xs, xs.strides(), ys), 0, dt);
  }
  case OpKind::Slice: {
    const auto& a = std::get<SliceAttrs>(n.attrs);
    if (l.channelViews().slices.count(l.graph().value(n.outputs[0]).producer)) {
      // Read in place by the convolutions after it: its channels where they lie.
      int64_t ld = 0;
      int in = l.tensorStrided(n.inputs[0], ld);
      l.defineChannelView(n.outputs[0], in, a.starts[1], ld ? ld : xs[1]);
      return true;
    }
    // Data movement keeps its input's layout (a channel slice of an NHWC activation stays
    // NHWC, so the convolution after it needs no reorder).
    Phys phys;
    int in = l.tensorAny(n.inputs[0], phys);
    std::vector<int64_t> xstr = Lowering::logicalStrides(xs, phys), s;
    int64_t offset = 0;
    for (size_t d = 0; d < xstr.size(); ++d) {
      offset += a.starts[d] * xstr[d];
      s.push_back(a.steps[d] * xstr[d]);
    }
    int out = l.defineOutput(n.outputs[0], phys);
    return copyAny(l, label, out, ys, 0, Lowering::logicalStrides(ys, l.producedPhys(n.outputs[0])),
                   in, s, offset, dt);
  }
  case OpKind::Split: {
    const auto& a = std::get<SplitAttrs>(n.attrs);
    int axis = static_cast<int>(normalizeAxis(a.axis, xs.rank()));
    Phys phys;
    int in = l.tensorAny(n.inputs[0], phys);
    std::vector<int64_t> xstr = Lowering::logicalStrides(xs, phys);
    int64_t start = 0;
    for (size_t i = 0; i < n.outputs.size(); ++i) {
      const Shape& os = g.value(n.outputs[i]).type.shape;
      int out = l.defineOutput(n.outputs[i], phys);
      copyAny(l, label, out, os, 0, Lowering::logicalStrides(os, l.producedPhys(n.outputs[i])), in,
              xstr, start * xstr[static_cast<size_t>(axis)], dt);
      start += a.sizes[i];
    }
    return true;
  }
  case OpKind::Concat: {
    if (l.channelViews().concats.count(l.graph().value(n.outputs[0]).producer))
      return lowerChannelConcat(l, n, label);
    // NHWC when every input is (the branches of a ShuffleNet or Inception block); each input is
    // read in its own layout.
    int axis = static_cast<int>(normalizeAxis(std::get<AxisAttrs>(n.attrs).axis, ys.rank()));
    Phys want = ys.rank() == 4 ? Phys::Nhwc : Phys::Plain;
    for (ValueId v : n.inputs)
      if (l.producedPhys(v) != Phys::Nhwc) want = Phys::Plain;
    int out = l.defineOutput(n.outputs[0], want);
    std::vector<int64_t> ystr = Lowering::logicalStrides(ys, l.producedPhys(n.outputs[0]));
    int64_t start = 0;
    for (ValueId v : n.inputs) {
      const Shape& is = g.value(v).type.shape;
      Phys phys;
      int in = l.tensorAny(v, phys);
      if (is.numel() > 0)
        copyAny(l, label, out, is, start * ystr[static_cast<size_t>(axis)], ystr, in,
                Lowering::logicalStrides(is, phys), 0, dt);
      start += is[axis];
    }
    return true;
  }
  case OpKind::Softmax:
  case OpKind::LogSoftmax:
  case OpKind::Hardmax: {
    const auto& a = std::get<SoftmaxAttrs>(n.attrs);
    auto axis = static_cast<size_t>(normalizeAxis(a.axis, xs.rank()));
    const auto& d = xs.dims();
    int64_t outer = product(d, 0, axis), len, inner;
    if (a.coerce2d) {
      len = product(d, axis, d.size());
      inner = 1;
    } else {
      len = d[axis];
      inner = product(d, axis + 1, d.size());
    }
    int in = l.tensorIn(n.inputs[0], Phys::Plain);
    int out = l.defineOutput(n.outputs[0], Phys::Plain);
    rt::Step step;
    step.kind = rt::StepKind::Softmax;
    step.label = label;
    step.tensors = {out, in};
    step.ints = {outer, len, inner,
                 n.kind == OpKind::LogSoftmax ? 1 : (n.kind == OpKind::Hardmax ? 2 : 0)};
    l.addStep(std::move(step), {in}, {out});
    return true;
  }
  case OpKind::InstanceNormalization: {
    // Each (n, c) plane normalized as a LayerNorm row without affine, then scale and bias per
    // channel in one elementwise pass over the output.
    const auto& a = std::get<NormAttrs>(n.attrs);
    if (xs.rank() < 2 || n.inputs.size() != 3) {
      l.unsupported(n, "InstanceNormalization needs an input of rank >= 2, a scale and a bias");
      return false;
    }
    int64_t rows = xs[0] * xs[1], cols = product(xs.dims(), 2, xs.dims().size());
    std::vector<float> ones(static_cast<size_t>(std::max<int64_t>(cols, 1)), 1.f);
    int unitScale = l.addConstant(ones);
    int in = l.tensorIn(n.inputs[0], Phys::Plain);
    int out = l.defineOutput(n.outputs[0], Phys::Plain);
    addLayerNormStep(l, label, {out, in, unitScale, -1, -1, -1}, rows, cols, a.epsilon);
    std::vector<int64_t> perChannel(static_cast<size_t>(ys.rank()), 0);
    perChannel[1] = 1;
    int scale = l.tensorIn(n.inputs[1], Phys::Plain), bias = l.tensorIn(n.inputs[2], Phys::Plain);
    l.addElementwise(label + " (scale, bias)", out, ys, Phys::Plain, 0, ys.strides(),
                     {{out, ys.strides(), 0}, {scale, perChannel, 0}, {bias, perChannel, 0}},
                     {{EwOp::Mul, 0, -1, -2}, {EwOp::Add, 0, 0, -3}});
    return true;
  }
  case OpKind::LayerNormalization: {
    const auto& a = std::get<NormAttrs>(n.attrs);
    auto axis = static_cast<size_t>(normalizeAxis(a.axis, xs.rank()));
    int64_t rows = product(xs.dims(), 0, axis), cols = product(xs.dims(), axis, xs.dims().size());
    Shape normShape(
        std::vector<int64_t>(xs.dims().begin() + static_cast<long>(axis), xs.dims().end()));
    // Scale and bias over the normalized dims: as they are, or broadcast once at compile time.
    auto param = [&](ValueId v) -> int {
      const Value& pv = g.value(v);
      if (pv.type.shape.numel() == cols) return l.tensorIn(v, Phys::Plain);
      if (!pv.constant) return -2;
      std::vector<int64_t> strides =
          Lowering::broadcastStrides(pv.type.shape, pv.type.shape.strides(), normShape);
      std::vector<float> full(static_cast<size_t>(cols));
      std::vector<int64_t> nd = normShape.dims();
      for (int64_t i = 0; i < cols; ++i) {
        int64_t rest = i, off = 0;
        for (size_t d = nd.size(); d-- > 0;) {
          off += rest % nd[d] * strides[d];
          rest /= nd[d];
        }
        full[static_cast<size_t>(i)] = pv.constant->dataAs<float>()[off];
      }
      return l.addConstant(full);
    };
    bool hasBias = n.inputs.size() > 2 && n.inputs[2] != kNoValue;
    int scale = param(n.inputs[1]);
    int bias = hasBias ? param(n.inputs[2]) : -1;
    if (scale == -2 || bias == -2) {
      l.unsupported(n, "a computed scale or bias that broadcasts is not compiled");
      return false;
    }
    int in = l.tensorIn(n.inputs[0], Phys::Plain);
    int out = l.defineOutput(n.outputs[0], Phys::Plain);
    int mean = n.outputs.size() > 1 ? l.defineOutput(n.outputs[1], Phys::Plain) : -1;
    int invStd = n.outputs.size() > 2 ? l.defineOutput(n.outputs[2], Phys::Plain) : -1;
    addLayerNormStep(l, label, {out, in, scale, bias, mean, invStd}, rows, cols, a.epsilon);
    return true;
  }
  case OpKind::MaxPool:
  case OpKind::AveragePool:
  case OpKind::GlobalAveragePool:
  case OpKind::GlobalMaxPool: {
    if (xs.rank() != 4 || n.outputs.size() != 1) {
      l.unsupported(n, "only 2-d pooling with one output is compiled");
      return false;
    }
    // Pooling keeps its input's layout (as the layout plan does).
    Phys phys;
    int in = l.tensorAny(n.inputs[0], phys);
    Phys outPhys = phys;
    rt::PoolParams p{};
    p.dtype = static_cast<int64_t>(x.type.dtype); // f32, or u8/s8 (move-quantized-values)
    bool global = n.kind == OpKind::GlobalAveragePool || n.kind == OpKind::GlobalMaxPool;
    p.isMax = n.kind == OpKind::MaxPool || n.kind == OpKind::GlobalMaxPool;
    p.n = xs[0], p.c = xs[1], p.h = xs[2], p.w = xs[3], p.oh = ys[2], p.ow = ys[3];
    p.kh = p.h, p.kw = p.w, p.sh = p.sw = p.dh = p.dw = 1;
    if (!global) {
      const auto& a = std::get<PoolAttrs>(n.attrs);
      if (a.kernel.size() != 2) {
        l.unsupported(n, "only 2-d pooling is compiled");
        return false;
      }
      p.kh = a.kernel[0], p.kw = a.kernel[1], p.sh = a.strides[0], p.sw = a.strides[1];
      p.padTop = a.pads[0], p.padLeft = a.pads[1], p.dh = a.dilations[0], p.dw = a.dilations[1];
      p.countIncludePad = a.countIncludePad;
    }
    auto is = Lowering::logicalStrides(xs, phys), os = Lowering::logicalStrides(ys, outPhys);
    for (int d = 0; d < 4; ++d) {
      p.inStride[d] = is[static_cast<size_t>(d)];
      p.outStride[d] = os[static_cast<size_t>(d)];
    }
    int out = l.defineOutput(n.outputs[0], outPhys);
    rt::Step step;
    step.kind = rt::StepKind::Pool;
    step.label = label;
    step.tensors = {out, in};
    step.ints.resize(sizeof(p) / sizeof(int64_t));
    std::memcpy(step.ints.data(), &p, sizeof(p));
    l.addStep(std::move(step), {in}, {out});
    return true;
  }
  case OpKind::Gather: {
    // A Gather into its part of a Concat's buffer runs with the Concat (lowerChannelConcat).
    if (l.channelViews().writtenInPlace.count(n.outputs[0])) return true;
    const Value& idx = g.value(n.inputs[1]);
    if (idx.type.dtype != DType::I64 && idx.type.dtype != DType::I32) {
      l.unsupported(n, "Gather indices must be int64 or int32");
      return false;
    }
    auto axis = static_cast<size_t>(normalizeAxis(std::get<AxisAttrs>(n.attrs).axis, xs.rank()));
    // Channels of an NHWC activation in runs of 4 or more (a shuffled half's parts): copied run
    // by run, NHWC. Shorter runs (an interleaving shuffle) copy faster plane by plane, plain.
    auto channels = xs.rank() == 4 ? passes::constantGatherIndices(g, n, 1) : std::nullopt;
    if (channels && l.producedPhys(n.inputs[0]) == Phys::Nhwc && dtypeSize(x.type.dtype) == 4) {
      std::vector<int64_t> runs;
      appendChannelRuns(*channels, 0, runs);
      if (static_cast<int64_t>(runs.size()) / 3 * 4 <= static_cast<int64_t>(channels->size())) {
        int64_t ld = 0;
        int data = l.tensorStrided(n.inputs[0], ld);
        int out = l.defineOutput(n.outputs[0], Phys::Nhwc);
        addChannelRunsStep(l, label, out, data, xs[0] * xs[2] * xs[3], ld ? ld : xs[1], ys[1],
                           runs);
        return true;
      }
    }
    int data = l.tensorIn(n.inputs[0], Phys::Plain);
    int indices = l.tensorIn(n.inputs[1], Phys::Plain);
    int out = l.defineOutput(n.outputs[0], Phys::Plain);
    rt::Step step;
    step.kind = rt::StepKind::Gather;
    step.label = label;
    step.tensors = {out, data, indices};
    step.ints = {product(xs.dims(), 0, axis),
                 xs.dims()[axis],
                 product(xs.dims(), axis + 1, xs.dims().size()),
                 idx.type.shape.numel(),
                 static_cast<int64_t>(dtypeSize(x.type.dtype)),
                 static_cast<int64_t>(dtypeSize(idx.type.dtype))};
    l.addStep(std::move(step), {data, indices}, {out});
    return true;
  }
  case OpKind::ReduceSum:
  case OpKind::ReduceMean:
  case OpKind::ReduceMax:
  case OpKind::ReduceMin:
  case OpKind::ReduceProd:
  case OpKind::ReduceL1:
  case OpKind::ReduceL2:
  case OpKind::ReduceLogSum:
  case OpKind::ReduceLogSumExp:
  case OpKind::ReduceSumSquare:
    return lowerReduce(l, n);
  default:
    l.unsupported(n, "no loop kernel for this op yet");
    return false;
  }
}

} // namespace

bool copyTensor(Lowering& l, const std::string& label, int out, const Shape& shape,
                const std::vector<int64_t>& outStrides, int in,
                const std::vector<int64_t>& inStrides, DType dtype) {
  return copyAny(l, label, out, shape, 0, outStrides, in, inStrides, 0, dtype);
}

size_t lowerLight(Lowering& l, const std::vector<NodeId>& nodes, size_t begin) {
  const Graph& g = l.graph();
  const Node& n = g.node(nodes[begin]);
  if (isElementwise(g, n)) return lowerElementwiseRun(l, nodes, begin);
  if (lowerTyped(l, n)) return begin + 1;
  return lowerSingle(l, n) ? begin + 1 : begin;
}

} // namespace tunec::driver
