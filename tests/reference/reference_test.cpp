// Reference ops checked against hand-computed values and against independent formulations
// on random data (never zeros).
#include "ir/graph.h"
#include "reference/reference.h"

#include <cmath>
#include <cstring>
#include <gtest/gtest.h>
#include <random>

namespace tunec {
namespace {

Tensor randomTensor(Shape shape, uint32_t seed) {
  Tensor t(DType::F32, std::move(shape));
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  for (int64_t i = 0; i < t.numel(); ++i) t.dataAs<float>()[i] = dist(rng);
  return t;
}

Tensor values(Shape shape, std::vector<float> v) {
  Tensor t(DType::F32, std::move(shape));
  for (size_t i = 0; i < v.size(); ++i) t.dataAs<float>()[i] = v[i];
  return t;
}

// Builds a one-node graph over the given inputs (all graph inputs) and runs it.
std::vector<Tensor> runOne(OpKind kind, OpAttrs attrs, const std::vector<Tensor>& in,
                           int outputs = 1) {
  Graph g;
  std::vector<ValueId> ids;
  for (size_t i = 0; i < in.size(); ++i)
    ids.push_back(g.addInput("in" + std::to_string(i), {in[i].dtype(), in[i].shape(), {}}));
  std::vector<std::string> names;
  for (int i = 0; i < outputs; ++i) names.push_back("out" + std::to_string(i));
  auto n = g.addNode("n", kind, std::move(attrs), ids, names);
  EXPECT_TRUE(n.isOk()) << n.error().message();
  for (ValueId o : g.node(*n).outputs) g.addOutput(o);
  auto r = runReference(g, in);
  EXPECT_TRUE(r.isOk()) << r.error().message();
  return *r;
}

void expectClose(const Tensor& a, const Tensor& b, double tol) {
  ASSERT_EQ(a.shape(), b.shape());
  for (int64_t i = 0; i < a.numel(); ++i)
    ASSERT_NEAR(a.getDouble(i), b.getDouble(i), tol) << "element " << i;
}

TEST(Reference, ConvHandComputedWithPaddingAndStride) {
  // 1x1x3x3 input 1..9, 2x2 kernel of ones, pad 1, stride 2 -> corners of the padded sums.
  Tensor x = values(Shape{1, 1, 3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  Tensor w = values(Shape{1, 1, 2, 2}, {1, 1, 1, 1});
  auto y = runOne(OpKind::Conv, ConvAttrs{{2, 2}, {2, 2}, {1, 1, 1, 1}, {1, 1}, 1}, {x, w});
  ASSERT_EQ(y[0].shape(), (Shape{1, 1, 2, 2}));
  EXPECT_FLOAT_EQ(y[0].dataAs<float>()[0], 1);
  EXPECT_FLOAT_EQ(y[0].dataAs<float>()[1], 2 + 3);
  EXPECT_FLOAT_EQ(y[0].dataAs<float>()[2], 4 + 7);
  EXPECT_FLOAT_EQ(y[0].dataAs<float>()[3], 5 + 6 + 8 + 9);
}

TEST(Reference, PointwiseConvEqualsMatMulOnRandomData) {
  Tensor x = randomTensor(Shape{1, 8, 5, 6}, 1);
  Tensor w = randomTensor(Shape{12, 8, 1, 1}, 2);
  auto conv = runOne(OpKind::Conv, ConvAttrs{{1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1}, {x, w});
  // y[oc, p] = sum_c w[oc, c] x[c, p]: MatMul of W (12x8) and X (8x30).
  auto mm = runOne(OpKind::MatMul, NoAttrs{}, {w.reshaped(Shape{12, 8}), x.reshaped(Shape{8, 30})});
  expectClose(conv[0], mm[0].reshaped(Shape{1, 12, 5, 6}), 1e-5);
}

TEST(Reference, GroupedConvEqualsSeparateConvs) {
  Tensor x = randomTensor(Shape{1, 4, 6, 6}, 3);
  Tensor w = randomTensor(Shape{6, 2, 3, 3}, 4);
  ConvAttrs a{{3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 2};
  auto grouped = runOne(OpKind::Conv, a, {x, w});
  a.group = 1;
  for (int g = 0; g < 2; ++g) {
    Tensor xg(DType::F32, Shape{1, 2, 6, 6}), wg(DType::F32, Shape{3, 2, 3, 3});
    std::memcpy(xg.data(), x.data() + g * xg.byteSize(), xg.byteSize());
    std::memcpy(wg.data(), w.data() + g * wg.byteSize(), wg.byteSize());
    auto part = runOne(OpKind::Conv, a, {xg, wg});
    for (int64_t i = 0; i < part[0].numel(); ++i)
      ASSERT_NEAR(part[0].getDouble(i), grouped[0].getDouble(g * part[0].numel() + i), 1e-5);
  }
}

TEST(Reference, GemmTransposesMatchMatMul) {
  Tensor a = randomTensor(Shape{7, 5}, 5); // A^T is 5x7
  Tensor b = randomTensor(Shape{9, 7}, 6); // B^T is 7x9
  Tensor c = randomTensor(Shape{9}, 7);
  auto gemm = runOne(OpKind::Gemm, GemmAttrs{2.f, 0.5f, true, true}, {a, b, c});
  auto at = runOne(OpKind::Transpose, TransposeAttrs{{1, 0}}, {a});
  auto bt = runOne(OpKind::Transpose, TransposeAttrs{{1, 0}}, {b});
  auto mm = runOne(OpKind::MatMul, NoAttrs{}, {at[0], bt[0]});
  for (int64_t i = 0; i < 5; ++i)
    for (int64_t j = 0; j < 9; ++j)
      ASSERT_NEAR(gemm[0].getDouble(i * 9 + j),
                  2 * mm[0].getDouble(i * 9 + j) + 0.5 * c.getDouble(j), 1e-5);
}

TEST(Reference, SoftmaxRowsSumToOneAndLayerNormStandardizes) {
  Tensor x = randomTensor(Shape{4, 10}, 8);
  auto sm = runOne(OpKind::Softmax, SoftmaxAttrs{-1, false}, {x});
  for (int r = 0; r < 4; ++r) {
    double sum = 0;
    for (int j = 0; j < 10; ++j) sum += sm[0].getDouble(r * 10 + j);
    EXPECT_NEAR(sum, 1.0, 1e-6);
  }
  Tensor scale = values(Shape{10}, std::vector<float>(10, 1.f));
  auto ln = runOne(OpKind::LayerNormalization, NormAttrs{1, 1e-9f}, {x, scale});
  for (int r = 0; r < 4; ++r) {
    double mean = 0, var = 0;
    for (int j = 0; j < 10; ++j) mean += ln[0].getDouble(r * 10 + j) / 10;
    for (int j = 0; j < 10; ++j) var += std::pow(ln[0].getDouble(r * 10 + j) - mean, 2) / 10;
    EXPECT_NEAR(mean, 0, 1e-6);
    EXPECT_NEAR(var, 1, 1e-4);
  }
}

TEST(Reference, MaxPoolCeilModeAndAveragePoolExcludesPadding) {
  Tensor x = values(Shape{1, 1, 3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  auto mp =
      runOne(OpKind::MaxPool, PoolAttrs{{2, 2}, {2, 2}, {0, 0, 0, 0}, {1, 1}, true, false, 2}, {x});
  ASSERT_EQ(mp[0].shape(), (Shape{1, 1, 2, 2}));
  EXPECT_EQ(mp[0].getDouble(0), 5);
  EXPECT_EQ(mp[0].getDouble(1), 6);
  EXPECT_EQ(mp[0].getDouble(2), 8);
  EXPECT_EQ(mp[0].getDouble(3), 9);
  auto ap = runOne(OpKind::AveragePool,
                   PoolAttrs{{3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, false, false, 2}, {x});
  EXPECT_DOUBLE_EQ(ap[0].getDouble(0), (1 + 2 + 4 + 5) / 4.0);
}

TEST(Reference, GatherNegativeIndexAndOutOfRangeError) {
  Tensor data = values(Shape{3, 2}, {1, 2, 3, 4, 5, 6});
  Tensor idx(DType::I64, Shape{2});
  idx.setInt(0, -1);
  idx.setInt(1, 0);
  auto g = runOne(OpKind::Gather, AxisAttrs{0}, {data, idx});
  EXPECT_EQ(g[0].getDouble(0), 5);
  EXPECT_EQ(g[0].getDouble(3), 2);

  Graph graph;
  ValueId d = graph.addInput("data", {DType::F32, Shape{3, 2}, {}});
  ValueId i = graph.addInput("indices", {DType::I64, Shape{2}, {}});
  auto n = graph.addNode("gather", OpKind::Gather, AxisAttrs{0}, {d, i}, {"y"});
  graph.addOutput(graph.node(*n).outputs[0]);
  idx.setInt(1, 7);
  auto r = runReference(graph, {data, idx});
  ASSERT_FALSE(r.isOk());
  EXPECT_EQ(r.error().message(),
            "node 'gather' (Gather): index 7 is out of range for axis 0 of size 3");
}

TEST(Reference, WrongInputShapeOrDTypeNamesTheInput) {
  Graph graph;
  ValueId x = graph.addInput("pixels", {DType::F32, Shape{1, 3}, {}});
  auto n = graph.addNode("relu", OpKind::Relu, NoAttrs{}, {x}, {"y"});
  graph.addOutput(graph.node(*n).outputs[0]);
  auto r = runReference(graph, {Tensor(DType::F32, Shape{1, 4})});
  ASSERT_FALSE(r.isOk());
  EXPECT_EQ(r.error().message(), "input 'pixels' must be f32[1x3] but f32[1x4] was given");
  r = runReference(graph, {Tensor(DType::I64, Shape{1, 3})});
  ASSERT_FALSE(r.isOk());
  EXPECT_EQ(r.error().message(), "input 'pixels' must be f32[1x3] but i64[1x3] was given");
}

TEST(Reference, IntegerArithmeticIsExact) {
  Tensor a(DType::I64, Shape{3}), b(DType::I64, Shape{3});
  int64_t av[] = {(int64_t{1} << 53) + 1, -7, 7}, bv[] = {1, 2, -2};
  for (int i = 0; i < 3; ++i) {
    a.setInt(i, av[i]);
    b.setInt(i, bv[i]);
  }
  auto sum = runOne(OpKind::Add, NoAttrs{}, {a, b});
  EXPECT_EQ(sum[0].getInt(0), (int64_t{1} << 53) + 2);
  auto mod = runOne(OpKind::Mod, ModAttrs{false}, {a, b});
  EXPECT_EQ(mod[0].getInt(1), 1);  // -7 mod 2 takes the divisor's sign
  EXPECT_EQ(mod[0].getInt(2), -1); // 7 mod -2
  auto div = runOne(OpKind::Div, NoAttrs{}, {a, b});
  EXPECT_EQ(div[0].getInt(1), -3);
}

} // namespace
} // namespace tunec

namespace tunec {
namespace {

// A node whose output cannot fit in this machine's memory is an error naming the node, the
// output, its type and size (not the process's generic out-of-memory), in the reference executor
// and in constant folding alike (allocateOutputs).
TEST(Reference, AnOutputBeyondTheMachinesMemoryIsNamed) {
  Graph g;
  auto id = g.addNode("big", OpKind::ConstantOfShape,
                      ConstantOfShapeAttrs{{100000000000}, DType::F32, 1.5}, {}, {"c"});
  ASSERT_TRUE(id.isOk()) << id.error().message();
  g.addOutput(g.node(*id).outputs[0]);
  auto run = runReference(g, {});
  ASSERT_FALSE(run.isOk());
  EXPECT_NE(run.error().message().find("node 'big' (ConstantOfShape): its output 'c' "
                                       "f32[100000000000] needs 400.0 GB, more than this "
                                       "machine's"),
            std::string::npos)
      << run.error().message();
}

} // namespace
} // namespace tunec
