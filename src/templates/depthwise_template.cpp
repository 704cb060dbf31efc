// Depthwise template: JSON forms, validation, default and knob space.
#include "templates/depthwise_template.h"

#include <algorithm>

namespace tunec {

Status DepthwiseWorkload::check() const {
  if (isInt8Gemm(types)) {
    if (kh * kw * 255 * 128 >= (1 << 24))
      return makeError("int8 depthwise workload: a ", kh, "x", kw,
                       " window's sums may leave f32's exact integers");
    if (aZeroPoint < 0 || aZeroPoint > 255)
      return makeError("int8 depthwise workload: a_zero_point=", aZeroPoint, " is not a u8");
  } else {
    if (!isF32OnBf16Activations(types))
      TUNEC_TRY(checkKernelTypes(types, "depthwise",
                                 "f32 (its input and output f32 or bf16) or u8 x s8"));
    if (aZeroPoint) return makeError("depthwise workload: a_zero_point is for a u8 input");
  }
  if (n < 1 || c < 1 || h < 1 || w < 1 || kh < 1 || kw < 1)
    return makeError("depthwise workload needs positive sizes");
  if (strideH < 1 || strideW < 1 || dilationH < 1 || dilationW < 1)
    return makeError("depthwise workload needs positive strides and dilations");
  if (padTop < 0 || padLeft < 0 || padBottom < 0 || padRight < 0)
    return makeError("depthwise workload needs non-negative pads");
  if (oh() < 1 || ow() < 1)
    return makeError("depthwise workload has an empty output: its dilated kernel (",
                     (kh - 1) * dilationH + 1, "x", (kw - 1) * dilationW + 1,
                     ") is larger than the padded input (", h + padTop + padBottom, "x",
                     w + padLeft + padRight, ")");
  if (threads < 1) return makeError("depthwise workload needs threads >= 1");
  return {};
}

nlohmann::json DepthwiseWorkload::toJson() const {
  nlohmann::json j = {{"template", "depthwise"},
                      {"dtype", kernelTypesToJson(types)},
                      {"layout", "nhwc"},
                      {"n", n},
                      {"c", c},
                      {"h", h},
                      {"w", w},
                      {"kh", kh},
                      {"kw", kw},
                      {"stride", {strideH, strideW}},
                      {"pads", {padTop, padLeft, padBottom, padRight}},
                      {"dilation", {dilationH, dilationW}},
                      {"threads", threads}};
  if (aZeroPoint) j["a_zero_point"] = aZeroPoint;
  return j;
}

Expected<DepthwiseWorkload> DepthwiseWorkload::fromJson(const nlohmann::json& j) {
  DepthwiseWorkload w;
  std::string error, tmpl;
  std::vector<int64_t> stride, pads, dilation;
  if (!readField(j, "template", tmpl, error) || tmpl != "depthwise")
    return makeError("not a depthwise workload");
  TUNEC_TRY(readKernelTypes(j, "depthwise", w.types));
  if (!readField(j, "n", w.n, error) || !readField(j, "c", w.c, error) ||
      !readField(j, "h", w.h, error) || !readField(j, "w", w.w, error) ||
      !readField(j, "kh", w.kh, error) || !readField(j, "kw", w.kw, error) ||
      !readField(j, "stride", stride, error) || !readField(j, "pads", pads, error) ||
      !readField(j, "dilation", dilation, error) || !readField(j, "threads", w.threads, error))
    return makeError("depthwise workload: ", error);
  if (j.contains("a_zero_point") && !readField(j, "a_zero_point", w.aZeroPoint, error))
    return makeError("depthwise workload: ", error);
  if (stride.size() != 2 || pads.size() != 4 || dilation.size() != 2)
    return makeError("depthwise workload: stride, pads or dilation has the wrong length");
  w.strideH = stride[0], w.strideW = stride[1], w.dilationH = dilation[0],
  w.dilationW = dilation[1];
  w.padTop = pads[0], w.padLeft = pads[1], w.padBottom = pads[2], w.padRight = pads[3];
  TUNEC_TRY(w.check());
  return w;
}

namespace {

constexpr std::array kDepthwiseFields = {
    configField<DepthwiseConfig, &DepthwiseConfig::isa>("isa"),
    configField<DepthwiseConfig, &DepthwiseConfig::channelVectors>("channel_vectors"),
    configField<DepthwiseConfig, &DepthwiseConfig::owBlock>("ow_block"),
    configField<DepthwiseConfig, &DepthwiseConfig::parallel>("parallel")};

} // namespace

nlohmann::json DepthwiseConfig::toJson() const {
  return configToJson(*this, kDepthwiseFields);
}

Expected<DepthwiseConfig> DepthwiseConfig::fromJson(const nlohmann::json& j) {
  return configFromJson(j, kDepthwiseFields, "depthwise");
}

bool depthwiseSumsInQuads(const DepthwiseWorkload& w, const DepthwiseConfig& c) {
  return isInt8Gemm(w.types) && c.isa == Isa::Avx512;
}

Status validateDepthwiseConfig(const DepthwiseWorkload& w, const DepthwiseConfig& c) {
  TUNEC_TRY(w.check());
  const IsaInfo& info = isaInfo(c.isa);
  if (c.channelVectors < 1 || c.owBlock < 1)
    return makeError("depthwise config: channel_vectors and ow_block must be positive");
  // Accumulators, one weight vector per channel vector, one input vector.
  int regs = c.owBlock * c.channelVectors + c.channelVectors + 1;
  if (regs > info.vectorRegisters)
    return makeError("depthwise config: ", c.owBlock, " pixels x ", c.channelVectors,
                     " vectors need ", regs, " vector registers, ", info.name, " has ",
                     info.vectorRegisters);
  if (c.owBlock > w.ow())
    return makeError("depthwise config: ow_block=", c.owBlock, " exceeds ow=", w.ow());
  int lanes = info.f32Lanes();
  if (c.channelVectors > (w.c + lanes - 1) / lanes)
    return makeError("depthwise config: channel_vectors exceeds the channels");
  if (c.parallel != DepthwiseParallel::None && w.threads < 2)
    return makeError("depthwise config: parallel loops need threads > 1");
  if (isF32OnBf16Activations(w.types) && c.isa != Isa::Avx512)
    return makeError("depthwise config: bf16 activations are read and written on avx512 (16 "
                     "lanes, vcvtneps2bf16), not ",
                     info.name);
  return {};
}

DepthwiseConfig defaultDepthwiseConfig(const DepthwiseWorkload& w, Isa isa) {
  DepthwiseConfig c;
  c.isa = isa;
  int lanes = isaInfo(isa).f32Lanes();
  c.channelVectors = static_cast<int>(std::min<int64_t>(2, (w.c + lanes - 1) / lanes));
  c.owBlock = static_cast<int>(std::min<int64_t>(isaInfo(isa).depthwiseOwBlock, w.ow()));
  c.parallel = w.threads > 1 && w.flops() > 2e6 ? DepthwiseParallel::Oh : DepthwiseParallel::None;
  return c;
}

KnobSpace depthwiseKnobSpace(const DepthwiseWorkload& w, Isa isa) {
  int lanes = isaInfo(isa).f32Lanes();
  Knob cv{"channel_vectors", {}}, ow{"ow_block", {}};
  for (int v = 1; v <= 4 && v <= (w.c + lanes - 1) / lanes; ++v) cv.values.emplace_back(v);
  for (int v = 1; v <= 14 && v <= w.ow(); ++v) ow.values.emplace_back(v);
  Knob parallel{"parallel", {"none"}};
  if (w.threads > 1) parallel.values.emplace_back("oh");
  return {cv, ow, parallel};
}

Expected<DepthwiseConfig> depthwiseConfigFromKnobs(const DepthwiseWorkload&, Isa isa,
                                                   const KnobSpace& space,
                                                   const std::vector<nlohmann::json>& values) {
  DepthwiseConfig c;
  c.isa = isa;
  TUNEC_TRY(configSetKnobs(c, space, values, kDepthwiseFields, "depthwise"));
  return c;
}

} // namespace tunec
