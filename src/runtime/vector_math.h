// Vectorizable float math for the loop kernels: branch-free polynomial forms that the compiler
// turns into AVX-512/AVX2 code when applied over arrays. Accuracy against double-precision std::
// math, measured over the whole float range by tests/runtime/vector_math_test.cpp:
//   fast_exp      relative error < 3e-7 where the result is a normal float (below: flushed to 0)
//   fast_tanh     absolute error < 4e-7 (relative < 1e-6 for |x| > 1e-3)
//   fast_sigmoid  relative error < 1e-6 for x > -87 (absolute < 1e-37 below)
//   fast_erf      absolute error < 3e-7
//   fast_gelu     relative error < 2e-6 where |result| >= 1e-3
#pragma once

#include <bit>
#include <cstdint>

namespace tunec::rt {

inline float fast_exp(float x) {
  // exp(x) = 2^n * exp(r), n = round(x / ln 2), |r| <= ln2 / 2; degree-7 Taylor for exp(r).
  float xc = x < -87.33654f ? -87.33654f : (x > 88.72283f ? 88.72283f : x);
  float n = __builtin_roundf(xc * 1.44269504088896341f);
  float r = xc - n * 0.693145751953125f; // ln2 split: hi part exact in float
  r = r - n * 1.428606765330187e-06f;
  float p = 1.f / 5040.f;
  p = p * r + 1.f / 720.f;
  p = p * r + 1.f / 120.f;
  p = p * r + 1.f / 24.f;
  p = p * r + 1.f / 6.f;
  p = p * r + 0.5f;
  p = p * r + 1.f;
  p = p * r + 1.f;
  // 2^n built in two halves so that n = 128 (x near 88.7) does not overflow the exponent.
  int32_t ni = static_cast<int32_t>(n);
  int32_t half = ni >> 1;
  float s1 = std::bit_cast<float>((half + 127) << 23);
  float s2 = std::bit_cast<float>((ni - half + 127) << 23);
  float y = p * s1 * s2;
  return x < -87.33654f ? 0.f : (x > 88.72283f ? __builtin_inff() : y);
}

inline float fast_tanh(float x) {
  // Rational minimax approximation on [-9, 9] (as in Eigen's fast tanh); tanh(+-9) = +-1 in
  // float.
  float xc = x < -9.f ? -9.f : (x > 9.f ? 9.f : x);
  float x2 = xc * xc;
  float p = -2.76076847742355e-16f;
  p = p * x2 + 2.00018790482477e-13f;
  p = p * x2 + -8.60467152213735e-11f;
  p = p * x2 + 5.12229709037114e-08f;
  p = p * x2 + 1.48572235717979e-05f;
  p = p * x2 + 6.37261928875436e-04f;
  p = p * x2 + 4.89352455891786e-03f;
  p = p * xc;
  float q = 1.19825839466702e-06f;
  q = q * x2 + 1.18534705686654e-04f;
  q = q * x2 + 2.26843463243900e-03f;
  q = q * x2 + 4.89352518554385e-03f;
  float y = p / q;
  float ax = x < 0 ? -x : x;
  return ax < 4e-4f ? x : y;
}

inline float fast_sigmoid(float x) {
  return 1.f / (1.f + fast_exp(-x));
}

/// erfc(a) for a >= 0: Numerical Recipes' Chebyshev fit (fractional error < 1.2e-7).
inline float fast_erfc_nonnegative(float a) {
  float t = 1.f / (1.f + 0.5f * a);
  float e = 0.17087277f;
  e = e * t - 0.82215223f;
  e = e * t + 1.48851587f;
  e = e * t - 1.13520398f;
  e = e * t + 0.27886807f;
  e = e * t - 0.18628806f;
  e = e * t + 0.09678418f;
  e = e * t + 0.37409196f;
  e = e * t + 1.00002368f;
  e = e * t - 1.26551223f;
  return t * fast_exp(-a * a + e);
}

/// erf(x) for |x| < 0.9: the Taylor series x * P(x^2), 12 terms.
inline float fast_erf_small(float x) {
  float x2 = x * x;
  float s = -1.f / (23.f * 39916800.f); // (-1)^11 / (11! * 23)
  s = s * x2 + 1.f / (21.f * 3628800.f);
  s = s * x2 - 1.f / (19.f * 362880.f);
  s = s * x2 + 1.f / (17.f * 40320.f);
  s = s * x2 - 1.f / (15.f * 5040.f);
  s = s * x2 + 1.f / (13.f * 720.f);
  s = s * x2 - 1.f / (11.f * 120.f);
  s = s * x2 + 1.f / (9.f * 24.f);
  s = s * x2 - 1.f / (7.f * 6.f);
  s = s * x2 + 1.f / (5.f * 2.f);
  s = s * x2 - 1.f / 3.f;
  s = s * x2 + 1.f;
  return x * s * 1.12837916709551257f; // 2 / sqrt(pi)
}

inline float fast_erf(float x) {
  float ax = x < 0 ? -x : x;
  float large = 1.f - fast_erfc_nonnegative(ax);
  large = x < 0 ? -large : large;
  return ax < 0.9f ? fast_erf_small(x) : large;
}

/// 0.5 x (1 + erf(x / sqrt 2)); for x / sqrt 2 < -0.9 through erfc, so that the small results
/// of large negative x keep their relative accuracy.
inline float fast_gelu(float x) {
  float z = x * 0.70710678118654752f;
  float az = z < 0 ? -z : z;
  float erfc = fast_erfc_nonnegative(az);
  float onePlusErf = az < 0.9f ? 1.f + fast_erf_small(z) : (z < 0 ? erfc : 2.f - erfc);
  return 0.5f * x * onePlusErf;
}

} // namespace tunec::rt
