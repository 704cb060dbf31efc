// Light ops: a run of elementwise ops becomes one strided program (lowering.h), an op of other
// element types one typed step; every other light op goes to its family's lowerer
// (light_ops.h: data movement, normalization, pooling, reduction).
#include "driver/light_ops.h"
#include "ir/op_registry.h"
#include "passes/pattern.h"
#include "runtime/typed_kernels.h"

#include <cfloat>
#include <cmath>
#include <cstring>
#include <map>
#include <set>

namespace tunec::driver {

using rt::EwInstr;
using rt::EwOp;

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
    p0 = roundsNanToZero(std::get_if<RoundAttrs>(&node.attrs)) ? 1.f : 0.f;
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

bool allF32(const Graph& g, const Node& n) {
  for (ValueId v : n.inputs)
    if (v != kNoValue && g.value(v).type.dtype != DType::F32) return false;
  for (ValueId v : n.outputs)
    if (g.value(v).type.dtype != DType::F32) return false;
  return true;
}

namespace {

bool isElementwise(const Graph& g, const Node& n) {
  float p0, p1;
  if (!elementwiseOp(n, p0, p1) || !allF32(g, n) || n.outputs.size() != 1) return false;
  bool variadic = n.kind == OpKind::Sum || n.kind == OpKind::Mean || n.kind == OpKind::Max ||
                  n.kind == OpKind::Min;
  bool binary = rt::isBinary(*elementwiseOp(n, p0, p1)) && !variadic;
  if (binary && n.inputs.size() != 2) return false;
  return !n.inputs.empty() && n.inputs.size() <= 6;
}

// The instructions an elementwise node adds to a chain's program (lowerElementwiseRun).
size_t ewInstructions(const Node& n) {
  return std::max<size_t>(1, n.inputs.size() - 1) + (n.kind == OpKind::Mean ? 1 : 0);
}

// A run of elementwise nodes, each consuming the previous one's output, as one program.
size_t lowerElementwiseRun(Lowering& l, const std::vector<NodeId>& nodes, size_t begin) {
  const Graph& g = l.graph();
  size_t end = begin + 1;
  // The chain ends where its program would pass the runtime's limits: the next node starts a
  // chain of its own, reading this one's result.
  size_t instructions = ewInstructions(g.node(nodes[begin]));
  std::set<ValueId> external(g.node(nodes[begin]).inputs.begin(),
                             g.node(nodes[begin]).inputs.end());
  while (end < nodes.size()) {
    const Node& n = g.node(nodes[end]);
    ValueId prev = g.node(nodes[end - 1]).outputs[0];
    if (!isElementwise(g, n) || std::find(n.inputs.begin(), n.inputs.end(), prev) == n.inputs.end())
      break;
    std::set<ValueId> more = external;
    for (ValueId v : n.inputs)
      if (v != prev) more.insert(v);
    if (instructions + ewInstructions(n) > static_cast<size_t>(rt::kMaxEwInstructions) ||
        more.size() > static_cast<size_t>(rt::kMaxEwInputs))
      break;
    instructions += ewInstructions(n);
    external = std::move(more);
    ++end;
  }
  ValueId result = g.node(nodes[end - 1]).outputs[0];
  const Shape& outShape = g.value(result).type.shape;
  // A symbolic shape: plain dense operands, strides that are extents of the run.
  const bool runTime = !outShape.isStatic();
  std::vector<std::pair<int, std::vector<DimExpr>>> runTimeOperands;
  // External operands, and the output layout: NHWC when an activation operand is NHWC.
  std::map<ValueId, int> inputIndex;
  std::vector<Lowering::EwOperand> operands;
  Phys outPhys = Phys::Plain;
  std::map<ValueId, bool> inRun;
  for (size_t i = begin; i < end; ++i) inRun[g.node(nodes[i]).outputs[0]] = true;
  for (size_t i = begin; i < end; ++i)
    for (ValueId v : g.node(nodes[i]).inputs) {
      if (inRun.count(v) || inputIndex.count(v)) continue;
      if (runTime) {
        const Shape& s = g.value(v).type.shape;
        inputIndex[v] = static_cast<int>(runTimeOperands.size());
        runTimeOperands.emplace_back(l.tensorIn(v, Phys::Plain),
                                     runTimeBroadcastStrides(s, outShape));
        operands.push_back({runTimeOperands.back().first, {}, 0});
        continue;
      }
      Phys phys;
      int t = l.tensorAny(v, phys);
      const Shape& s = g.value(v).type.shape;
      if (phys == Phys::Nhwc && outShape.rank() == 4 && s == outShape) outPhys = Phys::Nhwc;
      inputIndex[v] = static_cast<int>(operands.size());
      operands.push_back(
          {t, Lowering::broadcastStrides(s, Lowering::logicalStrides(s, phys), outShape), 0});
    }
  if (operands.size() > static_cast<size_t>(rt::kMaxEwInputs)) {
    l.unsupported(g.node(nodes[begin]),
                  "an elementwise op of more than " + std::to_string(rt::kMaxEwInputs) + " inputs");
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
  if (runTime)
    l.addRunTimeElementwise(label, out, outShape, runTimeOperands, std::move(code));
  else
    l.addElementwise(label, out, outShape, outPhys, 0, Lowering::logicalStrides(outShape, outPhys),
                     operands, std::move(code));
  return end;
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
  for (ValueId v : n.inputs)
    if (v == kNoValue) return false;
  if (hasSymbolicShape(g, n)) { // plain dense tensors at the run's extents
    rt::BasicTypedProgram<DimExpr> p;
    p.op = *op;
    p.out = y.type.dtype;
    p.dims = Lowering::extentsOf(ys);
    p.outStrides = Lowering::denseStrides(ys);
    std::vector<int> ins;
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      const Value& x = g.value(n.inputs[i]);
      p.in.push_back(x.type.dtype);
      if (perAxis(i)) {
        std::vector<DimExpr> strides(static_cast<size_t>(ys.rank()), DimExpr(0));
        strides[static_cast<size_t>(std::get<QuantAttrs>(n.attrs).axis)] = DimExpr(1);
        p.inStrides.push_back(std::move(strides));
      } else {
        p.inStrides.push_back(runTimeBroadcastStrides(x.type.shape, ys));
      }
      p.inOffsets.push_back(DimExpr(0));
      ins.push_back(l.tensorIn(n.inputs[i], Phys::Plain));
    }
    int out = l.defineOutput(n.outputs[0], Phys::Plain);
    rt::Step step;
    step.kind = rt::StepKind::Typed;
    step.label = lightLabel(n);
    std::vector<DimExpr> ints;
    p.encode(ints);
    l.setInts(step, ints);
    step.tensors = {out};
    step.tensors.insert(step.tensors.end(), ins.begin(), ins.end());
    l.addStep(std::move(step), ins, {out});
    if (quant) l.noteQuantizeStep();
    return true;
  }
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

} // namespace

void copyProgram(Lowering& l, const std::string& label, int out, const Shape& outShape,
                 int64_t outOffset, const std::vector<int64_t>& outStrides, int in,
                 std::vector<int64_t> inStrides, int64_t inOffset) {
  l.addElementwise(label, out, outShape, Phys::Plain, outOffset, outStrides,
                   {{in, std::move(inStrides), inOffset}}, {{EwOp::Copy, 0, -1, -1000}});
}

bool copyAny(Lowering& l, const std::string& label, int out, const Shape& iteration,
             int64_t outOffset, const std::vector<int64_t>& outStridesGiven, int in,
             std::vector<int64_t> inStrides, int64_t inOffset, DType dtype) {
  // A copy visits its elements in any order. Where the innermost dimension is not contiguous on
  // both sides, a dimension of at least 8 elements that is goes innermost (the channels of an
  // NHWC part of an NHWC Concat: runs instead of a strided walk over the columns); else, where
  // the innermost extent is a few elements the input has far apart (a 2x2 window's columns
  // placed from a channel's plane), a longer dimension the input has contiguous, so that the
  // inner loop reads a run and writes at a stride rather than looping over two.
  std::vector<int64_t> dims = iteration.dims(), outStrides = outStridesGiven;
  const size_t rank = dims.size();
  auto moveInnermost = [&](size_t d) {
    for (auto* v : {&dims, &outStrides, &inStrides}) {
      const int64_t moved = (*v)[d];
      v->erase(v->begin() + static_cast<std::ptrdiff_t>(d));
      v->push_back(moved);
    }
  };
  auto firstDim = [&](auto&& fits) {
    for (size_t d = 0; d + 1 < rank; ++d)
      if (dims[d] >= 8 && fits(d)) return d;
    return rank;
  };
  const bool innerContiguous = rank >= 1 && inStrides[rank - 1] == 1 && outStrides[rank - 1] == 1;
  if (rank >= 2 && !innerContiguous) {
    size_t d = firstDim([&](size_t k) { return inStrides[k] == 1 && outStrides[k] == 1; });
    if (d == rank && dims[rank - 1] < 8 && std::abs(inStrides[rank - 1]) != 1)
      d = firstDim([&](size_t k) { return inStrides[k] == 1; });
    if (d < rank) moveInnermost(d);
  }
  const Shape outShape(dims);
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

std::string lightLabel(const Node& n) {
  return std::string(opName(n.kind)) + " '" + n.name + "'";
}

namespace {

// A light node that is not elementwise or typed, lowered by its op family (light_ops.h).
bool lowerSingle(Lowering& l, const Node& n) {
  switch (n.kind) {
  case OpKind::Reshape:
  case OpKind::Flatten:
  case OpKind::Squeeze:
  case OpKind::Unsqueeze:
  case OpKind::GatherElements:
  case OpKind::Transpose:
  case OpKind::Tile:
  case OpKind::DepthToSpace:
  case OpKind::SpaceToDepth:
  case OpKind::Pad:
  case OpKind::Expand:
  case OpKind::Slice:
  case OpKind::Split:
  case OpKind::Concat:
  case OpKind::Gather:
    return lowerDataMovement(l, n);
  case OpKind::Resize:
    return lowerResize(l, n);
  case OpKind::Softmax:
  case OpKind::LogSoftmax:
  case OpKind::Hardmax:
  case OpKind::InstanceNormalization:
  case OpKind::LayerNormalization:
  case OpKind::RMSNormalization:
    return lowerNormalization(l, n);
  case OpKind::MaxPool:
  case OpKind::AveragePool:
  case OpKind::GlobalAveragePool:
  case OpKind::GlobalMaxPool:
    return lowerPool(l, n);
  case OpKind::ArgMax:
  case OpKind::ArgMin:
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
    return lowerReduction(l, n);
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
  // A loop kernel's step runs up to rank 8 (rt::kMaxRank): refused here, naming the limit,
  // rather than a model.so whose step the runtime cannot decode.
  for (const std::vector<ValueId>* values : {&n.inputs, &n.outputs})
    for (ValueId v : *values)
      if (v != kNoValue && g.value(v).type.shape.rank() > rt::kMaxRank) {
        l.unsupported(n, "a tensor of rank " + std::to_string(g.value(v).type.shape.rank()) +
                             " ('" + g.value(v).name + "'): loop kernels run up to rank " +
                             std::to_string(rt::kMaxRank));
        return begin;
      }
  if (isElementwise(g, n)) return lowerElementwiseRun(l, nodes, begin);
  if (n.kind == OpKind::MatMulNBits) return lowerMatMulNBits(l, n) ? begin + 1 : begin;
  if (n.kind == OpKind::Trilu) return lowerTrilu(l, n) ? begin + 1 : begin;
  if (passes::isIntegerProduct(g, n)) return lowerIntegerProduct(l, n) ? begin + 1 : begin;
  if (hasSymbolicShape(g, n)) {
    if (lowerTyped(l, n)) return begin + 1;
    return lowerRunTimeLight(l, n) ? begin + 1 : begin;
  }
  if (lowerTyped(l, n)) return begin + 1;
  return lowerSingle(l, n) ? begin + 1 : begin;
}

} // namespace tunec::driver