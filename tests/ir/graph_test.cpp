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

TEST(Shape, SymbolicDimensionsAreCanonicalPolynomialsWithTheirBounds) {
  DimExpr batch = DimExpr::symbol("batch"), sequence = DimExpr::symbol("sequence");
  // Products and sums are canonical, whatever order built them.
  EXPECT_EQ(batch * sequence * DimExpr(768), DimExpr(768) * sequence * batch);
  EXPECT_EQ((batch * sequence * DimExpr(768)).toString(), "batch*sequence*768");
  EXPECT_EQ((DimExpr::symbol("past") + sequence + DimExpr(1)).toString(), "past+sequence+1");
  EXPECT_EQ((sequence - DimExpr(1)).toString(), "sequence-1");
  EXPECT_EQ((sequence * sequence).toString(), "sequence*sequence");
  EXPECT_EQ(sequence - sequence, DimExpr(0));
  EXPECT_TRUE((sequence - sequence).isConstant());
  // Exact division only: by a constant dividing every coefficient, or by a symbol of every term.
  auto heads = (batch * sequence * DimExpr(768)).divideExactly(DimExpr(12));
  ASSERT_TRUE(heads.has_value());
  EXPECT_EQ(*heads, batch * sequence * DimExpr(64));
  EXPECT_EQ((batch * sequence * DimExpr(768)).divideExactly(batch * DimExpr(768)), sequence);
  EXPECT_FALSE((sequence + DimExpr(1)).divideExactly(DimExpr(2)).has_value());
  EXPECT_FALSE((sequence * DimExpr(6)).divideExactly(batch).has_value());
  EXPECT_EQ((batch * sequence + DimExpr(3)).evaluate({{"batch", 4}, {"sequence", 7}}), 31);
  EXPECT_EQ((batch * sequence).symbols(), (std::vector<std::string>{"batch", "sequence"}));

  // A Dim carries its range; a shape's [] and dims() are the bounds.
  Dim b = Dim::symbol("batch", 1, 8), s = Dim::symbol("sequence", 1, 512);
  Dim rows = b * s;
  EXPECT_EQ(rows.min, 1);
  EXPECT_EQ(rows.max, 4096);
  EXPECT_EQ((s + Dim(2)).max, 514);
  Shape x(std::vector<Dim>{b, s, Dim(768)});
  EXPECT_FALSE(x.isStatic());
  EXPECT_EQ(x.dims(), (std::vector<int64_t>{8, 512, 768}));
  EXPECT_EQ(x[1], 512);
  EXPECT_EQ(x.numel(), 8 * 512 * 768);
  EXPECT_EQ(x.dim(1), s);
  EXPECT_EQ(x.dim(2), Dim(768));
  EXPECT_EQ(x.toString(), "batch x sequence x 768");
  // Not equal to the static shape of its bounds; a shape of constant Dims is static.
  EXPECT_NE(x, (Shape{8, 512, 768}));
  EXPECT_EQ(Shape(std::vector<Dim>{Dim(2), Dim(3)}), (Shape{2, 3}));
  EXPECT_TRUE(Shape(std::vector<Dim>{Dim(2), Dim(3)}).isStatic());
}

TEST(Graph, SymbolicDimensionsAreCarriedByInference) {
  Graph g;
  Dim b = Dim::symbol("batch", 1, 8), s = Dim::symbol("sequence", 1, 128);
  ValueId x = g.addInput("x", {DType::F32, Shape(std::vector<Dim>{b, s, Dim(16)}), {}});
  Tensor w(DType::F32, Shape{16, 4});
  ValueId wv = g.addConstant("w", w);
  auto mm = g.addNode("mm", OpKind::MatMul, NoAttrs{}, {x, wv}, {"mm_out"});
  ASSERT_TRUE(mm.isOk()) << mm.error().message();
  ValueId y = g.node(*mm).outputs[0];
  EXPECT_EQ(g.value(y).type.shape.toString(), "batch x sequence x 4");
  auto tr = g.addNode("t", OpKind::Transpose, TransposeAttrs{{0, 2, 1}}, {y}, {"t_out"});
  ASSERT_TRUE(tr.isOk()) << tr.error().message();
  ValueId t = g.node(*tr).outputs[0];
  EXPECT_EQ(g.value(t).type.shape.toString(), "batch x 4 x sequence");
  // Scores: [batch, sequence, 4] x [batch, 4, sequence] -> [batch, sequence, sequence].
  auto scores = g.addNode("qk", OpKind::MatMul, NoAttrs{}, {y, t}, {"qk_out"});
  ASSERT_TRUE(scores.isOk()) << scores.error().message();
  EXPECT_EQ(g.value(g.node(*scores).outputs[0]).type.shape.toString(),
            "batch x sequence x sequence");
  EXPECT_EQ(g.value(g.node(*scores).outputs[0]).type.shape.dims(),
            (std::vector<int64_t>{8, 128, 128}));
  // Flatten multiplies the symbols, Concat adds them.
  auto flat = g.addNode("f", OpKind::Flatten, AxisAttrs{2}, {y}, {"f_out"});
  ASSERT_TRUE(flat.isOk()) << flat.error().message();
  EXPECT_EQ(g.value(g.node(*flat).outputs[0]).type.shape.toString(), "batch*sequence x 4");
  auto cat = g.addNode("c", OpKind::Concat, AxisAttrs{1}, {y, y}, {"c_out"});
  ASSERT_TRUE(cat.isOk()) << cat.error().message();
  EXPECT_EQ(g.value(g.node(*cat).outputs[0]).type.shape.toString(), "batch x sequence*2 x 4");
  // A symbol broadcasts with 1 and with itself, never with another extent.
  ValueId other = g.addInput("o", {DType::F32, Shape(std::vector<Dim>{b, Dim(7), Dim(4)}), {}});
  auto add = g.addNode("a", OpKind::Add, NoAttrs{}, {y, other}, {"a_out"});
  ASSERT_FALSE(add.isOk());
  EXPECT_NE(add.error().message().find("do not broadcast"), std::string::npos)
      << add.error().message();
  // An op whose inference sees only bounds refuses a symbolic input, naming it.
  auto pad = g.addNode("p", OpKind::Pad, PadAttrs{PadMode::Constant, {0, 0, 0, 0, 1, 0}, 0.f}, {y},
                       {"p_out"});
  ASSERT_FALSE(pad.isOk());
  EXPECT_NE(pad.error().message().find(
                "has the symbolic shape batch x sequence x 4, and tunec does not carry symbolic "
                "dimensions through Pad yet"),
            std::string::npos)
      << pad.error().message();
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
