// Fusion planning by mapping type (DNNFusion's table), never by lists of op patterns.
#include "passes/fusion_plan.h"

#include "ir/op_registry.h"
#include "passes/rewriter.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <map>
#include <optional>
#include <utility>

namespace tunec::passes {

namespace {

enum class Verdict { Green, Yellow, Red };

struct Cell {
  Verdict verdict;
  MappingType result;
};

// DNNFusion's table (DESIGN.md): row = the group so far, column = the consumer.
Cell table(MappingType first, MappingType then) {
  using M = MappingType;
  constexpr auto G = Verdict::Green, Y = Verdict::Yellow, R = Verdict::Red;
  auto idx = [](M m) { return static_cast<int>(m); };
  // Column order: one-to-one, one-to-many, many-to-many, reorganize, shuffle.
  static const Cell cells[5][5] = {
      /* one-to-one   */ {{G, M::OneToOne},
                          {Y, M::OneToMany},
                          {Y, M::ManyToMany},
                          {G, M::Reorganize},
                          {G, M::Shuffle}},
      /* one-to-many  */
      {{G, M::OneToMany},
       {Y, M::OneToMany},
       {R, M::ManyToMany},
       {Y, M::OneToMany},
       {Y, M::OneToMany}},
      /* many-to-many */
      {{G, M::ManyToMany},
       {Y, M::ManyToMany},
       {R, M::ManyToMany},
       {Y, M::ManyToMany},
       {Y, M::ManyToMany}},
      /* reorganize   */
      {{G, M::Reorganize},
       {Y, M::OneToMany},
       {Y, M::ManyToMany},
       {G, M::Reorganize},
       {G, M::Reorganize}},
      /* shuffle      */
      {{G, M::Shuffle}, {Y, M::OneToMany}, {Y, M::ManyToMany}, {G, M::Reorganize}, {G, M::Shuffle}},
  };
  return cells[idx(first)][idx(then)];
}

bool isReshapeLike(OpKind k) {
  return k == OpKind::Reshape || k == OpKind::Flatten || k == OpKind::Squeeze ||
         k == OpKind::Unsqueeze;
}

// The cheap analysis behind a yellow cell: when does fusing pay without profiling?
// - reshape-like reorganizations are free views, so they always join;
// - a one-to-one op after a one-to-many group is a per-element epilogue;
// - a many-to-many reduction may take a light one-to-one prologue (e.g. Exp before Softmax).
// (An anchor followed by a reduction is red in the table: fusing it would need the anchor's
// tile to span the reduced axis, which only codegen can decide from the config.)
bool yellowPays(MappingType group, const Node& consumer, std::string& reason) {
  MappingType m = opInfo(consumer.kind).mapping;
  if (isReshapeLike(consumer.kind)) return true;
  if (m == MappingType::OneToOne) return true;
  if (m == MappingType::ManyToMany && group == MappingType::OneToOne) return true;
  reason = std::string(mappingTypeName(group)) + " followed by " + std::string(mappingTypeName(m)) +
           " does not pay without a profile";
  return false;
}

// True when a constant broadcasts along the channel dim `axis` of an output of `rank` dims only.
bool perChannel(const Shape& c, int rank, int axis, int64_t channels) {
  if (c.numel() != channels && c.numel() != 1) return false;
  int shift = rank - c.rank();
  if (shift < 0) return false;
  for (int d = 0; d < c.rank(); ++d)
    if (c[d] != 1 && d + shift != axis) return false;
  return true;
}

// Where an anchor's output channels are: the axis and its extent.
struct Channels {
  int axis;
  int64_t count;
};

// A Conv or its int8 form: channels on axis 1, the conv2d or depthwise template.
bool isConvolution(OpKind kind) {
  return kind == OpKind::Conv || kind == OpKind::IntegerConv;
}

Channels channelsOf(const Graph& g, const Node& anchor) {
  const Shape& y = g.value(anchor.outputs[0]).type.shape;
  if (isConvolution(anchor.kind)) return {1, y[1]};
  return {y.rank() - 1, y[y.rank() - 1]};
}

// The factor of `x * c`, `c * x` or `x / c` with c a float scalar constant.
std::optional<float> scalarFactor(const Graph& g, const Node& n, ValueId x) {
  if ((n.kind != OpKind::Mul && n.kind != OpKind::Div) || n.inputs.size() != 2) return std::nullopt;
  bool left = n.inputs[0] == x, right = n.inputs[1] == x;
  if (left == right || (n.kind == OpKind::Div && !left)) return std::nullopt;
  const Value& c = g.value(left ? n.inputs[1] : n.inputs[0]);
  if (!c.constant || c.type.dtype != DType::F32 || c.type.shape.numel() != 1 ||
      g.value(n.outputs[0]).type.shape != g.value(x).type.shape)
    return std::nullopt;
  float v = c.constant->dataAs<float>()[0];
  return n.kind == OpKind::Mul ? v : 1.f / v;
}

// The post-op node `n` computes from the kernel's current result `x`, or why it is none. With
// `computedVectors` (an int8 kernel: dynamic quantization's per-run column scale and correction)
// a per-channel multiplier or addend may be computed before the kernel instead of constant.
Expected<EpilogueStep> matchPostOp(const Graph& g, NodeId id, ValueId x, Channels ch,
                                   bool computedVectors = false) {
  const Node& n = g.node(id);
  std::string op(opName(n.kind));
  if (n.outputs.size() != 1 || g.value(n.outputs[0]).type.dtype != DType::F32)
    return Error(op + " does not produce f32, and epilogues compute in f32");
  EpilogueStep step{id, {PostOpKind::Relu}};
  bool unary = n.inputs.size() == 1 && n.inputs[0] == x;
  auto alpha = [&] { return std::get<AlphaBetaAttrs>(n.attrs); };
  if (unary) {
    switch (n.kind) {
    case OpKind::Relu:
      return step;
    case OpKind::Gelu:
      if (std::get<GeluAttrs>(n.attrs).tanhApproximation)
        return Error("GELU's tanh form is not an epilogue post-op (its erf form is)");
      step.op = {PostOpKind::Gelu};
      return step;
    case OpKind::LeakyRelu:
      step.op = {PostOpKind::LeakyRelu, alpha().alpha};
      return step;
    case OpKind::HardSigmoid:
      step.op = {PostOpKind::HardSigmoid, alpha().alpha, alpha().beta};
      return step;
    case OpKind::HardSwish:
      step.op = {PostOpKind::HardSwish};
      return step;
    case OpKind::Sigmoid:
      step.op = {PostOpKind::Sigmoid};
      return step;
    case OpKind::Swish:
      step.op = {PostOpKind::Swish, alpha().alpha};
      return step;
    case OpKind::Tanh:
      step.op = {PostOpKind::Tanh};
      return step;
    case OpKind::Exp:
      step.op = {PostOpKind::Exp};
      return step;
    case OpKind::Round: // a quantization round trip (lower-quantize-round-trips) joins whole
      step.op = {PostOpKind::Round, roundsNanToZero(std::get_if<RoundAttrs>(&n.attrs)) ? 1.f : 0.f};
      return step;
    default:
      break;
    }
  }
  if (n.kind == OpKind::Clip && !n.inputs.empty() && n.inputs[0] == x) {
    const auto& a = std::get<ClipAttrs>(n.attrs);
    float lo = std::isinf(a.min) ? -FLT_MAX : static_cast<float>(a.min);
    float hi = std::isinf(a.max) ? FLT_MAX : static_cast<float>(a.max);
    step.op = {PostOpKind::Clip, lo, hi};
    return step;
  }
  if (auto factor = scalarFactor(g, n, x)) {
    step.op = {PostOpKind::Scale, *factor};
    return step;
  }
  const Shape& shape = g.value(x).type.shape;
  if (n.kind == OpKind::PRelu && n.inputs.size() == 2 && n.inputs[0] == x) {
    // Slopes of one value (a LeakyRelu) or one per channel.
    const Value& slope = g.value(n.inputs[1]);
    if (slope.constant && slope.type.dtype == DType::F32 &&
        perChannel(slope.type.shape, shape.rank(), ch.axis, ch.count) &&
        g.value(n.outputs[0]).type.shape == shape) {
      step.op = {PostOpKind::PReluPerColumn};
      step.operand = n.inputs[1];
      return step;
    }
    return Error("PRelu's slopes are neither constant nor one per channel");
  }
  if (n.kind == OpKind::Mul && n.inputs.size() == 2 && (n.inputs[0] == x) != (n.inputs[1] == x)) {
    // A per-channel constant multiplier (a layer scale, a channel affine after an activation).
    ValueId other = n.inputs[0] == x ? n.inputs[1] : n.inputs[0];
    const Value& o = g.value(other);
    if ((o.constant || (computedVectors && o.type.shape.numel() == ch.count)) &&
        o.type.dtype == DType::F32 && perChannel(o.type.shape, shape.rank(), ch.axis, ch.count) &&
        g.value(n.outputs[0]).type.shape == shape) {
      step.op = {PostOpKind::ScalePerColumn};
      step.operand = other;
      return step;
    }
  }
  if (n.kind == OpKind::Add && n.inputs.size() == 2 && (n.inputs[0] == x) != (n.inputs[1] == x)) {
    ValueId other = n.inputs[0] == x ? n.inputs[1] : n.inputs[0];
    const Value& o = g.value(other);
    if (o.type.dtype != DType::F32 || g.value(n.outputs[0]).type.shape != shape)
      return Error("the Add broadcasts the kernel's output to a larger shape");
    step.operand = other;
    if ((o.constant || (computedVectors && o.type.shape.numel() == ch.count)) &&
        perChannel(o.type.shape, shape.rank(), ch.axis, ch.count)) {
      step.op = {PostOpKind::BiasPerColumn};
      return step;
    }
    if (!o.constant && o.type.shape == shape) {
      step.op = {PostOpKind::AddTensor};
      return step;
    }
    return Error("the Add's other operand is neither a per-channel constant nor a tensor of the "
                 "output's shape");
  }
  return Error(op + " is not an epilogue post-op (of " + std::to_string(n.inputs.size()) +
               " input" + (n.inputs.size() == 1 ? "" : "s") + ")");
}

// The scale and zero point of a QuantizeLinear or DequantizeLinear with one of each (one-element
// constants), or nullopt; whether the scale is usable is the caller's to say.
std::optional<std::pair<double, float>> tensorQuantization(const Graph& g, const Node& n) {
  auto scalar = [&](size_t i) {
    return i < n.inputs.size() && n.inputs[i] != kNoValue && g.value(n.inputs[i]).constant &&
           g.value(n.inputs[i]).type.shape.numel() == 1;
  };
  if (!scalar(1) || !scalar(2)) return std::nullopt;
  return std::pair{g.value(n.inputs[1]).constant->getDouble(0),
                   static_cast<float>(g.value(n.inputs[2]).constant->getInt(0))};
}

// The QuantizeLinear `id` of the kernel's current result `x` as the requantizing epilogue's last
// step (the kernel writes the next layer's u8 A): after an int8 anchor, or an f32 convolution of
// the conv2d template (a quantized model's RGB conv, whose 3 channels are no int8 quads), to u8
// with one scale and zero point (after a residual add of an f32 tensor too); or why it does not.
Expected<EpilogueStep> matchRequantize(const Graph& g, const FusedKernel& kernel, NodeId id,
                                       ValueId x) {
  const Node& n = g.node(id);
  if (!isIntegerAnchor(g.node(kernel.anchor).kind) && kernel.templ != TemplateKind::Conv2d)
    return Error("a QuantizeLinear joins only an int8 kernel's or an f32 convolution's epilogue");
  const auto params = tensorQuantization(g, n);
  if (n.inputs[0] != x || g.value(n.outputs[0]).type.dtype != DType::U8 || !params)
    return Error("only a QuantizeLinear to u8 with one scale and zero point joins an epilogue");
  const auto [scale, zp] = *params;
  if (!(scale > 0) || !std::isfinite(scale))
    return Error("the QuantizeLinear's scale is not a positive number");
  return EpilogueStep{id, {PostOpKind::QuantizeU8, static_cast<float>(scale), zp}};
}

// The DequantizeLinear whose result `add` (an AddTensor step) adds, when the epilogue of
// `kernel` can read its u8 input in its place (AddDequantizedU8): the kernel is an int8 matmul
// or conv2d, and the DequantizeLinear of a computed u8 tensor with one scale and zero point is
// read by this Add alone, so it is a kernel of its own so far (its Add waited for this one).
// Returns that node and the step that reads the u8 tensor.
std::optional<std::pair<NodeId, EpilogueStep>>
dequantizedAddend(const Graph& g, const FusedKernel& kernel, const EpilogueStep& add,
                  const std::vector<int>& uses, const std::vector<bool>& isOutput,
                  const FusionPlan& plan) {
  if (add.op.kind != PostOpKind::AddTensor || add.operand == kNoValue ||
      !isIntegerAnchor(g.node(kernel.anchor).kind) ||
      (kernel.templ != TemplateKind::Matmul && kernel.templ != TemplateKind::Conv2d))
    return std::nullopt;
  const NodeId dq = g.value(add.operand).producer;
  if (dq < 0 || uses[static_cast<size_t>(add.operand)] != 1 ||
      isOutput[static_cast<size_t>(add.operand)])
    return std::nullopt;
  const Node& n = g.node(dq);
  const auto params = n.kind == OpKind::DequantizeLinear ? tensorQuantization(g, n) : std::nullopt;
  if (!params || !(params->first > 0) || !std::isfinite(params->first) ||
      g.value(n.inputs[0]).type.dtype != DType::U8 || g.value(n.inputs[0]).constant)
    return std::nullopt;
  const int own = plan.kernelOf[static_cast<size_t>(dq)];
  if (own < 0 || plan.kernels[static_cast<size_t>(own)].nodes != std::vector<NodeId>{dq})
    return std::nullopt;
  EpilogueStep step = add;
  step.op = {PostOpKind::AddDequantizedU8, static_cast<float>(params->first), params->second};
  step.operand = n.inputs[0];
  return std::pair{dq, step};
}

// The anchor's own bias: a Conv's constant third input, a Gemm's C (per output channel as a
// bias vector, any other constant or a computed C of the output's shape with beta 1 as an
// addend). A bias none of these are is the driver's to report.
std::optional<EpilogueStep> ownBias(const Graph& g, NodeId id, Channels ch) {
  const Node& n = g.node(id);
  if (n.inputs.size() < 3 || n.inputs[2] == kNoValue) return std::nullopt;
  const Value& c = g.value(n.inputs[2]);
  if (c.type.dtype != DType::F32) return std::nullopt;
  EpilogueStep step{id, {PostOpKind::BiasPerColumn}, n.inputs[2]};
  if (n.kind == OpKind::Conv) {
    if (!c.constant) return std::nullopt;
    return step;
  }
  if (n.kind != OpKind::Gemm) return std::nullopt;
  if (c.constant && perChannel(c.type.shape, 2, 1, ch.count)) return step;
  step.op = {PostOpKind::AddTensor};
  if (c.constant) return step;
  const Shape& y = g.value(n.outputs[0]).type.shape;
  if (std::get<GemmAttrs>(n.attrs).beta == 1.f && c.type.shape == y) return step;
  return std::nullopt;
}

// Attention after the kernel's current result `x` (the scores): `next` is a Softmax over their
// last axis whose only use is a MatMul reading the probabilities as A, and both MatMuls multiply
// by computed operands (K and V). Returns the second MatMul, or why the softmax does not join.
Expected<NodeId> matchAttention(const Graph& g, const FusedKernel& kernel, NodeId next, ValueId x,
                                const std::vector<std::vector<NodeId>>& consumers,
                                const std::vector<int>& uses, const std::vector<bool>& isOutput,
                                const std::vector<int>& kernelOf) {
  const Node& qk = g.node(kernel.anchor);
  const Node& sm = g.node(next);
  if (qk.kind != OpKind::MatMul || g.value(qk.inputs[1]).constant)
    return Error("a softmax joins only a MatMul of computed operands (attention's Q K)");
  if (epilogueNeedsBias(kernel.postOps())) return Error("attention's scores take no bias vector");
  const Shape& s = g.value(x).type.shape;
  auto axis = normalizeAxis(std::get<SoftmaxAttrs>(sm.attrs).axis, s.rank());
  if (sm.kind != OpKind::Softmax || !axis || *axis != s.rank() - 1 || s.rank() < 2)
    return Error("only a Softmax over the last axis joins a MatMul (attention)");
  ValueId p = sm.outputs[0];
  if (uses[static_cast<size_t>(p)] != 1 || isOutput[static_cast<size_t>(p)])
    return Error("the probabilities have other uses than the MatMul with V");
  NodeId av = consumers[static_cast<size_t>(p)].front();
  const Node& second = g.node(av);
  if (second.kind != OpKind::MatMul || second.inputs[0] != p || second.inputs[1] == p)
    return Error("the probabilities are not the A operand of a MatMul");
  const Value& v = g.value(second.inputs[1]);
  if (v.constant) return Error("attention's V must be computed (a constant B is a plain matmul)");
  NodeId vp = v.producer;
  if (vp >= 0 && kernelOf[static_cast<size_t>(vp)] < 0)
    return Error("V is computed after the scores");
  return av;
}

// Why a LayerNormalization after the kernel's result `x` cannot end its epilogue ("" when it
// can): a matmul of constant weights (its rows are one run of C), or a depthwise conv read
// through its plain [N, H, W, C] view (`throughView`, the view not joined yet: each pixel's
// channels are a row), over the
// last axis only, with constant f32 scale and bias of one value per column, and no mean or
// inverse-std outputs.
std::string rowNormJoins(const Graph& g, const FusedKernel& kernel, NodeId id, ValueId x,
                         bool throughView = false) {
  const Node& n = g.node(id);
  const Node& anchor = g.node(kernel.anchor);
  bool depthwiseRows = kernel.templ == TemplateKind::Depthwise && throughView;
  if (!depthwiseRows &&
      (kernel.templ != TemplateKind::Matmul || !g.value(anchor.inputs[1]).constant))
    return "a LayerNorm joins only a matmul of constant weights (whose output rows are whole) "
           "or a depthwise conv read as [N, H, W, C]";
  if (kernel.nodes.size() > kernel.epilogueNodes() + 1)
    return "the LayerNorm reads a reshaped or permuted view of the matmul's output";
  const Shape& s = g.value(x).type.shape;
  const auto& a = std::get<NormAttrs>(n.attrs);
  auto axis = normalizeAxis(a.axis, s.rank());
  if (!axis || *axis != s.rank() - 1) return "the LayerNorm is not over the last axis alone";
  if (n.outputs.size() != 1) return "the LayerNorm's mean or inverse-std outputs are used";
  for (size_t i = 1; i < n.inputs.size(); ++i) {
    if (n.inputs[i] == kNoValue) continue;
    const Value& p = g.value(n.inputs[i]);
    if (!p.constant || p.type.dtype != DType::F32 || p.type.shape.numel() != s[s.rank() - 1])
      return "the LayerNorm's scale and bias are not constant vectors of the row's length";
  }
  if (Status ok = epilogueAccepts(kernel.postOps(), {PostOpKind::LayerNormRow, a.epsilon}); !ok)
    return ok.error().message();
  return "";
}

// The channel-scale prologue of `conv`: its input is a Mul, read by nothing else, of an
// activation of the input's shape by a computed [N, C, 1, 1] tensor, and the conv is 1x1 with
// stride 1, no padding and one group (the conv2d template's channel_scale workloads).
struct Prologue {
  NodeId mul = -1;
  ValueId input = kNoValue, scale = kNoValue;
};

Prologue channelScaleOf(const Graph& g, const Node& conv, const std::vector<int>& uses,
                        const std::vector<bool>& isOutput) {
  if (conv.kind != OpKind::Conv || anchorTemplate(g, conv) != TemplateKind::Conv2d) return {};
  const auto& a = std::get<ConvAttrs>(conv.attrs);
  bool pointwise = a.kernel == std::vector<int64_t>{1, 1} && a.group == 1 &&
                   a.strides == std::vector<int64_t>{1, 1} &&
                   std::all_of(a.pads.begin(), a.pads.end(), [](int64_t p) { return p == 0; });
  ValueId x = conv.inputs[0];
  NodeId m = g.value(x).producer;
  if (!pointwise || m < 0 || uses[static_cast<size_t>(x)] != 1 || isOutput[static_cast<size_t>(x)])
    return {};
  const Node& mul = g.node(m);
  if (mul.kind != OpKind::Mul || mul.inputs.size() != 2) return {};
  const Shape& xs = g.value(x).type.shape;
  for (int side = 0; side < 2; ++side) {
    ValueId in = mul.inputs[static_cast<size_t>(side)],
            s = mul.inputs[static_cast<size_t>(1 - side)];
    const Value& sv = g.value(s);
    const Shape& ss = sv.type.shape;
    if (g.value(in).type.shape == xs && xs.rank() == 4 && !sv.constant &&
        sv.type.dtype == DType::F32 && ss.rank() == 4 && ss[0] == xs[0] && ss[1] == xs[1] &&
        ss[2] == 1 && ss[3] == 1)
      return {m, in, s};
  }
  return {};
}

} // namespace

size_t FusedKernel::epilogueNodes() const {
  size_t n = 0;
  for (const EpilogueStep& s : epilogue) n += s.node != anchor;
  return n;
}

Epilogue FusedKernel::postOps() const {
  Epilogue ops;
  for (const EpilogueStep& s : epilogue)
    if (!s.mergesIntoBias) ops.push_back(s.op);
  return ops;
}

bool isIntegerProduct(const Graph& graph, const Node& node) {
  return (node.kind == OpKind::Conv || node.kind == OpKind::MatMul) &&
         isInteger(graph.value(node.outputs[0]).type.dtype);
}

bool isAnchor(const Graph& graph, const Node& node) {
  const OpKind kind = node.kind;
  // MatMulInteger's and ConvInteger's exact form runs on the runtime's integer steps, not the
  // float templates.
  if (isIntegerProduct(graph, node)) return false;
  return kind == OpKind::Conv || kind == OpKind::Gemm || kind == OpKind::MatMul ||
         isIntegerAnchor(kind);
}

bool isIntegerAnchor(OpKind kind) {
  return kind == OpKind::IntegerMatMul || kind == OpKind::IntegerConv;
}

TemplateKind anchorTemplate(const Graph& graph, const Node& anchor) {
  if (!isConvolution(anchor.kind)) return TemplateKind::Matmul;
  const Shape& x = graph.value(anchor.inputs[0]).type.shape;
  const Shape& w = graph.value(anchor.inputs[1]).type.shape;
  int64_t groups = std::get<ConvAttrs>(anchor.attrs).group;
  bool depthwise = x.rank() == 4 && groups == x[1] && groups == w[0] && w[1] == 1;
  return depthwise ? TemplateKind::Depthwise : TemplateKind::Conv2d;
}

FusionPlan planFusion(const Graph& graph) {
  FusionPlan plan;
  plan.kernelOf.assign(graph.nodes().size(), -1);
  std::vector<int> uses = useCounts(graph);
  std::vector<std::vector<NodeId>> consumers(graph.values().size());
  for (size_t n = 0; n < graph.nodes().size(); ++n)
    for (ValueId in : graph.nodes()[n].inputs)
      if (in != kNoValue) consumers[static_cast<size_t>(in)].push_back(static_cast<NodeId>(n));
  std::vector<bool> isOutput(graph.values().size(), false);
  for (ValueId out : graph.outputs()) isOutput[static_cast<size_t>(out)] = true;
  // Channel-scale prologues, found first: each Mul joins the conv after it, not a kernel of its
  // own (prologueOf: the conv a Mul is the prologue of).
  std::vector<NodeId> prologueOf(graph.nodes().size(), -1);
  std::map<NodeId, Prologue> prologues;
  for (size_t n = 0; n < graph.nodes().size(); ++n) {
    Prologue p = channelScaleOf(graph, graph.nodes()[n], uses, isOutput);
    if (p.mul < 0) continue;
    prologueOf[static_cast<size_t>(p.mul)] = static_cast<NodeId>(n);
    prologues[static_cast<NodeId>(n)] = p;
  }

  for (size_t start = 0; start < graph.nodes().size(); ++start) {
    if (plan.kernelOf[start] >= 0 || prologueOf[start] >= 0) continue;
    int k = static_cast<int>(plan.kernels.size());
    FusedKernel kernel;
    const Node& first = graph.nodes()[start];
    kernel.anchor = isAnchor(graph, first) ? static_cast<NodeId>(start) : -1;
    kernel.nodes.push_back(static_cast<NodeId>(start));
    kernel.mapping = opInfo(first.kind).mapping;
    plan.kernelOf[start] = k;
    Channels channels{0, 0};
    if (kernel.anchor >= 0) {
      kernel.templ = anchorTemplate(graph, first);
      channels = channelsOf(graph, first);
      if (auto bias = ownBias(graph, kernel.anchor, channels)) kernel.epilogue.push_back(*bias);
      if (auto p = prologues.find(kernel.anchor); p != prologues.end()) {
        kernel.prologue = p->second.mul;
        kernel.prologueInput = p->second.input;
        kernel.channelScale = p->second.scale;
        plan.kernelOf[static_cast<size_t>(p->second.mul)] = k;
      }
    }
    // Grow along the single consumer of the group's last output.
    NodeId last = static_cast<NodeId>(start);
    while (true) {
      const Node& tail = graph.node(last);
      if (tail.outputs.size() != 1) break;
      ValueId out = tail.outputs[0];
      if (consumers[static_cast<size_t>(out)].empty()) break;
      NodeId next = consumers[static_cast<size_t>(out)].front();
      const Node& consumer = graph.node(next);
      auto boundary = [&](const std::string& why) { plan.boundaries.push_back({last, next, why}); };
      auto join = [&](NodeId id) {
        kernel.nodes.push_back(id);
        plan.kernelOf[static_cast<size_t>(id)] = k;
      };
      if (uses[static_cast<size_t>(out)] != 1 || isOutput[static_cast<size_t>(out)]) {
        for (NodeId c : consumers[static_cast<size_t>(out)])
          plan.boundaries.push_back({last, c, "the value has several uses"});
        break;
      }
      if (plan.kernelOf[static_cast<size_t>(next)] >= 0) break;
      if (prologueOf[static_cast<size_t>(next)] >= 0) {
        boundary("the Mul is the channel-scale prologue of the 1x1 convolution after it");
        break;
      }
      if (isAnchor(graph, consumer)) {
        boundary(
            kernel.anchor >= 0
                ? "two anchors never fuse"
                : "an anchor starts its own kernel (light producers are not fused as prologues)");
        break;
      }
      // Every other input of the consumer must be ready before this kernel starts.
      bool ready = true;
      for (ValueId in : consumer.inputs) {
        if (in == kNoValue || in == out) continue;
        NodeId p = graph.value(in).producer;
        if (p >= 0 && plan.kernelOf[static_cast<size_t>(p)] == k) ready = false;
        if (p >= 0 && plan.kernelOf[static_cast<size_t>(p)] < 0) ready = false;
      }
      if (!ready) {
        boundary("another input of the consumer is computed after this kernel starts");
        break;
      }
      MappingType consumerType = opInfo(consumer.kind).mapping;
      if (kernel.anchor >= 0 && kernel.templ == TemplateKind::Matmul && kernel.nhwcView < 0 &&
          consumer.kind == OpKind::Transpose &&
          std::get<TransposeAttrs>(consumer.attrs).perm == std::vector<int64_t>{0, 3, 1, 2} &&
          graph.value(out).type.shape.rank() == 4 &&
          kernel.nodes.size() == kernel.nodesInKernel()) {
        // The matmul's [N, H, W, C] rows are an NHWC [N, C, H, W] tensor: the epilogue goes on.
        kernel.nhwcView = next;
        join(next);
        channels = {1, graph.value(out).type.shape[3]};
        last = next;
        continue;
      }
      if (kernel.anchor >= 0 && kernel.templ == TemplateKind::Depthwise && kernel.plainView < 0 &&
          consumer.kind == OpKind::Transpose &&
          std::get<TransposeAttrs>(consumer.attrs).perm == std::vector<int64_t>{0, 2, 3, 1} &&
          graph.value(out).type.shape.rank() == 4 &&
          kernel.nodes.size() == kernel.nodesInKernel()) {
        // The depthwise conv's NHWC output read as [N, H, W, C]: the same bytes. It joins when
        // a LayerNorm over C follows, which the kernel applies to each output row in cache.
        ValueId view = consumer.outputs[0];
        NodeId norm = uses[static_cast<size_t>(view)] == 1 && !isOutput[static_cast<size_t>(view)]
                          ? consumers[static_cast<size_t>(view)].front()
                          : -1;
        if (norm < 0 || graph.node(norm).kind != OpKind::LayerNormalization ||
            plan.kernelOf[static_cast<size_t>(norm)] >= 0) {
          boundary("a depthwise conv's permute to [N, H, W, C] joins only with a LayerNorm after "
                   "it");
          break;
        }
        if (std::string why = rowNormJoins(graph, kernel, norm, view, true); !why.empty()) {
          boundary(why);
          break;
        }
        kernel.plainView = next;
        join(next);
        const auto& a = std::get<NormAttrs>(graph.node(norm).attrs);
        kernel.epilogue.push_back(
            {norm, {PostOpKind::LayerNormRow, a.epsilon}, graph.node(norm).inputs[1]});
        join(norm);
        break;
      }
      if (kernel.anchor >= 0 && consumer.kind == OpKind::LayerNormalization) {
        // A LayerNorm over the last axis ends a matmul's epilogue: the kernel normalizes each
        // complete row of its output while it is in cache.
        std::string why = rowNormJoins(graph, kernel, next, out);
        if (!why.empty()) {
          boundary(why);
          break;
        }
        const auto& a = std::get<NormAttrs>(consumer.attrs);
        kernel.epilogue.push_back(
            {next, {PostOpKind::LayerNormRow, a.epsilon}, consumer.inputs[1]});
        join(next);
        break;
      }
      if (kernel.anchor >= 0 && consumer.kind == OpKind::Split &&
          graph.node(kernel.anchor).kind == OpKind::MatMul) {
        // Merged sibling matmuls: the kernel writes each part of its output as a tensor.
        const auto& a = std::get<SplitAttrs>(consumer.attrs);
        const Shape& y = graph.value(out).type.shape;
        bool equal = std::all_of(a.sizes.begin(), a.sizes.end(),
                                 [&](int64_t s) { return s == a.sizes.front(); });
        std::string why;
        if (a.axis != y.rank() - 1 || !equal)
          why = "a Split joins a MatMul only along the last axis, into equal parts";
        else if (!graph.value(graph.node(kernel.anchor).inputs[1]).constant)
          why = "a Split joins a MatMul of constant weights only";
        else if (epilogueNeedsAddend(kernel.postOps()))
          why = "a split output takes no residual tensor";
        if (!why.empty()) {
          boundary(why);
          break;
        }
        kernel.split = next;
        join(next);
        break;
      }
      if (kernel.anchor >= 0 && consumer.kind == OpKind::Softmax &&
          graph.node(kernel.anchor).kind == OpKind::MatMul) {
        // Attention: the softmax and the MatMul with V join the Q K anchor; nothing after.
        auto av =
            matchAttention(graph, kernel, next, out, consumers, uses, isOutput, plan.kernelOf);
        if (!av) {
          boundary(av.error().message());
          break;
        }
        kernel.softmax = next;
        kernel.values = *av;
        join(next);
        join(*av);
        break;
      }
      if (kernel.anchor >= 0 && consumerType == MappingType::OneToOne) {
        // A one-to-one consumer of an anchor joins as a post-op its template's epilogue
        // accepts; after the anchor's output is viewed through a reshape nothing more does.
        auto step = consumer.kind == OpKind::QuantizeLinear
                        ? matchRequantize(graph, kernel, next, out)
                        : matchPostOp(graph, next, out, channels,
                                      isIntegerAnchor(graph.node(kernel.anchor).kind));
        if (step && kernel.nodes.size() > kernel.nodesInKernel())
          step =
              Error("the epilogue computes on the anchor's output, not on a reshaped view of it");
        if (!step) {
          boundary(step.error().message());
          break;
        }
        Epilogue sofar = kernel.postOps();
        // Constant biases in a row merge into one vector; a computed one is read as it is.
        auto constantOperand = [&](const EpilogueStep& s) {
          return s.operand != kNoValue && graph.value(s.operand).constant.has_value();
        };
        step->mergesIntoBias = step->op.kind == PostOpKind::BiasPerColumn && !sofar.empty() &&
                               sofar.back().kind == PostOpKind::BiasPerColumn &&
                               constantOperand(*step) && constantOperand(kernel.epilogue.back());
        if (!step->mergesIntoBias) {
          if (Status s = epilogueAccepts(sofar, step->op); !s) {
            boundary(std::string(templateName(kernel.templ)) + " epilogue: " + s.error().message());
            break;
          }
        }
        if (auto dq = dequantizedAddend(graph, kernel, *step, uses, isOutput, plan)) {
          // The DequantizeLinear's own kernel dissolves into this one (removed below).
          plan.kernels[static_cast<size_t>(plan.kernelOf[static_cast<size_t>(dq->first)])]
              .nodes.clear();
          plan.kernelOf[static_cast<size_t>(dq->first)] = k;
          std::erase_if(plan.boundaries,
                        [&](const FusionBoundary& b) { return b.producer == dq->first; });
          kernel.dequantizedAddend = dq->first;
          *step = dq->second;
        }
        kernel.epilogue.push_back(*step);
        join(next);
        last = next;
        continue;
      }
      Cell cell = table(kernel.mapping, opInfo(consumer.kind).mapping);
      std::string why;
      bool fuse = cell.verdict == Verdict::Green ||
                  (cell.verdict == Verdict::Yellow && yellowPays(kernel.mapping, consumer, why));
      if (cell.verdict == Verdict::Red)
        why = "DNNFusion table: " + std::string(mappingTypeName(kernel.mapping)) + " then " +
              std::string(mappingTypeName(opInfo(consumer.kind).mapping)) + " is red";
      if (!fuse) {
        boundary(why);
        break;
      }
      // An anchor's kernel keeps its many-to-many type (only free views join it here).
      if (kernel.anchor < 0) kernel.mapping = cell.result;
      join(next);
      last = next;
    }
    plan.kernels.push_back(std::move(kernel));
  }
  // Kernels that dissolved into a later one (a dequantized addend's) leave no gap.
  std::vector<int> renumbered(plan.kernels.size(), -1);
  std::vector<FusedKernel> kept;
  for (size_t k = 0; k < plan.kernels.size(); ++k) {
    if (plan.kernels[k].nodes.empty()) continue;
    renumbered[k] = static_cast<int>(kept.size());
    kept.push_back(std::move(plan.kernels[k]));
  }
  plan.kernels = std::move(kept);
  for (int& k : plan.kernelOf)
    if (k >= 0) k = renumbered[static_cast<size_t>(k)];
  return plan;
}

} // namespace tunec::passes
