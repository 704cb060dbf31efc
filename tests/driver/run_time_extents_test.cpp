// Symbolic dimensions end to end: one compile of a graph whose inputs have bounded symbolic
// dimensions runs at every size within the bounds (at, between and across the size buckets'
// edges and the matmul tiles' row edges, 1 and the bound), each run equal to the reference executor
// on the same graph built statically at that size (relative L2 below 1e-5, fp32 against double);
// shapes outside the bounds are errors before any kernel runs.
#include "driver/compile_model.h"
#include "driver/per_image.h"
#include "reference/reference.h"
#include "runtime/model_executor.h"
#include "support/host.h"
#include "templates/template.h"

#include <cmath>
#include <gtest/gtest.h>
#include <map>
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

Tensor randomTensor(const Shape& shape, std::mt19937& rng) {
  Tensor t(DType::F32, shape);
  std::uniform_real_distribution<double> real(-1.0, 1.0);
  for (int64_t i = 0; i < t.numel(); ++i) t.setDouble(i, real(rng));
  return t;
}

double relativeL2(const float* got, const Tensor& want) {
  double num = 0, den = 0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    double d = got[i] - want.getDouble(i);
    num += d * d;
    den += want.getDouble(i) * want.getDouble(i);
  }
  return std::sqrt(num / std::max(den, 1e-30));
}

ValueId op(Graph& g, OpKind kind, OpAttrs attrs, std::vector<ValueId> in) {
  std::string name = "n" + std::to_string(g.nodes().size());
  auto n = g.addNode(name, kind, std::move(attrs), std::move(in), {name + "_out"});
  EXPECT_TRUE(n.isOk()) << n.error().message();
  return g.node(*n).outputs[0];
}

constexpr int64_t kHidden = 24, kInner = 40;

// An encoder's feed-forward block on x [batch, sequence, 24] plus z (its residual stream):
// h = Relu(x W1 + b1) (40 columns: an N tail), y = LayerNorm(h W2 + b2 + x + z), p = Softmax
// of y's rows flattened to [batch*sequence, 24], and q = z W3 written by its kernel straight
// into the caller's buffer. The constants come from `seed`, so the graphs
// built at a symbolic and at a static shape compute the same function.
Graph feedForward(const Shape& x, uint32_t seed) {
  std::mt19937 rng(seed);
  Graph g;
  ValueId in = g.addInput("x", {DType::F32, x, {}});
  ValueId z = g.addInput("z", {DType::F32, x, {}});
  ValueId w1 = g.addConstant("w1", randomTensor(Shape{kHidden, kInner}, rng));
  ValueId b1 = g.addConstant("b1", randomTensor(Shape{kInner}, rng));
  ValueId w2 = g.addConstant("w2", randomTensor(Shape{kInner, kHidden}, rng));
  ValueId b2 = g.addConstant("b2", randomTensor(Shape{kHidden}, rng));
  ValueId gamma = g.addConstant("gamma", randomTensor(Shape{kHidden}, rng));
  ValueId beta = g.addConstant("beta", randomTensor(Shape{kHidden}, rng));
  ValueId w3 = g.addConstant("w3", randomTensor(Shape{kHidden, 5}, rng));
  ValueId h = op(g, OpKind::MatMul, NoAttrs{}, {in, w1});
  h = op(g, OpKind::Add, NoAttrs{}, {h, b1});
  h = op(g, OpKind::Relu, NoAttrs{}, {h});
  ValueId y = op(g, OpKind::MatMul, NoAttrs{}, {h, w2});
  y = op(g, OpKind::Add, NoAttrs{}, {y, b2});
  y = op(g, OpKind::Add, NoAttrs{}, {y, in});
  y = op(g, OpKind::Add, NoAttrs{}, {y, z});
  y = op(g, OpKind::LayerNormalization, NormAttrs{-1, 1e-5f}, {y, gamma, beta});
  ValueId flat = op(g, OpKind::Flatten, AxisAttrs{2}, {y});
  ValueId p = op(g, OpKind::Softmax, SoftmaxAttrs{-1, false}, {flat});
  ValueId q = op(g, OpKind::MatMul, NoAttrs{}, {z, w3});
  g.addOutput(y, "y");
  g.addOutput(p, "p");
  g.addOutput(q, "q");
  return g;
}

struct Compiled {
  std::unique_ptr<rt::ModelExecutor> executor;
  driver::CompiledModel summary;
};

Compiled compileSymbolic(int threads) {
  Shape x(
      std::vector<Dim>{Dim::symbol("batch", 1, 4), Dim::symbol("sequence", 1, 37), Dim(kHidden)});
  Graph g = feedForward(x, 7);
  driver::CompileOptions options;
  options.threads = threads;
  options.target = hostTarget();
  options.isa = widestIsa(options.target);
  auto compiled = driver::compileModel(g, *sharedJit(), options);
  EXPECT_TRUE(compiled.isOk()) << compiled.error().message();
  Compiled c;
  if (!compiled) return c;
  c.summary.plan = compiled->plan;
  c.summary.kernels = compiled->kernels;
  auto executor = driver::loadInProcess(std::move(*compiled), sharedJit(), threads);
  EXPECT_TRUE(executor.isOk()) << executor.error().message();
  if (executor) c.executor = std::move(*executor);
  return c;
}

TEST(RunTimeExtents, OneCompileRunsEverySizeWithinTheBoundsAsTheReference) {
  for (int threads : {1, 2}) {
    Compiled c = compileSymbolic(threads);
    ASSERT_TRUE(c.executor);
    const rt::ModelPlan& plan = c.executor->plan();
    ASSERT_EQ(plan.symbols.size(), 2u);
    EXPECT_EQ(plan.symbols[0].name, "batch");
    EXPECT_EQ(plan.symbols[1].max, 37);
    // The three matmuls read M (batch*sequence) at run time, each a variant per size bucket of
    // M (1..16, 17..32, 33..64, 65..128, 129..148; adjacent buckets of one config merged) that
    // together cover M's range once; the loop kernels read their rows at run time.
    std::map<std::string, std::vector<std::pair<int64_t, int64_t>>> bucketsOf;
    size_t runTimeSteps = 0;
    for (const rt::Step& s : plan.steps) {
      runTimeSteps += !s.runTimeInts.empty();
      if (s.when.extent >= 0)
        bucketsOf[s.label.substr(0, s.label.find(" 1x("))].push_back({s.when.min, s.when.max});
    }
    EXPECT_GE(runTimeSteps, 1u);
    ASSERT_EQ(bucketsOf.size(), 3u);
    for (const auto& [matmul, buckets] : bucketsOf) {
      SCOPED_TRACE(matmul);
      EXPECT_EQ(buckets.front().first, 1);
      EXPECT_EQ(buckets.back().second, 4 * 37);
      for (size_t i = 1; i < buckets.size(); ++i)
        EXPECT_EQ(buckets[i].first, buckets[i - 1].second + 1);
    }
    // Every size class: 1, the tiles' row edges and either side of them, between, the bound.
    for (auto [batch, sequence] : std::vector<std::pair<int64_t, int64_t>>{{1, 1},
                                                                           {1, 2},
                                                                           {2, 3},
                                                                           {1, 13},
                                                                           {4, 4},
                                                                           {1, 17},
                                                                           {2, 10},
                                                                           {4, 8},
                                                                           {3, 11},
                                                                           {2, 32},
                                                                           {4, 16},
                                                                           {3, 37},
                                                                           {4, 32},
                                                                           {4, 33},
                                                                           {4, 36},
                                                                           {4, 37},
                                                                           {1, 37},
                                                                           {3, 1}}) {
      SCOPED_TRACE("threads " + std::to_string(threads) + ", batch " + std::to_string(batch) +
                   ", sequence " + std::to_string(sequence));
      Shape shape{batch, sequence, kHidden};
      Graph reference = feedForward(shape, 7);
      std::mt19937 rng(static_cast<uint32_t>(batch * 100 + sequence));
      std::vector<Tensor> inputs = {randomTensor(shape, rng), randomTensor(shape, rng)};
      auto want = runReference(reference, inputs);
      ASSERT_TRUE(want.isOk()) << want.error().message();
      auto run = rt::bindRunExtents(plan, {shape.dims(), shape.dims()});
      ASSERT_TRUE(run.isOk()) << run.error().message();
      EXPECT_EQ(rt::runShape(plan.outputs[0], *run), shape.dims());
      EXPECT_EQ(rt::runShape(plan.outputs[1], *run),
                (std::vector<int64_t>{batch * sequence, kHidden}));
      EXPECT_EQ(rt::runShape(plan.outputs[2], *run), (std::vector<int64_t>{batch, sequence, 5}));
      // Output buffers of the bound, filled with a canary past the run's extent: no kernel
      // writes past it.
      const float canary = 12345.f;
      std::vector<std::vector<float>> out(3, std::vector<float>(4 * 37 * kHidden, canary));
      std::vector<const void*> in = {inputs[0].data(), inputs[1].data()};
      std::vector<void*> outPtrs = {out[0].data(), out[1].data(), out[2].data()};
      Status s = c.executor->run(in.data(), outPtrs.data(), nullptr, &*run);
      ASSERT_TRUE(s.isOk()) << s.error().message();
      for (size_t o = 0; o < 3; ++o) {
        EXPECT_LT(relativeL2(out[o].data(), (*want)[o]), 1e-5) << "output " << o;
        for (size_t i = static_cast<size_t>((*want)[o].numel()); i < out[o].size(); ++i)
          ASSERT_EQ(out[o][i], canary) << "output " << o << " written at " << i;
      }
    }
  }
}

// Token embeddings under a padding mask, as text models begin: e = Gather(table, ids) [batch,
// sequence, 24], the mask cast to f32 and unsqueezed, y = e * mask, z = Where(ids == 0, -1, e),
// and t = (e + the first `sequence` position embeddings) transposed: a Gather, typed ops (Cast,
// Equal, Where), elementwise broadcasts, a prefix slice and a transpose at run-time extents.
Graph embeddings(const Shape& ids, uint32_t seed) {
  std::mt19937 rng(seed);
  Graph g;
  ValueId in = g.addInput("ids", {DType::I64, ids, {}});
  ValueId mask = g.addInput("mask", {DType::I64, ids, {}});
  ValueId table = g.addConstant("table", randomTensor(Shape{50, kHidden}, rng));
  Tensor zero(DType::I64, Shape{1});
  Tensor minusOne(DType::F32, Shape{1});
  minusOne.setDouble(0, -1.0);
  ValueId zeroV = g.addConstant("zero", zero), minusOneV = g.addConstant("minus_one", minusOne);
  ValueId e = op(g, OpKind::Gather, AxisAttrs{0}, {table, in});
  ValueId m = op(g, OpKind::Cast, CastAttrs{DType::F32}, {mask});
  m = op(g, OpKind::Unsqueeze, AxesAttrs{{2}}, {m});
  ValueId y = op(g, OpKind::Mul, NoAttrs{}, {e, m});
  ValueId padding = op(g, OpKind::Equal, NoAttrs{}, {in, zeroV});
  padding = op(g, OpKind::Unsqueeze, AxesAttrs{{2}}, {padding});
  ValueId z = op(g, OpKind::Where, NoAttrs{}, {padding, minusOneV, e});
  // Position embeddings: the first `sequence` positions of a constant table (a prefix slice),
  // and the embeddings transposed to [sequence, batch, 24].
  Tensor positions(DType::I64, Shape{1, 20});
  for (int64_t i = 0; i < 20; ++i) positions.setInt(i, (i * 7) % 50);
  ValueId table2 = g.addConstant("positions", positions);
  Dim sequence = ids.dim(1);
  SliceAttrs prefix{{0, 0}, {1, 1}, {1, sequence.max}, {}};
  if (!sequence.isStatic()) prefix.extents = {Dim(1), sequence};
  ValueId pos = op(g, OpKind::Slice, prefix, {table2});
  ValueId pe = op(g, OpKind::Gather, AxisAttrs{0}, {table, pos});
  ValueId w = op(g, OpKind::Add, NoAttrs{}, {e, pe});
  ValueId t = op(g, OpKind::Transpose, TransposeAttrs{{1, 0, 2}}, {w});
  g.addOutput(y, "y");
  g.addOutput(z, "z");
  g.addOutput(t, "t");
  return g;
}

TEST(RunTimeExtents, EmbeddingsUnderAMaskRunAtEverySize) {
  Shape ids(std::vector<Dim>{Dim::symbol("batch", 1, 3), Dim::symbol("sequence", 1, 20)});
  driver::CompileOptions options;
  options.target = hostTarget();
  options.isa = widestIsa(options.target);
  auto compiled = driver::compileModel(embeddings(ids, 3), *sharedJit(), options);
  ASSERT_TRUE(compiled.isOk()) << compiled.error().message();
  auto executor = driver::loadInProcess(std::move(*compiled), sharedJit(), 1);
  ASSERT_TRUE(executor.isOk()) << executor.error().message();
  const rt::ModelPlan& plan = (*executor)->plan();
  for (auto [batch, sequence] :
       std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {2, 9}, {3, 20}, {1, 20}, {3, 4}}) {
    SCOPED_TRACE("batch " + std::to_string(batch) + ", sequence " + std::to_string(sequence));
    Shape shape{batch, sequence};
    std::mt19937 rng(static_cast<uint32_t>(batch * 31 + sequence));
    std::uniform_int_distribution<int64_t> token(0, 49), bit(0, 1);
    Tensor tokens(DType::I64, shape), mask(DType::I64, shape);
    for (int64_t i = 0; i < shape.numel(); ++i) {
      tokens.setInt(i, i % 5 == 0 ? 0 : token(rng)); // some padding ids
      mask.setInt(i, bit(rng));
    }
    auto want = runReference(embeddings(shape, 3), {tokens, mask});
    ASSERT_TRUE(want.isOk()) << want.error().message();
    auto run = rt::bindRunExtents(plan, {shape.dims(), shape.dims()});
    ASSERT_TRUE(run.isOk()) << run.error().message();
    const float canary = -777.f;
    std::vector<std::vector<float>> out(3, std::vector<float>(3 * 20 * kHidden, canary));
    std::vector<const void*> in = {tokens.data(), mask.data()};
    std::vector<void*> outPtrs = {out[0].data(), out[1].data(), out[2].data()};
    Status s = (*executor)->run(in.data(), outPtrs.data(), nullptr, &*run);
    ASSERT_TRUE(s.isOk()) << s.error().message();
    for (size_t o = 0; o < 3; ++o) {
      EXPECT_LT(relativeL2(out[o].data(), (*want)[o]), 1e-6) << "output " << o;
      for (size_t i = static_cast<size_t>((*want)[o].numel()); i < out[o].size(); ++i)
        ASSERT_EQ(out[o][i], canary) << "output " << o << " written at " << i;
    }
  }
}

// Attention over [batch, 2 heads, sequence, 8]: scores = Q K^T / sqrt(8) + mask, Softmax, then
// P V: batched matmuls of computed operands whose M, N and K are run-time lengths.
Graph attention(const Shape& q) {
  Graph g;
  ValueId qv = g.addInput("q", {DType::F32, q, {}});
  ValueId kv = g.addInput("k", {DType::F32, q, {}});
  ValueId vv = g.addInput("v", {DType::F32, q, {}});
  Shape maskShape(std::vector<Dim>{q.dim(0), Dim(1), Dim(1), q.dim(2)});
  ValueId mask = g.addInput("mask", {DType::F32, maskShape, {}});
  Tensor scale(DType::F32, Shape{1});
  scale.setDouble(0, 1.0 / std::sqrt(8.0));
  ValueId s = g.addConstant("scale", scale);
  ValueId kt = op(g, OpKind::Transpose, TransposeAttrs{{0, 1, 3, 2}}, {kv});
  ValueId scores = op(g, OpKind::MatMul, NoAttrs{}, {qv, kt});
  scores = op(g, OpKind::Mul, NoAttrs{}, {scores, s});
  scores = op(g, OpKind::Add, NoAttrs{}, {scores, mask});
  ValueId p = op(g, OpKind::Softmax, SoftmaxAttrs{-1, false}, {scores});
  ValueId y = op(g, OpKind::MatMul, NoAttrs{}, {p, vv});
  g.addOutput(y, "y");
  return g;
}

TEST(RunTimeExtents, AttentionOfRunTimeLengthRunsAsTheReference) {
  Shape q(
      std::vector<Dim>{Dim::symbol("batch", 1, 3), Dim(2), Dim::symbol("sequence", 1, 40), Dim(8)});
  driver::CompileOptions options;
  options.target = hostTarget();
  options.isa = widestIsa(options.target);
  auto compiled = driver::compileModel(attention(q), *sharedJit(), options);
  ASSERT_TRUE(compiled.isOk()) << compiled.error().message();
  size_t batched = 0;
  for (const rt::Step& step : compiled->plan.steps)
    batched += step.kind == rt::StepKind::BatchedMatmul;
  EXPECT_EQ(batched, 2u);
  auto executor = driver::loadInProcess(std::move(*compiled), sharedJit(), 2);
  ASSERT_TRUE(executor.isOk()) << executor.error().message();
  for (auto [batch, sequence] :
       std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {2, 5}, {3, 17}, {1, 40}, {3, 40}}) {
    SCOPED_TRACE("batch " + std::to_string(batch) + ", sequence " + std::to_string(sequence));
    Shape shape{batch, 2, sequence, 8}, maskShape{batch, 1, 1, sequence};
    std::mt19937 rng(static_cast<uint32_t>(batch * 7 + sequence));
    std::vector<Tensor> inputs = {randomTensor(shape, rng), randomTensor(shape, rng),
                                  randomTensor(shape, rng), randomTensor(maskShape, rng)};
    for (int64_t i = 0; i < maskShape.numel(); ++i) // padded keys
      if (i % 4 == 3) inputs[3].setDouble(i, -1e9);
    auto want = runReference(attention(shape), inputs);
    ASSERT_TRUE(want.isOk()) << want.error().message();
    auto run = rt::bindRunExtents((*executor)->plan(),
                                  {shape.dims(), shape.dims(), shape.dims(), maskShape.dims()});
    ASSERT_TRUE(run.isOk()) << run.error().message();
    std::vector<float> out(3 * 2 * 40 * 8, -5.f);
    std::vector<const void*> in;
    for (const Tensor& t : inputs) in.push_back(t.data());
    std::vector<void*> outPtrs = {out.data()};
    Status st = (*executor)->run(in.data(), outPtrs.data(), nullptr, &*run);
    ASSERT_TRUE(st.isOk()) << st.error().message();
    EXPECT_LT(relativeL2(out.data(), (*want)[0]), 1e-5);
    for (size_t i = static_cast<size_t>(shape.numel()); i < out.size(); ++i)
      ASSERT_EQ(out[i], -5.f) << "written at " << i;
  }
}

// A decoder's K/V path: the past (of length 0 and up) concatenated with this run's keys, GQA's
// repeat of the K/V heads (Unsqueeze, Expand, Reshape), rotate_half's slices of a symbolic tensor
// (Slice of the last axis, Neg, Concat) and an RMS normalization of the rows.
Graph kvPath(const Dim& past, const Dim& sequence) {
  Graph g;
  ValueId pk = g.addInput("past", {DType::F32, Shape(std::vector<Dim>{1, 2, past, 8}), {}});
  ValueId k = g.addInput("k", {DType::F32, Shape(std::vector<Dim>{1, 2, sequence, 8}), {}});
  ValueId all = op(g, OpKind::Concat, AxisAttrs{2}, {pk, k});
  Dim total = past + sequence;
  ValueId x = op(g, OpKind::Unsqueeze, AxesAttrs{{2}}, {all});
  x = op(g, OpKind::Expand, ReshapeAttrs{{1, 2, 3, total, 8}}, {x});
  x = op(g, OpKind::Reshape, ReshapeAttrs{{1, 6, total, 8}}, {x});
  SliceAttrs lo{{0, 0, 0, 0}, {1, 1, 1, 1}, {1, 6, total.max, 4}, {1, 6, total, 4}};
  SliceAttrs hi{{0, 0, 0, 4}, {1, 1, 1, 1}, {1, 6, total.max, 4}, {1, 6, total, 4}};
  ValueId a = op(g, OpKind::Slice, lo, {x}), b = op(g, OpKind::Slice, hi, {x});
  ValueId rotated = op(g, OpKind::Concat, AxisAttrs{3}, {op(g, OpKind::Neg, NoAttrs{}, {b}), a});
  std::mt19937 rng(4);
  ValueId scale = g.addConstant("scale", randomTensor(Shape{8}, rng));
  ValueId y = op(g, OpKind::RMSNormalization, NormAttrs{3, 1e-6f}, {rotated, scale});
  g.addOutput(all, "present");
  g.addOutput(y, "y");
  return g;
}

TEST(RunTimeExtents, APastOfZeroAndUpConcatenatesRepeatsAndSlicesAsTheReference) {
  driver::CompileOptions options;
  options.target = hostTarget();
  options.isa = widestIsa(options.target);
  auto compiled = driver::compileModel(
      kvPath(Dim::symbol("past", 0, 20), Dim::symbol("sequence", 1, 9)), *sharedJit(), options);
  ASSERT_TRUE(compiled.isOk()) << compiled.error().message();
  auto executor = driver::loadInProcess(std::move(*compiled), sharedJit(), 2);
  ASSERT_TRUE(executor.isOk()) << executor.error().message();
  for (auto [past, sequence] :
       std::vector<std::pair<int64_t, int64_t>>{{0, 1}, {0, 9}, {1, 1}, {7, 3}, {20, 1}, {20, 9}}) {
    SCOPED_TRACE("past " + std::to_string(past) + ", sequence " + std::to_string(sequence));
    Shape ps{1, 2, past, 8}, ks{1, 2, sequence, 8};
    std::mt19937 rng(static_cast<uint32_t>(past * 11 + sequence));
    std::vector<Tensor> inputs = {randomTensor(ps, rng), randomTensor(ks, rng)};
    auto want = runReference(kvPath(Dim(past), Dim(sequence)), inputs);
    ASSERT_TRUE(want.isOk()) << want.error().message();
    auto run = rt::bindRunExtents((*executor)->plan(), {ps.dims(), ks.dims()});
    ASSERT_TRUE(run.isOk()) << run.error().message();
    std::vector<float> present(2 * 29 * 8, -5.f), y(6 * 29 * 8, -5.f);
    std::vector<const void*> in = {inputs[0].data(), inputs[1].data()};
    std::vector<void*> outPtrs = {present.data(), y.data()};
    Status st = (*executor)->run(in.data(), outPtrs.data(), nullptr, &*run);
    ASSERT_TRUE(st.isOk()) << st.error().message();
    EXPECT_LT(relativeL2(present.data(), (*want)[0]), 1e-6);
    EXPECT_TRUE((*executor)->plan().caches.empty()) << "the present is read by an Unsqueeze";
    EXPECT_LT(relativeL2(y.data(), (*want)[1]), 1e-5);
    for (size_t i = static_cast<size_t>((*want)[1].numel()); i < y.size(); ++i)
      ASSERT_EQ(y[i], -5.f) << "written at " << i;
  }
}

// A decoder's attention over its K/V cache: present = Concat(past, this run's rows) for the keys
// and the values, scores = q present_k^T (a Transpose read in place) times a scale, Softmax, and
// the values' product; outputs y and the two presents.
Graph cachedAttention(const Dim& past, const Dim& sequence) {
  Graph g;
  auto input = [&](const std::string& name, const Dim& length) {
    return g.addInput(name, {DType::F32, Shape(std::vector<Dim>{1, 2, length, 8}), {}});
  };
  ValueId pk = input("past_k", past), pv = input("past_v", past);
  ValueId q = input("q", sequence), k = input("k", sequence), v = input("v", sequence);
  ValueId keys = op(g, OpKind::Concat, AxisAttrs{2}, {pk, k});
  ValueId values = op(g, OpKind::Concat, AxisAttrs{2}, {pv, v});
  Tensor scale(DType::F32, Shape{});
  scale.setDouble(0, 1.0 / std::sqrt(8.0));
  ValueId kt = op(g, OpKind::Transpose, TransposeAttrs{{0, 1, 3, 2}}, {keys});
  ValueId scores = op(g, OpKind::MatMul, NoAttrs{}, {q, kt});
  scores = op(g, OpKind::Mul, NoAttrs{}, {scores, g.addConstant("scale", scale)});
  ValueId p = op(g, OpKind::Softmax, SoftmaxAttrs{-1, false}, {scores});
  g.addOutput(op(g, OpKind::MatMul, NoAttrs{}, {p, values}), "y");
  g.addOutput(keys, "present_k");
  g.addOutput(values, "present_v");
  return g;
}

// The caches kept in place: one buffer per K/V given as past and present, a run writes its rows
// at the past's length and nothing else of the buffer (the past is not rewritten, the rows after
// are untouched); each run equals the reference on the whole context, and a run of dense buffers
// (the arena's copy of the cache) equals the cached one.
TEST(RunTimeExtents, KvCachesKeptInPlaceWriteOnlyTheRunsRows) {
  driver::CompileOptions options;
  options.target = hostTarget();
  options.isa = widestIsa(options.target);
  auto compiled = driver::compileModel(
      cachedAttention(Dim::symbol("past", 0, 20), Dim::symbol("sequence", 1, 6)), *sharedJit(),
      options);
  ASSERT_TRUE(compiled.isOk()) << compiled.error().message();
  ASSERT_EQ(compiled->plan.caches.size(), 2u);
  for (const rt::KvCache& c : compiled->plan.caches) {
    EXPECT_EQ(c.axis, 2);
    EXPECT_EQ(c.capacity, 26);
    EXPECT_EQ(c.bytes, 2 * 26 * 8 * 4);
  }
  auto executor = driver::loadInProcess(std::move(*compiled), sharedJit(), 2);
  ASSERT_TRUE(executor.isOk()) << executor.error().message();
  const int64_t capacity = 26;
  std::vector<float> cacheK(2 * capacity * 8, -5.f), cacheV(2 * capacity * 8, -5.f);
  std::vector<float> allK, allV; // the context's rows, head by head: [2][length][8]
  std::vector<std::vector<float>> headsK(2), headsV(2);
  std::mt19937 rng(9);
  int64_t past = 0;
  for (int64_t sequence : {4, 1, 1, 6, 1, 3, 5}) { // up to a past of 20, then one more run
    SCOPED_TRACE("past " + std::to_string(past) + ", sequence " + std::to_string(sequence));
    Shape ps{1, 2, past, 8}, ss{1, 2, sequence, 8};
    Tensor q = randomTensor(ss, rng), k = randomTensor(ss, rng), v = randomTensor(ss, rng);
    // The reference on the whole context: the past as the rows so far.
    Tensor pastK(DType::F32, ps), pastV(DType::F32, ps);
    for (int64_t h = 0; h < 2; ++h)
      for (int64_t i = 0; i < past * 8; ++i) {
        pastK.setDouble(h * past * 8 + i, headsK[static_cast<size_t>(h)][static_cast<size_t>(i)]);
        pastV.setDouble(h * past * 8 + i, headsV[static_cast<size_t>(h)][static_cast<size_t>(i)]);
      }
    auto want = runReference(cachedAttention(Dim(past), Dim(sequence)), {pastK, pastV, q, k, v});
    ASSERT_TRUE(want.isOk()) << want.error().message();
    auto run = rt::bindRunExtents((*executor)->plan(),
                                  {ps.dims(), ps.dims(), ss.dims(), ss.dims(), ss.dims()});
    ASSERT_TRUE(run.isOk()) << run.error().message();
    // Dense: the past and the present as any tensors.
    std::vector<float> y(2 * 6 * 8, -5.f), denseK(2 * capacity * 8, -5.f),
        denseV(2 * capacity * 8, -5.f);
    {
      std::vector<const void*> in = {pastK.data(), pastV.data(), q.data(), k.data(), v.data()};
      std::vector<void*> out = {y.data(), denseK.data(), denseV.data()};
      Status st = (*executor)->run(in.data(), out.data(), nullptr, &*run);
      ASSERT_TRUE(st.isOk()) << st.error().message();
      EXPECT_LT(relativeL2(y.data(), (*want)[0]), 1e-5);
      EXPECT_LT(relativeL2(denseK.data(), (*want)[1]), 1e-7);
      EXPECT_LT(relativeL2(denseV.data(), (*want)[2]), 1e-7);
    }
    // Cached: one buffer per K/V as past and present.
    const std::vector<float> beforeK = cacheK, beforeV = cacheV;
    std::vector<float> cachedY(y.size(), -5.f);
    std::vector<const void*> in = {cacheK.data(), cacheV.data(), q.data(), k.data(), v.data()};
    std::vector<void*> out = {cachedY.data(), cacheK.data(), cacheV.data()};
    Status st = (*executor)->run(in.data(), out.data(), nullptr, &*run, true);
    ASSERT_TRUE(st.isOk()) << st.error().message();
    EXPECT_LT(relativeL2(cachedY.data(), (*want)[0]), 1e-5);
    for (size_t i = 0; i < y.size(); ++i) ASSERT_EQ(cachedY[i], y[i]) << "y at " << i;
    for (int64_t h = 0; h < 2; ++h) {
      for (int64_t i = 0; i < sequence * 8; ++i) {
        headsK[static_cast<size_t>(h)].push_back(
            static_cast<float>(k.getDouble(h * sequence * 8 + i)));
        headsV[static_cast<size_t>(h)].push_back(
            static_cast<float>(v.getDouble(h * sequence * 8 + i)));
      }
      for (int64_t row = 0; row < capacity; ++row)
        for (int64_t c = 0; c < 8; ++c) {
          const auto at = static_cast<size_t>((h * capacity + row) * 8 + c);
          const auto ctx = static_cast<size_t>(row * 8 + c);
          if (row < past || row >= past + sequence) { // the past's rows and those after: as before
            ASSERT_EQ(cacheK[at], beforeK[at]) << "head " << h << " row " << row;
            ASSERT_EQ(cacheV[at], beforeV[at]) << "head " << h << " row " << row;
          } else { // the run's rows: its keys and values
            ASSERT_EQ(cacheK[at], headsK[static_cast<size_t>(h)][ctx]);
            ASSERT_EQ(cacheV[at], headsV[static_cast<size_t>(h)][ctx]);
          }
        }
    }
    past += sequence;
  }
  EXPECT_EQ(past, 21);
}

// Reductions over run-time extents: a masked mean over the sequence (a sentence embedding's
// pooling: the sequence axis moved last first), a mean over the last two axes and a max over the
// last (no copy).
Graph reductions(const Shape& x) {
  Graph g;
  ValueId in = g.addInput("x", {DType::F32, x, {}});
  g.addOutput(op(g, OpKind::ReduceSum, ReduceAttrs{{1}, true}, {in}), "sum");
  g.addOutput(op(g, OpKind::ReduceMean, ReduceAttrs{{1, 2}, false}, {in}), "mean");
  g.addOutput(op(g, OpKind::ReduceMax, ReduceAttrs{{-1}, false}, {in}), "max");
  return g;
}

TEST(RunTimeExtents, ReductionsRunAtEverySizeAsTheReference) {
  driver::CompileOptions options;
  options.target = hostTarget();
  options.isa = widestIsa(options.target);
  Shape bound(std::vector<Dim>{Dim::symbol("batch", 1, 3), Dim::symbol("sequence", 1, 33), Dim(8)});
  auto compiled = driver::compileModel(reductions(bound), *sharedJit(), options);
  ASSERT_TRUE(compiled.isOk()) << compiled.error().message();
  auto executor = driver::loadInProcess(std::move(*compiled), sharedJit(), 2);
  ASSERT_TRUE(executor.isOk()) << executor.error().message();
  for (auto [batch, sequence] :
       std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {2, 7}, {3, 16}, {1, 33}, {3, 33}}) {
    SCOPED_TRACE("batch " + std::to_string(batch) + ", sequence " + std::to_string(sequence));
    Shape shape{batch, sequence, 8};
    std::mt19937 rng(static_cast<uint32_t>(batch * 5 + sequence));
    Tensor x = randomTensor(shape, rng);
    auto want = runReference(reductions(shape), {x});
    ASSERT_TRUE(want.isOk()) << want.error().message();
    auto run = rt::bindRunExtents((*executor)->plan(), {shape.dims()});
    ASSERT_TRUE(run.isOk()) << run.error().message();
    std::vector<float> sum(3 * 8, -5.f), mean(3, -5.f), max(3 * 33, -5.f);
    std::vector<const void*> in = {x.data()};
    std::vector<void*> out = {sum.data(), mean.data(), max.data()};
    Status st = (*executor)->run(in.data(), out.data(), nullptr, &*run);
    ASSERT_TRUE(st.isOk()) << st.error().message();
    EXPECT_LT(relativeL2(sum.data(), (*want)[0]), 1e-6);
    EXPECT_LT(relativeL2(mean.data(), (*want)[1]), 1e-6);
    EXPECT_LT(relativeL2(max.data(), (*want)[2]), 1e-7);
    for (size_t i = static_cast<size_t>(batch * 8); i < sum.size(); ++i)
      ASSERT_EQ(sum[i], -5.f) << "written past the run's rows at " << i;
    for (size_t i = static_cast<size_t>(batch * sequence); i < max.size(); ++i)
      ASSERT_EQ(max[i], -5.f) << "written past the run's rows at " << i;
  }
}

TEST(RunTimeExtents, ShapesOutsideTheBoundsAreErrorsNamingTheInput) {
  Compiled c = compileSymbolic(1);
  ASSERT_TRUE(c.executor);
  const rt::ModelPlan& plan = c.executor->plan();
  auto error = [&](std::vector<int64_t> x, std::vector<int64_t> z) {
    auto run = rt::bindRunExtents(plan, {x, z});
    return run ? std::string("no error") : run.error().message();
  };
  EXPECT_EQ(error({5, 3, 24}, {5, 3, 24}),
            "dimension 0 of input 'x' is 5, outside the bounds of 'batch' (1..4) it was compiled "
            "for");
  EXPECT_EQ(error({2, 0, 24}, {2, 0, 24}),
            "dimension 1 of input 'x' is 0, outside the bounds of 'sequence' (1..37) it was "
            "compiled for");
  EXPECT_EQ(error({2, 5, 24}, {2, 6, 24}), "dimension 1 of input 'z' is 6, but 'sequence' is 5 "
                                           "in input 'x': the inputs disagree on it");
  EXPECT_EQ(error({2, 5, 23}, {2, 5, 24}), "dimension 2 of input 'x' is 23, the model takes 24");
  EXPECT_EQ(error({2, 5}, {2, 5, 24}), "input 'x' has rank 2, the model takes rank 3");
  EXPECT_EQ(error({2, 5, 24}, {2, 5, 24}), "no error");
  // A symbolic model run without shapes is refused, not run at its bounds.
  std::vector<float> buffer(4 * 37 * kHidden);
  std::vector<const void*> in = {buffer.data(), buffer.data()};
  std::vector<void*> out = {buffer.data(), buffer.data(), buffer.data()};
  Status s = c.executor->run(in.data(), out.data());
  ASSERT_FALSE(s.isOk());
  EXPECT_NE(s.error().message().find("give the run's input shapes"), std::string::npos);
}

TEST(RunTimeExtents, AnOpWithoutRunTimeExtentsIsReportedByName) {
  Graph g;
  Shape x(std::vector<Dim>{Dim::symbol("batch", 1, 4), Dim(2), Dim(3), Dim(3)});
  ValueId in = g.addInput("x", {DType::F32, x, {}});
  ValueId m = op(g, OpKind::GlobalAveragePool, NoAttrs{}, {in});
  g.addOutput(m, "m");
  driver::CompileOptions options;
  options.target = hostTarget();
  options.isa = widestIsa(options.target);
  auto compiled = driver::compileModel(g, *sharedJit(), options);
  ASSERT_FALSE(compiled.isOk());
  EXPECT_NE(compiled.error().message().find(
                "(GlobalAveragePool): a symbolic shape (batch x 2 x 3 x 3) is not compiled for "
                "this op yet"),
            std::string::npos)
      << compiled.error().message();
}

} // namespace
} // namespace tunec

namespace tunec {
namespace {

// A CNN over a batch of images [b, 3, 9, 9]: Conv (a bias), Relu, MaxPool, GlobalAveragePool,
// Flatten, Gemm and a Softmax over the classes; or, with `mixing`, one op that mixes images
// (a softmax over the batch axis). Constants from a fixed seed, so that the graph at a symbolic
// batch and at each static batch compute the same function.
Graph imageClassifier(const Dim& batch, bool mixing = false) {
  Graph g;
  std::mt19937 rng(21);
  ValueId x = g.addInput("x", {DType::F32, Shape(std::vector<Dim>{batch, 3, 9, 9}), {}});
  ValueId w = g.addConstant("w", randomTensor(Shape{8, 3, 3, 3}, rng));
  ValueId b = g.addConstant("b", randomTensor(Shape{8}, rng));
  ConvAttrs conv{{3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1};
  ValueId y = op(g, OpKind::Relu, NoAttrs{}, {op(g, OpKind::Conv, conv, {x, w, b})});
  y = op(g, OpKind::MaxPool, PoolAttrs{{3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}}, {y});
  y = op(g, OpKind::Flatten, AxisAttrs{1}, {op(g, OpKind::GlobalAveragePool, NoAttrs{}, {y})});
  ValueId fc = g.addConstant("fc", randomTensor(Shape{8, 5}, rng));
  y = op(g, OpKind::Gemm, GemmAttrs{}, {y, fc, g.addConstant("fcb", randomTensor(Shape{5}, rng))});
  g.addOutput(op(g, OpKind::Softmax, SoftmaxAttrs{mixing ? 0 : 1, false}, {y}));
  return g;
}

// The classifier with a symbolic batch is a batch of independent images: compiled for one
// image and run once per image, every batch from 1 to the bound equals the reference on the
// graph built at that batch; a batch past the bound is an error before anything runs.
TEST(ImageBatch, ACnnOfADynamicBatchRunsOncePerImageAsTheReference) {
  const Dim batch = Dim::symbol("images", 1, 5);
  auto images = driver::imageBatchOf(imageClassifier(batch));
  ASSERT_TRUE(images.has_value());
  EXPECT_EQ(images->symbol, "images");
  EXPECT_EQ(images->max, 5);
  EXPECT_EQ(images->inputs, std::set<std::string>{"x"});
  for (int threads : {1, 2}) {
    driver::CompileOptions options;
    options.threads = threads;
    options.target = hostTarget();
    options.isa = widestIsa(options.target);
    auto compiled = driver::compileModel(imageClassifier(Dim(1)), *sharedJit(), options);
    ASSERT_TRUE(compiled.isOk()) << compiled.error().message();
    const int64_t oneImage = compiled->plan.arenaBytes;
    ASSERT_TRUE(driver::runOncePerImage(compiled->plan, *images).isOk());
    EXPECT_EQ(compiled->plan.arenaBytes, oneImage); // one image's, reused by each
    EXPECT_EQ(compiled->plan.inputs[0].shape, (std::vector<int64_t>{5, 3, 9, 9}));
    auto executor = driver::loadInProcess(std::move(*compiled), sharedJit(), threads);
    ASSERT_TRUE(executor.isOk()) << executor.error().message();
    std::mt19937 rng(3);
    for (int64_t n : {1, 2, 4, 5}) {
      SCOPED_TRACE("batch " + std::to_string(n) + ", threads " + std::to_string(threads));
      Tensor x = randomTensor(Shape{n, 3, 9, 9}, rng);
      auto want = runReference(imageClassifier(Dim(n)), {x});
      ASSERT_TRUE(want.isOk()) << want.error().message();
      auto run = rt::bindRunExtents((*executor)->plan(), {x.shape().dims()});
      ASSERT_TRUE(run.isOk()) << run.error().message();
      EXPECT_EQ(rt::runShape((*executor)->plan().outputs[0], *run), (std::vector<int64_t>{n, 5}));
      std::vector<float> y(5 * 5, -7.f); // past the run's rows: never written
      const void* in[] = {x.data()};
      void* out[] = {y.data()};
      ASSERT_TRUE((*executor)->run(in, out, nullptr, &*run).isOk());
      EXPECT_LT(relativeL2(y.data(), (*want)[0]), 1e-5);
      for (size_t i = static_cast<size_t>(n) * 5; i < y.size(); ++i) ASSERT_EQ(y[i], -7.f) << i;
    }
    auto outside = rt::bindRunExtents((*executor)->plan(), {{6, 3, 9, 9}});
    ASSERT_FALSE(outside.isOk());
    EXPECT_NE(outside.error().message().find("outside the bounds of 'images' (1..5)"),
              std::string::npos)
        << outside.error().message();
  }
}

// Graphs that are no batch of independent images keep the symbolic lowering: a softmax over the
// batch axis, a batch that is not the leading axis, two symbols, or no convolution or pool.
TEST(ImageBatch, GraphsThatMixImagesAreNoImageBatch) {
  EXPECT_FALSE(driver::imageBatchOf(imageClassifier(Dim::symbol("b", 1, 4), true)));
  {
    Graph g;
    ValueId x =
        g.addInput("x", {DType::F32, Shape(std::vector<Dim>{3, Dim::symbol("b", 1, 4), 9, 9}), {}});
    g.addOutput(op(g, OpKind::Relu, NoAttrs{}, {x}));
    EXPECT_FALSE(driver::imageBatchOf(g));
  }
  {
    Graph g;
    ValueId x = g.addInput(
        "x", {DType::F32,
              Shape(std::vector<Dim>{Dim::symbol("b", 1, 4), 3, 9, Dim::symbol("w", 1, 9)}),
              {}});
    g.addOutput(op(g, OpKind::Relu, NoAttrs{}, {x}));
    EXPECT_FALSE(driver::imageBatchOf(g));
  }
  {
    Graph g;
    ValueId x =
        g.addInput("x", {DType::F32, Shape(std::vector<Dim>{Dim::symbol("b", 1, 4), 16}), {}});
    g.addOutput(op(g, OpKind::Relu, NoAttrs{}, {x}));
    EXPECT_FALSE(driver::imageBatchOf(g)); // an MLP: the run-time M of its matmuls serves it
  }
}

} // namespace
} // namespace tunec
