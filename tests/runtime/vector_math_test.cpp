// The loop kernels' vector math against double-precision std:: math over the whole float range
// each function is used on: every 97th float bit pattern (about 44M values), plus a dense sweep
// of the interval where the functions change fastest. Bounds are those stated in vector_math.h.
#include "runtime/vector_math.h"

#include <bit>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <functional>
#include <gtest/gtest.h>

namespace tunec::rt {
namespace {

struct Worst {
  double relative = 0, absolute = 0;
  float atRelative = 0, atAbsolute = 0;
};

// Measures f against ref at every finite float from the stride sweep and the dense interval.
Worst measure(const std::function<float(float)>& f, const std::function<double(double)>& ref,
              double minMagnitudeForRelative) {
  Worst w;
  auto check = [&](float x) {
    if (!std::isfinite(x)) return;
    double want = ref(static_cast<double>(x));
    double got = f(x);
    if (!std::isfinite(want)) return;
    double abs = std::fabs(got - want);
    if (abs > w.absolute) {
      w.absolute = abs;
      w.atAbsolute = x;
    }
    if (std::fabs(want) >= minMagnitudeForRelative) {
      double rel = abs / std::fabs(want);
      if (rel > w.relative) {
        w.relative = rel;
        w.atRelative = x;
      }
    }
  };
  for (uint64_t bits = 0; bits < (1ull << 32); bits += 97)
    check(std::bit_cast<float>(static_cast<uint32_t>(bits)));
  for (float x = -12.f; x < 12.f; x += 1.f / 4096.f) check(x);
  return w;
}

TEST(VectorMath, ExpRelativeErrorWhereResultIsNormal) {
  // Relative error where exp(x) is a normal float; below FLT_MIN results flush to zero.
  Worst w = measure(
      fast_exp,
      [](double x) {
        double e = std::exp(x);
        return e < FLT_MIN ? 0.0 : (e > FLT_MAX ? HUGE_VAL : e);
      },
      FLT_MIN);
  EXPECT_LT(w.relative, 3e-7) << "at x = " << w.atRelative;
  EXPECT_EQ(fast_exp(-200.f), 0.f);
  EXPECT_TRUE(std::isinf(fast_exp(100.f)));
  EXPECT_FLOAT_EQ(fast_exp(0.f), 1.f);
}

TEST(VectorMath, TanhAbsoluteAndRelativeError) {
  Worst w = measure(
      fast_tanh, [](double x) { return std::tanh(x); }, 1e-3);
  EXPECT_LT(w.absolute, 4e-7) << "at x = " << w.atAbsolute;
  EXPECT_LT(w.relative, 1e-6) << "at x = " << w.atRelative;
  EXPECT_EQ(fast_tanh(30.f), 1.f);
  EXPECT_EQ(fast_tanh(-30.f), -1.f);
}

TEST(VectorMath, SigmoidRelativeError) {
  Worst w = measure(
      fast_sigmoid, [](double x) { return x < -87 ? 0.0 : 1 / (1 + std::exp(-x)); }, 1e-37);
  EXPECT_LT(w.relative, 1e-6) << "at x = " << w.atRelative;
  EXPECT_LT(w.absolute, 1e-6) << "at x = " << w.atAbsolute;
}

TEST(VectorMath, ErfAbsoluteError) {
  Worst w = measure(
      fast_erf, [](double x) { return std::erf(x); }, 1e300);
  EXPECT_LT(w.absolute, 3e-7) << "at x = " << w.atAbsolute;
  EXPECT_EQ(fast_erf(10.f), 1.f);
  EXPECT_EQ(fast_erf(-10.f), -1.f);
}

TEST(VectorMath, GeluMatchesTheErfDefinition) {
  Worst w = measure(
      fast_gelu, [](double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }, 1e-3);
  EXPECT_LT(w.relative, 2e-6) << "at x = " << w.atRelative;
}

} // namespace
} // namespace tunec::rt
