// The calibration of `tunec quantize`: minmax keeps the observed range, percentile the range of
// the middle p% of the values (outliers saturate), entropy the threshold of least information
// lost, over every sample, leaving out non-finite values, the same for the same samples.
#include "frontend/onnx_quantize.h"

#include <cmath>
#include <gtest/gtest.h>
#include <random>

namespace tunec {
namespace {

Tensor values(std::vector<float> v) {
  Tensor t(DType::F32, Shape{static_cast<int64_t>(v.size())});
  for (size_t i = 0; i < v.size(); ++i) t.dataAs<float>()[i] = v[i];
  return t;
}

TEST(RangeCalibrator, MinmaxIsTheObservedRangeOverEverySample) {
  RangeCalibrator c(QuantizeOptions{});
  c.observe("a", values({1.f, -2.f, NAN}));
  c.observe("a", values({5.f, INFINITY, 0.5f}));
  c.observe("b", values({NAN}));
  auto r = c.ranges();
  ASSERT_EQ(r.count("a"), 1u);
  EXPECT_EQ(r["a"], std::make_pair(-2.0, 5.0));
  EXPECT_EQ(r.count("b"), 0u) << "no finite value: no range";
}

TEST(RangeCalibrator, PercentileLeavesOutTheOutliersDeterministically) {
  QuantizeOptions options;
  options.method = "percentile";
  options.percentile = 99.0;
  std::mt19937 rng(4);
  std::normal_distribution<float> normal(0.f, 1.f);
  std::vector<Tensor> samples;
  for (int s = 0; s < 6; ++s) {
    std::vector<float> v(200000);
    for (float& x : v) x = normal(rng);
    v[0] = 1000.f, v[1] = -500.f; // outliers
    samples.push_back(values(v));
  }
  auto run = [&] {
    RangeCalibrator c(options);
    for (const Tensor& t : samples) c.observe("x", t); // 1.2M values: past the reservoir
    return c.ranges().at("x");
  };
  auto [lo, hi] = run();
  // The 1st and 99th percentiles of a standard normal: -+2.326.
  EXPECT_NEAR(lo, -2.326, 0.05);
  EXPECT_NEAR(hi, 2.326, 0.05);
  EXPECT_EQ(run(), std::make_pair(lo, hi));
  RangeCalibrator minmax{QuantizeOptions{}};
  for (const Tensor& t : samples) minmax.observe("x", t);
  EXPECT_EQ(minmax.ranges().at("x"), std::make_pair(-500.0, 1000.0));
}

// The entropy threshold on distributions whose answer is known: one magnitude only (any lower
// threshold puts all of it in a bin its quantization lacks: the threshold is the magnitude);
// uniform values (clipping only loses: at or near the largest); a normal distribution with far
// outliers (they would stretch every step: clipped near the bulk's tail); nothing.
TEST(EntropyThreshold, KnownDistributions) {
  EXPECT_FLOAT_EQ(entropyThreshold(std::vector<float>(1000, 3.f), 256), 3.f);
  std::mt19937 rng(8);
  std::uniform_real_distribution<float> uniform(0.f, 1.f);
  std::vector<float> u(100000);
  for (float& x : u) x = uniform(rng);
  EXPECT_GT(entropyThreshold(u, 256), 0.95);
  EXPECT_LE(entropyThreshold(u, 256), 1.0);
  std::normal_distribution<float> normal(0.f, 1.f);
  std::vector<float> g(200000);
  for (float& x : g) x = std::fabs(normal(rng));
  g[0] = 1000.f, g[1] = 700.f;
  const double t = entropyThreshold(g, 128);
  EXPECT_GT(t, 2.0);
  EXPECT_LT(t, 10.0) << "the outliers saturate";
  EXPECT_EQ(entropyThreshold({}, 128), 0.0);
  EXPECT_EQ(entropyThreshold(std::vector<float>(10, 0.f), 128), 0.0);
}

// Entropy calibration of a ReLU's output (non-negative: [0, T] over 256 levels) and of a signed
// activation ([-T, T]), both with outliers: ranges far inside the observed ones, the same for
// the same samples.
TEST(RangeCalibrator, EntropyClipsTheOutliersOfOneSidedAndSignedActivations) {
  QuantizeOptions options;
  options.method = "entropy";
  std::mt19937 rng(6);
  std::normal_distribution<float> normal(0.f, 1.f);
  std::vector<Tensor> relu, signedValues;
  for (int s = 0; s < 4; ++s) {
    std::vector<float> r(100000), v(100000);
    for (size_t i = 0; i < r.size(); ++i) r[i] = std::max(0.f, normal(rng)), v[i] = normal(rng);
    r[0] = 300.f, v[0] = 400.f, v[1] = -350.f;
    relu.push_back(values(r));
    signedValues.push_back(values(v));
  }
  auto run = [&] {
    RangeCalibrator c(options);
    for (int s = 0; s < 4; ++s) c.observe("relu", relu[static_cast<size_t>(s)]);
    for (int s = 0; s < 4; ++s) c.observe("signed", signedValues[static_cast<size_t>(s)]);
    return c.ranges();
  };
  auto r = run();
  EXPECT_EQ(r.at("relu").first, 0.0);
  EXPECT_GT(r.at("relu").second, 2.0);
  EXPECT_LT(r.at("relu").second, 10.0);
  EXPECT_EQ(r.at("signed").first, -r.at("signed").second);
  EXPECT_GT(r.at("signed").second, 2.0);
  EXPECT_LT(r.at("signed").second, 10.0);
  EXPECT_EQ(run(), r);
}

} // namespace
} // namespace tunec
