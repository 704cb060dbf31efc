// Graph passes: each rewrite checked structurally and numerically against the unrewritten
// graph on random inputs (reference executor).
#include "ir/verifier.h"
#include "passes/fusion_plan.h"
#include "passes/memory_plan.h"
#include "passes/passes.h"
#include "reference/reference.h"

#include <algorithm>
#include <cmath>
#include <gtest/gtest.h>
#include <random>

namespace tunec {
namespace {

Tensor randomTensor(Shape shape, uint32_t seed, float lo = -1.f, float hi = 1.f) {
  Tensor t(DType::F32, std::move(shape));
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  for (int64_t i = 0; i < t.numel(); ++i) t.dataAs<float>()[i] = dist(rng);
  return t;
}

ValueId add(Graph& g, OpKind kind, OpAttrs attrs, std::vector<ValueId> in,
            const std::string& name) {
  auto n = g.addNode(name, kind, std::move(attrs), std::move(in), {name});
  EXPECT_TRUE(n.isOk()) << n.error().message();
  return g.node(*n).outputs[0];
}

// Runs both graphs on the same random inputs and compares every output.
void expectEquivalent(const Graph& before, const Graph& after, double tol) {
  ASSERT_TRUE(verifyGraph(after).isOk()) << verifyGraph(after).error().message();
  std::vector<Tensor> inputs;
  for (ValueId in : before.inputs())
    inputs.push_back(randomTensor(before.value(in).type.shape, 99));
  auto a = runReference(before, inputs);
  auto b = runReference(after, inputs);
  ASSERT_TRUE(a.isOk() && b.isOk());
  ASSERT_EQ(a->size(), b->size());
  for (size_t o = 0; o < a->size(); ++o)
    for (int64_t i = 0; i < (*a)[o].numel(); ++i)
      ASSERT_NEAR((*a)[o].getDouble(i), (*b)[o].getDouble(i), tol) << i;
}

TEST(Passes, FoldBatchNormIntoConv) {
  Graph g;
  ValueId x = g.addInput("x", {DType::F32, Shape{1, 3, 8, 8}, {}});
  ValueId w = g.addConstant("w", randomTensor(Shape{6, 3, 3, 3}, 1));
  ValueId b = g.addConstant("b", randomTensor(Shape{6}, 2));
  ValueId conv =
      add(g, OpKind::Conv, ConvAttrs{{3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1}, {x, w, b}, "conv");
  ValueId gamma = g.addConstant("gamma", randomTensor(Shape{6}, 3, 0.5f, 1.5f));
  ValueId beta = g.addConstant("beta", randomTensor(Shape{6}, 4));
  ValueId mean = g.addConstant("mean", randomTensor(Shape{6}, 5));
  ValueId var = g.addConstant("var", randomTensor(Shape{6}, 6, 0.5f, 2.f));
  ValueId bn =
      add(g, OpKind::BatchNormalization, NormAttrs{1, 1e-5f}, {conv, gamma, beta, mean, var}, "bn");
  ValueId y = add(g, OpKind::Relu, NoAttrs{}, {bn}, "relu");
  g.addOutput(y);
  auto folded = passes::foldBatchNorm(g);
  ASSERT_TRUE(folded.isOk()) << folded.error().message();
  ASSERT_EQ(folded->nodes().size(), 2u);
  EXPECT_EQ(folded->nodes()[0].kind, OpKind::Conv);
  EXPECT_EQ(folded->nodes()[1].kind, OpKind::Relu);
  expectEquivalent(g, *folded, 1e-4);
}

TEST(Passes, BatchNormWhoseConvOutputHasAnotherUseStays) {
  Graph g;
  ValueId x = g.addInput("x", {DType::F32, Shape{1, 2, 4, 4}, {}});
  ValueId w = g.addConstant("w", randomTensor(Shape{2, 2, 1, 1}, 1));
  ValueId conv =
      add(g, OpKind::Conv, ConvAttrs{{1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1}, {x, w}, "conv");
  std::vector<ValueId> stats;
  for (int i = 0; i < 4; ++i)
    stats.push_back(
        g.addConstant("s" + std::to_string(i), randomTensor(Shape{2}, 10 + i, 0.5f, 1.f)));
  ValueId bn = add(g, OpKind::BatchNormalization, NormAttrs{1, 1e-5f},
                   {conv, stats[0], stats[1], stats[2], stats[3]}, "bn");
  ValueId sum = add(g, OpKind::Add, NoAttrs{}, {bn, conv}, "sum");
  g.addOutput(sum);
  auto folded = passes::foldBatchNorm(g);
  ASSERT_TRUE(folded.isOk());
  EXPECT_EQ(folded->nodes().size(), 3u);
  expectEquivalent(g, *folded, 1e-5);
}

// A batch norm no Conv absorbs (pre-activation, or on a 2-d N x C tensor) becomes Mul + Add.
TEST(Passes, StandaloneBatchNormBecomesAPerChannelMulAndAdd) {
  for (Shape shape : {Shape{2, 6, 5, 4}, Shape{3, 6}}) {
    Graph g;
    ValueId x = g.addInput("x", {DType::F32, shape, {}});
    ValueId r = add(g, OpKind::Relu, NoAttrs{}, {x}, "relu");
    ValueId gamma = g.addConstant("gamma", randomTensor(Shape{6}, 3, 0.5f, 1.5f));
    ValueId beta = g.addConstant("beta", randomTensor(Shape{6}, 4));
    ValueId mean = g.addConstant("mean", randomTensor(Shape{6}, 5));
    ValueId var = g.addConstant("var", randomTensor(Shape{6}, 6, 0.5f, 2.f));
    ValueId bn =
        add(g, OpKind::BatchNormalization, NormAttrs{1, 1e-3f}, {r, gamma, beta, mean, var}, "bn");
    g.addOutput(bn);
    auto out = passes::decomposeBatchNorm(g);
    ASSERT_TRUE(out.isOk()) << out.error().message();
    ASSERT_EQ(out->nodes().size(), 3u);
    EXPECT_EQ(out->nodes()[1].kind, OpKind::Mul);
    EXPECT_EQ(out->nodes()[2].kind, OpKind::Add);
    EXPECT_EQ(out->value(out->outputs()[0]).name, g.value(bn).name);
    expectEquivalent(g, *out, 1e-5);
  }
}

// A fake quantization (QuantizeLinear then DequantizeLinear with the same per-tensor scale and
// zero point) becomes f32 Div, Round, Clip and Mul with the same values; a pair whose
// parameters differ, or that is per axis, stays.
TEST(Passes, QuantizeRoundTripsBecomeFloatArithmetic) {
  for (DType zpType : {DType::U8, DType::I8}) {
    Graph g;
    ValueId x = g.addInput("x", {DType::F32, Shape{2, 3, 4, 4}, {}});
    Tensor scale(DType::F32, Shape{}), zp(zpType, Shape{}), other(zpType, Shape{});
    scale.setDouble(0, 0.0125), zp.setInt(0, zpType == DType::U8 ? 37 : -5), other.setInt(0, 3);
    ValueId s = g.addConstant("s", scale), z = g.addConstant("z", zp);
    ValueId z2 = g.addConstant("z2", other);
    ValueId q = add(g, OpKind::QuantizeLinear, QuantAttrs{0}, {x, s, z}, "q");
    ValueId roundTrip = add(g, OpKind::DequantizeLinear, QuantAttrs{0}, {q, s, z}, "dq");
    ValueId mismatched = add(g, OpKind::DequantizeLinear, QuantAttrs{0}, {q, s, z2}, "dq2");
    g.addOutput(roundTrip);
    g.addOutput(mismatched);
    auto out = passes::lowerQuantizeRoundTrips(g);
    ASSERT_TRUE(out.isOk()) << out.error().message();
    int quantizeOps = 0, divs = 0;
    for (const Node& n : out->nodes()) {
      quantizeOps += n.kind == OpKind::QuantizeLinear || n.kind == OpKind::DequantizeLinear;
      divs += n.kind == OpKind::Div;
    }
    EXPECT_EQ(divs, 1);
    EXPECT_EQ(quantizeOps, 2)
        << "the mismatched pair keeps its QuantizeLinear and DequantizeLinear";
    // Inputs from -1 to 1 over a scale of 0.0125 reach both ends of i8's range around -5.
    expectEquivalent(g, *out, 0.0);
  }
}

// check-quantization refuses, naming the node and the scale, the constant scales no arithmetic
// honours (NaN, infinite, zero, negative, subnormal; one bad element of a per-channel scale) and
// a dequantization whose values overflow f32 (1e37 times s8 weights up to 100; times a u8
// activation's distance of up to 255 from its zero point); ordinary scales, and scales computed
// at run time, pass.
TEST(Passes, CheckQuantizationRefusesScalesNoArithmeticHonours) {
  struct Case {
    double weightScale, activationScale;
    const char* error; // nullptr: accepted
  };
  for (const Case& c :
       {Case{0.02, 0.1, nullptr}, Case{std::nan(""), 0.1, "element 1 is nan"},
        Case{INFINITY, 0.1, "element 1 is inf"}, Case{0.0, 0.1, "element 1 is 0"},
        Case{-0.5, 0.1, "element 1 is -0.5"}, Case{1e-40, 0.1, "element 1 is 9.99995e-41"},
        Case{0.02, std::nan(""), "QuantizeLinear 'q': its scale 's' is nan"},
        Case{1e37, 0.1,
             "DequantizeLinear 'dw': its scale 'sw' (up to 1e+37) "
             "times its codes' largest distance from the zero point "
             "(100) is 1e+39, beyond f32's range"},
        Case{0.02, 2e36,
             "DequantizeLinear 'dq': its scale 's' (up to 2e+36) times "
             "its codes' largest distance from the zero point (250)"}}) {
    SCOPED_TRACE(c.error ? c.error : "accepted");
    Graph g;
    ValueId x = g.addInput("x", {DType::F32, Shape{2, 3}, {}});
    Tensor s(DType::F32, Shape{}), z(DType::U8, Shape{}), w(DType::I8, Shape{3, 4}),
        sw(DType::F32, Shape{4}), zw(DType::I8, Shape{4});
    s.setDouble(0, c.activationScale), z.setInt(0, 5);
    for (int64_t i = 0; i < w.numel(); ++i) w.setInt(i, i % 2 ? 100 : -7);
    for (int64_t j = 0; j < 4; ++j) sw.setDouble(j, j == 1 ? c.weightScale : 0.01);
    ValueId sv = g.addConstant("s", s), zv = g.addConstant("z", z);
    ValueId q = add(g, OpKind::QuantizeLinear, QuantAttrs{0}, {x, sv, zv}, "q");
    ValueId dq = add(g, OpKind::DequantizeLinear, QuantAttrs{0}, {q, sv, zv}, "dq");
    ValueId dw =
        add(g, OpKind::DequantizeLinear, QuantAttrs{1},
            {g.addConstant("w", w), g.addConstant("sw", sw), g.addConstant("zw", zw)}, "dw");
    g.addOutput(add(g, OpKind::MatMul, NoAttrs{}, {dq, dw}, "mm"));
    auto checked = passes::checkQuantization(g);
    if (!c.error) {
      EXPECT_TRUE(checked.isOk()) << checked.error().message();
      continue;
    }
    ASSERT_FALSE(checked.isOk());
    EXPECT_NE(checked.error().message().find(c.error), std::string::npos)
        << checked.error().message();
    EXPECT_NE(checked.error().message().find("re-quantize"), std::string::npos);
  }
  // A scale given at run time is not the pass's to judge.
  Graph g;
  ValueId x = g.addInput("x", {DType::F32, Shape{4}, {}});
  ValueId s = g.addInput("s", {DType::F32, Shape{}, {}});
  g.addOutput(add(g, OpKind::QuantizeLinear, QuantAttrs{0},
                  {x, s, g.addConstant("z", Tensor(DType::U8, Shape{}))}, "q"));
  EXPECT_TRUE(passes::checkQuantization(g).isOk());
}

// Two fake-quantized branches meeting in an Add (ResNet-50's downsampling block): the earlier
// branch's pair stays QuantizeLinear and DequantizeLinear (the later branch's kernel reads its
// u8 tensor as the residual addend), the later one's becomes float arithmetic; with the Add's
// operands the other way round, the same. A pair read by anything else than that Add is
// lowered as before.
TEST(Passes, TheEarlierBranchOfAQuantizedAddKeepsItsU8) {
  for (bool swapped : {false, true}) {
    for (bool extraUse : {false, true}) {
      Graph g;
      ValueId x = g.addInput("x", {DType::F32, Shape{1, 4, 3, 3}, {}});
      Tensor scale(DType::F32, Shape{}), zp(DType::U8, Shape{});
      scale.setDouble(0, 0.02), zp.setInt(0, 100);
      ValueId s = g.addConstant("s", scale), z = g.addConstant("z", zp);
      ValueId main = add(g, OpKind::Relu, NoAttrs{}, {x}, "main");
      ValueId mq = add(g, OpKind::QuantizeLinear, QuantAttrs{0}, {main, s, z}, "mq");
      ValueId md = add(g, OpKind::DequantizeLinear, QuantAttrs{0}, {mq, s, z}, "md");
      ValueId side = add(g, OpKind::Sigmoid, NoAttrs{}, {x}, "side");
      ValueId sq = add(g, OpKind::QuantizeLinear, QuantAttrs{0}, {side, s, z}, "sq");
      ValueId sd = add(g, OpKind::DequantizeLinear, QuantAttrs{0}, {sq, s, z}, "sd");
      ValueId sum = add(g, OpKind::Add, NoAttrs{},
                        swapped ? std::vector{sd, md} : std::vector{md, sd}, "sum");
      g.addOutput(sum);
      if (extraUse) g.addOutput(add(g, OpKind::Neg, NoAttrs{}, {md}, "neg"));
      auto out = passes::lowerQuantizeRoundTrips(g);
      ASSERT_TRUE(out.isOk()) << out.error().message();
      int quantizes = 0, divs = 0;
      for (const Node& n : out->nodes()) {
        quantizes += n.kind == OpKind::QuantizeLinear;
        divs += n.kind == OpKind::Div;
        if (n.kind == OpKind::QuantizeLinear) {
          EXPECT_EQ(n.name, "mq");
        }
      }
      EXPECT_EQ(quantizes, extraUse ? 0 : 1) << "swapped " << swapped << " extra use " << extraUse;
      EXPECT_EQ(divs, extraUse ? 2 : 1);
      expectEquivalent(g, *out, 0.0);
    }
  }
}

// A Gemm of a dequantized u8 activation and dequantized s8 weights (transposed, per output
// channel, with a bias) becomes an IntegerMatMul, its column scale, zero-point correction and
// bias; layers the int8 kernels cannot take stay as they are: s8 activations, weights with a
// zero point, computed weights.
TEST(Passes, QuantizedMatmulsBecomeIntegerMatmulsWithTheirCorrections) {
  auto build = [](DType activation, int64_t weightZero, bool constantWeights) {
    Graph g;
    ValueId x = g.addInput("x", {DType::F32, Shape{5, 24}, {}});
    Tensor sa(DType::F32, Shape{}), za(activation, Shape{});
    sa.setDouble(0, 0.01), za.setInt(0, activation == DType::U8 ? 130 : 0);
    ValueId s = g.addConstant("sa", sa), z = g.addConstant("za", za);
    ValueId xq = add(g, OpKind::QuantizeLinear, QuantAttrs{1}, {x, s, z}, "xq");
    ValueId xd = add(g, OpKind::DequantizeLinear, QuantAttrs{1}, {xq, s, z}, "xd");
    Tensor wq(DType::I8, Shape{12, 24}), sb(DType::F32, Shape{12}), zb(DType::I8, Shape{12});
    std::mt19937 rng(3);
    for (int64_t i = 0; i < wq.numel(); ++i) wq.setInt(i, static_cast<int>(rng() % 255) - 127);
    for (int64_t j = 0; j < 12; ++j) sb.setDouble(j, 0.002 * (j + 1)), zb.setInt(j, weightZero);
    ValueId w = constantWeights ? g.addConstant("wq", wq)
                                : g.addInput("wq", {DType::I8, Shape{12, 24}, {}});
    ValueId wd = add(g, OpKind::DequantizeLinear, QuantAttrs{0},
                     {w, g.addConstant("sb", sb), g.addConstant("zb", zb)}, "wd");
    GemmAttrs attrs;
    attrs.transB = true;
    ValueId y =
        add(g, OpKind::Gemm, attrs, {xd, wd, g.addConstant("b", randomTensor({12}, 4))}, "fc");
    g.addOutput(y);
    return g;
  };
  auto count = [](const Graph& g, OpKind kind) {
    return std::count_if(g.nodes().begin(), g.nodes().end(),
                         [&](const Node& n) { return n.kind == kind; });
  };
  Graph g = build(DType::U8, 0, true);
  auto out = passes::lowerQuantizedLayers(g);
  ASSERT_TRUE(out.isOk()) << out.error().message();
  EXPECT_EQ(count(*out, OpKind::IntegerMatMul), 1);
  EXPECT_EQ(count(*out, OpKind::Gemm), 0);
  EXPECT_EQ(count(*out, OpKind::Add), 2); // the zero point's correction, the bias
  EXPECT_EQ(count(*out, OpKind::Mul), 1); // the column scale
  expectEquivalent(g, *out, 1e-5);
  for (Graph other :
       {build(DType::I8, 0, true), build(DType::U8, 3, true), build(DType::U8, 0, false)}) {
    auto same = passes::lowerQuantizedLayers(other);
    ASSERT_TRUE(same.isOk()) << same.error().message();
    EXPECT_EQ(count(*same, OpKind::IntegerMatMul), 0);
    EXPECT_EQ(count(*same, OpKind::Gemm), 1);
  }
}

// A Conv of a dequantized u8 activation (nonzero zero point) and dequantized s8 weights per
// output channel, padded, strided and grouped, with a bias, becomes an IntegerConv whose padding
// reads the zero point, times its channel scale, plus the correction and the bias, and computes
// the same values, as does a depthwise one; one of 3 input channels per group and one of s8
// activations stay Convs, and the compile report's analysis names why.
TEST(Passes, QuantizedConvsBecomeIntegerConvsPaddedWithTheirZeroPoint) {
  auto build = [](int64_t ic, int64_t groups, DType activation) {
    Graph g;
    ValueId x = g.addInput("x", {DType::F32, Shape{1, ic, 7, 6}, {}});
    Tensor sa(DType::F32, Shape{}), za(activation, Shape{});
    sa.setDouble(0, 0.01), za.setInt(0, activation == DType::U8 ? 93 : 0);
    ValueId s = g.addConstant("sa", sa), z = g.addConstant("za", za);
    ValueId xq = add(g, OpKind::QuantizeLinear, QuantAttrs{1}, {x, s, z}, "xq");
    ValueId xd = add(g, OpKind::DequantizeLinear, QuantAttrs{1}, {xq, s, z}, "xd");
    const int64_t oc = groups == ic ? ic : 8;
    Tensor wq(DType::I8, Shape{oc, ic / groups, 3, 3}), sb(DType::F32, Shape{oc}),
        zb(DType::I8, Shape{oc});
    std::mt19937 rng(5);
    for (int64_t i = 0; i < wq.numel(); ++i) wq.setInt(i, static_cast<int>(rng() % 255) - 127);
    for (int64_t j = 0; j < oc; ++j) sb.setDouble(j, 0.003 * (j + 1)), zb.setInt(j, 0);
    ValueId wd =
        add(g, OpKind::DequantizeLinear, QuantAttrs{0},
            {g.addConstant("wq", wq), g.addConstant("sb", sb), g.addConstant("zb", zb)}, "wd");
    ConvAttrs attrs{{3, 3}, {2, 1}, {1, 1, 1, 1}, {1, 1}, groups};
    g.addOutput(
        add(g, OpKind::Conv, attrs, {xd, wd, g.addConstant("b", randomTensor({oc}, 6))}, "conv"));
    return g;
  };
  auto count = [](const Graph& g, OpKind kind) {
    return std::count_if(g.nodes().begin(), g.nodes().end(),
                         [&](const Node& n) { return n.kind == kind; });
  };
  Graph g = build(8, 2, DType::U8);
  auto out = passes::lowerQuantizedLayers(g);
  ASSERT_TRUE(out.isOk()) << out.error().message();
  ASSERT_TRUE(verifyGraph(*out).isOk()) << verifyGraph(*out).error().message();
  EXPECT_EQ(count(*out, OpKind::IntegerConv), 1);
  EXPECT_EQ(count(*out, OpKind::Conv), 0);
  for (const Node& n : out->nodes()) {
    if (n.kind == OpKind::IntegerConv) {
      EXPECT_EQ(std::get<ConvAttrs>(n.attrs).padValue, 93);
    }
  }
  EXPECT_EQ(count(*out, OpKind::Add), 2); // the zero point's correction, the bias
  EXPECT_EQ(count(*out, OpKind::Mul), 1); // the channel scale
  expectEquivalent(g, *out, 1e-5);
  EXPECT_TRUE(passes::quantizedLayersKeptFloat(g).empty());
  // A depthwise one too (its kernel sums exactly, whatever its channels), and an RGB one (3
  // channels of one group: the kernel rounds them up to a quad).
  for (Graph one : {build(8, 8, DType::U8), build(3, 1, DType::U8)}) {
    auto lowered = passes::lowerQuantizedLayers(one);
    ASSERT_TRUE(lowered.isOk()) << lowered.error().message();
    EXPECT_EQ(count(*lowered, OpKind::IntegerConv), 1);
    expectEquivalent(one, *lowered, 1e-5);
  }
  const std::pair<Graph, std::string> kept[] = {
      {build(6, 2, DType::U8), "its 3 input channels per group are not a multiple of 4"},
      {build(8, 1, DType::I8), "its activation is s8"}};
  for (const auto& [other, why] : kept) {
    auto same = passes::lowerQuantizedLayers(other);
    ASSERT_TRUE(same.isOk()) << same.error().message();
    EXPECT_EQ(count(*same, OpKind::IntegerConv), 0);
    EXPECT_EQ(count(*same, OpKind::Conv), 1);
    auto reasons = passes::quantizedLayersKeptFloat(other);
    ASSERT_EQ(reasons.size(), 1u);
    EXPECT_NE(reasons[0].second.find(why), std::string::npos) << reasons[0].second;
  }
}

// A quantized Conv of an activation with a zero point (an RGB image's 126) whose bias is an
// int32 quantized with the scale sa sb[oc], as exporters write it, becomes (IntegerConv + k) x
// sa sb: the integers k = bias / (sa sb) - za sum w added before the one Mul. Then
// fold-requantization-scale folds the output QuantizeLinear's scale s (through a Relu) into the
// Mul, f32(f32(sa sb) / s), the QuantizeLinear of scale 1 left; or a lowered round trip's
// division. The u8 results are QLinearConv's (ONNX Runtime's) bit for bit:
// saturate(rint(f32(sum (x - za) w + bias_int32) x f32(f32(sa sb) / s)) + z).
TEST(Passes, AnInt8ConvRequantizesAsQLinearConv) {
  const int64_t ic = 3, oc = 8, h = 11, w = 10, kh = 3, kw = 3, oh = 6, ow = 5;
  const float sa = 0.0362189f, sy = 0.028109416f;
  const int za = 126;
  std::mt19937 rng(41);
  Tensor wq(DType::I8, Shape{oc, ic, kh, kw}), sb(DType::F32, Shape{oc}),
      bias(DType::F32, Shape{oc});
  std::vector<int64_t> kb(oc);
  for (int64_t i = 0; i < wq.numel(); ++i) wq.setInt(i, static_cast<int>(rng() % 255) - 127);
  for (int64_t j = 0; j < oc; ++j) {
    sb.dataAs<float>()[j] = 0.001f * static_cast<float>(1 + rng() % 10);
    kb[j] = static_cast<int64_t>(rng() % 10001) - 5000;
    bias.dataAs<float>()[j] = static_cast<float>(kb[j]) * (sa * sb.dataAs<float>()[j]);
  }
  Tensor xq(DType::U8, Shape{1, ic, h, w});
  for (int64_t i = 0; i < xq.numel(); ++i) xq.setInt(i, static_cast<int>(rng() % 256));
  auto count = [](const Graph& g, OpKind kind) {
    return std::count_if(g.nodes().begin(), g.nodes().end(),
                         [&](const Node& n) { return n.kind == kind; });
  };
  for (bool roundTrip : {false, true}) {
    const int zy = roundTrip ? 123 : 0;
    Graph g;
    ValueId x = g.addInput("xq", {DType::U8, Shape{1, ic, h, w}, {}});
    Tensor sat(DType::F32, Shape{}), zat(DType::U8, Shape{}), syt(DType::F32, Shape{}),
        zyt(DType::U8, Shape{});
    sat.dataAs<float>()[0] = sa, zat.setInt(0, za), syt.dataAs<float>()[0] = sy, zyt.setInt(0, zy);
    ValueId xd = add(g, OpKind::DequantizeLinear, QuantAttrs{1},
                     {x, g.addConstant("sa", sat), g.addConstant("za", zat)}, "xd");
    ValueId wd = add(g, OpKind::DequantizeLinear, QuantAttrs{0},
                     {g.addConstant("wq", wq), g.addConstant("sb", sb),
                      g.addConstant("zb", Tensor(DType::I8, Shape{oc}))},
                     "wd");
    ValueId y = add(g, OpKind::Conv, ConvAttrs{{kh, kw}, {2, 2}, {1, 1, 1, 1}, {1, 1}, 1},
                    {xd, wd, g.addConstant("b", bias)}, "conv");
    if (!roundTrip) y = add(g, OpKind::Relu, NoAttrs{}, {y}, "relu");
    ValueId s = g.addConstant("sy", syt), z = g.addConstant("zy", zyt);
    y = add(g, OpKind::QuantizeLinear, QuantAttrs{1}, {y, s, z}, "q");
    if (roundTrip) y = add(g, OpKind::DequantizeLinear, QuantAttrs{1}, {y, s, z}, "dq");
    g.addOutput(y);
    auto lowered = passes::lowerQuantizedLayers(g);
    ASSERT_TRUE(lowered.isOk()) << lowered.error().message();
    EXPECT_EQ(count(*lowered, OpKind::Add), 1); // the integers k
    auto folded = passes::lowerQuantizeRoundTrips(*lowered);
    ASSERT_TRUE(folded.isOk()) << folded.error().message();
    folded = passes::foldRequantizationScale(*folded);
    ASSERT_TRUE(folded.isOk()) << folded.error().message();
    ASSERT_TRUE(verifyGraph(*folded).isOk()) << verifyGraph(*folded).error().message();
    EXPECT_EQ(count(*folded, OpKind::Div), 0);
    EXPECT_EQ(count(*folded, OpKind::Mul), roundTrip ? 2 : 1); // (and the round trip's x s)
    for (const Node& n : folded->nodes())
      if (n.kind == OpKind::QuantizeLinear) {
        EXPECT_EQ(folded->value(n.inputs[1]).constant->getDouble(0), 1.0);
      }
    auto out = runReference(*folded, {xq});
    ASSERT_TRUE(out.isOk()) << out.error().message();
    const Tensor& got = (*out)[0];
    ASSERT_EQ(got.numel(), oc * oh * ow);
    int64_t clamped = 0;
    for (int64_t c = 0; c < oc; ++c) {
      const float m = (sa * sb.dataAs<float>()[c]) / sy;
      for (int64_t p = 0; p < oh * ow; ++p) {
        int64_t acc = kb[static_cast<size_t>(c)];
        for (int64_t i = 0; i < ic; ++i)
          for (int64_t r = 0; r < kh; ++r)
            for (int64_t t = 0; t < kw; ++t) {
              const int64_t yy = p / ow * 2 - 1 + r, xx = p % ow * 2 - 1 + t;
              if (yy < 0 || yy >= h || xx < 0 || xx >= w) continue;
              acc += (xq.getInt((i * h + yy) * w + xx) - za) *
                     wq.getInt(((c * ic + i) * kh + r) * kw + t);
            }
        const float v = static_cast<float>(acc) * m;
        const double q = std::clamp(std::nearbyint(static_cast<double>(v)) + zy, 0.0, 255.0);
        clamped += q == 0.0 || q == 255.0;
        const double expected = roundTrip ? static_cast<float>((q - zy) * sy) : q;
        ASSERT_EQ(got.getDouble(c * oh * ow + p), expected) << "channel " << c << " pixel " << p;
      }
    }
    EXPECT_LT(clamped, oc * oh * ow / 2) << "the test's values mostly inside the u8 range";
  }
}

// A max pool between a dequantization and a quantization with the same parameters pools the
// integers: one MaxPool of u8 values in place of the three nodes, the same values (exactly: the
// round trip of a pooled integer returns it). A different scale, or a pooled value read by
// another node too, keeps the float pool.
TEST(Passes, MaxPoolOfQuantizedValuesPoolsTheIntegers) {
  auto build = [](double outScale, bool alsoRead) {
    Graph g;
    ValueId x = g.addInput("x", {DType::F32, Shape{1, 8, 9, 7}, {}});
    Tensor sa(DType::F32, Shape{}), za(DType::U8, Shape{}), so(DType::F32, Shape{});
    sa.setDouble(0, 0.013), za.setInt(0, 121), so.setDouble(0, outScale);
    ValueId s = g.addConstant("sa", sa), z = g.addConstant("za", za), s2 = g.addConstant("so", so);
    ValueId q = add(g, OpKind::QuantizeLinear, QuantAttrs{1}, {x, s, z}, "q");
    ValueId d = add(g, OpKind::DequantizeLinear, QuantAttrs{1}, {q, s, z}, "dq");
    ValueId m =
        add(g, OpKind::MaxPool, PoolAttrs{{3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}}, {d}, "pool");
    ValueId q2 = add(g, OpKind::QuantizeLinear, QuantAttrs{1}, {m, s2, z}, "q2");
    g.addOutput(add(g, OpKind::DequantizeLinear, QuantAttrs{1}, {q2, s2, z}, "y"));
    if (alsoRead) g.addOutput(add(g, OpKind::Relu, NoAttrs{}, {m}, "other"));
    return g;
  };
  auto kinds = [](const Graph& g) {
    std::vector<OpKind> k;
    for (const Node& n : g.nodes()) k.push_back(n.kind);
    return k;
  };
  Graph g = build(0.013, false);
  auto out = passes::moveQuantizedValues(g);
  ASSERT_TRUE(out.isOk()) << out.error().message();
  const std::vector<OpKind> want = {OpKind::QuantizeLinear, OpKind::MaxPool,
                                    OpKind::DequantizeLinear};
  EXPECT_EQ(kinds(*out), want);
  for (const Node& n : out->nodes()) {
    if (n.kind == OpKind::MaxPool) {
      EXPECT_EQ(out->value(n.outputs[0]).type.dtype, DType::U8);
    }
  }
  expectEquivalent(g, *out, 0.0);
  for (Graph kept : {build(0.02, false), build(0.013, true)}) {
    auto same = passes::moveQuantizedValues(kept);
    ASSERT_TRUE(same.isOk()) << same.error().message();
    EXPECT_EQ(kinds(*same), kinds(kept));
  }
}

// A GlobalAveragePool of quantized values over an odd number of pixels averages the integers
// (rounded to the nearest): 7x7 (ResNet-50's, MobileNetV2's) and 1x5 move, equal to the
// dequantized graph on inputs over the whole u8 range; an even count (8x7, ties possible) and
// 13x15 (above 180 pixels) stay f32.
TEST(Passes, GlobalAveragePoolOfQuantizedValuesAveragesTheIntegers) {
  for (auto [h, w, moves] :
       {std::tuple{7, 7, true}, {1, 5, true}, {8, 7, false}, {13, 15, false}}) {
    Graph g;
    ValueId x = g.addInput("x", {DType::F32, Shape{2, 24, h, w}, {}});
    Tensor sa(DType::F32, Shape{}), za(DType::U8, Shape{});
    sa.setDouble(0, 0.0173), za.setInt(0, 97);
    ValueId s = g.addConstant("sa", sa), z = g.addConstant("za", za);
    ValueId q = add(g, OpKind::QuantizeLinear, QuantAttrs{1}, {x, s, z}, "q");
    ValueId d = add(g, OpKind::DequantizeLinear, QuantAttrs{1}, {q, s, z}, "dq");
    ValueId m = add(g, OpKind::GlobalAveragePool, NoAttrs{}, {d}, "gap");
    ValueId q2 = add(g, OpKind::QuantizeLinear, QuantAttrs{1}, {m, s, z}, "q2");
    g.addOutput(add(g, OpKind::DequantizeLinear, QuantAttrs{1}, {q2, s, z}, "y"));
    auto out = passes::moveQuantizedValues(g);
    ASSERT_TRUE(out.isOk()) << out.error().message();
    int pooledIntegers = 0;
    for (const Node& n : out->nodes())
      pooledIntegers +=
          n.kind == OpKind::GlobalAveragePool && out->value(n.outputs[0]).type.dtype == DType::U8;
    EXPECT_EQ(pooledIntegers, moves ? 1 : 0) << h << "x" << w;
    // Inputs over [-2, 3): every u8 value, and both saturations, over 4 seeds.
    for (uint32_t seed = 0; seed < 4; ++seed) {
      std::mt19937 rng(seed);
      Tensor in(DType::F32, Shape{2, 24, h, w});
      std::uniform_real_distribution<double> u(-2.0, 3.0);
      for (int64_t i = 0; i < in.numel(); ++i) in.setDouble(i, u(rng));
      auto want = runReference(g, {in});
      auto got = runReference(*out, {in});
      ASSERT_TRUE(want.isOk() && got.isOk());
      for (int64_t i = 0; i < (*want)[0].numel(); ++i)
        ASSERT_EQ((*got)[0].getDouble(i), (*want)[0].getDouble(i)) << h << "x" << w << " " << i;
    }
  }
}

// Data movement of quantized values moves the integers: a Concat of two dequantized tensors
// with the output's parameters, then a Transpose and a Flatten, each quantized back with the
// same parameters, become a Concat, Transpose and Flatten of u8 values (the same values,
// exactly); a Concat whose inputs differ in scale keeps the float one.
TEST(Passes, DataMovementOfQuantizedValuesMovesTheIntegers) {
  auto build = [](double otherScale) {
    Graph g;
    ValueId x = g.addInput("x", {DType::F32, Shape{1, 4, 5, 6}, {}});
    ValueId y = g.addInput("y", {DType::F32, Shape{1, 3, 5, 6}, {}});
    Tensor sa(DType::F32, Shape{}), sb(DType::F32, Shape{}), za(DType::U8, Shape{});
    sa.setDouble(0, 0.02), sb.setDouble(0, otherScale), za.setInt(0, 9);
    ValueId s = g.addConstant("s", sa), s2 = g.addConstant("s2", sb), z = g.addConstant("z", za);
    auto fake = [&](ValueId v, ValueId scale, const std::string& name) {
      ValueId q = add(g, OpKind::QuantizeLinear, QuantAttrs{1}, {v, scale, z}, name + ".q");
      return add(g, OpKind::DequantizeLinear, QuantAttrs{1}, {q, scale, z}, name + ".dq");
    };
    ValueId c = add(g, OpKind::Concat, AxisAttrs{1}, {fake(x, s, "a"), fake(y, s2, "b")}, "cat");
    ValueId t = add(g, OpKind::Transpose, TransposeAttrs{{0, 2, 3, 1}}, {fake(c, s, "c")}, "t");
    ValueId f = add(g, OpKind::Flatten, AxisAttrs{1}, {fake(t, s, "tt")}, "flat");
    g.addOutput(fake(f, s, "out"));
    return g;
  };
  auto count = [](const Graph& g, OpKind kind) {
    return std::count_if(g.nodes().begin(), g.nodes().end(),
                         [&](const Node& n) { return n.kind == kind; });
  };
  Graph g = build(0.02);
  auto out = passes::moveQuantizedValues(g);
  ASSERT_TRUE(out.isOk()) << out.error().message();
  for (const Node& n : out->nodes()) {
    if (n.kind == OpKind::Concat || n.kind == OpKind::Transpose || n.kind == OpKind::Flatten) {
      EXPECT_EQ(out->value(n.outputs[0]).type.dtype, DType::U8) << n.name;
    }
  }
  EXPECT_EQ(count(*out, OpKind::QuantizeLinear), 2);   // the two inputs' own
  EXPECT_EQ(count(*out, OpKind::DequantizeLinear), 1); // the model output's
  expectEquivalent(g, *out, 0.0);
  Graph mixed = build(0.03);
  auto kept = passes::moveQuantizedValues(mixed);
  ASSERT_TRUE(kept.isOk()) << kept.error().message();
  for (const Node& n : kept->nodes()) {
    if (n.kind == OpKind::Concat) {
      EXPECT_EQ(kept->value(n.outputs[0]).type.dtype, DType::F32);
    }
  }
  expectEquivalent(mixed, *kept, 0.0);
}

// The QuantizeLinear of a constant folds to the integers ONNX defines, per axis: round half to
// even, then saturation; the DequantizeLinear after it stays for lower-quantized-layers.
TEST(Passes, QuantizeLinearOfAConstantFoldsToItsIntegers) {
  Graph g;
  const float s0 = 0.25f, s1 = 0.5f;
  const std::vector<float> w = {0.5f * s0,  1.5f * s0,  2.5f * s0, -0.5f * s0,
                                -1.5f * s0, 200 * s0,   -200 * s0, 0.3f * s0, // channel 0
                                0.5f * s1,  -0.5f * s1, 3.5f * s1, 127 * s1,
                                -129 * s1,  1e9f,       -1e9f,     1.49f * s1}; // channel 1
  Tensor wt(DType::F32, Shape{2, 8}), scale(DType::F32, Shape{2}), zero(DType::I8, Shape{2});
  for (size_t i = 0; i < w.size(); ++i) wt.setDouble(static_cast<int64_t>(i), w[i]);
  scale.setDouble(0, s0), scale.setDouble(1, s1), zero.setInt(0, 0), zero.setInt(1, 1);
  ValueId sc = g.addConstant("s", scale), zp = g.addConstant("z", zero);
  ValueId q = add(g, OpKind::QuantizeLinear, QuantAttrs{0}, {g.addConstant("w", wt), sc, zp}, "q");
  g.addOutput(add(g, OpKind::DequantizeLinear, QuantAttrs{0}, {q, sc, zp}, "dq"));
  auto folded = passes::foldConstantsButDequantization(g);
  ASSERT_TRUE(folded.isOk()) << folded.error().message();
  ASSERT_EQ(folded->nodes().size(), 1u);
  const Node& dq = folded->nodes()[0];
  ASSERT_EQ(dq.kind, OpKind::DequantizeLinear);
  ASSERT_TRUE(folded->value(dq.inputs[0]).constant.has_value());
  const Tensor* integers = &*folded->value(dq.inputs[0]).constant;
  ASSERT_EQ(integers->dtype(), DType::I8);
  const std::vector<int64_t> want = {0, 2, 2, 0,   -2,   127, -128, 0,
                                     1, 1, 5, 127, -128, 127, -128, 2};
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_EQ(integers->getInt(static_cast<int64_t>(i)), want[i]) << i;
}

// A layer as PyTorch's QAT modules export it: the activation fake-quantized to 0..127 of u8 (a
// Clip of the integers), max-pooled with no QuantizeLinear after the pool, then a Conv of f32
// weights behind a per-channel fake quantization, the pooled value also read by a residual Add.
// Folding the weights and propagating the quantization leave the dequantized graph's values
// bit for bit, and the Conv becomes an int8 layer.
TEST(Passes, FakeQuantExportReachesTheInt8Layers) {
  Graph g;
  ValueId x = g.addInput("x", {DType::F32, Shape{1, 8, 9, 7}, {}});
  Tensor sa(DType::F32, Shape{}), za(DType::U8, Shape{});
  sa.setDouble(0, 0.011), za.setInt(0, 97);
  ValueId s = g.addConstant("sa", sa), z = g.addConstant("za", za);
  ValueId xq = add(g, OpKind::QuantizeLinear, QuantAttrs{1}, {x, s, z}, "xq");
  ValueId clipped = add(g, OpKind::Clip, ClipAttrs{0, 127}, {xq}, "clip");
  ValueId xd = add(g, OpKind::DequantizeLinear, QuantAttrs{1}, {clipped, s, z}, "xd");
  ValueId pooled =
      add(g, OpKind::MaxPool, PoolAttrs{{3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}}, {xd}, "pool");
  Tensor sb(DType::F32, Shape{8}), zb(DType::I8, Shape{8});
  for (int64_t j = 0; j < 8; ++j) sb.setDouble(j, 0.004 * (j + 1)), zb.setInt(j, 0);
  ValueId wsc = g.addConstant("sb", sb), wzp = g.addConstant("zb", zb);
  ValueId wq =
      add(g, OpKind::QuantizeLinear, QuantAttrs{0},
          {g.addConstant("w", randomTensor(Shape{8, 8, 3, 3}, 4, -0.5f, 0.5f)), wsc, wzp}, "wq");
  ValueId wd = add(g, OpKind::DequantizeLinear, QuantAttrs{0}, {wq, wsc, wzp}, "wd");
  ConvAttrs attrs{{3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1};
  ValueId conv =
      add(g, OpKind::Conv, attrs, {pooled, wd, g.addConstant("b", randomTensor({8}, 6))}, "conv");
  g.addOutput(add(g, OpKind::Add, NoAttrs{}, {conv, pooled}, "residual"));
  auto count = [](const Graph& graph, OpKind kind) {
    return std::count_if(graph.nodes().begin(), graph.nodes().end(),
                         [&](const Node& n) { return n.kind == kind; });
  };
  EXPECT_FALSE(passes::quantizedLayersKeptFloat(g).empty());
  auto folded = passes::foldConstantsButDequantization(g);
  ASSERT_TRUE(folded.isOk()) << folded.error().message();
  auto propagated = passes::propagateQuantization(*folded);
  ASSERT_TRUE(propagated.isOk()) << propagated.error().message();
  expectEquivalent(g, *propagated, 0.0);
  for (const Node& n : propagated->nodes()) {
    if (n.kind == OpKind::MaxPool) {
      EXPECT_EQ(propagated->value(n.outputs[0]).type.dtype, DType::U8);
    }
    if (n.kind == OpKind::Clip) { // now of the f32 values, at (127 - 97) x 0.011
      EXPECT_EQ(propagated->value(n.outputs[0]).type.dtype, DType::F32);
      EXPECT_FLOAT_EQ(static_cast<float>(std::get<ClipAttrs>(n.attrs).max), 30 * 0.011f);
    }
  }
  EXPECT_TRUE(passes::quantizedLayersKeptFloat(*propagated).empty());
  auto lowered = passes::lowerQuantizedLayers(*propagated);
  ASSERT_TRUE(lowered.isOk()) << lowered.error().message();
  EXPECT_EQ(count(*lowered, OpKind::IntegerConv), 1);
  EXPECT_EQ(count(*lowered, OpKind::Conv), 0);
  expectEquivalent(g, *lowered, 1e-5);
}

// A ReLU after a fake quantization (a layer quantized without fusing its ReLU) moves before the
// QuantizeLinear, so the layer after it reads a DequantizeLinear and becomes an int8 layer; the
// values stay bit for bit (the zero point 0 of u8 and 120 alike).
TEST(Passes, AReluAfterAFakeQuantizationMovesBeforeIt) {
  for (int64_t zeroPoint : {0, 120}) {
    Graph g;
    ValueId x = g.addInput("x", {DType::F32, Shape{1, 4, 6, 5}, {}});
    Tensor sa(DType::F32, Shape{}), za(DType::U8, Shape{});
    sa.setDouble(0, 0.009), za.setInt(0, zeroPoint);
    ValueId s = g.addConstant("sa", sa), z = g.addConstant("za", za);
    ValueId xq = add(g, OpKind::QuantizeLinear, QuantAttrs{1}, {x, s, z}, "xq");
    ValueId xd = add(g, OpKind::DequantizeLinear, QuantAttrs{1}, {xq, s, z}, "xd");
    ValueId relu = add(g, OpKind::Relu, NoAttrs{}, {xd}, "relu");
    Tensor wq(DType::I8, Shape{8, 4, 1, 1}), sb(DType::F32, Shape{8}), zb(DType::I8, Shape{8});
    std::mt19937 rng(2);
    for (int64_t i = 0; i < wq.numel(); ++i) wq.setInt(i, static_cast<int>(rng() % 255) - 127);
    for (int64_t j = 0; j < 8; ++j) sb.setDouble(j, 0.002 * (j + 1)), zb.setInt(j, 0);
    ValueId wd =
        add(g, OpKind::DequantizeLinear, QuantAttrs{0},
            {g.addConstant("wq", wq), g.addConstant("sb", sb), g.addConstant("zb", zb)}, "wd");
    ConvAttrs attrs{{1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1};
    g.addOutput(add(g, OpKind::Conv, attrs, {relu, wd}, "conv"));
    g.addOutput(xd); // the unrectified values are read too
    auto propagated = passes::propagateQuantization(g);
    ASSERT_TRUE(propagated.isOk()) << propagated.error().message();
    expectEquivalent(g, *propagated, 0.0);
    for (const Node& n : propagated->nodes()) {
      if (n.kind == OpKind::Relu) { // of the f32 input, before its quantization
        EXPECT_EQ(propagated->value(n.inputs[0]).name, "x");
      }
    }
    EXPECT_FALSE(passes::quantizedLayersKeptFloat(g).empty());
    EXPECT_TRUE(passes::quantizedLayersKeptFloat(*propagated).empty());
  }
}

// A fake-quant export's batch norm after an int8 convolution (Conv, Div by the folded BN
// scale, BatchNormalization, as PyTorch's fused QAT modules export it) folds into the kernel's
// one shift and one scale: (sums + k + b / m) x m, within f32 rounding of the f32 graph.
TEST(Passes, ABatchNormAfterAnInt8ConvFoldsIntoItsShift) {
  Graph g;
  ValueId x = g.addInput("x", {DType::F32, Shape{1, 8, 6, 5}, {}});
  Tensor sa(DType::F32, Shape{}), za(DType::U8, Shape{});
  sa.setDouble(0, 0.01), za.setInt(0, 100);
  ValueId s = g.addConstant("sa", sa), z = g.addConstant("za", za);
  ValueId xq = add(g, OpKind::QuantizeLinear, QuantAttrs{1}, {x, s, z}, "xq");
  ValueId xd = add(g, OpKind::DequantizeLinear, QuantAttrs{1}, {xq, s, z}, "xd");
  Tensor wq(DType::I8, Shape{4, 8, 3, 3}), sb(DType::F32, Shape{4}), zb(DType::I8, Shape{4});
  std::mt19937 rng(9);
  for (int64_t i = 0; i < wq.numel(); ++i) wq.setInt(i, static_cast<int>(rng() % 255) - 127);
  for (int64_t j = 0; j < 4; ++j) sb.setDouble(j, 0.003 * (j + 1)), zb.setInt(j, 0);
  ValueId wd =
      add(g, OpKind::DequantizeLinear, QuantAttrs{0},
          {g.addConstant("wq", wq), g.addConstant("sb", sb), g.addConstant("zb", zb)}, "wd");
  Tensor zero(DType::F32, Shape{4});
  for (int64_t j = 0; j < 4; ++j) zero.setDouble(j, 0);
  ConvAttrs attrs{{3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1};
  ValueId conv = add(g, OpKind::Conv, attrs, {xd, wd, g.addConstant("b0", zero)}, "conv");
  ValueId div = add(g, OpKind::Div, NoAttrs{},
                    {conv, g.addConstant("d", randomTensor({1, 4, 1, 1}, 11, 0.5f, 2.f))}, "div");
  ValueId bn = add(g, OpKind::BatchNormalization, NormAttrs{},
                   {div, g.addConstant("gamma", randomTensor({4}, 12, 0.5f, 1.5f)),
                    g.addConstant("beta", randomTensor({4}, 13)),
                    g.addConstant("mean", randomTensor({4}, 14)),
                    g.addConstant("var", randomTensor({4}, 15, 0.5f, 1.5f))},
                   "bn");
  g.addOutput(add(g, OpKind::Relu, NoAttrs{}, {bn}, "relu"));
  Graph graph = g;
  for (auto pass :
       {passes::lowerQuantizedLayers, passes::foldConstants, passes::foldBatchNorm,
        passes::decomposeBatchNorm, passes::simplifyAlgebra, passes::foldChannelAffine}) {
    auto next = pass(graph);
    ASSERT_TRUE(next.isOk()) << next.error().message();
    graph = std::move(*next);
  }
  std::vector<OpKind> afterConv;
  for (const Node& n : graph.nodes())
    if (n.kind != OpKind::QuantizeLinear) afterConv.push_back(n.kind);
  const std::vector<OpKind> want = {OpKind::IntegerConv, OpKind::Add, OpKind::Mul, OpKind::Relu};
  EXPECT_EQ(afterConv, want);
  expectEquivalent(g, graph, 1e-5);
}

// A round trip of the same quantization cancels; of another scale, zero point or type it stays
// (and so does a Clip of integers whose range leaves out the zero point, where NaN would differ).
TEST(Passes, PropagateQuantizationCancelsOnlyExactRoundTrips) {
  auto build = [](double outerScale, int64_t outerZero, double clipLo) {
    Graph g;
    ValueId x = g.addInput("x", {DType::F32, Shape{2, 12}, {}});
    Tensor sa(DType::F32, Shape{}), za(DType::U8, Shape{}), so(DType::F32, Shape{}),
        zo(DType::U8, Shape{});
    sa.setDouble(0, 0.013), za.setInt(0, 40), so.setDouble(0, outerScale), zo.setInt(0, outerZero);
    ValueId s = g.addConstant("sa", sa), z = g.addConstant("za", za);
    ValueId s2 = g.addConstant("so", so), z2 = g.addConstant("zo", zo);
    ValueId q = add(g, OpKind::QuantizeLinear, QuantAttrs{1}, {x, s, z}, "q");
    ValueId c = add(g, OpKind::Clip, ClipAttrs{clipLo, 200}, {q}, "clip");
    ValueId d = add(g, OpKind::DequantizeLinear, QuantAttrs{1}, {c, s, z}, "dq");
    ValueId r = add(g, OpKind::Reshape, ReshapeAttrs{{Dim(4), Dim(6)}}, {d}, "reshape");
    ValueId q2 = add(g, OpKind::QuantizeLinear, QuantAttrs{1}, {r, s2, z2}, "q2");
    g.addOutput(add(g, OpKind::DequantizeLinear, QuantAttrs{1}, {q2, s2, z2}, "y"));
    return g;
  };
  auto kinds = [](const Graph& g) {
    std::vector<OpKind> k;
    for (const Node& n : g.nodes()) k.push_back(n.kind);
    return k;
  };
  Graph same = build(0.013, 40, 10);
  auto out = passes::propagateQuantization(same);
  ASSERT_TRUE(out.isOk()) << out.error().message();
  const std::vector<OpKind> want = {OpKind::Clip, OpKind::QuantizeLinear, OpKind::Reshape,
                                    OpKind::DequantizeLinear};
  EXPECT_EQ(kinds(*out), want);
  expectEquivalent(same, *out, 0.0);
  for (Graph other : {build(0.014, 40, 10), build(0.013, 41, 10)}) {
    auto kept = passes::propagateQuantization(other);
    ASSERT_TRUE(kept.isOk()) << kept.error().message();
    const std::vector<OpKind> k = kinds(*kept);
    EXPECT_EQ(std::count(k.begin(), k.end(), OpKind::QuantizeLinear), 2);
    expectEquivalent(other, *kept, 0.0);
  }
  Graph zeroOutside = build(0.013, 40, 50);
  auto kept = passes::propagateQuantization(zeroOutside);
  ASSERT_TRUE(kept.isOk()) << kept.error().message();
  for (const Node& n : kept->nodes()) {
    if (n.kind == OpKind::Clip) {
      EXPECT_EQ(kept->value(n.outputs[0]).type.dtype, DType::U8);
    }
  }
  expectEquivalent(zeroOutside, *kept, 0.0);
}

// A DequantizeLinear of a computed u8 value moves right after its producer (before the nodes
// between them in the source order); a QuantizeLinear of a computed value too, and then the
// DequantizeLinear after it; the values stay the same.
TEST(Passes, HoistQuantizationSchedulesItAfterItsProducer) {
  for (bool computed : {false, true}) {
    Graph g;
    ValueId x = g.addInput("x", {DType::F32, Shape{2, 8}, {}});
    Tensor sa(DType::F32, Shape{}), za(DType::U8, Shape{});
    sa.setDouble(0, 0.01), za.setInt(0, 7);
    ValueId s = g.addConstant("sa", sa), z = g.addConstant("za", za);
    ValueId r = computed ? add(g, OpKind::Relu, NoAttrs{}, {x}, "relu") : x;
    ValueId e = add(g, OpKind::Exp, NoAttrs{}, {x}, "exp");
    ValueId q = add(g, OpKind::QuantizeLinear, QuantAttrs{1}, {r, s, z}, "q");
    ValueId t = add(g, OpKind::Tanh, NoAttrs{}, {e}, "tanh");
    ValueId d = add(g, OpKind::DequantizeLinear, QuantAttrs{1}, {q, s, z}, "dq");
    g.addOutput(add(g, OpKind::Add, NoAttrs{}, {t, d}, "sum"));
    auto out = passes::hoistQuantization(g);
    ASSERT_TRUE(out.isOk()) << out.error().message();
    std::vector<OpKind> order;
    for (const Node& n : out->nodes()) order.push_back(n.kind);
    // A model input's QuantizeLinear stays where it is; its DequantizeLinear follows it.
    const std::vector<OpKind> want =
        computed ? std::vector{OpKind::Relu, OpKind::QuantizeLinear, OpKind::DequantizeLinear,
                               OpKind::Exp,  OpKind::Tanh,           OpKind::Add}
                 : std::vector{OpKind::Exp, OpKind::QuantizeLinear, OpKind::DequantizeLinear,
                               OpKind::Tanh, OpKind::Add};
    EXPECT_EQ(order, want) << "computed " << computed;
    expectEquivalent(g, *out, 0.0);
  }
}

// Dynamic quantization: the activation's scale and zero point are computed per run (here graph
// inputs, as DynamicQuantizeLinear's are values of the graph): the layer still becomes an
// IntegerMatMul, its column scale and correction the run's scalars times per-column constants.
TEST(Passes, DynamicallyQuantizedMatmulsBecomeIntegerMatmuls) {
  Graph g;
  ValueId x = g.addInput("x", {DType::F32, Shape{4, 16}, {}});
  ValueId s = g.addInput("s", {DType::F32, Shape{}, {}});
  ValueId z = g.addInput("z", {DType::U8, Shape{}, {}});
  // Computed (as DynamicQuantizeLinear computes them): a scale given as a model input stays f32.
  s = add(g, OpKind::Abs, NoAttrs{}, {s}, "s_computed");
  z = add(g, OpKind::Identity, NoAttrs{}, {z}, "z_computed");
  ValueId xq = add(g, OpKind::QuantizeLinear, QuantAttrs{1}, {x, s, z}, "xq");
  ValueId xd = add(g, OpKind::DequantizeLinear, QuantAttrs{1}, {xq, s, z}, "xd");
  Tensor wq(DType::I8, Shape{16, 8}), sb(DType::F32, Shape{8}), zb(DType::I8, Shape{8});
  for (int64_t i = 0; i < wq.numel(); ++i) wq.setInt(i, (i * 37) % 255 - 127);
  for (int64_t j = 0; j < 8; ++j) sb.setDouble(j, 0.01 * (j + 1));
  ValueId wd =
      add(g, OpKind::DequantizeLinear, QuantAttrs{1},
          {g.addConstant("wq", wq), g.addConstant("sb", sb), g.addConstant("zb", zb)}, "wd");
  g.addOutput(add(g, OpKind::MatMul, NoAttrs{}, {xd, wd}, "y"));
  auto out = passes::lowerQuantizedLayers(g);
  ASSERT_TRUE(out.isOk()) << out.error().message();
  ASSERT_TRUE(verifyGraph(*out).isOk()) << verifyGraph(*out).error().message();
  EXPECT_EQ(std::count_if(out->nodes().begin(), out->nodes().end(),
                          [](const Node& n) { return n.kind == OpKind::IntegerMatMul; }),
            1);
  Tensor scale(DType::F32, Shape{}), zero(DType::U8, Shape{});
  scale.setDouble(0, 0.02), zero.setInt(0, 117);
  std::vector<Tensor> in = {randomTensor({4, 16}, 8), scale, zero};
  auto a = runReference(g, in), b = runReference(*out, in);
  ASSERT_TRUE(a.isOk() && b.isOk());
  for (int64_t i = 0; i < (*a)[0].numel(); ++i)
    ASSERT_NEAR((*a)[0].getDouble(i), (*b)[0].getDouble(i), 1e-5) << i;
}

TEST(Passes, FoldConstantsEvaluatesConstantSubgraphs) {
  Graph g;
  ValueId x = g.addInput("x", {DType::F32, Shape{2, 3}, {}});
  ValueId c1 = g.addConstant("c1", randomTensor(Shape{2, 3}, 1));
  ValueId c2 = g.addConstant("c2", randomTensor(Shape{2, 3}, 2));
  ValueId prod = add(g, OpKind::Mul, NoAttrs{}, {c1, c2}, "prod"); // constant
  ValueId e = add(g, OpKind::Exp, NoAttrs{}, {prod}, "exp");       // constant
  ValueId y = add(g, OpKind::Add, NoAttrs{}, {x, e}, "y");         // depends on x
  g.addOutput(y);
  auto folded = passes::foldConstants(g);
  ASSERT_TRUE(folded.isOk()) << folded.error().message();
  ASSERT_EQ(folded->nodes().size(), 1u);
  EXPECT_EQ(folded->nodes()[0].kind, OpKind::Add);
  expectEquivalent(g, *folded, 1e-6);
}

} // namespace
} // namespace tunec

namespace tunec {
namespace {

Tensor scalar(float v) {
  Tensor t(DType::F32, Shape{});
  t.setDouble(0, v);
  return t;
}

// y = x * 0.5 * (1 + erf(x / sqrt 2)) as PyTorch exports it; returns erf's value too.
ValueId buildGelu(Graph& g, ValueId x, ValueId& erf) {
  ValueId d =
      add(g, OpKind::Div, NoAttrs{}, {x, g.addConstant("sqrt2", scalar(1.41421356f))}, "div");
  erf = add(g, OpKind::Erf, NoAttrs{}, {d}, "erf");
  ValueId a = add(g, OpKind::Add, NoAttrs{}, {erf, g.addConstant("one", scalar(1.f))}, "add");
  ValueId m = add(g, OpKind::Mul, NoAttrs{}, {x, a}, "mul");
  return add(g, OpKind::Mul, NoAttrs{}, {m, g.addConstant("half", scalar(0.5f))}, "mul_half");
}

TEST(Passes, RecognizeGeluFromTheErfForm) {
  Graph g;
  ValueId x = g.addInput("x", {DType::F32, Shape{4, 8}, {}});
  ValueId erf;
  g.addOutput(buildGelu(g, x, erf));
  auto out = passes::recognizeGelu(g);
  ASSERT_TRUE(out.isOk()) << out.error().message();
  ASSERT_EQ(out->nodes().size(), 1u);
  EXPECT_EQ(out->nodes()[0].kind, OpKind::Gelu);
  expectEquivalent(g, *out, 1e-6);
}

TEST(Passes, GeluWithAnotherUseOfAnInteriorValueStays) {
  Graph g;
  ValueId x = g.addInput("x", {DType::F32, Shape{4}, {}});
  ValueId erf;
  g.addOutput(buildGelu(g, x, erf));
  g.addOutput(erf); // erf is also a model output: the pattern must not swallow it
  auto out = passes::recognizeGelu(g);
  ASSERT_TRUE(out.isOk());
  EXPECT_EQ(out->nodes().size(), 5u);
  expectEquivalent(g, *out, 1e-6);
}

TEST(Passes, RecognizeLayerNormFromTheOpset13Export) {
  Graph g;
  ValueId x = g.addInput("x", {DType::F32, Shape{2, 5, 16}, {}});
  ReduceAttrs last{{2}, true};
  ValueId mean = add(g, OpKind::ReduceMean, last, {x}, "mean");
  ValueId sub = add(g, OpKind::Sub, NoAttrs{}, {x, mean}, "sub");
  ValueId sq = add(g, OpKind::Pow, NoAttrs{}, {sub, g.addConstant("two", scalar(2.f))}, "pow");
  ValueId var = add(g, OpKind::ReduceMean, last, {sq}, "var");
  ValueId ve =
      add(g, OpKind::Add, NoAttrs{}, {var, g.addConstant("eps", scalar(1e-5f))}, "add_eps");
  ValueId sd = add(g, OpKind::Sqrt, NoAttrs{}, {ve}, "sqrt");
  ValueId norm = add(g, OpKind::Div, NoAttrs{}, {sub, sd}, "div");
  ValueId scaled =
      add(g, OpKind::Mul, NoAttrs{},
          {norm, g.addConstant("gamma", randomTensor(Shape{16}, 7, 0.5f, 1.5f))}, "mul");
  ValueId y = add(g, OpKind::Add, NoAttrs{},
                  {scaled, g.addConstant("beta", randomTensor(Shape{16}, 8))}, "add_beta");
  g.addOutput(y);
  auto out = passes::recognizeLayerNorm(g);
  ASSERT_TRUE(out.isOk()) << out.error().message();
  ASSERT_EQ(out->nodes().size(), 1u);
  EXPECT_EQ(out->nodes()[0].kind, OpKind::LayerNormalization);
  EXPECT_FLOAT_EQ(std::get<NormAttrs>(out->nodes()[0].attrs).epsilon, 1e-5f);
  expectEquivalent(g, *out, 1e-5);
}

// repeat_kv (Unsqueeze, Expand, Reshape; K transposed) before Q K^T and P V: one MatMul per K/V
// head with its query heads as rows, no Expand left, the same result.
TEST(Passes, FoldGroupedKvMultipliesSharedHeadsWithoutRepeatingThem) {
  Graph g;
  ValueId q = g.addInput("q", {DType::F32, Shape{1, 6, 5, 8}, {}});
  ValueId k = g.addInput("k", {DType::F32, Shape{1, 2, 7, 8}, {}});
  ValueId v = g.addInput("v", {DType::F32, Shape{1, 2, 7, 8}, {}});
  auto repeat = [&](ValueId x, const std::string& name) {
    ValueId u = add(g, OpKind::Unsqueeze, AxesAttrs{{2}}, {x}, name + "_u");
    ValueId e = add(g, OpKind::Expand, ReshapeAttrs{{1, 2, 3, 7, 8}}, {u}, name + "_e");
    return add(g, OpKind::Reshape, ReshapeAttrs{{1, 6, 7, 8}}, {e}, name + "_r");
  };
  ValueId kt = add(g, OpKind::Transpose, TransposeAttrs{{0, 1, 3, 2}}, {repeat(k, "k")}, "kt");
  ValueId scores = add(g, OpKind::MatMul, NoAttrs{}, {q, kt}, "scores");
  ValueId p = add(g, OpKind::Softmax, SoftmaxAttrs{-1, false}, {scores}, "p");
  g.addOutput(add(g, OpKind::MatMul, NoAttrs{}, {p, repeat(v, "v")}, "context"));
  auto out = passes::foldGroupedKv(g);
  ASSERT_TRUE(out.isOk()) << out.error().message();
  for (const Node& n : out->nodes()) EXPECT_NE(n.kind, OpKind::Expand) << n.name;
  expectEquivalent(g, *out, 1e-6);
}

// HuggingFace's LlamaRMSNorm as torch exports it: Pow, ReduceMean, Add eps, Sqrt, Div(1, .),
// Mul x, Mul weight; and ONNX Runtime's decomposition: Mul(x, x), ..., Div(x, .).
TEST(Passes, RecognizeRmsNormInBothExportedForms) {
  for (bool reciprocal : {true, false}) {
    SCOPED_TRACE(reciprocal ? "x * (1 / sqrt)" : "x / sqrt");
    Graph g;
    ValueId x = g.addInput("x", {DType::F32, Shape{2, 5, 16}, {}});
    ValueId sq = reciprocal
                     ? add(g, OpKind::Pow, NoAttrs{}, {x, g.addConstant("two", scalar(2.f))}, "pow")
                     : add(g, OpKind::Mul, NoAttrs{}, {x, x}, "square");
    ValueId ms = add(g, OpKind::ReduceMean, ReduceAttrs{{2}, true}, {sq}, "mean");
    ValueId me = add(g, OpKind::Add, NoAttrs{}, {ms, g.addConstant("eps", scalar(1e-6f))}, "eps");
    ValueId sd = add(g, OpKind::Sqrt, NoAttrs{}, {me}, "sqrt");
    ValueId norm;
    if (reciprocal) {
      ValueId inv = add(g, OpKind::Div, NoAttrs{}, {g.addConstant("one", scalar(1.f)), sd}, "inv");
      norm = add(g, OpKind::Mul, NoAttrs{}, {x, inv}, "norm");
    } else {
      norm = add(g, OpKind::Div, NoAttrs{}, {x, sd}, "norm");
    }
    ValueId w = g.addConstant("weight", randomTensor(Shape{16}, 7, 0.5f, 1.5f));
    g.addOutput(add(g, OpKind::Mul, NoAttrs{}, {w, norm}, "scaled"));
    auto out = passes::recognizeLayerNorm(g);
    ASSERT_TRUE(out.isOk()) << out.error().message();
    ASSERT_EQ(out->nodes().size(), 1u);
    EXPECT_EQ(out->nodes()[0].kind, OpKind::RMSNormalization);
    EXPECT_FLOAT_EQ(std::get<NormAttrs>(out->nodes()[0].attrs).epsilon, 1e-6f);
    expectEquivalent(g, *out, 1e-5);
  }
}

} // namespace
} // namespace tunec

namespace tunec {
namespace {

TEST(Passes, SimplifyAlgebraIdentitiesAndConstantsToCommutativeOps) {
  Graph g;
  ValueId x = g.addInput("x", {DType::F32, Shape{3, 4}, {}});
  Tensor ones(DType::F32, Shape{4});
  for (int i = 0; i < 4; ++i) ones.setDouble(i, 1.0);
  ValueId a = add(g, OpKind::Mul, NoAttrs{}, {x, g.addConstant("ones", ones)}, "times_one"); // -> x
  ValueId b = add(g, OpKind::Add, NoAttrs{},
                  {a, g.addConstant("zero", Tensor(DType::F32, Shape{}))}, "plus_zero");
  ValueId c =
      add(g, OpKind::Sub, NoAttrs{}, {b, g.addConstant("c", randomTensor(Shape{4}, 3))}, "minus_c");
  ValueId d = add(g, OpKind::Div, NoAttrs{},
                  {c, g.addConstant("d", randomTensor(Shape{3, 1}, 4, 0.5f, 2.f))}, "div_d");
  ValueId e = add(g, OpKind::Identity, NoAttrs{}, {d}, "identity");
  g.addOutput(e);
  auto out = passes::simplifyAlgebra(g);
  ASSERT_TRUE(out.isOk()) << out.error().message();
  ASSERT_EQ(out->nodes().size(), 2u);
  EXPECT_EQ(out->nodes()[0].kind, OpKind::Add); // x + (-c)
  EXPECT_EQ(out->nodes()[1].kind, OpKind::Mul); // * (1/d)
  expectEquivalent(g, *out, 1e-5);
}

TEST(Passes, SimplifyAlgebraGathersConstantsByAssociativity) {
  Graph g;
  ValueId x = g.addInput("x", {DType::F32, Shape{2, 5}, {}});
  ValueId a =
      add(g, OpKind::Add, NoAttrs{}, {x, g.addConstant("c1", randomTensor(Shape{5}, 1))}, "a");
  ValueId b =
      add(g, OpKind::Add, NoAttrs{}, {g.addConstant("c2", randomTensor(Shape{2, 1}, 2)), a}, "b");
  ValueId m1 =
      add(g, OpKind::Mul, NoAttrs{}, {b, g.addConstant("c3", randomTensor(Shape{}, 3))}, "m1");
  ValueId m2 = add(g, OpKind::Div, NoAttrs{},
                   {m1, g.addConstant("c4", randomTensor(Shape{5}, 4, 0.5f, 2.f))}, "m2");
  g.addOutput(m2);
  auto out = passes::simplifyAlgebra(g);
  ASSERT_TRUE(out.isOk()) << out.error().message();
  ASSERT_EQ(out->nodes().size(), 2u); // x + (c1 + c2), then * (c3 / c4)
  expectEquivalent(g, *out, 1e-5);
}

// A Cast to i32 marked exact (an integer product's f32 form) and the Cast back to f32 that ONNX
// Runtime's dynamic quantization writes after it are dropped; without the mark they stay (a
// Cast to i32 truncates).
TEST(Passes, SimplifyAlgebraDropsACastBackThroughAnExactCast) {
  for (bool exact : {true, false}) {
    Graph g;
    ValueId x = g.addInput("x", {DType::F32, Shape{2, 5}, {}});
    ValueId i = add(g, OpKind::Cast, CastAttrs{DType::I32, exact}, {x}, "to_i32");
    ValueId f = add(g, OpKind::Cast, CastAttrs{DType::F32}, {i}, "to_f32");
    g.addOutput(add(g, OpKind::Relu, NoAttrs{}, {f}, "relu"));
    auto out = passes::simplifyAlgebra(g);
    ASSERT_TRUE(out.isOk()) << out.error().message();
    EXPECT_EQ(out->nodes().size(), exact ? 1u : 3u) << (exact ? "exact" : "not exact");
    if (exact) {
      EXPECT_EQ(out->nodes()[0].inputs[0], out->inputs()[0]);
    }
  }
}

// An f16 model computes in f32: f16 constants converted, the Casts between f16 and f32 dropped,
// the f16 input cast once at the start and the f16 output back at the end; the values are the
// f16 reference's within f16's rounding.
TEST(Passes, ComputeHalfInFloatRunsF16OpsInF32) {
  Graph g;
  ValueId x = g.addInput("x", {DType::F16, Shape{2, 5}, {}});
  Tensor c(DType::F16, Shape{5});
  for (int i = 0; i < 5; ++i) c.setDouble(i, 0.25 * i - 0.5);
  ValueId s = add(g, OpKind::Add, NoAttrs{}, {x, g.addConstant("c", c)}, "add");
  ValueId up = add(g, OpKind::Cast, CastAttrs{DType::F32}, {s}, "up");
  ValueId r = add(g, OpKind::Sigmoid, NoAttrs{}, {up}, "sigmoid"); // f32
  ValueId down = add(g, OpKind::Cast, CastAttrs{DType::F16}, {r}, "down");
  g.addOutput(add(g, OpKind::Mul, NoAttrs{}, {down, x}, "mul"));
  auto out = passes::computeHalfInFloat(g);
  ASSERT_TRUE(out.isOk()) << out.error().message();
  int casts = 0;
  for (const Node& n : out->nodes()) {
    if (n.kind == OpKind::Cast) ++casts;
    for (ValueId v : n.outputs) {
      if (n.kind != OpKind::Cast) {
        EXPECT_EQ(out->value(v).type.dtype, DType::F32) << n.name;
      }
    }
  }
  EXPECT_EQ(casts, 2); // the input's, the output's
  EXPECT_EQ(out->value(out->outputs()[0]).type.dtype, DType::F16);
  ASSERT_TRUE(verifyGraph(*out).isOk()) << verifyGraph(*out).error().message();
  Tensor in(DType::F16, Shape{2, 5});
  for (int64_t i = 0; i < in.numel(); ++i) in.setDouble(i, 0.3 * static_cast<double>(i) - 1.4);
  auto a = runReference(g, {in});
  auto b = runReference(*out, {in});
  ASSERT_TRUE(a.isOk() && b.isOk());
  for (int64_t i = 0; i < in.numel(); ++i)
    EXPECT_NEAR((*a)[0].getDouble(i), (*b)[0].getDouble(i), 2e-3) << i;
}

// x / c becomes x * (1/c), but not where a QuantizeLinear divides by the result: that scale's
// rounding decides the codes (DynamicQuantizeLinear's range / 255).
TEST(Passes, SimplifyAlgebraKeepsTheDivisionOfAQuantizationScale) {
  Graph g;
  ValueId x = g.addInput("x", {DType::F32, Shape{4}, {}});
  ValueId range = g.addInput("range", {DType::F32, Shape{}, {}});
  Tensor steps(DType::F32, Shape{});
  steps.setDouble(0, 255.0);
  ValueId scale = add(g, OpKind::Div, NoAttrs{}, {range, g.addConstant("steps", steps)}, "scale");
  ValueId other = add(g, OpKind::Div, NoAttrs{}, {x, g.addConstant("c", steps)}, "other");
  ValueId q = add(g, OpKind::QuantizeLinear, QuantAttrs{0},
                  {x, scale, g.addConstant("zp", Tensor(DType::U8, Shape{}))}, "q");
  g.addOutput(q);
  g.addOutput(other);
  auto out = passes::simplifyAlgebra(g);
  ASSERT_TRUE(out.isOk()) << out.error().message();
  int divisions = 0, products = 0;
  for (const Node& n : out->nodes()) {
    divisions += n.kind == OpKind::Div;
    products += n.kind == OpKind::Mul;
  }
  EXPECT_EQ(divisions, 1); // the scale's
  EXPECT_EQ(products, 1);  // x / 255 as x * (1/255)
}

TEST(Passes, SimplifyAlgebraComposesTransposesAndReshapes) {
  Graph g;
  ValueId x = g.addInput("x", {DType::F32, Shape{2, 3, 4}, {}});
  ValueId t1 = add(g, OpKind::Transpose, TransposeAttrs{{1, 2, 0}}, {x}, "t1");
  ValueId t2 = add(g, OpKind::Transpose, TransposeAttrs{{2, 0, 1}}, {t1}, "t2"); // identity overall
  ValueId t3 = add(g, OpKind::Transpose, TransposeAttrs{{0, 2, 1}}, {t2}, "t3");
  ValueId t4 = add(g, OpKind::Transpose, TransposeAttrs{{2, 1, 0}}, {t3}, "t4"); // composed with t3
  ValueId r1 = add(g, OpKind::Reshape, ReshapeAttrs{{4, 6}}, {t4}, "r1");
  ValueId r2 = add(g, OpKind::Flatten, AxisAttrs{0}, {r1}, "r2");
  ValueId r3 = add(g, OpKind::Reshape, ReshapeAttrs{{1, 24}}, {r2}, "r3"); // same shape: gone
  g.addOutput(r3);
  auto out = passes::simplifyAlgebra(g);
  ASSERT_TRUE(out.isOk()) << out.error().message();
  ASSERT_EQ(out->nodes().size(), 2u);
  EXPECT_EQ(out->nodes()[0].kind, OpKind::Transpose);
  EXPECT_EQ(out->nodes()[1].kind, OpKind::Reshape);
  expectEquivalent(g, *out, 0);
}

} // namespace
} // namespace tunec

namespace tunec {
namespace {

TEST(Passes, MemoryPlanNeverOverlapsLiveTensorsAndMeetsTheBound) {
  // A residual chain: x -> a -> b -> c = a + b -> d -> e = d + c.
  Graph g;
  ValueId x = g.addInput("x", {DType::F32, Shape{64, 64}, {}});
  ValueId a = add(g, OpKind::Relu, NoAttrs{}, {x}, "a");
  ValueId b = add(g, OpKind::Exp, NoAttrs{}, {a}, "b");
  ValueId c = add(g, OpKind::Add, NoAttrs{}, {a, b}, "c");
  ValueId d = add(g, OpKind::Tanh, NoAttrs{}, {c}, "d");
  ValueId e = add(g, OpKind::Add, NoAttrs{}, {d, c}, "e");
  ValueId f = add(g, OpKind::ReduceSum, ReduceAttrs{{1}, true}, {e}, "f");
  g.addOutput(f);
  passes::MemoryPlan plan = passes::planMemory(g);
  const int64_t tensor = 64 * 64 * 4;
  EXPECT_EQ(plan.tensors, 5); // a b c d e (f is a model output)
  EXPECT_EQ(plan.totalBytes, 5 * tensor);
  EXPECT_EQ(plan.lowerBoundBytes, 3 * tensor); // e.g. a, b, c live while c is computed
  EXPECT_EQ(plan.peakBytes, plan.lowerBoundBytes);
  // Tensors whose lifetimes intersect never share bytes.
  std::vector<ValueId> values = {a, b, c, d, e};
  std::vector<std::pair<int, int>> life = {{0, 2}, {1, 2}, {2, 4}, {3, 4}, {4, 5}};
  for (size_t i = 0; i < values.size(); ++i)
    for (size_t j = i + 1; j < values.size(); ++j) {
      bool together = life[i].first <= life[j].second && life[j].first <= life[i].second;
      int64_t oi = plan.offsets[static_cast<size_t>(values[i])],
              oj = plan.offsets[static_cast<size_t>(values[j])];
      bool overlap = oi < oj + tensor && oj < oi + tensor;
      EXPECT_FALSE(together && overlap) << "tensors " << i << " and " << j;
    }
}

} // namespace
} // namespace tunec

namespace tunec {
namespace {

TEST(Passes, FusionPlanFollowsMappingTypes) {
  // conv1 -> relu -> conv2 -> add(conv2, relu) -> relu2 -> softmax ; exp -> softmax2 (light chain)
  Graph g;
  ValueId x = g.addInput("x", {DType::F32, Shape{1, 4, 6, 6}, {}});
  ConvAttrs same{{3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1};
  ValueId c1 = add(g, OpKind::Conv, same,
                   {x, g.addConstant("w1", randomTensor(Shape{4, 4, 3, 3}, 1))}, "conv1");
  ValueId r1 = add(g, OpKind::Relu, NoAttrs{}, {c1}, "relu1");
  ValueId c2 = add(g, OpKind::Conv, same,
                   {r1, g.addConstant("w2", randomTensor(Shape{4, 4, 3, 3}, 2))}, "conv2");
  ValueId sum = add(g, OpKind::Add, NoAttrs{}, {c2, r1}, "residual");
  ValueId r2 = add(g, OpKind::Relu, NoAttrs{}, {sum}, "relu2");
  ValueId sm = add(g, OpKind::Softmax, SoftmaxAttrs{1, false}, {r2}, "softmax");
  ValueId e = add(g, OpKind::Exp, NoAttrs{}, {x}, "exp");
  ValueId sm2 = add(g, OpKind::Softmax, SoftmaxAttrs{1, false}, {e}, "softmax2");
  g.addOutput(sm);
  g.addOutput(sm2);
  passes::FusionPlan plan = passes::planFusion(g);
  auto kernelOf = [&](const std::string& name) {
    for (size_t n = 0; n < g.nodes().size(); ++n)
      if (g.nodes()[n].name == name) return plan.kernelOf[n];
    return -1;
  };
  // relu1 has two uses (conv2 and the residual add): conv1's kernel stops after it.
  EXPECT_EQ(kernelOf("conv1"), kernelOf("relu1"));
  EXPECT_NE(kernelOf("relu1"), kernelOf("conv2"));
  // conv2 absorbs the residual add and the relu (one-to-one epilogue of an anchor)...
  EXPECT_EQ(kernelOf("conv2"), kernelOf("residual"));
  EXPECT_EQ(kernelOf("conv2"), kernelOf("relu2"));
  // ...but not the softmax (a reduction after an anchor), while a light chain does take it.
  EXPECT_NE(kernelOf("relu2"), kernelOf("softmax"));
  EXPECT_EQ(kernelOf("exp"), kernelOf("softmax2"));
  EXPECT_EQ(plan.kernels.size(), 4u);
  bool explained = false;
  for (const auto& b : plan.boundaries)
    if (g.node(b.consumer).name == "softmax")
      explained = b.reason == "DNNFusion table: many-to-many then many-to-many is red";
  EXPECT_TRUE(explained);
}

} // namespace
} // namespace tunec

namespace tunec {
namespace {

TEST(Passes, FoldChannelAffineIntoConv) {
  Graph g;
  ValueId x = g.addInput("x", {DType::F32, Shape{1, 3, 6, 6}, {}});
  ValueId w = g.addConstant("w", randomTensor(Shape{5, 3, 3, 3}, 1));
  ValueId conv =
      add(g, OpKind::Conv, ConvAttrs{{3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1}, {x, w}, "conv");
  ValueId scaled = add(g, OpKind::Mul, NoAttrs{},
                       {g.addConstant("s", randomTensor(Shape{5, 1, 1}, 2)), conv}, "scale");
  ValueId shifted = add(g, OpKind::Add, NoAttrs{},
                        {scaled, g.addConstant("b", randomTensor(Shape{1, 5, 1, 1}, 3))}, "shift");
  ValueId spatial = add(g, OpKind::Add, NoAttrs{},
                        {shifted, g.addConstant("p", randomTensor(Shape{6, 6}, 4))}, "spatial");
  g.addOutput(spatial);
  auto out = passes::foldChannelAffine(g);
  ASSERT_TRUE(out.isOk()) << out.error().message();
  ASSERT_EQ(out->nodes().size(), 2u); // Conv (scale and shift folded), then the spatial Add stays
  EXPECT_EQ(out->nodes()[0].kind, OpKind::Conv);
  EXPECT_EQ(out->nodes()[1].kind, OpKind::Add);
  expectEquivalent(g, *out, 1e-5);
}

} // namespace
} // namespace tunec

namespace tunec {
namespace {

// PyTorch's SiLU (x * sigmoid(x), either operand order) and x * sigmoid(alpha x) become one Swish;
// a Sigmoid whose result is also used elsewhere stays.
TEST(Passes, RecognizeSwishFromSigmoidAndMul) {
  Graph g;
  ValueId x = g.addInput("x", {DType::F32, Shape{2, 3, 5}, {}});
  ValueId s = add(g, OpKind::Sigmoid, NoAttrs{}, {x}, "sigmoid");
  g.addOutput(add(g, OpKind::Mul, NoAttrs{}, {s, x}, "silu"));
  ValueId ax = add(g, OpKind::Mul, NoAttrs{}, {g.addConstant("alpha", scalar(1.702f)), x}, "ax");
  ValueId s2 = add(g, OpKind::Sigmoid, NoAttrs{}, {ax}, "sigmoid2");
  g.addOutput(add(g, OpKind::Mul, NoAttrs{}, {x, s2}, "swish"));
  ValueId s3 = add(g, OpKind::Sigmoid, NoAttrs{}, {x}, "sigmoid3");
  g.addOutput(add(g, OpKind::Mul, NoAttrs{}, {x, s3}, "kept"));
  g.addOutput(s3);
  auto out = passes::recognizeSwish(g);
  ASSERT_TRUE(out.isOk()) << out.error().message();
  int swish = 0;
  std::vector<float> alphas;
  for (const Node& n : out->nodes())
    if (n.kind == OpKind::Swish) {
      ++swish;
      alphas.push_back(std::get<AlphaBetaAttrs>(n.attrs).alpha);
    }
  EXPECT_EQ(swish, 2);
  EXPECT_EQ(out->nodes().size(), 4u) << "two Swish, and the Sigmoid and Mul of 'kept'";
  ASSERT_EQ(alphas.size(), 2u);
  EXPECT_FLOAT_EQ(alphas[0], 1.f);
  EXPECT_FLOAT_EQ(alphas[1], 1.702f);
  expectEquivalent(g, *out, 1e-6);
}

// ShuffleNet's channel shuffle (Reshape to [N, g, C/g, H, W], Transpose (0, 2, 1, 3, 4),
// Reshape back) becomes one Gather of the channels; a different permutation, or an inner value
// used twice, is left alone. A Slice of the Gather along its axis becomes a Gather of the sliced
// indices; a Slice of another axis stays.
TEST(Passes, RecognizeChannelShuffleAndFoldItsSlices) {
  Graph g;
  ValueId x = g.addInput("x", {DType::F32, Shape{1, 12, 3, 5}, {}});
  ValueId r = add(g, OpKind::Reshape, ReshapeAttrs{{1, 3, 4, 3, 5}}, {x}, "r");
  ValueId t = add(g, OpKind::Transpose, TransposeAttrs{{0, 2, 1, 3, 4}}, {r}, "t");
  ValueId shuffled = add(g, OpKind::Reshape, ReshapeAttrs{{1, 12, 3, 5}}, {t}, "shuffled");
  ValueId half = add(g, OpKind::Slice, SliceAttrs{{0, 6, 0, 0}, {1, 1, 1, 1}, {1, 6, 3, 5}, {}},
                     {shuffled}, "half");
  ValueId rows = add(g, OpKind::Slice, SliceAttrs{{0, 0, 1, 0}, {1, 1, 1, 1}, {1, 12, 2, 5}, {}},
                     {shuffled}, "rows");
  g.addOutput(half);
  g.addOutput(rows);
  // Not a shuffle: the transpose keeps the group order.
  ValueId r2 = add(g, OpKind::Reshape, ReshapeAttrs{{1, 3, 4, 3, 5}}, {x}, "r2");
  ValueId t2 = add(g, OpKind::Transpose, TransposeAttrs{{0, 1, 2, 4, 3}}, {r2}, "t2");
  g.addOutput(add(g, OpKind::Reshape, ReshapeAttrs{{1, 12, 5, 3}}, {t2}, "other"));
  // A shuffle whose inner transpose is also an output.
  ValueId r3 = add(g, OpKind::Reshape, ReshapeAttrs{{1, 2, 6, 3, 5}}, {x}, "r3");
  ValueId t3 = add(g, OpKind::Transpose, TransposeAttrs{{0, 2, 1, 3, 4}}, {r3}, "t3");
  g.addOutput(add(g, OpKind::Reshape, ReshapeAttrs{{1, 12, 3, 5}}, {t3}, "kept"));
  g.addOutput(t3);
  auto shuffle = passes::recognizeChannelShuffle(g);
  ASSERT_TRUE(shuffle.isOk()) << shuffle.error().message();
  auto count = [](const Graph& graph, OpKind kind) {
    return std::count_if(graph.nodes().begin(), graph.nodes().end(),
                         [&](const Node& n) { return n.kind == kind; });
  };
  EXPECT_EQ(count(*shuffle, OpKind::Gather), 1);
  EXPECT_EQ(count(*shuffle, OpKind::Transpose), 2) << "the two non-matches keep theirs";
  for (const Node& n : shuffle->nodes())
    if (n.kind == OpKind::Gather) {
      const Tensor& perm = *shuffle->value(n.inputs[1]).constant;
      std::vector<int64_t> want = {0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11};
      EXPECT_EQ(std::vector<int64_t>(perm.dataAs<int64_t>(), perm.dataAs<int64_t>() + 12), want);
    }
  expectEquivalent(g, *shuffle, 0);
  auto folded = passes::foldSliceOfGather(*shuffle);
  ASSERT_TRUE(folded.isOk()) << folded.error().message();
  EXPECT_EQ(count(*folded, OpKind::Gather), 2)
      << "the channel half folds, the row slice reads the shuffle";
  EXPECT_EQ(count(*folded, OpKind::Slice), 1);
  expectEquivalent(g, *folded, 0);
}

// The plan asks the anchor's template what its epilogue takes and names every boundary: a
// second addend, a broadcast that grows the output, an op no epilogue applies, a reshaped view.
TEST(Passes, FusionPlanEpiloguesAndTheirBoundaries) {
  Graph g;
  ValueId x = g.addInput("x", {DType::F32, Shape{1, 4, 6, 6}, {}});
  ValueId r = g.addInput("r", {DType::F32, Shape{1, 4, 6, 6}, {}});
  ConvAttrs same{{3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1};
  ValueId c1 = add(g, OpKind::Conv, same,
                   {x, g.addConstant("w1", randomTensor(Shape{4, 4, 3, 3}, 1)),
                    g.addConstant("b1", randomTensor(Shape{4}, 2))},
                   "conv1");
  ValueId b2 = add(g, OpKind::Add, NoAttrs{},
                   {c1, g.addConstant("b2", randomTensor(Shape{4, 1, 1}, 3))}, "bias2");
  ValueId sw = add(g, OpKind::Swish, AlphaBetaAttrs{1.f, 0.f}, {b2}, "silu");
  ValueId a1 = add(g, OpKind::Add, NoAttrs{}, {sw, r}, "residual");
  ValueId a2 = add(g, OpKind::Add, NoAttrs{}, {a1, x}, "residual2");
  g.addOutput(a2);
  ValueId c2 = add(g, OpKind::Conv, same,
                   {x, g.addConstant("w2", randomTensor(Shape{4, 4, 3, 3}, 4))}, "conv2");
  ValueId t = add(g, OpKind::Softsign, NoAttrs{}, {c2}, "softsign");
  g.addOutput(t);
  ValueId c3 = add(g, OpKind::Conv, same,
                   {x, g.addConstant("w3", randomTensor(Shape{4, 4, 3, 3}, 5))}, "conv3");
  ValueId f = add(g, OpKind::Flatten, AxisAttrs{1}, {c3}, "flatten");
  g.addOutput(add(g, OpKind::Relu, NoAttrs{}, {f}, "relu_after_view"));
  passes::FusionPlan plan = passes::planFusion(g);
  auto id = [&](const std::string& name) {
    for (size_t n = 0; n < g.nodes().size(); ++n)
      if (g.nodes()[n].name == name) return static_cast<NodeId>(n);
    return NodeId{-1};
  };
  auto kernelOf = [&](const std::string& name) {
    return plan.kernelOf[static_cast<size_t>(id(name))];
  };
  auto reason = [&](const std::string& consumer) {
    for (const auto& b : plan.boundaries)
      if (b.consumer == id(consumer)) return b.reason;
    return std::string("(no boundary)");
  };
  const passes::FusedKernel& k1 = plan.kernels[static_cast<size_t>(kernelOf("conv1"))];
  EXPECT_EQ(k1.templ, TemplateKind::Conv2d);
  EXPECT_EQ(kernelOf("silu"), kernelOf("conv1"));
  EXPECT_EQ(kernelOf("residual"), kernelOf("conv1"));
  EXPECT_NE(kernelOf("residual2"), kernelOf("conv1"));
  // conv1's own bias, the per-channel add merged into it, SiLU and one residual.
  ASSERT_EQ(k1.epilogue.size(), 4u);
  EXPECT_EQ(k1.epilogue[0].node, id("conv1"));
  EXPECT_TRUE(k1.epilogue[1].mergesIntoBias);
  EXPECT_EQ(epilogueName(k1.postOps()), "bias+silu+add");
  EXPECT_NE(reason("residual2").find("one addend tensor"), std::string::npos)
      << reason("residual2");
  EXPECT_NE(reason("softsign").find("Softsign is not an epilogue post-op"), std::string::npos)
      << reason("softsign");
  EXPECT_EQ(kernelOf("flatten"), kernelOf("conv3")) << "a reshape of the result is a view";
  EXPECT_NE(kernelOf("relu_after_view"), kernelOf("conv3"));
  EXPECT_NE(reason("relu_after_view").find("reshaped view"), std::string::npos)
      << reason("relu_after_view");
}

} // namespace
} // namespace tunec

namespace tunec {
namespace {

// Q, K and V projections of one input (MatMul by [16, 8] weights, then a bias add) become one
// MatMul by [16, 24], one bias add and a Split; a MatMul of another width and one without a
// bias stay as they are.
TEST(Passes, MergeSiblingMatmulsIntoOneAndASplit) {
  Graph g;
  ValueId x = g.addInput("x", {DType::F32, Shape{2, 5, 16}, {}});
  std::vector<ValueId> outs;
  for (int i = 0; i < 3; ++i) {
    ValueId y = add(g, OpKind::MatMul, NoAttrs{},
                    {x, g.addConstant("w" + std::to_string(i),
                                      randomTensor(Shape{16, 8}, static_cast<uint32_t>(i)))},
                    "proj" + std::to_string(i));
    outs.push_back(add(g, OpKind::Add, NoAttrs{},
                       {y, g.addConstant("b" + std::to_string(i),
                                         randomTensor(Shape{8}, static_cast<uint32_t>(10 + i)))},
                       "bias" + std::to_string(i)));
  }
  outs.push_back(add(g, OpKind::MatMul, NoAttrs{},
                     {x, g.addConstant("w9", randomTensor(Shape{16, 4}, 9))}, "other_width"));
  for (ValueId o : outs) g.addOutput(o);
  auto out = passes::mergeSiblingMatmuls(g);
  ASSERT_TRUE(out.isOk()) << out.error().message();
  int matmuls = 0, splits = 0;
  for (const Node& n : out->nodes()) {
    matmuls += n.kind == OpKind::MatMul;
    splits += n.kind == OpKind::Split;
  }
  EXPECT_EQ(matmuls, 2) << "the merged projections and the MatMul of another width";
  EXPECT_EQ(splits, 1);
  EXPECT_EQ(out->nodes().size(), 4u);
  expectEquivalent(g, *out, 1e-6);
}

} // namespace
} // namespace tunec

namespace tunec {
namespace {

std::optional<OpKind> producerKind(const Graph& graph, ValueId v) {
  NodeId p = graph.value(v).producer;
  return p < 0 ? std::nullopt : std::optional<OpKind>(graph.node(p).kind);
}

long countOf(const Graph& graph, OpKind kind) {
  return std::count_if(graph.nodes().begin(), graph.nodes().end(),
                       [&](const Node& n) { return n.kind == kind; });
}

ValueId indices(Graph& g, const std::string& name, const std::vector<int64_t>& v) {
  Tensor t(DType::I64, Shape{static_cast<int64_t>(v.size())});
  std::copy(v.begin(), v.end(), t.dataAs<int64_t>());
  return g.addConstant(name, t);
}

// The Gathers' index sets, each checked to permute one contiguous range of the new Concat.
void expectEachGatherReadsARange(const Graph& g) {
  for (const Node& n : g.nodes())
    if (n.kind == OpKind::Gather && producerKind(g, n.inputs[0]) == OpKind::Concat) {
      const Tensor& t = *g.value(n.inputs[1]).constant;
      std::vector<int64_t> v(t.dataAs<int64_t>(), t.dataAs<int64_t>() + t.numel());
      std::sort(v.begin(), v.end());
      for (size_t k = 1; k < v.size(); ++k) EXPECT_EQ(v[k], v[0] + static_cast<int64_t>(k));
    }
}

// ShuffleNet's unit after recognize-channel-shuffle and fold-slice-of-gather: Concat(x1, branch)
// read by two Gathers, each of a quarter of both. The Concat becomes [x1's part for the first
// half, the branch, x1's part for the second], each Gather a range of it; a Concat whose
// Gathers overlap, or that something else reads, stays.
TEST(Passes, OrderConcatForGathersMakesEachGatherARange) {
  Graph g;
  ValueId x = g.addInput("x", {DType::F32, Shape{1, 8, 3, 4}, {}});
  ValueId x1 = add(g, OpKind::Gather, AxisAttrs{1}, {x, indices(g, "p", {7, 6, 5, 4})}, "x1");
  ValueId y = add(g, OpKind::Relu, NoAttrs{},
                  {add(g, OpKind::Conv, ConvAttrs{{1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1},
                       {x, g.addConstant("w", randomTensor(Shape{4, 8, 1, 1}, 1))}, "conv")},
                  "relu");
  ValueId cat = add(g, OpKind::Concat, AxisAttrs{1}, {x1, y}, "cat");
  g.addOutput(add(g, OpKind::Gather, AxisAttrs{1}, {cat, indices(g, "lo", {0, 4, 1, 5})}, "a"));
  g.addOutput(add(g, OpKind::Gather, AxisAttrs{1}, {cat, indices(g, "hi", {2, 6, 3, 7})}, "b"));
  ValueId cat2 = add(g, OpKind::Concat, AxisAttrs{1}, {x1, y}, "cat2");
  g.addOutput(add(g, OpKind::Gather, AxisAttrs{1}, {cat2, indices(g, "o1", {0, 1, 2})}, "c"));
  g.addOutput(
      add(g, OpKind::Gather, AxisAttrs{1}, {cat2, indices(g, "o2", {2, 3, 4, 5, 6, 7})}, "d"));
  auto out = passes::orderConcatForGathers(g);
  ASSERT_TRUE(out.isOk()) << out.error().message();
  EXPECT_EQ(countOf(*out, OpKind::Slice), 2) << "x1 in two parts, the branch whole";
  int threeInputs = 0;
  for (const Node& n : out->nodes())
    if (n.kind == OpKind::Concat) threeInputs += n.inputs.size() == 3;
  EXPECT_EQ(threeInputs, 1) << "cat2's Gathers overlap: it stays";
  expectEachGatherReadsARange(*out);
  expectEquivalent(g, *out, 0);
}

// A one-group Conv (and its Relu) read only by channel Slices becomes one Conv per Slice; a
// Conv whose result is also read whole stays.
TEST(Passes, SplitConvForSlicesSplitsTheOutputChannels) {
  Graph g;
  ValueId x = g.addInput("x", {DType::F32, Shape{1, 5, 4, 4}, {}});
  ConvAttrs pointwise{{1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1};
  auto conv = [&](const std::string& name, uint32_t seed) {
    return add(g, OpKind::Relu, NoAttrs{},
               {add(g, OpKind::Conv, pointwise,
                    {x, g.addConstant(name + ".w", randomTensor(Shape{6, 5, 1, 1}, seed)),
                     g.addConstant(name + ".b", randomTensor(Shape{6}, seed + 1))},
                    name)},
               name + ".relu");
  };
  auto slice = [&](ValueId v, int64_t lo, int64_t n, const std::string& name) {
    return add(g, OpKind::Slice, SliceAttrs{{0, lo, 0, 0}, {1, 1, 1, 1}, {1, n, 4, 4}, {}}, {v},
               name);
  };
  ValueId split = conv("split", 1);
  g.addOutput(slice(split, 0, 2, "s0"));
  g.addOutput(slice(split, 2, 4, "s1"));
  ValueId kept = conv("kept", 3);
  g.addOutput(slice(kept, 1, 3, "k0"));
  g.addOutput(kept);
  auto out = passes::splitConvForSlices(g);
  ASSERT_TRUE(out.isOk()) << out.error().message();
  EXPECT_EQ(countOf(*out, OpKind::Conv), 3) << "two parts of 'split', 'kept' whole";
  EXPECT_EQ(countOf(*out, OpKind::Slice), 1) << "kept's Slice stays";
  expectEquivalent(g, *out, 1e-6);
}

// DW(Gather(x, p)) = Gather(DW'(x), p) with the filters and bias permuted; then a pointwise
// Conv of a Gather that permutes a contiguous range reads that range (a Slice), its weights'
// input channels permuted. A Gather that is not a range stays.
TEST(Passes, ChannelGathersMovePastDepthwiseAndIntoConvWeights) {
  Graph g;
  ValueId x = g.addInput("x", {DType::F32, Shape{1, 6, 5, 5}, {}});
  ValueId p = add(g, OpKind::Gather, AxisAttrs{1}, {x, indices(g, "p", {3, 0, 4, 1, 5, 2})}, "p");
  ValueId dw = add(g, OpKind::Conv, ConvAttrs{{3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 6},
                   {p, g.addConstant("dw.w", randomTensor(Shape{6, 1, 3, 3}, 1)),
                    g.addConstant("dw.b", randomTensor(Shape{6}, 2))},
                   "dw");
  ConvAttrs pointwise{{1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1};
  g.addOutput(add(g, OpKind::Conv, pointwise,
                  {dw, g.addConstant("pw.w", randomTensor(Shape{4, 6, 1, 1}, 3))}, "pw"));
  ValueId range = add(g, OpKind::Gather, AxisAttrs{1}, {x, indices(g, "r", {4, 2, 3})}, "range");
  g.addOutput(add(g, OpKind::Conv, pointwise,
                  {range, g.addConstant("rw.w", randomTensor(Shape{2, 3, 1, 1}, 4))}, "rw"));
  ValueId gaps = add(g, OpKind::Gather, AxisAttrs{1}, {x, indices(g, "q", {0, 2})}, "gaps");
  g.addOutput(add(g, OpKind::Conv, pointwise,
                  {gaps, g.addConstant("qw.w", randomTensor(Shape{2, 2, 1, 1}, 5))}, "qw"));
  auto pushed = passes::pushGathersThroughDepthwise(g);
  ASSERT_TRUE(pushed.isOk()) << pushed.error().message();
  for (const Node& n : pushed->nodes())
    if (n.kind == OpKind::Conv && std::get<ConvAttrs>(n.attrs).group == 6) {
      EXPECT_EQ(producerKind(*pushed, n.inputs[0]), std::nullopt) << "dw reads x itself";
    }
  expectEquivalent(g, *pushed, 1e-6);
  auto absorbed = passes::absorbChannelGathers(*pushed);
  ASSERT_TRUE(absorbed.isOk()) << absorbed.error().message();
  EXPECT_EQ(countOf(*absorbed, OpKind::Gather), 1) << "only the Gather with a gap stays";
  EXPECT_EQ(countOf(*absorbed, OpKind::Slice), 1) << "channels [2, 5) of x for 'rw'";
  expectEquivalent(g, *absorbed, 1e-5);
}

} // namespace
} // namespace tunec
