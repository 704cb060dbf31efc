// The ChannelRuns step (the parts of a Concat of NHWC activations that no producer wrote in
// place): runs copied exactly on small-integer data, one and two threads, the other channels
// left as they were; a plan whose runs leave their pixel is rejected as corrupt.
#include "runtime/light_kernels.h"
#include "runtime/model_executor.h"

#include <gtest/gtest.h>
#include <vector>

namespace tunec::rt {
namespace {

TEST(ChannelRuns, CopiesEachRunOfEachPixel) {
  const int64_t pixels = 37, inLd = 11, outLd = 9;
  std::vector<float> in(static_cast<size_t>(pixels * inLd));
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>(i % 251);
  // Runs: channels 2..4 to 0..2, channel 10 to 5, channels 6..7 to 7..8.
  const std::vector<int64_t> runs = {2, 0, 3, 10, 5, 1, 6, 7, 2};
  for (int threads : {1, 2}) {
    std::vector<float> out(static_cast<size_t>(pixels * outLd), -1.f);
    runChannelRuns(reinterpret_cast<const uint8_t*>(in.data()),
                   reinterpret_cast<uint8_t*>(out.data()), pixels, inLd, outLd, runs.data(), 3,
                   threads);
    for (int64_t p = 0; p < pixels; ++p)
      for (int64_t c = 0; c < outLd; ++c) {
        float want = -1.f;
        for (size_t r = 0; r < runs.size(); r += 3)
          if (c >= runs[r + 1] && c < runs[r + 1] + runs[r + 2])
            want = in[static_cast<size_t>(p * inLd + runs[r] + c - runs[r + 1])];
        ASSERT_EQ(out[static_cast<size_t>(p * outLd + c)], want)
            << "pixel " << p << " channel " << c << ", " << threads << " threads";
      }
  }
}

ParsedModel planWith(std::vector<int64_t> ints) {
  ParsedModel m;
  m.plan.tensors = {{Region::Input, 0}, {Region::Output, 0}};
  Step step;
  step.kind = StepKind::ChannelRuns;
  step.label = "Concat 'c'";
  step.tensors = {1, 0};
  step.ints = std::move(ints);
  m.plan.steps.push_back(step);
  m.plan.inputs = {{"x", DType::F32, {1, 4}, 16, {}}};
  m.plan.outputs = {{"y", DType::F32, {1, 4}, 16, {}}};
  return m;
}

TEST(ChannelRuns, RunsOutsideTheirPixelAreACorruptPlan) {
  auto good = ModelExecutor::create(planWith({1, 4, 4, 1, 0, 0, 4}), {}, 1, nullptr);
  ASSERT_TRUE(good.isOk()) << good.error().message();
  float x[4] = {1, 2, 3, 4}, y[4] = {};
  const void* in[] = {x};
  void* out[] = {y};
  ASSERT_TRUE((*good)->run(in, out).isOk());
  EXPECT_EQ(y[3], 4.f);
  for (std::vector<int64_t> bad :
       {std::vector<int64_t>{1, 4, 4, 1, 1, 0, 4}, std::vector<int64_t>{1, 4, 4, 1, 0, 2, 3},
        std::vector<int64_t>{1, 4, 4, 2, 0, 0, 4}, std::vector<int64_t>{1, 4, 4, 1, -1, 0, 1},
        std::vector<int64_t>{1, 4, 0, 1, 0, 0, 0}}) {
    auto made = ModelExecutor::create(planWith(bad), {}, 1, nullptr);
    ASSERT_FALSE(made.isOk());
    EXPECT_NE(made.error().message().find("corrupt model plan: step 'Concat 'c''"),
              std::string::npos)
        << made.error().message();
  }
}

} // namespace
} // namespace tunec::rt
