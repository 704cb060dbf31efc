// Quantized layers as int8 kernels. A QDQ model marks a quantized linear layer as
//   MatMul(DequantizeLinear(xq, sa, za), DequantizeLinear(wq, sb, 0))
// (or Gemm, with a bias), xq a u8 activation, wq constant s8 weights, sa and za per tensor, sb
// per tensor or per output column. Its value is sum_k sa (xq - za) sb[n] wq[k][n]
//   = sa sb[n] (sum_k xq wq[k][n]) - sa sb[n] za sum_k wq[k][n],
// so the layer becomes an IntegerMatMul (the exact u8 x s8 sums, which the int8 kernels compute)
// times the column scale sa sb[n], plus the zero point's correction, a per-column constant
// computed here from the weights' column sums: two post-ops the fusion plan puts into the
// kernel's epilogue (ScalePerColumn, BiasPerColumn, then the layer's bias and activation). A
// quantized Conv is the same with an output channel for a column and its window for k: an
// IntegerConv whose padding reads za (so that a padded tap is (za - za) sb w = 0, as the float
// convolution's zero padding is, and the correction is the same for every pixel). When the bias
// is whole multiples of the column scale (the int32 bias a QDQ exporter writes, dequantized with
// the scale sa sb[n]), the correction and the bias are instead one integer per column added to
// the sums before the scale: (sums + k[n]) x sa sb[n], k[n] = bias[n] / (sa sb[n]) - za
// sum_k w[k][n], as QLinearConv computes it (the int32 sum, one rounding to f32, one multiply;
// fold-requantization-scale then folds the next QuantizeLinear's division into the scale). In
// f32, sums + k rounds as the int32 sum does while |sums| and |k| stay below 2^24 (always for
// windows of up to 518 taps), where a correction added after the scale cancels against the
// scaled sums with a rounding error of its own (an RGB conv's zero point of 126). It runs first,
// while the weights are still s8 constants (fold-constants would dequantize them). A
// DequantizeLinear of anything else (s8 activations, per-column activation scales, weight zero
// points, grouped convolutions whose groups' channels are no whole quads) is left to the f32
// path, as is the Q/DQ round trip of every other activation. Depthwise convolutions become
// IntegerConvs too, and so do convolutions of one group whose channels are no whole quads (an
// RGB image: the kernel rounds them up).
#include "passes/passes.h"
#include "passes/rewriter.h"

#include <cmath>
#include <map>
#include <optional>

namespace tunec::passes {

namespace {

bool scalarConstant(const Graph& g, ValueId v) {
  const Value& value = g.value(v);
  return value.constant && value.type.shape.numel() == 1;
}

// The DequantizeLinear producing `v`, or nullptr.
const Node* dequantizeOf(const Graph& g, ValueId v) {
  NodeId p = g.value(v).producer;
  if (p < 0 || g.node(p).kind != OpKind::DequantizeLinear) return nullptr;
  const Node& dq = g.node(p);
  return dq.inputs.size() >= 2 ? &dq : nullptr;
}

struct QuantizedLayer {
  ValueId xq = kNoValue; ///< the u8 activation
  double sa = 0, za = 0; ///< its scale and zero point, when constant
  /// Computed per run instead (dynamic quantization: DynamicQuantizeLinear's scale and zero
  /// point, scalars of the graph): the values, and sa, za unused.
  ValueId saValue = kNoValue, zaValue = kNoValue;
  const Tensor* weights = nullptr; ///< s8, [K, N], or [N, K] when transB
  bool transB = false;
  std::vector<double> sb; ///< per column (N)
};

// The layer's weights as [K, N]: the constant itself (tensors share their data), or its
// transpose for a Gemm with transB.
Tensor weightsKN(const QuantizedLayer& q) {
  if (!q.transB) return *q.weights;
  const int64_t cols = q.weights->shape()[0], k = q.weights->shape()[1];
  Tensor t(DType::I8, Shape{k, cols});
  const auto* src = q.weights->dataAs<int8_t>();
  for (int64_t kk = 0; kk < k; ++kk)
    for (int64_t j = 0; j < cols; ++j) t.dataAs<int8_t>()[kk * cols + j] = src[j * k + kk];
  return t;
}

// The activation's and the weights' DequantizeLinear nodes of a layer, or why it has none.
Expected<std::pair<const Node*, const Node*>> dequantizedOperands(const Graph& g, const Node& n) {
  const Node* da = dequantizeOf(g, n.inputs[0]);
  const Node* db = dequantizeOf(g, n.inputs[1]);
  if (!db)
    return Error("its weights are f32, not dequantized int8 (an exporter may have folded the "
                 "weights' fake quantization into f32)");
  if (!da) {
    const NodeId p = g.value(n.inputs[0]).producer;
    return Error("its activation is f32" +
                 (p < 0 ? std::string(", a model input")
                        : ", computed by " + std::string(opName(g.node(p).kind)) + " '" +
                              g.node(p).name + "'") +
                 ", with no QuantizeLinear before the layer");
  }
  return std::pair{da, db};
}

// The u8 activation of dequantize `da` (its scale and zero point constants, or the values of a
// dynamic quantization) into `q`, or why the int8 kernels cannot read it.
Status matchActivation(const Graph& g, const Node* da, QuantizedLayer& q) {
  q.xq = da->inputs[0];
  if (g.value(q.xq).type.dtype != DType::U8)
    return Error("its activation is s8 (the int8 kernels read u8 activations: quantize with "
                 "--activations u8)");
  const bool hasZero = da->inputs.size() > 2 && da->inputs[2] != kNoValue;
  auto scalar = [&](ValueId v) { return g.value(v).type.shape.numel() == 1; };
  if (!scalar(da->inputs[1]) || (hasZero && !scalar(da->inputs[2])))
    return Error(
        "its activation has per-axis scales (the int8 kernels take one scale and zero point)");
  if (scalarConstant(g, da->inputs[1]) && (!hasZero || scalarConstant(g, da->inputs[2]))) {
    q.sa = g.value(da->inputs[1]).constant->getDouble(0);
    q.za = hasZero ? static_cast<double>(g.value(da->inputs[2]).constant->getInt(0)) : 0.0;
    if (!(q.sa > 0) || !std::isfinite(q.sa)) return Error("the activation's scale is not positive");
  } else {
    // A scale the model computes (DynamicQuantizeLinear's range / 255) is finite for finite
    // activations; one given as a model input may be anything (1e38: the kernel's products of
    // scales would overflow where the reference's dequantized values do not), and is left to
    // the f32 path, which dequantizes each value as the reference does.
    for (ValueId v : {da->inputs[1], hasZero ? da->inputs[2] : kNoValue})
      if (v != kNoValue && g.value(v).producer < 0 && !g.value(v).constant)
        return Error("its activation's scale or zero point is a model input (the int8 kernels "
                     "take constant ones, or those a DynamicQuantizeLinear computes)");
    q.saValue = da->inputs[1];
    q.zaValue = hasZero ? da->inputs[2] : kNoValue;
  }
  return {};
}

// The weights' per-column scales (`cols` output columns along axis `columnAxis` of the weights,
// of rank `rank`) of dequantize `db` into `q.sb`, or why they are not per tensor or per column
// with a zero zero point.
Status matchWeightScales(const Graph& g, const Node* db, int64_t cols, int64_t columnAxis,
                         int64_t rank, QuantizedLayer& q) {
  if (db->inputs.size() > 2 && db->inputs[2] != kNoValue) {
    const Value& zb = g.value(db->inputs[2]);
    if (!zb.constant) return Error("the weights' zero point is not constant");
    for (int64_t i = 0; i < zb.constant->numel(); ++i)
      if (zb.constant->getInt(i) != 0)
        return Error("its weights have a zero point (the int8 kernels take symmetric weights)");
  }
  const Value& sb = g.value(db->inputs[1]);
  if (!sb.constant) return Error("the weights' scale is not constant");
  const int64_t axis = std::get<QuantAttrs>(db->attrs).axis;
  if (sb.type.shape.numel() != 1 && !(sb.type.shape.rank() == 1 && sb.type.shape[0] == cols &&
                                      (axis == columnAxis || axis == columnAxis - rank)))
    return Error("the weights' scale is neither per tensor nor per output column");
  for (int64_t j = 0; j < cols; ++j) {
    double s = sb.constant->getDouble(sb.type.shape.numel() == 1 ? 0 : j);
    if (!(s > 0) || !std::isfinite(s)) return Error("a weight scale is not positive");
    q.sb.push_back(s);
  }
  return {};
}

// The matched operands of a MatMul or Gemm node, or why it is not an int8 layer.
Expected<QuantizedLayer> matchLayer(const Graph& g, const Node& n) {
  if (n.kind == OpKind::Gemm) {
    const auto& a = std::get<GemmAttrs>(n.attrs);
    if (a.transA || a.alpha != 1.f || a.beta != 1.f)
      return Error("a Gemm with a transposed A, alpha or beta (the int8 kernel takes neither)");
  }
  TUNEC_ASSIGN_OR_RETURN(auto dq, dequantizedOperands(g, n));
  if (g.value(n.inputs[0]).type.shape.rank() < 2)
    return Error("its activation is a vector (the int8 kernel takes a matrix)");
  QuantizedLayer q;
  TUNEC_TRY(matchActivation(g, dq.first, q));
  const Value& w = g.value(dq.second->inputs[0]);
  if (!w.constant || w.type.dtype != DType::I8 || w.type.shape.rank() != 2)
    return Error("its weights are not a constant s8 matrix");
  const bool transB = n.kind == OpKind::Gemm && std::get<GemmAttrs>(n.attrs).transB;
  TUNEC_TRY(matchWeightScales(g, dq.second, w.type.shape[transB ? 0 : 1], transB ? 0 : 1, 2, q));
  q.weights = &*w.constant, q.transB = transB;
  return q;
}

// The matched operands of a Conv node (2-d, weights [OC, IC/groups, KH, KW], scales per output
// channel on axis 0), or why it is not an int8 layer.
Expected<QuantizedLayer> matchConvLayer(const Graph& g, const Node& n) {
  const auto& a = std::get<ConvAttrs>(n.attrs);
  if (a.kernel.size() != 2) return Error("it is not a 2-d convolution");
  TUNEC_ASSIGN_OR_RETURN(auto dq, dequantizedOperands(g, n));
  QuantizedLayer q;
  TUNEC_TRY(matchActivation(g, dq.first, q));
  if (q.saValue != kNoValue)
    return Error("its activation is quantized per run (int8 convolutions take a constant scale "
                 "and zero point)");
  const Value& w = g.value(dq.second->inputs[0]);
  if (!w.constant || w.type.dtype != DType::I8 || w.type.shape.rank() != 4)
    return Error("its weights are not a constant s8 tensor");
  const int64_t icg = w.type.shape[1], channels = g.value(n.inputs[0]).type.shape[1];
  const bool depthwise =
      a.group > 1 && a.group == channels && icg == 1 && w.type.shape[0] == channels;
  if (!depthwise && a.group > 1 && icg % 4)
    return Error("its " + std::to_string(icg) +
                 " input channels per group are not a multiple of 4 (the int8 kernels read "
                 "input-channel quads; only a convolution of one group rounds them up)");
  if (n.inputs.size() > 2 && n.inputs[2] != kNoValue && !g.value(n.inputs[2]).constant)
    return Error("its bias is computed (the int8 epilogue takes a constant one)");
  TUNEC_TRY(matchWeightScales(g, dq.second, w.type.shape[0], 0, 4, q));
  q.weights = &*w.constant;
  return q;
}

Tensor columnVector(const std::vector<double>& v, Shape shape = {}) {
  Tensor t(DType::F32, shape.rank() ? shape : Shape{static_cast<int64_t>(v.size())});
  for (size_t j = 0; j < v.size(); ++j) t.dataAs<float>()[j] = static_cast<float>(v[j]);
  return t;
}

// The integer terms k[n] = bias[n] / scale[n] - za colSums[n] of a layer whose f32 bias (absent:
// nullptr) is whole multiples of its f32 column scales, each bias[n] exactly the f32 product
// k_b scale[n] that dequantizing an int32 bias gives, and every |k[n]| below 2^24; nullopt
// otherwise.
std::optional<std::vector<double>> integerColumnTerms(const std::vector<double>& scale,
                                                      const std::vector<int64_t>& colSums,
                                                      double za, const Tensor* bias) {
  constexpr double kExact = 16777216.0; // 2^24: the integers f32 holds exactly
  std::vector<double> k(scale.size());
  for (size_t j = 0; j < k.size(); ++j) {
    double kb = 0;
    if (bias) {
      const auto s = static_cast<float>(scale[j]);
      const auto b = static_cast<float>(bias->getDouble(static_cast<int64_t>(j)));
      kb = std::nearbyint(static_cast<double>(b) / s);
      if (!(std::abs(kb) < kExact) || static_cast<float>(kb * s) != b) return std::nullopt;
    }
    k[j] = kb - za * static_cast<double>(colSums[j]);
    if (!(std::abs(k[j]) < kExact)) return std::nullopt;
  }
  return k;
}

// The layer's value from its int8 `sums` with integer column terms `offset`: (sums + offset) x
// scale, named `out` as the layer's output was.
Expected<ValueId> offsetAndScaleSums(GraphRewriter& rw, const std::string& name,
                                     const std::string& out, ValueId sums, ValueId offset,
                                     ValueId scale) {
  TUNEC_ASSIGN_OR_RETURN(
      auto y, rw.add(name + ".offset", OpKind::Add, NoAttrs{}, {sums, offset}, {name + ".offset"}));
  TUNEC_ASSIGN_OR_RETURN(y, rw.add(name + ".scale", OpKind::Mul, NoAttrs{}, {y[0], scale}, {out}));
  return y[0];
}

// The layer's value from its int8 `sums`: sums x scale, + the zero point's correction, + the
// bias (either kNoValue when absent), the last of them named `out` as the layer's output was.
Expected<ValueId> scaleSums(GraphRewriter& rw, const std::string& name, const std::string& out,
                            ValueId sums, ValueId scale, ValueId correction, ValueId bias) {
  const bool corrected = correction != kNoValue, biased = bias != kNoValue;
  TUNEC_ASSIGN_OR_RETURN(auto y, rw.add(name + ".scale", OpKind::Mul, NoAttrs{}, {sums, scale},
                                        {corrected || biased ? name + ".scaled" : out}));
  if (corrected) {
    TUNEC_ASSIGN_OR_RETURN(y, rw.add(name + ".zero_point", OpKind::Add, NoAttrs{},
                                     {y[0], correction}, {biased ? name + ".corrected" : out}));
  }
  if (biased) {
    TUNEC_ASSIGN_OR_RETURN(y, rw.add(name + ".bias", OpKind::Add, NoAttrs{}, {y[0], bias}, {out}));
  }
  return y[0];
}

// A quantized Conv as IntegerConv(xq, wq) {pad_value = za} x sa sb[oc], + the correction
// -sa za sb[oc] sum w[oc], + the bias: per-channel [1, OC, 1, 1] constants of the NCHW output.
Status lowerConvLayer(GraphRewriter& rw, const Graph& graph, const Node& node,
                      const QuantizedLayer& q) {
  const Tensor& w = *q.weights;
  const int64_t oc = w.shape()[0], window = w.numel() / oc;
  const Shape channels{1, oc, 1, 1};
  std::vector<double> scale(q.sb), correction(q.sb);
  std::vector<int64_t> sums(static_cast<size_t>(oc));
  for (int64_t c = 0; c < oc; ++c) {
    int64_t sum = 0;
    for (int64_t i = 0; i < window; ++i) sum += w.dataAs<int8_t>()[c * window + i];
    sums[static_cast<size_t>(c)] = sum;
    scale[static_cast<size_t>(c)] *= q.sa;
    correction[static_cast<size_t>(c)] *= -q.sa * q.za * static_cast<double>(sum);
  }
  const std::string& name = node.name;
  const std::string& out = graph.value(node.outputs[0]).name;
  auto attrs = std::get<ConvAttrs>(node.attrs);
  attrs.padValue = static_cast<int64_t>(q.za);
  TUNEC_ASSIGN_OR_RETURN(auto integer,
                         rw.add(name + ".int8", OpKind::IntegerConv, attrs,
                                {rw.map(q.xq), rw.constant(name + ".w_s8", w)}, {name + ".sums"}));
  const Tensor* b = node.inputs.size() > 2 && node.inputs[2] != kNoValue
                        ? &*graph.value(node.inputs[2]).constant
                        : nullptr;
  ValueId channelScale = rw.constant(name + ".channel_scale", columnVector(scale, channels));
  if (auto k = integerColumnTerms(scale, sums, q.za, b)) {
    TUNEC_ASSIGN_OR_RETURN(
        ValueId y, offsetAndScaleSums(rw, name, out, integer[0],
                                      rw.constant(name + ".offset", columnVector(*k, channels)),
                                      channelScale));
    rw.replace(node.outputs[0], y);
    return {};
  }
  ValueId bias = kNoValue;
  if (b) {
    std::vector<double> values(static_cast<size_t>(oc));
    for (int64_t c = 0; c < oc; ++c) values[static_cast<size_t>(c)] = b->getDouble(c);
    bias = rw.constant(name + ".bias", columnVector(values, channels));
  }
  TUNEC_ASSIGN_OR_RETURN(
      ValueId y,
      scaleSums(rw, name, out, integer[0], channelScale,
                q.za != 0 ? rw.constant(name + ".zp_correction", columnVector(correction, channels))
                          : kNoValue,
                bias));
  rw.replace(node.outputs[0], y);
  return {};
}

// The Add of a constant per-column bias that is the only use of `v` (its consumer `user`, when
// it has one use), or -1: a dynamic layer adds it into its computed correction (one bias vector
// the kernel reads).
NodeId constantBiasAfter(const Graph& g, ValueId v, NodeId user, int64_t cols) {
  if (user < 0) return -1;
  const Node& n = g.node(user);
  if (n.kind != OpKind::Add || n.inputs.size() != 2 || (n.inputs[0] == v) == (n.inputs[1] == v))
    return -1;
  const Value& b = g.value(n.inputs[0] == v ? n.inputs[1] : n.inputs[0]);
  const bool vector = b.type.shape.numel() == cols && b.type.shape.rank() >= 1 &&
                      b.type.shape.dims().back() == cols;
  return b.constant && b.type.dtype == DType::F32 && vector &&
                 g.value(n.outputs[0]).type.shape == g.value(v).type.shape
             ? user
             : -1;
}

} // namespace

Expected<Graph> lowerQuantizedLayers(const Graph& graph) {
  GraphRewriter rw(graph);
  // The consumer of each value with exactly one use (model outputs count as uses), else -1.
  const std::vector<int> uses = useCounts(graph);
  std::vector<NodeId> onlyUser(graph.values().size(), -1);
  for (size_t i = 0; i < graph.nodes().size(); ++i)
    for (ValueId in : graph.nodes()[i].inputs)
      if (in != kNoValue && uses[static_cast<size_t>(in)] == 1)
        onlyUser[static_cast<size_t>(in)] = static_cast<NodeId>(i);
  std::map<NodeId, ValueId> absorbed; // bias Adds a dynamic layer took, and the layer's output
  for (const Node& node : graph.nodes()) {
    const auto id = static_cast<NodeId>(&node - graph.nodes().data());
    if (auto it = absorbed.find(id); it != absorbed.end()) {
      rw.replace(node.outputs[0], it->second);
      continue;
    }
    if (node.kind == OpKind::Conv) {
      if (auto layer = matchConvLayer(graph, node))
        TUNEC_TRY(lowerConvLayer(rw, graph, node, *layer));
      else
        TUNEC_TRY(rw.copy(node));
      continue;
    }
    if (node.kind != OpKind::MatMul && node.kind != OpKind::Gemm) {
      TUNEC_TRY(rw.copy(node));
      continue;
    }
    auto layer = matchLayer(graph, node);
    if (!layer) {
      TUNEC_TRY(rw.copy(node));
      continue;
    }
    const QuantizedLayer& q = *layer;
    const Tensor weights = weightsKN(q);
    const int64_t k = weights.shape()[0], cols = weights.shape()[1];
    // Per column: -sb[n] sum_k w[k][n], which the zero point's correction multiplies.
    std::vector<int64_t> colSums(static_cast<size_t>(cols), 0);
    for (int64_t kk = 0; kk < k; ++kk)
      for (int64_t j = 0; j < cols; ++j)
        colSums[static_cast<size_t>(j)] += weights.dataAs<int8_t>()[kk * cols + j];
    std::vector<double> sbSums(static_cast<size_t>(cols));
    for (size_t j = 0; j < sbSums.size(); ++j)
      sbSums[j] = -q.sb[j] * static_cast<double>(colSums[j]);
    const std::string& name = node.name;
    const std::string out = graph.value(node.outputs[0]).name;
    const bool dynamic = q.saValue != kNoValue;
    const bool zeroPoint = dynamic ? q.zaValue != kNoValue : q.za != 0;
    const bool bias =
        node.kind == OpKind::Gemm && node.inputs.size() > 2 && node.inputs[2] != kNoValue;
    ValueId colScale = kNoValue, colCorrection = kNoValue;
    NodeId absorbedBias = -1;
    std::optional<std::vector<double>> offset; // integer column terms (integerColumnTerms)
    if (!dynamic) { // sa sb[n] and -sa za sb[n] sum_k w[k][n], folded here
      std::vector<double> scale(q.sb), correction(sbSums);
      for (double& s : scale) s *= q.sa;
      for (double& c : correction) c *= q.sa * q.za;
      colScale = rw.constant(name + ".col_scale", columnVector(scale));
      // The Gemm's bias, or the constant bias Add after a MatMul (absorbed when it is integral).
      const NodeId after =
          bias ? -1
               : constantBiasAfter(graph, node.outputs[0],
                                   onlyUser[static_cast<size_t>(node.outputs[0])], cols);
      const Node* a = after >= 0 ? &graph.node(after) : nullptr;
      const Value* b = bias ? &graph.value(node.inputs[2])
                       : a  ? &graph.value(a->inputs[a->inputs[0] == node.outputs[0] ? 1 : 0])
                            : nullptr;
      if (!b || (b->constant && b->type.shape.numel() == cols))
        offset = integerColumnTerms(scale, colSums, q.za, b ? &*b->constant : nullptr);
      if (offset && after >= 0) absorbedBias = after;
      if (!offset) colCorrection = rw.constant(name + ".zp_correction", columnVector(correction));
    } else {
      // The same with this run's scale and zero point: scalars of the graph times per-column
      // constants (a few hundred multiplies a run), then elementwise steps on the sums.
      ValueId sa = rw.map(q.saValue);
      TUNEC_ASSIGN_OR_RETURN(auto s, rw.add(name + ".col_scale", OpKind::Mul, NoAttrs{},
                                            {sa, rw.constant(name + ".sb", columnVector(q.sb))},
                                            {name + ".col_scale"}));
      colScale = s[0];
      if (zeroPoint) {
        TUNEC_ASSIGN_OR_RETURN(auto zf,
                               rw.add(name + ".za_f32", OpKind::Cast, CastAttrs{DType::F32},
                                      {rw.map(q.zaValue)}, {name + ".za_f32"}));
        TUNEC_ASSIGN_OR_RETURN(auto saza, rw.add(name + ".sa_za", OpKind::Mul, NoAttrs{},
                                                 {sa, zf[0]}, {name + ".sa_za"}));
        TUNEC_ASSIGN_OR_RETURN(
            auto c, rw.add(name + ".zp_correction", OpKind::Mul, NoAttrs{},
                           {saza[0], rw.constant(name + ".sb_sums", columnVector(sbSums))},
                           {name + ".zp_correction"}));
        colCorrection = c[0];
      }
      // The model's bias after the layer joins the correction: [N] + [N] per run.
      if (NodeId add =
              bias ? -1
                   : constantBiasAfter(graph, node.outputs[0],
                                       onlyUser[static_cast<size_t>(node.outputs[0])], cols);
          add >= 0) {
        const Node& a = graph.node(add);
        ValueId b = rw.map(a.inputs[0] == node.outputs[0] ? a.inputs[1] : a.inputs[0]);
        if (colCorrection == kNoValue) {
          colCorrection = b;
        } else {
          TUNEC_ASSIGN_OR_RETURN(auto sum, rw.add(name + ".correction_bias", OpKind::Add, NoAttrs{},
                                                  {colCorrection, b}, {name + ".correction_bias"}));
          colCorrection = sum[0];
        }
        absorbedBias = add;
      }
    }
    // The int8 kernel after the vectors it reads (the fusion plan joins only post-ops whose
    // other inputs are ready when the kernel starts).
    TUNEC_ASSIGN_OR_RETURN(auto sums, rw.add(name + ".int8", OpKind::IntegerMatMul, NoAttrs{},
                                             {rw.map(q.xq), rw.constant(name + ".w_s8", weights)},
                                             {name + ".sums"}));
    TUNEC_ASSIGN_OR_RETURN(
        ValueId y,
        offset ? offsetAndScaleSums(rw, name, out, sums[0],
                                    rw.constant(name + ".offset", columnVector(*offset)), colScale)
               : scaleSums(rw, name, out, sums[0], colScale,
                           zeroPoint || absorbedBias >= 0 ? colCorrection : kNoValue,
                           bias ? rw.map(node.inputs[2]) : kNoValue));
    rw.replace(node.outputs[0], y);
    if (absorbedBias >= 0) absorbed[absorbedBias] = y;
  }
  return rw.finish();
}

std::vector<std::pair<std::string, std::string>> quantizedLayersKeptFloat(const Graph& graph) {
  std::vector<std::pair<std::string, std::string>> kept;
  for (const Node& n : graph.nodes()) {
    if (n.kind != OpKind::Conv && n.kind != OpKind::MatMul && n.kind != OpKind::Gemm) continue;
    bool quantized = false;
    for (size_t i = 0; i < std::min<size_t>(2, n.inputs.size()); ++i)
      quantized |= dequantizeOf(graph, n.inputs[i]) != nullptr;
    if (!quantized) continue;
    const std::string what = std::string(opName(n.kind)) + " '" + n.name + "'";
    if (auto layer = n.kind == OpKind::Conv ? matchConvLayer(graph, n) : matchLayer(graph, n);
        !layer)
      kept.emplace_back(what, layer.error().message());
  }
  return kept;
}

} // namespace tunec::passes
