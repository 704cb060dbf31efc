// The calibration of `tunec quantize`: minmax keeps the observed range, percentile the range of
// the middle p% of the values (outliers saturate), over every sample, leaving out non-finite
// values, the same for the same samples.
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

} // namespace
} // namespace tunec
