// The depthwise template against the reference executor's grouped Conv (group = channels):
// default and random configs over odd sizes, strides, pads, dilations and channel tails, with
// epilogues. Tolerance: 4 * kh*kw * eps + 1e-5 (inputs in [-1, 1]).
#include "codegen/depthwise_kernel.h"
#include "ir/graph.h"
#include "reference/reference.h"
#include "support/host.h"
#include "test_support.h"

#include <bit>
#include <cmath>
#include <cstdio>
#include <gtest/gtest.h>
#include <random>

namespace tunec {
namespace {

using test::jit;
using test::randomTensor;
using test::randomVector;

void checkDepthwise(const DepthwiseWorkload& w, const DepthwiseConfig& c, const Epilogue& epi,
                    uint32_t seed) {
  std::mt19937 rng(seed);
  Tensor x = randomTensor(Shape{w.n, w.h, w.w, w.c}, rng);
  Tensor weights = randomTensor(Shape{w.c, 1, w.kh, w.kw}, rng);
  Tensor bias = randomTensor(Shape{w.c}, rng);
  Tensor addend = randomTensor(Shape{w.n, w.oh(), w.ow(), w.c}, rng);
  auto kernel = compileDepthwise(jit(), w, c, epi, weights.dataAs<float>());
  ASSERT_TRUE(kernel.isOk()) << kernel.error().message();
  Tensor out = randomTensor(Shape{w.n, w.oh(), w.ow(), w.c}, rng);
  Tensor columnScale = randomTensor(Shape{w.c}, rng);
  kernel->run(x.dataAs<float>(), out.dataAs<float>(), bias.dataAs<float>(), addend.dataAs<float>(),
              columnScale.dataAs<float>());

  ConvAttrs attrs{{w.kh, w.kw},
                  {w.strideH, w.strideW},
                  {w.padTop, w.padLeft, w.padBottom, w.padRight},
                  {w.dilationH, w.dilationW},
                  w.c};
  Tensor want = test::referenceNhwcConv(attrs, epi, x, weights, bias, addend, columnScale);
  ASSERT_FALSE(want.empty());
  double tol = 4.0 * static_cast<double>(w.kh * w.kw) * 1.1920929e-7 + 1e-5;
  for (int64_t i = 0; i < out.numel(); ++i)
    ASSERT_NEAR(out.getDouble(i), want.getDouble(i),
                test::epilogueTolerance(epi, tol, want.getDouble(i)))
        << "element " << i << " of " << w.toJson().dump() << " with config " << c.toJson().dump();
}

// A config from uniformly drawn knob values (clamped by depthwiseConfigFromKnobs; may be
// invalid).
Expected<DepthwiseConfig> randomConfig(const DepthwiseWorkload& w, Isa isa, std::mt19937& rng) {
  KnobSpace space = depthwiseKnobSpace(w, isa);
  std::vector<nlohmann::json> values;
  for (const Knob& knob : space) values.push_back(knob.values[rng() % knob.values.size()]);
  return depthwiseConfigFromKnobs(w, isa, space, values);
}

TEST(DepthwiseTemplate, DefaultAndRandomConfigsMatchReference) {
  std::mt19937 rng(11);
  int checked = 0;
  for (Isa isa : {Isa::Avx2, Isa::Avx512}) {
    if (!targetSupports(hostTarget(), isa)) continue;
    for (int trial = 0; trial < 24; ++trial) {
      DepthwiseWorkload w;
      std::uniform_int_distribution<int64_t> ch(1, 70), hw(3, 15), k(1, 5), s(1, 2), p(0, 2),
          d(1, 2);
      w.n = trial % 6 == 0 ? 2 : 1;
      w.c = trial == 0 ? 32 : ch(rng);
      w.h = hw(rng), w.w = hw(rng), w.kh = w.kw = trial < 8 ? 3 : k(rng);
      w.strideH = w.strideW = s(rng);
      w.padTop = w.padLeft = p(rng);
      w.padBottom = w.padRight = p(rng);
      w.dilationH = w.dilationW = trial % 7 == 3 ? d(rng) : 1;
      w.threads = trial % 3 == 0 ? 2 : 1;
      if (!w.check().isOk()) continue;
      DepthwiseConfig c = defaultDepthwiseConfig(w, isa);
      if (trial % 2) {
        auto drawn = randomConfig(w, isa, rng);
        ASSERT_TRUE(drawn.isOk()) << drawn.error().message();
        c = *drawn;
      }
      if (!validateDepthwiseConfig(w, c).isOk()) continue;
      Epilogue epi;
      if (trial % 2 == 0) epi.push_back({PostOpKind::BiasPerColumn});
      if (trial % 3 == 0) epi.push_back({PostOpKind::Clip, 0.f, 6.f});
      if (trial % 4 == 1) epi.push_back({PostOpKind::LeakyRelu, 0.2f});
      if (trial % 4 == 2) epi.push_back({PostOpKind::HardSigmoid, 0.25f, 0.4f});
      if (trial % 5 == 1) epi.push_back({PostOpKind::AddTensor});
      if (trial % 4 == 3) epi.push_back({PostOpKind::Swish, 1.f});
      if (trial % 6 == 5) epi.push_back({PostOpKind::Exp});
      if (trial % 4 == 2) epi.push_back({PostOpKind::ScalePerColumn});
      if (trial % 4 == 0) epi.push_back({PostOpKind::PReluPerColumn});
      checkDepthwise(w, c, epi, static_cast<uint32_t>(trial));
      ++checked;
    }
  }
  EXPECT_GE(checked, 20);
}

// ConvNeXt's depthwise conv then LayerNorm over the channels of each pixel (through the permute
// to [N, H, W, C]): random workloads and configs, one and two threads, against the reference's
// grouped Conv, bias and LayerNormalization over the last axis of the NHWC result.
TEST(DepthwiseTemplate, RowNormalizationOfEachPixelEndsTheEpilogue) {
  std::mt19937 rng(5);
  int checked = 0;
  for (Isa isa : {Isa::Avx2, Isa::Avx512}) {
    if (!targetSupports(hostTarget(), isa)) continue;
    for (int trial = 0; trial < 12; ++trial) {
      DepthwiseWorkload w;
      std::uniform_int_distribution<int64_t> ch(1, 70), hw(3, 12), s(1, 2);
      w.n = trial % 4 == 0 ? 2 : 1;
      w.c = trial == 0 ? 96 : ch(rng);
      w.h = hw(rng), w.w = hw(rng), w.kh = w.kw = trial % 2 ? 7 : 3;
      w.padTop = w.padLeft = w.padBottom = w.padRight = w.kh / 2;
      w.strideH = w.strideW = s(rng);
      w.threads = trial % 3 == 0 ? 2 : 1;
      if (!w.check().isOk()) continue;
      DepthwiseConfig c = defaultDepthwiseConfig(w, isa);
      if (trial % 2) {
        auto drawn = randomConfig(w, isa, rng);
        ASSERT_TRUE(drawn.isOk()) << drawn.error().message();
        c = *drawn;
      }
      if (!validateDepthwiseConfig(w, c).isOk()) continue;
      const float eps = 1e-6f;
      Epilogue epi = {{PostOpKind::BiasPerColumn}, {PostOpKind::LayerNormRow, eps}};
      Tensor x = randomTensor(Shape{w.n, w.h, w.w, w.c}, rng);
      Tensor weights = randomTensor(Shape{w.c, 1, w.kh, w.kw}, rng);
      Tensor bias = randomTensor(Shape{w.c}, rng);
      Tensor params = randomTensor(Shape{2, w.c}, rng);
      auto kernel = compileDepthwise(jit(), w, c, epi, weights.dataAs<float>());
      ASSERT_TRUE(kernel.isOk()) << kernel.error().message();
      Tensor out = randomTensor(Shape{w.n, w.oh(), w.ow(), w.c}, rng);
      kernel->run(x.dataAs<float>(), out.dataAs<float>(), bias.dataAs<float>(), nullptr, nullptr,
                  params.dataAs<float>());
      ConvAttrs attrs{{w.kh, w.kw},
                      {w.strideH, w.strideW},
                      {w.padTop, w.padLeft, w.padBottom, w.padRight},
                      {1, 1},
                      w.c};
      Epilogue before(epi.begin(), epi.end() - 1);
      Tensor unusedAddend = randomTensor(out.shape(), rng),
             unusedScale = randomTensor(bias.shape(), rng);
      Tensor conv =
          test::referenceNhwcConv(attrs, before, x, weights, bias, unusedAddend, unusedScale);
      ASSERT_FALSE(conv.empty());
      Graph g;
      ValueId y = g.addInput("y", {DType::F32, conv.shape(), {}});
      Tensor scale(DType::F32, Shape{w.c}), shift(DType::F32, Shape{w.c});
      std::copy_n(params.dataAs<float>(), w.c, scale.dataAs<float>());
      std::copy_n(params.dataAs<float>() + w.c, w.c, shift.dataAs<float>());
      g.addOutput(test::addOp(g, OpKind::LayerNormalization, NormAttrs{-1, eps},
                              {y, g.addConstant("scale", scale), g.addConstant("shift", shift)}));
      auto want = runReference(g, {conv});
      ASSERT_TRUE(want.isOk()) << want.error().message();
      // Normalized by each pixel's deviation over its channels: relative to their spread.
      double tol = 4.0 * static_cast<double>(w.kh * w.kw + w.c) * 1.1920929e-7 * 8 + 1e-5;
      for (int64_t i = 0; i < out.numel(); ++i)
        ASSERT_NEAR(out.getDouble(i), (*want)[0].getDouble(i), tol)
            << "element " << i << " of " << w.toJson().dump() << " with " << c.toJson().dump();
      ++checked;
    }
  }
  EXPECT_GE(checked, 8);
}

// --precision bf16 between layers: the f32 depthwise kernel that reads its input as bf16 and or
// writes its output as bf16 equals, bit for bit, the f32 kernel on the input's bf16 values with
// its output rounded to bf16 once (nearest even; a residual read as bf16 beside a bf16 output).
// Random workloads and configs, channel and pixel tails, strides, pads, dilations, two threads.
// On AVX-512 (vcvtneps2bf16, or its twin); another ISA and a row normalization of a bf16 output
// are refused by name.
TEST(DepthwiseTemplate, Bf16ActivationsEqualTheF32KernelRoundedOnceBitForBit) {
  std::mt19937 rng(31);
  int checked = 0, bf16In = 0, bf16Out = 0, residual = 0;
  for (int trial = 0; trial < 80 && checked < 30; ++trial) {
    DepthwiseWorkload w;
    std::uniform_int_distribution<int64_t> ch(1, 70), hw(3, 15), k(1, 5), s(1, 2), p(0, 2);
    w.c = ch(rng), w.h = hw(rng), w.w = hw(rng), w.kh = w.kw = trial < 10 ? 3 : k(rng);
    w.strideH = w.strideW = s(rng);
    w.padTop = w.padLeft = p(rng);
    w.padBottom = w.padRight = p(rng);
    w.dilationH = w.dilationW = trial % 7 == 3 ? 2 : 1;
    w.threads = trial % 3 == 0 ? 2 : 1;
    if (!w.check().isOk()) continue;
    auto c = randomConfig(w, Isa::Avx512, rng);
    ASSERT_TRUE(c.isOk()) << c.error().message();
    if (!validateDepthwiseConfig(w, *c).isOk()) continue;
    DepthwiseWorkload stored = w; // 0: bf16 in, 1: bf16 out, 2: both
    const int form = trial % 3;
    stored.types.src = form != 1 ? DType::BF16 : DType::F32;
    stored.types.dst = form != 0 ? DType::BF16 : DType::F32;
    ASSERT_TRUE(validateDepthwiseConfig(stored, *c).isOk())
        << validateDepthwiseConfig(stored, *c).error().message();
    Epilogue epi = {{PostOpKind::BiasPerColumn}, {PostOpKind::Clip, 0.f, 6.f}};
    if (trial % 4 == 3) epi.push_back({PostOpKind::AddTensor});
    const bool outBf16 = stored.types.dst == DType::BF16;
    const size_t ins = static_cast<size_t>(w.n * w.h * w.w * w.c),
                 outs = static_cast<size_t>(w.n * w.oh() * w.ow() * w.c);
    std::vector<float> x = randomVector(ins, rng), addend = randomVector(outs, rng);
    std::vector<uint16_t> xBits(ins), addendBits(outs);
    for (size_t i = 0; i < ins; ++i) { // the f32 kernel reads the bf16 values
      xBits[i] = floatToBf16(x[i]);
      if (stored.types.src == DType::BF16) x[i] = bf16ToFloat(xBits[i]);
    }
    for (size_t i = 0; i < outs; ++i) {
      addendBits[i] = floatToBf16(addend[i]);
      if (outBf16) addend[i] = bf16ToFloat(addendBits[i]);
    }
    std::vector<float> weights = randomVector(static_cast<size_t>(w.c * w.kh * w.kw), rng),
                       bias = randomVector(static_cast<size_t>(w.c), rng);
    auto f32Kernel = compileDepthwise(test::bf16Jit(), w, *c, epi, weights.data());
    auto storedKernel = compileDepthwise(test::bf16Jit(), stored, *c, epi, weights.data());
    ASSERT_TRUE(f32Kernel.isOk()) << f32Kernel.error().message();
    ASSERT_TRUE(storedKernel.isOk()) << storedKernel.error().message();
    std::vector<float> want(outs, std::nanf("")), got(outs, std::nanf(""));
    std::vector<uint16_t> gotBits(outs, floatToBf16(std::nanf("")));
    f32Kernel->run(x.data(), want.data(), bias.data(), addend.data());
    storedKernel->run(stored.types.src == DType::BF16 ? static_cast<const void*>(xBits.data())
                                                      : x.data(),
                      outBf16 ? static_cast<void*>(gotBits.data()) : got.data(), bias.data(),
                      outBf16 ? reinterpret_cast<const float*>(addendBits.data()) : addend.data());
    ASSERT_EQ(test::differenceFromRoundedOnce(want, got, gotBits, outBf16), "")
        << stored.toJson().dump() << " with config " << c->toJson().dump();
    ++checked;
    bf16In += stored.types.src == DType::BF16;
    bf16Out += outBf16;
    residual += outBf16 && epi.back().kind == PostOpKind::AddTensor;
  }
  EXPECT_GE(checked, 24);
  EXPECT_GE(bf16In, 12);
  EXPECT_GE(bf16Out, 12);
  EXPECT_GE(residual, 2);
  DepthwiseWorkload w;
  w.c = 32, w.h = w.w = 8, w.kh = w.kw = 3;
  w.types = {DType::BF16, DType::F32, DType::F32, DType::BF16};
  DepthwiseConfig avx2 = defaultDepthwiseConfig(w, Isa::Avx2);
  EXPECT_NE(validateDepthwiseConfig(w, avx2).error().message().find(
                "bf16 activations are read and written on avx512"),
            std::string::npos);
  std::vector<float> weights(static_cast<size_t>(w.c * 9), 0.5f);
  auto normalized = compileDepthwise(test::bf16Jit(), w, defaultDepthwiseConfig(w, Isa::Avx512),
                                     {{PostOpKind::LayerNormRow, 1e-5f}}, weights.data());
  ASSERT_FALSE(normalized.isOk());
  EXPECT_EQ(normalized.error().message(),
            "depthwise: a row normalization normalizes an f32 output, not bf16");
}

TEST(DepthwiseTemplate, RegisterLimitIsReported) {
  DepthwiseWorkload w;
  w.c = 64, w.h = w.w = 20;
  DepthwiseConfig c{Isa::Avx2, 4, 8, DepthwiseParallel::None};
  EXPECT_EQ(validateDepthwiseConfig(w, c).error().message(),
            "depthwise config: 8 pixels x 4 vectors need 37 vector registers, avx2 has 16");
}

// int8 (u8 input padded with its zero point, s8 weights, exact integer sums): random workloads
// and configs against an integer reference, bit for bit: the sums (f32 out, no epilogue), and
// column scale, bias and ReLU requantized to u8; every fourth trial on small integers; full 8-bit
// weights. AVX-512 sums row quads on vpdpbusd, checked through its twin on every CPU and with the
// real instruction where the CPU has AVX512-VNNI; AVX2 sums in f32, run where the CPU has it.
TEST(DepthwiseInt8, RandomConfigsEqualTheIntegerReference) {
  std::mt19937 rng(23);
  int checked = 0, padded = 0, requantized = 0, quads = 0, real = 0;
  for (int trial = 0; trial < 48; ++trial) {
    const Isa isa = trial % 2 ? Isa::Avx512 : Isa::Avx2;
    DepthwiseWorkload w;
    std::uniform_int_distribution<int64_t> ch(1, 70), hw(3, 13), k(1, 5), s(1, 2), p(0, 2);
    w.types = {DType::U8, DType::I8, DType::I32, trial % 3 == 2 ? DType::U8 : DType::F32};
    w.n = trial % 6 == 0 ? 2 : 1;
    w.c = ch(rng), w.h = hw(rng), w.w = hw(rng), w.kh = w.kw = trial < 12 ? 3 : k(rng);
    if (trial % 5 == 4) w.kh = k(rng) + 3; // 4 to 8 rows: a second, partial row quad
    w.strideH = w.strideW = s(rng);
    w.padTop = w.padLeft = p(rng);
    w.padBottom = w.padRight = p(rng);
    w.dilationH = w.dilationW = trial % 7 == 3 ? 2 : 1;
    w.aZeroPoint = trial % 4 == 1 ? 0 : static_cast<int64_t>(rng() % 256);
    w.threads = trial % 3 == 0 ? 2 : 1;
    if (!w.check().isOk()) continue;
    auto c = randomConfig(w, isa, rng);
    ASSERT_TRUE(c.isOk()) << c.error().message();
    if (!validateDepthwiseConfig(w, *c).isOk()) continue;
    const bool small = trial % 4 == 3, u8Out = w.types.dst == DType::U8;
    std::vector<uint8_t> x(static_cast<size_t>(w.n * w.h * w.w * w.c));
    for (uint8_t& v : x) v = static_cast<uint8_t>(small ? rng() % 4 : rng() % 256);
    std::vector<float> weights(static_cast<size_t>(w.c * w.kh * w.kw));
    for (float& v : weights)
      v = static_cast<float>(small ? static_cast<int>(rng() % 7) - 3
                                   : static_cast<int>(rng() % 256) - 128);
    std::vector<float> scale(static_cast<size_t>(w.c)), bias(static_cast<size_t>(w.c));
    for (size_t i = 0; i < scale.size(); ++i) {
      scale[i] = 0.25f + static_cast<float>(rng() % 64) / 256.f;
      bias[i] = static_cast<float>(static_cast<int>(rng() % 201) - 100);
    }
    const float outScale = 1.f + static_cast<float>(rng() % 50), outZero = 5.f;
    Epilogue epi;
    if (u8Out)
      epi = {{PostOpKind::ScalePerColumn},
             {PostOpKind::BiasPerColumn},
             {PostOpKind::Relu},
             {PostOpKind::QuantizeU8, outScale, outZero}};
    // The reference: the integer sums, and their requantization.
    const int64_t outs = w.n * w.oh() * w.ow() * w.c;
    std::vector<int64_t> sums;
    for (int64_t n = 0; n < w.n; ++n)
      for (int64_t oh = 0; oh < w.oh(); ++oh)
        for (int64_t ow = 0; ow < w.ow(); ++ow)
          for (int64_t ch = 0; ch < w.c; ++ch) {
            int64_t sum = 0;
            for (int64_t kh = 0; kh < w.kh; ++kh)
              for (int64_t kw = 0; kw < w.kw; ++kw) {
                int64_t ih = oh * w.strideH - w.padTop + kh * w.dilationH;
                int64_t iw = ow * w.strideW - w.padLeft + kw * w.dilationW;
                int64_t v = ih >= 0 && ih < w.h && iw >= 0 && iw < w.w
                                ? x[static_cast<size_t>(((n * w.h + ih) * w.w + iw) * w.c + ch)]
                                : w.aZeroPoint;
                sum += v * static_cast<int64_t>(
                               weights[static_cast<size_t>((ch * w.kh + kh) * w.kw + kw)]);
              }
            sums.push_back(sum);
          }
    auto runOn = [&](Jit& j, const char* how) {
      SCOPED_TRACE(how);
      auto kernel = compileDepthwise(j, w, *c, epi, weights.data());
      ASSERT_TRUE(kernel.isOk()) << kernel.error().message();
      std::vector<float> outF(static_cast<size_t>(outs), -7.f);
      std::vector<uint8_t> outU(static_cast<size_t>(outs), 77);
      kernel->run(x.data(), u8Out ? static_cast<void*>(outU.data()) : outF.data(), bias.data(),
                  nullptr, scale.data());
      for (int64_t i = 0; i < outs; ++i) {
        const size_t at = static_cast<size_t>(i), channel = static_cast<size_t>(i % w.c);
        std::string where = "element " + std::to_string(i) + " of " + w.toJson().dump() +
                            " with config " + c->toJson().dump();
        if (!u8Out) {
          ASSERT_EQ(outF[at], static_cast<float>(sums[at])) << where;
          continue;
        }
        float v = std::max(static_cast<float>(sums[at]) * scale[channel] + bias[channel], 0.f);
        float q = std::clamp(std::nearbyint(v / outScale) + outZero, 0.f, 255.f);
        ASSERT_EQ(static_cast<int>(outU[at]), static_cast<int>(q)) << where;
      }
    };
    const bool byQuads = depthwiseSumsInQuads(w, *c);
    const bool hostRuns =
        targetSupports(hostTarget(), isa) && checkTargetSupports(hostTarget(), isa, w.types).isOk();
    if (byQuads) runOn(test::twinJit(), "the vpdpbusd twin");
    if (hostRuns) runOn(jit(), "this CPU's instructions");
    if (::testing::Test::HasFatalFailure()) return;
    ++checked;
    quads += byQuads;
    real += hostRuns;
    padded += w.padded() && w.aZeroPoint != 0;
    requantized += u8Out;
  }
  EXPECT_GE(checked, 30);
  EXPECT_GE(quads, 15);
  EXPECT_GE(padded, 8);
  EXPECT_GE(requantized, 8);
  if (!hostTarget().avx512vnni)
    std::printf("note: the real vpdpbusd depthwise runs need AVX512-VNNI, which this CPU lacks; "
                "%d of %d configs ran on this CPU's instructions\n",
                real, checked);
}

} // namespace
} // namespace tunec
