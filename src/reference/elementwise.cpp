// Reference elementwise ops: unary, binary/variadic with broadcasting, Where, Cast, Clip.
// Floating types compute in double and round once; integer types compute in int64.
#include "ir/op_registry.h"
#include "reference/kernels.h"

#include <cmath>
#include <cstring>
#include <limits>

namespace tunec::reference {

namespace {

double unaryFloat(const Node& node, double x) {
  switch (node.kind) {
  case OpKind::Abs:
    return std::fabs(x);
  case OpKind::Acos:
    return std::acos(x);
  case OpKind::Acosh:
    return std::acosh(x);
  case OpKind::Asin:
    return std::asin(x);
  case OpKind::Asinh:
    return std::asinh(x);
  case OpKind::Atan:
    return std::atan(x);
  case OpKind::Atanh:
    return std::atanh(x);
  case OpKind::Ceil:
    return std::ceil(x);
  case OpKind::Cos:
    return std::cos(x);
  case OpKind::Cosh:
    return std::cosh(x);
  case OpKind::Erf:
    return std::erf(x);
  case OpKind::Exp:
    return std::exp(x);
  case OpKind::Floor:
    return std::floor(x);
  case OpKind::HardSwish:
    return x * std::max(0.0, std::min(1.0, x / 6 + 0.5));
  case OpKind::Identity:
  case OpKind::Dropout:
    return x;
  case OpKind::IsNaN:
    return std::isnan(x) ? 1 : 0;
  case OpKind::IsInf: {
    const auto& a = std::get<IsInfAttrs>(node.attrs);
    return std::isinf(x) && ((x > 0 && a.detectPositive) || (x < 0 && a.detectNegative)) ? 1 : 0;
  }
  case OpKind::Log:
    return std::log(x);
  case OpKind::Mish:
    return x * std::tanh(std::log1p(std::exp(x)));
  case OpKind::Neg:
    return -x;
  case OpKind::Not:
    return x == 0 ? 1 : 0;
  case OpKind::Reciprocal:
    return 1.0 / x;
  case OpKind::Relu:
    return x < 0 ? 0 : x; // NaN stays NaN, as max(0, x) of the spec
  case OpKind::Round:
    return std::isnan(x) && roundsNanToZero(std::get_if<RoundAttrs>(&node.attrs))
               ? 0.0
               : std::nearbyint(x);
  case OpKind::Sigmoid:
    return 1.0 / (1.0 + std::exp(-x));
  case OpKind::Sign:
    return x > 0 ? 1 : (x < 0 ? -1 : 0);
  case OpKind::Sin:
    return std::sin(x);
  case OpKind::Sinh:
    return std::sinh(x);
  case OpKind::Softplus:
    return std::log1p(std::exp(-std::fabs(x))) + std::max(x, 0.0);
  case OpKind::Softsign:
    return x / (1 + std::fabs(x));
  case OpKind::Sqrt:
    return std::sqrt(x);
  case OpKind::Tan:
    return std::tan(x);
  case OpKind::Tanh:
    return std::tanh(x);
  case OpKind::Gelu:
    if (std::get<GeluAttrs>(node.attrs).tanhApproximation)
      return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
    return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
  case OpKind::Swish: // x * sigmoid(alpha x), ONNX's Swish (SiLU at alpha = 1)
    return x / (1.0 + std::exp(-double(std::get<AlphaBetaAttrs>(node.attrs).alpha) * x));
  case OpKind::Celu: {
    double a = std::get<AlphaBetaAttrs>(node.attrs).alpha;
    return std::max(0.0, x) + std::min(0.0, a * (std::exp(x / a) - 1));
  }
  case OpKind::Elu: {
    double a = std::get<AlphaBetaAttrs>(node.attrs).alpha;
    return x >= 0 ? x : a * (std::exp(x) - 1);
  }
  case OpKind::HardSigmoid: {
    const auto& a = std::get<AlphaBetaAttrs>(node.attrs);
    return std::max(0.0, std::min(1.0, double(a.alpha) * x + double(a.beta)));
  }
  case OpKind::LeakyRelu:
    return x >= 0 ? x : std::get<AlphaBetaAttrs>(node.attrs).alpha * x;
  case OpKind::Selu: {
    const auto& a = std::get<AlphaBetaAttrs>(node.attrs);
    return a.beta * (x > 0 ? x : a.alpha * (std::exp(x) - 1));
  }
  case OpKind::ThresholdedRelu:
    return x > std::get<AlphaBetaAttrs>(node.attrs).alpha ? x : 0;
  case OpKind::Clip: {
    const auto& a = std::get<ClipAttrs>(node.attrs);
    return std::min(std::max(x, a.min), a.max);
  }
  default:
    TUNEC_ASSERT(false, "not a unary op: " << opName(node.kind));
    return 0;
  }
}

bool isUnary(OpKind kind) {
  const OpInfo& info = opInfo(kind);
  return info.mapping == MappingType::OneToOne && info.maxInputs == 1;
}

double binaryFloat(OpKind kind, const OpAttrs& attrs, double a, double b) {
  switch (kind) {
  case OpKind::Add:
  case OpKind::Sum:
  case OpKind::Mean:
    return a + b;
  case OpKind::Sub:
    return a - b;
  case OpKind::Mul:
    return a * b;
  case OpKind::Div:
    return a / b;
  case OpKind::Pow:
    return std::pow(a, b);
  case OpKind::Mod: {
    double r = std::fmod(a, b);
    if (!std::get<ModAttrs>(attrs).fmod && r != 0 && ((r < 0) != (b < 0))) r += b;
    return r;
  }
  case OpKind::PRelu:
    return a >= 0 ? a : a * b;
  case OpKind::Max:
    return std::isnan(a) || std::isnan(b) ? NAN : std::max(a, b);
  case OpKind::Min:
    return std::isnan(a) || std::isnan(b) ? NAN : std::min(a, b);
  case OpKind::Equal:
    return a == b;
  case OpKind::Less:
    return a < b;
  case OpKind::LessOrEqual:
    return a <= b;
  case OpKind::Greater:
    return a > b;
  case OpKind::GreaterOrEqual:
    return a >= b;
  case OpKind::And:
    return (a != 0) && (b != 0);
  case OpKind::Or:
    return (a != 0) || (b != 0);
  case OpKind::Xor:
    return (a != 0) != (b != 0);
  default:
    TUNEC_ASSERT(false, "not a binary op: " << opName(kind));
    return 0;
  }
}

int64_t binaryInt(OpKind kind, const OpAttrs& attrs, int64_t a, int64_t b, bool& divByZero) {
  switch (kind) {
  case OpKind::Div:
    if (b == 0) {
      divByZero = true;
      return 0;
    }
    return a / b;
  case OpKind::Mod: {
    if (b == 0) {
      divByZero = true;
      return 0;
    }
    int64_t r = a % b;
    if (!std::get<ModAttrs>(attrs).fmod && r != 0 && ((r < 0) != (b < 0))) r += b;
    return r;
  }
  case OpKind::Pow: {
    if (b < 0) return a == 1 ? 1 : 0;
    int64_t r = 1;
    for (int64_t i = 0; i < b; ++i) r *= a;
    return r;
  }
  case OpKind::Max:
    return std::max(a, b);
  case OpKind::Min:
    return std::min(a, b);
  case OpKind::BitwiseAnd:
    return a & b;
  case OpKind::BitwiseOr:
    return a | b;
  case OpKind::BitwiseXor:
    return a ^ b;
  case OpKind::PRelu:
    return a >= 0 ? a : a * b;
  case OpKind::Add:
  case OpKind::Sum:
  case OpKind::Mean:
    return a + b;
  case OpKind::Sub:
    return a - b;
  case OpKind::Mul:
    return a * b;
  case OpKind::Equal:
    return a == b;
  case OpKind::Less:
    return a < b;
  case OpKind::LessOrEqual:
    return a <= b;
  case OpKind::Greater:
    return a > b;
  case OpKind::GreaterOrEqual:
    return a >= b;
  case OpKind::And:
    return (a != 0) && (b != 0);
  case OpKind::Or:
    return (a != 0) || (b != 0);
  case OpKind::Xor:
    return (a != 0) != (b != 0);
  default:
    TUNEC_ASSERT(false, "not a binary op: " << opName(kind));
    return 0;
  }
}

Status unary(const Node& node, const Tensor& x, Tensor& y) {
  int64_t n = x.numel();
  bool intPath = !isFloat(x.dtype()) && node.kind != OpKind::Cast;
  if (node.kind == OpKind::Cast) {
    bool intToInt = !isFloat(x.dtype()) && !isFloat(y.dtype());
    for (int64_t i = 0; i < n; ++i) {
      if (intToInt)
        y.setInt(i, x.getInt(i));
      else
        y.setDouble(i, x.getDouble(i));
    }
    return {};
  }
  if (intPath) {
    for (int64_t i = 0; i < n; ++i) {
      int64_t v = x.getInt(i);
      switch (node.kind) {
      case OpKind::Abs:
        v = v < 0 ? -v : v;
        break;
      case OpKind::Neg:
        v = -v;
        break;
      case OpKind::Sign:
        v = v > 0 ? 1 : (v < 0 ? -1 : 0);
        break;
      case OpKind::Relu:
        v = v < 0 ? 0 : v;
        break;
      case OpKind::Not:
        v = v == 0;
        break;
      case OpKind::Identity:
      case OpKind::Dropout:
        break;
      case OpKind::Clip: {
        const auto& a = std::get<ClipAttrs>(node.attrs);
        double d = std::min(std::max(static_cast<double>(v), a.min), a.max);
        v = static_cast<int64_t>(d);
        break;
      }
      default:
        y.setDouble(i, unaryFloat(node, static_cast<double>(v)));
        continue;
      }
      y.setInt(i, v);
    }
    return {};
  }
  for (int64_t i = 0; i < n; ++i) y.setDouble(i, unaryFloat(node, x.getDouble(i)));
  return {};
}

Status broadcastBinary(const Node& node, Inputs in, Tensor& y) {
  const Shape& outShape = y.shape();
  int64_t n = outShape.numel();
  bool intPath = !isFloat(in[0]->dtype());
  std::vector<double> accF;
  std::vector<int64_t> accI;
  int count = 0;
  bool divByZero = false;
  for (const Tensor* t : in) {
    std::vector<int64_t> offsets = broadcastOffsets(t->shape(), outShape);
    if (count == 0) {
      if (intPath) {
        accI.resize(static_cast<size_t>(n));
        for (int64_t i = 0; i < n; ++i)
          accI[static_cast<size_t>(i)] = t->getInt(offsets[static_cast<size_t>(i)]);
      } else {
        accF.resize(static_cast<size_t>(n));
        for (int64_t i = 0; i < n; ++i)
          accF[static_cast<size_t>(i)] = t->getDouble(offsets[static_cast<size_t>(i)]);
      }
    } else {
      for (int64_t i = 0; i < n; ++i) {
        auto ui = static_cast<size_t>(i);
        if (intPath) {
          // Pow with a float exponent on an integer base computes in double.
          if (node.kind == OpKind::Pow && isFloat(t->dtype()))
            accI[ui] = static_cast<int64_t>(
                std::pow(static_cast<double>(accI[ui]), t->getDouble(offsets[ui])));
          else
            accI[ui] =
                binaryInt(node.kind, node.attrs, accI[ui], t->getInt(offsets[ui]), divByZero);
        } else {
          accF[ui] = binaryFloat(node.kind, node.attrs, accF[ui], t->getDouble(offsets[ui]));
        }
      }
    }
    ++count;
  }
  if (divByZero) return makeError("integer division by zero");
  if (intPath) {
    if (node.kind == OpKind::Mean)
      for (auto& v : accI) v /= count;
    for (int64_t i = 0; i < n; ++i) y.setInt(i, accI[static_cast<size_t>(i)]);
  } else {
    if (node.kind == OpKind::Mean)
      for (auto& v : accF) v /= count;
    fromDoubles(y, accF);
  }
  return {};
}

Status where(Inputs in, Tensor& y) {
  const Shape& s = y.shape();
  auto oc = broadcastOffsets(in[0]->shape(), s), ox = broadcastOffsets(in[1]->shape(), s),
       oy = broadcastOffsets(in[2]->shape(), s);
  size_t bytes = dtypeSize(y.dtype());
  for (int64_t i = 0; i < s.numel(); ++i) {
    auto ui = static_cast<size_t>(i);
    const Tensor* src = in[0]->getInt(oc[ui]) ? in[1] : in[2];
    int64_t off = in[0]->getInt(oc[ui]) ? ox[ui] : oy[ui];
    std::memcpy(y.data() + i * static_cast<int64_t>(bytes),
                src->data() + off * static_cast<int64_t>(bytes), bytes);
  }
  return {};
}

} // namespace

Status elementwise(const Node& node, Inputs in, Outputs out) {
  if (node.kind == OpKind::Where) return where(in, out[0]);
  if (node.kind == OpKind::QuantizeLinear || node.kind == OpKind::DequantizeLinear)
    return quantize(node, in, out);
  if (isUnary(node.kind) || node.kind == OpKind::Dropout) return unary(node, *in[0], out[0]);
  std::vector<const Tensor*> present;
  for (const Tensor* t : in)
    if (t) present.push_back(t);
  return broadcastBinary(node, present, out[0]);
}

} // namespace tunec::reference
