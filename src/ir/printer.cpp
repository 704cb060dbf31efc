// Text printer of the graph IR; attribute structs print their fields in declaration order.
#include "ir/printer.h"

#include <sstream>

namespace tunec {

namespace {

std::string list(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s + "]";
}

std::string list(const std::vector<Dim>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + v[i].toString();
  return s + "]";
}

std::string num(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

struct AttrPrinter {
  std::string operator()(const NoAttrs&) const { return ""; }
  std::string operator()(const AlphaBetaAttrs& a) const {
    return "alpha=" + num(a.alpha) + " beta=" + num(a.beta);
  }
  std::string operator()(const GeluAttrs& a) const {
    return a.tanhApproximation ? "approximate=tanh" : "approximate=none";
  }
  std::string operator()(const RoundAttrs& a) const { return a.nanToZero ? "nan_to_zero" : ""; }
  std::string operator()(const IsInfAttrs& a) const {
    return std::string("positive=") + (a.detectPositive ? "1" : "0") +
           " negative=" + (a.detectNegative ? "1" : "0");
  }
  std::string operator()(const ClipAttrs& a) const {
    return "min=" + num(a.min) + " max=" + num(a.max);
  }
  std::string operator()(const CastAttrs& a) const {
    return "to=" + std::string(dtypeName(a.to)) + (a.exact ? " exact" : "");
  }
  std::string operator()(const QuantAttrs& a) const { return "axis=" + std::to_string(a.axis); }
  std::string operator()(const ModAttrs& a) const {
    return std::string("fmod=") + (a.fmod ? "1" : "0");
  }
  std::string operator()(const ConvAttrs& a) const {
    return "kernel=" + list(a.kernel) + " strides=" + list(a.strides) + " pads=" + list(a.pads) +
           " dilations=" + list(a.dilations) + " group=" + std::to_string(a.group) +
           (a.padValue ? " pad_value=" + std::to_string(a.padValue) : "");
  }
  std::string operator()(const GemmAttrs& a) const {
    return "alpha=" + num(a.alpha) + " beta=" + num(a.beta) + " transA=" + (a.transA ? "1" : "0") +
           " transB=" + (a.transB ? "1" : "0");
  }
  std::string operator()(const SoftmaxAttrs& a) const {
    return "axis=" + std::to_string(a.axis) + (a.coerce2d ? " coerce2d=1" : "");
  }
  std::string operator()(const NormAttrs& a) const {
    return "axis=" + std::to_string(a.axis) + " epsilon=" + num(a.epsilon);
  }
  std::string operator()(const PoolAttrs& a) const {
    return "kernel=" + list(a.kernel) + " strides=" + list(a.strides) + " pads=" + list(a.pads) +
           " dilations=" + list(a.dilations) + " ceil=" + (a.ceilMode ? "1" : "0") +
           " count_include_pad=" + (a.countIncludePad ? "1" : "0") + " p=" + std::to_string(a.p);
  }
  std::string operator()(const ReduceAttrs& a) const {
    return "axes=" + list(a.axes) + " keepdims=" + (a.keepDims ? "1" : "0");
  }
  std::string operator()(const ArgReduceAttrs& a) const {
    return "axis=" + std::to_string(a.axis) + " keepdims=" + (a.keepDims ? "1" : "0") +
           " last=" + (a.selectLastIndex ? "1" : "0");
  }
  std::string operator()(const ReshapeAttrs& a) const { return "shape=" + list(a.shape); }
  std::string operator()(const AxisAttrs& a) const { return "axis=" + std::to_string(a.axis); }
  std::string operator()(const AxesAttrs& a) const { return "axes=" + list(a.axes); }
  std::string operator()(const TransposeAttrs& a) const { return "perm=" + list(a.perm); }
  std::string operator()(const SplitAttrs& a) const {
    return "axis=" + std::to_string(a.axis) + " sizes=" + list(a.sizes);
  }
  std::string operator()(const SliceAttrs& a) const {
    std::string starts = list(a.starts);
    if (a.startsAtRunTime()) {
      starts = "[";
      for (size_t i = 0; i < a.runTimeStarts.size(); ++i)
        starts += (i ? "," : "") + a.runTimeStarts[i].toString();
      starts += "]";
    }
    return "starts=" + starts + " steps=" + list(a.steps) +
           " counts=" + (a.extents.empty() ? list(a.counts) : list(a.extents));
  }
  std::string operator()(const TileAttrs& a) const { return "repeats=" + list(a.repeats); }
  std::string operator()(const PadAttrs& a) const {
    static const char* kModes[] = {"constant", "reflect", "edge"};
    return std::string("mode=") + kModes[static_cast<int>(a.mode)] + " pads=" + list(a.pads) +
           " value=" + num(a.value);
  }
  std::string operator()(const ConstantOfShapeAttrs& a) const {
    return "shape=" + list(a.shape) + " dtype=" + std::string(dtypeName(a.dtype)) +
           " value=" + num(a.value);
  }
  std::string operator()(const TriluAttrs& a) const {
    return "k=" + std::to_string(a.k) + (a.upper ? " upper" : " lower");
  }
  std::string operator()(const BlockQuantAttrs& a) const {
    return "bits=" + std::to_string(a.bits) + " block=" + std::to_string(a.block) +
           (a.accuracyLevel ? " accuracy_level=" + std::to_string(a.accuracyLevel) : "");
  }
  std::string operator()(const ResizeAttrs& a) const {
    static const char* kModes[] = {"nearest", "linear", "cubic"};
    static const char* kCoordinates[] = {"half_pixel",           "pytorch_half_pixel",
                                         "align_corners",        "asymmetric",
                                         "tf_half_pixel_for_nn", "half_pixel_symmetric"};
    static const char* kNearest[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil",
                                     "simple"};
    std::string s = std::string("mode=") + kModes[static_cast<int>(a.mode)] +
                    " coordinates=" + kCoordinates[static_cast<int>(a.coordinates)];
    if (a.mode == ResizeMode::Nearest)
      s += std::string(" nearest_mode=") + kNearest[static_cast<int>(a.nearest)];
    if (a.mode == ResizeMode::Cubic)
      s += " cubic_coeff_a=" + num(a.cubicA) + (a.excludeOutside ? " exclude_outside" : "");
    std::string scales;
    for (double v : a.scales) scales += (scales.empty() ? "" : ",") + num(v);
    return s + " sizes=" + list(a.sizes) + " scales=[" + scales + "]";
  }
  std::string operator()(const DepthToSpaceAttrs& a) const {
    return "blocksize=" + std::to_string(a.blockSize) +
           (a.columnRowDepth ? " mode=CRD" : " mode=DCR");
  }
};

} // namespace

std::string printAttrs(const OpAttrs& attrs) {
  std::string body = std::visit(AttrPrinter{}, attrs);
  return body.empty() ? "" : " {" + body + "}";
}

std::string printGraph(const Graph& graph) {
  std::ostringstream os;
  auto ref = [&](ValueId v) {
    return v == kNoValue ? std::string("<none>") : "%" + graph.value(v).name;
  };
  os << "graph(";
  for (size_t i = 0; i < graph.inputs().size(); ++i) {
    const Value& v = graph.value(graph.inputs()[i]);
    os << (i ? ", " : "") << "%" << v.name << ": " << v.type.toString();
  }
  os << ") -> (";
  for (size_t i = 0; i < graph.outputs().size(); ++i)
    os << (i ? ", " : "") << ref(graph.outputs()[i]);
  os << ") {\n";
  for (const Value& v : graph.values())
    if (v.constant) os << "  const %" << v.name << ": " << v.type.toString() << "\n";
  for (const Node& node : graph.nodes()) {
    os << "  ";
    for (size_t i = 0; i < node.outputs.size(); ++i) {
      const Value& out = graph.value(node.outputs[i]);
      os << (i ? ", " : "") << "%" << out.name << ": " << out.type.toString();
    }
    os << " = " << opName(node.kind) << "(";
    for (size_t i = 0; i < node.inputs.size(); ++i) os << (i ? ", " : "") << ref(node.inputs[i]);
    os << ")" << printAttrs(node.attrs) << "\n";
  }
  os << "}\n";
  return os.str();
}

} // namespace tunec
