// Anchors: Conv (conv2d or depthwise template), Gemm and MatMul (matmul template), each with the
// epilogue the fusion plan decided (passes/fusion_plan.h), the config from the tuning database
// or the template's analytical default.
#include "codegen/attention_kernel.h"
#include "driver/light_ops.h"
#include "driver/lowering.h"
#include "tuning_db/keys.h"

#include <algorithm>
#include <functional>
#include <map>
#include <optional>

namespace tunec::driver {

namespace {

// --precision bf16's types of a matmul or convolution: its f32 A rounded to bf16 by the kernel,
// bf16 weights, f32 accumulation and C.
constexpr KernelTypes kBf16Types = {DType::F32, DType::BF16, DType::F32, DType::F32};

// The config for a workload: the best record of the database, else the analytical default.
// A cold_weights (or NCHW-input, or channel-slice) workload without records of its own takes
// the best record measured without the condition (a database tuned before it was in the key). A
// kernel left at its default while the database has records of its workload for other targets says
// so (hk). Both through the typed template interface; the database's JSON is read here, once a
// record.
Config chooseConfig(Lowering& l, const Workload& w, HeavyKernel& hk) {
  hk.tuned = false;
  const CompileOptions& options = l.options();
  const Isa isa = kernelIsa(w, options.isa, options.target);
  auto makeDefault = [&] { return defaultConfig(w, isa, options.target); };
  db::TuningDatabase* database = options.database;
  if (!database) return makeDefault();
  TemplateKind kind = templateKind(w);
  int version = templateVersion(kind);
  db::TargetInfo target = db::TargetInfo::fromTarget(options.target);
  nlohmann::json key = toJson(w);
  std::vector<nlohmann::json> keys = {key};
  // Conditions that leave the template's knobs as they are fall back, in turn, to records
  // measured without them: cold weights, an NCHW input read by the padded copy, channel slices
  // read or written in place (a database tuned before they were part of the key).
  for (const char* condition : {"cold_weights", "input_layout", "in_ld", "out_ld"})
    if (key.contains(condition)) {
      key.erase(condition);
      keys.push_back(key);
    }
  // A kernel that reads or writes activations stored as bf16 then takes the records of its form
  // with f32 activations (the same knobs, tuned before the types were stored): kBf16Types for a
  // bf16 GEMM, all f32 for a depthwise conv.
  const KernelTypes types = workloadTypes(w);
  const std::optional<KernelTypes> f32Activations =
      isBf16Gemm(types) && types != kBf16Types ? std::optional(kBf16Types)
      : isF32OnBf16Activations(types)          ? std::optional(KernelTypes{})
                                               : std::nullopt;
  if (f32Activations)
    for (size_t i = 0, count = keys.size(); i < count; ++i) {
      nlohmann::json f32Key = keys[i];
      f32Key["dtype"] = kernelTypesToJson(*f32Activations);
      keys.push_back(std::move(f32Key));
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
        if (config && configIsa(*config) == isa && validateConfig(w, *config)) {
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
  // Records of this machine that the compile's flags do not reach: the workload at another
  // thread count, or in the other precision (the report names the flag that uses them).
  auto hasRecords = [&](const nlohmann::json& variant) {
    auto records = database->recordsOf(db::workloadKey(variant));
    return records && std::any_of(records->begin(), records->end(), [&](const db::Record& r) {
             return r.status == db::MeasureStatus::Ok && r.templateVersion == version &&
                    r.target.key() == target.key();
           });
  };
  nlohmann::json variant = keys.front();
  const int64_t threads = workloadThreads(w);
  for (int64_t t = 1; t <= 256; t *= 2) {
    if (t == threads) continue;
    variant["threads"] = t;
    if (hasRecords(variant)) hk.otherThreads.insert(t);
  }
  if (kind == TemplateKind::Matmul || kind == TemplateKind::Conv2d) {
    variant = keys.front();
    variant["dtype"] = types.allF32()
                           ? kernelTypesToJson(kBf16Types)
                           : kernelTypesToJson({DType::F32, DType::F32, DType::F32, DType::F32});
    hk.otherPrecision = (types.allF32() || isBf16Gemm(types)) && hasRecords(variant);
  }
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

// The epilogue the fusion plan decided, as the kernel reads it: its post-ops, one bias vector
// (the per-channel constants summed) and one addend tensor.
struct EpilogueBuild {
  Epilogue epilogue;
  std::vector<float> bias;   ///< per output channel, when the epilogue has a bias
  int biasTensor = -1;       ///< or a computed bias vector (dynamic quantization's correction)
  int scalesTensor = -1;     ///< a computed column scale (dynamic quantization's)
  int addend = -1;           ///< tensor
  int normParams = -1;       ///< a row normalization's scale then bias (a constant)
  std::vector<float> scales; ///< per output channel, when the epilogue has a column scale
  ValueId result;            ///< the value the kernel writes
};

// A constant broadcast to `shape` (row-major), each element times `factor`.
std::vector<float> expandConstant(const Value& c, const Shape& shape, float factor) {
  std::vector<int64_t> strides =
      Lowering::broadcastStrides(c.type.shape, c.type.shape.strides(), shape);
  std::vector<float> full(static_cast<size_t>(shape.numel()));
  std::vector<int64_t> index(static_cast<size_t>(shape.rank()), 0);
  for (int64_t flat = 0; flat < shape.numel(); ++flat) {
    int64_t offset = 0;
    int64_t rest = flat;
    for (int d = shape.rank() - 1; d >= 0; --d) {
      offset += (rest % shape[d]) * strides[static_cast<size_t>(d)];
      rest /= shape[d];
    }
    full[static_cast<size_t>(flat)] = factor * floatData(c)[offset];
  }
  return full;
}

// Builds the plan's epilogue for an anchor with `channels` output channels whose output is
// stored in `outPhys`; false (after reporting) when the anchor's own bias is one the plan
// could not take.
bool buildEpilogue(Lowering& l, const passes::FusedKernel& kernel, int64_t channels, Phys outPhys,
                   EpilogueBuild& e) {
  const Graph& g = l.graph();
  const Node& anchor = g.node(kernel.anchor);
  bool ownBias = !kernel.epilogue.empty() && kernel.epilogue.front().node == kernel.anchor;
  if (anchor.inputs.size() > 2 && anchor.inputs[2] != kNoValue && !ownBias) {
    l.unsupported(anchor, anchor.kind == OpKind::Conv
                              ? "the bias must be a constant f32 vector"
                              : "a non-constant C needs beta = 1 and the output's shape");
    return false;
  }
  const Shape& outShape = g.value(anchor.outputs[0]).type.shape;
  for (const passes::EpilogueStep& step : kernel.epilogue) {
    // A Gemm's C is scaled by its beta.
    float factor = step.node == kernel.anchor && anchor.kind == OpKind::Gemm
                       ? std::get<GemmAttrs>(anchor.attrs).beta
                       : 1.f;
    if (step.op.kind == PostOpKind::BiasPerColumn && !g.value(step.operand).constant) {
      e.biasTensor = l.tensorIn(step.operand, Phys::Plain);
    } else if (readsColumnScale(step.op.kind) && !g.value(step.operand).constant) {
      e.scalesTensor = l.tensorIn(step.operand, Phys::Plain);
    } else if (step.op.kind == PostOpKind::BiasPerColumn) {
      const Value& c = g.value(step.operand);
      if (e.bias.empty()) e.bias.assign(static_cast<size_t>(channels), 0.f);
      for (int64_t k = 0; k < channels; ++k)
        e.bias[static_cast<size_t>(k)] += factor * floatData(c)[c.type.shape.numel() == 1 ? 0 : k];
    } else if (readsColumnScale(step.op.kind)) {
      const Value& c = g.value(step.operand);
      e.scales.assign(static_cast<size_t>(channels), 0.f);
      for (int64_t k = 0; k < channels; ++k)
        e.scales[static_cast<size_t>(k)] = floatData(c)[c.type.shape.numel() == 1 ? 0 : k];
    } else if (step.op.kind == PostOpKind::LayerNormRow) {
      const Node& norm = g.node(step.node);
      // Rows of the normalized tensor: a matmul's output rows, or a depthwise conv's pixels
      // (channels last, through its plain view).
      int64_t cols = kernel.plainView >= 0 ? channels : outShape[outShape.rank() - 1];
      std::vector<float> params(static_cast<size_t>(2 * cols), 0.f);
      for (size_t i = 1; i < norm.inputs.size() && i < 3; ++i)
        if (norm.inputs[i] != kNoValue)
          std::copy_n(floatData(g.value(norm.inputs[i])), cols,
                      params.begin() + static_cast<int64_t>(i - 1) * cols);
      e.normParams = l.addConstant(params);
    } else if (readsAddend(step.op.kind)) { // f32, or AddDequantizedU8's u8 tensor as stored
      const Value& c = g.value(step.operand);
      // After an NHWC view of a matmul's rows the addend is read as NHWC: the same bytes.
      bool afterView = kernel.nhwcView >= 0 && step.node > kernel.nhwcView;
      e.addend = c.constant ? l.addConstant(expandConstant(c, outShape, factor))
                            : l.tensorIn(step.operand, afterView ? Phys::Nhwc : outPhys);
    }
    if (!step.mergesIntoBias) e.epilogue.push_back(step.op);
  }
  // The last node the kernel computes (after the anchor: its epilogue, an NHWC view).
  if (size_t n = kernel.nodesInKernel(); n > 1) e.result = g.node(kernel.nodes[n - 1]).outputs[0];
  return true;
}

std::string shapeText(const Shape& s) {
  return s.toString();
}

// The kernel's step: its bias into the constants, its output defined in `phys`, and the heavy
// kernels it runs (one; attention's two matmuls).
bool addKernelStep(Lowering& l, std::vector<HeavyKernel> parts, const std::string& label,
                   int kernel, int in, int weights, const EpilogueBuild& e, Phys phys,
                   int values = -1, int out = -1, int channelScale = -1, rt::StepGuard when = {}) {
  int bias = e.biasTensor >= 0 ? e.biasTensor : e.bias.empty() ? -1 : l.addConstant(e.bias);
  int scales = e.scalesTensor >= 0 ? e.scalesTensor
               : e.scales.empty()  ? -1
                                   : l.addConstant(e.scales);
  if (out < 0) out = l.defineOutput(e.result, phys);
  rt::Step step;
  step.kind = rt::StepKind::Kernel;
  step.label = label;
  step.kernel = kernel;
  // One tensor per argument slot of the kernel (runtime/kernel_args.h), -1 for a null one.
  step.tensors.assign(rt::kArgSlots, -1);
  step.tensors[rt::kArgSrc] = in;
  step.tensors[rt::kArgWei] = weights;
  step.tensors[rt::kArgDst] = out;
  step.tensors[rt::kArgBias] = bias;
  step.tensors[rt::kArgResidual] = e.addend;
  step.tensors[rt::kArgValues] = values;
  step.tensors[rt::kArgNormParams] = e.normParams;
  step.tensors[rt::kArgChannelScale] = channelScale;
  step.tensors[rt::kArgScales] = scales;
  step.when = when;
  for (const HeavyKernel& hk : parts) {
    step.flops += workloadFlops(hk.workload);
    if (isBf16Gemm(workloadTypes(hk.workload))) step.bf16Flops += workloadFlops(hk.workload);
    if (isInt8Gemm(workloadTypes(hk.workload))) step.int8Ops += workloadFlops(hk.workload);
  }
  l.addStep(std::move(step),
            {in, weights, bias, e.addend, values, e.normParams, channelScale, scales}, {out});
  for (HeavyKernel& hk : parts) l.noteHeavy(std::move(hk));
  return true;
}

// The packed weights as a constant of the blob (their bytes, whatever their element type).
int packedConstant(Lowering& l, const codegen::PackedWeights& packed) {
  return packed.empty() ? -1 : l.addConstant(packed.data.get(), packed.bytes);
}

// The AVX2 int8 kernel takes 7-bit weights (kAvx2Int8WeightLimit: vpmaddubsw's s16 pair sums
// must not saturate). Weights beyond it are halved, rounding half to even, and the sums doubled
// in the epilogue, as oneDNN does there: one bit of the weights' precision. Returns whether.
bool halveWeightsForAvx2(std::vector<float>& weights, EpilogueBuild& e) {
  bool fits = std::all_of(weights.begin(), weights.end(), [](float v) {
    return std::abs(v) <= static_cast<float>(kAvx2Int8WeightLimit);
  });
  if (fits) return false;
  for (float& v : weights) v = std::nearbyint(v / 2.f);
  if (!e.epilogue.empty() && e.epilogue.front().kind == PostOpKind::ScalePerColumn &&
      e.scalesTensor < 0)
    for (float& s : e.scales) s *= 2.f;
  else
    e.epilogue.insert(e.epilogue.begin(), PostOp{PostOpKind::Scale, 2.f});
  return true;
}

// The label's note of a kernel on AMX's tiles (kernelIsa chose it: the target has AMX).
std::string amxNote(const HeavyKernel& hk) {
  return configIsa(hk.config) == Isa::Amx ? " on AMX tiles" : "";
}

// The label's note of a kernel whose activations are stored as bf16 (plan_bf16_activations.cpp):
// which of them.
std::string bf16StorageNote(const KernelTypes& t) {
  const bool in = t.src == DType::BF16, out = t.dst == DType::BF16;
  return in && out ? " (bf16 in and out)" : in ? " (bf16 in)" : out ? " (bf16 out)" : "";
}

// The label's note of an int8 kernel, counted in the compile statistics.
std::string int8Note(Lowering& l, bool halved) {
  l.noteInt8Kernel(halved);
  return halved ? " in int8 (weights halved to 7 bits)" : " in int8";
}

// A Conv node's conv2d workload as the graph gives it: shapes, strides, pads, dilations and
// groups, f32 types (lowerConv adds the layouts, views and types it decides).
Conv2dWorkload convShape(const Lowering& l, const Node& n) {
  const Graph& g = l.graph();
  const auto& a = std::get<ConvAttrs>(n.attrs);
  const Shape& xs = g.value(n.inputs[0]).type.shape;
  Conv2dWorkload w;
  w.n = xs[0], w.ic = xs[1], w.h = xs[2], w.w = xs[3], w.oc = g.value(n.inputs[1]).type.shape[0];
  w.kh = a.kernel[0], w.kw = a.kernel[1], w.strideH = a.strides[0], w.strideW = a.strides[1];
  w.padTop = a.pads[0], w.padLeft = a.pads[1], w.padBottom = a.pads[2], w.padRight = a.pads[3];
  w.dilationH = a.dilations[0], w.dilationW = a.dilations[1], w.groups = a.group;
  w.threads = l.options().threads;
  return w;
}

// The epilogue ends with the next int8 layer's QuantizeLinear: the kernel writes u8.
bool requantizes(const passes::FusedKernel& kernel) {
  return !kernel.epilogue.empty() && kernel.epilogue.back().op.kind == PostOpKind::QuantizeU8;
}

// --precision bf16's decision for a conv2d anchor of f32 shape `w` (convShape): bf16 unless
// its channels do not come in pairs (an RGB image), a channel scale is fused, it reads its NCHW
// input, it is int8 or requantizes, or the target's vdpbf16ps is slower than its FMA there
// (`slower`: bf16Pays says no).
bool convRunsBf16(const Lowering& l, const passes::FusedKernel& kernel, const Conv2dWorkload& w,
                  bool nchwInput, bool& slower) {
  const Node& n = l.graph().node(kernel.anchor);
  Conv2dWorkload inBf16 = w;
  inBf16.types = kBf16Types;
  const bool form = l.options().precision == Precision::Bf16 && n.kind == OpKind::Conv &&
                    kernel.templ == TemplateKind::Conv2d && !requantizes(kernel) &&
                    w.icPerGroup() % 2 == 0 && kernel.prologue < 0 && !nchwInput;
  slower = form && !bf16Pays(inBf16, l.options().target);
  return form && !slower;
}

// --precision bf16's decision for a depthwise anchor, which has no bf16 form: its f32 kernel
// reads and writes activations stored as bf16 between bf16 kernels (plan_bf16_activations.cpp),
// unless it is int8, its epilogue normalizes rows (an f32 output) or a plain view follows it.
bool depthwiseTakesBf16(const Lowering& l, const passes::FusedKernel& kernel) {
  const Node& n = l.graph().node(kernel.anchor);
  return l.options().precision == Precision::Bf16 && n.kind == OpKind::Conv &&
         kernel.templ == TemplateKind::Depthwise && kernel.plainView < 0 && !requantizes(kernel) &&
         std::none_of(
             kernel.epilogue.begin(), kernel.epilogue.end(),
             [](const passes::EpilogueStep& s) { return s.op.kind == PostOpKind::LayerNormRow; });
}

bool lowerConv(Lowering& l, const passes::FusedKernel& kernel) {
  const Graph& g = l.graph();
  const Node& n = g.node(kernel.anchor);
  const auto& a = std::get<ConvAttrs>(n.attrs);
  const Value& x = g.value(n.inputs[0]);
  const Value& wv = g.value(n.inputs[1]);
  // An IntegerConv (passes/lower_quantized_layers.cpp): u8 input, constant s8 weights, which the
  // compiler passes to the packer as integer floats.
  const bool integer = n.kind == OpKind::IntegerConv;
  if (a.kernel.size() != 2 || x.type.dtype != (integer ? DType::U8 : DType::F32)) {
    l.unsupported(n, "only 2-d f32 and u8 x s8 convolutions are compiled");
    return false;
  }
  if (!wv.constant) {
    l.unsupported(n, "the weights must be constant (initializers)");
    return false;
  }
  std::vector<float> integerWeights;
  if (integer) {
    const auto* q = wv.constant->dataAs<int8_t>();
    integerWeights.assign(q, q + wv.constant->numel());
  }
  const float* weights = integer ? integerWeights.data() : floatData(wv);
  const Shape& xs = x.type.shape;
  const Shape& ys = g.value(n.outputs[0]).type.shape;
  int64_t oc = wv.type.shape[0];
  bool bf16Slower = false; // --precision bf16 keeps this conv fp32 (bf16Pays)
  EpilogueBuild e;
  e.result = n.outputs[0];
  if (!buildEpilogue(l, kernel, oc, Phys::Nhwc, e)) return false;
  // With a channel-scale prologue the kernel reads the activation the Mul scaled, and the scale.
  bool prologue = kernel.prologue >= 0;
  // A conv2d anchor without padding or prologue reads a channel range of a wider activation in
  // place, and writes its result into its part of a Concat when the channel views say so.
  bool unpadded = std::all_of(a.pads.begin(), a.pads.end(), [](int64_t p) { return p == 0; });
  bool strided = kernel.templ == TemplateKind::Conv2d && !prologue && unpadded;
  int64_t inLd = 0, outLd = 0;
  // A plain input that only this padded conv2d reads (the model's image, or its quantized u8
  // copy) is reordered by the kernel's own padded copy: one pass over it instead of a reorder
  // step and the copy.
  bool nchwInput = kernel.templ == TemplateKind::Conv2d && !prologue && !unpadded &&
                   xs.rank() == 4 && l.producedPhys(n.inputs[0]) == Phys::Plain &&
                   l.uses(n.inputs[0]) == 1;
  Phys inPhys = Phys::Nhwc;
  int in = nchwInput ? l.tensorAny(n.inputs[0], inPhys)
           : strided ? l.tensorStrided(n.inputs[0], inLd)
                     : l.tensorIn(prologue ? kernel.prologueInput : n.inputs[0], Phys::Nhwc);
  nchwInput = nchwInput && inPhys == Phys::Plain;
  int out = -1;
  if (kernel.templ == TemplateKind::Conv2d && l.channelViews().writtenInPlace.count(e.result))
    out = l.channelSlot(e.result, outLd);
  int scale = prologue ? l.tensorIn(kernel.channelScale, Phys::Plain) : -1;
  HeavyKernel hk;
  codegen::PackedWeights packed;
  Expected<int> code = -1;
  std::string int8; // the label's int8 note
  // An int8 kernel's types: a requantizing epilogue (the next int8 layer's QuantizeLinear)
  // writes a u8 output.
  const bool u8Out = requantizes(kernel);
  const KernelTypes int8Types{DType::U8, DType::I8, DType::I32, u8Out ? DType::U8 : DType::F32};
  if (kernel.templ == TemplateKind::Depthwise) {
    DepthwiseWorkload w;
    w.n = xs[0], w.c = xs[1], w.h = xs[2], w.w = xs[3], w.kh = a.kernel[0], w.kw = a.kernel[1];
    w.strideH = a.strides[0], w.strideW = a.strides[1];
    w.padTop = a.pads[0], w.padLeft = a.pads[1], w.padBottom = a.pads[2], w.padRight = a.pads[3];
    w.dilationH = a.dilations[0], w.dilationW = a.dilations[1];
    w.threads = l.options().threads;
    if (integer) {
      w.types = int8Types, w.aZeroPoint = a.padValue;
      int8 = int8Note(l, false); // exact in f32 whatever the weights' bits
    } else if (depthwiseTakesBf16(l, kernel)) {
      // f32 arithmetic; its input and output bf16 where bf16 kernels write and read them.
      w.types = {l.storedType(n.inputs[0]), DType::F32, DType::F32, storeResult(l, kernel)};
    }
    auto c = chooseConfigOf<DepthwiseConfig>(l, w, hk);
    if (l.module()) code = l.module()->addDepthwise(w, c, e.epilogue, weights, packed);
  } else {
    Conv2dWorkload w = convShape(l, n);
    w.coldWeights = l.weightsCold();
    w.channelScale = prologue;
    w.inLd = inLd;
    w.outLd = outLd;
    w.nchwInput = nchwInput;
    // The conv's types, decided once: int8; f32 with a u8 out (its epilogue quantizes for the
    // next int8 layer); or, with --precision bf16 (convRunsBf16), bf16 weights and its input
    // and output f32 or, between bf16 kernels, bf16 as stored (plan_bf16_activations.cpp).
    if (integer)
      w.types = int8Types, w.aZeroPoint = a.padValue;
    else if (u8Out)
      w.types = {DType::F32, DType::F32, DType::F32, DType::U8};
    else if (convRunsBf16(l, kernel, w, nchwInput, bf16Slower))
      w.types = {l.storedType(n.inputs[0]), DType::BF16, DType::F32, storeResult(l, kernel)};
    hk.bf16Slower = bf16Slower;
    auto c = chooseConfigOf<Conv2dConfig>(l, w, hk);
    if (integer) int8 = int8Note(l, c.isa == Isa::Avx2 && halveWeightsForAvx2(integerWeights, e));
    if (l.module()) code = l.module()->addConv2d(w, c, e.epilogue, weights, packed);
  }
  if (!code) {
    l.unsupported(n, code.error().message());
    return false;
  }
  hk.label = "Conv '" + n.name + "' " + shapeText(xs) + " -> " + shapeText(ys) + " k" +
             std::to_string(a.kernel[0]) + "x" + std::to_string(a.kernel[1]) + " s" +
             std::to_string(a.strides[0]) + (prologue ? " (input channel-scaled)" : "") +
             (e.epilogue.empty() ? "" : " + ") + epilogueName(e.epilogue) +
             (nchwInput ? " (reads its input NCHW)" : "") +
             (inLd ? " (reads channels in place)" : "") +
             (outLd ? " (writes its part of the Concat in place)" : "") +
             (isBf16Gemm(workloadTypes(hk.workload)) ? " in bf16"
              : bf16Slower                           ? kVectorBf16SlowerNote
                                                     : "") +
             int8 + amxNote(hk) + bf16StorageNote(workloadTypes(hk.workload));
  std::string label = hk.label;
  // Through its plain [N, H, W, C] view (and the LayerNorm after it) the result's plain layout
  // is the conv's NHWC bytes.
  return addKernelStep(l, {std::move(hk)}, label, *code, in, packedConstant(l, packed), e,
                       kernel.plainView >= 0 ? Phys::Plain : Phys::Nhwc, -1, out, scale);
}

// How a view of a rows x cols matrix is stored: its leading dimension (0, the dense default,
// when there is a single stored row) and whether it is stored transposed (cols x rows).
std::pair<int64_t, bool> storedAs(const passes::MatrixView& v, int64_t rows, int64_t cols) {
  if (v.colStride == 1) return {rows > 1 ? v.rowStride : 0, false};
  return {cols > 1 ? v.colStride : 0, true};
}

// A MatMul or Gemm node as a matmul workload: shapes, transposes, the batch (folded into M when
// B is one matrix), Gemm's alpha folded into a constant B, and the operands read or written in
// place of a Transpose (passes/operand_views.h).
struct MatmulOperands {
  MatmulWorkload w;
  ValueId aSource, bSource, result;
  const float* bData = nullptr; ///< constant B, alpha applied
  std::vector<float> scaledB;   ///< storage of a B made here: scaled by alpha, or s8 as floats
  int32_t mExtent = -1;         ///< M is this extent of the run (w.m its bound); -1: static
  std::string mRows;            ///< that extent ("batch*sequence"), for the label
  int64_t mMin = 0;             ///< its smallest value within the symbols' bounds
};

// A symbolic A: its rows (every dimension but the last, folded into M) are an extent of the run,
// the rest static. The one form the matmul template runs at a run-time M: constant 2-d B, a
// dense A read where it lies, no batch, no split of C.
bool describeRunTimeM(Lowering& l, NodeId id, MatmulOperands& mo,
                      const std::function<void(const std::string&)>& unsupported) {
  const Graph& g = l.graph();
  const Node& n = g.node(id);
  const Shape& as = g.value(n.inputs[0]).type.shape;
  const Shape& bs = g.value(n.inputs[1]).type.shape;
  if (!bs.isStatic() || !mo.w.constantB || mo.w.batch != 1 || !as.dim(as.rank() - 1).isStatic() ||
      (n.kind == OpKind::Gemm && std::get<GemmAttrs>(n.attrs).transA) ||
      l.operandViews().a.count(id) || l.operandViews().c.count(id)) {
    unsupported("a symbolic shape (A " + as.toString() + " times B " + bs.toString() +
                ") runs only as rows of a dense A times constant weights yet");
    return false;
  }
  DimExpr rows(1);
  for (int d = 0; d + 1 < as.rank(); ++d) rows = rows * as.dim(d).expr;
  mo.mExtent = l.extentIndex(rows);
  mo.mRows = rows.toString();
  mo.mMin = 1;
  for (int d = 0; d + 1 < as.rank(); ++d) mo.mMin *= as.dim(d).min;
  return true;
}

// `report`: an anchor the template cannot run is reported (lowering); else only refused (the
// bf16 activation plan asking ahead).
bool describeMatmul(Lowering& l, NodeId id, MatmulOperands& mo, bool report = true) {
  const Graph& g = l.graph();
  auto unsupported = [&](const Node& n, const std::string& why) {
    if (report) l.unsupported(n, why);
  };
  const Node& n = g.node(id);
  const Value& av = g.value(n.inputs[0]);
  const Value& bv = g.value(n.inputs[1]);
  const Shape& as = av.type.shape;
  const Shape& bs = bv.type.shape;
  // An IntegerMatMul (passes/lower_quantized_layers.cpp): u8 A times constant s8 weights, which
  // the compiler passes to the packer as integer floats.
  const bool integer = n.kind == OpKind::IntegerMatMul;
  if (integer && (!bv.constant || bs.rank() != 2 || as.rank() < 2)) {
    unsupported(n, "an int8 matmul needs constant 2-d s8 weights and an A of rank >= 2");
    return false;
  }
  if (!integer && (av.type.dtype != DType::F32 || bv.type.dtype != DType::F32 || as.rank() < 2 ||
                   bs.rank() < 2)) {
    unsupported(n, "only f32 matmul with operands of rank >= 2 is compiled");
    return false;
  }
  MatmulWorkload& w = mo.w;
  w.threads = l.options().threads;
  if (integer) {
    const auto* q = bv.constant->dataAs<int8_t>();
    mo.scaledB.assign(q, q + bs.numel());
    mo.bData = mo.scaledB.data();
    w.types = {DType::U8, DType::I8, DType::I32, DType::F32};
  } else {
    mo.bData = bv.constant ? floatData(bv) : nullptr;
  }
  mo.result = n.outputs[0];
  if (n.kind == OpKind::Gemm) {
    const auto& a = std::get<GemmAttrs>(n.attrs);
    w.transA = a.transA, w.transB = a.transB;
    w.m = a.transA ? as[1] : as[0], w.k = a.transA ? as[0] : as[1];
    w.n = a.transB ? bs[0] : bs[1];
    if (a.alpha != 1.f) {
      if (!mo.bData) {
        unsupported(n, "alpha != 1 needs a constant B");
        return false;
      }
      mo.scaledB.assign(mo.bData, mo.bData + bs.numel());
      for (float& v : mo.scaledB) v *= a.alpha;
      mo.bData = mo.scaledB.data();
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
      unsupported(n, "MatMul with broadcast batch dimensions is not compiled yet");
      return false;
    }
  }
  w.constantB = mo.bData != nullptr;
  w.coldWeights = w.constantB && l.weightsCold();
  // --precision bf16: weights packed to bf16, A and C f32 (A rounded per block by the kernel)
  // or, between bf16 kernels, bf16 as stored (plan_bf16_activations.cpp), where the target's
  // bf16 pays (bf16Pays: AMX, or a vdpbf16ps that beats the FMA).
  if (!integer && l.options().precision == Precision::Bf16 && w.constantB) {
    MatmulWorkload inBf16 = w;
    inBf16.types = kBf16Types;
    if (bf16Pays(inBf16, l.options().target))
      w.types = {l.storedType(n.inputs[0]), DType::BF16, DType::F32, DType::F32};
  }
  mo.aSource = n.inputs[0], mo.bSource = n.inputs[1];
  const passes::OperandViews& views = l.operandViews();
  if (auto it = views.a.find(id); it != views.a.end()) {
    auto [ld, trans] = storedAs(it->second, w.m, w.k);
    w.transA = trans, w.lda = ld, w.strideA = w.batch > 1 ? it->second.batchStride : 0;
    mo.aSource = it->second.base;
  }
  if (auto it = views.b.find(id); it != views.b.end()) {
    auto [ld, trans] = storedAs(it->second, w.k, w.n);
    w.transB = trans, w.ldb = ld, w.strideB = w.broadcastB ? 0 : it->second.batchStride;
    mo.bSource = it->second.base;
  }
  if (auto it = views.c.find(id); it != views.c.end()) {
    w.ldc = w.m > 1 ? it->second.rowStride : 0;
    w.strideC = w.batch > 1 ? it->second.batchStride : 0;
    mo.result = it->second.base;
  }
  if (Status s = w.check(); !s) {
    unsupported(n, "internal: " + s.error().message());
    return false;
  }
  if (!av.type.shape.isStatic() || !bv.type.shape.isStatic() ||
      !g.value(n.outputs[0]).type.shape.isStatic())
    return describeRunTimeM(l, id, mo, [&](const std::string& why) { unsupported(n, why); });
  return true;
}

std::string matmulDims(const MatmulWorkload& w) {
  return std::to_string(w.batch) + "x" + std::to_string(w.m) + "x" + std::to_string(w.n) + "x" +
         std::to_string(w.k);
}

// The size buckets of a run-time M from `lo` to its bound `hi`: cut at the powers of two from 16
// up and halfway between them (16, 24, 32, 48, 64, 96, ...: a bucket's config is chosen for its
// largest M, and an M just past an edge runs within 1.5x of it); one bucket below 16 (DietCode's
// idea: tune a few sizes, serve all).
std::vector<std::pair<int64_t, int64_t>> mBuckets(int64_t lo, int64_t hi,
                                                  const std::vector<int64_t>* edges = nullptr) {
  std::vector<std::pair<int64_t, int64_t>> out;
  int64_t from = lo;
  if (edges) { // --buckets: the user's edges
    for (int64_t edge : *edges) {
      if (edge < from || edge >= hi) continue;
      out.push_back({from, edge});
      from = edge + 1;
    }
    out.push_back({from, hi});
    return out;
  }
  for (int64_t octave = 16; octave < hi; octave *= 2)
    for (int64_t edge : {octave, octave + octave / 2}) {
      if (edge < from || edge >= hi) continue;
      out.push_back({from, edge});
      from = edge + 1;
    }
  out.push_back({from, hi});
  return out;
}

// A matmul of run-time M: a variant per size bucket, each with the config tuned (or defaulted)
// for the bucket's largest M, a static workload whose records a static compile of that size
// shares (and the reverse), run when the run's M falls in its bucket. Adjacent buckets with one
// config are one variant; variants that pack the weights alike share the packed copy.
bool lowerMatmulBuckets(Lowering& l, const passes::FusedKernel& kernel, MatmulOperands& mo,
                        EpilogueBuild& e) {
  const Node& n = l.graph().node(kernel.anchor);
  const MatmulWorkload& w = mo.w;
  struct Variant {
    int64_t lo, hi;
    HeavyKernel hk;
    MatmulConfig c;
  };
  auto rowsLabel = [&](int64_t lo, int64_t hi) {
    return std::string(opName(n.kind)) + " '" + n.name + "' 1x(" + mo.mRows + " in " +
           std::to_string(lo) + ".." + std::to_string(hi) + ")x" + std::to_string(w.n) + "x" +
           std::to_string(w.k) + (e.epilogue.empty() ? "" : " + ") + epilogueName(e.epilogue) +
           (isBf16Gemm(w.types) ? " in bf16" : "");
  };
  std::vector<Variant> variants;
  std::vector<std::pair<int64_t, int64_t>> servedBy; // of each merged bucket: its own range
  std::vector<HeavyKernel> merged;                   // (tuned and reported per bucket)
  // --buckets of the symbol that is M (the rows of one sequence, a batch of 1).
  auto given = l.options().buckets.find(mo.mRows);
  for (auto [lo, hi] :
       mBuckets(mo.mMin, w.m, given == l.options().buckets.end() ? nullptr : &given->second)) {
    MatmulWorkload bucket = w;
    bucket.m = hi;
    HeavyKernel hk;
    MatmulConfig c = chooseConfigOf<MatmulConfig>(l, bucket, hk);
    hk.bucketExtent = mo.mRows;
    hk.bucketLo = lo;
    hk.bucketHi = hi;
    if (!variants.empty() && variants.back().c == c) { // the larger bucket's kernel serves both
      Variant& v = variants.back();
      servedBy.push_back({v.lo, v.hi});
      merged.push_back(std::move(v.hk));
      v.hi = hi;
      v.hk = std::move(hk);
      continue;
    }
    variants.push_back({lo, hi, std::move(hk), c});
  }
  // A bucket merged into a larger one keeps its own task and report line.
  for (size_t i = 0; i < merged.size(); ++i) {
    auto [lo, hi] = servedBy[i];
    const Variant* v = nullptr;
    for (const Variant& candidate : variants)
      if (candidate.lo <= lo && hi <= candidate.hi) v = &candidate;
    TUNEC_ASSERT(v, "a merged bucket lies in no variant");
    merged[i].label = rowsLabel(merged[i].bucketLo, merged[i].bucketHi) + " (runs the " +
                      std::to_string(v->lo) + ".." + std::to_string(v->hi) +
                      " variant: the same config)";
    l.noteHeavy(std::move(merged[i]));
  }
  // Every variant reads the same operands and writes the same output.
  if (e.biasTensor < 0 && !e.bias.empty()) e.biasTensor = l.addConstant(e.bias);
  if (e.scalesTensor < 0 && !e.scales.empty()) e.scalesTensor = l.addConstant(e.scales);
  int in = l.tensorIn(mo.aSource, Phys::Plain);
  int out = l.defineOutput(e.result, Phys::Plain);
  std::map<std::pair<int64_t, int64_t>, int> packedBy; // (nr, k group) -> the packed constant
  for (Variant& v : variants) {
    MatmulWorkload bound = w;
    bound.m = v.hi;
    codegen::PackedWeights packed;
    Expected<int> code = -1;
    if (l.module())
      code = l.module()->addMatmul(bound, v.c, e.epilogue, mo.bData, packed,
                                   RunTimeRows{mo.mExtent, v.lo});
    if (!code) {
      l.unsupported(n, code.error().message());
      return false;
    }
    int weights = -1;
    if (!w.constantB) {
      weights = l.tensorIn(mo.bSource, Phys::Plain);
    } else {
      auto key = std::pair{v.c.nr, kGroup(v.c.isa, w.types)};
      auto it = packedBy.find(key);
      weights = it != packedBy.end() ? it->second : (packedBy[key] = packedConstant(l, packed));
    }
    // "1x(batch*sequence in 17..32)x3072x768".
    v.hk.label = rowsLabel(v.lo, v.hi) + amxNote(v.hk) + bf16StorageNote(w.types);
    std::string label = v.hk.label;
    if (!addKernelStep(l, {std::move(v.hk)}, label, *code, in, weights, e, Phys::Plain, -1, out, -1,
                       rt::StepGuard{mo.mExtent, v.lo, v.hi}))
      return false;
  }
  return true;
}

bool lowerMatmul(Lowering& l, const passes::FusedKernel& kernel) {
  const Node& n = l.graph().node(kernel.anchor);
  MatmulOperands mo;
  if (!describeMatmul(l, kernel.anchor, mo)) return false;
  const MatmulWorkload& w = mo.w;
  int out = -1;
  if (kernel.split >= 0 && mo.mExtent >= 0) {
    l.unsupported(n, "a split of C at a run-time M is not compiled yet");
    return false;
  }
  if (kernel.split >= 0) {
    // Each part of the split is a dense tensor; the parts lie one after the other in one.
    const Node& split = l.graph().node(kernel.split);
    mo.w.splitN = std::get<SplitAttrs>(split.attrs).sizes.front();
    if (Status s = w.check(); !s) {
      l.unsupported(n, "internal: the fusion plan's split: " + s.error().message());
      return false;
    }
    out = l.addArenaTensor(w.m * w.n * static_cast<int64_t>(w.types.dstBytes()));
    for (size_t i = 0; i < split.outputs.size(); ++i)
      l.definePart(split.outputs[i], out,
                   static_cast<int64_t>(i) * w.m * w.splitN *
                       static_cast<int64_t>(w.types.dstBytes()));
  }
  EpilogueBuild e;
  e.result = mo.result;
  if (!buildEpilogue(l, kernel, w.n, Phys::Plain, e)) return false;
  // A requantizing epilogue (the next int8 layer's QuantizeLinear, fusion_plan) writes a u8 C.
  if (requantizes(kernel)) mo.w.types.dst = DType::U8;
  // A bf16 GEMM's C is bf16 where only bf16 kernels read it (plan_bf16_activations.cpp).
  if (isBf16Gemm(w.types)) mo.w.types.dst = storeResult(l, kernel);
  if (mo.mExtent >= 0 && !isInt8Gemm(w.types)) return lowerMatmulBuckets(l, kernel, mo, e);
  HeavyKernel hk;
  auto c = chooseConfigOf<MatmulConfig>(l, w, hk);
  std::string int8; // the label's int8 note
  if (isInt8Gemm(w.types))
    int8 = int8Note(l, c.isa == Isa::Avx2 && halveWeightsForAvx2(mo.scaledB, e));
  codegen::PackedWeights packed;
  Expected<int> code = -1;
  if (l.module())
    code =
        l.module()->addMatmul(w, c, e.epilogue, mo.bData, packed, RunTimeRows{mo.mExtent, mo.mMin});
  if (!code) {
    l.unsupported(n, code.error().message());
    return false;
  }
  // A run-time M reads "1x(batch*sequence<=1024)x32x16".
  hk.label = std::string(opName(n.kind)) + " '" + n.name + "' " +
             (mo.mExtent >= 0 ? "1x(" + mo.mRows + "<=" + std::to_string(w.m) + ")x" +
                                    std::to_string(w.n) + "x" + std::to_string(w.k)
                              : matmulDims(w)) +
             (w.constantB ? "" : " (B computed)") + (w.dense() ? "" : " strided") +
             (e.epilogue.empty() ? "" : " + ") + epilogueName(e.epilogue);
  int in = l.tensorIn(mo.aSource, Phys::Plain);
  int weights = w.constantB ? packedConstant(l, packed) : l.tensorIn(mo.bSource, Phys::Plain);
  if (w.splitN) hk.label += " split " + std::to_string(w.n / w.splitN) + " ways";
  if (isBf16Gemm(w.types)) hk.label += " in bf16";
  hk.label += int8 + amxNote(hk) + bf16StorageNote(w.types);
  std::string label = hk.label;
  // Read through an NHWC view, the matmul's rows are the NHWC layout of the result.
  Phys phys = kernel.nhwcView >= 0 ? Phys::Nhwc : Phys::Plain;
  return addKernelStep(l, {std::move(hk)}, label, *code, in, weights, e, phys, -1, out);
}

// Attention (the plan's Q K anchor, its epilogue, the Softmax and the P V MatMul) as one fused
// kernel; each matmul keeps its workload and config (tuned and reported as a matmul).
bool lowerAttention(Lowering& l, const passes::FusedKernel& kernel) {
  const Graph& g = l.graph();
  const Node& n = g.node(kernel.anchor);
  MatmulOperands qk, av;
  if (!describeMatmul(l, kernel.anchor, qk) || !describeMatmul(l, kernel.values, av)) return false;
  // One head: the batch was folded into M; as one batch element of its own B it is the same.
  for (MatmulWorkload* w : {&qk.w, &av.w})
    if (w->batch == 1) w->broadcastB = false;
  // --precision bf16: Q rounded per row block times K packed to bf16, P rounded by the softmax
  // times V packed to bf16 (P's k-pairs need an even key count; else the attention stays f32),
  // where the target's bf16 pays: AMX's tiles, or a vdpbf16ps faster than its FMA (bf16Pays).
  if (l.options().precision == Precision::Bf16 && qk.w.n % 2 == 0) {
    MatmulWorkload qkBf16 = qk.w;
    qkBf16.types = kBf16Types;
    if (bf16Pays(qkBf16, l.options().target)) {
      qk.w.types = kBf16Types;
      av.w.types = {DType::BF16, DType::BF16, DType::F32, DType::F32}; // P already bf16
    }
  }
  EpilogueBuild e;
  if (!buildEpilogue(l, kernel, qk.w.n, Phys::Plain, e)) return false;
  e.result = av.result; // the scores' epilogue is inside; the kernel writes O
  HeavyKernel hq, hv;
  AttentionParts parts;
  parts.qk = qk.w, parts.av = av.w, parts.qkEpilogue = e.epilogue;
  parts.qkConfig = chooseConfigOf<MatmulConfig>(l, qk.w, hq);
  parts.avConfig = chooseConfigOf<MatmulConfig>(l, av.w, hv);
  if (Status s = checkAttention(parts); !s) {
    l.unsupported(n, "internal: the fusion plan's attention: " + s.error().message());
    return false;
  }
  Expected<int> code = -1;
  if (l.module()) code = l.module()->addAttention(parts);
  if (!code) {
    l.unsupported(n, code.error().message());
    return false;
  }
  std::string label = "Attention '" + n.name + "' " + std::to_string(qk.w.batch) + " heads, " +
                      std::to_string(qk.w.m) + " queries x " + std::to_string(qk.w.n) + " keys x " +
                      std::to_string(qk.w.k) + (e.epilogue.empty() ? "" : " + ") +
                      epilogueName(e.epilogue) + " + softmax x V " + std::to_string(av.w.n) +
                      (isBf16Gemm(av.w.types) ? " in bf16" : "") + amxNote(hq);
  hq.label = label + ": scores, MatMul " + matmulDims(qk.w);
  hv.label = label + ": values, MatMul '" + g.node(kernel.values).name + "' " + matmulDims(av.w);
  int q = l.tensorIn(qk.aSource, Phys::Plain), k = l.tensorIn(qk.bSource, Phys::Plain),
      v = l.tensorIn(av.bSource, Phys::Plain);
  return addKernelStep(l, {std::move(hq), std::move(hv)}, label, *code, q, k, e, Phys::Plain, v);
}

} // namespace

bool anchorRunsBf16(Lowering& l, const passes::FusedKernel& kernel) {
  const Graph& g = l.graph();
  const Node& n = g.node(kernel.anchor);
  if (kernel.values >= 0 || requantizes(kernel)) return false; // attention packs f32 operands
  if (kernel.templ == TemplateKind::Matmul) {
    MatmulOperands mo;
    return describeMatmul(l, kernel.anchor, mo, false) && isBf16Gemm(mo.w.types);
  }
  const Value& x = g.value(n.inputs[0]);
  bool slower = false;
  if (n.kind != OpKind::Conv || std::get<ConvAttrs>(n.attrs).kernel.size() != 2 ||
      x.type.shape.rank() != 4 || x.type.dtype != DType::F32 || !g.value(n.inputs[1]).constant)
    return false;
  if (kernel.templ == TemplateKind::Depthwise) return depthwiseTakesBf16(l, kernel);
  return convRunsBf16(l, kernel, convShape(l, n), false, slower);
}

bool lowerAnchor(Lowering& l, const passes::FusedKernel& kernel) {
  // A symbolic shape reaches only the kernels that read their extents at run time.
  const Node& anchor = l.graph().node(kernel.anchor);
  bool symbolic = false;
  for (ValueId v : anchor.inputs)
    symbolic = symbolic || (v != kNoValue && !l.graph().value(v).type.shape.isStatic());
  if (symbolic && kernel.templ != TemplateKind::Matmul) {
    l.unsupported(anchor, "a convolution of symbolic shape is not compiled yet");
    return false;
  }
  // The attention, or a matmul the template cannot run at a run-time M (computed operands):
  // node by node over the run's extents.
  if (symbolic && anchor.kind == OpKind::MatMul) {
    MatmulOperands mo;
    if (kernel.values >= 0 || !describeMatmul(l, kernel.anchor, mo, false))
      return lowerRunTimeKernelNodes(l, kernel);
  }
  if (kernel.values >= 0) return lowerAttention(l, kernel);
  if (kernel.templ == TemplateKind::Matmul) return lowerMatmul(l, kernel);
  return lowerConv(l, kernel);
}

} // namespace tunec::driver
