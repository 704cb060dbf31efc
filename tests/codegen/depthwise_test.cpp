// The depthwise template against the reference executor's grouped Conv (group = channels):
// default and random configs over odd sizes, strides, pads, dilations and channel tails, with
// epilogues. Tolerance: 4 * kh*kw * eps + 1e-5 (inputs in [-1, 1]).
#include "codegen/depthwise_kernel.h"
#include "ir/graph.h"
#include "reference/reference.h"
#include "test_support.h"

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
  kernel->run(x.dataAs<float>(), out.dataAs<float>(), bias.dataAs<float>(), addend.dataAs<float>());

  Graph g;
  ValueId vx = g.addInput("x", {DType::F32, x.shape(), {}});
  ValueId vw = g.addInput("w", {DType::F32, weights.shape(), {}});
  ValueId vb = g.addInput("b", {DType::F32, bias.shape(), {}});
  ValueId va = g.addInput("a", {DType::F32, addend.shape(), {}});
  auto node = [&](OpKind kind, OpAttrs attrs, std::vector<ValueId> in) {
    auto n = g.addNode("n" + std::to_string(g.nodes().size()), kind, std::move(attrs),
                       std::move(in), {"v" + std::to_string(g.nodes().size())});
    EXPECT_TRUE(n.isOk()) << n.error().message();
    return g.node(*n).outputs[0];
  };
  ValueId y = node(OpKind::Transpose, TransposeAttrs{{0, 3, 1, 2}}, {vx});
  ConvAttrs attrs{{w.kh, w.kw},
                  {w.strideH, w.strideW},
                  {w.padTop, w.padLeft, w.padBottom, w.padRight},
                  {w.dilationH, w.dilationW},
                  w.c};
  y = node(OpKind::Conv, attrs,
           epilogueNeedsBias(epi) ? std::vector<ValueId>{y, vw, vb} : std::vector<ValueId>{y, vw});
  y = node(OpKind::Transpose, TransposeAttrs{{0, 2, 3, 1}}, {y});
  for (const PostOp& op : epi) {
    if (op.kind == PostOpKind::Relu) y = node(OpKind::Relu, NoAttrs{}, {y});
    if (op.kind == PostOpKind::Clip) y = node(OpKind::Clip, ClipAttrs{op.lo, op.hi}, {y});
    if (op.kind == PostOpKind::AddTensor) y = node(OpKind::Add, NoAttrs{}, {y, va});
  }
  g.addOutput(y);
  auto want = runReference(g, {x, weights, bias, addend});
  ASSERT_TRUE(want.isOk()) << want.error().message();
  double tol = 4.0 * static_cast<double>(w.kh * w.kw) * 1.1920929e-7 + 1e-5;
  for (int64_t i = 0; i < out.numel(); ++i)
    ASSERT_NEAR(out.getDouble(i), (*want)[0].getDouble(i), tol)
        << "element " << i << " of " << w.toJson().dump() << " with config " << c.toJson().dump();
}

TEST(DepthwiseTemplate, DefaultAndRandomConfigsMatchReference) {
  std::mt19937 rng(11);
  int checked = 0;
  for (Isa isa : {Isa::Avx2, Isa::Avx512}) {
    if (!hostSupports(isa)) continue;
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
        KnobSpace space = depthwiseKnobSpace(w, isa);
        c.channelVectors = space[0].values[rng() % space[0].values.size()].get<int>();
        c.owBlock = space[1].values[rng() % space[1].values.size()].get<int>();
        c.parallel = space[2].values[rng() % space[2].values.size()].get<std::string>();
      }
      if (!validateDepthwiseConfig(w, c).isOk()) continue;
      Epilogue epi;
      if (trial % 2 == 0) epi.push_back({PostOpKind::BiasPerColumn});
      if (trial % 3 == 0) epi.push_back({PostOpKind::Clip, 0.f, 6.f});
      if (trial % 5 == 1) epi.push_back({PostOpKind::AddTensor});
      checkDepthwise(w, c, epi, static_cast<uint32_t>(trial));
      ++checked;
    }
  }
  EXPECT_GE(checked, 20);
}

TEST(DepthwiseTemplate, RegisterLimitIsReported) {
  DepthwiseWorkload w;
  w.c = 64, w.h = w.w = 20;
  DepthwiseConfig c{Isa::Avx2, 4, 8, "none"};
  EXPECT_EQ(validateDepthwiseConfig(w, c).error().message(),
            "depthwise config: 8 pixels x 4 vectors need 37 vector registers, avx2 has 16");
}

} // namespace
} // namespace tunec
