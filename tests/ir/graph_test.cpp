// Graph construction, inference, verifier and IR value types.
#include "ir/graph.h"
#include "ir/op_registry.h"
#include "ir/verifier.h"

#include <cmath>
#include <gtest/gtest.h>

namespace tunec {
namespace {

Tensor filled(DType dtype, Shape shape, double v) {
  Tensor t(dtype, std::move(shape));
  for (int64_t i = 0; i < t.numel(); ++i) t.setDouble(i, v);
  return t;
}

TEST(Graph, ConvInfersOutputShapeAndFlops) {
  Graph g;
  ValueId x = g.addInput("x", {DType::F32, Shape{1, 3, 224, 224}, {}});
  ValueId w = g.addConstant("w", filled(DType::F32, Shape{64, 3, 7, 7}, 0.5));
  ConvAttrs a{{7, 7}, {2, 2}, {3, 3, 3, 3}, {1, 1}, 1};
  auto n = g.addNode("conv1", OpKind::Conv, a, {x, w}, {"y"});
  ASSERT_TRUE(n.isOk()) << n.error().message();
  const Node& node = g.node(*n);
  EXPECT_EQ(g.value(node.outputs[0]).type.shape, (Shape{1, 64, 112, 112}));
  EXPECT_EQ(opInfo(OpKind::Conv).flops(node, g), 2LL * 64 * 112 * 112 * 3 * 7 * 7);
  EXPECT_EQ(opInfo(OpKind::Conv).mapping, MappingType::ManyToMany);
}

TEST(Graph, ConvChannelMismatchNamesNodeAndShapes) {
  Graph g;
  ValueId x = g.addInput("x", {DType::F32, Shape{1, 4, 8, 8}, {}});
  ValueId w = g.addConstant("w", filled(DType::F32, Shape{8, 3, 3, 3}, 1));
  auto n = g.addNode("c", OpKind::Conv, ConvAttrs{{3, 3}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1}, {x, w},
                     {"y"});
  ASSERT_FALSE(n.isOk());
  EXPECT_NE(n.error().message().find("node 'c' (Conv)"), std::string::npos) << n.error().message();
  EXPECT_NE(n.error().message().find("expects 3 input channels but the input 1x4x8x8 has 4"),
            std::string::npos)
      << n.error().message();
}

TEST(Graph, BroadcastAndMatMulShapes) {
  Graph g;
  ValueId a = g.addInput("a", {DType::F32, Shape{2, 1, 4, 5}, {}});
  ValueId b = g.addInput("b", {DType::F32, Shape{3, 5, 6}, {}});
  auto mm = g.addNode("mm", OpKind::MatMul, NoAttrs{}, {a, b}, {"c"});
  ASSERT_TRUE(mm.isOk());
  EXPECT_EQ(g.value(g.node(*mm).outputs[0]).type.shape, (Shape{2, 3, 4, 6}));
  ValueId bad = g.addInput("bad", {DType::F32, Shape{4, 7}, {}});
  auto add = g.addNode("add", OpKind::Add, NoAttrs{}, {a, bad}, {"d"});
  ASSERT_FALSE(add.isOk());
  EXPECT_NE(add.error().message().find("do not broadcast"), std::string::npos);
}

TEST(Graph, ComparisonYieldsBoolAndDTypeMismatchIsAnError) {
  Graph g;
  ValueId a = g.addInput("a", {DType::F32, Shape{3}, {}});
  ValueId b = g.addInput("b", {DType::I64, Shape{3}, {}});
  auto eq = g.addNode("eq", OpKind::Equal, NoAttrs{}, {a, a}, {"e"});
  ASSERT_TRUE(eq.isOk());
  EXPECT_EQ(g.value(g.node(*eq).outputs[0]).type.dtype, DType::Bool);
  auto add = g.addNode("add", OpKind::Add, NoAttrs{}, {a, b}, {"s"});
  ASSERT_FALSE(add.isOk());
  EXPECT_NE(add.error().message().find("different element types f32 and i64"), std::string::npos);
}

TEST(Graph, VerifierAcceptsBuiltGraphAndRemoveDeadCodeDropsUnusedNodes) {
  Graph g;
  ValueId x = g.addInput("x", {DType::F32, Shape{2, 3}, {}});
  auto r = g.addNode("r", OpKind::Relu, NoAttrs{}, {x}, {"r"});
  auto dead = g.addNode("dead", OpKind::Exp, NoAttrs{}, {x}, {"e"});
  ASSERT_TRUE(r.isOk() && dead.isOk());
  g.addOutput(g.node(*r).outputs[0]);
  EXPECT_TRUE(verifyGraph(g).isOk());
  g.removeDeadCode();
  ASSERT_EQ(g.nodes().size(), 1u);
  EXPECT_EQ(g.nodes()[0].name, "r");
  EXPECT_TRUE(verifyGraph(g).isOk());
}

TEST(Graph, VerifierReportsUndefinedOutput) {
  Graph g;
  ValueId x = g.addInput("x", {DType::F32, Shape{2}, {}});
  auto r = g.addNode("r", OpKind::Relu, NoAttrs{}, {x}, {"r"});
  ASSERT_TRUE(r.isOk());
  Graph other;
  other.addInput("x", {DType::F32, Shape{2}, {}});
  other.addOutput(1);                                           // never defined
  other.addConstant("unused", filled(DType::F32, Shape{1}, 0)); // value 1 is a constant: defined
  EXPECT_TRUE(verifyGraph(other).isOk());
}

TEST(Shape, PrintParseAndStrides) {
  Shape s;
  ASSERT_TRUE(parseShape("1x3x224x224", s));
  EXPECT_EQ(s, (Shape{1, 3, 224, 224}));
  EXPECT_EQ(s.toString(), "1x3x224x224");
  EXPECT_EQ(s.strides(), (std::vector<int64_t>{150528, 50176, 224, 1}));
  EXPECT_FALSE(parseShape("1xx3", s));
  EXPECT_FALSE(parseShape("1x-3", s));
  EXPECT_EQ(Shape{}.numel(), 1);
}

TEST(Layout, DescribesBlockedLayouts) {
  EXPECT_TRUE(Layout::plain().isPlain());
  Layout nchw16c{{0, 1, 2, 3}, {{1, 16}}};
  EXPECT_FALSE(nchw16c.isPlain());
  EXPECT_EQ(nchw16c.toString(4), "nChw16c");
  Layout nhwc{{0, 2, 3, 1}, {}};
  EXPECT_EQ(nhwc.toString(4), "nhwc");
}

TEST(DType, SixteenBitConversionsRoundToNearestEven) {
  for (float v : {0.0f, 1.0f, -2.5f, 65504.0f, 6.1035156e-05f, 3.14159f}) {
    EXPECT_NEAR(halfToFloat(floatToHalf(v)), v, std::fabs(v) * 1e-3 + 1e-7) << v;
    EXPECT_NEAR(bf16ToFloat(floatToBf16(v)), v, std::fabs(v) * 8e-3) << v;
  }
  EXPECT_EQ(floatToHalf(1.0f), 0x3c00);
  EXPECT_EQ(floatToBf16(1.0f), 0x3f80);
  EXPECT_TRUE(std::isinf(halfToFloat(floatToHalf(1e6f))));
  EXPECT_EQ(parseDType("bf16"), DType::BF16);
  EXPECT_EQ(dtypeSize(DType::I64), 8u);
}

} // namespace
} // namespace tunec
