// The conv2d template against the reference executor: random valid configs and edge cases
// (odd sizes, strides, pads, dilations, 1x1, channel counts below a vector, two threads), with
// epilogues. Tolerance: 4 * (ic*kh*kw) * eps + 1e-5 (inputs in [-1, 1]).
#include "codegen/conv2d_kernel.h"
#include "codegen/matmul_kernel.h"
#include "ir/graph.h"
#include "reference/reference.h"
#include "support/host.h"
#include "templates/depthwise_template.h"
#include "templates/template.h"
#include "test_support.h"

#include <bit>
#include <gtest/gtest.h>
#include <random>
#include <thread>

namespace tunec {
namespace {

using test::jit;
using test::randomTensor;
using test::randomVector;

Tensor referenceConv(const Conv2dWorkload& w, const Epilogue& epi, const Tensor& x,
                     const Tensor& weights, const Tensor& bias, const Tensor& addend,
                     const Tensor& columnScale) {
  ConvAttrs attrs{{w.kh, w.kw},
                  {w.strideH, w.strideW},
                  {w.padTop, w.padLeft, w.padBottom, w.padRight},
                  {w.dilationH, w.dilationW},
                  w.groups};
  return test::referenceNhwcConv(attrs, epi, x, weights, bias, addend, columnScale);
}

// Small integers in [-3, 3] (exact in bf16, and every product and sum exact in f32).
void toSmallIntegers(Tensor& t, std::mt19937& rng) {
  for (int64_t i = 0; i < t.numel(); ++i)
    t.dataAs<float>()[i] = static_cast<float>(static_cast<int>(rng() % 7) - 3);
}

// A bf16 workload (f32 input rounded by the kernel, bf16 weights) is checked against the
// reference on the rounded input and weights, within f32 accumulation's bound; `integers`: on
// small integers, exactly.
void checkConv(const Conv2dWorkload& w, const Conv2dConfig& c, const Epilogue& epi, uint32_t seed,
               bool integers = false) {
  std::mt19937 rng(seed);
  auto prepare = [&](Tensor& t) {
    if (integers) toSmallIntegers(t, rng);
    if (convertsA(w.types))
      for (int64_t i = 0; i < t.numel(); ++i)
        t.dataAs<float>()[i] = bf16ToFloat(floatToBf16(t.dataAs<float>()[i]));
  };
  // With in_ld / out_ld the operands are channel slices of wider NHWC tensors: the kernel reads
  // the input at the last channels of a wider one and writes the output there, leaving the
  // other channels as they were.
  const int64_t inLd = w.inPixelStride(), outLd = w.outPixelStride();
  const int64_t inOff = inLd - w.ic, outOff = outLd - w.oc;
  Tensor wide = randomTensor(Shape{w.n, w.h, w.w, inLd}, rng);
  prepare(wide);
  Tensor x(DType::F32, Shape{w.n, w.h, w.w, w.ic});
  for (int64_t p = 0; p < w.n * w.h * w.w; ++p)
    std::copy_n(wide.dataAs<float>() + p * inLd + inOff, w.ic, x.dataAs<float>() + p * w.ic);
  // An NCHW input (input_layout nchw): the kernel gets x transposed.
  Tensor nchw(DType::F32, Shape{w.n, w.ic, w.h, w.w});
  for (int64_t p = 0; p < w.n * w.h * w.w; ++p)
    for (int64_t ch = 0; ch < w.ic; ++ch)
      nchw.dataAs<float>()[(p / (w.h * w.w) * w.ic + ch) * w.h * w.w + p % (w.h * w.w)] =
          x.dataAs<float>()[p * w.ic + ch];
  Tensor weights = randomTensor(Shape{w.oc, w.icPerGroup(), w.kh, w.kw}, rng);
  Tensor bias = randomTensor(Shape{w.oc}, rng);
  Tensor addend = randomTensor(Shape{w.n, w.oh(), w.ow(), w.oc}, rng);
  prepare(weights);
  if (integers) toSmallIntegers(bias, rng), toSmallIntegers(addend, rng);
  // bf16 convolutions run on the real vdpbf16ps where this CPU has it, else on its twin.
  // AMX kernels run through their twins (Conv2dAmxReal compares the real instructions to them).
  Jit& j = w.types.allF32() ? jit() : c.isa == Isa::Amx ? test::twinJit() : test::bf16Jit();
  auto kernel = compileConv2d(j, w, c, epi, weights.dataAs<float>());
  ASSERT_TRUE(kernel.isOk()) << kernel.error().message();
  Tensor out = randomTensor(Shape{w.n, w.oh(), w.ow(), outLd}, rng);
  std::vector<float> before(out.dataAs<float>(), out.dataAs<float>() + out.numel());
  // A channel-scaled workload: the kernel gets the scales, the reference the scaled input.
  Tensor scale = randomTensor(Shape{w.n, w.ic}, rng);
  Tensor scaled(DType::F32, x.shape()); // Tensor copies share their data: a fresh one
  std::copy_n(x.dataAs<float>(), x.numel(), scaled.dataAs<float>());
  if (w.channelScale)
    for (int64_t i = 0; i < x.numel(); ++i)
      scaled.dataAs<float>()[i] *= scale.dataAs<float>()[i / (w.h * w.w * w.ic) * w.ic + i % w.ic];
  Tensor columnScale = randomTensor(Shape{w.oc}, rng);
  kernel->run(w.nchwInput ? nchw.dataAs<float>() : wide.dataAs<float>() + inOff,
              out.dataAs<float>() + outOff, bias.dataAs<float>(), addend.dataAs<float>(),
              w.channelScale ? scale.dataAs<float>() : nullptr, columnScale.dataAs<float>());
  Tensor want = referenceConv(w, epi, scaled, weights, bias, addend, columnScale);
  double tol = integers
                   ? 0.0
                   : 4.0 * static_cast<double>(w.icPerGroup() * w.kh * w.kw) * 1.1920929e-7 + 1e-5;
  for (int64_t i = 0; i < out.numel(); ++i) {
    int64_t channel = i % outLd - outOff;
    if (channel < 0) {
      ASSERT_EQ(out.dataAs<float>()[i], before[static_cast<size_t>(i)])
          << "element " << i << " outside the output slice of " << w.toJson().dump();
      continue;
    }
    double expect = want.getDouble(i / outLd * w.oc + channel);
    ASSERT_NEAR(out.getDouble(i), expect, test::epilogueTolerance(epi, tol, expect))
        << "element " << i << " of " << w.toJson().dump() << " with config " << c.toJson().dump();
  }
}

Conv2dWorkload conv(int64_t n, int64_t ic, int64_t hw, int64_t oc, int64_t k, int64_t stride,
                    int64_t pad, int64_t dilation = 1) {
  Conv2dWorkload w;
  w.n = n, w.ic = ic, w.h = hw, w.w = hw + 1, w.oc = oc, w.kh = k, w.kw = k;
  w.strideH = w.strideW = stride;
  w.padTop = w.padLeft = pad;
  w.padBottom = w.padRight = pad;
  w.dilationH = w.dilationW = dilation;
  return w;
}

TEST(Conv2dTemplate, DefaultConfigsOnEdgeShapes) {
  std::vector<Conv2dWorkload> shapes = {conv(1, 3, 9, 5, 3, 1, 1),     conv(1, 16, 7, 32, 1, 1, 0),
                                        conv(2, 8, 11, 20, 3, 2, 1),   conv(1, 5, 6, 17, 5, 1, 2),
                                        conv(1, 4, 9, 40, 3, 1, 2, 2), conv(1, 3, 15, 8, 7, 2, 3),
                                        conv(1, 64, 5, 64, 3, 1, 1),   conv(1, 1, 4, 1, 1, 1, 0)};
  shapes[2].padBottom = 0; // asymmetric padding
  // Output rows that read only padding (a pad wider than the kernel) and dilated taps that
  // skip padding rows from both ends.
  shapes.push_back(conv(1, 8, 5, 16, 1, 1, 2));
  shapes.push_back(conv(1, 6, 10, 12, 3, 2, 3, 2));
  shapes.push_back(conv(1, 12, 7, 18, 3, 1, 1));
  shapes.back().groups = 3; // grouped, 4 -> 6 channels per group (an oc tail in every group)
  shapes.push_back(conv(1, 64, 6, 64, 3, 2, 1));
  shapes.back().groups = 2;
  uint32_t seed = 1;
  for (Isa isa : test::hostIsas())
    for (const Conv2dWorkload& w : shapes) {
      Conv2dConfig c = defaultConv2dConfig(w, isa, hostTarget());
      ASSERT_TRUE(validateConv2dConfig(w, c).isOk())
          << validateConv2dConfig(w, c).error().message() << " " << w.toJson().dump();
      checkConv(w, c, {{PostOpKind::BiasPerColumn}, {PostOpKind::Relu}}, seed++);
    }
}

// At two threads and batch 1 the default splits the output-channel panels where the weights
// are at least 4x the input (the deep layers) and the output rows elsewhere; batch 2 splits the
// batch. Each choice computes the same result as the reference.
TEST(Conv2dTemplate, TwoThreadDefaultsSplitTheLoopThatDuplicatesLess) {
  struct Case {
    Conv2dWorkload w;
    const char* parallel;
  };
  std::vector<Case> cases = {{conv(1, 128, 4, 96, 3, 1, 1), "oc"}, // 432 KiB weights, 10 KiB input
                             {conv(1, 16, 40, 32, 3, 1, 1), "oh"}, // 18 KiB weights, 102 KiB input
                             {conv(2, 128, 4, 96, 3, 1, 1), "n"}};
  uint32_t seed = 100;
  Isa isa = test::hostIsas().back();
  for (Case& k : cases) {
    k.w.threads = 2;
    Conv2dConfig c = defaultConv2dConfig(k.w, isa, hostTarget());
    EXPECT_EQ(spell(c.parallel), k.parallel) << k.w.toJson().dump();
    ASSERT_TRUE(validateConv2dConfig(k.w, c).isOk())
        << validateConv2dConfig(k.w, c).error().message();
    checkConv(k.w, c, {{PostOpKind::BiasPerColumn}, {PostOpKind::Relu}}, seed++);
  }
}

// A config from uniformly drawn knob values (clamped by conv2dConfigFromKnobs; may be invalid).
Expected<Conv2dConfig> randomConfig(const Conv2dWorkload& w, Isa isa, std::mt19937& rng) {
  KnobSpace space = conv2dKnobSpace(w, isa);
  std::vector<nlohmann::json> values;
  for (const Knob& knob : space) values.push_back(knob.values[rng() % knob.values.size()]);
  return conv2dConfigFromKnobs(w, isa, space, values);
}

// Checks `w` under a random config of `isa` against the reference; false (nothing checked)
// when the workload or the drawn config is not valid.
bool checkRandomConfig(const Conv2dWorkload& w, Isa isa, const Epilogue& epi, std::mt19937& rng,
                       uint32_t seed, bool integers = false) {
  if (!w.check().isOk()) return false;
  auto c = randomConfig(w, isa, rng);
  EXPECT_TRUE(c.isOk());
  if (!c || !validateConv2dConfig(w, *c).isOk()) return false;
  checkConv(w, *c, epi, seed, integers);
  return true;
}

// bf16 convolutions (--precision bf16: the input rounded into a bf16 copy, weights in bf16
// input-channel pairs): random workloads with even channels per group, strides, pads,
// dilations, groups, 1x1 and strided channel slices read in place, random valid configs; every
// other trial on small integers, exactly.
TEST(Conv2dTemplate, Bf16RandomConfigsMatchReference) {
  std::mt19937 rng(17);
  int checked = 0;
  for (int trial = 0; trial < 120 && checked < 40; ++trial) {
    std::uniform_int_distribution<int64_t> ch(1, 24), hw(3, 12), k(1, 3), s(1, 2), p(0, 2);
    int64_t groups = trial % 7 == 3 ? 2 : 1;
    Conv2dWorkload w = conv(trial % 5 == 0 ? 2 : 1, 2 * groups * ch(rng), hw(rng), groups * ch(rng),
                            k(rng), s(rng), p(rng), trial % 9 == 4 ? 2 : 1);
    w.groups = groups;
    if (trial % 6 == 5 && !w.padded()) w.inLd = w.ic + 2 + rng() % 9;
    w.types = {DType::F32, DType::BF16, DType::F32, DType::F32};
    w.threads = trial % 3 == 0 ? 2 : 1;
    Epilogue epi = {{PostOpKind::BiasPerColumn}};
    if (trial % 2) epi.push_back({PostOpKind::Relu});
    if (trial % 4 == 3) epi.push_back({PostOpKind::AddTensor});
    checked +=
        checkRandomConfig(w, Isa::Avx512, epi, rng, static_cast<uint32_t>(trial), trial % 2 == 0);
  }
  EXPECT_GE(checked, 30);
  Conv2dWorkload odd = conv(1, 3, 8, 16, 3, 1, 1);
  odd.types = {DType::F32, DType::BF16, DType::F32, DType::F32};
  EXPECT_EQ(odd.check().error().message(),
            "bf16 conv2d workload: needs an even number of input channels per group and no "
            "channel_scale or NCHW input (ic=3, groups=1)");
}

TEST(Conv2dTemplate, RandomValidConfigsMatchReference) {
  std::mt19937 rng(3);
  int checked = 0;
  // As many draws on a machine with one ISA as on one with two, so the bound holds on both.
  const int trials = 60 / static_cast<int>(test::hostIsas().size());
  for (Isa isa : test::hostIsas())
    for (int trial = 0; trial < trials; ++trial) {
      std::uniform_int_distribution<int64_t> ch(1, 40), hw(3, 14), k(1, 3), s(1, 2), p(0, 2);
      Conv2dWorkload w =
          conv(trial % 5 == 0 ? 2 : 1, ch(rng), hw(rng), ch(rng), k(rng), s(rng), p(rng));
      w.threads = trial % 3 == 0 ? 2 : 1;
      Epilogue epi;
      if (trial % 2) epi.push_back({PostOpKind::BiasPerColumn});
      if (trial % 3 == 1) epi.push_back({PostOpKind::Clip, 0.f, 6.f});
      if (trial % 4 == 2) epi.push_back({PostOpKind::HardSwish});
      if (trial % 4 == 3) epi.push_back({PostOpKind::Sigmoid});
      if (trial % 4 == 3) epi.push_back({PostOpKind::AddTensor});
      if (trial % 4 == 1) epi.push_back({PostOpKind::Swish, 1.f});
      if (trial % 6 == 4) epi.push_back({PostOpKind::Tanh});
      if (trial % 5 == 3) epi.push_back({PostOpKind::ScalePerColumn});
      if (trial % 5 == 4) epi.push_back({PostOpKind::PReluPerColumn});
      checked += checkRandomConfig(w, isa, epi, rng, static_cast<uint32_t>(trial));
    }
  EXPECT_GE(checked, 20);
}

TEST(Conv2dTemplate, InvalidConfigsAreRejectedWithReasons) {
  Conv2dWorkload w = conv(1, 48, 8, 64, 3, 1, 1);
  Conv2dConfig c = defaultConv2dConfig(w, Isa::Avx512, hostTarget());
  c.icBlock = 20;
  EXPECT_EQ(validateConv2dConfig(w, c).error().message(),
            "conv2d config: ic_block=20 must divide ic=48");
  c = defaultConv2dConfig(w, Isa::Avx512, hostTarget());
  c.owBlock = 28;
  c.ocBlock = 64;
  EXPECT_NE(validateConv2dConfig(w, c).error().message().find("vector registers"),
            std::string::npos);
  auto back = Conv2dWorkload::fromJson(w.toJson());
  ASSERT_TRUE(back.isOk());
  EXPECT_EQ(back->toJson(), w.toJson());
}

} // namespace
} // namespace tunec

namespace tunec {
namespace {

// Squeeze-excite's channel scale as a 1x1 conv's prologue (B scaled by the input channel's
// scale in registers): random valid configs, so one and several input-channel blocks, two
// images, one and two threads, with epilogues.
TEST(Conv2dTemplate, ChannelScaledPointwiseConvsMatchReference) {
  std::mt19937 rng(23);
  Isa isa = widestIsa(hostTarget());
  int checked = 0;
  for (int trial = 0; trial < 80 && checked < 16; ++trial) {
    Conv2dWorkload w = conv(1 + trial % 2, 4 + rng() % 60, 3 + rng() % 8, 1 + rng() % 40, 1, 1, 0);
    w.channelScale = true;
    w.threads = trial % 3 == 0 ? 2 : 1;
    Epilogue epi = {{PostOpKind::BiasPerColumn}};
    if (trial % 2) epi.push_back({PostOpKind::AddTensor});
    checked += checkRandomConfig(w, isa, epi, rng, static_cast<uint32_t>(trial));
  }
  EXPECT_GE(checked, 10);
  Conv2dWorkload bad = conv(1, 8, 5, 8, 3, 1, 1);
  bad.channelScale = true;
  EXPECT_FALSE(bad.check().isOk()) << "a channel scale is a 1x1 conv's prologue only";
}

// An NCHW input reordered while it is padded (input_layout nchw: a model's image input read by
// its first conv): random padded workloads and valid configs, one and two images and threads.
TEST(Conv2dTemplate, NchwInputsReorderedWhilePaddedMatchReference) {
  std::mt19937 rng(43);
  Isa isa = widestIsa(hostTarget());
  int checked = 0;
  for (int trial = 0; trial < 80 && checked < 12; ++trial) {
    Conv2dWorkload w = conv(1 + trial % 2, 1 + rng() % 8, 5 + rng() % 12, 1 + rng() % 40,
                            3 + 2 * (trial % 3 == 0), 1 + trial % 2, 1 + trial % 2);
    w.nchwInput = true;
    w.threads = trial % 3 == 1 ? 2 : 1;
    checked += checkRandomConfig(w, isa, {{PostOpKind::BiasPerColumn}, {PostOpKind::Relu}}, rng,
                                 static_cast<uint32_t>(trial));
  }
  EXPECT_GE(checked, 8);
  auto back = Conv2dWorkload::fromJson(conv(1, 3, 9, 8, 3, 2, 1).toJson());
  ASSERT_TRUE(back.isOk());
  EXPECT_FALSE(back->nchwInput);
  Conv2dWorkload nchw = conv(1, 3, 9, 8, 3, 2, 1);
  nchw.nchwInput = true;
  back = Conv2dWorkload::fromJson(nchw.toJson());
  ASSERT_TRUE(back.isOk());
  EXPECT_TRUE(back->nchwInput);
  EXPECT_EQ(nchw.toJson().value("input_layout", ""), "nchw");
  Conv2dWorkload unpadded = conv(1, 3, 9, 8, 1, 1, 0);
  unpadded.nchwInput = true;
  EXPECT_FALSE(unpadded.check().isOk()) << "the reorder is the padded copy";
}

// Channel slices read and written in place (in_ld, out_ld: ShuffleNet's halves and a Concat's
// inputs): random workloads and valid configs, 1x1 and unpadded 3x3 (whose kw taps can no
// longer merge into one run), one and two threads, with epilogues; the output's other channels
// are left as they were.
TEST(Conv2dTemplate, StridedChannelSlicesMatchReference) {
  std::mt19937 rng(41);
  Isa isa = widestIsa(hostTarget());
  int checked = 0;
  for (int trial = 0; trial < 120 && checked < 24; ++trial) {
    int64_t k = trial % 3 == 2 ? 3 : 1;
    Conv2dWorkload w =
        conv(1 + trial % 2, 3 + rng() % 60, 4 + rng() % 8, 1 + rng() % 40, k, 1 + trial % 2, 0);
    if (trial % 4 != 1) w.inLd = w.ic + 1 + rng() % 40;
    if (trial % 4 != 0) w.outLd = w.oc + 1 + rng() % 40;
    w.threads = trial % 3 == 0 ? 2 : 1;
    Epilogue epi = {{PostOpKind::BiasPerColumn}, {PostOpKind::Relu}};
    if (trial % 5 == 1) epi.push_back({PostOpKind::AddTensor});
    checked += checkRandomConfig(w, isa, epi, rng, static_cast<uint32_t>(trial));
  }
  EXPECT_GE(checked, 16);
  auto back = Conv2dWorkload::fromJson(conv(1, 8, 5, 8, 1, 1, 0).toJson());
  ASSERT_TRUE(back.isOk());
  EXPECT_FALSE(back->toJson().contains("in_ld")) << "dense workloads keep their keys";
  Conv2dWorkload strided = conv(1, 8, 5, 8, 1, 1, 0);
  strided.inLd = 24, strided.outLd = 16;
  back = Conv2dWorkload::fromJson(strided.toJson());
  ASSERT_TRUE(back.isOk());
  EXPECT_EQ(back->inLd, 24);
  EXPECT_EQ(back->outLd, 16);
  Conv2dWorkload bad = conv(1, 8, 5, 8, 3, 1, 1);
  bad.inLd = 16;
  EXPECT_NE(bad.check().error().message().find("unpadded"), std::string::npos);
  bad = conv(1, 8, 5, 8, 1, 1, 0);
  bad.outLd = 4;
  EXPECT_FALSE(bad.check().isOk()) << "out_ld below oc";
}

// ---- int8: u8 input, s8 weights in input-channel quads, exact i32 sums ----

constexpr KernelTypes kInt8F32{DType::U8, DType::I8, DType::I32, DType::F32};

// The exact sums of an int8 convolution whose padding reads the input's zero point, NHWC
// (pixels of x `inLd` apart), from integer weights in ONNX order.
std::vector<int64_t> integerConv(const Conv2dWorkload& w, const std::vector<uint8_t>& x,
                                 const std::vector<float>& weights) {
  const int64_t icg = w.icPerGroup(), ocg = w.ocPerGroup(), inLd = w.inPixelStride();
  std::vector<int64_t> out(static_cast<size_t>(w.n * w.oh() * w.ow() * w.oc));
  size_t at = 0;
  for (int64_t n = 0; n < w.n; ++n)
    for (int64_t oh = 0; oh < w.oh(); ++oh)
      for (int64_t ow = 0; ow < w.ow(); ++ow)
        for (int64_t oc = 0; oc < w.oc; ++oc) {
          int64_t sum = 0, g = oc / ocg;
          for (int64_t kh = 0; kh < w.kh; ++kh)
            for (int64_t kw = 0; kw < w.kw; ++kw) {
              int64_t ih = oh * w.strideH - w.padTop + kh * w.dilationH;
              int64_t iw = ow * w.strideW - w.padLeft + kw * w.dilationW;
              bool inside = ih >= 0 && ih < w.h && iw >= 0 && iw < w.w;
              for (int64_t ic = 0; ic < icg; ++ic) {
                int64_t v =
                    inside
                        ? x[static_cast<size_t>(((n * w.h + ih) * w.w + iw) * inLd + g * icg + ic)]
                        : w.aZeroPoint;
                sum += v *
                       static_cast<int64_t>(
                           weights[static_cast<size_t>(((oc * icg + ic) * w.kh + kh) * w.kw + kw)]);
              }
            }
          out[at++] = sum;
        }
  return out;
}

// One int8 convolution under `c` through `j` against the integer reference: the sums exactly
// (no epilogue); column scale, bias, ReLU, a scale and a rounding (a quantization round trip's)
// in f32 as the epilogue computes them; and column scale, bias (epilogue 3: and an f32 residual
// addend; 4: a u8 one, dequantized as DequantizeLinear does) and ReLU requantized to u8 (round
// half to even, saturate), exactly. `small`: inputs in [0, 3] and weights in [-3, 3].
void checkInt8Conv(Jit& j, const Conv2dWorkload& workload, const Conv2dConfig& c, int epilogue,
                   std::mt19937& rng, bool small) {
  Conv2dWorkload w = workload;
  const int limit = c.isa == Isa::Avx2 ? kAvx2Int8WeightLimit : 127;
  std::vector<uint8_t> x(static_cast<size_t>(w.n * w.h * w.w * w.inPixelStride()));
  for (uint8_t& v : x) v = static_cast<uint8_t>(small ? rng() % 4 : rng() % 256);
  std::vector<float> weights(static_cast<size_t>(w.oc * w.icPerGroup() * w.kh * w.kw));
  for (float& v : weights)
    v = small ? static_cast<float>(static_cast<int>(rng() % 7) - 3)
              : static_cast<float>(static_cast<int>(rng() % (2 * limit + 1)) - limit);
  Epilogue epi;
  const float outScale = 0.5f + static_cast<float>(rng() % 100), outZero = 3.f;
  const float roundTripScale = 0.37f;
  if (epilogue > 0)
    epi = {{PostOpKind::ScalePerColumn}, {PostOpKind::BiasPerColumn}, {PostOpKind::Relu}};
  if (epilogue == 1)
    epi.insert(epi.end(), {{PostOpKind::Scale, roundTripScale}, {PostOpKind::Round}});
  const float residualScale = 3.7f, residualZero = 121.f;
  if (epilogue == 3) epi.insert(epi.begin() + 2, {PostOpKind::AddTensor}); // before the ReLU
  if (epilogue == 4)
    epi.insert(epi.begin() + 2, {PostOpKind::AddDequantizedU8, residualScale, residualZero});
  if (epilogue > 1) epi.push_back({PostOpKind::QuantizeU8, outScale, outZero});
  if (epilogue > 1) w.types.dst = DType::U8;
  std::vector<float> scale(static_cast<size_t>(w.oc)), bias(static_cast<size_t>(w.oc));
  for (size_t i = 0; i < scale.size(); ++i) {
    scale[i] = 0.25f + static_cast<float>(rng() % 64) / 32.f;
    bias[i] = static_cast<float>(static_cast<int>(rng() % 2001) - 1000);
  }
  auto kernel = compileConv2d(j, w, c, epi, weights.data());
  ASSERT_TRUE(kernel.isOk()) << kernel.error().message() << " " << w.toJson().dump();
  const int64_t outLd = w.outPixelStride(), pixels = w.n * w.oh() * w.ow();
  std::vector<float> outF(static_cast<size_t>(pixels * outLd), -7.f);
  std::vector<uint8_t> outU(static_cast<size_t>(pixels * outLd), 77);
  void* out = epilogue > 1 ? static_cast<void*>(outU.data()) : outF.data();
  // The residual addend (f32, dense, of the output's shape: a u8 C adds an f32 one).
  std::vector<float> addend(static_cast<size_t>(pixels * w.oc));
  for (float& a : addend) a = static_cast<float>(static_cast<int>(rng() % 4001) - 2000);
  std::vector<uint8_t> addendU8(static_cast<size_t>(epilogue == 4 ? pixels * w.oc : 0));
  for (uint8_t& a : addendU8) a = static_cast<uint8_t>(rng() % 256);
  // An NCHW input holds the same values, plane by plane (the reference reads NHWC).
  std::vector<uint8_t> planes(x.size());
  if (w.nchwInput)
    for (int64_t b = 0; b < w.n; ++b)
      for (int64_t ch = 0; ch < w.ic; ++ch)
        for (int64_t yx = 0; yx < w.h * w.w; ++yx)
          planes[static_cast<size_t>((b * w.ic + ch) * w.h * w.w + yx)] =
              x[static_cast<size_t>((b * w.h * w.w + yx) * w.ic + ch)];
  kernel->run(w.nchwInput ? planes.data() : x.data(), out, bias.data(),
              epilogue == 4 ? static_cast<void*>(addendU8.data()) : addend.data(), nullptr,
              scale.data());
  std::vector<int64_t> sums = integerConv(w, x, weights);
  for (int64_t p = 0; p < pixels; ++p)
    for (int64_t ch = 0; ch < outLd; ++ch) {
      const size_t i = static_cast<size_t>(p * outLd + ch);
      std::string where = "pixel " + std::to_string(p) + " channel " + std::to_string(ch) + " of " +
                          w.toJson().dump() + " with config " + c.toJson().dump();
      if (ch >= w.oc) { // past the output's channels (out_ld): untouched
        ASSERT_TRUE(epilogue > 1 ? outU[i] == 77 : outF[i] == -7.f) << where;
        continue;
      }
      const int64_t sum = sums[static_cast<size_t>(p * w.oc + ch)];
      float v = static_cast<float>(sum);
      if (epilogue > 0) v = v * scale[static_cast<size_t>(ch)] + bias[static_cast<size_t>(ch)];
      if (epilogue == 3) v += addend[static_cast<size_t>(p * w.oc + ch)];
      if (epilogue == 4) // DequantizeLinear's f32: the difference is exact, then one rounding
        v += static_cast<float>(static_cast<int32_t>(addendU8[static_cast<size_t>(p * w.oc + ch)]) -
                                static_cast<int32_t>(residualZero)) *
             residualScale;
      if (epilogue > 0) v = std::max(v, 0.f);
      if (epilogue == 1) v = std::nearbyint(v * roundTripScale);
      if (epilogue > 1) {
        float q = std::clamp(std::nearbyint(v / outScale) + outZero, 0.f, 255.f);
        ASSERT_EQ(static_cast<int>(outU[i]), static_cast<int>(q)) << where;
      } else {
        ASSERT_EQ(outF[i], v) << where << " (sum " << sum << ")";
      }
    }
}

// Every int8 config the tuner can draw for random workloads (odd sizes, strides, pads with
// zero and nonzero zero points, dilations, groups, 1x1 channel slices read and written in
// place, channels of one group that are no whole quads (rounded up by the padded copy), NCHW
// inputs, two threads), on AVX2 (vpmaddubsw, 7-bit weights; real on every tunec CPU) and on
// AVX-512 VNNI (vpdpbusd: real where this CPU has it, else its twin), equal to the integer
// reference bit for bit; every fourth trial on small integers.
TEST(Conv2dInt8, RandomConfigsEqualTheIntegerReference) {
  const bool vnniHere = hostTarget().avx512vnni && targetSupports(hostTarget(), Isa::Avx512);
  std::mt19937 rng(29);
  int checked = 0, zeroPointPadded = 0, requantized = 0, residual = 0, residualU8 = 0,
      roundedUp = 0, nchw = 0;
  for (int trial = 0; trial < 160 && checked < 56; ++trial) {
    const Isa isa = trial % 2 ? Isa::Avx512 : Isa::Avx2;
    std::uniform_int_distribution<int64_t> ch(1, 10), hw(3, 11), k(1, 3), s(1, 2), p(0, 2);
    int64_t groups = trial % 7 == 3 ? 2 : 1;
    // Every fourth trial of one group: 1 to 7 channels, an RGB image's 3 among them.
    const int64_t channels =
        groups == 1 && trial % 4 == 2 ? 1 + static_cast<int64_t>(rng() % 7) : 4 * groups * ch(rng);
    Conv2dWorkload w = conv(trial % 5 == 0 ? 2 : 1, channels, hw(rng), groups * (1 + rng() % 40),
                            k(rng), s(rng), p(rng), trial % 9 == 4 ? 2 : 1);
    w.groups = groups;
    w.types = kInt8F32;
    w.aZeroPoint = trial % 3 == 0 ? 0 : 1 + static_cast<int64_t>(rng() % 255);
    if (trial % 6 == 5 && !w.padded()) w.inLd = w.ic + 4 * (1 + rng() % 4);
    if (trial % 8 == 7 && !w.padded()) w.outLd = w.oc + 1 + rng() % 9;
    if (trial % 3 == 2 && w.padded()) w.nchwInput = true;
    w.threads = trial % 3 == 1 ? 2 : 1;
    if (!w.check().isOk()) continue;
    auto c = randomConfig(w, isa, rng);
    ASSERT_TRUE(c.isOk()) << c.error().message();
    if (!validateConv2dConfig(w, *c).isOk()) continue;
    const int epilogue = trial % 8 == 7 ? 4 : trial % 4; // every other residual reads u8
    Jit& j = isa == Isa::Avx512 && !vnniHere ? test::twinJit() : jit();
    checkInt8Conv(j, w, *c, epilogue, rng, trial % 4 == 3);
    if (HasFatalFailure()) return;
    ++checked;
    zeroPointPadded += w.padded() && w.aZeroPoint != 0;
    requantized += epilogue >= 2;
    residual += epilogue == 3;
    residualU8 += epilogue == 4;
    roundedUp += w.icPerGroup() % 4 != 0;
    nchw += w.nchwInput;
  }
  EXPECT_GE(checked, 50);
  EXPECT_GE(zeroPointPadded, 6) << "padding with a nonzero zero point is covered";
  EXPECT_GE(requantized, 8);
  EXPECT_GE(residual, 3) << "a requantizing epilogue with a residual add is covered";
  EXPECT_GE(residualU8, 3) << "a requantizing epilogue with a u8 residual add is covered";
  EXPECT_GE(roundedUp, 6) << "channels rounded up to quads are covered";
  EXPECT_GE(nchw, 6) << "NCHW inputs are covered";
}

TEST(Conv2dInt8, WorkloadsAndWeightsOutsideTheKernelAreRefusedByName) {
  Conv2dWorkload w = conv(1, 6, 5, 8, 3, 1, 1); // 2 groups of 3 channels (one group rounds up)
  w.groups = 2;
  w.types = kInt8F32;
  EXPECT_NE(w.check().error().message().find("needs a multiple of 4 input channels per group"),
            std::string::npos);
  w = conv(1, 8, 5, 8, 3, 1, 1);
  w.types = kInt8F32;
  w.aZeroPoint = 300;
  EXPECT_NE(w.check().error().message().find("a_zero_point=300 is not a u8"), std::string::npos);
  w.aZeroPoint = 128;
  auto back = Conv2dWorkload::fromJson(w.toJson());
  ASSERT_TRUE(back.isOk()) << back.error().message();
  EXPECT_EQ(back->aZeroPoint, 128);
  EXPECT_EQ(back->types, kInt8F32);
  Conv2dConfig c = defaultConv2dConfig(w, Isa::Avx2, hostTarget());
  ASSERT_TRUE(validateConv2dConfig(w, c).isOk());
  EXPECT_EQ(c.icBlock % 4, 0);
  c.icBlock = 2;
  EXPECT_NE(validateConv2dConfig(w, c).error().message().find("multiple of 4"), std::string::npos);
  c = defaultConv2dConfig(w, Isa::Avx2, hostTarget());
  std::vector<float> weights(static_cast<size_t>(8 * 8 * 9), 1.f);
  weights[41] = -65.f;
  auto kernel = compileConv2d(jit(), w, c, {}, weights.data());
  ASSERT_FALSE(kernel.isOk());
  EXPECT_NE(kernel.error().message().find("conv2d: the AVX2 int8 kernel needs 7-bit weights"),
            std::string::npos)
      << kernel.error().message();
  EXPECT_NE(kernel.error().message().find("weight 41 is -65"), std::string::npos);
}

} // namespace
} // namespace tunec

namespace tunec {
namespace {

// A dilated kernel larger than the padded input has no output (ONNX's floor, not C's truncation
// of a negative quotient toward zero, which gave one row: the kernel then read past the input).
TEST(Conv2dTemplate, ADilatedKernelLargerThanTheInputIsAnEmptyOutput) {
  Conv2dWorkload w = conv(1, 16, 4, 23, 3, 2, 0, 2); // a 5x5 span over 4x5
  EXPECT_EQ(w.oh(), 0);
  EXPECT_EQ(w.ow(), 1);
  Status s = w.check();
  ASSERT_FALSE(s.isOk());
  EXPECT_NE(s.error().message().find(
                "empty output: its dilated kernel (5x5) is larger than the padded input (4x5)"),
            std::string::npos)
      << s.error().message();
  w.padTop = 1; // 5 rows: one output row
  EXPECT_EQ(w.oh(), 1);
  EXPECT_TRUE(w.check().isOk());
  DepthwiseWorkload d;
  d.c = 8, d.h = 4, d.w = 5, d.kh = d.kw = 3, d.dilationH = d.dilationW = 2;
  EXPECT_EQ(d.oh(), 0);
  EXPECT_NE(d.check().error().message().find("is larger than the padded input (4x5)"),
            std::string::npos);
}

} // namespace
} // namespace tunec

namespace tunec {
namespace {

// ---- convolutions on AMX tiles (conv2d_amx_kernel.cpp): through the twins on every machine ----

// A random workload AMX runs: one group, input channels in whole 64-byte tile rows (64 u8 or 32
// bf16 per row), 1 to 80 output channels (tails of the 16-column tiles), kernels 1x1 to 3x3,
// strides 1 and 2 (unequal ones too), pads 0 to 2 (asymmetric too), dilation 2, images from
// 2x3 to 12x13; every fourth a 1x1 without padding, which reads its input in place (stride 1) or
// a copy of the pixels it reads (strided).
Conv2dWorkload amxWorkload(std::mt19937& rng, int trial, int64_t unit) {
  std::uniform_int_distribution<int64_t> hw(2, 12), k(1, 3), s(1, 2), p(0, 2);
  // (int8: every third trial 48, 96 or 144 channels, rounded up to tile rows.)
  const int64_t channels = unit == 64 && trial % 3 == 2 ? 48 : unit;
  Conv2dWorkload w =
      conv(trial % 5 == 0 ? 2 : 1, channels * (1 + static_cast<int64_t>(rng() % 3)), hw(rng),
           1 + static_cast<int64_t>(rng() % 80), k(rng), s(rng), p(rng), trial % 9 == 4 ? 2 : 1);
  if (trial % 4 == 0) w.kh = w.kw = 1, w.strideH = w.strideW = 1, w.padTop = w.padLeft = 0;
  if (trial % 4 == 0) w.padBottom = w.padRight = 0, w.dilationH = w.dilationW = 1;
  if (trial % 8 == 4) w.strideH = 2, w.strideW = 1 + trial % 3; // reads a subsampled copy
  if (trial % 4 == 1) w.strideH = 3 - w.strideW;                // unequal strides
  if (trial % 7 == 2) w.padBottom = 0, w.padLeft = (w.padLeft + 1) % 3;
  w.threads = trial % 3 == 1 ? 2 : 1;
  return w;
}

// int8 on tdpbusd: random workloads and configs from the AMX knob space, every epilogue
// (f32 out, f32 with a round trip, requantized u8 out, with an f32 or a u8 residual), zero
// points that pad, NCHW inputs, channel slices, two threads; equal to the integer reference bit
// for bit, every fourth trial on small integers.
TEST(Conv2dAmxTwin, Int8RandomConfigsEqualTheIntegerReference) {
  std::mt19937 rng(64);
  int checked = 0, inPlace = 0, subsampled = 0, roundedUp = 0, strided = 0, unequal = 0,
      requantized = 0, residualU8 = 0, ocTails = 0, wideGrid = 0;
  for (int trial = 0; trial < 200 && checked < 40; ++trial) {
    Conv2dWorkload w = amxWorkload(rng, trial, 64);
    w.types = kInt8F32;
    w.aZeroPoint = trial % 3 == 0 ? 0 : 1 + static_cast<int64_t>(rng() % 255);
    if (trial % 6 == 0 && trial % 12 && !w.padded()) w.inLd = w.ic + 4 * (1 + rng() % 4);
    if (trial % 8 == 7 && !w.padded()) w.outLd = w.oc + 1 + rng() % 9;
    if (trial % 3 == 2 && w.padded()) w.nchwInput = true;
    if (!w.check().isOk()) continue;
    auto c = randomConfig(w, Isa::Amx, rng);
    ASSERT_TRUE(c.isOk()) << c.error().message();
    if (!validateConv2dConfig(w, *c).isOk()) continue;
    const int epilogue = trial % 5;
    checkInt8Conv(test::twinJit(), w, *c, epilogue, rng, trial % 4 == 3);
    if (HasFatalFailure()) return;
    ++checked;
    inPlace += !w.copiesInput() && w.kh == 1 && w.kw == 1 && w.strideH == 1 && w.strideW == 1;
    subsampled += subsamplesInput(w, Isa::Amx);
    roundedUp += w.icKernelPerGroup(Isa::Amx) != w.ic;
    strided += w.strideH > 1;
    unequal += w.strideH != w.strideW;
    requantized += epilogue >= 2;
    residualU8 += epilogue == 4;
    ocTails += w.oc % c->ocBlock != 0;
    wideGrid += c->owBlock == 32;
  }
  EXPECT_GE(checked, 36);
  EXPECT_GE(inPlace, 3) << "1x1 convolutions that read their input in place are covered";
  EXPECT_GE(subsampled, 3) << "strided 1x1 convolutions that copy the pixels they read";
  EXPECT_GE(roundedUp, 8) << "channels rounded up to tile rows";
  EXPECT_GE(strided, 8) << "row strides (the input's rows in phase planes) are covered";
  EXPECT_GE(unequal, 4);
  EXPECT_GE(requantized, 8);
  EXPECT_GE(residualU8, 4);
  EXPECT_GE(ocTails, 10);
  EXPECT_GE(wideGrid, 8) << "tiles of 32 virtual pixels are covered";
}

// bf16 on tdpbf16ps (the f32 input rounded into the phase-plane copy): random workloads and
// configs against the reference on the rounded input and weights, within f32 accumulation's
// bound, and exactly on small integers (every other trial).
TEST(Conv2dAmxTwin, Bf16RandomConfigsMatchTheReference) {
  std::mt19937 rng(65);
  int checked = 0, strided = 0;
  for (int trial = 0; trial < 120 && checked < 30; ++trial) {
    Conv2dWorkload w = amxWorkload(rng, trial, 32);
    w.types = {DType::F32, DType::BF16, DType::F32, DType::F32};
    if (trial % 6 == 0 && !w.padded()) w.inLd = w.ic + 2 + rng() % 9;
    Epilogue epi = {{PostOpKind::BiasPerColumn}};
    if (trial % 2) epi.push_back({PostOpKind::Relu});
    if (trial % 4 == 3) epi.push_back({PostOpKind::AddTensor});
    const bool ran =
        checkRandomConfig(w, Isa::Amx, epi, rng, static_cast<uint32_t>(trial), trial % 2 == 0);
    if (HasFatalFailure()) return;
    checked += ran;
    strided += ran && w.strideH > 1;
  }
  EXPECT_GE(checked, 24);
  EXPECT_GE(strided, 6);
}

// Exactly what the instruction computes: a bf16 AMX convolution equals, bit for bit, the AMX
// matmul (whose twin equals the reference that splits K as tdpbf16ps does: amx_test.cpp) over
// its im2col matrix (columns in the convolution's tap-major order, padding as zeros), whatever
// the stride, padding, tile grid and input-channel block.
TEST(Conv2dAmxTwin, Bf16EqualsTheAmxMatmulOfItsIm2colBitForBit) {
  std::mt19937 rng(67);
  int checked = 0;
  for (int trial = 0; trial < 8; ++trial) {
    Conv2dWorkload w = conv(1, 64, 9, 40, 3, 1 + trial % 2, 1, 1);
    if (trial % 4 == 3) w.padBottom = 0, w.strideH = 1;
    w.types = {DType::F32, DType::BF16, DType::F32, DType::F32};
    Conv2dConfig c = defaultConv2dConfig(w, Isa::Amx, test::twinJit().target());
    if (trial % 2) c.owBlock = 16, c.ocBlock = 48, c.icBlock = 32;
    ASSERT_TRUE(validateConv2dConfig(w, c).isOk()) << validateConv2dConfig(w, c).error().message();
    Tensor x = randomTensor(Shape{w.n, w.h, w.w, w.ic}, rng);
    Tensor weights = randomTensor(Shape{w.oc, w.ic, w.kh, w.kw}, rng);
    std::vector<float> bias = randomVector(static_cast<size_t>(w.oc), rng);
    const Epilogue epi = {{PostOpKind::BiasPerColumn}, {PostOpKind::Relu}};
    auto kernel = compileConv2d(test::twinJit(), w, c, epi, weights.dataAs<float>());
    ASSERT_TRUE(kernel.isOk()) << kernel.error().message();
    const int64_t pixels = w.oh() * w.ow(), k = w.kh * w.kw * w.ic;
    std::vector<float> out(static_cast<size_t>(pixels * w.oc));
    kernel->run(x.dataAs<float>(), out.data(), bias.data());
    // im2col: row p (output pixel), column (kh, kw, ic); B: [k][oc].
    std::vector<float> a(static_cast<size_t>(pixels * k), 0.f), b(static_cast<size_t>(k * w.oc));
    for (int64_t p = 0; p < pixels; ++p)
      for (int64_t kh = 0; kh < w.kh; ++kh)
        for (int64_t kw = 0; kw < w.kw; ++kw) {
          const int64_t y = p / w.ow() * w.strideH - w.padTop + kh * w.dilationH,
                        xx = p % w.ow() * w.strideW - w.padLeft + kw * w.dilationW;
          if (y < 0 || y >= w.h || xx < 0 || xx >= w.w) continue;
          std::copy_n(x.dataAs<float>() + (y * w.w + xx) * w.ic, w.ic,
                      a.data() + p * k + (kh * w.kw + kw) * w.ic);
        }
    for (int64_t o = 0; o < w.oc; ++o)
      for (int64_t ch = 0; ch < w.ic; ++ch)
        for (int64_t kh = 0; kh < w.kh; ++kh)
          for (int64_t kw = 0; kw < w.kw; ++kw)
            b[static_cast<size_t>(((kh * w.kw + kw) * w.ic + ch) * w.oc + o)] =
                weights.dataAs<float>()[((o * w.ic + ch) * w.kh + kh) * w.kw + kw];
    MatmulWorkload mw;
    mw.m = pixels, mw.n = w.oc, mw.k = k, mw.constantB = true, mw.types = w.types;
    MatmulConfig mc = defaultMatmulConfig(mw, Isa::Amx, test::twinJit().target());
    mc.mr = c.owBlock, mc.nr = c.ocBlock, mc.kc = k; // the same grid, one K block
    mc.mc = (pixels + mc.mr - 1) / mc.mr * mc.mr, mc.nc = (w.oc + mc.nr - 1) / mc.nr * mc.nr;
    auto matmul = compileMatmul(test::twinJit(), mw, mc, epi, b.data());
    ASSERT_TRUE(matmul.isOk()) << matmul.error().message();
    std::vector<float> want(out.size());
    matmul->run(a.data(), nullptr, want.data(), bias.data());
    for (size_t i = 0; i < out.size(); ++i)
      ASSERT_EQ(std::bit_cast<uint32_t>(out[i]), std::bit_cast<uint32_t>(want[i]))
          << "element " << i << " of " << w.toJson().dump() << " with " << c.toJson().dump()
          << ": conv " << out[i] << ", matmul " << want[i];
    ++checked;
  }
  EXPECT_EQ(checked, 8);
}

// A strided 1x1 convolution without padding whose input is copied (rounded to bf16, or for
// AMX) copies only the pixels it reads and runs as the 1x1 of stride 1 over them: bf16 on
// vdpbf16ps and on AMX, int8 on AMX, odd sizes, equal and unequal strides, channel slices.
TEST(Conv2dTemplate, StridedPointwiseConvsCopyOnlyThePixelsTheyRead) {
  std::mt19937 rng(68);
  int checked = 0;
  for (auto [sh, sw] : {std::pair{2, 2}, {2, 1}, {1, 3}}) {
    Conv2dWorkload w = conv(2, 64, 9, 40, 1, 1, 0);
    w.strideH = sh, w.strideW = sw;
    w.inLd = sw == 3 ? 70 : 0; // a channel slice of a wider tensor
    w.types = {DType::F32, DType::BF16, DType::F32, DType::F32};
    ASSERT_TRUE(subsamplesInput(w, Isa::Avx512));
    EXPECT_EQ(subsampledWorkload(w).h, w.oh());
    EXPECT_EQ(subsampledWorkload(w).w, w.ow());
    const Epilogue epi = {{PostOpKind::BiasPerColumn}, {PostOpKind::AddTensor}};
    for (Isa isa : {Isa::Avx512, Isa::Amx}) {
      checkConv(w, defaultConv2dConfig(w, isa, test::twinJit().target()), epi, 5, false);
      if (HasFatalFailure()) return;
      ++checked;
    }
    Conv2dWorkload q = w;
    q.types = kInt8F32, q.aZeroPoint = 17;
    EXPECT_FALSE(subsamplesInput(q, Isa::Avx512)) << "read in place at its stride";
    ASSERT_TRUE(subsamplesInput(q, Isa::Amx));
    for (int epilogue : {0, 4}) {
      checkInt8Conv(test::twinJit(), q, defaultConv2dConfig(q, Isa::Amx, test::twinJit().target()),
                    epilogue, rng, false);
      if (HasFatalFailure()) return;
      ++checked;
    }
  }
  EXPECT_EQ(checked, 12);
}

// --precision bf16 between layers: a bf16 convolution that reads its input as bf16 (a bf16
// kernel's output) or writes its output as bf16 equals, bit for bit, the convolution of the f32
// input (which it rounds itself) with its output rounded to bf16 once: the same tiles and sums,
// the rounding moved from the reader to the producer. Vector (vdpbf16ps, or its twin) and AMX
// (twins) kernels under random workloads and configs: padded (the bf16 input copied as it is),
// 1x1 read in place, strided (in place on vectors, subsampled on AMX), channel slices, dilations,
// groups, and a residual read as bf16 beside a bf16 output.
TEST(Conv2dTemplate, Bf16ActivationsEqualTheF32FormRoundedOnceBitForBit) {
  std::mt19937 rng(70);
  int checked = 0, amx = 0, copied = 0, inPlace = 0, bf16In = 0, bf16Out = 0, residual = 0;
  for (int trial = 0; trial < 200 && checked < 48; ++trial) {
    const Isa isa = trial % 2 ? Isa::Amx : Isa::Avx512;
    std::uniform_int_distribution<int64_t> ch(1, 24), hw(3, 12), k(1, 3), s(1, 2), p(0, 2);
    Conv2dWorkload w = isa == Isa::Amx ? amxWorkload(rng, trial, 32)
                                       : conv(trial % 5 == 0 ? 2 : 1, 2 * ch(rng), hw(rng), ch(rng),
                                              k(rng), s(rng), p(rng), trial % 9 == 4 ? 2 : 1);
    if (isa == Isa::Avx512 && trial % 7 == 3 && w.ic % 4 == 0) w.groups = 2, w.oc *= 2;
    if (isa == Isa::Avx512 && trial % 3 == 0) w.threads = 2;
    if (trial % 5 == 1 && !w.padded()) w.inLd = w.ic + 2 + static_cast<int64_t>(rng() % 9);
    w.types = {DType::F32, DType::BF16, DType::F32, DType::F32};
    auto c = randomConfig(w, isa, rng);
    if (!w.check().isOk() || !c || !validateConv2dConfig(w, *c).isOk()) continue;
    Conv2dWorkload stored = w; // 0: bf16 in, 1: bf16 out, 2: both
    const int form = trial / 2 % 3;
    stored.types.src = form != 1 ? DType::BF16 : DType::F32;
    stored.types.dst = form != 0 ? DType::BF16 : DType::F32;
    ASSERT_TRUE(validateConv2dConfig(stored, *c).isOk())
        << validateConv2dConfig(stored, *c).error().message();
    Epilogue epi = {{PostOpKind::BiasPerColumn}};
    if (trial % 3) epi.push_back({PostOpKind::Relu});
    if (trial % 4 == 3) epi.push_back({PostOpKind::AddTensor});
    const bool outBf16 = stored.types.dst == DType::BF16;
    // The input (a channel slice of a wider tensor with in_ld) as f32 and as its bf16 bits; the
    // residual as bf16 values beside a bf16 output (read as bf16 there).
    std::vector<float> x =
        randomVector(static_cast<size_t>(w.n * w.h * w.w * w.inPixelStride()), rng);
    std::vector<uint16_t> xBits(x.size());
    for (size_t i = 0; i < x.size(); ++i) xBits[i] = floatToBf16(x[i]);
    const size_t outs = static_cast<size_t>(w.n * w.oh() * w.ow() * w.oc);
    std::vector<float> addend = randomVector(outs, rng), bias = randomVector(w.oc, rng);
    std::vector<uint16_t> addendBits(outs);
    for (size_t i = 0; i < outs; ++i) {
      addendBits[i] = floatToBf16(addend[i]);
      if (outBf16) addend[i] = bf16ToFloat(addendBits[i]);
    }
    Tensor weights = randomTensor(Shape{w.oc, w.icPerGroup(), w.kh, w.kw}, rng);
    Jit& j = isa == Isa::Amx ? test::twinJit() : test::bf16Jit();
    auto f32Form = compileConv2d(j, w, *c, epi, weights.dataAs<float>());
    auto storedForm = compileConv2d(j, stored, *c, epi, weights.dataAs<float>());
    ASSERT_TRUE(f32Form.isOk()) << f32Form.error().message();
    ASSERT_TRUE(storedForm.isOk()) << storedForm.error().message();
    std::vector<float> want(outs, std::nanf("")), got(outs, std::nanf(""));
    std::vector<uint16_t> gotBits(outs, floatToBf16(std::nanf("")));
    f32Form->run(x.data(), want.data(), bias.data(), addend.data());
    storedForm->run(stored.types.src == DType::BF16 ? static_cast<const void*>(xBits.data())
                                                    : x.data(),
                    outBf16 ? static_cast<void*>(gotBits.data()) : got.data(), bias.data(),
                    outBf16 ? static_cast<const void*>(addendBits.data()) : addend.data());
    ASSERT_EQ(test::differenceFromRoundedOnce(want, got, gotBits, outBf16), "")
        << stored.toJson().dump() << " with config " << c->toJson().dump();
    ++checked;
    amx += isa == Isa::Amx;
    copied += stored.types.src == DType::BF16 && w.padded();
    inPlace += stored.types.src == DType::BF16 && !w.padded();
    bf16In += stored.types.src == DType::BF16;
    bf16Out += outBf16;
    residual += outBf16 && epi.back().kind == PostOpKind::AddTensor;
  }
  EXPECT_GE(checked, 40);
  EXPECT_GE(amx, 12);
  EXPECT_GE(copied, 8) << "bf16 inputs copied into the padded buffer as they are";
  EXPECT_GE(inPlace, 6) << "bf16 inputs read where they are";
  EXPECT_GE(bf16In, 20);
  EXPECT_GE(bf16Out, 20);
  EXPECT_GE(residual, 3);
}

// What AMX cannot run is refused by name: channels that do not fill tile rows, grids over 8
// tiles, input-channel blocks off the tile rows; the ISA choice sends those to the vector ISAs.
TEST(Conv2dAmxTwin, ConvolutionsOffTheTilesAreRefusedByNameAndRunOnVectors) {
  Conv2dWorkload w = conv(1, 40, 8, 32, 3, 1, 1); // 64 would be 60% more channels
  w.types = kInt8F32;
  Conv2dConfig c = defaultConv2dConfig(w, Isa::Amx, test::twinJit().target());
  Status s = validateConv2dConfig(w, c);
  ASSERT_FALSE(s.isOk());
  EXPECT_NE(s.error().message().find("whole 64-byte tile rows (within a third more when rounded "
                                     "up to 64), not ic=40 in 1 group(s); use avx512 or avx2"),
            std::string::npos)
      << s.error().message();
  w.ic = 96; // rounded up to 128 on AMX
  EXPECT_EQ(w.icKernelPerGroup(Isa::Amx), 128);
  EXPECT_EQ(kernelIsa(w, Isa::Avx512, test::twinJit().target()), Isa::Amx);
  w.ic = 40;
  EXPECT_EQ(kernelIsa(w, Isa::Avx512, test::twinJit().target()), Isa::Avx512);
  w.ic = 128;
  EXPECT_EQ(kernelIsa(w, Isa::Avx512, test::twinJit().target()), Isa::Amx);
  EXPECT_EQ(kernelIsa(w, Isa::Avx512, hostTarget()), hostTarget().amx ? Isa::Amx : Isa::Avx512);
  c = defaultConv2dConfig(w, Isa::Amx, test::twinJit().target());
  EXPECT_TRUE(validateConv2dConfig(w, c).isOk());
  c.owBlock = 32, c.ocBlock = 48; // 6 C + 2 A + 3 B tiles
  EXPECT_NE(validateConv2dConfig(w, c).error().message().find("at most 8 tiles (11)"),
            std::string::npos);
  c.owBlock = 16, c.icBlock = 32;
  EXPECT_NE(
      validateConv2dConfig(w, c).error().message().find("ic_block=32 must be a multiple of 64"),
      std::string::npos);
  Conv2dWorkload f32 = w;
  f32.types = {};
  EXPECT_NE(validateConv2dConfig(f32, defaultConv2dConfig(f32, Isa::Amx, hostTarget()))
                .error()
                .message()
                .find("AMX runs int8 and bf16 convolutions, not"),
            std::string::npos);
  EXPECT_EQ(kernelIsa(f32, Isa::Avx512, test::twinJit().target()), Isa::Avx512);
}

// On a machine with AMX the real tile instructions equal their twins bit for bit, from two
// threads at once.
TEST(Conv2dAmxReal, EqualsItsTwinBitForBitFromTwoThreads) {
  SKIP_WITHOUT_REAL_AMX();
  std::mt19937 rng(66);
  for (int trial = 0; trial < 12; ++trial) {
    Conv2dWorkload w = amxWorkload(rng, trial, 64);
    w.types = kInt8F32;
    w.aZeroPoint = 1 + static_cast<int64_t>(rng() % 255);
    if (!w.check().isOk()) continue;
    Conv2dConfig c = defaultConv2dConfig(w, Isa::Amx, hostTarget());
    std::vector<float> weights(static_cast<size_t>(w.oc * w.ic * w.kh * w.kw));
    for (float& v : weights) v = static_cast<float>(static_cast<int>(rng() % 255) - 127);
    std::vector<uint8_t> x(static_cast<size_t>(w.n * w.h * w.w * w.ic));
    for (uint8_t& v : x) v = static_cast<uint8_t>(rng());
    std::vector<float> bias(static_cast<size_t>(w.oc), 0.5f), scale(static_cast<size_t>(w.oc));
    for (float& v : scale) v = 0.001f * static_cast<float>(1 + rng() % 100);
    Epilogue epi = {{PostOpKind::ScalePerColumn}, {PostOpKind::BiasPerColumn}, {PostOpKind::Relu}};
    const size_t outSize = static_cast<size_t>(w.n * w.oh() * w.ow() * w.oc);
    auto run = [&](Jit& j) {
      auto kernel = compileConv2d(j, w, c, epi, weights.data());
      EXPECT_TRUE(kernel.isOk()) << kernel.error().message();
      std::vector<float> out(outSize, -1.f);
      if (kernel) kernel->run(x.data(), out.data(), bias.data(), nullptr, nullptr, scale.data());
      return out;
    };
    std::vector<float> twin = run(test::twinJit()), real[2];
    std::thread workers[2];
    for (int th = 0; th < 2; ++th) workers[th] = std::thread([&, th] { real[th] = run(jit()); });
    for (auto& t : workers) t.join();
    for (const auto& r : real)
      for (size_t i = 0; i < outSize; ++i)
        ASSERT_EQ(std::bit_cast<uint32_t>(r[i]), std::bit_cast<uint32_t>(twin[i]))
            << "element " << i << " of " << w.toJson().dump();
  }
}

} // namespace
} // namespace tunec
