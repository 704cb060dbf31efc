// The loop kernels' Round (ONNX Round, QuantizeLinear's rounding in a fake-quantized chain):
// half to even in the default rounding mode, equal bit for bit to std::nearbyint on ties of
// both signs, signed zeros, the 2^23 boundary, huge values, infinities, NaN and random floats,
// on lengths that leave vector tails, with one and two threads. And copies that transpose.
#include "runtime/light_kernels.h"

#include <bit>
#include <cmath>
#include <cstdint>
#include <gtest/gtest.h>
#include <limits>
#include <random>
#include <vector>

namespace tunec::rt {
namespace {

std::vector<float> roundInputs() {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> v = {
      0.5f,   1.5f,   2.5f,       -0.5f,         -1.5f,     -2.5f,     0.49999997f, -0.3f,
      -0.f,   0.f,    8388607.5f, -8388607.5f,   8388608.f, 8388609.f, -8388609.f,  1e30f,
      -1e30f, inf,    -inf,       std::nanf(""), 254.5f,    255.5f,    -128.5f,     1.17549435e-38f,
      1e-45f, -1e-45f};
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> small(-300.f, 300.f);
  std::uniform_int_distribution<uint32_t> bits;
  for (int i = 0; i < 2000; ++i) v.push_back(small(rng));
  for (int i = 0; i < 2000; ++i) v.push_back(std::bit_cast<float>(bits(rng)));
  for (int i = -300; i <= 300; ++i) v.push_back(static_cast<float>(i) + 0.5f); // every tie
  return v;
}

TEST(ElementwiseRound, EqualsNearbyintBitForBit) {
  const std::vector<float> in = roundInputs();
  for (int64_t n : {int64_t{1}, int64_t{17}, static_cast<int64_t>(in.size())}) {
    EwProgram p;
    p.dims = {n};
    p.outStrides = {1};
    p.inOffsets = {0};
    p.inStrides = {{1}};
    p.code = {EwInstr{EwOp::Round, 0, -1, -1}};
    for (int threads : {1, 2}) {
      std::vector<float> out(static_cast<size_t>(n), 123.f);
      const float* inputs[] = {in.data()};
      runElementwise(p, out.data(), inputs, threads);
      for (int64_t i = 0; i < n; ++i) {
        float want = std::nearbyint(in[static_cast<size_t>(i)]);
        float got = out[static_cast<size_t>(i)];
        if (std::isnan(want))
          EXPECT_TRUE(std::isnan(got)) << "element " << i;
        else
          EXPECT_EQ(std::bit_cast<uint32_t>(got), std::bit_cast<uint32_t>(want))
              << "Round(" << in[static_cast<size_t>(i)] << ") = " << got << ", want " << want;
      }
    }
  }
}

// Copies that transpose (the output contiguous along one dimension, the input along another) run
// in tiles: every element lands where the strides say, with offsets, a third dimension, extents
// that leave partial tiles, both orders of the two dimensions, and one and two threads; the
// output's elements outside the copy are untouched.
TEST(ElementwiseCopy, TransposingCopiesPlaceEveryElement) {
  struct Case {
    std::vector<int64_t> dims, outStrides, inStrides;
    int64_t outOffset, inOffset;
  };
  // [3, 20, 37]: out plain [3][20][37], in stored [3][37][20] (NCHW <-> NHWC-like), and the
  // same with the contiguous dimensions the other way round; a Concat's part at an offset.
  const std::vector<Case> cases = {{{3, 20, 37}, {740, 37, 1}, {740, 1, 20}, 0, 0},
                                   {{3, 37, 20}, {740, 1, 37}, {740, 20, 1}, 0, 0},
                                   {{2, 9, 33}, {2 * 33 * 12, 1, 12}, {9 * 33, 33, 1}, 3, 5}};
  for (const Case& c : cases)
    for (int threads : {1, 2}) {
      EwProgram p;
      p.dims = c.dims;
      p.outStrides = c.outStrides;
      p.outOffset = c.outOffset;
      p.inOffsets = {c.inOffset};
      p.inStrides = {c.inStrides};
      p.code = {EwInstr{EwOp::Copy, 0, -1, -1000}};
      std::vector<float> in(4096), out(4096, -1.f), want(4096, -1.f);
      for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>(i);
      for (int64_t a = 0; a < c.dims[0]; ++a)
        for (int64_t b = 0; b < c.dims[1]; ++b)
          for (int64_t d = 0; d < c.dims[2]; ++d)
            want[static_cast<size_t>(c.outOffset + a * c.outStrides[0] + b * c.outStrides[1] +
                                     d * c.outStrides[2])] =
                in[static_cast<size_t>(c.inOffset + a * c.inStrides[0] + b * c.inStrides[1] +
                                       d * c.inStrides[2])];
      const float* inputs[] = {in.data()};
      runElementwise(p, out.data(), inputs, threads);
      EXPECT_EQ(out, want) << "dims " << c.dims[0] << "x" << c.dims[1] << "x" << c.dims[2];
    }
}

} // namespace
} // namespace tunec::rt
