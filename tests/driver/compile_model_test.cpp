// Whole-graph compilation against the reference executor: each graph is compiled (generated
// kernels with fused epilogues, loop kernels, layouts, arena) and run in process with the JIT,
// on random data; the tolerance is a relative L2 error of 1e-5 (fp32 against the reference's
// double precision).
#include "../codegen/test_support.h" // test::sharedTwinJit: the AMX target run through twins
#include "driver/compile_model.h"
#include "passes/fusion_plan.h"
#include "passes/passes.h"
#include "reference/reference.h"
#include "support/host.h"
#include "templates/matmul_template.h"
#include "templates/template.h"
#include "tunec/runtime.h"
#include "tuning_db/database.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <gtest/gtest.h>
#include <random>

namespace tunec {
namespace {

std::shared_ptr<Jit> sharedJit() {
  static std::shared_ptr<Jit> jit = [] {
    auto j = Jit::create(hostTarget());
    EXPECT_TRUE(j.isOk());
    return std::shared_ptr<Jit>(std::move(*j));
  }();
  return jit;
}

Tensor randomTensor(DType dtype, const Shape& shape, std::mt19937& rng, int64_t intRange = 10) {
  Tensor t(dtype, shape);
  std::uniform_real_distribution<double> real(-1.0, 1.0);
  std::uniform_int_distribution<int64_t> whole(0, intRange - 1);
  for (int64_t i = 0; i < t.numel(); ++i)
    t.setDouble(i, dtype == DType::F32 ? real(rng) : static_cast<double>(whole(rng)));
  return t;
}

struct Builder {
  Graph g;
  std::mt19937 rng{42};
  std::vector<Tensor> inputs;

  ValueId input(const Shape& s, DType dtype = DType::F32) {
    inputs.push_back(randomTensor(dtype, s, rng));
    return g.addInput("in" + std::to_string(inputs.size()), {dtype, s, {}});
  }
  ValueId constant(const Shape& s) {
    return g.addConstant("c" + std::to_string(g.values().size()), randomTensor(DType::F32, s, rng));
  }
  ValueId op(OpKind kind, OpAttrs attrs, std::vector<ValueId> in, int outputs = 1) {
    std::vector<std::string> names;
    for (int i = 0; i < outputs; ++i)
      names.push_back("v" + std::to_string(g.values().size()) + "_" + std::to_string(i));
    auto n = g.addNode("n" + std::to_string(g.nodes().size()), kind, std::move(attrs),
                       std::move(in), names);
    EXPECT_TRUE(n.isOk()) << n.error().message();
    return g.node(*n).outputs[0];
  }
};

double relativeL2(const Tensor& got, const Tensor& want) {
  double num = 0, den = 0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    double d = got.getDouble(i) - want.getDouble(i);
    num += d * d;
    den += want.getDouble(i) * want.getDouble(i);
  }
  return std::sqrt(num / std::max(den, 1e-30));
}

// Compiles and runs the graph with outputs `outs`; compares every output with the reference.
driver::CompiledModel checkCompiled(Builder& b, std::vector<ValueId> outs, int threads = 1) {
  for (ValueId o : outs)
    if (std::find(b.g.outputs().begin(), b.g.outputs().end(), o) == b.g.outputs().end())
      b.g.addOutput(o);
  auto want = runReference(b.g, b.inputs);
  EXPECT_TRUE(want.isOk()) << want.error().message();
  driver::CompileOptions options;
  options.threads = threads;
  options.target = hostTarget();
  options.isa = widestIsa(options.target);
  auto compiled = driver::compileModel(b.g, *sharedJit(), options);
  EXPECT_TRUE(compiled.isOk()) << compiled.error().message();
  if (!compiled || !want) return {};
  driver::CompiledModel summary;
  summary.kernels = compiled->kernels;
  summary.stats = compiled->stats;
  summary.plan = compiled->plan;
  auto executor = driver::loadInProcess(std::move(*compiled), sharedJit(), threads);
  EXPECT_TRUE(executor.isOk()) << executor.error().message();
  if (!executor) return summary;
  std::vector<const void*> in;
  for (const Tensor& t : b.inputs) in.push_back(t.data());
  std::vector<Tensor> got;
  std::vector<void*> out;
  for (ValueId o : outs) got.emplace_back(b.g.value(o).type.dtype, b.g.value(o).type.shape);
  for (Tensor& t : got) out.push_back(t.data());
  Status s = (*executor)->run(in.data(), out.data());
  EXPECT_TRUE(s.isOk()) << s.error().message();
  for (size_t i = 0; i < outs.size(); ++i)
    EXPECT_LT(relativeL2(got[i], (*want)[i]), 1e-5) << "output " << i;
  return summary;
}

// Compiles `g` for this machine (one thread) and runs it once in process on `in` into `out`;
// `report`, when given, gets the compile's heavy kernels and statistics.
Status compileAndRun(const Graph& g, std::vector<const void*> in, std::vector<void*> out,
                     driver::CompiledModel* report = nullptr) {
  driver::CompileOptions options;
  options.target = hostTarget();
  options.isa = widestIsa(options.target);
  TUNEC_ASSIGN_OR_RETURN(driver::CompiledModel compiled,
                         driver::compileModel(g, *sharedJit(), options));
  if (report) report->kernels = compiled.kernels, report->stats = compiled.stats;
  TUNEC_ASSIGN_OR_RETURN(auto executor, driver::loadInProcess(std::move(compiled), sharedJit(), 1));
  return executor->run(in.data(), out.data());
}

// A measured matmul record of `workload` with `config`, `us` microseconds on `target`.
db::Record matmulRecord(const nlohmann::json& workload, const nlohmann::json& config, double us,
                        const db::TargetInfo& target) {
  db::Record r;
  r.workload = workload;
  r.config = config;
  r.target = target;
  r.templateVersion = kMatmulTemplateVersion;
  r.medianUs = r.minUs = us;
  r.gflops = 1;
  r.repeats = 3;
  r.tunecVersion = "0.1.0";
  r.host = "test";
  r.createdAt = "2026-12-01T00:00:00Z";
  return r;
}

ConvAttrs conv(int64_t k, int64_t stride, int64_t pad, int64_t group = 1) {
  return ConvAttrs{{k, k}, {stride, stride}, {pad, pad, pad, pad}, {1, 1}, group};
}

// LeakyRelu, HardSigmoid, HardSwish, Sigmoid, Swish, Tanh and Exp after a Conv, a depthwise Conv
// and a MatMul join the anchor's epilogue: one generated kernel, no loop kernel for the
// activation.
TEST(CompileModel, ActivationsJoinTheAnchorsEpilogue) {
  struct Case {
    OpKind kind;
    OpAttrs attrs;
    const char* name;
  };
  const Case cases[] = {{OpKind::LeakyRelu, AlphaBetaAttrs{0.1f, 0.f}, "leakyrelu"},
                        {OpKind::HardSigmoid, AlphaBetaAttrs{0.2f, 0.5f}, "hardsigmoid"},
                        {OpKind::HardSwish, NoAttrs{}, "hardswish"},
                        {OpKind::Sigmoid, NoAttrs{}, "sigmoid"},
                        {OpKind::Swish, AlphaBetaAttrs{1.f, 0.f}, "silu"},
                        {OpKind::Swish, AlphaBetaAttrs{1.5f, 0.f}, "swish"},
                        {OpKind::Tanh, NoAttrs{}, "tanh"},
                        {OpKind::Exp, NoAttrs{}, "exp"}};
  for (const Case& c : cases)
    for (int anchor = 0; anchor < 3; ++anchor) {
      Builder b;
      ValueId y;
      if (anchor == 0) {
        ValueId x = b.input({1, 16, 10, 10});
        y = b.op(OpKind::Conv, conv(3, 1, 1), {x, b.constant({24, 16, 3, 3}), b.constant({24})});
      } else if (anchor == 1) {
        ValueId x = b.input({1, 16, 10, 10});
        y = b.op(OpKind::Conv, conv(3, 1, 1, 16), {x, b.constant({16, 1, 3, 3})});
      } else {
        y = b.op(OpKind::MatMul, NoAttrs{}, {b.input({12, 40}), b.constant({40, 24})});
      }
      ValueId z = b.op(c.kind, c.attrs, {y});
      auto m = checkCompiled(b, {z});
      ASSERT_EQ(m.kernels.size(), 1u) << c.name;
      EXPECT_NE(m.kernels[0].label.find(c.name), std::string::npos) << m.kernels[0].label;
      EXPECT_EQ(m.stats.generatedKernels, 1) << c.name;
    }
}

TEST(CompileModel, ConvBiasReluResidualFuseIntoOneKernel) {
  Builder b;
  ValueId x = b.input({1, 16, 12, 12});
  ValueId y = b.op(OpKind::Conv, conv(3, 1, 1), {x, b.constant({16, 16, 3, 3}), b.constant({16})});
  ValueId z = b.op(OpKind::Relu, NoAttrs{}, {b.op(OpKind::Add, NoAttrs{}, {y, x})});
  auto m = checkCompiled(b, {z});
  EXPECT_EQ(m.stats.generatedKernels, 1);
  ASSERT_EQ(m.kernels.size(), 1u);
  EXPECT_NE(m.kernels[0].label.find("bias+add+relu"), std::string::npos) << m.kernels[0].label;
}

// NaN propagates as in the ONNX spec and the reference: through a fused Relu and Clip epilogue
// and through Relu, Clip, Max and Min loop kernels, never masked into a plausible number.
TEST(CompileModel, NanPropagatesThroughReluClipMaxAndMin) {
  Builder b;
  ValueId x = b.input({1, 8, 6, 6});
  ValueId y = b.op(OpKind::Conv, conv(1, 1, 0), {x, b.constant({8, 8, 1, 1}), b.constant({8})});
  ValueId fusedRelu = b.op(OpKind::Relu, NoAttrs{}, {y});
  ValueId y2 = b.op(OpKind::Conv, conv(1, 1, 0), {x, b.constant({8, 8, 1, 1})});
  ValueId fusedClip = b.op(OpKind::Clip, ClipAttrs{0.0, 6.0}, {y2});
  ValueId t = b.op(OpKind::Transpose, TransposeAttrs{{0, 1, 3, 2}}, {x});
  ValueId relu = b.op(OpKind::Relu, NoAttrs{}, {t});
  ValueId clip = b.op(OpKind::Clip, ClipAttrs{-0.5, 0.5}, {t});
  ValueId zeros = b.constant({1, 8, 6, 6});
  ValueId max = b.op(OpKind::Max, NoAttrs{}, {zeros, t});
  ValueId min = b.op(OpKind::Min, NoAttrs{}, {t, zeros});
  std::vector<ValueId> outs = {fusedRelu, fusedClip, relu, clip, max, min};
  for (ValueId o : outs) b.g.addOutput(o);
  float* in = b.inputs[0].dataAs<float>();
  for (int64_t i = 0; i < b.inputs[0].numel(); i += 3) in[i] = std::nanf("");
  auto want = runReference(b.g, b.inputs);
  ASSERT_TRUE(want.isOk()) << want.error().message();
  driver::CompileOptions options;
  options.target = hostTarget();
  options.isa = widestIsa(options.target);
  auto compiled = driver::compileModel(b.g, *sharedJit(), options);
  ASSERT_TRUE(compiled.isOk()) << compiled.error().message();
  auto executor = driver::loadInProcess(std::move(*compiled), sharedJit(), 1);
  ASSERT_TRUE(executor.isOk()) << executor.error().message();
  std::vector<Tensor> got;
  std::vector<void*> out;
  for (ValueId o : outs) got.emplace_back(DType::F32, b.g.value(o).type.shape);
  for (Tensor& g : got) out.push_back(g.data());
  const void* inputs[] = {b.inputs[0].data()};
  ASSERT_TRUE((*executor)->run(inputs, out.data()).isOk());
  for (size_t o = 0; o < outs.size(); ++o) {
    int64_t nans = 0;
    for (int64_t i = 0; i < got[o].numel(); ++i) {
      double w = (*want)[o].getDouble(i), g = got[o].getDouble(i);
      nans += std::isnan(w);
      ASSERT_EQ(std::isnan(g), std::isnan(w)) << "output " << o << " element " << i;
      if (!std::isnan(w)) {
        ASSERT_NEAR(g, w, 1e-5) << "output " << o << " element " << i;
      }
    }
    EXPECT_GT(nans, 0) << "output " << o << ": the reference masked every NaN";
  }
}

// A pre-activation block (BatchNormalization -> Relu -> Conv, as in DenseNet): the batch norm
// that no Conv absorbs compiles as elementwise steps.
TEST(CompileModel, StandaloneBatchNormInAPreActivationBlock) {
  Builder b;
  ValueId x = b.input({1, 8, 10, 10});
  ValueId gamma = b.constant({8}), beta = b.constant({8}), mean = b.constant({8});
  Tensor var(DType::F32, Shape{8});
  for (int64_t c = 0; c < 8; ++c) var.setDouble(c, 0.5 + 0.1 * static_cast<double>(c));
  ValueId vId = b.g.addConstant("var", var);
  ValueId bn = b.op(OpKind::BatchNormalization, NormAttrs{1, 1e-5f}, {x, gamma, beta, mean, vId});
  ValueId r = b.op(OpKind::Relu, NoAttrs{}, {bn});
  ValueId y = b.op(OpKind::Conv, conv(3, 1, 1), {r, b.constant({8, 8, 3, 3})});
  b.g.addOutput(y);
  auto decomposed = passes::decomposeBatchNorm(b.g);
  ASSERT_TRUE(decomposed.isOk()) << decomposed.error().message();
  Builder c;
  c.g = std::move(*decomposed);
  c.inputs = b.inputs;
  for (const Node& n : c.g.nodes()) EXPECT_NE(n.kind, OpKind::BatchNormalization);
  auto m = checkCompiled(c, {c.g.outputs()[0]});
  EXPECT_EQ(m.stats.generatedKernels, 1);
}

TEST(CompileModel, StridedConvChannelBiasAndClipAsEpilogue) {
  Builder b;
  ValueId x = b.input({2, 8, 15, 13});
  ValueId y = b.op(OpKind::Conv, conv(3, 2, 1), {x, b.constant({24, 8, 3, 3})});
  y = b.op(OpKind::Add, NoAttrs{}, {y, b.constant({1, 24, 1, 1})});
  y = b.op(OpKind::Clip, ClipAttrs{0.0, 0.5}, {y});
  auto m = checkCompiled(b, {y}, 2);
  EXPECT_EQ(m.stats.generatedKernels, 1);
}

TEST(CompileModel, DepthwiseThenPointwiseWithPooling) {
  Builder b;
  ValueId x = b.input({1, 32, 14, 14});
  ValueId y =
      b.op(OpKind::Conv, conv(3, 1, 1, 32), {x, b.constant({32, 1, 3, 3}), b.constant({32})});
  y = b.op(OpKind::Clip, ClipAttrs{0.0, 6.0}, {y});
  y = b.op(OpKind::Conv, conv(1, 1, 0), {y, b.constant({16, 32, 1, 1})});
  ValueId mp =
      b.op(OpKind::MaxPool, PoolAttrs{{3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, false, false, 2}, {y});
  ValueId ap = b.op(OpKind::AveragePool,
                    PoolAttrs{{2, 2}, {2, 2}, {0, 0, 0, 0}, {1, 1}, false, true, 2}, {y});
  ValueId gp = b.op(OpKind::GlobalAveragePool, NoAttrs{}, {y});
  auto m = checkCompiled(b, {mp, ap, gp});
  EXPECT_EQ(m.stats.generatedKernels, 2);
}

TEST(CompileModel, GemmVariants) {
  for (bool transA : {false, true})
    for (bool transB : {false, true}) {
      Builder b;
      ValueId a = b.input(transA ? Shape{37, 5} : Shape{5, 37});
      ValueId w = b.constant(transB ? Shape{19, 37} : Shape{37, 19});
      ValueId y =
          b.op(OpKind::Gemm, GemmAttrs{0.5f, 2.f, transA, transB}, {a, w, b.constant({19})});
      ValueId y2 =
          b.op(OpKind::Gemm, GemmAttrs{1.f, 1.f, transA, transB}, {a, w, b.constant({5, 1})});
      checkCompiled(b, {y, y2});
    }
}

TEST(CompileModel, BatchedMatmulOfComputedOperandsAndFoldedBatch) {
  Builder b;
  ValueId q = b.input({2, 3, 17, 8});
  ValueId k = b.input({2, 3, 8, 9});
  ValueId s = b.op(OpKind::MatMul, NoAttrs{}, {q, k});
  s = b.op(OpKind::Div, NoAttrs{}, {s, b.constant({1})}); // attention's 1 / sqrt(d)
  ValueId p = b.op(OpKind::Softmax, SoftmaxAttrs{-1, false}, {s});
  ValueId x = b.input({2, 5, 24});
  ValueId y = b.op(OpKind::MatMul, NoAttrs{}, {x, b.constant({24, 40})});
  y = b.op(OpKind::Add, NoAttrs{}, {b.constant({40}), y});
  y = b.op(OpKind::Gelu, GeluAttrs{false}, {y});
  auto m = checkCompiled(b, {p, y}, 2);
  bool gelu = false, scale = false;
  for (const auto& kernel : m.kernels) {
    gelu |= kernel.label.find("bias+gelu") != std::string::npos;
    scale |= kernel.label.find("scale") != std::string::npos;
  }
  EXPECT_TRUE(gelu) << "the GELU after the bias joins the matmul's epilogue";
  EXPECT_TRUE(scale) << "the division by a scalar joins the batched matmul's epilogue";
}

// Multi-head attention as exported from PyTorch: Q, K and V projections (with biases) split
// into heads by Reshape + Transpose, K transposed for Q K^T, a scale, the softmax, P V, the
// context merged back by Transpose + Reshape, and the output projection; returns its output.
ValueId attentionBlock(Builder& b, int64_t tokens, int64_t heads, int64_t dim) {
  const int64_t width = heads * dim;
  ValueId x = b.input({1, tokens, width});
  auto project = [&](std::vector<int64_t> perm) {
    ValueId p = b.op(OpKind::MatMul, NoAttrs{}, {x, b.constant({width, width})});
    p = b.op(OpKind::Add, NoAttrs{}, {p, b.constant({width})});
    p = b.op(OpKind::Reshape, ReshapeAttrs{{1, tokens, heads, dim}}, {p});
    return b.op(OpKind::Transpose, TransposeAttrs{std::move(perm)}, {p});
  };
  ValueId q = project({0, 2, 1, 3}), k = project({0, 2, 3, 1}), v = project({0, 2, 1, 3});
  ValueId s = b.op(OpKind::MatMul, NoAttrs{}, {q, k});
  s = b.op(OpKind::Mul, NoAttrs{}, {s, b.constant({1})});
  ValueId p = b.op(OpKind::Softmax, SoftmaxAttrs{-1, false}, {s});
  ValueId c = b.op(OpKind::MatMul, NoAttrs{}, {p, v});
  c = b.op(OpKind::Transpose, TransposeAttrs{{0, 2, 1, 3}}, {c});
  c = b.op(OpKind::Reshape, ReshapeAttrs{{1, tokens, width}}, {c});
  return b.op(OpKind::MatMul, NoAttrs{}, {c, b.constant({width, width})});
}

// attentionBlock as the model's output, its Q, K and V projections merged into one MatMul
// (passes::mergeSiblingMatmuls), as the pass pipeline leaves BERT's attention.
testing::AssertionResult mergedAttentionBlock(Builder& b, int64_t tokens, int64_t heads,
                                              int64_t dim) {
  b.g.addOutput(attentionBlock(b, tokens, heads, dim));
  auto merged = passes::mergeSiblingMatmuls(b.g);
  if (!merged) return testing::AssertionFailure() << merged.error().message();
  b.g = std::move(*merged);
  return testing::AssertionSuccess();
}

// All four Transposes of the attention block are read or written in place by the matmuls
// (strided operands), and Q K^T, the scale, the softmax and P V are one fused attention kernel.
TEST(CompileModel, AttentionHeadTransposesAreReadInPlaceByTheMatmuls) {
  for (int threads : {1, 2}) {
    Builder b;
    ValueId y = attentionBlock(b, 19, 3, 8);
    auto m = checkCompiled(b, {y}, threads);
    EXPECT_EQ(m.stats.foldedTransposes, 4) << threads << " threads";
    EXPECT_EQ(m.stats.loopKernels, 0) << "the softmax is inside the attention kernel";
    EXPECT_EQ(m.stats.generatedKernels, 5) << "Q, K, V, attention, the output projection";
    int strided = 0;
    for (const auto& kernel : m.kernels)
      strided += kernel.label.find("Attention") != std::string::npos;
    EXPECT_EQ(strided, 2) << "Q K^T and P V, tuned as matmuls, in the attention kernel";
  }
}

// A Transpose whose output has another use, or whose permutation leaves no unit stride in a
// matrix, is copied as before.
TEST(CompileModel, TransposesAMatmulCannotReadInPlaceAreCopied) {
  Builder b;
  ValueId x = b.input({2, 5, 3, 4});
  ValueId t = b.op(OpKind::Transpose, TransposeAttrs{{0, 2, 1, 3}}, {x}); // [2, 3, 5, 4]
  ValueId s = b.op(OpKind::MatMul, NoAttrs{}, {t, b.input({2, 3, 4, 6})});
  ValueId e = b.op(OpKind::Relu, NoAttrs{}, {t}); // a second use of t
  ValueId u =
      b.op(OpKind::Transpose, TransposeAttrs{{3, 1, 0, 2}}, {x}); // [4, 5, 2, 3]: no unit stride
  ValueId z = b.op(OpKind::MatMul, NoAttrs{}, {u, b.input({4, 5, 3, 2})});
  auto m = checkCompiled(b, {s, e, z});
  EXPECT_EQ(m.stats.foldedTransposes, 0);
}

// A Transpose between two matmuls is folded once: the first writes through it, the second
// reads what was written.
TEST(CompileModel, ATransposeBetweenTwoMatmulsIsFoldedOnce) {
  Builder b;
  ValueId s = b.op(OpKind::MatMul, NoAttrs{}, {b.input({1, 3, 5, 4}), b.input({1, 3, 4, 4})});
  ValueId t = b.op(OpKind::Transpose, TransposeAttrs{{0, 2, 1, 3}}, {s}); // [1, 5, 3, 4]
  ValueId z = b.op(OpKind::MatMul, NoAttrs{}, {t, b.input({1, 5, 4, 6})});
  auto m = checkCompiled(b, {z});
  EXPECT_EQ(m.stats.foldedTransposes, 1);
  // With two leading batches the heads of C are not one run of memory: copied.
  Builder b2;
  s = b2.op(OpKind::MatMul, NoAttrs{}, {b2.input({2, 3, 5, 4}), b2.input({2, 3, 4, 4})});
  t = b2.op(OpKind::Transpose, TransposeAttrs{{0, 2, 1, 3}}, {s});
  z = b2.op(OpKind::MatMul, NoAttrs{}, {t, b2.input({2, 5, 4, 6})});
  EXPECT_EQ(checkCompiled(b2, {z}).stats.foldedTransposes, 0);
}

TEST(CompileModel, GeluJoinsTheEpilogueOfConvAndDepthwise) {
  Builder b;
  ValueId x = b.input({1, 16, 9, 9});
  // 144 products per output: values of about +-4, across both of GELU's branches.
  ValueId y = b.op(OpKind::Conv, conv(3, 1, 1), {x, b.constant({16, 16, 3, 3}), b.constant({16})});
  y = b.op(OpKind::Gelu, GeluAttrs{false}, {y});
  ValueId d = b.op(OpKind::Conv, conv(3, 1, 1, 16), {y, b.constant({16, 1, 3, 3})});
  d = b.op(OpKind::Gelu, GeluAttrs{false}, {d});
  auto m = checkCompiled(b, {d});
  EXPECT_EQ(m.stats.generatedKernels, 2);
  size_t gelus = 0;
  for (const auto& k : m.kernels) gelus += k.label.find("gelu") != std::string::npos;
  EXPECT_EQ(gelus, 2u);
}

TEST(CompileModel, ElementwiseChainsWithBroadcastsOnNhwcActivations) {
  Builder b;
  ValueId x = b.input({1, 8, 6, 7});
  ValueId y = b.op(OpKind::Conv, conv(1, 1, 0), {x, b.constant({8, 8, 1, 1})});
  // A chain the epilogue does not take: Sigmoid, Mul by a per-channel constant, Tanh, Sub of a
  // row broadcast, Exp and Erf.
  ValueId z = b.op(OpKind::Sigmoid, NoAttrs{}, {y});
  z = b.op(OpKind::Mul, NoAttrs{}, {z, b.constant({8, 1, 1})});
  z = b.op(OpKind::Tanh, NoAttrs{}, {z});
  z = b.op(OpKind::Sub, NoAttrs{}, {z, b.constant({7})});
  z = b.op(OpKind::Exp, NoAttrs{}, {z});
  z = b.op(OpKind::Erf, NoAttrs{}, {z});
  auto m = checkCompiled(b, {z});
  EXPECT_EQ(m.stats.loopKernels, 2) << "one reorder of the input and one fused chain";
}

// A chain longer than a loop-kernel step may hold (rt::kMaxEwInstructions) or with more
// external operands (rt::kMaxEwInputs) runs as several steps (issue 50: 65 chained ops compiled
// into a model.so the runtime refused as corrupt); a tensor above the steps' rank is refused at
// compile time, naming the limit.
TEST(CompileModel, LongElementwiseChainsSplitAndHighRanksAreRefused) {
  {
    Builder b;
    ValueId z = b.input({4, 33});
    for (int i = 0; i < 3 * rt::kMaxEwInstructions + 5; ++i)
      z = b.op(i % 3 == 0   ? OpKind::Tanh
               : i % 3 == 1 ? OpKind::Sigmoid
                            : OpKind::Neg,
               NoAttrs{}, {z});
    auto m = checkCompiled(b, {z});
    EXPECT_EQ(m.stats.loopKernels, 4) << "ceil(197 / 64) chains";
  }
  {
    Builder b;
    ValueId z = b.input({4, 33});
    for (int i = 0; i < 2 * rt::kMaxEwInputs + 3; ++i)
      z = b.op(OpKind::Add, NoAttrs{}, {z, b.constant({33})});
    auto m = checkCompiled(b, {z});
    EXPECT_EQ(m.stats.loopKernels, 3) << "19 constants, at most 8 operands a chain";
  }
  Builder b;
  ValueId x = b.input({1, 2, 1, 2, 1, 2, 1, 2, 3});
  b.g.addOutput(b.op(OpKind::Transpose, TransposeAttrs{{8, 7, 6, 5, 4, 3, 2, 1, 0}}, {x}));
  driver::CompileOptions options;
  options.target = hostTarget();
  options.isa = widestIsa(options.target);
  auto compiled = driver::compileModel(b.g, *sharedJit(), options);
  ASSERT_FALSE(compiled.isOk());
  EXPECT_NE(compiled.error().message().find("rank 9"), std::string::npos)
      << compiled.error().message();
  EXPECT_NE(compiled.error().message().find("up to rank 8"), std::string::npos)
      << compiled.error().message();
}

// With fewer than 8 channels NHWC steps iterate along W innermost (an image's input reorder,
// or a chain on a 3-channel activation): the same results with per-channel and row broadcasts.
TEST(CompileModel, NhwcStepsWithFewChannels) {
  for (int64_t channels : {3, 7, 8}) {
    Builder b;
    ValueId x = b.input({2, channels, 9, 11});
    ValueId y = b.op(OpKind::Conv, conv(3, 1, 1), {x, b.constant({channels, channels, 3, 3})});
    ValueId z = b.op(OpKind::Sigmoid, NoAttrs{}, {y});
    z = b.op(OpKind::Mul, NoAttrs{}, {z, b.constant({channels, 1, 1})});
    z = b.op(OpKind::Sub, NoAttrs{}, {z, b.constant({11})});
    checkCompiled(b, {z, y});
  }
}

TEST(CompileModel, DataMovement) {
  Builder b;
  ValueId x = b.input({2, 3, 4, 5});
  ValueId t = b.op(OpKind::Transpose, TransposeAttrs{{0, 2, 3, 1}}, {x});
  ValueId r = b.op(OpKind::Reshape, ReshapeAttrs{{2, 60}}, {t});
  ValueId c = b.op(OpKind::Concat, AxisAttrs{1}, {r, b.input({2, 7})});
  ValueId s = b.op(OpKind::Slice, SliceAttrs{{0, 1}, {1, 2}, {2, 30}, {}}, {c});
  ValueId e = b.op(OpKind::Expand, ReshapeAttrs{{3, 2, 30}}, {s});
  ValueId table = b.constant({11, 6});
  ValueId ids = b.input({2, 4}, DType::I64);
  ValueId gathered = b.op(OpKind::Gather, AxisAttrs{0}, {table, ids});
  ValueId ln = b.op(OpKind::LayerNormalization, NormAttrs{-1, 1e-5f},
                    {gathered, b.constant({6}), b.constant({6})});
  checkCompiled(b, {e, ln, r});
}

TEST(CompileModel, ReductionsLogSoftmaxAndVariadicOps) {
  Builder b;
  ValueId x = b.input({3, 4, 5});
  ValueId r1 = b.op(OpKind::ReduceMean, ReduceAttrs{{0, 2}, true}, {x});
  ValueId r2 = b.op(OpKind::ReduceLogSumExp, ReduceAttrs{{-1}, false}, {x});
  ValueId ls = b.op(OpKind::LogSoftmax, SoftmaxAttrs{1, false}, {x});
  ValueId m = b.op(OpKind::Mean, NoAttrs{}, {x, b.constant({5}), b.input({4, 1})});
  ValueId p = b.op(OpKind::PRelu, NoAttrs{}, {m, b.constant({1, 5})});
  checkCompiled(b, {r1, r2, ls, p});
}

TEST(CompileModel, TypedOpsOnIntegersAndMasks) {
  Builder b;
  ValueId ids = b.input({2, 5}, DType::I64);
  ValueId three = b.g.addConstant("three", [] {
    Tensor t(DType::I64, {1});
    t.setInt(0, 3);
    return t;
  }());
  ValueId m = b.op(OpKind::Mod, ModAttrs{false}, {ids, three});
  ValueId mask = b.op(OpKind::Less, NoAttrs{}, {m, three});
  ValueId x = b.input({2, 5});
  ValueId w =
      b.op(OpKind::Where, NoAttrs{}, {b.op(OpKind::Not, NoAttrs{}, {mask}), x, b.constant({5})});
  ValueId c = b.op(OpKind::Cast, CastAttrs{DType::F32}, {m});
  ValueId t = b.op(OpKind::Transpose, TransposeAttrs{{1, 0}}, {ids});
  checkCompiled(b, {w, c, t, mask});
}

// MatMulInteger's and ConvInteger's exact form, a MatMul and a Conv of i32 differences of 8-bit
// codes, runs on the runtime's integer steps and equals the reference bit for bit, and both
// equal the sums in int64 wrapped to int32: K = 70000 terms of up to 255 x 255 pass 2^24
// (where f32 drops units) and 2^31 (where int32 wraps); a strided, padded, grouped convolution
// of 1024-channel windows.
TEST(CompileModel, IntegerMatmulAndConvolutionAreExactAndWrap) {
  Builder b;
  std::uniform_int_distribution<int64_t> diff(-255, 255);
  auto ints = [&](const Shape& s, bool extreme) {
    Tensor t(DType::I32, s);
    for (int64_t i = 0; i < t.numel(); ++i) t.setInt(i, extreme ? 255 : diff(b.rng));
    return t;
  };
  const int64_t m = 3, k = 70000, n = 4;
  b.inputs.push_back(ints({m, k}, false));
  for (int64_t p = 0; p < k; ++p) b.inputs.back().setInt(p, 255); // row 0 wraps at column 0
  ValueId a = b.g.addInput("a", {DType::I32, {m, k}, {}});
  Tensor bw = ints({k, n}, false);
  for (int64_t p = 0; p < k; ++p) bw.setInt(p * n, 255);
  ValueId mm = b.op(OpKind::MatMul, NoAttrs{}, {a, b.g.addConstant("b", bw)});
  b.inputs.push_back(ints({1, 1024, 5, 5}, false));
  ValueId x = b.g.addInput("x", {DType::I32, {1, 1024, 5, 5}, {}});
  ValueId conv = b.op(OpKind::Conv, ConvAttrs{{3, 3}, {2, 1}, {1, 0, 1, 2}, {1, 1}, 2},
                      {x, b.g.addConstant("w", ints({6, 512, 3, 3}, false))});
  for (ValueId v : {mm, conv}) b.g.addOutput(v);
  auto want = runReference(b.g, b.inputs);
  ASSERT_TRUE(want.isOk()) << want.error().message();
  // The reference against int64 sums wrapped to int32.
  for (int64_t r = 0; r < m; ++r)
    for (int64_t j = 0; j < n; ++j) {
      int64_t sum = 0;
      for (int64_t p = 0; p < k; ++p) sum += b.inputs[0].getInt(r * k + p) * bw.getInt(p * n + j);
      EXPECT_EQ((*want)[0].getInt(r * n + j), static_cast<int32_t>(static_cast<uint32_t>(sum)))
          << r << "," << j;
    }
  EXPECT_NE((*want)[0].getInt(0), int64_t{255} * 255 * k); // it wrapped
  std::vector<Tensor> got = {Tensor(DType::I32, (*want)[0].shape()),
                             Tensor(DType::I32, (*want)[1].shape())};
  driver::CompiledModel report;
  Status s = compileAndRun(b.g, {b.inputs[0].data(), b.inputs[1].data()},
                           {got[0].data(), got[1].data()}, &report);
  ASSERT_TRUE(s.isOk()) << s.error().message();
  for (size_t o = 0; o < got.size(); ++o) {
    int wrong = 0;
    for (int64_t i = 0; i < got[o].numel(); ++i) wrong += got[o].getInt(i) != (*want)[o].getInt(i);
    EXPECT_EQ(wrong, 0) << "output " << o;
  }
  EXPECT_TRUE(report.kernels.empty()) << "an integer product ran on a float kernel";
}

// The typed steps' fast paths for integer codes (runtime/typed_kernels.cpp integerFast): u8 and
// s8 cast to i32, and an i32 tensor plus, minus and times an i32 scalar, wrapping as the element
// loop does; a per-row operand takes the element loop. Bit-equal to the reference.
TEST(CompileModel, IntegerCodesCastAndShiftedAsTheElementLoopDoes) {
  Graph g;
  std::mt19937 rng(17);
  auto input = [&](const std::string& name, DType t, const Shape& s) {
    return g.addInput(name, {t, s, {}});
  };
  auto node = [&](OpKind kind, OpAttrs attrs, std::vector<ValueId> in) {
    const std::string name = "n" + std::to_string(g.nodes().size());
    auto id = g.addNode(name, kind, std::move(attrs), std::move(in), {name});
    EXPECT_TRUE(id.isOk()) << id.error().message();
    return g.node(*id).outputs[0];
  };
  ValueId u = input("u", DType::U8, {3, 37}), s = input("s", DType::I8, {3, 37});
  ValueId big = input("big", DType::I32, {3, 37});
  Tensor k(DType::I32, Shape{}), rows(DType::I32, Shape{3, 1});
  k.setInt(0, 2000000007);
  for (int64_t r = 0; r < 3; ++r) rows.setInt(r, 100 * r - 7);
  ValueId kv = g.addConstant("k", k), rv = g.addConstant("rows", rows);
  ValueId ui = node(OpKind::Cast, CastAttrs{DType::I32}, {u});
  ValueId si = node(OpKind::Cast, CastAttrs{DType::I32}, {s});
  for (ValueId v :
       {ui, si, node(OpKind::Sub, NoAttrs{}, {ui, kv}), node(OpKind::Add, NoAttrs{}, {big, kv}),
        node(OpKind::Mul, NoAttrs{}, {big, kv}), node(OpKind::Sub, NoAttrs{}, {si, rv})})
    g.addOutput(v);
  std::vector<Tensor> in = {Tensor(DType::U8, {3, 37}), Tensor(DType::I8, {3, 37}),
                            Tensor(DType::I32, {3, 37})};
  for (int64_t i = 0; i < 111; ++i) {
    in[0].setInt(i, static_cast<int64_t>(rng() % 256));
    in[1].setInt(i, static_cast<int64_t>(rng() % 256) - 128);
    in[2].setInt(i, static_cast<int64_t>(static_cast<int32_t>(rng())));
  }
  auto want = runReference(g, in);
  ASSERT_TRUE(want.isOk()) << want.error().message();
  std::vector<Tensor> got;
  std::vector<void*> out;
  for (const Tensor& t : *want) got.emplace_back(t.dtype(), t.shape());
  for (Tensor& t : got) out.push_back(t.data());
  Status ran = compileAndRun(g, {in[0].data(), in[1].data(), in[2].data()}, out);
  ASSERT_TRUE(ran.isOk()) << ran.error().message();
  for (size_t o = 0; o < got.size(); ++o) {
    int wrong = 0;
    for (int64_t i = 0; i < got[o].numel(); ++i)
      wrong += got[o].getInt(i) != static_cast<int32_t>((*want)[o].getInt(i));
    EXPECT_EQ(wrong, 0) << "output " << o;
  }
}

TEST(CompileModel, TilePadDepthToSpaceAndArgMax) {
  Builder b;
  ValueId x = b.input({1, 8, 3, 4});
  ValueId t = b.op(OpKind::Tile, TileAttrs{{1, 2, 1, 3}}, {x});
  ValueId p = b.op(OpKind::Pad, PadAttrs{PadMode::Constant, {0, 1, -1, 2, 0, 0, 1, 1}, 0.5}, {x});
  ValueId d = b.op(OpKind::DepthToSpace, DepthToSpaceAttrs{2, false}, {x});
  ValueId c = b.op(OpKind::DepthToSpace, DepthToSpaceAttrs{2, true}, {x});
  ValueId s = b.op(OpKind::SpaceToDepth, DepthToSpaceAttrs{2, false}, {d});
  ValueId a = b.op(OpKind::ArgMax, ArgReduceAttrs{1, false, false}, {x});
  ValueId m = b.op(OpKind::ArgMin, ArgReduceAttrs{-1, true, true}, {x});
  ValueId h = b.op(OpKind::Hardmax, SoftmaxAttrs{1, false}, {x});
  Tensor picks(DType::I64, {1, 2, 3, 4});
  for (int64_t i = 0; i < picks.numel(); ++i) picks.setInt(i, (i * 5) % 8 - 2); // -2..5, wraps
  ValueId ge = b.op(OpKind::GatherElements, AxisAttrs{1}, {x, b.g.addConstant("picks", picks)});
  checkCompiled(b, {t, p, d, c, s, a, m, h, ge});
}

// Resize in each mode and coordinate transform, enlarging and shrinking, of plain inputs and of
// a convolution's NHWC output (a spatial axis's inner run is then its channels), against the
// reference; nearest also of u8 values (copies), on two threads.
TEST(CompileModel, ResizeInEveryModeAndLayout) {
  auto resize = [](ResizeMode mode, ResizeCoordinates c, std::vector<int64_t> sizes,
                   std::vector<double> scales) {
    ResizeAttrs a;
    a.mode = mode, a.coordinates = c, a.sizes = std::move(sizes), a.scales = std::move(scales);
    return a;
  };
  Builder b;
  ValueId x = b.input({2, 3, 7, 5});
  ValueId c = b.op(OpKind::Conv, conv(3, 1, 1), {x, b.constant({8, 3, 3, 3})}); // NHWC output
  std::vector<ValueId> outs;
  using C = ResizeCoordinates;
  outs.push_back(b.op(OpKind::Resize,
                      resize(ResizeMode::Linear, C::HalfPixel, {2, 3, 14, 10}, {1, 1, 2, 2}), {x}));
  outs.push_back(
      b.op(OpKind::Resize,
           resize(ResizeMode::Linear, C::PytorchHalfPixel, {2, 8, 3, 2}, {1, 1, 3.0 / 7, 2.0 / 5}),
           {c}));
  outs.push_back(b.op(
      OpKind::Resize,
      resize(ResizeMode::Linear, C::AlignCorners, {2, 8, 16, 11}, {1, 1, 16.0 / 7, 2.2}), {c}));
  ResizeAttrs cubic = resize(ResizeMode::Cubic, C::Asymmetric, {2, 3, 9, 13}, {1, 1, 9.0 / 7, 2.6});
  outs.push_back(b.op(OpKind::Resize, cubic, {x}));
  cubic.coordinates = C::HalfPixel, cubic.cubicA = -0.5, cubic.excludeOutside = true;
  outs.push_back(b.op(OpKind::Resize, cubic, {c}));
  for (NearestRounding r :
       {NearestRounding::RoundPreferFloor, NearestRounding::RoundPreferCeil, NearestRounding::Floor,
        NearestRounding::Ceil, NearestRounding::Simple}) {
    ResizeAttrs n =
        resize(ResizeMode::Nearest, C::TfHalfPixelForNn, {2, 3, 11, 3}, {1, 1, 1.6, 0.6});
    n.nearest = r;
    outs.push_back(b.op(OpKind::Resize, n, {x}));
    n.coordinates = C::HalfPixelSymmetric, n.sizes = {2, 8, 4, 12}, n.scales = {1, 1, 0.6, 2.5};
    outs.push_back(b.op(OpKind::Resize, n, {c}));
  }
  // Only the channels resampled (an axis of the NHWC layout's innermost run).
  outs.push_back(b.op(OpKind::Resize,
                      resize(ResizeMode::Linear, C::HalfPixel, {2, 5, 7, 5}, {1, 5.0 / 8, 1, 1}),
                      {c}));
  checkCompiled(b, outs, 2);

  // Nearest copies elements of any type: u8 codes bit for bit.
  Graph g;
  ValueId u = g.addInput("u", {DType::U8, Shape{1, 2, 3, 4}, {}});
  auto node = g.addNode("up", OpKind::Resize,
                        resize(ResizeMode::Nearest, C::Asymmetric, {1, 2, 6, 8}, {1, 1, 2, 2}), {u},
                        {"up"});
  ASSERT_TRUE(node.isOk()) << node.error().message();
  g.addOutput(g.node(*node).outputs[0]);
  Tensor in(DType::U8, Shape{1, 2, 3, 4});
  for (int64_t i = 0; i < in.numel(); ++i) in.setInt(i, (i * 37 + 11) % 256);
  Tensor got(DType::U8, Shape{1, 2, 6, 8});
  Status ran = compileAndRun(g, {in.data()}, {got.data()});
  ASSERT_TRUE(ran.isOk()) << ran.error().message();
  for (int64_t i = 0; i < got.numel(); ++i) {
    const int64_t w = i % 8, h = i / 8 % 6, ch = i / 48;
    ASSERT_EQ(got.getInt(i), in.getInt((ch * 3 + h / 2) * 4 + w / 2)) << "element " << i;
  }
}

// A reduction of every element reads a convolution's NHWC output where it lies (the range of a
// dynamic quantization): the same max, min and sum as the reference.
TEST(CompileModel, AFullReductionReadsAnNhwcActivationInPlace) {
  Builder b;
  ValueId x = b.input({1, 3, 9, 7});
  ValueId c = b.op(OpKind::Conv, conv(3, 1, 1), {x, b.constant({16, 3, 3, 3})}); // NHWC output
  std::vector<int64_t> all = {0, 1, 2, 3};
  ValueId mx = b.op(OpKind::ReduceMax, ReduceAttrs{all, false}, {c});
  ValueId mn = b.op(OpKind::ReduceMin, ReduceAttrs{all, true}, {c});
  ValueId sum = b.op(OpKind::ReduceSum, ReduceAttrs{all, false}, {c});
  ValueId relu = b.op(OpKind::Relu, NoAttrs{}, {c}); // read NHWC by the next conv
  ValueId next = b.op(OpKind::Conv, conv(3, 1, 1), {relu, b.constant({8, 16, 3, 3})});
  driver::CompiledModel m = checkCompiled(b, {mx, mn, sum, next});
  EXPECT_EQ(m.stats.reorders, 0) << "a full reduction reordered its input";
}

// Reflect and edge padding (borders copied within the output, axis by axis, backwards or with
// stride 0) and InstanceNormalization (a normalization step, then scale and bias per channel).
TEST(CompileModel, BorderPaddingAndInstanceNorm) {
  Builder b;
  ValueId x = b.input({2, 3, 5, 4});
  ValueId r = b.op(OpKind::Pad, PadAttrs{PadMode::Reflect, {0, 1, 2, 3, 1, 0, 4, 1}, 0.0}, {x});
  ValueId e = b.op(OpKind::Pad, PadAttrs{PadMode::Edge, {1, 0, 3, 0, 0, 2, 0, 5}, 0.0}, {x});
  ValueId i = b.op(OpKind::InstanceNormalization, NormAttrs{1, 1e-3f},
                   {x, b.constant({3}), b.constant({3})});
  ValueId c = b.op(OpKind::Conv, conv(3, 1, 1), {x, b.constant({8, 3, 3, 3})}); // NHWC output
  ValueId ic = b.op(OpKind::InstanceNormalization, NormAttrs{1, 1e-5f},
                    {c, b.input({8}), b.constant({8})}); // a computed scale
  ValueId ie = b.op(OpKind::Pad, PadAttrs{PadMode::Edge, {0, 0, 0, 1, 0, 0, 0, 0}, 0.0},
                    {b.input({1, 1, 1, 1})});
  checkCompiled(b, {r, e, i, ic, ie}, 2);
}

// A model whose constants exceed the L3 reads every weight from memory: the workloads of its
// kernels with constant weights are marked cold_weights (the tuner times them with their
// weights evicted), a small model's are not, and a database tuned with warm keys still supplies
// the config of a cold workload.
TEST(CompileModel, WeightsBeyondTheL3MarkTheirWorkloadsCold) {
  int64_t k = hostTarget().l3 / (4 * 1024) + 16; // a k x 1024 weight, just above the L3
  Builder big;
  ValueId y = big.op(OpKind::MatMul, NoAttrs{}, {big.input({3, k}), big.constant({k, 1024})});
  driver::CompiledModel cold = checkCompiled(big, {y});
  ASSERT_EQ(cold.kernels.size(), 1u);
  EXPECT_EQ(toJson(cold.kernels[0].workload).value("cold_weights", false), true);

  Builder small;
  ValueId z = small.op(OpKind::MatMul, NoAttrs{}, {small.input({3, 64}), small.constant({64, 32})});
  driver::CompiledModel warm = checkCompiled(small, {z});
  ASSERT_EQ(warm.kernels.size(), 1u);
  EXPECT_FALSE(toJson(warm.kernels[0].workload).contains("cold_weights"));

  std::string path = testing::TempDir() + "tunec_cold_fallback.db";
  std::filesystem::remove(path);
  {
    auto database = db::TuningDatabase::open(path);
    ASSERT_TRUE(database.isOk()) << database.error().message();
    nlohmann::json warmKey = toJson(cold.kernels[0].workload);
    warmKey.erase("cold_weights");
    db::Record r = matmulRecord(warmKey, toJson(cold.kernels[0].config), 100,
                                db::TargetInfo::fromTarget(hostTarget()));
    ASSERT_TRUE(database->insert({r}).isOk());
    driver::CompileOptions options;
    options.target = hostTarget();
    options.isa = widestIsa(options.target);
    options.database = &*database;
    auto tuned = driver::compileModel(big.g, *sharedJit(), options);
    ASSERT_TRUE(tuned.isOk()) << tuned.error().message();
    EXPECT_TRUE(tuned->kernels[0].tuned);
  }
  std::filesystem::remove(path);
}

// The fastest record is invalid (an edited row whose tile no longer fits the registers): the
// next valid record is used, not the default; records of another target are reported.
TEST(CompileModel, AnInvalidBestRecordGivesWayToTheNextValidOne) {
  Builder b;
  ValueId y = b.op(OpKind::MatMul, NoAttrs{}, {b.input({64, 96}), b.constant({96, 128})});
  driver::CompiledModel plain = checkCompiled(b, {y});
  ASSERT_EQ(plain.kernels.size(), 1u);
  nlohmann::json good = toJson(plain.kernels[0].config);
  good["mc"] = good["mr"].get<int>() * 4; // a valid config other than the default
  nlohmann::json bad = good;
  bad["mr"] = 64;
  std::string path = testing::TempDir() + "tunec_next_valid.db";
  std::filesystem::remove(path);
  {
    auto database = db::TuningDatabase::open(path);
    ASSERT_TRUE(database.isOk()) << database.error().message();
    auto row = [&](const nlohmann::json& config, double us, const db::TargetInfo& target) {
      return matmulRecord(toJson(plain.kernels[0].workload), config, us, target);
    };
    db::TargetInfo here = db::TargetInfo::fromTarget(hostTarget()), other = here;
    other.model = "Another CPU";
    ASSERT_TRUE(database->insert({row(bad, 1, here), row(good, 2, here)}).isOk());
    driver::CompileOptions options;
    options.target = hostTarget();
    options.isa = widestIsa(options.target);
    options.database = &*database;
    auto tuned = driver::compileModel(b.g, *sharedJit(), options);
    ASSERT_TRUE(tuned.isOk()) << tuned.error().message();
    EXPECT_TRUE(tuned->kernels[0].tuned);
    EXPECT_EQ(toJson(tuned->kernels[0].config), good);
    EXPECT_TRUE(tuned->kernels[0].otherTargets.empty());

    std::string otherPath = path + ".other";
    std::filesystem::remove(otherPath);
    auto elsewhere = db::TuningDatabase::open(otherPath);
    ASSERT_TRUE(elsewhere.isOk());
    ASSERT_TRUE(elsewhere->insert({row(good, 2, other)}).isOk());
    options.database = &*elsewhere;
    auto untuned = driver::compileModel(b.g, *sharedJit(), options);
    ASSERT_TRUE(untuned.isOk()) << untuned.error().message();
    EXPECT_FALSE(untuned->kernels[0].tuned);
    EXPECT_EQ(untuned->kernels[0].otherTargets, std::set<std::string>{other.key()});
    EXPECT_NE(driver::compileReport(*untuned).find("records in the database for another target"),
              std::string::npos);
    std::filesystem::remove(otherPath);
  }
  std::filesystem::remove(path);
}

TEST(CompileModel, UnsupportedOpsAreListedByNode) {
  Builder b;
  ValueId x = b.input({1, 4, 2, 2});
  ValueId y = b.op(OpKind::Conv, conv(1, 1, 0), {x, b.input({4, 4, 1, 1})}); // computed weights
  ValueId z = b.op(OpKind::Pad, PadAttrs{PadMode::Reflect, {0, 0, -1, 1, 0, 0, 1, 1}, 0.0},
                   {b.op(OpKind::Sin, NoAttrs{}, {y})});
  b.g.addOutput(z);
  driver::CompileOptions options;
  options.target = hostTarget();
  options.isa = widestIsa(options.target);
  auto compiled = driver::compileModel(b.g, *sharedJit(), options);
  ASSERT_FALSE(compiled.isOk());
  const std::string& msg = compiled.error().message();
  EXPECT_NE(msg.find("2 nodes"), std::string::npos) << msg;
  EXPECT_NE(msg.find("(Conv): the weights must be constant"), std::string::npos) << msg;
  EXPECT_NE(msg.find("(Pad): negative pads (cropping) are compiled only in constant mode"),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("--reference"), std::string::npos) << msg;
}

// `compiled` written as a model.so in the temp directory, named for `tag` and this process.
Expected<std::string> writeTempModel(driver::CompiledModel compiled, const std::string& tag) {
  std::string path = (std::filesystem::temp_directory_path() /
                      ("tunec_" + tag + "_" + std::to_string(::getpid()) + ".so"))
                         .string();
  TUNEC_TRY(driver::writeSharedLibrary(std::move(compiled), path));
  return path;
}

TEST(CompileModel, SharedLibraryThroughTheCApi) {
  Builder b;
  ValueId x = b.input({1, 4, 8, 8});
  ValueId y = b.op(OpKind::Conv, conv(3, 1, 1), {x, b.constant({8, 4, 3, 3}), b.constant({8})});
  y = b.op(OpKind::Relu, NoAttrs{}, {y});
  b.g.addOutput(y);
  auto want = runReference(b.g, b.inputs);
  ASSERT_TRUE(want.isOk());
  driver::CompileOptions options;
  options.threads = 2;
  options.target = hostTarget();
  options.isa = widestIsa(options.target);
  auto compiled = driver::compileModel(b.g, *sharedJit(), options);
  ASSERT_TRUE(compiled.isOk()) << compiled.error().message();
  auto written = writeTempModel(std::move(*compiled), "capi");
  ASSERT_TRUE(written.isOk()) << written.error().message();
  const std::string path = *written;
  tunec_model* model = nullptr;
  ASSERT_EQ(tunec_model_load(path.c_str(), 2, &model), 0) << tunec_last_error();
  ASSERT_EQ(tunec_model_num_inputs(model), 1);
  ASSERT_EQ(tunec_model_num_outputs(model), 1);
  tunec_tensor_info info;
  ASSERT_EQ(tunec_model_output_info(model, 0, &info), 0);
  EXPECT_EQ(info.rank, 4);
  EXPECT_STREQ(info.dtype, "f32");
  EXPECT_EQ(info.bytes, 8 * 8 * 8 * 4);
  EXPECT_NE(tunec_model_input_info(model, 3, &info), 0);
  EXPECT_NE(std::string(tunec_last_error()).find("out of range"), std::string::npos);
  // Concurrent runs from several threads, each with its own output.
  std::vector<Tensor> outs(4, Tensor(DType::F32, {1, 8, 8, 8}));
  std::vector<std::thread> threads;
  for (Tensor& o : outs)
    threads.emplace_back([&, ptr = o.data()] {
      const void* in[] = {b.inputs[0].data()};
      void* out[] = {ptr};
      for (int i = 0; i < 20; ++i) EXPECT_EQ(tunec_model_run(model, in, out), 0);
    });
  for (auto& t : threads) t.join();
  for (const Tensor& o : outs) EXPECT_LT(relativeL2(o, (*want)[0]), 1e-5);
  tunec_model_free(model);
  std::filesystem::remove(path);
  // Bad files: the message names the file and the problem.
  EXPECT_NE(tunec_model_load("/nonexistent/model.so", 1, &model), 0);
  EXPECT_NE(std::string(tunec_last_error()).find("/nonexistent/model.so"), std::string::npos);
  std::string notModel = std::string(TUNEC_RUNTIME_LIBRARY);
  EXPECT_NE(tunec_model_load(notModel.c_str(), 1, &model), 0);
  EXPECT_NE(std::string(tunec_last_error()).find("not a tunec model"), std::string::npos)
      << tunec_last_error();
}

// --precision bf16 through model.so: the convolution and the Gemm run in bf16 (labels, the
// steps' bf16 operations for profiles), the plan's ISA names avx512_bf16, the output is within
// bf16's error of the reference. For a target without avx512_bf16 (or restricted to AVX2) every
// kernel stays fp32, the report naming what the target lacks: --precision bf16 is never slower.
TEST(CompileModel, Bf16PrecisionThroughTheCApi) {
  Builder b;
  ValueId x = b.input({1, 4, 8, 8});
  // Unpadded: a padded conv reading the model's NCHW input would reorder it in its own copy,
  // which is f32 (a bf16 convolution reads NHWC).
  ValueId y = b.op(OpKind::Conv, conv(3, 1, 0), {x, b.constant({8, 4, 3, 3}), b.constant({8})});
  y = b.op(OpKind::Relu, NoAttrs{}, {y});
  y = b.op(OpKind::Reshape, ReshapeAttrs{{1, 288}}, {y});
  y = b.op(OpKind::Gemm, GemmAttrs{}, {y, b.constant({288, 10}), b.constant({10})});
  b.g.addOutput(y);
  driver::CompileOptions options;
  options.target = hostTarget();
  options.isa = widestIsa(options.target);
  options.precision = driver::Precision::Bf16;
  Target noBf16 = options.target;
  noBf16.avx512bf16 = false;
  driver::CompileOptions fallback = options, avx2 = options;
  fallback.target = noBf16;
  avx2.isa = Isa::Avx2;
  for (const driver::CompileOptions& o : {fallback, avx2}) {
    auto outline = driver::outlineCompile(b.g, o);
    ASSERT_TRUE(outline.isOk()) << outline.error().message();
    EXPECT_NE(outline->stats.bf16Unavailable.find("has no bf16 instruction at " +
                                                  std::string(spell(o.isa))),
              std::string::npos)
        << outline->stats.bf16Unavailable;
    for (const driver::StepOutline& step : outline->steps)
      EXPECT_EQ(step.label.find(" in bf16"), std::string::npos) << step.label;
  }
  // (Compiled for this machine's target, restricted to AVX2: the report says why.)
  auto inFp32 = driver::compileModel(b.g, *sharedJit(), avx2);
  ASSERT_TRUE(inFp32.isOk()) << inFp32.error().message();
  for (const driver::HeavyKernel& k : inFp32->kernels)
    EXPECT_TRUE(workloadTypes(k.workload).allF32()) << k.label;
  const std::string report = driver::compileReport(*inFp32);
  EXPECT_NE(report.find("--precision bf16: every kernel in fp32: the target"), std::string::npos)
      << report;
  SKIP_WITHOUT_REAL_BF16("a model.so");
  auto want = runReference(b.g, b.inputs);
  ASSERT_TRUE(want.isOk());
  auto compiled = driver::compileModel(b.g, *sharedJit(), options);
  ASSERT_TRUE(compiled.isOk()) << compiled.error().message();
  ASSERT_EQ(compiled->kernels.size(), 2u);
  // Both in bf16 where vdpbf16ps beats the FMA; on the Xeon with AMX the Gemm runs on AMX and the
  // conv stays fp32, its label saying why (vectorBf16Pays).
  const bool vectorPays = vectorBf16Pays(options.target);
  for (const driver::HeavyKernel& k : compiled->kernels) {
    bool conv = k.label.rfind("Conv", 0) == 0;
    EXPECT_NE(k.label.find(!conv || vectorPays ? " in bf16" : kVectorBf16SlowerNote),
              std::string::npos)
        << k.label;
  }
  // The Gemm runs on AMX where the target has it (kernelIsa), and the plan requires its features.
  CpuFeatures required =
      isaInfo(targetSupports(hostTarget(), Isa::Amx) ? Isa::Amx : Isa::Avx512).needs;
  required.add(CpuFeature::avx512bf16);
  EXPECT_EQ(compiled->plan.requiredFeatures, required) << compiled->plan.requiredFeatures.text();
  const std::string isa = required.text();
  auto written = writeTempModel(std::move(*compiled), "bf16");
  ASSERT_TRUE(written.isOk()) << written.error().message();
  const std::string path = *written;
  tunec_model* model = nullptr;
  ASSERT_EQ(tunec_model_load(path.c_str(), 1, &model), 0) << tunec_last_error();
  EXPECT_EQ(std::string(tunec_model_isa(model)), isa);
  int kernelsWithBf16 = 0;
  for (int32_t i = 0; i < tunec_model_num_steps(model); ++i) {
    double flops = 0, bf16 = 0;
    int64_t bytes = 0;
    int32_t generated = 0;
    ASSERT_EQ(tunec_model_step_cost(model, i, &flops, &bytes, &generated), 0);
    ASSERT_EQ(tunec_model_step_bf16_flops(model, i, &bf16), 0);
    if (generated && bf16 > 0) {
      EXPECT_EQ(bf16, flops) << tunec_model_step_label(model, i);
    }
    kernelsWithBf16 += bf16 > 0;
  }
  EXPECT_EQ(kernelsWithBf16, vectorPays ? 2 : 1);
  double unused = 0;
  EXPECT_NE(tunec_model_step_bf16_flops(model, 99, &unused), 0);
  Tensor out(DType::F32, {1, 10});
  const void* in[] = {b.inputs[0].data()};
  void* outs[] = {out.data()};
  ASSERT_EQ(tunec_model_run(model, in, outs), 0) << tunec_last_error();
  double rel = relativeL2(out, (*want)[0]);
  EXPECT_LT(rel, 2e-2);
  EXPECT_GT(rel, 0.0); // really rounded to bf16
  tunec_model_free(model);
  std::filesystem::remove(path);
}

TEST(CompileModel, CorruptPlansAreRejectedBeforeRunning) {
  rt::ModelPlan plan;
  plan.requiredFeatures = isaInfo(Isa::Avx2).needs;
  plan.tensors = {{rt::Region::Arena, 0}};
  rt::Step step;
  step.kind = rt::StepKind::Softmax;
  step.label = "softmax";
  step.tensors = {0, 5}; // tensor 5 does not exist
  step.ints = {1, 1, 1};
  plan.steps.push_back(step);
  std::vector<uint8_t> blob = rt::serializeModel(plan, {});
  auto parsed = rt::parseModel(blob.data(), static_cast<int64_t>(blob.size()));
  ASSERT_FALSE(parsed.isOk());
  EXPECT_NE(parsed.error().message().find("names tensor 5"), std::string::npos);
  blob[3] = 'X';
  parsed = rt::parseModel(blob.data(), static_cast<int64_t>(blob.size()));
  ASSERT_FALSE(parsed.isOk());
  EXPECT_NE(parsed.error().message().find("bad magic"), std::string::npos);
  parsed = rt::parseModel(blob.data(), 20);
  EXPECT_FALSE(parsed.isOk());
  // More bf16 operations than operations, or bf16 and int8 together: a corrupt cost.
  plan.steps[0].tensors = {0, 0};
  for (auto [bf16, int8] : {std::pair{20.0, 0.0}, std::pair{6.0, 6.0}, std::pair{0.0, -1.0}}) {
    plan.steps[0].flops = 10, plan.steps[0].bf16Flops = bf16, plan.steps[0].int8Ops = int8;
    blob = rt::serializeModel(plan, {});
    parsed = rt::parseModel(blob.data(), static_cast<int64_t>(blob.size()));
    ASSERT_FALSE(parsed.isOk()) << bf16 << " bf16 and " << int8 << " int8 operations of 10";
    EXPECT_NE(parsed.error().message().find(
                  "has a negative cost, or more bf16 and int8 operations than operations"),
              std::string::npos)
        << parsed.error().message();
  }
  // A plan that requires a CPU feature this tunec does not know (a newer one's) is refused.
  plan.steps[0].bf16Flops = plan.steps[0].int8Ops = 0;
  blob = rt::serializeModel(plan, {});
  std::string text(blob.begin(), blob.end());
  size_t at = text.find("\"avx2\"");
  ASSERT_NE(at, std::string::npos);
  std::memcpy(blob.data() + at + 1, "sse9", 4);
  parsed = rt::parseModel(blob.data(), static_cast<int64_t>(blob.size()));
  ASSERT_FALSE(parsed.isOk());
  EXPECT_NE(parsed.error().message().find("field 'requires': unknown feature \"sse9\""),
            std::string::npos)
      << parsed.error().message();
}

} // namespace
} // namespace tunec

namespace tunec {
namespace {

// QuantizeLinear and DequantizeLinear, compiled (typed steps) and in the reference, exactly on
// the edges: ties round half to even, values past the type's range saturate, per-axis scales
// and zero points follow their axis, and DequantizeLinear inverts on the grid.
TEST(CompileModel, QuantizeAndDequantizeRoundHalfToEvenAndSaturate) {
  Graph g;
  ValueId x = g.addInput("x", {DType::F32, Shape{1, 2, 4}, {}});
  Tensor scale(DType::F32, Shape{2}), zp(DType::U8, Shape{2});
  scale.setDouble(0, 0.5), scale.setDouble(1, 2.0);
  zp.setInt(0, 10), zp.setInt(1, 250);
  ValueId s = g.addConstant("scale", scale), z = g.addConstant("zp", zp);
  auto q = g.addNode("q", OpKind::QuantizeLinear, QuantAttrs{1}, {x, s, z}, {"q"});
  ASSERT_TRUE(q.isOk()) << q.error().message();
  ValueId qv = g.node(*q).outputs[0];
  auto dq = g.addNode("dq", OpKind::DequantizeLinear, QuantAttrs{1}, {qv, s, z}, {"dq"});
  ASSERT_TRUE(dq.isOk()) << dq.error().message();
  g.addOutput(qv);
  g.addOutput(g.node(*dq).outputs[0]);
  // Channel 0 (scale 0.5, zero point 10): x / scale = 0.5, 1.5, -2.5, -100 (saturates at 0).
  // Channel 1 (scale 2, zero point 250): x / scale = 2.5, 3.5, 10 (saturates at 255), -0.5.
  Tensor in(DType::F32, Shape{1, 2, 4});
  const float values[] = {0.25f, 0.75f, -1.25f, -50.f, 5.f, 7.f, 20.f, -1.f};
  for (int i = 0; i < 8; ++i) in.setDouble(i, values[i]);
  const int64_t wantQ[] = {10, 12, 8, 0, 252, 254, 255, 250};
  const double wantDq[] = {0, 1, -1, -5, 4, 8, 10, 0};
  auto ref = runReference(g, {in});
  ASSERT_TRUE(ref.isOk()) << ref.error().message();
  Tensor gotQ(DType::U8, Shape{1, 2, 4}), gotDq(DType::F32, Shape{1, 2, 4});
  Status ran = compileAndRun(g, {in.data()}, {gotQ.data(), gotDq.data()});
  ASSERT_TRUE(ran.isOk()) << ran.error().message();
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ((*ref)[0].getInt(i), wantQ[i]) << "reference, element " << i;
    EXPECT_EQ(gotQ.getInt(i), wantQ[i]) << "compiled, element " << i;
    EXPECT_EQ((*ref)[1].getDouble(i), wantDq[i]) << "reference, element " << i;
    EXPECT_EQ(gotDq.getDouble(i), wantDq[i]) << "compiled, element " << i;
  }
}

// A quantization round trip lowered to f32 arithmetic (lower-quantize-round-trips) gives a NaN
// the zero point's value, 0, as QuantizeLinear then DequantizeLinear do (the reference): in a
// loop kernel's elementwise chain (NaN, infinite and ordinary activations) and in a matmul's
// epilogue (a bias whose column 2 is NaN and column 3 infinite: 0 and the saturated top).
TEST(CompileModel, QuantizationRoundTripsGiveANanTheZeroPointsValue) {
  Graph g;
  auto scalar = [&](const std::string& name, DType t, double v) {
    Tensor x(t, Shape{});
    x.setDouble(0, v);
    return g.addConstant(name, x);
  };
  auto roundTrip = [&](const std::string& name, ValueId v, double s, int z) {
    ValueId sv = scalar(name + ".s", DType::F32, s), zv = scalar(name + ".z", DType::U8, z);
    auto q =
        g.addNode(name + ".q", OpKind::QuantizeLinear, QuantAttrs{0}, {v, sv, zv}, {name + ".q"});
    auto d = g.addNode(name, OpKind::DequantizeLinear, QuantAttrs{0},
                       {g.node(*q).outputs[0], sv, zv}, {name});
    return g.node(*d).outputs[0];
  };
  auto add = [&](const std::string& name, OpKind kind, std::vector<ValueId> in) {
    auto n = g.addNode(name, kind, NoAttrs{}, std::move(in), {name});
    return g.node(*n).outputs[0];
  };
  ValueId x = g.addInput("x", {DType::F32, Shape{2, 8}, {}});
  ValueId a = g.addInput("a", {DType::F32, Shape{3, 4}, {}});
  g.addOutput(add("relu", OpKind::Relu, {roundTrip("rt1", x, 0.1, 128)}));
  Tensor w(DType::F32, Shape{4, 5}), bias(DType::F32, Shape{5});
  for (int64_t i = 0; i < w.numel(); ++i) w.setDouble(i, 0.1 * static_cast<double>(i % 7) - 0.3);
  for (int64_t j = 0; j < 5; ++j) bias.setDouble(j, 0.2 * static_cast<double>(j));
  bias.setDouble(2, std::nan(""));
  bias.setDouble(3, INFINITY);
  ValueId y = add("mm", OpKind::MatMul, {a, g.addConstant("w", w)});
  y = add("bias", OpKind::Add, {y, g.addConstant("b", bias)});
  g.addOutput(roundTrip("rt2", y, 0.05, 100));
  Tensor xs(DType::F32, Shape{2, 8}), as(DType::F32, Shape{3, 4});
  const float xv[] = {NAN, INFINITY, -INFINITY, 0.26f, -0.34f, 3e38f, -5.f, 1.f};
  for (int64_t i = 0; i < 16; ++i) xs.setDouble(i, xv[i % 8] * (i < 8 ? 1.f : -1.f));
  for (int64_t i = 0; i < as.numel(); ++i) as.setDouble(i, 0.5 - 0.1 * static_cast<double>(i));
  auto want = runReference(g, {xs, as});
  ASSERT_TRUE(want.isOk()) << want.error().message();
  auto lowered = passes::lowerQuantizeRoundTrips(g);
  ASSERT_TRUE(lowered.isOk()) << lowered.error().message();
  int rounds = 0;
  for (const Node& n : lowered->nodes())
    rounds += n.kind == OpKind::Round && std::get<RoundAttrs>(n.attrs).nanToZero;
  EXPECT_EQ(rounds, 2) << "both round trips lowered";
  Tensor got1(DType::F32, Shape{2, 8}), got2(DType::F32, Shape{3, 5});
  Status ran = compileAndRun(*lowered, {xs.data(), as.data()}, {got1.data(), got2.data()});
  ASSERT_TRUE(ran.isOk()) << ran.error().message();
  for (int64_t i = 0; i < 16; ++i)
    EXPECT_EQ(got1.getDouble(i), (*want)[0].getDouble(i)) << "element " << i;
  EXPECT_EQ((*want)[0].getDouble(0), 0.0) << "the reference's NaN is the zero point's value";
  for (int64_t r = 0; r < 3; ++r) {
    EXPECT_EQ((*want)[1].getDouble(r * 5 + 2), 0.0);
    EXPECT_FLOAT_EQ((*want)[1].getDouble(r * 5 + 3), (255 - 100) * 0.05f);
    for (int64_t c = 0; c < 5; ++c)
      EXPECT_NEAR(got2.getDouble(r * 5 + c), (*want)[1].getDouble(r * 5 + c), 0.0501)
          << r << "," << c;
  }
}

// The dense per-tensor QuantizeLinear (the int8 kernels' inputs; runtime/typed_kernels.cpp's
// vectorized path) equals the reference bit for bit: ties to even, saturation both ways,
// infinities, NaN to the zero point, huge values; u8 and s8.
TEST(CompileModel, DenseQuantizeLinearEqualsTheReference) {
  for (DType type : {DType::U8, DType::I8}) {
    Graph g;
    ValueId x = g.addInput("x", {DType::F32, Shape{3, 67}, {}});
    Tensor scale(DType::F32, Shape{}), zp(type, Shape{});
    scale.setDouble(0, 0.5), zp.setInt(0, type == DType::U8 ? 7 : -3);
    auto q = g.addNode("q", OpKind::QuantizeLinear, QuantAttrs{1},
                       {x, g.addConstant("s", scale), g.addConstant("z", zp)}, {"q"});
    ASSERT_TRUE(q.isOk()) << q.error().message();
    g.addOutput(g.node(*q).outputs[0]);
    Tensor in(DType::F32, Shape{3, 67});
    std::mt19937 rng(5);
    std::uniform_real_distribution<double> u(-80.0, 80.0);
    const float special[] = {0.25f,    0.75f,     1.25f, -0.25f, -0.75f, -1.25f, 1e30f, -1e30f,
                             INFINITY, -INFINITY, NAN,   3e6f,   -3e6f,  0.f,    -0.f};
    for (int64_t i = 0; i < in.numel(); ++i)
      in.setDouble(i, i < 15 ? special[i] : std::round(u(rng) * 4) / 4); // many exact ties
    auto want = runReference(g, {in});
    ASSERT_TRUE(want.isOk()) << want.error().message();
    Tensor got(type, Shape{3, 67});
    Status ran = compileAndRun(g, {in.data()}, {got.data()});
    ASSERT_TRUE(ran.isOk()) << ran.error().message();
    for (int64_t i = 0; i < got.numel(); ++i)
      ASSERT_EQ(got.getInt(i), (*want)[0].getInt(i)) << "element " << i << " = " << in.getDouble(i);
  }
}

// Adds node `name` (its one output named alike) to `g` and returns that output.
ValueId addNamed(Graph& g, const std::string& name, OpKind kind, OpAttrs attrs,
                 std::vector<ValueId> in) {
  auto id = g.addNode(name, kind, std::move(attrs), std::move(in), {name});
  EXPECT_TRUE(id.isOk()) << id.error().message();
  return g.node(*id).outputs[0];
}

// DQ(Q(x)) to u8 with one scale `sa` and zero point `za`, as QDQ models mark a quantized input
// (nodes `name`.q and `name`.dq).
ValueId fakeQuantized(Graph& g, ValueId x, double sa, int za, const std::string& name) {
  Tensor scale(DType::F32, Shape{}), zero(DType::U8, Shape{});
  scale.setDouble(0, sa), zero.setInt(0, za);
  ValueId s = g.addConstant(name + ".sa", scale), z = g.addConstant(name + ".za", zero);
  ValueId xq = addNamed(g, name + ".q", OpKind::QuantizeLinear, QuantAttrs{1}, {x, s, z});
  return addNamed(g, name + ".dq", OpKind::DequantizeLinear, QuantAttrs{1}, {xq, s, z});
}

// A quantized linear layer as QDQ models write it, relu(DQ(Q(x)) DQ(wq) + bias): x quantized to
// u8 (scale sa, zero point za), random per-column s8 weights in [-range, range] with scales of
// 1e-3 to 1e-2, a random bias. Returns the layer's output.
ValueId quantizedLinear(Graph& g, ValueId x, int64_t n, int range, double sa, int za,
                        std::mt19937& rng, const std::string& name) {
  const int64_t k = g.value(x).type.shape.dims().back();
  auto node = [&](const std::string& suffix, OpKind kind, OpAttrs attrs, std::vector<ValueId> in) {
    return addNamed(g, name + suffix, kind, std::move(attrs), std::move(in));
  };
  ValueId xd = fakeQuantized(g, x, sa, za, name);
  Tensor wq(DType::I8, Shape{k, n}), sb(DType::F32, Shape{n}), bias(DType::F32, Shape{n});
  std::uniform_int_distribution<int> weight(-range, range);
  for (int64_t i = 0; i < wq.numel(); ++i) wq.setInt(i, weight(rng));
  for (int64_t j = 0; j < n; ++j)
    sb.setDouble(j, 0.001 * (1 + static_cast<double>(rng() % 10))),
        bias.setDouble(j, static_cast<double>(rng() % 200) / 100.0 - 1.0);
  Tensor zb(DType::I8, Shape{n}); // zeros: symmetric weights
  ValueId w = node(".dw", OpKind::DequantizeLinear, QuantAttrs{1},
                   {g.addConstant(name + ".wq", wq), g.addConstant(name + ".sb", sb),
                    g.addConstant(name + ".zb", zb)});
  ValueId y = node(".mm", OpKind::MatMul, NoAttrs{}, {xd, w});
  y = node(".bias", OpKind::Add, NoAttrs{}, {y, g.addConstant(name + ".b", bias)});
  return node(".relu", OpKind::Relu, NoAttrs{}, {y});
}

// A quantized linear layer as QDQ models write it (a u8 activation round trip, per-column s8
// weights, bias, relu) runs as an int8 kernel: lower-quantized-layers makes it an IntegerMatMul
// whose column scale and zero-point correction join the epilogue. It equals the QDQ graph's
// reference within f32 rounding with 7-bit weights (exact sums on every int8 strategy); with
// full-range weights the AVX2 kernel halves them (its label says so), within their error.
TEST(CompileModel, QuantizedMatmulRunsAsAnInt8Kernel) {
  for (int range : {kAvx2Int8WeightLimit, 127}) {
    Graph g;
    std::mt19937 rng(static_cast<uint32_t>(range));
    ValueId x = g.addInput("x", {DType::F32, Shape{2, 8, 96}, {}});
    g.addOutput(quantizedLinear(g, x, 40, range, 0.01, 128, rng, "fc"));
    Tensor in(DType::F32, Shape{2, 8, 96});
    std::uniform_real_distribution<double> u(-1.0, 1.0);
    for (int64_t i = 0; i < in.numel(); ++i) in.setDouble(i, u(rng));
    auto want = runReference(g, {in});
    ASSERT_TRUE(want.isOk()) << want.error().message();

    auto lowered = passes::lowerQuantizedLayers(g);
    ASSERT_TRUE(lowered.isOk()) << lowered.error().message();
    int integer = 0, matmuls = 0;
    for (const Node& n : lowered->nodes())
      integer += n.kind == OpKind::IntegerMatMul, matmuls += n.kind == OpKind::MatMul;
    EXPECT_EQ(integer, 1);
    EXPECT_EQ(matmuls, 0);
    auto rewritten = runReference(*lowered, {in});
    ASSERT_TRUE(rewritten.isOk()) << rewritten.error().message();
    EXPECT_LT(relativeL2((*rewritten)[0], (*want)[0]), 1e-6);

    Tensor got(DType::F32, Shape{2, 8, 40});
    driver::CompiledModel compiled;
    Status ran = compileAndRun(*lowered, {in.data()}, {got.data()}, &compiled);
    ASSERT_TRUE(ran.isOk()) << ran.error().message();
    ASSERT_EQ(compiled.kernels.size(), 1u);
    const std::string& label = compiled.kernels[0].label;
    EXPECT_NE(label.find(" in int8"), std::string::npos) << label;
    const Target& target = hostTarget();
    const bool avx2 =
        kernelIsa(MatmulWorkload{.types = {DType::U8, DType::I8, DType::I32, DType::F32}},
                  widestIsa(target), target) == Isa::Avx2;
    const bool halved = avx2 && range > kAvx2Int8WeightLimit;
    EXPECT_EQ(label.find("weights halved to 7 bits") != std::string::npos, halved) << label;
    EXPECT_EQ(compiled.stats.int8Kernels, 1);
    EXPECT_EQ(compiled.stats.halvedInt8Kernels, halved ? 1 : 0);
    // Halving costs one bit of each weight: 2w' - w is -1, 0 or 1 against |w| ~ 73 here.
    EXPECT_LT(relativeL2(got, (*want)[0]), halved ? 3e-2 : 1e-5) << "weights in +-" << range;
  }
}

// A quantized convolution as QDQ models write it, relu?(Conv(DQ(Q(x)), DQ(wq)) + bias): x
// quantized to u8 (scale sa, zero point za), random per-channel 7-bit s8 weights with scales of
// 1e-3 to 1e-2, a random bias quantized to int32 with the scale sa sb[oc].
ValueId quantizedConv(Graph& g, ValueId x, int64_t oc, const ConvAttrs& attrs, double sa, int za,
                      bool relu, std::mt19937& rng, const std::string& name,
                      int weightLimit = kAvx2Int8WeightLimit) {
  const int64_t ic = g.value(x).type.shape[1];
  auto node = [&](const std::string& suffix, OpKind kind, OpAttrs a, std::vector<ValueId> in) {
    return addNamed(g, name + suffix, kind, std::move(a), std::move(in));
  };
  ValueId xd = fakeQuantized(g, x, sa, za, name);
  Tensor wq(DType::I8, Shape{oc, ic / attrs.group, attrs.kernel[0], attrs.kernel[1]}),
      sb(DType::F32, Shape{oc}), bias(DType::F32, Shape{oc}), zb(DType::I8, Shape{oc});
  std::uniform_int_distribution<int> weight(-weightLimit, std::min(weightLimit, 127));
  for (int64_t i = 0; i < wq.numel(); ++i) wq.setInt(i, weight(rng));
  // The bias an exporter writes: an int32 dequantized with the scale sa sb[oc].
  for (int64_t j = 0; j < oc; ++j)
    sb.setDouble(j, 0.001 * (1 + static_cast<double>(rng() % 10))),
        bias.dataAs<float>()[j] = static_cast<float>(static_cast<int>(rng() % 40001) - 20000) *
                                  (static_cast<float>(sa) * sb.dataAs<float>()[j]);
  ValueId w = node(".dw", OpKind::DequantizeLinear, QuantAttrs{0},
                   {g.addConstant(name + ".wq", wq), g.addConstant(name + ".sb", sb),
                    g.addConstant(name + ".zb", zb)});
  ValueId y = node(".conv", OpKind::Conv, attrs, {xd, w, g.addConstant(name + ".b", bias)});
  return relu ? node(".relu", OpKind::Relu, NoAttrs{}, {y}) : y;
}

// `g` compiled and run on random input in [-1, 1) of `inShape` drawn from `rng`: its output y
// of `yShape`, and with `exposed` a second output of `hShape` (an intermediate made a model
// output, so that the kernel writing it cannot fuse its consumer's quantization).
struct QuantizedRun {
  Tensor in, y;
  driver::CompiledModel compiled;
};
Expected<QuantizedRun> runOnRandomInput(const Graph& g, const Shape& inShape, const Shape& yShape,
                                        const Shape& hShape, bool exposed, std::mt19937& rng) {
  QuantizedRun r{Tensor(DType::F32, inShape), Tensor(DType::F32, yShape), {}};
  Tensor h(DType::F32, hShape);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  for (int64_t i = 0; i < r.in.numel(); ++i) r.in.setDouble(i, u(rng));
  std::vector<void*> outs = {r.y.data()};
  if (exposed) outs.push_back(h.data());
  TUNEC_TRY(compileAndRun(g, {r.in.data()}, outs, &r.compiled));
  return r;
}

// A quantized convolution the int8 kernels cannot take (two groups of 3 input channels: no
// quads) stays f32, and the next int8 layer's QuantizeLinear joins its epilogue: the f32 kernel
// writes the u8 input of the int8 one, no element step quantizes it, and the result is bit for
// bit the one with the quantization as its own step (the f32 conv's output also a model output,
// so that it cannot join), and the QDQ graph's reference within f32 rounding.
TEST(CompileModel, AnF32ConvolutionQuantizesForTheNextInt8Layer) {
  std::vector<Tensor> results;
  std::vector<int> quantizeSteps;
  for (bool hidden : {true, false}) {
    Graph g;
    std::mt19937 rng(43);
    ValueId x = g.addInput("x", {DType::F32, Shape{1, 6, 12, 11}, {}});
    ValueId h = quantizedConv(g, x, 8, ConvAttrs{{3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, 2}, 0.02,
                              120, true, rng, "rgb");
    g.addOutput(quantizedConv(g, h, 16, ConvAttrs{{3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1}, 0.01, 7,
                              false, rng, "c2"));
    if (!hidden) g.addOutput(h);
    auto lowered = passes::lowerQuantizedLayers(g);
    ASSERT_TRUE(lowered.isOk()) << lowered.error().message();
    lowered = passes::foldConstants(*lowered); // the f32 conv's weights, dequantized
    ASSERT_TRUE(lowered.isOk()) << lowered.error().message();
    auto run = runOnRandomInput(*lowered, Shape{1, 6, 12, 11}, Shape{1, 16, 6, 6},
                                Shape{1, 8, 6, 6}, !hidden, rng);
    ASSERT_TRUE(run.isOk()) << run.error().message();
    const auto& [in, y, compiled] = *run;
    ASSERT_EQ(compiled.kernels.size(), 2u);
    const std::string& rgb = compiled.kernels[0].label;
    EXPECT_EQ(rgb.find(" in int8"), std::string::npos) << rgb;
    EXPECT_EQ(rgb.find("quantize") != std::string::npos, hidden) << rgb;
    EXPECT_NE(compiled.kernels[1].label.find(" in int8"), std::string::npos);
    EXPECT_EQ(compiled.stats.int8Kernels, 1);
    quantizeSteps.push_back(compiled.stats.quantizeSteps);
    auto want = runReference(g, {in});
    ASSERT_TRUE(want.isOk()) << want.error().message();
    EXPECT_LT(relativeL2(y, (*want)[0]), 1e-2);
    results.push_back(y);
  }
  EXPECT_EQ(quantizeSteps[1], quantizeSteps[0] + 1) << "c2's input quantized by a step of its own";
  for (int64_t i = 0; i < results[0].numel(); ++i)
    ASSERT_EQ(results[0].getDouble(i), results[1].getDouble(i)) << "element " << i;
}

// A quantized model's RGB convolution (3 input channels, one group) runs in int8: its kernel
// reads the quantized image NCHW through its padded copy, which rounds the channels up to a quad
// (the fourth holds the zero point, its weights zero), and requantizes for the next int8 layer.
// The result equals the lowered graph on the reference executor (every u8 the same: the f32
// output differs only where c2's constant correction and bias are added as one), with padding
// that reads a zero point of 120, and 8-bit weights too.
TEST(CompileModel, AnRgbConvolutionRunsInInt8WithItsChannelsRoundedUp) {
  for (int bits : {7, 8}) {
    Graph g;
    std::mt19937 rng(47);
    ValueId x = g.addInput("x", {DType::F32, Shape{1, 3, 12, 11}, {}});
    ValueId h = quantizedConv(g, x, 8, ConvAttrs{{3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, 1}, 0.02,
                              120, true, rng, "rgb", bits == 8 ? 128 : kAvx2Int8WeightLimit);
    g.addOutput(quantizedConv(g, h, 16, ConvAttrs{{3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1}, 0.01, 7,
                              false, rng, "c2"));
    auto lowered = passes::lowerQuantizedLayers(g);
    ASSERT_TRUE(lowered.isOk()) << lowered.error().message();
    auto run = runOnRandomInput(*lowered, Shape{1, 3, 12, 11}, Shape{1, 16, 6, 6},
                                Shape{1, 8, 6, 6}, false, rng);
    ASSERT_TRUE(run.isOk()) << run.error().message();
    const auto& [in, y, compiled] = *run;
    ASSERT_EQ(compiled.kernels.size(), 2u);
    const std::string& rgb = compiled.kernels[0].label;
    EXPECT_NE(rgb.find("+quantize (reads its input NCHW) in int8"), std::string::npos) << rgb;
    EXPECT_EQ(compiled.stats.int8Kernels, 2);
    EXPECT_EQ(compiled.stats.reorders, 0);
    EXPECT_TRUE(passes::quantizedLayersKeptFloat(g).empty());
    if (hostTarget().avx512vnni || bits == 7) { // AVX2's vpmaddubsw halves 8-bit weights
      auto want = runReference(*lowered, {in});
      ASSERT_TRUE(want.isOk()) << want.error().message();
      EXPECT_LT(relativeL2(y, (*want)[0]), 1e-6) << bits << "-bit weights";
    }
  }
}

// `g` lowered as the pipeline does (lowerQuantized: lower-quantized-layers; move-quantized-values
// when `moved`; lower-quantize-round-trips), compiled and run on random input of `inShape` from
// `seed`: its output of `yShape`, the compile report, and the input and the lowered graph's
// reference output.
struct MovedRun {
  QuantizedRun run;
  Tensor exact;
};
Expected<Graph> lowerQuantized(const Graph& g, bool moved) {
  TUNEC_ASSIGN_OR_RETURN(Graph lowered, passes::lowerQuantizedLayers(g));
  if (moved) {
    TUNEC_ASSIGN_OR_RETURN(lowered, passes::moveQuantizedValues(lowered));
  }
  TUNEC_ASSIGN_OR_RETURN(lowered, passes::lowerQuantizeRoundTrips(lowered));
  TUNEC_ASSIGN_OR_RETURN(lowered, passes::foldRequantizationScale(lowered));
  return passes::hoistQuantization(lowered); // as the pipeline orders them
}
Expected<MovedRun> runMovedOrNot(const Graph& g, bool moved, const Shape& inShape,
                                 const Shape& yShape, unsigned seed) {
  TUNEC_ASSIGN_OR_RETURN(Graph lowered, lowerQuantized(g, moved));
  std::mt19937 rng(seed);
  TUNEC_ASSIGN_OR_RETURN(QuantizedRun run,
                         runOnRandomInput(lowered, inShape, yShape, Shape{}, false, rng));
  TUNEC_ASSIGN_OR_RETURN(auto exact, runReference(lowered, {run.in}));
  return MovedRun{std::move(run), exact[0]};
}

// `g` run both ways (runMovedOrNot without and with move-quantized-values) on the same input:
// each has `int8Kernels` int8 kernels, of which the first `requantizers` end in a quantization
// just when the integers move, and gives its lowered graph's output (1e-6) and, with a
// `qdqTolerance`, the raw QDQ graph's within it; the two outputs are equal bit for bit.
void expectMovingChangesNoValue(const Graph& g, const Shape& inShape, const Shape& yShape,
                                unsigned seed, int int8Kernels, size_t requantizers,
                                double qdqTolerance) {
  std::vector<Tensor> results;
  for (bool moved : {false, true}) {
    auto r = runMovedOrNot(g, moved, inShape, yShape, seed);
    ASSERT_TRUE(r.isOk()) << r.error().message();
    const auto& [in, y, compiled] = r->run;
    EXPECT_EQ(compiled.stats.int8Kernels, int8Kernels);
    for (size_t k = 0; k < requantizers; ++k)
      EXPECT_EQ(compiled.kernels[k].label.find("+quantize") != std::string::npos, moved)
          << compiled.kernels[k].label;
    EXPECT_LT(relativeL2(y, r->exact), 1e-6);
    if (qdqTolerance > 0) {
      auto qdq = runReference(g, {in});
      ASSERT_TRUE(qdq.isOk()) << qdq.error().message();
      EXPECT_LT(relativeL2(y, (*qdq)[0]), qdqTolerance);
    }
    results.push_back(y);
  }
  for (int64_t i = 0; i < results[0].numel(); ++i)
    ASSERT_EQ(results[0].getDouble(i), results[1].getDouble(i)) << "element " << i;
}

// A QDQ model's stem: an int8 conv, its output quantized, dequantized, max-pooled, quantized
// again with the same parameters, then the next int8 conv. After move-quantized-values the pool
// runs on the u8 values (a loop step of u8 tensors), the first conv writes them through its
// requantizing epilogue, and the result equals the same graph without that pass (the f32 pool
// of the dequantized values) bit for bit, each its lowered graph on the reference executor,
// and the raw QDQ graph within 1e-2 (its f32-rounded dequantized operands round differently
// at near-ties).
TEST(CompileModel, MaxPoolBetweenInt8LayersPoolsTheU8Values) {
  Graph g;
  std::mt19937 rng(53);
  ValueId x = g.addInput("x", {DType::F32, Shape{1, 8, 15, 13}, {}});
  ValueId h = quantizedConv(g, x, 16, ConvAttrs{{3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1}, 0.01, 100,
                            true, rng, "c1");
  h = addNamed(g, "pool", OpKind::MaxPool, PoolAttrs{{3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}},
               {fakeQuantized(g, h, 0.02, 5, "pool")});
  g.addOutput(quantizedConv(g, h, 8, ConvAttrs{{1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1}, 0.02, 5,
                            false, rng, "c2"));
  expectMovingChangesNoValue(g, Shape{1, 8, 15, 13}, Shape{1, 8, 8, 7}, 59, 2, 1, 1e-2);
}

// A QDQ classifier's head: an int8 conv, its output quantized, dequantized, globally average-
// pooled over 7x5 pixels, quantized again with the same parameters, flattened, then an int8
// linear layer. After move-quantized-values the pool averages the u8 values (the integers' mean
// rounded, a loop step of u8 tensors) and the conv writes them through its requantizing
// epilogue; the result equals the same graph without that pass (the f32 pool) bit for bit.
TEST(CompileModel, GlobalAveragePoolBetweenInt8LayersAveragesTheU8Values) {
  Graph g;
  std::mt19937 rng(89);
  ValueId x = g.addInput("x", {DType::F32, Shape{1, 8, 7, 5}, {}});
  ValueId h = quantizedConv(g, x, 32, ConvAttrs{{3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1}, 0.01, 100,
                            true, rng, "c1");
  h = addNamed(g, "gap", OpKind::GlobalAveragePool, NoAttrs{},
               {fakeQuantized(g, h, 0.02, 5, "gap")});
  h = addNamed(g, "flat", OpKind::Flatten, AxisAttrs{1}, {fakeQuantized(g, h, 0.02, 5, "flat")});
  g.addOutput(quantizedLinear(g, h, 10, kAvx2Int8WeightLimit, 0.02, 5, rng, "fc"));
  expectMovingChangesNoValue(g, Shape{1, 8, 7, 5}, Shape{1, 10}, 97, 2, 1, 1e-2);
}

// Two int8 convolutions of one input concatenated (a QDQ model's Concat: both inputs and the
// output quantized alike) for the next int8 layer: after move-quantized-values the Concat moves
// u8 values, both convolutions requantize, and the result equals the same graph without that
// pass bit for bit, and its lowered graph on the reference executor.
TEST(CompileModel, ConcatBetweenInt8LayersMovesTheU8Values) {
  Graph g;
  std::mt19937 rng(61);
  ValueId x = g.addInput("x", {DType::F32, Shape{1, 8, 9, 10}, {}});
  ConvAttrs conv3{{3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1};
  ValueId a = quantizedConv(g, x, 8, conv3, 0.01, 100, true, rng, "a");
  ValueId b = quantizedConv(g, x, 16, conv3, 0.01, 100, true, rng, "b");
  ValueId c =
      addNamed(g, "cat", OpKind::Concat, AxisAttrs{1},
               {fakeQuantized(g, a, 0.02, 5, "a.out"), fakeQuantized(g, b, 0.02, 5, "b.out")});
  g.addOutput(quantizedConv(g, c, 8, ConvAttrs{{1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1}, 0.02, 5,
                            false, rng, "c"));
  expectMovingChangesNoValue(g, Shape{1, 8, 9, 10}, Shape{1, 8, 9, 10}, 67, 3, 2, 0);
}

// A residual block as QDQ ResNets write it: the block's u8 input dequantized as the addend of
// the last int8 conv, whose output makes a quantization round trip before the Add, the ReLU and
// the block's quantization. The int8 kernel reads the u8 addend itself (AddDequantizedU8), so no
// step dequantizes it; the result equals, bit for bit, the same graph with that
// DequantizeLinear's output also a model output (so it stays a step and the kernel adds its f32),
// and each equals its lowered graph on the reference executor and the QDQ graph within 2e-2.
TEST(CompileModel, AResidualAddReadsTheBlockInputAsU8) {
  std::vector<Tensor> results;
  std::vector<int64_t> quantizeSteps;
  for (bool exposed : {false, true}) {
    Graph g;
    std::mt19937 rng(73);
    ValueId x = g.addInput("x", {DType::F32, Shape{1, 8, 9, 10}, {}});
    ValueId h = quantizedConv(g, x, 16, ConvAttrs{{3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1}, 0.01,
                              100, true, rng, "c1");
    ValueId y = quantizedConv(g, h, 16, ConvAttrs{{1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1}, 0.02, 5,
                              false, rng, "c2");
    // The residual is the block input's dequantized u8, the value c2 reads.
    ValueId residual = kNoValue;
    for (const Node& n : g.nodes())
      if (n.name == "c2.dq") residual = n.outputs[0];
    ASSERT_NE(residual, kNoValue);
    ValueId sum = addNamed(g, "add", OpKind::Add, NoAttrs{},
                           {fakeQuantized(g, y, 0.031, 128, "c2.out"), residual});
    sum = addNamed(g, "relu", OpKind::Relu, NoAttrs{}, {sum});
    g.addOutput(fakeQuantized(g, sum, 0.0437, 0, "out"));
    if (exposed) g.addOutput(residual);
    auto lowered = lowerQuantized(g, true);
    ASSERT_TRUE(lowered.isOk()) << lowered.error().message();
    const Shape shape{1, 16, 9, 10};
    auto run = runOnRandomInput(*lowered, Shape{1, 8, 9, 10}, shape, shape, exposed, rng);
    ASSERT_TRUE(run.isOk()) << run.error().message();
    const auto& [in, out, compiled] = *run;
    auto exact = runReference(*lowered, {in});
    ASSERT_TRUE(exact.isOk()) << exact.error().message();
    EXPECT_EQ(compiled.stats.int8Kernels, 2);
    const std::string& block = compiled.kernels.back().label;
    EXPECT_EQ(block.find("+addu8+relu+") != std::string::npos, !exposed) << block;
    EXPECT_EQ(block.find("+add+relu+") != std::string::npos, exposed) << block;
    quantizeSteps.push_back(compiled.stats.quantizeSteps);
    EXPECT_LT(relativeL2(out, (*exact)[0]), 1e-6) << (exposed ? "exposed" : "hidden");
    auto qdq = runReference(g, {in});
    ASSERT_TRUE(qdq.isOk()) << qdq.error().message();
    EXPECT_LT(relativeL2(out, (*qdq)[0]), 2e-2);
    results.push_back(out);
  }
  EXPECT_EQ(quantizeSteps[1], quantizeSteps[0] + 1) << "the exposed addend dequantized by a step";
  for (int64_t i = 0; i < results[0].numel(); ++i)
    ASSERT_EQ(results[0].getDouble(i), results[1].getDouble(i)) << "element " << i;
}

// ResNet's downsampling block in QDQ form: a strided padded 3x3 to `mid` channels (ReLU) and a
// 1x1 to `out`, beside a strided 1x1 of the block input to `out`, each output fake-quantized,
// then their Add and a ReLU. Weights within +-weightLimit.
ValueId downsamplingBlock(Graph& g, ValueId x, int64_t mid, int64_t out, int weightLimit,
                          std::mt19937& rng) {
  ValueId h = quantizedConv(g, x, mid, ConvAttrs{{3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, 1}, 0.01,
                            100, true, rng, "c1", weightLimit);
  ValueId main = quantizedConv(g, h, out, ConvAttrs{{1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1}, 0.02,
                               5, false, rng, "c2", weightLimit);
  ValueId down = quantizedConv(g, x, out, ConvAttrs{{1, 1}, {2, 2}, {0, 0, 0, 0}, {1, 1}, 1}, 0.01,
                               100, false, rng, "down", weightLimit);
  ValueId sum = addNamed(g, "add", OpKind::Add, NoAttrs{},
                         {fakeQuantized(g, main, 0.031, 128, "c2.out"),
                          fakeQuantized(g, down, 0.027, 120, "down.out")});
  return addNamed(g, "relu", OpKind::Relu, NoAttrs{}, {sum});
}

// ResNet-50's downsampling block: the main branch's last int8 conv and the downsampling int8
// conv both make a quantization round trip before the Add, the ReLU and the block's
// quantization. The main branch's conv (whose branch ends first) writes its u8 output, and the
// downsampling conv adds it in its epilogue (AddDequantizedU8): no f32 round trip is written, no
// step dequantizes (here the main branch's DequantizeLinear comes after the downsampling conv in
// the graph's order until hoist-quantization moves it up). Bit for bit the lowered graph on the
// reference executor, and the QDQ graph within 2e-2.
TEST(CompileModel, ADownsamplingBlockAddsTheMainBranchAsU8) {
  Graph g;
  std::mt19937 rng(79);
  ValueId x = g.addInput("x", {DType::F32, Shape{1, 8, 10, 9}, {}});
  ValueId sum = downsamplingBlock(g, x, 16, 32, kAvx2Int8WeightLimit, rng);
  g.addOutput(fakeQuantized(g, sum, 0.0437, 0, "out"));
  auto lowered = lowerQuantized(g, true);
  ASSERT_TRUE(lowered.isOk()) << lowered.error().message();
  const Shape shape{1, 32, 5, 5};
  auto run = runOnRandomInput(*lowered, Shape{1, 8, 10, 9}, shape, shape, false, rng);
  ASSERT_TRUE(run.isOk()) << run.error().message();
  const auto& [in, out, compiled] = *run;
  ASSERT_EQ(compiled.kernels.size(), 3u);
  EXPECT_EQ(compiled.stats.int8Kernels, 3);
  const std::string& mainConv = compiled.kernels[1].label;
  const std::string& block = compiled.kernels[2].label;
  // Its integers k, then the scale over the output scale (QLinearConv's requantization).
  EXPECT_NE(mainConv.find("+ bias+mul+quantize in int8"), std::string::npos) << mainConv;
  // (The block output is the model output: a round trip to f32.)
  EXPECT_NE(block.find("+addu8+relu+scale+round+clip+scale in int8"), std::string::npos) << block;
  auto exact = runReference(*lowered, {in});
  ASSERT_TRUE(exact.isOk()) << exact.error().message();
  EXPECT_EQ(relativeL2(out, (*exact)[0]), 0.0);
  auto qdq = runReference(g, {in});
  ASSERT_TRUE(qdq.isOk()) << qdq.error().message();
  EXPECT_LT(relativeL2(out, (*qdq)[0]), 2e-2);
}

// `b`'s graph (one input, one output of `outShape`) compiled with --precision bf16 for the twin
// target (AMX) and run in process through the twins: its kernels, each of which must be in bf16
// on AMX tiles, and the output's relative L2 error against the reference executor.
struct AmxBf16Run {
  std::vector<driver::HeavyKernel> kernels;
  double relativeError = -1;
};
// --precision bf16 for `jit`'s target on AVX-512 (AMX where it has it).
driver::CompileOptions bf16Options(const Jit& jit) {
  driver::CompileOptions options;
  options.target = jit.target();
  options.isa = Isa::Avx512;
  options.precision = driver::Precision::Bf16;
  return options;
}

Expected<AmxBf16Run> runBf16OnAmxTwins(const Builder& b, const Shape& outShape) {
  std::shared_ptr<Jit> twinJit = test::sharedTwinJit();
  if (!twinJit) return makeError("no twin JIT");
  TUNEC_ASSIGN_OR_RETURN(driver::CompiledModel compiled,
                         driver::compileModel(b.g, *twinJit, bf16Options(*twinJit)));
  AmxBf16Run run{compiled.kernels, -1};
  for (const driver::HeavyKernel& k : run.kernels)
    if (k.label.find(" in bf16 on AMX tiles") == std::string::npos)
      return makeError("not in bf16 on AMX tiles: ", k.label);
  TUNEC_ASSIGN_OR_RETURN(auto want, runReference(b.g, b.inputs));
  Tensor out(DType::F32, outShape);
  TUNEC_ASSIGN_OR_RETURN(auto executor, driver::loadInProcess(std::move(compiled), twinJit, 1));
  const void* ins[] = {b.inputs[0].data()};
  void* outs[] = {out.data()};
  TUNEC_TRY(executor->run(ins, outs));
  run.relativeError = relativeL2(out, want[0]);
  return run;
}

// A bf16 ResNet block on AMX, on any machine: --precision bf16 compiled for a target with AMX
// puts the 64-channel convolutions (a padded 3x3, a strided 1x1 that copies only its pixels,
// 1x1s, the residual add in the epilogue) on tdpbf16ps; run in process through the twins, the
// output is within bf16's error of the f32 reference.
TEST(CompileModel, ABf16BlockOnAmxTwinsMatchesTheReference) {
  Builder b;
  ValueId x = b.input({1, 64, 10, 9});
  ValueId h = b.op(OpKind::Conv, conv(3, 1, 1), {x, b.constant({64, 64, 3, 3}), b.constant({64})});
  h = b.op(OpKind::Relu, NoAttrs{}, {h});
  h = b.op(OpKind::Conv, conv(1, 1, 0), {h, b.constant({128, 64, 1, 1}), b.constant({128})});
  ValueId down =
      b.op(OpKind::Conv, conv(1, 1, 0), {x, b.constant({128, 64, 1, 1}), b.constant({128})});
  ValueId y = b.op(OpKind::Relu, NoAttrs{}, {b.op(OpKind::Add, NoAttrs{}, {h, down})});
  ValueId strided =
      b.op(OpKind::Conv, conv(1, 2, 0), {y, b.constant({32, 128, 1, 1}), b.constant({32})});
  b.g.addOutput(strided);
  auto run = runBf16OnAmxTwins(b, Shape{1, 32, 5, 5});
  ASSERT_TRUE(run.isOk()) << run.error().message();
  EXPECT_EQ(run->kernels.size(), 4u);
  EXPECT_LT(run->relativeError, 2e-2);
  EXPECT_GT(run->relativeError, 0.0); // really rounded to bf16
}

// BERT's attention block with --precision bf16 for a target with AMX, run in process through
// the twins: the merged projections, the fused attention (Q packed in tiles, K and V packed per
// head into panels of k padded to 32: heads of 24, 22 tokens) and the output projection all on
// AMX tiles, the reference's values within bf16's 2e-2.
TEST(CompileModel, AnAttentionBlockInBf16OnAmxTwinsMatchesTheReference) {
  Builder b;
  ASSERT_TRUE(mergedAttentionBlock(b, 22, 2, 24));
  auto run = runBf16OnAmxTwins(b, Shape{1, 22, 48});
  ASSERT_TRUE(run.isOk()) << run.error().message();
  int attention = 0;
  for (const driver::HeavyKernel& k : run->kernels) attention += k.label.rfind("Attention", 0) == 0;
  EXPECT_EQ(attention, 2) << "its scores and its values";
  EXPECT_LT(run->relativeError, 2e-2);
  EXPECT_GT(run->relativeError, 0.0); // really rounded to bf16
}

// --precision bf16 between layers, on any machine: a bottleneck of convolutions (1x1, a padded
// 3x3, 1x1 with the residual, a strided 1x1, a 3x3 whose input is also its residual) and an MLP
// (a MatMul with Gelu, then one with a bias), compiled for a target with AMX and for one with
// only vdpbf16ps, and run in process through the twins. The activations that only bf16 kernels
// read as their A are stored as bf16 (the first two of the bottleneck, the MLP's hidden layer);
// those read as a residual or by the model stay f32. The output equals, bit for bit, the same
// model with every activation f32 (each reader rounded it to bf16 itself), and the reference
// within bf16's error.
TEST(CompileModel, Bf16ActivationsBetweenBf16KernelsEqualTheF32StoredModelBitForBit) {
  Builder b;
  ValueId x = b.input({1, 64, 10, 9});
  ValueId h = b.op(OpKind::Conv, conv(1, 1, 0), {x, b.constant({32, 64, 1, 1}), b.constant({32})});
  h = b.op(OpKind::Relu, NoAttrs{}, {h});
  h = b.op(OpKind::Conv, conv(3, 1, 1), {h, b.constant({32, 32, 3, 3}), b.constant({32})});
  h = b.op(OpKind::Relu, NoAttrs{}, {h});
  h = b.op(OpKind::Conv, conv(1, 1, 0), {h, b.constant({64, 32, 1, 1}), b.constant({64})});
  ValueId y = b.op(OpKind::Relu, NoAttrs{}, {b.op(OpKind::Add, NoAttrs{}, {h, x})});
  ValueId s = b.op(OpKind::Conv, conv(1, 2, 0), {y, b.constant({32, 64, 1, 1}), b.constant({32})});
  ValueId t = b.op(OpKind::Conv, conv(3, 1, 1), {s, b.constant({32, 32, 3, 3}), b.constant({32})});
  b.g.addOutput(b.op(OpKind::Add, NoAttrs{}, {t, s}));
  Builder mlp;
  ValueId a = mlp.input({1, 24, 48});
  ValueId hidden =
      mlp.op(OpKind::Add, NoAttrs{},
             {mlp.op(OpKind::MatMul, NoAttrs{}, {a, mlp.constant({48, 64})}), mlp.constant({64})});
  hidden = mlp.op(OpKind::Gelu, GeluAttrs{false}, {hidden});
  mlp.g.addOutput(mlp.op(
      OpKind::Add, NoAttrs{},
      {mlp.op(OpKind::MatMul, NoAttrs{}, {hidden, mlp.constant({64, 48})}), mlp.constant({48})}));
  std::shared_ptr<Jit> amxJit = test::sharedTwinJit(), vector = test::sharedVectorBf16TwinJit();
  ASSERT_TRUE(amxJit && vector);
  struct Case {
    Builder* model;
    Shape out;
    int64_t stored;      // activations stored as bf16
    int bf16In, bf16Out; // kernels reading / writing them
  };
  for (const Case& c :
       {Case{&b, Shape{1, 32, 5, 5}, 2, 2, 2}, Case{&mlp, Shape{1, 24, 48}, 1, 1, 1}})
    for (const std::shared_ptr<Jit>& jit : {amxJit, vector}) {
      auto want = runReference(c.model->g, c.model->inputs);
      ASSERT_TRUE(want.isOk()) << want.error().message();
      std::vector<Tensor> outs;
      for (bool bf16Activations : {true, false}) {
        driver::CompileOptions options = bf16Options(*jit);
        options.bf16Activations = bf16Activations;
        auto compiled = driver::compileModel(c.model->g, *jit, options);
        ASSERT_TRUE(compiled.isOk()) << compiled.error().message();
        EXPECT_EQ(compiled->stats.bf16Activations, bf16Activations ? c.stored : 0);
        int in = 0, out = 0;
        for (const driver::HeavyKernel& k : compiled->kernels) {
          EXPECT_TRUE(isBf16Gemm(workloadTypes(k.workload))) << k.label;
          const KernelTypes types = workloadTypes(k.workload);
          in += types.src == DType::BF16, out += types.dst == DType::BF16;
          EXPECT_EQ(types.src == DType::BF16, k.label.find("(bf16 in") != std::string::npos)
              << k.label;
        }
        EXPECT_EQ(in, bf16Activations ? c.bf16In : 0);
        EXPECT_EQ(out, bf16Activations ? c.bf16Out : 0);
        auto executor = driver::loadInProcess(std::move(*compiled), jit, 1);
        ASSERT_TRUE(executor.isOk()) << executor.error().message();
        outs.emplace_back(DType::F32, c.out);
        const void* ins[] = {c.model->inputs[0].data()};
        void* outPtrs[] = {outs.back().data()};
        ASSERT_TRUE((*executor)->run(ins, outPtrs).isOk());
      }
      for (int64_t i = 0; i < outs[0].numel(); ++i)
        ASSERT_EQ(std::bit_cast<uint32_t>(outs[0].dataAs<float>()[i]),
                  std::bit_cast<uint32_t>(outs[1].dataAs<float>()[i]))
            << "element " << i << (jit == amxJit ? " on AMX" : " on vdpbf16ps");
      EXPECT_LT(relativeL2(outs[0], (*want)[0]), 2e-2);
      EXPECT_GT(relativeL2(outs[0], (*want)[0]), 0.0); // really rounded to bf16
    }
}

// An inverted residual (MobileNetV2's: a 1x1 expansion, a depthwise 3x3, a 1x1 projection and
// the residual) with --precision bf16, compiled for a target with AMX and for one with only
// vdpbf16ps and run in process through the twins: the depthwise conv, which has no bf16 form,
// reads the expansion's output and writes its own as bf16 (f32 arithmetic), so both activations
// are stored as bf16. Its input was f32 before, so the result differs from the f32-stored build's,
// within bf16's rounding, and stays within 2e-2 of the reference.
TEST(CompileModel, AnInvertedResidualStoresItsDepthwiseActivationsAsBf16) {
  Builder b;
  ValueId x = b.input({1, 32, 10, 9});
  ValueId h = b.op(OpKind::Conv, conv(1, 1, 0), {x, b.constant({64, 32, 1, 1}), b.constant({64})});
  h = b.op(OpKind::Clip, ClipAttrs{0.0, 6.0}, {h});
  h = b.op(OpKind::Conv, conv(3, 1, 1, 64), {h, b.constant({64, 1, 3, 3}), b.constant({64})});
  h = b.op(OpKind::Clip, ClipAttrs{0.0, 6.0}, {h});
  h = b.op(OpKind::Conv, conv(1, 1, 0), {h, b.constant({32, 64, 1, 1}), b.constant({32})});
  b.g.addOutput(b.op(OpKind::Add, NoAttrs{}, {h, x}));
  auto want = runReference(b.g, b.inputs);
  ASSERT_TRUE(want.isOk()) << want.error().message();
  std::shared_ptr<Jit> amxJit = test::sharedTwinJit(), vector = test::sharedVectorBf16TwinJit();
  ASSERT_TRUE(amxJit && vector);
  for (const std::shared_ptr<Jit>& jit : {amxJit, vector}) {
    std::vector<Tensor> outs;
    for (bool bf16Activations : {true, false}) {
      driver::CompileOptions options = bf16Options(*jit);
      options.bf16Activations = bf16Activations;
      auto compiled = driver::compileModel(b.g, *jit, options);
      ASSERT_TRUE(compiled.isOk()) << compiled.error().message();
      ASSERT_EQ(compiled->kernels.size(), 3u);
      EXPECT_EQ(compiled->stats.bf16Activations, bf16Activations ? 2 : 0);
      const driver::HeavyKernel& depthwise = compiled->kernels[1];
      const KernelTypes stored{DType::BF16, DType::F32, DType::F32, DType::BF16};
      EXPECT_TRUE(workloadTypes(depthwise.workload) == (bf16Activations ? stored : KernelTypes{}))
          << depthwise.label;
      EXPECT_EQ(depthwise.label.find(" (bf16 in and out)") != std::string::npos, bf16Activations)
          << depthwise.label;
      auto executor = driver::loadInProcess(std::move(*compiled), jit, 1);
      ASSERT_TRUE(executor.isOk()) << executor.error().message();
      outs.emplace_back(DType::F32, Shape{1, 32, 10, 9});
      const void* ins[] = {b.inputs[0].data()};
      void* outPtrs[] = {outs.back().data()};
      ASSERT_TRUE((*executor)->run(ins, outPtrs).isOk());
    }
    EXPECT_LT(relativeL2(outs[0], (*want)[0]), 2e-2);
    EXPECT_GT(relativeL2(outs[0], outs[1]), 0.0) << "the depthwise conv read the rounded input";
    EXPECT_LT(relativeL2(outs[0], outs[1]), 1e-2);
  }
}

// A kernel that reads or writes activations stored as bf16 has a workload key of its own; until
// it has records it takes those of its form with f32 activations (a database tuned before):
// kBf16Types for the convolutions, all f32 for the depthwise conv.
TEST(CompileModel, Bf16ActivationKernelsTakeTheRecordsOfTheirF32ActivationForm) {
  Builder b;
  ValueId x = b.input({1, 32, 8, 8});
  ValueId h = b.op(OpKind::Conv, conv(1, 1, 0), {x, b.constant({64, 32, 1, 1}), b.constant({64})});
  h = b.op(OpKind::Conv, conv(3, 1, 1, 64), {h, b.constant({64, 1, 3, 3}), b.constant({64})});
  b.g.addOutput(
      b.op(OpKind::Conv, conv(1, 1, 0), {h, b.constant({32, 64, 1, 1}), b.constant({32})}));
  std::shared_ptr<Jit> jit = test::sharedVectorBf16TwinJit();
  ASSERT_TRUE(jit);
  driver::CompileOptions options = bf16Options(*jit);
  options.bf16Activations = false;
  auto f32Stored = driver::compileModel(b.g, *jit, options);
  ASSERT_TRUE(f32Stored.isOk()) << f32Stored.error().message();
  ASSERT_EQ(f32Stored->kernels.size(), 3u);
  std::string path = (std::filesystem::temp_directory_path() /
                      ("tunec_bf16_fallback_" + std::to_string(getpid()) + ".db"))
                         .string();
  std::filesystem::remove(path);
  {
    auto database = db::TuningDatabase::open(path);
    ASSERT_TRUE(database.isOk()) << database.error().message();
    std::vector<db::Record> rows;
    for (const driver::HeavyKernel& k : f32Stored->kernels) {
      db::Record r = matmulRecord(toJson(k.workload), toJson(k.config), 1,
                                  db::TargetInfo::fromTarget(jit->target()));
      r.templateVersion = templateVersion(templateKind(k.workload));
      rows.push_back(r);
    }
    ASSERT_TRUE(database->insert(rows).isOk());
    options.bf16Activations = true;
    options.database = &*database;
    auto stored = driver::compileModel(b.g, *jit, options);
    ASSERT_TRUE(stored.isOk()) << stored.error().message();
    EXPECT_EQ(stored->stats.bf16Activations, 2);
    for (size_t i = 0; i < 3; ++i) {
      const driver::HeavyKernel& k = stored->kernels[i];
      EXPECT_NE(toJson(k.workload), toJson(f32Stored->kernels[i].workload)) << k.label;
      EXPECT_TRUE(k.tuned) << k.label;
      EXPECT_EQ(toJson(k.config), toJson(f32Stored->kernels[i].config)) << k.label;
    }
  }
  std::filesystem::remove(path);
}

// A whole int8 model on AMX, on any machine: a downsampling block of 64-channel int8
// convolutions (a strided 3x3, 1x1s, the residual Add) and a Gemm, compiled for a target with
// AMX and run in process through the twins (codegen/tile_ops.h). Every layer runs on AMX's
// tdpbusd, and the output equals, bit for bit, the same model on this machine's own int8
// kernels, and the lowered graph on the reference executor within a quantization step's ties.
TEST(CompileModel, AnInt8ModelOnAmxTwinsEqualsTheVectorKernelsBitForBit) {
  Graph g;
  std::mt19937 rng(83);
  ValueId x = g.addInput("x", {DType::F32, Shape{1, 64, 11, 10}, {}});
  ValueId sum = downsamplingBlock(g, x, 64, 128, 127, rng);
  ValueId flat = addNamed(g, "flat", OpKind::Reshape, ReshapeAttrs{{1, 128 * 6 * 5}}, {sum});
  g.addOutput(quantizedLinear(g, flat, 10, 127, 0.0437, 0, rng, "fc"));
  auto lowered = lowerQuantized(g, true);
  ASSERT_TRUE(lowered.isOk()) << lowered.error().message();
  std::shared_ptr<Jit> twinJit = test::sharedTwinJit();
  ASSERT_TRUE(twinJit);
  driver::CompileOptions options;
  options.target = twinJit->target();
  options.isa = Isa::Avx512;
  auto compiled = driver::compileModel(*lowered, *twinJit, options);
  ASSERT_TRUE(compiled.isOk()) << compiled.error().message();
  ASSERT_EQ(compiled->kernels.size(), 4u);
  for (const driver::HeavyKernel& k : compiled->kernels) {
    EXPECT_EQ(configIsa(k.config), Isa::Amx) << k.label;
    EXPECT_NE(k.label.find(" in int8 on AMX tiles"), std::string::npos) << k.label;
  }
  Tensor in(DType::F32, Shape{1, 64, 11, 10}), out(DType::F32, Shape{1, 10});
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  for (int64_t i = 0; i < in.numel(); ++i) in.setDouble(i, u(rng));
  auto executor = driver::loadInProcess(std::move(*compiled), twinJit, 1);
  ASSERT_TRUE(executor.isOk()) << executor.error().message();
  const void* ins[] = {in.data()};
  void* outs[] = {out.data()};
  ASSERT_TRUE((*executor)->run(ins, outs).isOk());
  auto exact = runReference(*lowered, {in});
  ASSERT_TRUE(exact.isOk()) << exact.error().message();
  Tensor here(DType::F32, Shape{1, 10});
  void* hereOuts[] = {here.data()};
  ASSERT_TRUE(compileAndRun(*lowered, {in.data()}, {hereOuts[0]}).isOk());
  for (int64_t i = 0; i < out.numel(); ++i)
    EXPECT_EQ(out.getDouble(i), here.getDouble(i))
        << "element " << i << " reference " << (*exact)[0].getDouble(i);
  // The reference divides where the epilogue multiplies by 1 / s in the downsampling conv's
  // f32 round trip (lower-quantize-round-trips: an exact tie may round to the other neighbour).
  EXPECT_LT(relativeL2(out, (*exact)[0]), 2e-4);
}

// Two quantized convolutions of input `in`: a padded 3x3 to `mid` channels (ReLU; its input's
// zero point 100), then a 1x1 of stride `stride` to `oc` channels whose input zero point is `z`.
Graph twoQuantizedConvs(const Shape& in, int64_t mid, int64_t oc, int64_t stride, int z,
                        std::mt19937& rng) {
  Graph g;
  ValueId x = g.addInput("x", {DType::F32, in, {}});
  ValueId h = quantizedConv(g, x, mid, ConvAttrs{{3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1}, 0.01,
                            100, true, rng, "c1");
  g.addOutput(quantizedConv(g, h, oc, ConvAttrs{{1, 1}, {stride, stride}, {0, 0, 0, 0}, {1, 1}, 1},
                            0.02, z, false, rng, "c2"));
  return g;
}

// A model.so of int8 layers tells `tunec profile` which operations are int8 (their roof is the
// int8 dot product's peak): every int8 kernel's operations through tunec_model_step_int8_ops,
// none of an element step's, none of them bf16; a step out of range is an error.
TEST(CompileModel, Int8KernelsCountTheirOperationsForTheProfile) {
  std::mt19937 rng(71);
  Graph g = twoQuantizedConvs(Shape{1, 8, 9, 10}, 16, 8, 1, 5, rng);
  auto lowered = passes::lowerQuantizedLayers(g);
  ASSERT_TRUE(lowered.isOk()) << lowered.error().message();
  driver::CompileOptions options;
  options.target = hostTarget();
  options.isa = widestIsa(options.target);
  auto compiled = driver::compileModel(*lowered, *sharedJit(), options);
  ASSERT_TRUE(compiled.isOk()) << compiled.error().message();
  // vpdpbusd where the target has VNNI: the plan requires it, so a CPU without it refuses the
  // model.so at load instead of faulting on its first kernel.
  const bool vnni = options.isa == Isa::Avx512 && options.target.avx512vnni;
  EXPECT_EQ(compiled->plan.requiredFeatures.has(CpuFeature::avx512vnni), vnni)
      << compiled->plan.requiredFeatures.text();
  const std::string required = compiled->plan.requiredFeatures.text();
  auto written = writeTempModel(std::move(*compiled), "int8_ops");
  ASSERT_TRUE(written.isOk()) << written.error().message();
  const std::string path = *written;
  tunec_model* model = nullptr;
  ASSERT_EQ(tunec_model_load(path.c_str(), 1, &model), 0) << tunec_last_error();
  EXPECT_EQ(std::string(tunec_model_isa(model)), required);
  int int8Steps = 0, otherSteps = 0;
  for (int32_t i = 0; i < tunec_model_num_steps(model); ++i) {
    double flops = 0, int8 = -1, bf16 = -1;
    int64_t bytes = 0;
    int32_t generated = 0;
    ASSERT_EQ(tunec_model_step_cost(model, i, &flops, &bytes, &generated), 0);
    ASSERT_EQ(tunec_model_step_int8_ops(model, i, &int8), 0);
    ASSERT_EQ(tunec_model_step_bf16_flops(model, i, &bf16), 0);
    const std::string label = tunec_model_step_label(model, i);
    EXPECT_EQ(bf16, 0.0) << label;
    if (label.find(" in int8") != std::string::npos) {
      EXPECT_GT(int8, 0.0) << label;
      EXPECT_EQ(int8, flops) << label;
      ++int8Steps;
    } else {
      EXPECT_EQ(int8, 0.0) << label;
      ++otherSteps;
    }
  }
  EXPECT_EQ(int8Steps, 2);
  EXPECT_GE(otherSteps, 1); // the input's quantization
  double unused = 0;
  EXPECT_NE(tunec_model_step_int8_ops(model, 99, &unused), 0);
  EXPECT_NE(std::string(tunec_last_error()).find("out of range"), std::string::npos);
  tunec_model_free(model);
  std::filesystem::remove(path);
}

// Two quantized convolutions (a padded 3x3 whose input zero point is not 0, then a strided 1x1
// of its requantized output) run as two int8 kernels: the first reads the quantized input NCHW
// and writes the second's u8 input through its requantizing epilogue, NHWC; the result
// is the QDQ graph's reference within f32 rounding (7-bit weights: exact sums).
TEST(CompileModel, QuantizedConvolutionsRunAsInt8KernelsBetweenU8Tensors) {
  std::mt19937 rng(41);
  Graph g = twoQuantizedConvs(Shape{1, 16, 9, 10}, 24, 32, 2, 0, rng);
  auto lowered = passes::lowerQuantizedLayers(g);
  ASSERT_TRUE(lowered.isOk()) << lowered.error().message();
  Tensor in(DType::F32, Shape{1, 16, 9, 10}), got(DType::F32, Shape{1, 32, 5, 5});
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  for (int64_t i = 0; i < in.numel(); ++i) in.setDouble(i, u(rng));
  driver::CompiledModel compiled;
  Status ran = compileAndRun(*lowered, {in.data()}, {got.data()}, &compiled);
  ASSERT_TRUE(ran.isOk()) << ran.error().message();
  ASSERT_EQ(compiled.kernels.size(), 2u);
  for (const auto& k : compiled.kernels)
    EXPECT_NE(k.label.find(" in int8"), std::string::npos) << k.label;
  EXPECT_NE(compiled.kernels[0].label.find("+quantize (reads its input NCHW) in int8"),
            std::string::npos)
      << compiled.kernels[0].label;
  EXPECT_EQ(compiled.stats.int8Kernels, 2);
  // The model input's quantized copy is reordered to NHWC by the first kernel's padded copy (no
  // reorder step); between the kernels the u8 tensor stays NHWC.
  EXPECT_EQ(compiled.stats.reorders, 0);
  auto want = runReference(g, {in});
  ASSERT_TRUE(want.isOk()) << want.error().message();
  EXPECT_LT(relativeL2(got, (*want)[0]), 1e-5);
}

// Dynamic quantization: the scale and zero point of the activation are values of the run (here
// computed from model inputs, as DynamicQuantizeLinear computes them; a scale that is itself a
// model input is left to the f32 path); the int8 kernel reads its column scale and its correction
// (with the model's bias added in) as computed vectors, and the relu after it joins: one kernel,
// the reference's values within f32 rounding (7-bit weights: exact sums).
TEST(CompileModel, DynamicallyQuantizedLayerReadsItsComputedScalesInTheEpilogue) {
  Graph g;
  std::mt19937 rng(31);
  ValueId x = g.addInput("x", {DType::F32, Shape{2, 8, 64}, {}});
  ValueId s = g.addInput("s", {DType::F32, Shape{}, {}});
  ValueId z = g.addInput("z", {DType::U8, Shape{}, {}});
  auto node = [&](const std::string& name, OpKind kind, OpAttrs attrs, std::vector<ValueId> in) {
    auto id = g.addNode(name, kind, std::move(attrs), std::move(in), {name});
    EXPECT_TRUE(id.isOk()) << id.error().message();
    return g.node(*id).outputs[0];
  };
  s = node("s_computed", OpKind::Abs, NoAttrs{}, {s});
  z = node("z_computed", OpKind::Identity, NoAttrs{}, {z});
  ValueId xd = node("xd", OpKind::DequantizeLinear, QuantAttrs{1},
                    {node("xq", OpKind::QuantizeLinear, QuantAttrs{1}, {x, s, z}), s, z});
  Tensor wq(DType::I8, Shape{64, 24}), sb(DType::F32, Shape{24}), zb(DType::I8, Shape{24});
  for (int64_t i = 0; i < wq.numel(); ++i) wq.setInt(i, static_cast<int>(rng() % 129) - 64);
  for (int64_t j = 0; j < 24; ++j) sb.setDouble(j, 0.002 * (1 + j % 5));
  ValueId wd = node("wd", OpKind::DequantizeLinear, QuantAttrs{1},
                    {g.addConstant("wq", wq), g.addConstant("sb", sb), g.addConstant("zb", zb)});
  Tensor bias(DType::F32, Shape{24});
  for (int64_t j = 0; j < 24; ++j) bias.setDouble(j, 0.1 * static_cast<double>(j % 7) - 0.3);
  ValueId y = node("mm", OpKind::MatMul, NoAttrs{}, {xd, wd});
  y = node("bias", OpKind::Add, NoAttrs{}, {y, g.addConstant("b", bias)});
  g.addOutput(node("relu", OpKind::Relu, NoAttrs{}, {y}));
  auto lowered = passes::lowerQuantizedLayers(g);
  ASSERT_TRUE(lowered.isOk()) << lowered.error().message();
  Tensor in(DType::F32, Shape{2, 8, 64}), scale(DType::F32, Shape{}), zero(DType::U8, Shape{});
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  for (int64_t i = 0; i < in.numel(); ++i) in.setDouble(i, u(rng));
  scale.setDouble(0, 2.0 / 255), zero.setInt(0, 128);
  Tensor got(DType::F32, Shape{2, 8, 24});
  driver::CompiledModel compiled;
  Status ran =
      compileAndRun(*lowered, {in.data(), scale.data(), zero.data()}, {got.data()}, &compiled);
  ASSERT_TRUE(ran.isOk()) << ran.error().message();
  ASSERT_EQ(compiled.kernels.size(), 1u);
  EXPECT_NE(compiled.kernels[0].label.find("+ mul+bias+relu in int8"), std::string::npos)
      << compiled.kernels[0].label;
  auto want = runReference(g, {in, scale, zero});
  ASSERT_TRUE(want.isOk()) << want.error().message();
  EXPECT_LT(relativeL2(got, (*want)[0]), 1e-5);
}

// Two quantized layers: the second's QuantizeLinear joins the first int8 kernel's epilogue
// (QuantizeU8 last: the kernel writes the u8 A of the next), no element step quantizes, and the
// result is bit for bit the one with the quantization as its own step (the first layer's output
// also a model output, so that it cannot join).
TEST(CompileModel, TheNextLayersQuantizeJoinsTheInt8Epilogue) {
  std::vector<Tensor> results;
  for (bool hidden : {true, false}) {
    Graph g;
    std::mt19937 rng(21);
    ValueId x = g.addInput("x", {DType::F32, Shape{2, 8, 64}, {}});
    ValueId h = quantizedLinear(g, x, 48, kAvx2Int8WeightLimit, 0.01, 128, rng, "fc1");
    g.addOutput(quantizedLinear(g, h, 40, kAvx2Int8WeightLimit, 0.05, 3, rng, "fc2"));
    if (!hidden) g.addOutput(h);
    auto lowered = passes::lowerQuantizedLayers(g);
    ASSERT_TRUE(lowered.isOk()) << lowered.error().message();
    auto run =
        runOnRandomInput(*lowered, Shape{2, 8, 64}, Shape{2, 8, 40}, Shape{2, 8, 48}, !hidden, rng);
    ASSERT_TRUE(run.isOk()) << run.error().message();
    const auto& [in, y, compiled] = *run;
    ASSERT_EQ(compiled.kernels.size(), 2u);
    const std::string& first = compiled.kernels[0].label;
    EXPECT_EQ(first.find("quantize") != std::string::npos, hidden) << first;
    EXPECT_EQ(compiled.stats.quantizeSteps, hidden ? 1 : 2) << "the model input's, and fc2's";
    auto want = runReference(g, {in});
    ASSERT_TRUE(want.isOk()) << want.error().message();
    EXPECT_LT(relativeL2(y, (*want)[0]), 1e-2);
    results.push_back(y);
  }
  for (int64_t i = 0; i < results[0].numel(); ++i)
    ASSERT_EQ(results[0].getDouble(i), results[1].getDouble(i)) << "element " << i;
}

} // namespace
} // namespace tunec

namespace tunec {
namespace {

// The outline (what `inspect --fusion` and `--layouts` print) is what compile builds: the same
// steps with the same labels, each under the plan kernel it lowers, and the reorders compile
// inserts: the model input, once, for conv1 and a 1x1 conv (a plain input that only one padded
// conv reads is reordered by that conv's padded copy instead: the e2e and golden tests). NHWC
// in between; a Transpose reads conv2's NHWC output through strides (no reorder), and one to
// [N, H, W, C] is a view of those bytes.
TEST(CompileModel, OutlineIsTheCompiledStepsAndReorders) {
  Builder b;
  ValueId x = b.input({1, 3, 8, 8});
  ValueId c1 = b.op(OpKind::Conv, conv(3, 1, 1), {x, b.constant({4, 3, 3, 3})});
  ValueId side = b.op(OpKind::Conv, conv(1, 1, 0), {x, b.constant({2, 3, 1, 1})});
  ValueId r = b.op(OpKind::Relu, NoAttrs{}, {c1});
  ValueId p =
      b.op(OpKind::MaxPool, PoolAttrs{{2, 2}, {2, 2}, {0, 0, 0, 0}, {1, 1}, false, false, 2}, {r});
  ValueId c2 = b.op(OpKind::Conv, conv(3, 1, 1), {p, b.constant({4, 4, 3, 3})});
  ValueId gap = b.op(OpKind::GlobalAveragePool, NoAttrs{}, {c2});
  ValueId flat = b.op(OpKind::Flatten, AxisAttrs{1}, {gap}); // 1x1 spatial: no reorder
  ValueId t = b.op(OpKind::Transpose, TransposeAttrs{{0, 1, 3, 2}}, {c2}); // a strided copy
  ValueId v = b.op(OpKind::Transpose, TransposeAttrs{{0, 2, 3, 1}}, {c2}); // NHWC bytes: a view
  ValueId back =
      b.op(OpKind::Transpose, TransposeAttrs{{0, 3, 1, 2}}, {b.op(OpKind::Relu, NoAttrs{}, {v})});
  auto m = checkCompiled(b, {flat, t, back, side});
  driver::CompileOptions options;
  options.target = hostTarget();
  options.isa = widestIsa(options.target);
  auto o = driver::outlineCompile(b.g, options);
  ASSERT_TRUE(o.isOk()) << o.error().message();
  ASSERT_EQ(o->steps.size(), m.plan.steps.size());
  for (size_t i = 0; i < o->steps.size(); ++i) {
    EXPECT_EQ(o->steps[i].label, m.plan.steps[i].label);
    EXPECT_EQ(o->steps[i].generated, m.plan.steps[i].kind == rt::StepKind::Kernel);
  }
  EXPECT_EQ(driver::stepsSummary(o->stats), driver::stepsSummary(m.stats));
  ASSERT_EQ(o->reorders.size(), 1u);
  EXPECT_EQ(o->reorders[0].value, b.g.value(x).name);
  EXPECT_TRUE(o->reorders[0].toNhwc);
  EXPECT_GE(o->nhwcTensors, 3) << "conv1's, the pool's and conv2's outputs";
  // Flatten, and both permutes of conv2's NHWC bytes, are views; the Relu between them and the
  // [0, 1, 3, 2] Transpose are the loop kernels besides the input reorder, the pool and the GAP.
  EXPECT_GE(o->stats.aliases, 3);
}

} // namespace
} // namespace tunec

namespace tunec {
namespace {

// Concat, Split and Slice along channels keep an NHWC input NHWC (ShuffleNet's branches): the
// convolutions around them need no reorder, and the results match the reference.
TEST(CompileModel, ChannelConcatSplitAndSliceStayNhwc) {
  Builder b;
  ValueId x = b.input({1, 8, 9, 7});
  ValueId a = b.op(OpKind::Conv, conv(1, 1, 0), {x, b.constant({6, 8, 1, 1})});
  ValueId c = b.op(OpKind::Conv, conv(3, 1, 1), {x, b.constant({10, 8, 3, 3})});
  ValueId cat = b.op(OpKind::Concat, AxisAttrs{1}, {a, c});
  ValueId s = b.op(OpKind::Slice, SliceAttrs{{0, 3, 0, 0}, {1, 1, 1, 1}, {1, 13, 9, 7}, {}}, {cat});
  ValueId s0 = b.op(OpKind::Split, SplitAttrs{1, {4, 9}}, {s}, 2);
  ValueId s1 = s0 + 1; // the second output, made right after the first
  ValueId y0 = b.op(OpKind::Conv, conv(1, 1, 0), {s0, b.constant({5, 4, 1, 1})});
  ValueId y1 = b.op(OpKind::Conv, conv(3, 1, 1, 9), {s1, b.constant({9, 1, 3, 3})});
  auto m = checkCompiled(b, {y0, y1});
  EXPECT_EQ(m.stats.reorders, 1) << "the model input only (outputs are copied to plain buffers)";
}

} // namespace
} // namespace tunec

namespace tunec {
namespace {

// ShuffleNet's unit after recognize-channel-shuffle: the channel shuffle's two halves are
// Gathers of the concatenated channels. Without the channel passes each is one copy in plain
// layout (where an interleaved channel is a contiguous plane); the channel passes below make
// them ranges read and written in place. Both against the reference.
TEST(CompileModel, ChannelShuffleGathersMatchTheReference) {
  Builder b;
  ValueId x = b.input({1, 8, 6, 5});
  ValueId a = b.op(OpKind::Conv, conv(1, 1, 0), {x, b.constant({6, 8, 1, 1})});
  ValueId c = b.op(OpKind::Conv, conv(3, 1, 1), {x, b.constant({6, 8, 3, 3})});
  ValueId cat = b.op(OpKind::Concat, AxisAttrs{1}, {a, c});
  Tensor perm(DType::I64, Shape{12}), lo(DType::I64, Shape{6}), hi(DType::I64, Shape{6});
  for (int64_t j = 0; j < 6; ++j)
    for (int64_t i = 0; i < 2; ++i) perm.dataAs<int64_t>()[j * 2 + i] = i * 6 + j;
  std::copy_n(perm.dataAs<int64_t>(), 6, lo.dataAs<int64_t>());
  std::copy_n(perm.dataAs<int64_t>() + 6, 6, hi.dataAs<int64_t>());
  ValueId first = b.op(OpKind::Gather, AxisAttrs{1}, {cat, b.g.addConstant("lo", lo)});
  ValueId second = b.op(OpKind::Gather, AxisAttrs{1}, {cat, b.g.addConstant("hi", hi)});
  ValueId y0 = b.op(OpKind::Conv, conv(1, 1, 0), {first, b.constant({5, 6, 1, 1})});
  ValueId y1 = b.op(OpKind::Conv, conv(3, 1, 1, 6), {second, b.constant({6, 1, 3, 3})});
  Builder passed = b;
  passed.g.addOutput(y0);
  passed.g.addOutput(y1);
  auto m = checkCompiled(b, {y0, y1});
  // The input to NHWC, the concatenation (written in place by both convs) to plain, each half
  // back to NHWC.
  EXPECT_EQ(m.stats.reorders, 4);
  EXPECT_EQ(m.stats.loopKernels, 4 + 2 + 2) << "4 reorders, 2 Gathers, 2 outputs";
  // After the channel passes: the Concat is [a's first 3 channels, c, a's last 3] (a split in
  // two convs writing their parts in place) and the 1x1 conv absorbs its half's permutation and
  // reads it in place. The depthwise conv's half interleaves c and a channel by channel: a
  // Gather in plain layout (runs of one channel copy faster as planes) between two reorders.
  for (auto pass :
       {passes::orderConcatForGathers, passes::foldSliceOfGather, passes::splitConvForSlices,
        passes::pushGathersThroughDepthwise, passes::absorbChannelGathers}) {
    auto next = pass(passed.g);
    ASSERT_TRUE(next.isOk()) << next.error().message();
    passed.g = std::move(*next);
  }
  m = checkCompiled(passed, passed.g.outputs());
  EXPECT_EQ(m.stats.generatedKernels, 5) << "a split in two";
  EXPECT_EQ(m.stats.reorders, 3) << "the input, the Concat to plain, the half back";
  EXPECT_EQ(m.stats.loopKernels, 3 + 1 + 2) << "3 reorders, the depthwise half, 2 outputs";
}

// BERT's attention block after the passes: Q, K and V merged into one MatMul whose split output
// the kernel writes as three dense tensors, the head transposes read in place, and the fused
// attention: three generated kernels (the projections, attention, the output projection) and
// no loop kernel.
TEST(CompileModel, MergedProjectionsFeedFusedAttention) {
  Builder b;
  ASSERT_TRUE(mergedAttentionBlock(b, 21, 2, 16));
  auto m = checkCompiled(b, {b.g.outputs()[0]});
  EXPECT_EQ(m.stats.generatedKernels, 3);
  EXPECT_EQ(m.stats.loopKernels, 0);
  EXPECT_EQ(m.stats.foldedTransposes, 4);
  bool split = false;
  for (const auto& kernel : m.kernels)
    split |= kernel.label.find("split 3 ways") != std::string::npos;
  EXPECT_TRUE(split);
}

} // namespace
} // namespace tunec

namespace tunec {
namespace {

// BERT's output projection: MatMul, bias, residual add and LayerNorm are one generated kernel;
// a LayerNorm after a matmul of computed operands stays a loop kernel.
TEST(CompileModel, LayerNormEndsTheMatmulsEpilogue) {
  for (int threads : {1, 2}) {
    Builder b;
    ValueId x = b.input({1, 13, 40});
    ValueId y = b.op(OpKind::MatMul, NoAttrs{}, {x, b.constant({40, 24})});
    y = b.op(OpKind::Add, NoAttrs{}, {y, b.constant({24})});
    y = b.op(OpKind::Add, NoAttrs{}, {y, b.input({1, 13, 24})});
    y = b.op(OpKind::LayerNormalization, NormAttrs{-1, 1e-5f},
             {y, b.constant({24}), b.constant({24})});
    ValueId z = b.op(OpKind::MatMul, NoAttrs{}, {x, b.input({1, 40, 8})});
    z = b.op(OpKind::LayerNormalization, NormAttrs{-1, 1e-5f},
             {z, b.constant({8}), b.constant({8})});
    auto m = checkCompiled(b, {y, z}, threads);
    EXPECT_EQ(m.stats.generatedKernels, 2);
    EXPECT_EQ(m.stats.loopKernels, 1) << "the LayerNorm after the computed-operand MatMul";
    bool fused = false;
    for (const auto& k : m.kernels)
      fused |= k.label.find("bias+add+layernorm") != std::string::npos;
    EXPECT_TRUE(fused);
  }
}

} // namespace
} // namespace tunec

namespace tunec {
namespace {

// Squeeze-excite on two images: the channel scale (Mul by the sigmoid of the excitation) is the
// prologue of the 1x1 projection, not a loop kernel; each image reads its own scales.
TEST(CompileModel, SqueezeExciteScaleIsTheProjectionsPrologue) {
  for (int threads : {1, 2}) {
    Builder b;
    ValueId x = b.input({2, 16, 7, 6});
    ValueId y =
        b.op(OpKind::Conv, conv(3, 1, 1, 16), {x, b.constant({16, 1, 3, 3}), b.constant({16})});
    y = b.op(OpKind::Swish, AlphaBetaAttrs{1.f, 0.f}, {y});
    ValueId s = b.op(OpKind::GlobalAveragePool, NoAttrs{}, {y});
    s = b.op(OpKind::Conv, conv(1, 1, 0), {s, b.constant({4, 16, 1, 1}), b.constant({4})});
    s = b.op(OpKind::Relu, NoAttrs{}, {s});
    s = b.op(OpKind::Conv, conv(1, 1, 0), {s, b.constant({16, 4, 1, 1}), b.constant({16})});
    s = b.op(OpKind::Sigmoid, NoAttrs{}, {s});
    ValueId z = b.op(OpKind::Mul, NoAttrs{}, {y, s});
    z = b.op(OpKind::Conv, conv(1, 1, 0), {z, b.constant({24, 16, 1, 1}), b.constant({24})});
    auto m = checkCompiled(b, {z}, threads);
    EXPECT_EQ(m.stats.generatedKernels, 4);
    EXPECT_EQ(m.stats.loopKernels, 3) << "the input reorder, the pool and the output copy";
    bool scaled = false;
    for (const auto& k : m.kernels) scaled |= k.label.find("channel-scaled") != std::string::npos;
    EXPECT_TRUE(scaled);
  }
}

} // namespace
} // namespace tunec

namespace tunec {
namespace {

// A per-channel multiply joins epilogues (after a Conv's ReLU, where it cannot fold into the
// weights), and a matmul's [N, H, W, C] rows read as NHWC through the permute to [N, C, H, W]
// keep their epilogue going: ConvNeXt's Linear, permute back, layer scale and residual are one
// generated kernel.
TEST(CompileModel, ChannelScaleAndEpilogueThroughTheNhwcPermute) {
  Builder b;
  ValueId x = b.input({1, 16, 4, 5});
  ValueId c = b.op(OpKind::Conv, conv(3, 1, 1), {x, b.constant({16, 16, 3, 3}), b.constant({16})});
  c = b.op(OpKind::Relu, NoAttrs{}, {c});
  c = b.op(OpKind::Mul, NoAttrs{}, {c, b.constant({16, 1, 1})});
  ValueId t = b.op(OpKind::Transpose, TransposeAttrs{{0, 2, 3, 1}}, {c}); // a view of NHWC
  ValueId y = b.op(OpKind::MatMul, NoAttrs{}, {t, b.constant({16, 16})});
  y = b.op(OpKind::Add, NoAttrs{}, {y, b.constant({16})});
  y = b.op(OpKind::Transpose, TransposeAttrs{{0, 3, 1, 2}}, {y});
  y = b.op(OpKind::Mul, NoAttrs{}, {b.constant({16, 1, 1}), y});
  y = b.op(OpKind::Add, NoAttrs{}, {x, y});
  auto m = checkCompiled(b, {y});
  EXPECT_EQ(m.stats.generatedKernels, 2);
  EXPECT_EQ(m.stats.loopKernels, 2) << "the input's reorder and the output's copy";
  ASSERT_EQ(m.kernels.size(), 2u);
  EXPECT_NE(m.kernels[0].label.find("bias+relu+mul"), std::string::npos) << m.kernels[0].label;
  EXPECT_NE(m.kernels[1].label.find("bias+mul+add"), std::string::npos) << m.kernels[1].label;
}

} // namespace
} // namespace tunec

namespace tunec {
namespace {

// PRelu with one slope per channel (or one for all) joins a Conv's, a depthwise Conv's and a
// MatMul's epilogue; slopes that are computed do not.
TEST(CompileModel, PReluJoinsTheEpilogue) {
  for (int anchor = 0; anchor < 3; ++anchor) {
    Builder b;
    ValueId y, slope;
    if (anchor < 2) {
      ValueId x = b.input({1, 16, 6, 7});
      y = anchor == 0 ? b.op(OpKind::Conv, conv(3, 1, 1), {x, b.constant({16, 16, 3, 3})})
                      : b.op(OpKind::Conv, conv(3, 1, 1, 16), {x, b.constant({16, 1, 3, 3})});
      slope = b.constant({16, 1, 1});
    } else {
      y = b.op(OpKind::MatMul, NoAttrs{}, {b.input({9, 20}), b.constant({20, 16})});
      slope = b.constant({1});
    }
    ValueId z = b.op(OpKind::PRelu, NoAttrs{}, {y, slope});
    auto m = checkCompiled(b, {z});
    ASSERT_EQ(m.kernels.size(), 1u);
    EXPECT_NE(m.kernels[0].label.find("prelu"), std::string::npos) << m.kernels[0].label;
  }
  Builder b;
  ValueId y = b.op(OpKind::MatMul, NoAttrs{}, {b.input({9, 20}), b.constant({20, 16})});
  ValueId z = b.op(OpKind::PRelu, NoAttrs{}, {y, b.input({16})});
  auto m = checkCompiled(b, {z});
  EXPECT_EQ(m.stats.loopKernels, 1) << "computed slopes: a loop kernel";
}

} // namespace
} // namespace tunec

namespace tunec {
namespace {

// A toy decoder of symbolic sequence (1..4) and past (0..12): token embeddings as Q, K and V of 2
// heads of 8, present = Concat(past, this run's K/V), the attention over the whole context, and
// logits over 10 tokens. Its caches are kept in place.
Graph toyDecoder(const Dim& sequence, const Dim& past) {
  Graph g;
  std::mt19937 rng(21);
  ValueId ids = g.addInput("input_ids", {DType::I64, Shape(std::vector<Dim>{1, sequence}), {}});
  ValueId pastK =
      g.addInput("past_key_values.0.key", {DType::F32, Shape(std::vector<Dim>{1, 2, past, 8}), {}});
  ValueId pastV = g.addInput("past_key_values.0.value",
                             {DType::F32, Shape(std::vector<Dim>{1, 2, past, 8}), {}});
  int at = 0;
  auto op = [&](OpKind kind, OpAttrs attrs, std::vector<ValueId> in) {
    std::string name = "t" + std::to_string(at++);
    auto n = g.addNode(name, kind, std::move(attrs), std::move(in), {name + "_out"});
    EXPECT_TRUE(n.isOk()) << n.error().message();
    return g.node(*n).outputs[0];
  };
  auto heads = [&](const std::string& table) { // [1, sequence, 16] -> [1, 2, sequence, 8]
    ValueId e = op(OpKind::Gather, AxisAttrs{0},
                   {g.addConstant(table, randomTensor(DType::F32, Shape{10, 16}, rng)), ids});
    e = op(OpKind::Reshape, ReshapeAttrs{{1, sequence, 2, 8}}, {e});
    return op(OpKind::Transpose, TransposeAttrs{{0, 2, 1, 3}}, {e});
  };
  ValueId q = heads("wq"), k = heads("wk"), v = heads("wv");
  ValueId presentK = op(OpKind::Concat, AxisAttrs{2}, {pastK, k});
  ValueId presentV = op(OpKind::Concat, AxisAttrs{2}, {pastV, v});
  ValueId kt = op(OpKind::Transpose, TransposeAttrs{{0, 1, 3, 2}}, {presentK});
  ValueId p =
      op(OpKind::Softmax, SoftmaxAttrs{-1, false}, {op(OpKind::MatMul, NoAttrs{}, {q, kt})});
  ValueId y = op(OpKind::MatMul, NoAttrs{}, {p, presentV});
  y = op(OpKind::Transpose, TransposeAttrs{{0, 2, 1, 3}}, {y});
  y = op(OpKind::Reshape, ReshapeAttrs{{1, sequence, 16}}, {y});
  ValueId logits = op(OpKind::MatMul, NoAttrs{},
                      {y, g.addConstant("lm", randomTensor(DType::F32, Shape{16, 10}, rng))});
  g.addOutput(logits, "logits");
  g.addOutput(presentK, "present.0.key");
  g.addOutput(presentV, "present.0.value");
  return g;
}

// The C API's generator on a model.so: its caches in place, a prompt longer than the sequence
// bound in two runs, then a token at a time; each step's last logits as the reference computes
// the whole context at once (without a cache: the last position attends to every token either
// way); the context's bound an error that leaves the generator usable.
TEST(CompileModel, TheCApisGeneratorKeepsTheCachesInPlace) {
  driver::CompileOptions options;
  options.target = hostTarget();
  options.isa = widestIsa(options.target);
  auto compiled = driver::compileModel(
      toyDecoder(Dim::symbol("sequence", 1, 4), Dim::symbol("past", 0, 12)), *sharedJit(), options);
  ASSERT_TRUE(compiled.isOk()) << compiled.error().message();
  ASSERT_EQ(compiled->plan.caches.size(), 2u);
  auto written = writeTempModel(std::move(*compiled), "generator");
  ASSERT_TRUE(written.isOk()) << written.error().message();
  tunec_model* model = nullptr;
  ASSERT_EQ(tunec_model_load(written->c_str(), 1, &model), 0) << tunec_last_error();
  ASSERT_EQ(tunec_model_num_caches(model), 2);
  tunec_cache_info info;
  ASSERT_EQ(tunec_model_cache_info(model, 1, &info), 0);
  EXPECT_EQ(info.input, 2);
  EXPECT_EQ(info.output, 2);
  EXPECT_EQ(info.axis, 2);
  EXPECT_EQ(info.capacity, 16);
  EXPECT_EQ(info.bytes, 2 * 16 * 8 * 4);
  EXPECT_NE(tunec_model_cache_info(model, 2, &info), 0);
  tunec_generator* gen = nullptr;
  ASSERT_EQ(tunec_generator_create(model, &gen), 0) << tunec_last_error();
  EXPECT_EQ(tunec_generator_in_place(gen), 1);
  EXPECT_EQ(tunec_generator_vocab(gen), 10);
  EXPECT_EQ(tunec_generator_capacity(gen), 13);
  std::vector<int64_t> context = {3, 1, 4, 1, 5, 9};
  const float* logits = nullptr;
  ASSERT_EQ(tunec_generator_append(gen, context.data(), 6, &logits), 0) << tunec_last_error();
  for (int step = 0;; ++step) {
    SCOPED_TRACE("context " + std::to_string(context.size()));
    const auto n = static_cast<int64_t>(context.size());
    EXPECT_EQ(tunec_generator_length(gen), n);
    Tensor ids(DType::I64, Shape{1, n}), none(DType::F32, Shape{1, 2, 0, 8});
    for (int64_t i = 0; i < n; ++i)
      ids.setDouble(i, static_cast<double>(context[static_cast<size_t>(i)]));
    auto want = runReference(toyDecoder(Dim(n), Dim(0)), {ids, none, none});
    ASSERT_TRUE(want.isOk()) << want.error().message();
    Tensor last(DType::F32, Shape{10});
    for (int64_t j = 0; j < 10; ++j) {
      last.setDouble(j, (*want)[0].getDouble((n - 1) * 10 + j));
      EXPECT_NEAR(logits[j], last.getDouble(j), 1e-5 * (1 + std::fabs(last.getDouble(j))));
    }
    if (n == 13) break;
    const int64_t next = std::max_element(logits, logits + 10) - logits;
    context.push_back(next);
    ASSERT_EQ(tunec_generator_append(gen, &next, 1, &logits), 0) << tunec_last_error();
  }
  const int64_t one = 1;
  EXPECT_NE(tunec_generator_append(gen, &one, 1, &logits), 0);
  EXPECT_NE(std::string(tunec_last_error())
                .find("the context holds 13 tokens and 1 more do not "
                      "fit"),
            std::string::npos)
      << tunec_last_error();
  tunec_generator_reset(gen);
  EXPECT_EQ(tunec_generator_length(gen), 0);
  EXPECT_EQ(tunec_generator_append(gen, context.data(), 6, &logits), 0) << tunec_last_error();
  EXPECT_NE(tunec_generator_append(gen, nullptr, 1, &logits), 0);
  tunec_generator_free(gen);
  tunec_model_free(model);
  std::filesystem::remove(*written);
}

} // namespace
} // namespace tunec
