// Conv2d template: workload/config JSON, knob space, validation and the analytical default.
#include "templates/conv2d_template.h"

#include <algorithm>

namespace tunec {

Status Conv2dWorkload::check() const {
  if (isBf16Gemm(types)) {
    // bf16 (--precision bf16): weights in input-channel pairs, so the channels of a group come
    // in pairs; the input f32 (rounded into a bf16 copy) or bf16 as stored (a bf16 kernel's
    // output), the output f32 or bf16.
    if (icPerGroup() % 2 || channelScale || nchwInput)
      return makeError("bf16 conv2d workload: needs an even number of input channels per group "
                       "and no channel_scale or NCHW input (ic=",
                       ic, ", groups=", groups, ")");
  } else if (isInt8Gemm(types)) {
    // int8: u8 input, s8 weights in input-channel quads, i32 sums, an f32 or requantized u8 out
    // (one group's channels are rounded up to quads: icKernelPerGroup).
    if (icKernelPerGroup() % 4 || channelScale)
      return makeError("int8 conv2d workload: needs a multiple of 4 input channels per group "
                       "(or one group) and no channel_scale (ic=",
                       ic, ", groups=", groups, ")");
    if (aZeroPoint < 0 || aZeroPoint > 255)
      return makeError("int8 conv2d workload: a_zero_point=", aZeroPoint, " is not a u8");
  } else if (!isF32Gemm(types)) { // f32, to f32 or (requantized for int8 layers) u8
    TUNEC_TRY(checkKernelTypes(types, "conv2d", "f32 (to f32 or u8), bf16 weights or u8 x s8"));
  }
  if (aZeroPoint && !isInt8Gemm(types))
    return makeError("conv2d workload: a_zero_point is for a u8 input");
  if (n < 1 || ic < 1 || h < 1 || w < 1 || oc < 1 || kh < 1 || kw < 1)
    return makeError("conv2d workload needs positive sizes");
  if (strideH < 1 || strideW < 1 || dilationH < 1 || dilationW < 1)
    return makeError("conv2d workload needs positive strides and dilations");
  if (padTop < 0 || padLeft < 0 || padBottom < 0 || padRight < 0)
    return makeError("conv2d workload needs non-negative pads");
  if (oh() < 1 || ow() < 1)
    return makeError("conv2d workload has an empty output: its dilated kernel (",
                     (kh - 1) * dilationH + 1, "x", (kw - 1) * dilationW + 1,
                     ") is larger than the padded input (", h + padTop + padBottom, "x",
                     w + padLeft + padRight, ")");
  if (groups < 1 || ic % groups || oc % groups)
    return makeError("conv2d workload: groups=", groups, " must divide ic=", ic, " and oc=", oc);
  if (threads < 1) return makeError("conv2d workload needs threads >= 1");
  if (channelScale &&
      (kh != 1 || kw != 1 || strideH != 1 || strideW != 1 || padded() || groups != 1))
    return makeError("conv2d workload: channel_scale needs a 1x1 convolution with stride 1, no "
                     "padding and one group");
  if ((inLd && inLd < ic) || (outLd && outLd < oc) || inLd < 0 || outLd < 0)
    return makeError("conv2d workload: in_ld=", inLd, " and out_ld=", outLd,
                     " must be 0 (dense) or at least ic=", ic, " and oc=", oc);
  if (nchwInput && (!padded() || inLd))
    return makeError("conv2d workload: input_layout nchw needs a padded convolution (its "
                     "padded copy is the reorder) and no in_ld");
  if (inLd && padded())
    return makeError("conv2d workload: in_ld needs an unpadded convolution (a padded input is "
                     "copied dense first)");
  return {};
}

nlohmann::json Conv2dWorkload::toJson() const {
  nlohmann::json j = {{"template", "conv2d"},
                      {"dtype", kernelTypesToJson(types)},
                      {"layout", "nhwc"},
                      {"n", n},
                      {"ic", ic},
                      {"h", h},
                      {"w", w},
                      {"oc", oc},
                      {"kh", kh},
                      {"kw", kw},
                      {"stride", {strideH, strideW}},
                      {"pads", {padTop, padLeft, padBottom, padRight}},
                      {"dilation", {dilationH, dilationW}},
                      {"groups", groups},
                      {"threads", threads}};
  if (coldWeights) j["cold_weights"] = true;
  if (channelScale) j["channel_scale"] = true;
  if (inLd) j["in_ld"] = inLd;
  if (outLd) j["out_ld"] = outLd;
  if (nchwInput) j["input_layout"] = "nchw";
  if (aZeroPoint) j["a_zero_point"] = aZeroPoint;
  return j;
}

Expected<Conv2dWorkload> Conv2dWorkload::fromJson(const nlohmann::json& j) {
  Conv2dWorkload w;
  std::string error, tmpl;
  std::vector<int64_t> stride, pads, dilation;
  if (!readField(j, "template", tmpl, error) || tmpl != "conv2d")
    return makeError("not a conv2d workload");
  TUNEC_TRY(readKernelTypes(j, "conv2d", w.types));
  if (!readField(j, "n", w.n, error) || !readField(j, "ic", w.ic, error) ||
      !readField(j, "h", w.h, error) || !readField(j, "w", w.w, error) ||
      !readField(j, "oc", w.oc, error) || !readField(j, "kh", w.kh, error) ||
      !readField(j, "kw", w.kw, error) || !readField(j, "stride", stride, error) ||
      !readField(j, "pads", pads, error) || !readField(j, "dilation", dilation, error) ||
      !readField(j, "groups", w.groups, error) || !readField(j, "threads", w.threads, error))
    return makeError("conv2d workload: ", error);
  if (j.contains("cold_weights") && !readField(j, "cold_weights", w.coldWeights, error))
    return makeError("conv2d workload: ", error);
  if (j.contains("channel_scale") && !readField(j, "channel_scale", w.channelScale, error))
    return makeError("conv2d workload: ", error);
  if ((j.contains("in_ld") && !readField(j, "in_ld", w.inLd, error)) ||
      (j.contains("out_ld") && !readField(j, "out_ld", w.outLd, error)))
    return makeError("conv2d workload: ", error);
  if (j.contains("a_zero_point") && !readField(j, "a_zero_point", w.aZeroPoint, error))
    return makeError("conv2d workload: ", error);
  if (j.contains("input_layout")) {
    std::string layout;
    if (!readField(j, "input_layout", layout, error) || layout != "nchw")
      return makeError("conv2d workload: input_layout must be \"nchw\" when present");
    w.nchwInput = true;
  }
  if (stride.size() != 2 || pads.size() != 4 || dilation.size() != 2)
    return makeError("conv2d workload: stride, pads or dilation has the wrong length");
  w.strideH = stride[0], w.strideW = stride[1], w.dilationH = dilation[0],
  w.dilationW = dilation[1];
  w.padTop = pads[0], w.padLeft = pads[1], w.padBottom = pads[2], w.padRight = pads[3];
  TUNEC_TRY(w.check());
  return w;
}

namespace {

constexpr std::array kConv2dFields = {
    configField<Conv2dConfig, &Conv2dConfig::isa>("isa"),
    configField<Conv2dConfig, &Conv2dConfig::ocBlock>("oc_block"),
    configField<Conv2dConfig, &Conv2dConfig::owBlock>("ow_block"),
    configField<Conv2dConfig, &Conv2dConfig::icBlock>("ic_block"),
    configField<Conv2dConfig, &Conv2dConfig::ohBlock>("oh_block"),
    configField<Conv2dConfig, &Conv2dConfig::rowsPerTile>("rows_per_tile"),
    configField<Conv2dConfig, &Conv2dConfig::loopOrder>("loop_order"),
    configField<Conv2dConfig, &Conv2dConfig::parallel>("parallel")};

} // namespace

nlohmann::json Conv2dConfig::toJson() const {
  return configToJson(*this, kConv2dFields);
}

Expected<Conv2dConfig> Conv2dConfig::fromJson(const nlohmann::json& j) {
  return configFromJson(j, kConv2dFields, "conv2d");
}

bool subsamplesInput(const Conv2dWorkload& w, Isa isa) {
  // (AMX channels rounded up to tile rows come through the padded copy, which rounds them.)
  return w.kh == 1 && w.kw == 1 && !w.padded() && (w.strideH > 1 || w.strideW > 1) &&
         !w.nchwInput && w.icKernelPerGroup(isa) == w.icPerGroup() &&
         (convertsA(w.types) || isa == Isa::Amx);
}

Conv2dWorkload subsampledWorkload(const Conv2dWorkload& w) {
  Conv2dWorkload s = w;
  s.h = w.oh(), s.w = w.ow(), s.strideH = s.strideW = 1, s.inLd = 0;
  return s;
}

bool amxRunsConv2d(const Conv2dWorkload& w) {
  if (w.groups != 1) return false;
  if (isBf16Gemm(w.types)) return w.ic % kGroup(Isa::Amx, w.types) == 0;
  return isInt8Gemm(w.types) && 3 * w.icKernelPerGroup(Isa::Amx) <= 4 * w.ic;
}

int64_t amxConv2dVirtualWidth(const Conv2dWorkload& w) {
  return (w.w + w.padLeft + w.padRight + w.strideW - 1) / w.strideW;
}

namespace {

// The parallel loop the config names exists for the workload (both kernels).
Status checkParallelLoop(const Conv2dWorkload& w, const Conv2dConfig& c) {
  if (c.parallel != Conv2dParallel::None && w.threads < 2)
    return makeError("conv2d config: parallel loops need threads > 1");
  if (c.parallel == Conv2dParallel::N && w.n < 2)
    return makeError("conv2d config: parallel over n needs n > 1");
  return {};
}

// The AMX convolution (conv2d_amx_kernel.cpp): tiles of ow_block virtual pixels (16 rows each)
// by oc_block channels (16 columns each), every input-channel block a whole number of 64-byte
// tile rows.
Status validateAmxConv2dConfig(const Conv2dWorkload& w, const Conv2dConfig& c) {
  const int64_t step = kGroup(Isa::Amx, w.types);
  if (!isLowPrecisionGemm(w.types))
    return makeError("conv2d config: AMX runs int8 and bf16 convolutions, not ",
                     kernelTypesToJson(w.types).dump(), "; use avx512 or avx2");
  if (!amxRunsConv2d(w))
    return makeError(
        "conv2d config: AMX runs convolutions of one group whose input channels "
        "fill whole 64-byte tile rows (",
        isInt8Gemm(w.types) ? "within a third more when rounded up to 64" : "a multiple of 32",
        "), not ic=", w.icPerGroup(), " in ", w.groups, " group(s); use avx512 or avx2");
  const int64_t ick = w.icKernelPerGroup(Isa::Amx);
  if (c.owBlock % 16 || c.ocBlock % 16 || c.ocBlock > 64 || c.owBlock > 48 ||
      amxTileCount(c.owBlock, c.ocBlock) > 8)
    return makeError("conv2d config: the AMX tile grid ow_block=", c.owBlock,
                     " x oc_block=", c.ocBlock, " needs multiples of 16 and at most 8 tiles (",
                     c.owBlock % 16 || c.ocBlock % 16 ? 0 : amxTileCount(c.owBlock, c.ocBlock),
                     "): e.g. 32x32 (4 C + 2 A + 2 B)");
  if (c.icBlock < step || c.icBlock % step || ick % c.icBlock)
    return makeError("conv2d config: on AMX ic_block=", c.icBlock, " must be a multiple of ", step,
                     " (one 64-byte tile row) that divides ic=", ick);
  if (c.rowsPerTile != 1 || c.ohBlock != 1)
    return makeError("conv2d config: AMX tiles run over virtual pixels of whole rows: "
                     "rows_per_tile and oh_block are 1, not ",
                     c.rowsPerTile, " and ", c.ohBlock);
  if (c.ocBlock > (w.ocPerGroup() + 15) / 16 * 16)
    return makeError("conv2d config: oc_block=", c.ocBlock, " exceeds oc=", w.ocPerGroup());
  return checkParallelLoop(w, c);
}

} // namespace

Status validateConv2dConfig(const Conv2dWorkload& w, const Conv2dConfig& c) {
  TUNEC_TRY(w.check());
  const IsaInfo& info = isaInfo(c.isa);
  int lanes = info.f32Lanes();
  if (c.ocBlock < lanes || c.ocBlock % lanes)
    return makeError("conv2d config: oc_block=", c.ocBlock, " must be a multiple of ", lanes);
  if (c.owBlock < 1) return makeError("conv2d config: ow_block must be positive");
  if (c.rowsPerTile < 1) return makeError("conv2d config: rows_per_tile must be positive");
  if (c.rowsPerTile > 1 && (c.owBlock != w.ow() || c.ohBlock % c.rowsPerTile))
    return makeError("conv2d config: rows_per_tile=", c.rowsPerTile, " needs ow_block=ow (", w.ow(),
                     ") and an oh_block that it divides");
  if (c.isa == Isa::Amx) return validateAmxConv2dConfig(w, c);
  int regs = tileRegisters(c.isa, static_cast<int>(c.owBlock * c.rowsPerTile), c.ocBlock);
  if (regs > info.vectorRegisters)
    return makeError("conv2d config: tile ", c.owBlock * c.rowsPerTile, "x", c.ocBlock, " needs ",
                     regs, " vector registers, ", info.name, " has ", info.vectorRegisters);
  if (c.icBlock < 1 || w.icKernelPerGroup() % c.icBlock)
    return makeError("conv2d config: ic_block=", c.icBlock,
                     " must divide ic=", w.icKernelPerGroup(), w.groups > 1 ? " (per group)" : "");
  if (isBf16Gemm(w.types) && (c.icBlock % 2 || c.isa != Isa::Avx512))
    return makeError("conv2d config: bf16 needs AVX-512 or AMX and an even ic_block "
                     "(input-channel pairs), not ",
                     info.name, " and ", c.icBlock);
  if (isInt8Gemm(w.types) && c.icBlock % 4)
    return makeError("conv2d config: int8 needs an ic_block that is a multiple of 4 "
                     "(input-channel quads), not ",
                     c.icBlock);
  if (c.ohBlock < 1 || c.ohBlock > w.oh())
    return makeError("conv2d config: oh_block=", c.ohBlock, " must be in 1..", w.oh());
  if (c.owBlock > w.ow())
    return makeError("conv2d config: ow_block=", c.owBlock, " exceeds ow=", w.ow());
  if (c.ocBlock > (w.ocPerGroup() + lanes - 1) / lanes * lanes)
    return makeError("conv2d config: oc_block=", c.ocBlock, " exceeds oc=", w.ocPerGroup(),
                     w.groups > 1 ? " (per group)" : "");
  return checkParallelLoop(w, c);
}

namespace {

// Which loop the threads share. A batch of at least one image per thread splits the batch.
// Otherwise splitting output rows makes every thread read all the weights, and splitting
// output-channel panels makes every thread read the whole input: the split duplicates the
// smaller of the two. In a model the weights come from memory (ResNet-50 holds 100 MB of them)
// while the input is the previous layer's fresh output, so the panels are split only where the
// weights clearly dominate (4x the input: the deep 14x14 and 7x7 layers, whose rows also split
// unevenly: 7 rows over 2 threads) and there is a panel for every thread.
Conv2dParallel defaultParallelLoop(const Conv2dWorkload& w, const Conv2dConfig& c) {
  if (w.n >= w.threads) return Conv2dParallel::N;
  double weightBytes = static_cast<double>(w.types.weiBytes()) *
                       static_cast<double>(w.kh * w.kw * w.icPerGroup() * w.oc);
  double inputBytes =
      static_cast<double>(w.types.srcBytes()) * static_cast<double>(w.n * w.h * w.w * w.ic);
  int64_t panels = w.groups * ((w.ocPerGroup() + c.ocBlock - 1) / c.ocBlock);
  return weightBytes >= 4 * inputBytes && panels >= w.threads ? Conv2dParallel::Oc
                                                              : Conv2dParallel::Oh;
}

} // namespace

Conv2dConfig defaultConv2dConfig(const Conv2dWorkload& w, Isa isa, const Target& target) {
  Conv2dConfig c;
  c.isa = isa;
  if (isa == Isa::Amx) {
    // A 2x2 grid of C tiles (32 virtual pixels x 32 channels) where the output has them, every
    // input channel in one batch entry per tap, the panel loop outside the tiles (a panel of
    // 3x3x512 int8 weights is 147 KiB: it stays in L2 while the image's tiles pass).
    c.ocBlock = w.ocPerGroup() > 16 ? 32 : 16;
    c.owBlock = w.oh() * amxConv2dVirtualWidth(w) > 16 ? 32 : 16;
    c.icBlock = w.icKernelPerGroup(Isa::Amx);
    c.ohBlock = c.rowsPerTile = 1;
    c.loopOrder = Conv2dLoopOrder::OcOh;
    if (w.threads > 1 && w.flops() >= 4e6) c.parallel = defaultParallelLoop(w, c);
    return c;
  }
  int lanes = isaInfo(isa).f32Lanes();
  int64_t ocVectors = (w.ocPerGroup() + lanes - 1) / lanes;
  c.ocBlock = static_cast<int>(std::min<int64_t>(2, ocVectors)) * lanes;
  int maxRows = maxTileRows(isa, c.ocBlock);
  // Prefer a row block that divides the output width (no tail tiles), up to the register limit.
  int64_t ow = w.ow();
  int best = static_cast<int>(std::min<int64_t>(maxRows, ow));
  for (int r = best; r >= std::max(4, best / 2); --r)
    if (ow % r == 0) {
      best = r;
      break;
    }
  c.owBlock = best;
  // Narrow outputs (the 7x7 and 14x14 layers): let a tile span whole rows, so that the register
  // tile is not limited to one short row.
  if (ow * 2 <= maxRows) {
    c.owBlock = static_cast<int>(ow);
    c.rowsPerTile = std::min<int64_t>(maxRows / ow, w.oh());
    c.ohBlock = c.rowsPerTile;
  }
  // The weights of one panel for one ic block (kh*kw*icb*ocBlock floats) should stay in L1/L2.
  c.icBlock = w.icKernelPerGroup();
  auto weiBytes = static_cast<int64_t>(w.types.weiBytes());
  // (bf16 and int8 keep whole input-channel pairs and quads: a block halves only while the
  // half stays a whole number of them.)
  const int64_t grain = 2 * kGroup(isa, w.types);
  while (c.icBlock % grain == 0 && c.icBlock * w.kh * w.kw * c.ocBlock * weiBytes > target.l2 / 2 &&
         c.icBlock > 16)
    c.icBlock /= 2;
  c.loopOrder = Conv2dLoopOrder::OcOh;
  c.parallel = Conv2dParallel::None;
  if (w.threads > 1 && w.flops() >= 4e6) c.parallel = defaultParallelLoop(w, c);
  return c;
}

KnobSpace conv2dKnobSpace(const Conv2dWorkload& w, Isa isa) {
  int lanes = isaInfo(isa).f32Lanes();
  KnobSpace space;
  if (isa == Isa::Amx) { // grids of at most 8 tiles; whole tile rows of input channels
    Knob oc{"oc_block", {}}, owb{"ow_block", {16, 32}}, icb{"ic_block", {}};
    for (int v = 16; v <= 64; v += 16)
      if (v <= (w.ocPerGroup() + 15) / 16 * 16) oc.values.emplace_back(v);
    const int64_t step = kGroup(isa, w.types), ick = w.icKernelPerGroup(isa);
    for (int64_t v = step; v <= ick; v += step)
      if (ick % v == 0) icb.values.emplace_back(v);
    if (icb.values.empty()) icb.values.emplace_back(ick);
    Knob parallel{"parallel", {"none"}};
    if (w.threads > 1) {
      if (w.n > 1) parallel.values.emplace_back("n");
      parallel.values.emplace_back("oh");
      parallel.values.emplace_back("oc");
    }
    return {oc,
            owb,
            icb,
            {"oh_block", {1}},
            {"loop_order", {"oc_oh", "oh_oc"}},
            parallel,
            {"rows_per_tile", {1}}};
  }
  Knob oc{"oc_block", {}}, owb{"ow_block", {}}, icb{"ic_block", {}}, ohb{"oh_block", {}};
  for (int v = lanes; v <= 4 * lanes; v += lanes)
    if (v <= (w.ocPerGroup() + lanes - 1) / lanes * lanes) oc.values.emplace_back(v);
  for (int v = 1; v <= 28; ++v)
    if (v <= w.ow()) owb.values.emplace_back(v);
  for (int64_t v = w.icKernelPerGroup(); v >= 8; v /= 2) {
    if (w.icKernelPerGroup() % v == 0) icb.values.emplace_back(v);
    if (v % 2) break;
  }
  if (icb.values.empty()) icb.values.emplace_back(w.icKernelPerGroup());
  if (const int64_t group = kGroup(isa, w.types); group > 1) // bf16 pairs, int8 quads
    std::erase_if(icb.values, [&](const nlohmann::json& v) { return v.get<int64_t>() % group; });
  for (int64_t v : {1, 2, 4, 7, 8, 14})
    if (v <= w.oh()) ohb.values.emplace_back(v);
  space = {oc, owb, icb, ohb, {"loop_order", {"oc_oh", "oh_oc"}}};
  Knob parallel{"parallel", {"none"}};
  if (w.threads > 1) {
    if (w.n > 1) parallel.values.emplace_back("n");
    parallel.values.emplace_back("oh");
    parallel.values.emplace_back("oc");
  }
  space.push_back(parallel);
  Knob rows{"rows_per_tile", {1}};
  for (int64_t r = 2; r <= 4 && r <= w.oh() && r * w.ow() <= 28; ++r) rows.values.emplace_back(r);
  space.push_back(rows);
  return space;
}

Expected<Conv2dConfig> conv2dConfigFromKnobs(const Conv2dWorkload& w, Isa isa,
                                             const KnobSpace& space,
                                             const std::vector<nlohmann::json>& values) {
  Conv2dConfig c;
  c.isa = isa;
  TUNEC_TRY(configSetKnobs(c, space, values, kConv2dFields, "conv2d"));
  if (c.rowsPerTile > 1) { // whole rows per tile; row blocks a multiple of the tile
    c.owBlock = static_cast<int>(w.ow());
    c.ohBlock = std::max<int64_t>(1, c.ohBlock / c.rowsPerTile) * c.rowsPerTile;
  }
  return c;
}

} // namespace tunec
