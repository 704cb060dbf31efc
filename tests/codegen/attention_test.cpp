// Fused attention against the reference executor (MatMul, scale, optional mask Add, Softmax,
// MatMul): random shapes with tails in every dimension, K and V stored either way, random valid
// configs of both matmuls, one and two threads. Tolerance: the outputs are convex combinations
// of V's rows (|v| <= 1), so an absolute 2e-5 + 4 * (d + keys) * eps.
#include "codegen/attention_kernel.h"
#include "codegen/microkernel.h"
#include "ir/graph.h"
#include "reference/reference.h"
#include "support/host.h"
#include "test_support.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <gtest/gtest.h>
#include <limits>
#include <random>

namespace tunec {
namespace {

using test::jit;
using test::randomTensor;

Expected<MatmulConfig> randomConfig(const MatmulWorkload& w, Isa isa, std::mt19937& rng) {
  std::vector<nlohmann::json> values;
  KnobSpace space = matmulKnobSpace(w, isa);
  for (const Knob& knob : space) values.push_back(knob.values[rng() % knob.values.size()]);
  return matmulConfigFromKnobs(w, isa, space, values);
}

Tensor referenceAttention(const AttentionParts& p, float scale, bool masked, const Tensor& q,
                          const Tensor& k, const Tensor& v, const Tensor& mask) {
  Graph g;
  ValueId vq = g.addInput("q", {DType::F32, q.shape(), {}});
  ValueId vk = g.addInput("k", {DType::F32, k.shape(), {}});
  ValueId vv = g.addInput("v", {DType::F32, v.shape(), {}});
  ValueId vm = g.addInput("mask", {DType::F32, mask.shape(), {}});
  if (p.qk.transB) vk = test::addOp(g, OpKind::Transpose, TransposeAttrs{{0, 2, 1}}, {vk});
  if (p.av.transB) vv = test::addOp(g, OpKind::Transpose, TransposeAttrs{{0, 2, 1}}, {vv});
  ValueId s = test::addOp(g, OpKind::MatMul, NoAttrs{}, {vq, vk});
  Tensor c(DType::F32, Shape{1});
  c.dataAs<float>()[0] = scale;
  s = test::addOp(g, OpKind::Mul, NoAttrs{}, {s, g.addConstant("scale", c)});
  if (masked) s = test::addOp(g, OpKind::Add, NoAttrs{}, {s, vm});
  ValueId pr = test::addOp(g, OpKind::Softmax, SoftmaxAttrs{-1, false}, {s});
  g.addOutput(test::addOp(g, OpKind::MatMul, NoAttrs{}, {pr, vv}));
  auto out = runReference(g, {q, k, v, mask});
  EXPECT_TRUE(out.isOk()) << out.error().message();
  return (*out)[0];
}

Tensor roundedToBf16(Tensor t) {
  for (int64_t i = 0; i < t.numel(); ++i)
    t.dataAs<float>()[i] = bf16ToFloat(floatToBf16(t.dataAs<float>()[i]));
  return t;
}

// Random shapes and configs against the reference; `online`: with blocks of 1 to 5 score
// panels, so that most shapes take the online softmax over several key blocks (with a tail).
// `bf16`: Q x K and P x V on vdpbf16ps (keys even, as P's k-pairs need), against the reference
// on Q, K and V rounded to bf16; P is rounded too (8 bits), so O, a convex combination of V's
// rows, is within 2^-8 of it: an absolute 8e-3. `amx`: bf16 on AMX tiles (tdpbf16ps) through
// the twins, Q packed in tiles and P's rows read in place, k padded to tile rows of 32.
void checkRandomAttention(bool online, uint32_t seed, bool bf16 = false, bool amx = false) {
  std::mt19937 rng(seed);
  Jit& j = amx ? test::twinJit() : bf16 ? test::bf16Jit() : jit();
  Isa isa = amx ? Isa::Amx : widestIsa(j.target());
  int checked = 0, blocks = 0;
  for (int trial = 0; trial < 60 && checked < 24; ++trial) {
    int64_t heads = 1 + rng() % 4, m = 1 + rng() % 70, keys = 1 + rng() % 150, d = 1 + rng() % 40,
            dv = 1 + rng() % 40;
    if (bf16) keys += keys % 2;
    AttentionParts p;
    if (bf16) {
      p.qk.types = {DType::F32, DType::BF16, DType::F32, DType::F32};
      p.av.types = {DType::BF16, DType::BF16, DType::F32, DType::F32};
    }
    p.qk.batch = p.av.batch = heads;
    p.qk.m = p.av.m = m, p.qk.n = p.av.k = keys, p.qk.k = d, p.av.n = dv;
    p.qk.broadcastB = p.av.broadcastB = false;
    p.qk.constantB = p.av.constantB = false;
    p.qk.transB = rng() % 2, p.av.transB = rng() % 2;
    p.qk.threads = p.av.threads = trial % 3 == 0 ? 2 : 1;
    auto qc = randomConfig(p.qk, isa, rng);
    auto vc = randomConfig(p.av, isa, rng);
    ASSERT_TRUE(qc.isOk() && vc.isOk());
    p.qkConfig = *qc, p.avConfig = *vc;
    if (!checkAttention(p)) continue; // (a config the kernel refuses)
    if (online) p.keyBlock = p.qkConfig.nr * (1 + static_cast<int64_t>(rng() % 5));
    bool masked = trial % 4 == 1;
    float scale = 1.f / std::sqrt(static_cast<float>(d)) * (trial % 2 ? 4.f : 1.f);
    p.qkEpilogue = {{PostOpKind::Scale, scale}};
    if (masked) p.qkEpilogue.push_back({PostOpKind::AddTensor});
    auto kernel = compileAttention(j, p);
    ASSERT_TRUE(kernel.isOk()) << kernel.error().message();
    Tensor q = randomTensor(Shape{heads, m, d}, rng);
    Tensor k = randomTensor(p.qk.transB ? Shape{heads, keys, d} : Shape{heads, d, keys}, rng);
    Tensor v = randomTensor(p.av.transB ? Shape{heads, dv, keys} : Shape{heads, keys, dv}, rng);
    Tensor mask = randomTensor(Shape{heads, m, keys}, rng);
    for (int64_t i = 0; i < mask.numel(); i += 7) mask.dataAs<float>()[i] = -1e4f; // masked out
    Tensor out = randomTensor(Shape{heads, m, dv}, rng); // garbage that must be overwritten
    kernel->run(q.dataAs<float>(), k.dataAs<float>(), v.dataAs<float>(), out.dataAs<float>(),
                mask.dataAs<float>());
    Tensor want = bf16 ? referenceAttention(p, scale, masked, roundedToBf16(q), roundedToBf16(k),
                                            roundedToBf16(v), mask)
                       : referenceAttention(p, scale, masked, q, k, v, mask);
    double tol = bf16 ? 8e-3 : 2e-5 + 4.0 * static_cast<double>(d + keys) * 1.1920929e-7;
    for (int64_t i = 0; i < out.numel(); ++i)
      ASSERT_NEAR(out.getDouble(i), want.getDouble(i), tol)
          << "element " << i << " of heads " << heads << " m " << m << " keys " << keys << " d "
          << d << " dv " << dv << " qk " << p.qkConfig.toJson().dump() << " av "
          << p.avConfig.toJson().dump() << (masked ? " masked" : "") << " key block "
          << attentionKeyBlock(p, j.target());
    ++checked;
    blocks += (keys + attentionKeyBlock(p, j.target()) - 1) / attentionKeyBlock(p, j.target()) > 1;
  }
  EXPECT_GE(checked, 16);
  if (online) {
    EXPECT_GE(blocks, 8) << "shapes with several key blocks";
  }
}

TEST(AttentionKernel, RandomShapesAndConfigsMatchReference) {
  checkRandomAttention(false, 7);
}

// bf16 attention (--precision bf16): one block of keys, and the online softmax over several.
TEST(AttentionKernel, Bf16MatchesReferenceOnRoundedOperands) {
  checkRandomAttention(false, 5, true);
  checkRandomAttention(true, 13, true);
}

// bf16 attention on AMX tiles (a Xeon's --precision bf16), through the twins: one block of
// keys, and the online softmax over several (blocks of whole tile rows of P).
TEST(AttentionKernel, AmxTwinsMatchReferenceOnRoundedOperands) {
  checkRandomAttention(false, 17, true, true);
  checkRandomAttention(true, 19, true, true);
}

// Exactly, on AMX's twins: small-integer Q and V, and K's keys all one small-integer vector, so
// that every row's scores are equal and its unmasked keys' P is exactly 1 (a random mask hides
// others with -inf). Then O = (the sum of the unmasked keys' V rows) x (1 / their count) in f32,
// bit for bit, whatever the order of the sums: the packing of Q into tiles, of K and V into
// panels of k padded to 32, P's rows padded to whole k steps, the tails in every dimension and
// the online softmax's key blocks are all exercised with a closed-form answer.
TEST(AttentionKernel, AmxTwinsAreExactOnUniformScores) {
  std::mt19937 rng(23);
  int checked = 0;
  auto small = [&] { return static_cast<float>(static_cast<int>(rng() % 9) - 4); };
  for (int trial = 0; trial < 40 && checked < 16; ++trial) {
    const int64_t heads = 1 + rng() % 3, m = 1 + rng() % 50, keys = 2 + 2 * (rng() % 60),
                  d = 1 + rng() % 40, dv = 1 + rng() % 40;
    AttentionParts p;
    p.qk.types = {DType::F32, DType::BF16, DType::F32, DType::F32};
    p.av.types = {DType::BF16, DType::BF16, DType::F32, DType::F32};
    p.qk.batch = p.av.batch = heads;
    p.qk.m = p.av.m = m, p.qk.n = p.av.k = keys, p.qk.k = d, p.av.n = dv;
    p.qk.broadcastB = p.av.broadcastB = p.qk.constantB = p.av.constantB = false;
    p.qk.transB = rng() % 2, p.av.transB = rng() % 2;
    auto qc = randomConfig(p.qk, Isa::Amx, rng);
    auto vc = randomConfig(p.av, Isa::Amx, rng);
    ASSERT_TRUE(qc.isOk() && vc.isOk());
    p.qkConfig = *qc, p.avConfig = *vc;
    if (!checkAttention(p)) continue;
    if (trial % 2) p.keyBlock = p.qkConfig.nr * (1 + static_cast<int64_t>(rng() % 3));
    p.qkEpilogue = {{PostOpKind::Scale, 0.25f}, {PostOpKind::AddTensor}};
    auto kernel = compileAttention(test::twinJit(), p);
    ASSERT_TRUE(kernel.isOk()) << kernel.error().message();
    Tensor q(DType::F32, Shape{heads, m, d}), k(DType::F32, Shape{heads, keys, d}),
        v(DType::F32, Shape{heads, keys, dv}), mask(DType::F32, Shape{heads, m, keys});
    for (int64_t i = 0; i < q.numel(); ++i) q.dataAs<float>()[i] = small();
    std::vector<float> key(static_cast<size_t>(d));
    for (float& x : key) x = small();
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t j = 0; j < keys; ++j)
        for (int64_t c = 0; c < d; ++c) // K [d, keys], or [keys, d] when transB
          k.dataAs<float>()[h * keys * d + (p.qk.transB ? j * d + c : c * keys + j)] =
              key[static_cast<size_t>(c)];
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t j = 0; j < keys; ++j)
        for (int64_t c = 0; c < dv; ++c) // V [keys, dv], or [dv, keys] when transB
          v.dataAs<float>()[h * keys * dv + (p.av.transB ? c * keys + j : j * dv + c)] = small();
    for (int64_t i = 0; i < mask.numel(); ++i)
      mask.dataAs<float>()[i] =
          i % keys != 0 && rng() % 3 == 0 ? -std::numeric_limits<float>::infinity() : 0.f;
    Tensor out(DType::F32, Shape{heads, m, dv});
    kernel->run(q.dataAs<float>(), k.dataAs<float>(), v.dataAs<float>(), out.dataAs<float>(),
                mask.dataAs<float>());
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t i = 0; i < m; ++i) {
        const float* row = mask.dataAs<float>() + (h * m + i) * keys;
        float count = 0.f;
        for (int64_t j = 0; j < keys; ++j) count += row[j] == 0.f;
        for (int64_t c = 0; c < dv; ++c) {
          float sum = 0.f;
          for (int64_t j = 0; j < keys; ++j)
            if (row[j] == 0.f)
              sum += v.dataAs<float>()[h * keys * dv + (p.av.transB ? c * keys + j : j * dv + c)];
          const float want = sum * (1.f / count);
          const float got = out.dataAs<float>()[(h * m + i) * dv + c];
          ASSERT_EQ(got, want) << "head " << h << " row " << i << " column " << c << " of m " << m
                               << " keys " << keys << " d " << d << " dv " << dv << " qk "
                               << p.qkConfig.toJson().dump() << " av " << p.avConfig.toJson().dump()
                               << " key block " << attentionKeyBlock(p, test::twinJit().target());
        }
      }
    ++checked;
  }
  EXPECT_GE(checked, 12);
}

// The online softmax (FlashAttention's recurrence over key blocks): the same checks with key
// blocks forced small.
TEST(AttentionKernel, OnlineSoftmaxOverKeyBlocksMatchesReference) {
  checkRandomAttention(true, 11);
}

// Keys beyond what a block of score rows holds in L2 take the online softmax by themselves: the
// smallest power-of-two context of at least 20000 keys that does on this machine, one head, a
// mask that hides whole blocks of one row, against the reference.
TEST(AttentionKernel, LongKeyAxesTakeTheOnlineSoftmax) {
  AttentionParts p;
  p.qk.batch = p.av.batch = 1;
  p.qk.m = p.av.m = 9, p.qk.k = 16, p.av.n = 24;
  p.qk.broadcastB = p.av.broadcastB = p.qk.constantB = p.av.constantB = false;
  Isa isa = widestIsa(hostTarget());
  for (int64_t keys = 20000;; keys *= 2) {
    p.qk.n = p.av.k = keys;
    p.qkConfig = defaultMatmulConfig(p.qk, isa, hostTarget());
    p.avConfig = defaultMatmulConfig(p.av, isa, hostTarget());
    if (attentionKeyBlock(p, hostTarget()) < keys) break;
    ASSERT_LT(keys, 1 << 22) << "no key count takes the online softmax";
  }
  const int64_t n = p.qk.n;
  p.qkEpilogue = {{PostOpKind::Scale, 0.25f}, {PostOpKind::AddTensor}};
  auto kernel = compileAttention(jit(), p);
  ASSERT_TRUE(kernel.isOk()) << kernel.error().message();
  std::mt19937 rng(5);
  Tensor q = randomTensor(Shape{1, 9, 16}, rng), k = randomTensor(Shape{1, 16, n}, rng),
         v = randomTensor(Shape{1, n, 24}, rng), out = randomTensor(Shape{1, 9, 24}, rng);
  Tensor mask = randomTensor(Shape{1, 9, n}, rng);
  // Row 2 sees only its last 100 keys: whole blocks of it are masked out (-inf).
  for (int64_t j = 0; j < n - 100; ++j)
    mask.dataAs<float>()[2 * n + j] = -std::numeric_limits<float>::infinity();
  kernel->run(q.dataAs<float>(), k.dataAs<float>(), v.dataAs<float>(), out.dataAs<float>(),
              mask.dataAs<float>());
  Tensor want = referenceAttention(p, 0.25f, true, q, k, v, mask);
  for (int64_t i = 0; i < out.numel(); ++i)
    ASSERT_NEAR(out.getDouble(i), want.getDouble(i), 1e-4)
        << "element " << i << ", " << n << " keys";
}

// Scores that are NaN make their row NaN (as the reference's softmax does), never a number.
TEST(AttentionKernel, NanScoresPropagate) {
  AttentionParts p;
  p.qk.batch = p.av.batch = 1;
  p.qk.m = p.av.m = 3, p.qk.n = p.av.k = 5, p.qk.k = 4, p.av.n = 8;
  p.qk.broadcastB = p.av.broadcastB = p.qk.constantB = p.av.constantB = false;
  Isa isa = widestIsa(hostTarget());
  p.qkConfig = defaultMatmulConfig(p.qk, isa, hostTarget());
  p.avConfig = defaultMatmulConfig(p.av, isa, hostTarget());
  p.qkEpilogue = {{PostOpKind::Scale, 0.5f}};
  auto kernel = compileAttention(jit(), p);
  ASSERT_TRUE(kernel.isOk()) << kernel.error().message();
  std::mt19937 rng(3);
  Tensor q = randomTensor(Shape{1, 3, 4}, rng), k = randomTensor(Shape{1, 4, 5}, rng),
         v = randomTensor(Shape{1, 5, 8}, rng), out = randomTensor(Shape{1, 3, 8}, rng);
  q.dataAs<float>()[4] = std::nanf(""); // row 1 of Q: every score of row 1 is NaN
  kernel->run(q.dataAs<float>(), k.dataAs<float>(), v.dataAs<float>(), out.dataAs<float>());
  for (int j = 0; j < 8; ++j) {
    EXPECT_FALSE(std::isnan(out.dataAs<float>()[j])) << "row 0";
    EXPECT_TRUE(std::isnan(out.dataAs<float>()[8 + j])) << "row 1";
  }
}

} // namespace
} // namespace tunec

namespace tunec {
namespace {

// Not a test: times BERT-base's attention (12 heads, 128 x 128 x 64) and its parts, for
// profiling (--gtest_also_run_disabled_tests --gtest_filter='*TimeBert*'); TUNEC_BF16=1 times
// the bf16 kernel (--precision bf16).
TEST(AttentionKernel, DISABLED_TimeBertShapes) {
  AttentionParts p;
  if (std::getenv("TUNEC_BF16")) {
    p.qk.types = {DType::F32, DType::BF16, DType::F32, DType::F32};
    p.av.types = {DType::BF16, DType::BF16, DType::F32, DType::F32};
  }
  p.qk.batch = p.av.batch = 12;
  p.qk.m = p.av.m = 128, p.qk.n = p.av.k = 128, p.qk.k = 64, p.av.n = 64;
  p.qk.broadcastB = p.av.broadcastB = p.qk.constantB = p.av.constantB = false;
  p.qk.transB = true, p.qk.lda = 768, p.qk.strideA = 64, p.qk.ldb = 768, p.qk.strideB = 64;
  p.av.ldb = 768, p.av.strideB = 64, p.av.ldc = 768, p.av.strideC = 64;
  Isa isa = widestIsa(hostTarget());
  p.qkConfig = defaultMatmulConfig(p.qk, isa, hostTarget());
  p.avConfig = defaultMatmulConfig(p.av, isa, hostTarget());
  p.qkEpilogue = {{PostOpKind::Scale, 0.125f}};
  auto kernel = compileAttention(jit(), p);
  ASSERT_TRUE(kernel.isOk()) << kernel.error().message();
  std::mt19937 rng(1);
  Tensor q = randomTensor(Shape{128, 768}, rng), k = randomTensor(Shape{128, 768}, rng),
         v = randomTensor(Shape{128, 768}, rng), o = randomTensor(Shape{128, 768}, rng);
  for (int round = 0; round < 3; ++round) {
    auto start = std::chrono::steady_clock::now();
    int runs = 200;
    for (int r = 0; r < runs; ++r)
      kernel->run(q.dataAs<float>(), k.dataAs<float>(), v.dataAs<float>(), o.dataAs<float>());
    double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / runs;
    std::printf("attention: %.3f ms, %.1f GFLOP/s\n", s * 1e3,
                (p.qk.flops() + p.av.flops()) / s / 1e9);
  }
  // Cold, as in a model: Q, K and V evicted from every cache level before each run (a sweep
  // over 64 MiB); the fastest of 100 runs, which noise cannot make faster.
  std::vector<float> sweep(16 << 20, 1.f);
  double fastest = 1e9;
  for (int r = 0; r < 100; ++r) {
    for (float& x : sweep) x += 1.f;
    auto start = std::chrono::steady_clock::now();
    kernel->run(q.dataAs<float>(), k.dataAs<float>(), v.dataAs<float>(), o.dataAs<float>());
    fastest = std::min(
        fastest, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::printf("attention, cold: %.3f ms (fastest of 100)\n", fastest * 1e3);
}

} // namespace
} // namespace tunec
