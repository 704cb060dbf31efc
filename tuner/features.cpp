// Feature extraction: the knobs (log2 for sizes) plus derived quantities that explain
// performance: loop trip counts, bytes touched per tile against each cache level, arithmetic
// intensity, lane utilization and remainder waste, registers, parallel tasks against threads.
#include "tuner/features.h"

#include "templates/conv2d_template.h"
#include "templates/depthwise_template.h"
#include "templates/matmul_template.h"

#include <cmath>

namespace tunec::tuner {

namespace {

float lg(double v) {
  return static_cast<float>(std::log2(std::max(v, 1.0)));
}
double ceilDiv(double a, double b) {
  return std::ceil(a / b);
}
float util(double n, double block) {
  return static_cast<float>(n / (ceilDiv(n, block) * block));
}
double cacheOr(int64_t bytes, double fallback) {
  return bytes > 0 ? static_cast<double>(bytes) : fallback;
}

// Parallel balance: tasks per thread and the idle fraction of the last wave.
std::pair<float, float> balance(double tasks, int threads) {
  if (threads <= 1) return {1.f, 0.f};
  double waves = ceilDiv(tasks, threads);
  return {static_cast<float>(tasks / threads), static_cast<float>(1.0 - tasks / (waves * threads))};
}

Features matmulFeatures(const MatmulWorkload& w, const MatmulConfig& c, const Target& h) {
  Features f{};
  double l1 = cacheOr(h.l1d, 48e3), l2 = cacheOr(h.l2, 1e6), l3 = cacheOr(h.l3, 16e6);
  f[0] = lg(c.mr);
  f[1] = lg(c.nr);
  f[2] = lg(static_cast<double>(c.mc));
  f[3] = lg(static_cast<double>(c.nc));
  f[4] = lg(static_cast<double>(c.kc));
  for (size_t i = 0; i < 6; ++i)
    f[5 + i] = c.loopOrder == Spellings<MatmulLoopOrder>::values[i].first;
  f[11] = c.parallel == MatmulParallel::M;
  f[12] = c.parallel == MatmulParallel::N;
  f[13] = c.parallel == MatmulParallel::Batch;
  f[14] = c.packA;
  // Trip counts of the block loops and the register-tile loops.
  f[15] = lg(ceilDiv(static_cast<double>(w.m), static_cast<double>(c.mc)));
  f[16] = lg(ceilDiv(static_cast<double>(w.n), static_cast<double>(c.nc)));
  f[17] = lg(ceilDiv(static_cast<double>(w.k), static_cast<double>(c.kc)));
  f[18] = lg(ceilDiv(static_cast<double>(c.mc), c.mr));
  f[19] = lg(ceilDiv(static_cast<double>(c.nc), c.nr));
  // Bytes per tile against each cache level: A rows + B panel (L1), A block (L2), B block (L3).
  auto aBytes = static_cast<double>(w.types.srcBytes()),
       bBytes = static_cast<double>(w.types.weiBytes());
  f[20] = static_cast<float>((c.mr * aBytes + c.nr * bBytes) * static_cast<double>(c.kc) / l1);
  f[21] = static_cast<float>(static_cast<double>(c.mc * c.kc) * aBytes / l2);
  f[22] = static_cast<float>(static_cast<double>(c.kc * c.nc) * bBytes / l3);
  f[23] = static_cast<float>(2.0 * c.mr * c.nr / (c.mr + c.nr)); // flops per loaded element
  f[24] = util(static_cast<double>(w.n), c.nr);                  // vector lanes used in N
  f[25] = util(static_cast<double>(w.m), c.mr);                  // rows used in M
  f[26] = static_cast<float>(tileRegisters(c.isa, c.mr, c.nr) /
                             static_cast<double>(isaInfo(c.isa).vectorRegisters));
  double tasks = c.parallel == MatmulParallel::M
                     ? ceilDiv(static_cast<double>(w.m), static_cast<double>(c.mc))
                 : c.parallel == MatmulParallel::N
                     ? ceilDiv(static_cast<double>(w.n), static_cast<double>(c.nc))
                 : c.parallel == MatmulParallel::Batch ? static_cast<double>(w.batch)
                                                       : 1.0;
  auto [perThread, idle] = balance(tasks, c.parallel == MatmulParallel::None ? 1 : w.threads);
  f[27] = perThread;
  f[28] = idle;
  f[29] = lg(w.flops());
  f[30] = static_cast<float>(w.threads);
  f[31] = w.constantB ? 0.f : 1.f;
  f[32] = isBf16Gemm(w.types); // vdpbf16ps: twice the f32 rate, half the bytes per element
  f[33] = isInt8Gemm(w.types); // u8 x s8 quads: four times the f32 rate (VNNI), 1-byte operands
  f[34] = c.isa == Isa::Amx;   // tile dots: the grid, not the register file, bounds the tile
  return f;
}

Features conv2dFeatures(const Conv2dWorkload& w, const Conv2dConfig& c, const Target& h) {
  Features f{};
  double l1 = cacheOr(h.l1d, 48e3), l2 = cacheOr(h.l2, 1e6);
  double ow = static_cast<double>(w.ow()), oh = static_cast<double>(w.oh());
  double ocg = static_cast<double>(w.ocPerGroup()), icg = static_cast<double>(w.icPerGroup());
  double taps = static_cast<double>(w.kh * w.kw);
  int rowsTile = static_cast<int>(c.rowsPerTile);
  double mr = rowsTile > 1 ? static_cast<double>(rowsTile) * ow : c.owBlock;
  f[0] = lg(c.ocBlock);
  f[1] = lg(c.owBlock);
  f[2] = lg(static_cast<double>(c.icBlock));
  f[3] = lg(static_cast<double>(c.ohBlock));
  f[4] = static_cast<float>(c.rowsPerTile);
  f[5] = c.loopOrder == Conv2dLoopOrder::OcOh;
  f[6] = c.parallel == Conv2dParallel::Oh;
  f[7] = c.parallel == Conv2dParallel::Oc;
  f[8] = c.parallel == Conv2dParallel::N;
  f[9] = lg(ceilDiv(ocg, c.ocBlock)); // oc panels
  // AMX: tiles of owBlock virtual pixels over the image's rows of amxConv2dVirtualWidth.
  const bool amx = c.isa == Isa::Amx;
  const double virtualWidth = static_cast<double>(amxConv2dVirtualWidth(w));
  f[10] = amx ? lg(ceilDiv(oh * virtualWidth, c.owBlock))          // tiles per image
              : lg(ceilDiv(ow, c.owBlock));                        // tiles per row
  f[11] = lg(ceilDiv(oh, static_cast<double>(c.ohBlock)));         // row blocks
  f[12] = lg(ceilDiv(icg, static_cast<double>(c.icBlock)) * taps); // brgemm batch length
  // Bytes of one brgemm call: input rows + weight panel, against L1; a row block's input against
  // L2.
  auto inBytes = static_cast<double>(w.types.srcBytes()),
       weiBytes = static_cast<double>(w.types.weiBytes());
  f[13] = static_cast<float>((mr * inBytes + c.ocBlock * weiBytes) *
                             static_cast<double>(c.icBlock) / l1);
  f[14] = static_cast<float>(static_cast<double>(c.ohBlock) * w.strideH * w.w * icg * inBytes / l2);
  f[15] = static_cast<float>(static_cast<double>(c.ocBlock) * icg * taps * weiBytes / l2);
  f[16] = static_cast<float>(2.0 * mr * c.ocBlock / (mr + c.ocBlock));
  f[17] = util(ocg, c.ocBlock);
  f[18] = util(ow, c.owBlock);
  f[19] = amx ? static_cast<float>(amxTileCount(c.owBlock, c.ocBlock) / 8.0)
              : static_cast<float>(
                    tileRegisters(c.isa, static_cast<int>(c.owBlock * c.rowsPerTile), c.ocBlock) /
                    static_cast<double>(isaInfo(c.isa).vectorRegisters));
  double tasks = c.parallel == Conv2dParallel::Oh ? oh
                 : c.parallel == Conv2dParallel::Oc
                     ? ceilDiv(ocg, c.ocBlock) * static_cast<double>(w.groups)
                 : c.parallel == Conv2dParallel::N ? static_cast<double>(w.n)
                                                   : 1.0;
  auto [perThread, idle] = balance(tasks, c.parallel == Conv2dParallel::None ? 1 : w.threads);
  f[20] = perThread;
  f[21] = idle;
  f[22] = lg(w.flops());
  f[23] = static_cast<float>(w.threads);
  f[24] = static_cast<float>(taps);
  f[25] = static_cast<float>(w.strideH);
  f[26] = lg(icg);
  f[27] = lg(ocg);
  f[28] = lg(ow);
  f[29] = w.padded();
  f[30] = isBf16Gemm(w.types); // vdpbf16ps or tdpbf16ps on a bf16 copy of the input
  f[31] = isInt8Gemm(w.types); // u8 x s8 quads: vpdpbusd, vpmaddubsw or tdpbusd
  f[32] = amx;                 // tile dots over virtual pixels
  f[33] = amx ? static_cast<float>(ow / virtualWidth) : 1.f; // virtual pixels that are outputs
  return f;
}

Features depthwiseFeatures(const DepthwiseWorkload& w, const DepthwiseConfig& c) {
  Features f{};
  int lanes = isaInfo(c.isa).f32Lanes();
  double ow = static_cast<double>(w.ow());
  f[0] = static_cast<float>(c.channelVectors);
  f[1] = lg(c.owBlock);
  f[2] = c.parallel == DepthwiseParallel::Oh;
  f[3] = util(static_cast<double>(w.c), c.channelVectors * lanes);
  f[4] = util(ow, c.owBlock);
  f[5] = lg(ceilDiv(static_cast<double>(w.c), c.channelVectors * lanes));
  f[6] = lg(ceilDiv(ow, c.owBlock));
  f[7] = static_cast<float>((c.owBlock * c.channelVectors + c.channelVectors + 1) /
                            static_cast<double>(isaInfo(c.isa).vectorRegisters));
  f[8] = lg(w.flops());
  f[9] = static_cast<float>(w.threads);
  f[10] = static_cast<float>(w.kh * w.kw);
  f[11] = static_cast<float>(w.strideH);
  f[12] = lg(static_cast<double>(w.c));
  f[13] = lg(ow);
  auto [perThread, idle] =
      balance(static_cast<double>(w.oh()), c.parallel == DepthwiseParallel::Oh ? w.threads : 1);
  f[14] = perThread;
  f[15] = idle;
  return f;
}

Features featuresOf(const MatmulWorkload& w, const MatmulConfig& c, const Target& t) {
  return matmulFeatures(w, c, t);
}
Features featuresOf(const Conv2dWorkload& w, const Conv2dConfig& c, const Target& t) {
  return conv2dFeatures(w, c, t);
}
Features featuresOf(const DepthwiseWorkload& w, const DepthwiseConfig& c, const Target&) {
  return depthwiseFeatures(w, c);
}

} // namespace

Expected<Features> extractFeatures(const Workload& workload, const Config& config,
                                   const Target& target) {
  return std::visit(
      [&](const auto& w, const auto& c) -> Expected<Features> {
        if constexpr (requires { featuresOf(w, c, target); })
          return featuresOf(w, c, target);
        else
          return makeError("features: a ", templateName(templateKind(config)), " config for a ",
                           templateName(templateKind(workload)), " workload");
      },
      workload, config);
}

const std::array<const char*, kFeatureLength>& featureNames(TemplateKind kind) {
  static const std::array<const char*, kFeatureLength> matmul = {
      "log2 mr",
      "log2 nr",
      "log2 mc",
      "log2 nc",
      "log2 kc",
      "order nkm",
      "order nmk",
      "order mkn",
      "order mnk",
      "order knm",
      "order kmn",
      "parallel m",
      "parallel n",
      "parallel batch",
      "pack A",
      "log2 M blocks",
      "log2 N blocks",
      "log2 K blocks",
      "log2 mr tiles per block",
      "log2 nr panels per block",
      "L1 bytes of a tile / L1",
      "A block bytes / L2",
      "B block bytes / L3",
      "flops per loaded element",
      "N lane use",
      "M row use",
      "vector registers used / available",
      "parallel tasks per thread",
      "idle fraction of the last wave",
      "log2 flops",
      "threads",
      "B computed at run time",
      "bf16 (vdpbf16ps)",
      "int8 (u8 x s8 quads)",
      "AMX tiles"};
  static const std::array<const char*, kFeatureLength> conv = {"log2 oc_block",
                                                               "log2 ow_block",
                                                               "log2 ic_block",
                                                               "log2 oh_block",
                                                               "rows_per_tile",
                                                               "order oc_oh",
                                                               "parallel oh",
                                                               "parallel oc",
                                                               "parallel n",
                                                               "log2 oc panels",
                                                               "log2 tiles per row",
                                                               "log2 row blocks",
                                                               "log2 brgemm batch length",
                                                               "brgemm call bytes / L1",
                                                               "row block input bytes / L2",
                                                               "weight panel bytes / L2",
                                                               "flops per loaded element",
                                                               "OC lane use",
                                                               "OW use",
                                                               "vector registers used / available",
                                                               "parallel tasks per thread",
                                                               "idle fraction of the last wave",
                                                               "log2 flops",
                                                               "threads",
                                                               "kernel taps",
                                                               "stride",
                                                               "log2 IC per group",
                                                               "log2 OC per group",
                                                               "log2 OW",
                                                               "padded",
                                                               "bf16 (vdpbf16ps, tdpbf16ps)",
                                                               "int8 (u8 x s8 quads)",
                                                               "AMX (tiles of virtual pixels)",
                                                               "output share of virtual pixels",
                                                               "-"};
  static const std::array<const char*, kFeatureLength> depthwise = {
      "channel vectors",
      "log2 ow_block",
      "parallel oh",
      "channel lane use",
      "OW use",
      "log2 channel tiles",
      "log2 tiles per row",
      "vector registers used / available",
      "log2 flops",
      "threads",
      "kernel taps",
      "stride",
      "log2 channels",
      "log2 OW",
      "parallel tasks per thread",
      "idle fraction of the last wave",
      "-",
      "-",
      "-",
      "-",
      "-",
      "-",
      "-",
      "-",
      "-",
      "-",
      "-",
      "-",
      "-",
      "-",
      "-",
      "-",
      "-",
      "-",
      "-"};
  switch (kind) {
  case TemplateKind::Matmul:
    return matmul;
  case TemplateKind::Conv2d:
    return conv;
  case TemplateKind::Depthwise:
    return depthwise;
  }
  TUNEC_ASSERT(false, "template kind " << static_cast<int>(kind) << " has no feature names");
}

} // namespace tunec::tuner
