// Anchors: Conv (conv2d or depthwise template), Gemm and MatMul (matmul template), each with the
// post-ops its epilogue absorbs (bias per output channel, ReLU, clip, GELU, a scalar scale, a
// residual add), the config from the tuning database or the template's analytical default.
#include "driver/lowering.h"
#include "tuning_db/keys.h"

#include <cfloat>
#include <cmath>
#include <optional>

namespace tunec::driver {

namespace {

// The config for a workload: the best record of the database, else the analytical default.
// A cold_weights workload without records of its own takes the best record measured with warm
// weights (a database tuned before the condition was part of the key). A kernel left at its
// default while the database has records of its workload for other targets says so (hk).
// Both through the typed template interface; the database's JSON is read here, once a record.
Config chooseConfig(Lowering& l, const Workload& w, HeavyKernel& hk) {
  hk.tuned = false;
  const CompileOptions& options = l.options();
  auto makeDefault = [&] { return defaultConfig(w, options.isa, options.target); };
  db::TuningDatabase* database = options.database;
  if (!database) return makeDefault();
  TemplateKind kind = templateKind(w);
  int version = templateVersion(kind);
  db::TargetInfo target = db::TargetInfo::fromTarget(options.target);
  nlohmann::json key = toJson(w);
  std::vector<nlohmann::json> keys = {key};
  if (key.contains("cold_weights")) {
    key.erase("cold_weights");
    keys.push_back(key);
  }
  // Fastest first; a record whose config no longer parses or validates (an edited or imported
  // row) is skipped for the next one rather than sending the kernel back to its default.
  std::vector<std::vector<db::Record>> recordsByKey;
  for (const nlohmann::json& k : keys) {
    auto records = database->recordsOf(db::workloadKey(k));
    recordsByKey.push_back(records ? std::move(*records) : std::vector<db::Record>());
  }
  bool compatible = options.targetMatch == db::TargetMatch::IsaFeatures;
  for (const std::vector<db::Record>& records : recordsByKey)
    for (bool exact : {true, false}) {
      if (!exact && !compatible) break;
      for (const db::Record& r : records) {
        bool sameTarget =
            exact ? r.target.key() == target.key() : r.target.isaKey() == target.isaKey();
        if (r.status != db::MeasureStatus::Ok || r.templateVersion != version || !sameTarget)
          continue;
        auto config = parseConfig(kind, r.config);
        if (config && configIsa(*config) == options.isa && validateConfig(w, *config)) {
          hk.tuned = true;
          return *config;
        }
      }
    }
  for (const std::vector<db::Record>& records : recordsByKey)
    for (const db::Record& r : records)
      if (r.status == db::MeasureStatus::Ok && r.templateVersion == version &&
          r.target.key() != target.key())
        hk.otherTargets.insert(r.target.key());
  return makeDefault();
}

// The kernel's workload and its config (of the workload's template), described in `hk`.
template <typename C, typename W> C chooseConfigOf(Lowering& l, const W& w, HeavyKernel& hk) {
  hk.workload = w;
  hk.config = chooseConfig(l, hk.workload, hk);
  return std::get<C>(hk.config);
}

const float* floatData(const Value& v) {
  return v.constant->dataAs<float>();
}

// Post-ops of the nodes after the anchor, as far as the epilogue can absorb them.
struct EpilogueBuild {
  Epilogue epilogue;
  std::vector<float> bias; ///< per output channel, when the epilogue has a bias
  int addend = -1;         ///< tensor
  ValueId result;          ///< the value the kernel writes
  size_t consumed = 1;
  std::string names;
};

// True when a constant broadcasts along the channel dim `axis` of an output of `rank` dims only.
bool perChannel(const Shape& c, int rank, int axis, int64_t channels) {
  if (c.numel() != channels && c.numel() != 1) return false;
  int shift = rank - c.rank();
  if (shift < 0) return false;
  for (int d = 0; d < c.rank(); ++d)
    if (c[d] != 1 && d + shift != axis) return false;
  return true;
}

// The factor of `x * c`, `c * x` or `x / c` with x = `result` and c a float scalar constant.
std::optional<float> scalarFactor(const Graph& g, const Node& n, ValueId result) {
  if ((n.kind != OpKind::Mul && n.kind != OpKind::Div) || n.inputs.size() != 2) return std::nullopt;
  bool left = n.inputs[0] == result, right = n.inputs[1] == result;
  if (left == right || (n.kind == OpKind::Div && !left)) return std::nullopt;
  const Value& c = g.value(left ? n.inputs[1] : n.inputs[0]);
  if (!c.constant || c.type.dtype != DType::F32 || c.type.shape.numel() != 1 ||
      g.value(n.outputs[0]).type.shape != g.value(result).type.shape)
    return std::nullopt;
  float v = floatData(c)[0];
  return n.kind == OpKind::Mul ? v : 1.f / v;
}

void absorbPostOps(Lowering& l, const std::vector<NodeId>& nodes, int channelAxis, int64_t channels,
                   Phys outPhys, EpilogueBuild& e) {
  const Graph& g = l.graph();
  for (size_t i = 1; i < nodes.size(); ++i) {
    const Node& n = g.node(nodes[i]);
    if (n.outputs.size() != 1 || g.value(n.outputs[0]).type.dtype != DType::F32) break;
    const Shape& outShape = g.value(e.result).type.shape;
    if (n.kind == OpKind::Relu && n.inputs[0] == e.result) {
      e.epilogue.push_back({PostOpKind::Relu});
    } else if (n.kind == OpKind::Gelu && n.inputs[0] == e.result &&
               !std::get<GeluAttrs>(n.attrs).tanhApproximation) {
      e.epilogue.push_back({PostOpKind::Gelu});
    } else if (n.kind == OpKind::LeakyRelu && n.inputs[0] == e.result) {
      e.epilogue.push_back({PostOpKind::LeakyRelu, std::get<AlphaBetaAttrs>(n.attrs).alpha});
    } else if (n.kind == OpKind::HardSigmoid && n.inputs[0] == e.result) {
      const auto& a = std::get<AlphaBetaAttrs>(n.attrs);
      e.epilogue.push_back({PostOpKind::HardSigmoid, a.alpha, a.beta});
    } else if (n.kind == OpKind::HardSwish && n.inputs[0] == e.result) {
      e.epilogue.push_back({PostOpKind::HardSwish});
    } else if (n.kind == OpKind::Sigmoid && n.inputs[0] == e.result) {
      e.epilogue.push_back({PostOpKind::Sigmoid});
    } else if (auto factor = scalarFactor(g, n, e.result)) {
      e.epilogue.push_back({PostOpKind::Scale, *factor});
    } else if (n.kind == OpKind::Clip && n.inputs[0] == e.result) {
      const auto& a = std::get<ClipAttrs>(n.attrs);
      float lo = std::isinf(a.min) ? -FLT_MAX : static_cast<float>(a.min);
      float hi = std::isinf(a.max) ? FLT_MAX : static_cast<float>(a.max);
      e.epilogue.push_back({PostOpKind::Clip, lo, hi});
    } else if (n.kind == OpKind::Add && n.inputs.size() == 2 &&
               (n.inputs[0] == e.result) != (n.inputs[1] == e.result)) {
      ValueId other = n.inputs[0] == e.result ? n.inputs[1] : n.inputs[0];
      const Value& o = g.value(other);
      if (o.type.dtype != DType::F32 || g.value(n.outputs[0]).type.shape != outShape) break;
      if (o.constant && perChannel(o.type.shape, outShape.rank(), channelAxis, channels)) {
        bool merge = !e.epilogue.empty() && e.epilogue.back().kind == PostOpKind::BiasPerColumn;
        if (!merge && !e.bias.empty()) break; // one bias vector per kernel
        if (e.bias.empty()) e.bias.assign(static_cast<size_t>(channels), 0.f);
        const float* c = floatData(o);
        for (int64_t k = 0; k < channels; ++k)
          e.bias[static_cast<size_t>(k)] += o.type.shape.numel() == 1 ? c[0] : c[k];
        if (!merge) e.epilogue.push_back({PostOpKind::BiasPerColumn});
      } else if (!o.constant && o.type.shape == outShape && e.addend < 0) {
        e.addend = l.tensorIn(other, outPhys);
        e.epilogue.push_back({PostOpKind::AddTensor});
      } else {
        break;
      }
    } else {
      break;
    }
    e.result = n.outputs[0];
    e.consumed = i + 1;
  }
}

std::string shapeText(const Shape& s) {
  return s.toString();
}

// The kernel's step: its bias into the constants, its output defined in `phys`; returns the
// nodes it consumed.
size_t addKernelStep(Lowering& l, HeavyKernel hk, int kernel, int in, int weights,
                     const EpilogueBuild& e, Phys phys) {
  int bias = e.bias.empty() ? -1 : l.addConstant(e.bias);
  int out = l.defineOutput(e.result, phys);
  rt::Step step;
  step.kind = rt::StepKind::Kernel;
  step.label = hk.label;
  step.kernel = kernel;
  // One tensor per argument slot of the kernel (runtime/kernel_args.h), -1 for a null one.
  step.tensors.assign(rt::kArgSlots, -1);
  step.tensors[rt::kArgSrc] = in;
  step.tensors[rt::kArgWei] = weights;
  step.tensors[rt::kArgDst] = out;
  step.tensors[rt::kArgBias] = bias;
  step.tensors[rt::kArgResidual] = e.addend;
  l.addStep(std::move(step), {in, weights, bias, e.addend}, {out});
  l.noteHeavy(std::move(hk));
  return e.consumed;
}

// The packed weights as a constant of the blob (their bytes, whatever their element type).
int packedConstant(Lowering& l, const codegen::PackedWeights& packed) {
  return packed.empty() ? -1 : l.addConstant(packed.data.get(), packed.bytes);
}

size_t lowerConv(Lowering& l, const std::vector<NodeId>& nodes) {
  const Graph& g = l.graph();
  const Node& n = g.node(nodes[0]);
  const auto& a = std::get<ConvAttrs>(n.attrs);
  const Value& x = g.value(n.inputs[0]);
  const Value& wv = g.value(n.inputs[1]);
  if (a.kernel.size() != 2 || x.type.dtype != DType::F32) {
    l.unsupported(n, "only 2-d f32 convolution is compiled");
    return 0;
  }
  if (!wv.constant) {
    l.unsupported(n, "the weights must be constant (initializers)");
    return 0;
  }
  const Shape& xs = x.type.shape;
  const Shape& ys = g.value(n.outputs[0]).type.shape;
  int64_t oc = wv.type.shape[0];
  EpilogueBuild e;
  e.result = n.outputs[0];
  if (n.inputs.size() > 2 && n.inputs[2] != kNoValue) {
    const Value& b = g.value(n.inputs[2]);
    if (!b.constant) {
      l.unsupported(n, "the bias must be constant");
      return 0;
    }
    e.bias.assign(floatData(b), floatData(b) + oc);
    e.epilogue.push_back({PostOpKind::BiasPerColumn});
  }
  absorbPostOps(l, nodes, 1, oc, Phys::Nhwc, e);
  int in = l.tensorIn(n.inputs[0], Phys::Nhwc);
  bool depthwise = a.group == xs[1] && a.group == oc && wv.type.shape[1] == 1;
  HeavyKernel hk;
  codegen::PackedWeights packed;
  Expected<int> kernel = -1;
  if (depthwise) {
    DepthwiseWorkload w;
    w.n = xs[0], w.c = xs[1], w.h = xs[2], w.w = xs[3], w.kh = a.kernel[0], w.kw = a.kernel[1];
    w.strideH = a.strides[0], w.strideW = a.strides[1];
    w.padTop = a.pads[0], w.padLeft = a.pads[1], w.padBottom = a.pads[2], w.padRight = a.pads[3];
    w.dilationH = a.dilations[0], w.dilationW = a.dilations[1];
    w.threads = l.options().threads;
    auto c = chooseConfigOf<DepthwiseConfig>(l, w, hk);
    if (l.module()) kernel = l.module()->addDepthwise(w, c, e.epilogue, floatData(wv), packed);
  } else {
    Conv2dWorkload w;
    w.n = xs[0], w.ic = xs[1], w.h = xs[2], w.w = xs[3], w.oc = oc;
    w.kh = a.kernel[0], w.kw = a.kernel[1], w.strideH = a.strides[0], w.strideW = a.strides[1];
    w.padTop = a.pads[0], w.padLeft = a.pads[1], w.padBottom = a.pads[2], w.padRight = a.pads[3];
    w.dilationH = a.dilations[0], w.dilationW = a.dilations[1], w.groups = a.group;
    w.threads = l.options().threads;
    w.coldWeights = l.weightsCold();
    auto c = chooseConfigOf<Conv2dConfig>(l, w, hk);
    if (l.module()) kernel = l.module()->addConv2d(w, c, e.epilogue, floatData(wv), packed);
  }
  if (!kernel) {
    l.unsupported(n, kernel.error().message());
    return 0;
  }
  hk.label = "Conv '" + n.name + "' " + shapeText(xs) + " -> " + shapeText(ys) + " k" +
             std::to_string(a.kernel[0]) + "x" + std::to_string(a.kernel[1]) + " s" +
             std::to_string(a.strides[0]) + (e.epilogue.empty() ? "" : " + ") +
             epilogueName(e.epilogue);
  return addKernelStep(l, std::move(hk), *kernel, in, packedConstant(l, packed), e, Phys::Nhwc);
}

// How a view of a rows x cols matrix is stored: its leading dimension (0, the dense default,
// when there is a single stored row) and whether it is stored transposed (cols x rows).
std::pair<int64_t, bool> storedAs(const passes::MatrixView& v, int64_t rows, int64_t cols) {
  if (v.colStride == 1) return {rows > 1 ? v.rowStride : 0, false};
  return {cols > 1 ? v.colStride : 0, true};
}

size_t lowerMatmul(Lowering& l, const std::vector<NodeId>& nodes) {
  const Graph& g = l.graph();
  const Node& n = g.node(nodes[0]);
  const Value& av = g.value(n.inputs[0]);
  const Value& bv = g.value(n.inputs[1]);
  const Shape& as = av.type.shape;
  const Shape& bs = bv.type.shape;
  const Shape& ys = g.value(n.outputs[0]).type.shape;
  if (av.type.dtype != DType::F32 || bv.type.dtype != DType::F32 || as.rank() < 2 ||
      bs.rank() < 2) {
    l.unsupported(n, "only f32 matmul with operands of rank >= 2 is compiled");
    return 0;
  }
  MatmulWorkload w;
  w.threads = l.options().threads;
  std::vector<float> scaledB;
  const float* bData = bv.constant ? floatData(bv) : nullptr;
  EpilogueBuild e;
  e.result = n.outputs[0];
  if (n.kind == OpKind::Gemm) {
    const auto& a = std::get<GemmAttrs>(n.attrs);
    w.transA = a.transA, w.transB = a.transB;
    w.m = a.transA ? as[1] : as[0], w.k = a.transA ? as[0] : as[1];
    w.n = a.transB ? bs[0] : bs[1];
    if (a.alpha != 1.f) {
      if (!bData) {
        l.unsupported(n, "alpha != 1 needs a constant B");
        return 0;
      }
      scaledB.assign(bData, bData + bs.numel());
      for (float& v : scaledB) v *= a.alpha;
      bData = scaledB.data();
    }
    if (n.inputs.size() > 2 && n.inputs[2] != kNoValue) {
      const Value& c = g.value(n.inputs[2]);
      if (c.constant && c.type.dtype == DType::F32 && perChannel(c.type.shape, 2, 1, w.n)) {
        e.bias.assign(static_cast<size_t>(w.n), 0.f);
        for (int64_t j = 0; j < w.n; ++j)
          e.bias[static_cast<size_t>(j)] = a.beta * floatData(c)[c.type.shape.numel() == 1 ? 0 : j];
        e.epilogue.push_back({PostOpKind::BiasPerColumn});
      } else if (c.constant && c.type.dtype == DType::F32) {
        // Any other broadcast of C: expanded to M x N once, at compile time.
        std::vector<float> full(static_cast<size_t>(w.m * w.n));
        Shape cs = c.type.shape;
        auto strides = Lowering::broadcastStrides(cs, cs.strides(), Shape({w.m, w.n}));
        for (int64_t i = 0; i < w.m; ++i)
          for (int64_t j = 0; j < w.n; ++j)
            full[static_cast<size_t>(i * w.n + j)] =
                a.beta * floatData(c)[i * strides[0] + j * strides[1]];
        e.addend = l.addConstant(full);
        e.epilogue.push_back({PostOpKind::AddTensor});
      } else if (a.beta == 1.f && c.type.shape == ys) {
        e.addend = l.tensorIn(n.inputs[2], Phys::Plain);
        e.epilogue.push_back({PostOpKind::AddTensor});
      } else {
        l.unsupported(n, "a non-constant C needs beta = 1 and the output's shape");
        return 0;
      }
    }
  } else {
    w.k = as[as.rank() - 1];
    w.n = bs[bs.rank() - 1];
    int64_t bBatch = bs.numel() / (w.k * w.n);
    int64_t aBatch = as.numel() / (as[as.rank() - 2] * w.k);
    if (bBatch == 1) {
      w.m = as.numel() / w.k; // batch folded into M
    } else if (aBatch == bBatch && as.rank() == bs.rank() &&
               std::equal(as.dims().begin(), as.dims().end() - 2, bs.dims().begin())) {
      w.batch = aBatch;
      w.m = as[as.rank() - 2];
      w.broadcastB = false;
    } else {
      l.unsupported(n, "MatMul with broadcast batch dimensions is not compiled yet");
      return 0;
    }
  }
  w.constantB = bData != nullptr;
  w.coldWeights = w.constantB && l.weightsCold();
  // Operands read or written in place of a Transpose (passes/operand_views.h).
  ValueId aSource = n.inputs[0], bSource = n.inputs[1];
  const passes::OperandViews& views = l.operandViews();
  if (auto it = views.a.find(nodes[0]); it != views.a.end()) {
    auto [ld, trans] = storedAs(it->second, w.m, w.k);
    w.transA = trans, w.lda = ld, w.strideA = w.batch > 1 ? it->second.batchStride : 0;
    aSource = it->second.base;
  }
  if (auto it = views.b.find(nodes[0]); it != views.b.end()) {
    auto [ld, trans] = storedAs(it->second, w.k, w.n);
    w.transB = trans, w.ldb = ld, w.strideB = w.broadcastB ? 0 : it->second.batchStride;
    bSource = it->second.base;
  }
  if (auto it = views.c.find(nodes[0]); it != views.c.end()) {
    w.ldc = w.m > 1 ? it->second.rowStride : 0;
    w.strideC = w.batch > 1 ? it->second.batchStride : 0;
    e.result = it->second.base;
  }
  if (Status s = w.check(); !s) {
    l.unsupported(n, "internal: " + s.error().message());
    return 0;
  }
  absorbPostOps(l, nodes, ys.rank() - 1, w.n, Phys::Plain, e);
  HeavyKernel hk;
  auto c = chooseConfigOf<MatmulConfig>(l, w, hk);
  codegen::PackedWeights packed;
  Expected<int> kernel = -1;
  if (l.module()) kernel = l.module()->addMatmul(w, c, e.epilogue, bData, packed);
  if (!kernel) {
    l.unsupported(n, kernel.error().message());
    return 0;
  }
  hk.label = std::string(opName(n.kind)) + " '" + n.name + "' " + std::to_string(w.batch) + "x" +
             std::to_string(w.m) + "x" + std::to_string(w.n) + "x" + std::to_string(w.k) +
             (w.constantB ? "" : " (B computed)") + (w.dense() ? "" : " strided") +
             (e.epilogue.empty() ? "" : " + ") + epilogueName(e.epilogue);
  int in = l.tensorIn(aSource, Phys::Plain);
  int weights = w.constantB ? packedConstant(l, packed) : l.tensorIn(bSource, Phys::Plain);
  return addKernelStep(l, std::move(hk), *kernel, in, weights, e, Phys::Plain);
}

} // namespace

size_t lowerAnchor(Lowering& l, const std::vector<NodeId>& nodes) {
  const Node& n = l.graph().node(nodes[0]);
  if (n.kind == OpKind::Conv) return lowerConv(l, nodes);
  return lowerMatmul(l, nodes);
}

} // namespace tunec::driver
