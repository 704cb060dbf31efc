// Constant quantization parameters that no arithmetic can honour, refused by name before any
// rewrite reads them: a scale that is NaN, infinite, zero, negative or subnormal, and a
// DequantizeLinear whose scale times its codes' distance from the zero point passes f32's range
// (every dequantized value the int8 kernels and the f32 path compute would overflow, each to its
// own infinity or NaN, where the reference computes in its own order). Scales computed at run
// time are computed as the reference does.
#include "passes/passes.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <sstream>

namespace tunec::passes {

namespace {

std::string number(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

// The largest |code - zero point| of dequantize `n`: over its codes when they are constant,
// else over the codes' type; -1 when a zero point is computed.
double largestDistance(const Graph& g, const Node& n) {
  const Value& q = g.value(n.inputs[0]);
  const Value* z = n.inputs.size() > 2 && n.inputs[2] != kNoValue ? &g.value(n.inputs[2]) : nullptr;
  if ((z && !z->constant) || !isInteger(q.type.dtype)) return -1;
  const int64_t zeros = z ? z->constant->numel() : 1;
  auto zeroAt = [&](int64_t i) { return z ? static_cast<double>(z->constant->getInt(i)) : 0.0; };
  double worst = 0;
  if (!q.constant) {
    const auto [lo, hi] = integerRange(q.type.dtype);
    for (int64_t i = 0; i < zeros; ++i)
      worst = std::max(worst, std::max(std::abs(lo - zeroAt(i)), std::abs(hi - zeroAt(i))));
    return worst;
  }
  // Per axis: element i's zero point is the one of its index along the axis.
  const Shape& shape = q.type.shape;
  int64_t inner = 1;
  if (zeros > 1) {
    const int64_t axis = std::get<QuantAttrs>(n.attrs).axis;
    const int64_t a = axis < 0 ? axis + shape.rank() : axis;
    for (int d = static_cast<int>(a) + 1; d < shape.rank(); ++d) inner *= shape[d];
  }
  for (int64_t i = 0; i < q.constant->numel(); ++i)
    worst = std::max(worst, std::abs(q.constant->getDouble(i) - zeroAt((i / inner) % zeros)));
  return worst;
}

} // namespace

Expected<Graph> checkQuantization(const Graph& graph) {
  for (const Node& n : graph.nodes()) {
    if (n.kind != OpKind::QuantizeLinear && n.kind != OpKind::DequantizeLinear) continue;
    if (n.inputs.size() < 2 || n.inputs[1] == kNoValue) continue;
    const Value& s = graph.value(n.inputs[1]);
    if (!s.constant) continue;
    const std::string what = std::string(opName(n.kind)) + " '" + n.name + "'";
    double largest = 0;
    for (int64_t i = 0; i < s.constant->numel(); ++i) {
      const auto v = static_cast<float>(s.constant->getDouble(i));
      if (!(v >= FLT_MIN) || std::isinf(v))
        return makeError(what, ": its scale '", s.name, "'",
                         s.constant->numel() > 1 ? " element " + std::to_string(i) : "", " is ",
                         number(v),
                         ": a quantization scale must be a positive, finite, normal f32 (a NaN, "
                         "infinite, zero, negative or subnormal one quantizes nothing); "
                         "re-export or re-quantize the model");
      largest = std::max(largest, static_cast<double>(v));
    }
    if (n.kind != OpKind::DequantizeLinear) continue;
    const double distance = largestDistance(graph, n);
    if (distance > 0 && largest * distance > FLT_MAX)
      return makeError(what, ": its scale '", s.name, "' (up to ", number(largest),
                       ") times its codes' largest distance from the zero point (", distance,
                       ") is ", number(largest * distance),
                       ", beyond f32's range: the dequantized values overflow; re-export or "
                       "re-quantize the model with smaller scales");
  }
  return graph;
}

} // namespace tunec::passes
