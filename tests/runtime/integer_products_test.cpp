// The runtime's integer steps (MatMulInteger's and ConvInteger's exact form) against their
// definition in int64 reduced modulo 2^32, on random int32 data of the whole range (so that
// nearly every sum wraps) and on 8-bit differences: bit-exact, on each vector ISA the CPU has
// and the portable form (8-bit differences fit int16: the vpmaddwd tiles; full-range values:
// the int32 blocks); row counts around the 4- and 8-row groups, column counts around the 32-,
// 64- and 128-column blocks, shared and per-batch operands; convolutions with groups, strides,
// dilations, padding and 1-d windows (rows of height 1).
#include "runtime/light_kernels.h"

#include <gtest/gtest.h>
#include <random>
#include <string>
#include <vector>

namespace {

using tunec::rt::RowsIsa;

int32_t wrapped(int64_t v) {
  return static_cast<int32_t>(static_cast<uint32_t>(v));
}

std::vector<int32_t> randomInts(size_t n, std::mt19937& rng, bool fullRange) {
  std::uniform_int_distribution<int64_t> full(INT32_MIN, INT32_MAX), small(-255, 255);
  std::vector<int32_t> v(n);
  for (int32_t& x : v) x = static_cast<int32_t>(fullRange ? full(rng) : small(rng));
  return v;
}

// The forms this CPU runs: the portable one and each vector ISA it has (the others say so).
std::vector<RowsIsa> isasOfThisCpu() {
  std::vector<RowsIsa> isas = {RowsIsa::Portable};
  if (__builtin_cpu_supports("avx2"))
    isas.push_back(RowsIsa::Avx2);
  else
    std::printf("note: no AVX2 on this CPU: its form is not run\n");
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl"))
    isas.push_back(RowsIsa::Avx512);
  else
    std::printf("note: no AVX-512 on this CPU: its form is not run\n");
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni"))
    isas.push_back(RowsIsa::Avx512Vnni);
  else
    std::printf("note: no AVX512-VNNI on this CPU: its vpdpwssd form is not run\n");
  return isas;
}

TEST(IntegerProducts, MatmulWrapsAsItsDefinitionOnEveryIsa) {
  const std::vector<RowsIsa> isas = isasOfThisCpu();
  std::mt19937 rng(5);
  int checked = 0;
  for (RowsIsa isa : isas)
    for (int64_t m : {1, 7, 8, 9, 17})
      for (int64_t n : {1, 15, 128, 130})
        for (int64_t k : {1, 5, 67})
          for (bool shared : {false, true})
            for (bool fullRange : {false, true}) {
              SCOPED_TRACE("isa " + std::to_string(static_cast<int>(isa)) + ", m " +
                           std::to_string(m) + ", n " + std::to_string(n) + ", k " +
                           std::to_string(k) + (shared ? ", shared B" : "") +
                           (fullRange ? ", full range" : ""));
              const int64_t batch = 2;
              auto a = randomInts(static_cast<size_t>(batch * m * k), rng, fullRange);
              auto b =
                  randomInts(static_cast<size_t>((shared ? 1 : batch) * k * n), rng, fullRange);
              std::vector<int32_t> c(static_cast<size_t>(batch * m * n + 3), 7);
              tunec::rt::runIntegerMatmul(a.data(), b.data(), c.data(), batch, m, n, k, m * k,
                                          shared ? 0 : k * n, 2, isa);
              int wrong = 0;
              for (int64_t i = 0; i < batch; ++i)
                for (int64_t r = 0; r < m; ++r)
                  for (int64_t j = 0; j < n; ++j) {
                    uint64_t want = 0; // int64 products, summed modulo 2^64
                    for (int64_t p = 0; p < k; ++p)
                      want += static_cast<uint64_t>(
                          int64_t{a[static_cast<size_t>((i * m + r) * k + p)]} *
                          b[static_cast<size_t>((shared ? 0 : i * k * n) + p * n + j)]);
                    wrong += c[static_cast<size_t>((i * m + r) * n + j)] !=
                             wrapped(static_cast<int64_t>(want));
                  }
              EXPECT_EQ(wrong, 0);
              EXPECT_EQ(c[static_cast<size_t>(batch * m * n)], 7) << "wrote past C";
              ++checked;
            }
  EXPECT_EQ(checked, static_cast<int>(isas.size()) * 5 * 4 * 3 * 2 * 2);
}

// Operands that fit int16 run on vpmaddwd tiles (pairs of products summed per 32-bit lane): the
// one pair sum past int32, (-2^15)^2 + (-2^15)^2, wraps to -2^31 as the definition does; the
// same with one operand just outside int16 takes the int32 form.
TEST(IntegerProducts, TheSixteenBitTilesWrapAtTheirOneOverflow) {
  std::vector<RowsIsa> isas = {RowsIsa::Auto, RowsIsa::Portable};
  if (__builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl"))
    isas.push_back(RowsIsa::Avx512);
  for (RowsIsa isa : isas) {
    for (int32_t edge : {-32768, -32769}) {
      const int64_t m = 5, n = 70, k = 4;
      std::vector<int32_t> a(static_cast<size_t>(m * k), edge), b(static_cast<size_t>(k * n), edge);
      std::vector<int32_t> c(static_cast<size_t>(m * n));
      tunec::rt::runIntegerMatmul(a.data(), b.data(), c.data(), 1, m, n, k, 0, 0, 1, isa);
      const int32_t want = wrapped(int64_t{edge} * edge * k);
      for (int32_t v : c) ASSERT_EQ(v, want) << "edge " << edge;
    }
  }
}

// A shared B packed at compile time (packIntegerPairs) gives the products the run's own packing
// gives, on every ISA (the portable form reads B as it is); a B past int16 packs to nothing.
TEST(IntegerProducts, APrepackedBEqualsTheRunsPacking) {
  std::vector<RowsIsa> isas = {RowsIsa::Auto, RowsIsa::Portable};
  if (__builtin_cpu_supports("avx2")) isas.push_back(RowsIsa::Avx2);
  if (__builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl"))
    isas.push_back(RowsIsa::Avx512);
  std::mt19937 rng(13);
  for (RowsIsa isa : isas)
    for (int64_t m : {1, 5, 9})
      for (int64_t n : {1, 63, 64, 65, 130})
        for (int64_t k : {1, 6, 67}) {
          SCOPED_TRACE("isa " + std::to_string(static_cast<int>(isa)) + ", m " + std::to_string(m) +
                       ", n " + std::to_string(n) + ", k " + std::to_string(k));
          auto a = randomInts(static_cast<size_t>(2 * m * k), rng, false);
          auto b = randomInts(static_cast<size_t>(k * n), rng, false);
          b[0] = -32768; // the int16 edge
          std::vector<int32_t> packed = tunec::rt::packIntegerPairs(b.data(), k, n);
          ASSERT_EQ(packed.size(),
                    static_cast<size_t>((k + 1) / 2 * tunec::rt::integerPairColumns(n)));
          std::vector<int32_t> want(static_cast<size_t>(2 * m * n)), got(want.size() + 1, 7);
          tunec::rt::runIntegerMatmul(a.data(), b.data(), want.data(), 2, m, n, k, m * k, 0, 1,
                                      RowsIsa::Portable);
          tunec::rt::runIntegerMatmul(a.data(), b.data(), got.data(), 2, m, n, k, m * k, 0, 2, isa,
                                      packed.data());
          for (size_t i = 0; i < want.size(); ++i) ASSERT_EQ(got[i], want[i]) << "at " << i;
          EXPECT_EQ(got[want.size()], 7) << "wrote past C";
        }
  std::vector<int32_t> wide = {1, 2, 40000, 3};
  EXPECT_TRUE(tunec::rt::packIntegerPairs(wide.data(), 2, 2).empty());
}

TEST(IntegerProducts, LongSumsOfEightBitDifferencesAreExact) {
  // K = 70000 products of up to 255 x 255: sums past 2^24 (where f32 drops units) and past
  // 2^31 (where int32 wraps).
  const int64_t m = 3, n = 5, k = 70000;
  std::mt19937 rng(9);
  auto a = randomInts(static_cast<size_t>(m * k), rng, false);
  auto b = randomInts(static_cast<size_t>(k * n), rng, false);
  for (int64_t p = 0; p < k; ++p)
    a[static_cast<size_t>(p)] = 255, b[static_cast<size_t>(p * n)] = 255;
  std::vector<int32_t> c(static_cast<size_t>(m * n));
  tunec::rt::runIntegerMatmul(a.data(), b.data(), c.data(), 1, m, n, k, 0, 0, 1);
  for (int64_t r = 0; r < m; ++r)
    for (int64_t j = 0; j < n; ++j) {
      int64_t want = 0;
      for (int64_t p = 0; p < k; ++p)
        want += int64_t{a[static_cast<size_t>(r * k + p)]} * b[static_cast<size_t>(p * n + j)];
      EXPECT_EQ(c[static_cast<size_t>(r * n + j)], wrapped(want)) << r << "," << j;
    }
  EXPECT_GT(int64_t{255} * 255 * k, int64_t{1} << 31); // row 0, column 0 wrapped
}

// On AVX2 and AVX-512 a convolution of one group whose operands fit int16 runs on the pair tiles:
// the cases cross its 32-pixel chunks (pixel counts 30 to 99), its 64-channel tiles (oc 2 to 130),
// its 256-pair K blocks (K 4 to 1161, odd ones) and the portable form of full-range values.
TEST(IntegerProducts, ConvolutionWrapsAsItsDefinition) {
  std::mt19937 rng(3);
  int checked = 0;
  struct Case {
    int64_t c, h, w, oc, kh, kw, sh, sw, pt, pl, pb, pr, dh, dw, group;
  };
  for (RowsIsa isa : isasOfThisCpu())
    for (const Case& t : {Case{3, 5, 6, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1},
                          Case{4, 7, 7, 6, 3, 2, 2, 1, 0, 1, 2, 0, 1, 2, 2},
                          Case{6, 1, 9, 6, 1, 3, 1, 2, 0, 2, 0, 1, 1, 2, 6},
                          Case{8, 4, 4, 2, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1},
                          Case{2, 3, 3, 2, 3, 3, 1, 1, 2, 2, 2, 2, 2, 2, 1},
                          Case{129, 9, 11, 130, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1},
                          Case{64, 7, 9, 65, 3, 3, 2, 1, 1, 0, 1, 2, 1, 1, 1},
                          Case{5, 10, 3, 64, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1}})
      for (bool fullRange : {false, true}) {
        SCOPED_TRACE("isa " + std::to_string(static_cast<int>(isa)) + ", case " +
                     std::to_string(checked));
        const int64_t n = 2;
        const int64_t oh = (t.h + t.pt + t.pb - (t.kh - 1) * t.dh - 1) / t.sh + 1;
        const int64_t ow = (t.w + t.pl + t.pr - (t.kw - 1) * t.dw - 1) / t.sw + 1;
        const tunec::rt::IntegerConvParams p{n,  t.c,  t.h,  t.w,  t.oc, t.kh, t.kw, oh,
                                             ow, t.sh, t.sw, t.pt, t.pl, t.dh, t.dw, t.group};
        ASSERT_TRUE(p.valid());
        const int64_t cg = t.c / t.group;
        auto x = randomInts(static_cast<size_t>(n * t.c * t.h * t.w), rng, fullRange);
        auto w = randomInts(static_cast<size_t>(t.oc * cg * t.kh * t.kw), rng, fullRange);
        std::vector<int32_t> y(static_cast<size_t>(n * t.oc * oh * ow + 2), 7);
        tunec::rt::runIntegerConv(x.data(), w.data(), y.data(), p, 2, isa);
        int wrong = 0;
        for (int64_t b = 0; b < n; ++b)
          for (int64_t o = 0; o < t.oc; ++o)
            for (int64_t oy = 0; oy < oh; ++oy)
              for (int64_t ox = 0; ox < ow; ++ox) {
                uint64_t want = 0;
                const int64_t g = o / (t.oc / t.group);
                for (int64_t ic = 0; ic < cg; ++ic)
                  for (int64_t ky = 0; ky < t.kh; ++ky)
                    for (int64_t kx = 0; kx < t.kw; ++kx) {
                      const int64_t iy = oy * t.sh - t.pt + ky * t.dh,
                                    ix = ox * t.sw - t.pl + kx * t.dw;
                      if (iy < 0 || iy >= t.h || ix < 0 || ix >= t.w) continue;
                      want += static_cast<uint64_t>(
                          int64_t{x[static_cast<size_t>(((b * t.c + g * cg + ic) * t.h + iy) * t.w +
                                                        ix)]} *
                          w[static_cast<size_t>(((o * cg + ic) * t.kh + ky) * t.kw + kx)]);
                    }
                wrong += y[static_cast<size_t>(((b * t.oc + o) * oh + oy) * ow + ox)] !=
                         wrapped(static_cast<int64_t>(want));
              }
        EXPECT_EQ(wrong, 0);
        EXPECT_EQ(y[static_cast<size_t>(n * t.oc * oh * ow)], 7) << "wrote past Y";
        // The weights packed once, as a compile packs constant ones (B = w^T), give the same sums.
        if (t.group == 1 && !fullRange) {
          const int64_t k = cg * t.kh * t.kw;
          std::vector<int32_t> transposed(w.size());
          for (int64_t o = 0; o < t.oc; ++o)
            for (int64_t i = 0; i < k; ++i)
              transposed[static_cast<size_t>(i * t.oc + o)] = w[static_cast<size_t>(o * k + i)];
          const std::vector<int32_t> packed =
              tunec::rt::packIntegerPairs(transposed.data(), k, t.oc);
          ASSERT_FALSE(packed.empty());
          std::vector<int32_t> again(y.size(), 7);
          tunec::rt::runIntegerConv(x.data(), w.data(), again.data(), p, 2, isa, packed.data());
          EXPECT_EQ(again, y) << "prepacked weights";
        }
        ++checked;
      }
  EXPECT_EQ(checked, 16 * static_cast<int>(isasOfThisCpu().size()));
}

} // namespace
