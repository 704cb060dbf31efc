// The QDQ rewrite of an ONNX model (post-training static quantization).
#include "frontend/onnx_quantize.h"

#include "frontend/onnx_tensor.h"
#include "support/atomic_file.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <onnx/onnx_pb.h>
#include <optional>
#include <set>
#include <sstream>

namespace tunec {

namespace {

Expected<onnx::ModelProto> readModel(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return makeError(path, ": cannot open file");
  std::stringstream bytes;
  bytes << in.rdbuf();
  onnx::ModelProto model;
  if (!model.ParseFromString(bytes.str())) return makeError(path, ": not an ONNX model");
  return model;
}

// The f32 initializer named `name`, or nullptr.
const onnx::TensorProto* floatInitializer(const onnx::GraphProto& g, const std::string& name) {
  for (const onnx::TensorProto& t : g.initializer())
    if (t.name() == name && t.data_type() == onnx::TensorProto::FLOAT) return &t;
  return nullptr;
}

bool quantizable(const onnx::GraphProto& g, const onnx::NodeProto& n) {
  if (n.op_type() != "Conv" && n.op_type() != "MatMul" && n.op_type() != "Gemm") return false;
  return n.input_size() >= 2 && floatInitializer(g, n.input(1));
}

// The axis of a weight's output channels: Conv OC x IC x ..., MatMul's and Gemm's B K x N
// (N x K with transB).
int64_t outputAxis(const onnx::NodeProto& n) {
  if (n.op_type() == "Conv") return 0;
  if (n.op_type() == "Gemm")
    for (const onnx::AttributeProto& a : n.attribute())
      if (a.name() == "transB" && a.i() != 0) return 0;
  return 1;
}

Tensor scalar(DType type, double value) {
  Tensor t(type, Shape{});
  if (isFloat(type))
    t.setDouble(0, value);
  else
    t.setInt(0, static_cast<int64_t>(value));
  return t;
}

// Drops the initializers in `replaced` that no node or graph output reads any more.
void dropUnread(onnx::GraphProto& g, const std::set<std::string>& replaced) {
  std::set<std::string> used;
  for (const onnx::NodeProto& n : g.node())
    for (const std::string& i : n.input()) used.insert(i);
  for (const onnx::ValueInfoProto& o : g.output()) used.insert(o.name());
  auto* inits = g.mutable_initializer();
  for (int i = inits->size() - 1; i >= 0; --i)
    if (replaced.count(inits->Get(i).name()) && !used.count(inits->Get(i).name()))
      inits->DeleteSubrange(i, 1);
}

// The rewritten model to `outPath`, whole or not at all.
Status writeModel(const onnx::ModelProto& model, const std::string& outPath,
                  const std::string& modelPath) {
  std::string bytes;
  if (!model.SerializeToString(&bytes)) return makeError(outPath, ": cannot serialize the model");
  return writeFileAtomically(outPath,
                             [&](std::ostream& out) -> Status {
                               out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
                               return {};
                             },
                             {modelPath});
}

void addInitializer(onnx::GraphProto& g, const Tensor& t, const std::string& name) {
  onnx_import::tensorToProto(t, name, *g.add_initializer());
}

onnx::NodeProto quantNode(const char* op, const std::string& name, std::vector<std::string> in,
                          const std::string& out, std::optional<int64_t> axis = std::nullopt) {
  onnx::NodeProto n;
  n.set_op_type(op);
  n.set_name(name);
  for (const std::string& i : in) n.add_input(i);
  n.add_output(out);
  if (axis) {
    onnx::AttributeProto* a = n.add_attribute();
    a->set_name("axis");
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(*axis);
  }
  return n;
}

// Symmetric int8 weights: q = clip(rint(w / s), -L, L) with s = max |w| / L (L = 127, or 64
// for 7-bit weights), per tensor or per slice of `axis`.
void quantizeWeights(const Tensor& w, int64_t axis, bool perChannel, int limit, Tensor& q,
                     Tensor& scale, Tensor& zeroPoint) {
  const double l = limit;
  const Shape& s = w.shape();
  int64_t channels = perChannel ? s[static_cast<int>(axis)] : 1, inner = 1;
  for (int d = static_cast<int>(axis) + 1; d < s.rank(); ++d) inner *= s[d];
  auto channelOf = [&](int64_t i) { return perChannel ? i / inner % channels : 0; };
  std::vector<double> maxAbs(static_cast<size_t>(channels), 0.0);
  for (int64_t i = 0; i < w.numel(); ++i) {
    double& m = maxAbs[static_cast<size_t>(channelOf(i))];
    m = std::max(m, std::fabs(w.getDouble(i)));
  }
  Shape paramShape = perChannel ? Shape{channels} : Shape{};
  scale = Tensor(DType::F32, paramShape);
  zeroPoint = Tensor(DType::I8, paramShape);
  for (int64_t c = 0; c < channels; ++c) {
    double m = maxAbs[static_cast<size_t>(c)];
    scale.setDouble(c, static_cast<float>(m > 0 ? m / l : 1.0));
  }
  q = Tensor(DType::I8, s);
  for (int64_t i = 0; i < w.numel(); ++i) {
    float sc = static_cast<float>(scale.getDouble(channelOf(i)));
    float v = std::nearbyint(static_cast<float>(w.getDouble(i)) / sc);
    q.setInt(i, static_cast<int64_t>(std::clamp(v, static_cast<float>(-l), static_cast<float>(l))));
  }
}

// A layer's bias as int32 with the scale sa sb[n] of its sums (zero point 0), as QDQ exporters
// write it and QLinearConv reads it: the int8 kernels then add it to the integer sums exactly
// (lower-quantized-layers) and round as ONNX Runtime does. Per channel when the weights are
// (scale [N]), else per tensor; quotients beyond int32 saturate.
void quantizeBias(const Tensor& bias, float sa, const Tensor& weightScale, Tensor& q, Tensor& scale,
                  Tensor& zeroPoint) {
  const bool perChannel = weightScale.shape().rank() == 1;
  const Shape paramShape = perChannel ? weightScale.shape() : Shape{};
  scale = Tensor(DType::F32, paramShape);
  zeroPoint = Tensor(DType::I32, paramShape);
  for (int64_t c = 0; c < scale.numel(); ++c)
    scale.dataAs<float>()[c] = sa * weightScale.dataAs<float>()[c];
  q = Tensor(DType::I32, bias.shape());
  constexpr double kMax = 2147483647.0;
  for (int64_t c = 0; c < bias.numel(); ++c) {
    const float s = scale.dataAs<float>()[perChannel ? c : 0];
    q.setInt(c, static_cast<int64_t>(std::clamp(
                    std::nearbyint(static_cast<double>(bias.getDouble(c)) / s), -kMax, kMax)));
  }
}

} // namespace

Expected<QuantizePlan> planQuantization(const std::string& modelPath) {
  TUNEC_ASSIGN_OR_RETURN(onnx::ModelProto model, readModel(modelPath));
  QuantizePlan plan;
  std::set<std::string> seen;
  for (const onnx::NodeProto& n : model.graph().node()) {
    if (!quantizable(model.graph(), n)) continue;
    ++plan.nodes;
    if (seen.insert(n.input(0)).second) plan.activations.push_back(n.input(0));
  }
  return plan;
}

Expected<int> writeQuantizedModel(const std::string& modelPath, const std::string& outPath,
                                  const std::map<std::string, std::pair<double, double>>& ranges,
                                  const QuantizeOptions& options,
                                  std::vector<std::string>* keptFloat) {
  TUNEC_ASSIGN_OR_RETURN(onnx::ModelProto model, readModel(modelPath));
  if (options.activations != DType::U8 && options.activations != DType::I8)
    return makeError("--activations must be u8 or i8");
  if (options.dynamic && options.activations != DType::U8)
    return makeError("dynamic quantization's activations are u8 (DynamicQuantizeLinear)");
  onnx::GraphProto& g = *model.mutable_graph();
  std::string baseDir = std::filesystem::path(modelPath).parent_path().string();
  std::vector<onnx::NodeProto> nodes;
  std::map<std::string, std::string> dequantized; // activation -> its DequantizeLinear output
  std::map<std::string, float> activationScale;   // (static) activation -> its scale
  std::set<std::string> replacedWeights;
  int quantized = 0;
  for (const onnx::NodeProto& original : g.node()) {
    onnx::NodeProto n = original;
    auto range = ranges.find(n.input_size() ? n.input(0) : std::string());
    std::optional<Tensor> weights;
    const bool calibrated = options.dynamic ? n.op_type() != "Conv" : range != ranges.end();
    const std::string layer = n.op_type() + " '" + n.name() + "'";
    if (quantizable(g, n) && !calibrated && keptFloat)
      keptFloat->push_back(layer + " stays float: " +
                           (options.dynamic ? "a convolution (--dynamic quantizes MatMul/Gemm)"
                                            : "its activation has no calibrated range"));
    if (quantizable(g, n) && calibrated) {
      TUNEC_ASSIGN_OR_RETURN(
          weights, onnx_import::tensorFromProto(*floatInitializer(g, n.input(1)), baseDir));
      if (weights->shape().rank() <= outputAxis(n)) { // 1-d: left in float
        weights.reset();
        if (keptFloat) keptFloat->push_back(layer + " stays float: its weights are a vector");
      }
    }
    if (weights) {
      ++quantized;
      const std::string& a = n.input(0);
      if (!dequantized.count(a) && options.dynamic) {
        // The run's range (DynamicQuantizeLinear: [min(x, 0), max(x, 0)] over 255 steps).
        onnx::NodeProto d;
        d.set_op_type("DynamicQuantizeLinear");
        d.set_name(a + "_DynamicQuantizeLinear");
        d.add_input(a);
        for (const char* out : {"_quantized", "_scale", "_zero_point"}) d.add_output(a + out);
        nodes.push_back(d);
        nodes.push_back(quantNode("DequantizeLinear", a + "_DequantizeLinear",
                                  {a + "_quantized", a + "_scale", a + "_zero_point"},
                                  a + "_dequantized"));
        dequantized[a] = a + "_dequantized";
      }
      if (!dequantized.count(a)) {
        // The activation's range, widened to contain 0 (so that 0 is exact, as padding needs).
        double lo = std::min(range->second.first, 0.0), hi = std::max(range->second.second, 0.0);
        double s, z = 0;
        if (options.activations == DType::U8) {
          s = hi > lo ? (hi - lo) / 255 : 1.0;
          z = std::clamp(std::nearbyint(-lo / s), 0.0, 255.0);
        } else {
          s = std::max(-lo, hi) > 0 ? std::max(-lo, hi) / 127 : 1.0;
        }
        activationScale[a] = static_cast<float>(s);
        addInitializer(g, scalar(DType::F32, s), a + "_scale");
        addInitializer(g, scalar(options.activations, z), a + "_zero_point");
        nodes.push_back(quantNode("QuantizeLinear", a + "_QuantizeLinear",
                                  {a, a + "_scale", a + "_zero_point"}, a + "_quantized"));
        nodes.push_back(quantNode("DequantizeLinear", a + "_DequantizeLinear",
                                  {a + "_quantized", a + "_scale", a + "_zero_point"},
                                  a + "_dequantized"));
        dequantized[a] = a + "_dequantized";
      }
      // Input `i` of the layer replaced by the DequantizeLinear of `q` (its scale and zero point
      // initializers too, per `axis` with per-channel weights).
      auto dequantizeInput = [&](int i, const Tensor& q, const Tensor& scale, const Tensor& zp,
                                 int64_t axis) {
        const std::string name = n.input(i) + "_" + n.name() + "_quantized";
        addInitializer(g, q, name);
        addInitializer(g, scale, name + "_scale");
        addInitializer(g, zp, name + "_zero_point");
        nodes.push_back(
            quantNode("DequantizeLinear", name + "_DequantizeLinear",
                      {name, name + "_scale", name + "_zero_point"}, name + "_dequantized",
                      options.perChannel ? std::optional<int64_t>(axis) : std::nullopt));
        replacedWeights.insert(n.input(i));
        n.set_input(i, name + "_dequantized");
      };
      const Tensor& w = *weights;
      Tensor q, scale, zp;
      int64_t axis = outputAxis(n);
      quantizeWeights(w, axis, options.perChannel, options.weightLimit, q, scale, zp);
      dequantizeInput(1, q, scale, zp, axis);
      if (auto sa = activationScale.find(a);
          sa != activationScale.end() && n.input_size() > 2 && floatInitializer(g, n.input(2))) {
        TUNEC_ASSIGN_OR_RETURN(
            Tensor b, onnx_import::tensorFromProto(*floatInitializer(g, n.input(2)), baseDir));
        if (b.shape().rank() == 1 && b.numel() == w.shape()[static_cast<int>(axis)]) {
          Tensor bq, bScale, bZero;
          quantizeBias(b, sa->second, scale, bq, bScale, bZero);
          dequantizeInput(2, bq, bScale, bZero, 0);
        }
      }
      n.set_input(0, dequantized[a]);
    }
    nodes.push_back(std::move(n));
  }
  g.clear_node();
  for (onnx::NodeProto& n : nodes) *g.add_node() = std::move(n);
  // Drop the f32 weights no node reads any more.
  dropUnread(g, replacedWeights);
  // Per-axis DequantizeLinear is opset 13.
  for (onnx::OperatorSetIdProto& op : *model.mutable_opset_import())
    if ((op.domain().empty() || op.domain() == "ai.onnx") && op.version() < 13) op.set_version(13);
  TUNEC_TRY(writeModel(model, outPath, modelPath));
  return quantized;
}

namespace {

// Codes of `bits` bits packed low first into bytes: `count` codes from `codes`.
void packCodes(const std::vector<uint8_t>& codes, int bits, std::string& out) {
  const int per = 8 / bits;
  for (size_t i = 0; i < codes.size(); i += static_cast<size_t>(per)) {
    uint8_t byte = 0;
    for (int j = 0; j < per && i + static_cast<size_t>(j) < codes.size(); ++j)
      byte = static_cast<uint8_t>(byte | (codes[i + static_cast<size_t>(j)] << (j * bits)));
    out.push_back(static_cast<char>(byte));
  }
}

} // namespace

Expected<int> writeWeightOnlyModel(const std::string& modelPath, const std::string& outPath,
                                   int bits, int block, std::vector<std::string>* keptFloat,
                                   int accuracyLevel) {
  if (bits != 4 && bits != 8) return makeError("weight-only codes are 4 or 8 bits, not ", bits);
  if (block < 16 || (block & (block - 1)) != 0)
    return makeError("the block must be a power of two of at least 16, not ", block);
  TUNEC_ASSIGN_OR_RETURN(onnx::ModelProto model, readModel(modelPath));
  onnx::GraphProto& g = *model.mutable_graph();
  const std::string baseDir = std::filesystem::path(modelPath).parent_path().string();
  std::set<std::string> replaced;
  int quantized = 0;
  const int top = (1 << bits) - 1;
  std::vector<onnx::NodeProto> nodes;
  for (const onnx::NodeProto& original : g.node()) {
    onnx::NodeProto n = original;
    const onnx::TensorProto* b =
        n.op_type() == "MatMul" && n.input_size() == 2 ? floatInitializer(g, n.input(1)) : nullptr;
    if (!b || b->dims_size() != 2 || b->dims(0) < 16) {
      if (b && keptFloat)
        keptFloat->push_back("MatMul '" + n.name() + "' stays float: its weights are not [K, N] " +
                             "with K >= 16");
      nodes.push_back(std::move(n));
      continue;
    }
    TUNEC_ASSIGN_OR_RETURN(Tensor w, onnx_import::tensorFromProto(*b, baseDir));
    const int64_t k = w.shape()[0], cols = w.shape()[1], blocks = (k + block - 1) / block;
    const float* wp = w.dataAs<float>();
    std::string codes, zeros;
    std::vector<float> scales(static_cast<size_t>(cols * blocks));
    for (int64_t c = 0; c < cols; ++c) {
      std::vector<uint8_t> columnZeros;
      for (int64_t blk = 0; blk < blocks; ++blk) {
        const int64_t from = blk * block, to = std::min<int64_t>(k, from + block);
        double lo = 0, hi = 0;
        for (int64_t i = from; i < to; ++i) {
          lo = std::min<double>(lo, wp[i * cols + c]);
          hi = std::max<double>(hi, wp[i * cols + c]);
        }
        const auto scale = static_cast<float>(hi > lo ? (hi - lo) / top : 1.0);
        const double zero = std::clamp(std::nearbyint(-lo / scale), 0.0, static_cast<double>(top));
        std::vector<uint8_t> q(static_cast<size_t>(block), static_cast<uint8_t>(zero));
        for (int64_t i = from; i < to; ++i)
          q[static_cast<size_t>(i - from)] = static_cast<uint8_t>(std::clamp(
              std::nearbyint(wp[i * cols + c] / scale) + zero, 0.0, static_cast<double>(top)));
        packCodes(q, bits, codes);
        scales[static_cast<size_t>(c * blocks + blk)] = scale;
        columnZeros.push_back(static_cast<uint8_t>(zero));
      }
      packCodes(columnZeros, bits, zeros);
    }
    const std::string name = n.input(1) + "_" + n.name() + "_q" + std::to_string(bits);
    onnx::TensorProto* t = g.add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::UINT8);
    for (int64_t d : {cols, blocks, static_cast<int64_t>(block * bits / 8)}) t->add_dims(d);
    t->set_raw_data(codes);
    Tensor scaleTensor(DType::F32, Shape{cols * blocks});
    std::copy(scales.begin(), scales.end(), scaleTensor.dataAs<float>());
    addInitializer(g, scaleTensor, name + "_scales");
    onnx::TensorProto* z = g.add_initializer();
    z->set_name(name + "_zero_points");
    z->set_data_type(onnx::TensorProto::UINT8);
    z->add_dims(static_cast<int64_t>(zeros.size()));
    z->set_raw_data(zeros);
    onnx::NodeProto q;
    q.set_op_type("MatMulNBits");
    q.set_domain("com.microsoft");
    q.set_name(n.name() + "_Q" + std::to_string(bits));
    for (const std::string& in : {n.input(0), name, name + "_scales", name + "_zero_points"})
      q.add_input(in);
    q.add_output(n.output(0));
    auto attr = [&](const char* key, int64_t v) {
      onnx::AttributeProto* a = q.add_attribute();
      a->set_name(key);
      a->set_type(onnx::AttributeProto::INT);
      a->set_i(v);
    };
    attr("K", k);
    attr("N", cols);
    attr("bits", bits);
    attr("block_size", block);
    attr("accuracy_level", accuracyLevel);
    replaced.insert(n.input(1));
    nodes.push_back(std::move(q));
    ++quantized;
  }
  g.clear_node();
  for (onnx::NodeProto& n : nodes) *g.add_node() = std::move(n);
  dropUnread(g, replaced);
  bool imported = false;
  for (const onnx::OperatorSetIdProto& op : model.opset_import())
    imported = imported || op.domain() == "com.microsoft";
  if (!imported) {
    onnx::OperatorSetIdProto* op = model.add_opset_import();
    op->set_domain("com.microsoft");
    op->set_version(1);
  }
  TUNEC_TRY(writeModel(model, outPath, modelPath));
  return quantized;
}

RangeCalibrator::RangeCalibrator(const QuantizeOptions& options)
    : method_(options.method), sampled_(options.method != "minmax"), p_(options.percentile) {}

void RangeCalibrator::observe(const std::string& name, const Tensor& values) {
  constexpr int64_t kReservoir = int64_t(1) << 20;
  auto [it, fresh] = seen_.try_emplace(name);
  Seen& s = it->second;
  if (fresh)
    s.lo = std::numeric_limits<double>::infinity(), s.hi = -std::numeric_limits<double>::infinity();
  for (int64_t i = 0; i < values.numel(); ++i) {
    double v = values.getDouble(i);
    if (!std::isfinite(v)) continue;
    s.lo = std::min(s.lo, v), s.hi = std::max(s.hi, v);
    if (!sampled_) continue;
    // Reservoir sampling: the k-th value replaces a random slot with probability size / k.
    ++s.count;
    if (static_cast<int64_t>(s.reservoir.size()) < kReservoir) {
      s.reservoir.push_back(static_cast<float>(v));
      continue;
    }
    state_ += 0x9e3779b97f4a7c15ull;
    uint64_t z = state_;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    auto slot = static_cast<int64_t>(z % static_cast<uint64_t>(s.count));
    if (slot < kReservoir) s.reservoir[static_cast<size_t>(slot)] = static_cast<float>(v);
  }
}

double entropyThreshold(std::vector<float> absValues, int levels) {
  constexpr int kBins = 2048;
  if (absValues.empty()) return 0;
  // The histogram spans [0, max], or 8 times the 99.9th percentile when far outliers would
  // leave the bulk of the values in the first few bins (the thresholds start at `levels` bins);
  // values beyond it count in the last bin.
  const size_t k = (absValues.size() - 1) * 999 / 1000;
  std::nth_element(absValues.begin(), absValues.begin() + static_cast<int64_t>(k), absValues.end());
  const double q999 = absValues[k];
  double top = *std::max_element(absValues.begin(), absValues.end());
  if (q999 > 0) top = std::min(top, 8 * q999);
  if (!(top > 0)) return 0;
  const double width = top / kBins;
  std::vector<double> hist(kBins, 0.0);
  for (float v : absValues)
    hist[static_cast<size_t>(std::min<double>(kBins - 1, std::floor(v / width)))] += 1;
  // KL(P || Q) of the first `bins` bins: P the histogram with everything above folded into its
  // last bin; Q the first `bins` bins merged into `levels` groups, each group's count spread
  // over its nonzero bins (a bin P has and Q lacks gets a small count: smoothing).
  auto divergence = [&](int bins) {
    std::vector<double> p(hist.begin(), hist.begin() + bins), q(static_cast<size_t>(bins), 0.0);
    for (int b = bins; b < kBins; ++b)
      p[static_cast<size_t>(bins - 1)] += hist[static_cast<size_t>(b)];
    const double merged = static_cast<double>(bins) / levels;
    for (int j = 0; j < levels; ++j) {
      const auto lo = static_cast<int>(std::floor(j * merged));
      const int hi = j + 1 == levels ? bins : static_cast<int>(std::floor((j + 1) * merged));
      double total = 0;
      int nonzero = 0;
      for (int b = lo; b < hi; ++b) {
        total += hist[static_cast<size_t>(b)];
        nonzero += hist[static_cast<size_t>(b)] > 0;
      }
      for (int b = lo; b < hi; ++b)
        if (hist[static_cast<size_t>(b)] > 0) q[static_cast<size_t>(b)] = total / nonzero;
    }
    double sumP = 0, sumQ = 0;
    for (int b = 0; b < bins; ++b)
      sumP += p[static_cast<size_t>(b)], sumQ += q[static_cast<size_t>(b)];
    double kl = 0;
    for (int b = 0; b < bins; ++b) {
      const double pb = p[static_cast<size_t>(b)] / sumP;
      if (pb <= 0) continue;
      const double qb = std::max(q[static_cast<size_t>(b)] / sumQ, 1e-12);
      kl += pb * std::log(pb / qb);
    }
    return kl;
  };
  int best = kBins;
  double bestKl = std::numeric_limits<double>::infinity();
  for (int bins = std::min(levels, kBins); bins <= kBins; ++bins) {
    const double kl = divergence(bins);
    if (kl < bestKl) bestKl = kl, best = bins;
  }
  return best * width;
}

std::map<std::string, std::pair<double, double>> RangeCalibrator::ranges() const {
  std::map<std::string, std::pair<double, double>> out;
  for (const auto& [name, s] : seen_) {
    if (!std::isfinite(s.lo)) continue;
    if (!sampled_ || s.reservoir.empty()) {
      out[name] = {s.lo, s.hi};
      continue;
    }
    if (method_ == "entropy") {
      // A non-negative activation (after a ReLU) spends all 256 levels on [0, T]; else 128
      // per sign around 0.
      std::vector<float> magnitudes;
      for (float x : s.reservoir) magnitudes.push_back(std::fabs(x));
      const double t = entropyThreshold(std::move(magnitudes), s.lo >= 0 ? 256 : 128);
      out[name] = {std::max(s.lo, -t), std::min(s.hi, t)};
      continue;
    }
    std::vector<float> v = s.reservoir;
    auto at = [&](double q) {
      auto k = static_cast<size_t>(std::llround(q * static_cast<double>(v.size() - 1)));
      std::nth_element(v.begin(), v.begin() + static_cast<int64_t>(k), v.end());
      return static_cast<double>(v[k]);
    };
    out[name] = {at(1.0 - p_ / 100.0), at(p_ / 100.0)};
  }
  return out;
}

} // namespace tunec
