// The weight-only kernel against the reference executor's MatMulNBits on random codes, scales,
// zero points and activations: every shape its layout allows (K at, within and across blocks,
// N at and across the 16-column groups, rows at and across its 4-row passes), 4- and 8-bit,
// blocks of 16, 32 and 64; the AVX-512, AVX2 and scalar paths equal bit for bit (the same fused
// multiply-adds in the same order), on one thread and two.
#include "ir/graph.h"
#include "reference/reference.h"
#include "runtime/weight_only.h"

#include <bit>
#include <cmath>
#include <gtest/gtest.h>
#include <limits>
#include <random>

namespace tunec {
namespace {

struct Case {
  int64_t m, k, n, bits, block;
};

double relativeL2(const std::vector<float>& got, const Tensor& want) {
  double err = 0, ref = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    double w = want.getDouble(static_cast<int64_t>(i));
    err += (got[i] - w) * (got[i] - w);
    ref += w * w;
  }
  return std::sqrt(err / ref);
}

TEST(WeightOnly, EveryPathMatchesTheReferenceAndEachOtherBitForBit) {
  const bool avx512 = __builtin_cpu_supports("avx512f");
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  if (!avx512) std::printf("note: no AVX-512 on this CPU: that path is not run\n");
  std::vector<Case> cases;
  for (int64_t bits : {4, 8})
    for (int64_t block : {16, 32, 64})
      for (int64_t k : {16, 72, 200})
        for (int64_t n : {1, 16, 37})
          for (int64_t m : {1, 3, 4, 7}) cases.push_back({m, k, n, bits, block});
  std::mt19937 rng(11);
  for (const Case& c : cases) {
    SCOPED_TRACE(std::to_string(c.bits) + "-bit, block " + std::to_string(c.block) + ", m " +
                 std::to_string(c.m) + ", k " + std::to_string(c.k) + ", n " + std::to_string(c.n));
    rt::WeightOnlyShape s{c.k, c.n, c.bits, c.block};
    ASSERT_TRUE(s.valid());
    const int64_t blocks = s.blocks();
    std::uniform_int_distribution<int> code(0, (1 << c.bits) - 1);
    std::uniform_real_distribution<float> unit(-1.f, 1.f), positive(0.01f, 0.1f);
    Tensor codes(DType::U8, Shape{c.n, c.k}), scales(DType::F32, Shape{c.n, blocks}),
        zeros(DType::F32, Shape{c.n, blocks}), a(DType::F32, Shape{c.m, c.k});
    for (int64_t i = 0; i < codes.numel(); ++i)
      codes.dataAs<uint8_t>()[i] = static_cast<uint8_t>(code(rng));
    for (int64_t i = 0; i < scales.numel(); ++i) {
      scales.setDouble(i, positive(rng));
      zeros.setDouble(i, code(rng));
    }
    for (int64_t i = 0; i < a.numel(); ++i) a.setDouble(i, unit(rng));
    Graph g;
    ValueId av = g.addInput("a", {DType::F32, a.shape(), {}});
    auto id = g.addNode("q", OpKind::MatMulNBits, BlockQuantAttrs{c.bits, c.block},
                        {av, g.addConstant("codes", codes), g.addConstant("scales", scales),
                         g.addConstant("zeros", zeros)},
                        {"y"});
    ASSERT_TRUE(id.isOk()) << id.error().message();
    g.addOutput(g.node(*id).outputs[0]);
    auto want = runReference(g, {a});
    ASSERT_TRUE(want.isOk()) << want.error().message();
    const auto* cp = codes.dataAs<uint8_t>();
    const auto* sp = scales.dataAs<float>();
    const auto* zp = zeros.dataAs<float>();
    std::vector<uint8_t> packed = rt::packWeightOnly(
        s, std::vector<uint8_t>(cp, cp + codes.numel()),
        std::vector<float>(sp, sp + scales.numel()), std::vector<float>(zp, zp + zeros.numel()));
    ASSERT_EQ(static_cast<int64_t>(packed.size()), s.packedBytes());
    auto run = [&](rt::WeightOnlyIsa isa, int threads) {
      std::vector<float> y(static_cast<size_t>(c.m * c.n + 16), -7.f);
      rt::runWeightOnlyMatmul(a.dataAs<float>(), packed.data(), y.data(), c.m, s, threads, isa);
      for (size_t i = static_cast<size_t>(c.m * c.n); i < y.size(); ++i)
        EXPECT_EQ(y[i], -7.f) << "written past the output at " << i;
      y.resize(static_cast<size_t>(c.m * c.n));
      return y;
    };
    std::vector<float> scalar = run(rt::WeightOnlyIsa::Scalar, 1);
    EXPECT_LT(relativeL2(scalar, (*want)[0]), 1e-5);
    if (avx2) {
      EXPECT_EQ(run(rt::WeightOnlyIsa::Avx2, 1), scalar);
      EXPECT_EQ(run(rt::WeightOnlyIsa::Avx2, 2), scalar);
    }
    if (avx512) {
      EXPECT_EQ(run(rt::WeightOnlyIsa::Avx512, 1), scalar);
      EXPECT_EQ(run(rt::WeightOnlyIsa::Avx512, 2), scalar);
    }
  }
}

} // namespace
} // namespace tunec

namespace tunec {
namespace {

// int8 activations: the VNNI and scalar paths bit for bit, the integer arithmetic of activations
// quantized per block (computed here in double) within float rounding, and the f32 reference
// within what quantizing the activations costs.
TEST(WeightOnly, Int8ActivationsMatchTheirQuantizedArithmeticOnEveryPath) {
  const bool vnni = __builtin_cpu_supports("avx512vnni");
  if (!vnni) std::printf("note: no AVX512-VNNI on this CPU: only the scalar path is run\n");
  std::mt19937 rng(5);
  for (int64_t bits : {4, 8})
    for (int64_t block : {16, 32, 64})
      for (int64_t k : {16, 72, 200})
        for (int64_t n : {1, 16, 37})
          for (int64_t m : {1, 3, 4, 6}) {
            SCOPED_TRACE(std::to_string(bits) + "-bit, block " + std::to_string(block) + ", m " +
                         std::to_string(m) + ", k " + std::to_string(k) + ", n " +
                         std::to_string(n));
            rt::WeightOnlyShape s{k, n, bits, block};
            const int64_t blocks = s.blocks();
            std::uniform_int_distribution<int> code(0, (1 << bits) - 1);
            std::uniform_real_distribution<float> unit(-1.f, 1.f), positive(0.01f, 0.1f);
            std::vector<uint8_t> codes(static_cast<size_t>(n * k));
            std::vector<float> scales(static_cast<size_t>(n * blocks)), zeros(scales.size()),
                a(static_cast<size_t>(m * k));
            for (auto& c : codes) c = static_cast<uint8_t>(code(rng));
            for (size_t i = 0; i < scales.size(); ++i) {
              scales[i] = positive(rng);
              zeros[i] = static_cast<float>(code(rng));
            }
            for (auto& v : a) v = unit(rng);
            ASSERT_TRUE(rt::weightOnlyQ8Supports(s, zeros));
            std::vector<uint8_t> packed = rt::packWeightOnlyQ8(s, codes, scales, zeros);
            auto run = [&](rt::WeightOnlyQ8Isa isa, int threads) {
              std::vector<float> y(static_cast<size_t>(m * n + 16), -7.f);
              rt::runWeightOnlyMatmulQ8(a.data(), packed.data(), y.data(), m, s, threads, isa);
              for (size_t i = static_cast<size_t>(m * n); i < y.size(); ++i)
                EXPECT_EQ(y[i], -7.f) << "written past the output at " << i;
              y.resize(static_cast<size_t>(m * n));
              return y;
            };
            std::vector<float> scalar = run(rt::WeightOnlyQ8Isa::Scalar, 1);
            if (vnni) {
              EXPECT_EQ(run(rt::WeightOnlyQ8Isa::Vnni, 1), scalar);
              EXPECT_EQ(run(rt::WeightOnlyQ8Isa::Vnni, 2), scalar);
            }
            // The quantized arithmetic in double, and the f32 arithmetic in double.
            double errQ = 0, errF = 0, norm = 0;
            for (int64_t r = 0; r < m; ++r)
              for (int64_t col = 0; col < n; ++col) {
                double yq = 0, yf = 0;
                for (int64_t b = 0; b < blocks; ++b) {
                  float amax = 0.f;
                  for (int64_t i = b * block; i < std::min(k, (b + 1) * block); ++i)
                    amax = std::max(amax, std::fabs(a[static_cast<size_t>(r * k + i)]));
                  const float step = amax / 127.f;
                  const double sc = scales[static_cast<size_t>(col * blocks + b)];
                  const double zp = zeros[static_cast<size_t>(col * blocks + b)];
                  double dot = 0;
                  for (int64_t i = b * block; i < std::min(k, (b + 1) * block); ++i) {
                    const float x = a[static_cast<size_t>(r * k + i)];
                    const double w = codes[static_cast<size_t>(col * k + i)] - zp;
                    const double q =
                        step > 0 ? std::clamp(std::nearbyint(x / step), -127.f, 127.f) : 0;
                    dot += w * q;
                    yf += w * sc * x;
                  }
                  yq += dot * sc * step;
                }
                const double got = scalar[static_cast<size_t>(r * n + col)];
                errQ += (got - yq) * (got - yq);
                errF += (got - yf) * (got - yf);
                norm += yf * yf;
              }
            EXPECT_LT(std::sqrt(errQ / norm), 1e-6);
            EXPECT_LT(std::sqrt(errF / norm), 8e-2); // a few outputs: cancellation
          }
}

// A NaN activation is code 0 and leaves its block's step to the others; an infinite one makes
// its block's codes 0 (inf / inf): the same on the VNNI path as on the scalar one, whose
// arithmetic the reference is.
TEST(WeightOnly, Int8ActivationsOfNaNAndInfinityAreDefinedOnEveryPath) {
  if (!__builtin_cpu_supports("avx512vnni")) GTEST_SKIP() << "no AVX512-VNNI on this CPU";
  rt::WeightOnlyShape s{64, 16, 4, 32};
  std::vector<uint8_t> codes(64 * 16);
  std::vector<float> scales(16 * 2, 0.05f), zeros(scales.size(), 8.f), a(64);
  std::mt19937 rng(3);
  for (auto& c : codes) c = static_cast<uint8_t>(rng() % 16);
  std::uniform_real_distribution<float> unit(-1.f, 1.f);
  for (auto& v : a) v = unit(rng);
  a[5] = std::numeric_limits<float>::quiet_NaN(); // block 0: NaN among finite values
  a[40] = std::numeric_limits<float>::infinity(); // block 1: an infinity
  std::vector<uint8_t> packed = rt::packWeightOnlyQ8(s, codes, scales, zeros);
  auto run = [&](rt::WeightOnlyQ8Isa isa) {
    std::vector<float> y(16);
    rt::runWeightOnlyMatmulQ8(a.data(), packed.data(), y.data(), 1, s, 1, isa);
    return y;
  };
  std::vector<float> scalar = run(rt::WeightOnlyQ8Isa::Scalar);
  std::vector<float> vnni = run(rt::WeightOnlyQ8Isa::Vnni);
  for (size_t i = 0; i < scalar.size(); ++i) {
    EXPECT_EQ(std::bit_cast<uint32_t>(vnni[i]), std::bit_cast<uint32_t>(scalar[i])) << i;
    EXPECT_TRUE(std::isfinite(scalar[i]) || std::isnan(scalar[i])) << i;
  }
  // Block 0 without its NaN computes as if that activation were 0.
  std::vector<float> zeroed = a;
  zeroed[5] = 0.f;
  std::vector<float> y(16);
  rt::runWeightOnlyMatmulQ8(zeroed.data(), packed.data(), y.data(), 1, s, 1,
                            rt::WeightOnlyQ8Isa::Scalar);
  EXPECT_NE(y, scalar); // block 1's infinity still differs
}

} // namespace
} // namespace tunec
