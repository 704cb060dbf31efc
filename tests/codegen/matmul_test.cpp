// The matmul template against the reference executor: many random valid configs and every edge
// case (sizes not divisible by any block, M or N below the register tile, K = 1, transposed
// operands, batches, constant and runtime B, two threads), with epilogues.
// Tolerance: 4 * k * eps * max|a| * max|b| + 1e-5 (inputs in [-1, 1]).
#include "codegen/matmul_kernel.h"
#include "codegen/weight_packing.h"
#include "ir/graph.h"
#include "reference/reference.h"
#include "runtime/packing.h"
#include "support/host.h"
#include "templates/conv2d_template.h"
#include "test_support.h"

#include <gtest/gtest.h>
#include <random>

namespace tunec {
namespace {

using test::jit;
using test::randomTensor;
using test::randomVector;

// The expected result from the reference executor: Transposes, MatMul, bias Add, post-ops.
Tensor referenceResult(const MatmulWorkload& w, const Epilogue& epi, const Tensor& a,
                       const Tensor& b, const Tensor& bias, const Tensor& addend,
                       const Tensor& columnScale = Tensor(DType::F32, Shape{1})) {
  Graph g;
  ValueId va = g.addInput("a", {DType::F32, a.shape(), {}});
  ValueId vb = g.addInput("b", {DType::F32, b.shape(), {}});
  ValueId vbias = g.addInput("bias", {DType::F32, bias.shape(), {}});
  ValueId vadd = g.addInput("addend", {DType::F32, addend.shape(), {}});
  ValueId vscale = g.addInput("scale", {DType::F32, columnScale.shape(), {}});
  auto swapLast = [](int rank) {
    std::vector<int64_t> perm;
    for (int i = 0; i < rank; ++i) perm.push_back(i);
    std::swap(perm[static_cast<size_t>(rank - 1)], perm[static_cast<size_t>(rank - 2)]);
    return TransposeAttrs{perm};
  };
  if (w.transA) va = test::addOp(g, OpKind::Transpose, swapLast(a.shape().rank()), {va});
  if (w.transB) vb = test::addOp(g, OpKind::Transpose, swapLast(b.shape().rank()), {vb});
  ValueId y = test::addOp(g, OpKind::MatMul, NoAttrs{}, {va, vb});
  y = test::addPostOps(g, y, epi, vbias, vadd, vscale);
  g.addOutput(y);
  auto out = runReference(g, {a, b, bias, addend, columnScale});
  EXPECT_TRUE(out.isOk()) << out.error().message();
  return (*out)[0];
}

// A config from uniformly drawn knob values (clamped by matmulConfigFromKnobs; may be invalid).
Expected<MatmulConfig> randomConfig(const MatmulWorkload& w, Isa isa, std::mt19937& rng) {
  std::vector<nlohmann::json> values;
  KnobSpace space = matmulKnobSpace(w, isa);
  for (const Knob& knob : space) values.push_back(knob.values[rng() % knob.values.size()]);
  return matmulConfigFromKnobs(w, isa, space, values);
}

void checkMatmul(const MatmulWorkload& w, const MatmulConfig& c, const Epilogue& epi,
                 uint32_t seed) {
  std::mt19937 rng(seed);
  Shape aShape = w.transA ? Shape{w.batch, w.k, w.m} : Shape{w.batch, w.m, w.k};
  Shape bBase = w.transB ? Shape{w.n, w.k} : Shape{w.k, w.n};
  Shape bShape = w.broadcastB ? bBase : Shape{w.batch, bBase[0], bBase[1]};
  Tensor a = randomTensor(aShape, rng), b = randomTensor(bShape, rng);
  Tensor bias = randomTensor(Shape{w.n}, rng), addend = randomTensor(Shape{w.batch, w.m, w.n}, rng);
  auto kernel = compileMatmul(jit(), w, c, epi, w.constantB ? b.dataAs<float>() : nullptr);
  ASSERT_TRUE(kernel.isOk()) << kernel.error().message();
  Tensor out = randomTensor(Shape{w.batch, w.m, w.n}, rng); // garbage that must be overwritten
  Tensor columnScale = randomTensor(Shape{w.n}, rng);
  kernel->run(a.dataAs<float>(), b.dataAs<float>(), out.dataAs<float>(), bias.dataAs<float>(),
              addend.dataAs<float>(), nullptr, columnScale.dataAs<float>());
  Tensor want = referenceResult(w, epi, a, b, bias, addend, columnScale);
  double tol = 4.0 * static_cast<double>(w.k) * 1.1920929e-7 + 1e-5;
  for (int64_t i = 0; i < out.numel(); ++i)
    ASSERT_NEAR(out.getDouble(i), want.getDouble(i),
                test::epilogueTolerance(epi, tol, want.getDouble(i)))
        << "element " << i << " of " << w.toJson().dump() << " with config " << c.toJson().dump()
        << " epilogue '" << epilogueName(epi) << "'";
}

TEST(MatmulTemplate, DefaultConfigsOnEdgeShapes) {
  const std::vector<std::array<int64_t, 3>> shapes = {{1, 1, 1},      {1, 17, 5},   {5, 1, 9},
                                                      {7, 33, 1},     {64, 64, 64}, {37, 61, 129},
                                                      {130, 100, 70}, {3, 200, 300}};
  uint32_t seed = 1;
  for (Isa isa : test::hostIsas())
    for (auto [m, n, k] : shapes)
      for (bool transA : {false, true})
        for (bool transB : {false, true}) {
          MatmulWorkload w;
          w.m = m, w.n = n, w.k = k, w.transA = transA, w.transB = transB;
          MatmulConfig c = defaultMatmulConfig(w, isa, hostTarget());
          ASSERT_TRUE(validateMatmulConfig(w, c).isOk())
              << validateMatmulConfig(w, c).error().message();
          checkMatmul(w, c, {{PostOpKind::BiasPerColumn}, {PostOpKind::Relu}}, seed++);
        }
}

TEST(MatmulTemplate, RandomValidConfigsMatchReference) {
  std::mt19937 rng(42);
  int checked = 0;
  // As many draws on a machine with one ISA as on one with two, so the bound holds on both.
  const int trials = 80 / static_cast<int>(test::hostIsas().size());
  for (Isa isa : test::hostIsas())
    for (int trial = 0; trial < trials; ++trial) {
      MatmulWorkload w;
      std::uniform_int_distribution<int64_t> dim(1, 150);
      w.m = dim(rng), w.n = dim(rng), w.k = dim(rng);
      w.batch = trial % 4 == 0 ? 3 : 1;
      w.transA = rng() % 2, w.transB = rng() % 2;
      w.constantB = rng() % 2;
      w.broadcastB = w.constantB ? rng() % 2 : rng() % 2;
      w.threads = trial % 3 == 0 ? 2 : 1;
      auto c = randomConfig(w, isa, rng);
      ASSERT_TRUE(c.isOk());
      if (!validateMatmulConfig(w, *c).isOk()) continue; // e.g. a register tile too large
      Epilogue epi;
      if (trial % 2) epi.push_back({PostOpKind::BiasPerColumn});
      if (trial % 3 == 1) epi.push_back({PostOpKind::Clip, -0.25f, 0.5f});
      // The activations an epilogue takes besides ReLU and clip, one per trial in turn.
      const PostOp activations[] = {{PostOpKind::LeakyRelu, 0.1f},
                                    {PostOpKind::HardSigmoid, 0.2f, 0.5f},
                                    {PostOpKind::HardSwish},
                                    {PostOpKind::Sigmoid},
                                    {PostOpKind::Swish, 1.f},
                                    {PostOpKind::Tanh},
                                    {PostOpKind::Exp}};
      if (trial % 8 < 7) epi.push_back(activations[trial % 8]);
      if (trial % 8 == 5) epi.push_back({PostOpKind::Swish, 1.702f}); // a chain of two
      if (trial % 5 == 2) epi.push_back({PostOpKind::AddTensor});
      if (trial % 6 == 1) epi.push_back({PostOpKind::ScalePerColumn});
      if (trial % 6 == 4) epi.push_back({PostOpKind::PReluPerColumn});
      checkMatmul(w, *c, epi, static_cast<uint32_t>(trial));
      ++checked;
    }
  EXPECT_GE(checked, 25);
}

// A strided layout for `batches` stored matrices of rows x cols: the heads of a wider tensor
// (rows interleaved, batch stride = cols) or one after the other with gaps; ld and stride in
// elements.
struct Layout {
  int64_t ld, stride;
};

Layout randomLayout(int64_t batches, int64_t rows, int64_t cols, std::mt19937& rng) {
  int64_t pad = static_cast<int64_t>(rng() % 5);
  if (rng() % 2) return {batches * cols + pad, cols};
  int64_t ld = cols + pad;
  return {ld, rows * ld + static_cast<int64_t>(rng() % 7)};
}

// Copies dense [batches, rows, cols] into a strided buffer.
void scatter(const Tensor& dense, int64_t batches, int64_t rows, int64_t cols, Layout l,
             std::vector<float>& buffer) {
  const float* d = dense.dataAs<float>();
  for (int64_t b = 0; b < batches; ++b)
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c)
        buffer[static_cast<size_t>(b * l.stride + r * l.ld + c)] = d[(b * rows + r) * cols + c];
}

TEST(MatmulTemplate, StridedOperandsMatchReferenceAndLeaveTheRestUntouched) {
  std::mt19937 rng(7);
  int checked = 0;
  const int trials = 60 / static_cast<int>(test::hostIsas().size());
  for (Isa isa : test::hostIsas())
    for (int trial = 0; trial < trials; ++trial) {
      MatmulWorkload w;
      std::uniform_int_distribution<int64_t> dim(1, 90);
      w.m = dim(rng), w.n = dim(rng), w.k = dim(rng);
      w.batch = std::array<int64_t, 3>{1, 3, 12}[static_cast<size_t>(trial % 3)];
      w.transA = rng() % 2, w.transB = rng() % 2;
      w.constantB = false, w.broadcastB = w.batch == 1;
      w.threads = trial % 4 == 0 ? 2 : 1;
      int64_t aRows = w.transA ? w.k : w.m, aCols = w.transA ? w.m : w.k;
      int64_t bRows = w.transB ? w.n : w.k, bCols = w.transB ? w.k : w.n;
      int64_t bBatches = w.broadcastB ? 1 : w.batch;
      Layout la = randomLayout(w.batch, aRows, aCols, rng);
      Layout lb = randomLayout(bBatches, bRows, bCols, rng);
      Layout lc = randomLayout(w.batch, w.m, w.n, rng);
      w.lda = la.ld, w.strideA = la.stride, w.ldb = lb.ld, w.ldc = lc.ld, w.strideC = lc.stride;
      w.strideB = w.broadcastB ? 0 : lb.stride;
      ASSERT_TRUE(w.check().isOk()) << w.check().error().message();
      auto c = randomConfig(w, isa, rng);
      ASSERT_TRUE(c.isOk());
      if (trial % 5 == 0) *c = defaultMatmulConfig(w, isa, hostTarget());
      if (!validateMatmulConfig(w, *c).isOk()) continue;
      Epilogue epi;
      if (trial % 2) epi.push_back({PostOpKind::BiasPerColumn});
      if (trial % 3 == 1) epi.push_back({PostOpKind::AddTensor});
      Tensor a = randomTensor(Shape{w.batch, aRows, aCols}, rng);
      Tensor b =
          randomTensor(w.broadcastB ? Shape{bRows, bCols} : Shape{w.batch, bRows, bCols}, rng);
      Tensor bias = randomTensor(Shape{w.n}, rng);
      Tensor addend = randomTensor(Shape{w.batch, w.m, w.n}, rng);
      std::vector<float> aBuf = randomVector(static_cast<size_t>(w.aExtent()), rng);
      std::vector<float> bBuf = randomVector(static_cast<size_t>(w.bExtent()), rng);
      scatter(a, w.batch, aRows, aCols, la, aBuf);
      scatter(b, bBatches, bRows, bCols, lb, bBuf);
      std::vector<float> cBuf = randomVector(static_cast<size_t>(w.cExtent()), rng), before = cBuf;
      auto kernel = compileMatmul(jit(), w, *c, epi, nullptr);
      ASSERT_TRUE(kernel.isOk()) << kernel.error().message();
      kernel->run(aBuf.data(), bBuf.data(), cBuf.data(), bias.dataAs<float>(),
                  addend.dataAs<float>());
      Tensor want = referenceResult(w, epi, a, b, bias, addend);
      std::vector<bool> inView(cBuf.size(), false);
      double tol = 4.0 * static_cast<double>(w.k) * 1.1920929e-7 + 1e-5;
      for (int64_t bi = 0; bi < w.batch; ++bi)
        for (int64_t i = 0; i < w.m; ++i)
          for (int64_t j = 0; j < w.n; ++j) {
            size_t at = static_cast<size_t>(bi * lc.stride + i * lc.ld + j);
            inView[at] = true;
            ASSERT_NEAR(cBuf[at], want.getDouble((bi * w.m + i) * w.n + j), tol)
                << "C(" << bi << ", " << i << ", " << j << ") of " << w.toJson().dump()
                << " with config " << c->toJson().dump();
          }
      for (size_t at = 0; at < cBuf.size(); ++at) {
        if (!inView[at]) {
          ASSERT_EQ(cBuf[at], before[at]) << "wrote outside C's view at " << at;
        }
      }
      ++checked;
    }
  EXPECT_GE(checked, 20);
}

TEST(MatmulTemplate, StridedWorkloadsAreCheckedAndKeepTheirKeys) {
  MatmulWorkload w;
  w.batch = 12, w.m = 128, w.n = 128, w.k = 64, w.transB = true, w.constantB = false;
  w.broadcastB = false, w.lda = 768, w.strideA = 64, w.ldb = 768, w.strideB = 64;
  ASSERT_TRUE(w.check().isOk()) << w.check().error().message();
  auto back = MatmulWorkload::fromJson(w.toJson());
  ASSERT_TRUE(back.isOk());
  EXPECT_EQ(back->toJson(), w.toJson());
  EXPECT_EQ(w.toJson().value("lda", 0), 768);
  MatmulWorkload dense;
  dense.m = dense.n = dense.k = 8;
  EXPECT_FALSE(dense.toJson().contains("lda")); // keys of dense workloads are unchanged
  MatmulWorkload bad = w;
  bad.lda = 32;
  EXPECT_NE(bad.check().error().message().find("shorter than its row"), std::string::npos);
  bad = w;
  bad.ldc = 1536, bad.strideC = 64; // heads 128 wide, 64 apart: written over each other
  EXPECT_NE(bad.check().error().message().find("C's batches overlap"), std::string::npos);
  bad = w;
  bad.constantB = true, bad.broadcastB = true, bad.strideB = 0;
  EXPECT_NE(bad.check().error().message().find("must be dense"), std::string::npos);
}

// cold_weights is a measurement condition in the key: absent when false (warm keys unchanged),
// round-tripped when true, and only for a constant B.
TEST(MatmulTemplate, ColdWeightsAreAKeyOfTheirOwn) {
  MatmulWorkload w;
  w.m = 128, w.n = 768, w.k = 768;
  EXPECT_FALSE(w.toJson().contains("cold_weights"));
  MatmulWorkload cold = w;
  cold.coldWeights = true;
  auto back = MatmulWorkload::fromJson(cold.toJson());
  ASSERT_TRUE(back.isOk()) << back.error().message();
  EXPECT_TRUE(back->coldWeights);
  EXPECT_NE(cold.toJson(), w.toJson());
  cold.constantB = false;
  EXPECT_NE(cold.check().error().message().find("cold_weights needs a constant B"),
            std::string::npos);
  Conv2dWorkload conv;
  conv.ic = 64, conv.h = conv.w = 7, conv.oc = 64, conv.kh = conv.kw = 3;
  EXPECT_FALSE(conv.toJson().contains("cold_weights"));
  conv.coldWeights = true;
  auto convBack = Conv2dWorkload::fromJson(conv.toJson());
  ASSERT_TRUE(convBack.isOk()) << convBack.error().message();
  EXPECT_TRUE(convBack->coldWeights);
}

TEST(MatmulTemplate, InvalidConfigsAreRejectedWithReasons) {
  MatmulWorkload w;
  w.m = 64, w.n = 64, w.k = 64;
  MatmulConfig c = defaultMatmulConfig(w, Isa::Avx512, hostTarget());
  c.mc = c.mr * 2 + 1;
  EXPECT_NE(validateMatmulConfig(w, c).error().message().find("must be a positive multiple of mr"),
            std::string::npos);
  // A loop order that is no permutation of m, n, k cannot be built; a record spelling one is
  // refused when it is read, naming the field and the spellings.
  nlohmann::json j = defaultMatmulConfig(w, Isa::Avx512, hostTarget()).toJson();
  j["loop_order"] = "mmk";
  EXPECT_EQ(MatmulConfig::fromJson(j).error().message(),
            "matmul config: field 'loop_order' is 'mmk', not nkm, nmk, mkn, mnk, knm or kmn");
  c = defaultMatmulConfig(w, Isa::Avx512, hostTarget());
  c.parallel = MatmulParallel::M;
  EXPECT_EQ(validateMatmulConfig(w, c).error().message(),
            "matmul config: parallel loops need threads > 1");
  auto parsed = MatmulConfig::fromJson(nlohmann::json{{"isa", "avx512"}, {"mr", "eight"}});
  ASSERT_FALSE(parsed.isOk());
  EXPECT_EQ(parsed.error().message(), "matmul config: field 'mr' has the wrong type");
}

// The element types are part of the workload: f32 keeps the key it always had, other types are
// read (one name, or one per operand) and refused by name until a kernel implements them.
TEST(MatmulTemplate, WorkloadElementTypesAreReadAndUnsupportedOnesRefused) {
  MatmulWorkload w;
  w.m = 8, w.n = 16, w.k = 32;
  nlohmann::json j = w.toJson();
  EXPECT_EQ(j.at("dtype"), "f32");
  KernelTypes types;
  ASSERT_TRUE(readKernelTypes(j, "matmul", types).isOk());
  EXPECT_TRUE(types.allF32());
  EXPECT_EQ(types.weiBytes(), 4u);
  j["dtype"] = "bf16";
  ASSERT_TRUE(readKernelTypes(j, "matmul", types).isOk());
  EXPECT_EQ(types, (KernelTypes{DType::BF16, DType::BF16, DType::F32, DType::BF16}));
  EXPECT_EQ(types.srcBytes(), 2u);
  EXPECT_EQ(kernelTypesToJson(types), "bf16");
  EXPECT_TRUE(MatmulWorkload::fromJson(j).isOk()); // the bf16 GEMM (vdpbf16ps)
  j["k"] = 33;
  EXPECT_EQ(MatmulWorkload::fromJson(j).error().message(),
            "bf16 matmul workload: k=33 must be even (k-pairs of A's rows)");
  j["k"] = 32;
  j["dtype"] = {{"src", "u8"}, {"wei", "i8"}, {"acc", "i32"}, {"dst", "u8"}};
  ASSERT_TRUE(readKernelTypes(j, "matmul", types).isOk());
  EXPECT_EQ(types, (KernelTypes{DType::U8, DType::I8, DType::I32, DType::U8}));
  EXPECT_EQ(kernelTypesToJson(types), j.at("dtype"));
  EXPECT_TRUE(MatmulWorkload::fromJson(j).isOk()); // the int8 GEMM, requantizing (tdpbusd)
  j["dtype"] = {{"src", "u8"}, {"wei", "u8"}, {"acc", "i32"}, {"dst", "f32"}};
  EXPECT_EQ(MatmulWorkload::fromJson(j).error().message(),
            "matmul workload: dtype '{\"acc\":\"i32\",\"dst\":\"f32\",\"src\":\"u8\",\"wei\":"
            "\"u8\"}' is not supported (matmul kernels are f32, bf16 (bf16 B; f32 or bf16 A and C) "
            "or u8 x i8 (i32 sums; an f32 or u8 C) in this tunec)");
  j["dtype"] = "f31";
  EXPECT_EQ(MatmulWorkload::fromJson(j).error().message(),
            "matmul workload: dtype 'f31' is unknown");
  j["dtype"] = {{"src", "f32"}};
  EXPECT_EQ(MatmulWorkload::fromJson(j).error().message(),
            "matmul workload: dtype needs a 'wei' type name");
  j.erase("dtype");
  EXPECT_EQ(MatmulWorkload::fromJson(j).error().message(),
            "matmul workload: missing field 'dtype'");
}

// Packed weights are bytes with their element type and layout tag: B (k x n, row-major) in
// nr-column panels of k rows, zero past n.
TEST(WeightPacking, MatmulPanelsCarryTypeLayoutAndZeroPadding) {
  MatmulWorkload w;
  w.m = 2, w.k = 3, w.n = 5;
  MatmulConfig c;
  c.isa = Isa::Avx2, c.nr = 8;
  std::vector<float> b(15);
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>(i + 1);
  codegen::PackedWeights p = codegen::packMatmulB(w, c, b.data());
  EXPECT_EQ(p.dtype, DType::F32);
  EXPECT_EQ(p.layout, codegen::WeightLayout::MatmulPanels);
  EXPECT_EQ(p.bytes, 8u * 3u * sizeof(float));
  EXPECT_EQ(p.elements(), codegen::matmulPackedBElements(w, c));
  const auto* f = reinterpret_cast<const float*>(p.data.get());
  for (int64_t kk = 0; kk < 3; ++kk)
    for (int64_t j = 0; j < 8; ++j)
      EXPECT_EQ(f[kk * 8 + j], j < 5 ? b[static_cast<size_t>(kk * 5 + j)] : 0.f)
          << "k " << kk << ", column " << j;
}

// ---- bf16 (vdpbf16ps): inputs rounded to bf16, f32 accumulation, an f32 or bf16 C ----

// The bf16 bits of a tensor's values (round to nearest even), and the values they stand for.
std::vector<uint16_t> bf16Bits(const Tensor& t) {
  std::vector<uint16_t> out(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i)
    out[static_cast<size_t>(i)] = floatToBf16(t.dataAs<float>()[i]);
  return out;
}
Tensor roundedToBf16(const Tensor& t) {
  Tensor r = t;
  for (int64_t i = 0; i < r.numel(); ++i)
    r.dataAs<float>()[i] = bf16ToFloat(floatToBf16(r.dataAs<float>()[i]));
  return r;
}

Tensor smallIntegers(Shape shape, std::mt19937& rng, int range) {
  Tensor t(DType::F32, std::move(shape));
  for (int64_t i = 0; i < t.numel(); ++i)
    t.dataAs<float>()[i] = static_cast<float>(static_cast<int>(rng() % (2 * range + 1)) - range);
  return t;
}

// Runs a bf16 workload on (a, b, bias, addend) and checks it against the reference executor on
// the bf16-rounded operands: exactly when `exact` (small integers: every product and sum is an
// integer f32 holds), else within f32 accumulation's bound; a bf16 C is compared with the
// reference rounded to bf16 (exactly, or within one bf16 step of the bound).
void checkBf16(const MatmulWorkload& w, const MatmulConfig& c, const Epilogue& epi, const Tensor& a,
               const Tensor& b, const Tensor& bias, const Tensor& addend, bool exact) {
  ASSERT_TRUE(validateMatmulConfig(w, c).isOk()) << validateMatmulConfig(w, c).error().message();
  const bool bf16C = w.types.dst == DType::BF16;
  Tensor ra = roundedToBf16(a), rb = roundedToBf16(b),
         radd = bf16C ? roundedToBf16(addend) : addend;
  std::vector<uint16_t> aBits = bf16Bits(a), bBits = bf16Bits(b), addBits = bf16Bits(addend);
  auto kernel =
      compileMatmul(test::bf16Jit(), w, c, epi, w.constantB ? b.dataAs<float>() : nullptr);
  ASSERT_TRUE(kernel.isOk()) << kernel.error().message();
  const size_t outElems = static_cast<size_t>(w.batch * w.m * w.n);
  std::vector<float> outF(outElems, 1234.5f);
  std::vector<uint16_t> outH(outElems, floatToBf16(1234.5f));
  // An f32 A (convertsA) is given as it is: the kernel rounds it to bf16 itself.
  const void* aIn = convertsA(w.types) ? static_cast<const void*>(a.dataAs<float>()) : aBits.data();
  kernel->runTyped(aIn, bBits.data(), bf16C ? static_cast<void*>(outH.data()) : outF.data(),
                   bias.dataAs<float>(),
                   bf16C ? static_cast<const void*>(addBits.data()) : addend.dataAs<float>());
  Tensor want = referenceResult(w, epi, ra, rb, bias, radd);
  double tol = exact ? 0.0 : 4.0 * static_cast<double>(w.k) * 1.1920929e-7 + 1e-5;
  for (size_t i = 0; i < outElems; ++i) {
    double ref = want.getDouble(static_cast<int64_t>(i));
    double got = bf16C ? bf16ToFloat(outH[i]) : outF[i];
    double bound = test::epilogueTolerance(epi, tol, ref);
    if (bf16C) { // the f32 result rounded once more, to bf16 (8 bits of significand)
      if (exact) {
        ref = bf16ToFloat(floatToBf16(static_cast<float>(ref)));
      } else {
        bound += std::abs(ref) / 256.0;
      }
    }
    ASSERT_NEAR(got, ref, bound) << "element " << i << " of " << w.toJson().dump()
                                 << " with config " << c.toJson().dump() << " epilogue '"
                                 << epilogueName(epi) << "'";
  }
}

MatmulWorkload bf16Workload(int64_t m, int64_t n, int64_t k, DType dst, DType src = DType::BF16) {
  MatmulWorkload w;
  w.m = m, w.n = n, w.k = k;
  w.types = {src, DType::BF16, DType::F32, dst};
  return w;
}

// Every register tile the AVX-512 file allows, exactly: small integers in [-4, 4], so that every
// product and sum is exact in f32 and the kernel must equal the reference bit for bit; M and N
// tails (m, n not multiples of the tile), K blocks (kc < k), constant and runtime B, an f32 and
// a bf16 C, a bf16 A and an f32 A the kernel converts (then also transposed, and odd k).
TEST(Bf16Matmul, EveryTileIsExactOnSmallIntegers) {
  std::mt19937 rng(7);
  int checked = 0;
  for (int nr = 16; nr <= 64; nr += 16)
    for (int mr = 1; mr <= maxTileRows(Isa::Avx512, nr); ++mr)
      for (auto [src, dst] :
           {std::pair{DType::BF16, DType::F32}, std::pair{DType::BF16, DType::BF16},
            std::pair{DType::F32, DType::F32}}) {
        bool converted = src == DType::F32;
        int64_t k = 2 * (17 + mr) + (converted && mr % 2 ? 1 : 0);
        MatmulWorkload w = bf16Workload(2 * mr + 1, nr + 5 + (mr % 3) * 16, k, dst, src);
        w.transA = converted && mr % 3 == 0;
        w.constantB = (mr + nr / 16) % 2 == 0;
        MatmulConfig c = defaultMatmulConfig(w, Isa::Avx512, test::bf16Jit().target());
        c.mr = mr, c.nr = nr;
        c.mc = (w.m + mr - 1) / mr * mr, c.nc = (w.n + nr - 1) / nr * nr;
        if (dst == DType::F32 && mr % 2) c.kc = 16; // several K blocks, accumulated in C
        Tensor a = smallIntegers(w.transA ? Shape{1, w.k, w.m} : Shape{1, w.m, w.k}, rng, 4);
        Tensor b = smallIntegers(Shape{w.k, w.n}, rng, 4);
        Tensor bias = smallIntegers(Shape{w.n}, rng, 8);
        Tensor addend = smallIntegers(Shape{1, w.m, w.n}, rng, 8);
        Epilogue epi;
        if (mr % 2)
          epi = {{PostOpKind::BiasPerColumn}, {PostOpKind::AddTensor}, {PostOpKind::Relu}};
        checkBf16(w, c, epi, a, b, bias, addend, true);
        ++checked;
      }
  EXPECT_GE(checked, 60);
}

// Random workloads and configs drawn from the bf16 knob space, on random data in [-1, 1]:
// batches, broadcast and per-batch B, two threads, epilogues (activations, residual), f32 and
// bf16 C. Within f32 accumulation's bound of the reference on the bf16-rounded operands.
TEST(Bf16Matmul, RandomConfigsMatchReferenceOnRoundedOperands) {
  std::mt19937 rng(11);
  int checked = 0;
  for (int trial = 0; trial < 60; ++trial) {
    std::uniform_int_distribution<int64_t> dim(1, 140);
    // Every other trial an f32 A the kernel converts: any k, A transposed or not.
    bool converted = trial % 2 == 1;
    MatmulWorkload w = bf16Workload(dim(rng), dim(rng), converted ? dim(rng) : 2 * dim(rng),
                                    trial % 3 == 0 ? DType::BF16 : DType::F32,
                                    converted ? DType::F32 : DType::BF16);
    w.transA = converted && rng() % 2;
    w.batch = trial % 4 == 0 ? 3 : 1;
    w.transB = rng() % 2;
    w.constantB = rng() % 2;
    w.broadcastB = rng() % 2;
    w.threads = trial % 3 == 1 ? 2 : 1;
    auto c = randomConfig(w, Isa::Avx512, rng);
    ASSERT_TRUE(c.isOk());
    if (!validateMatmulConfig(w, *c).isOk()) continue; // e.g. a register tile too large
    Epilogue epi;
    if (trial % 2) epi.push_back({PostOpKind::BiasPerColumn});
    const PostOp activations[] = {
        {PostOpKind::Relu}, {PostOpKind::Gelu}, {PostOpKind::Sigmoid}, {PostOpKind::Tanh}};
    if (trial % 5 < 4) epi.push_back(activations[trial % 5]);
    if (trial % 3 == 2) epi.push_back({PostOpKind::AddTensor});
    Shape aShape = w.transA ? Shape{w.batch, w.k, w.m} : Shape{w.batch, w.m, w.k};
    Shape bBase = w.transB ? Shape{w.n, w.k} : Shape{w.k, w.n};
    Shape bShape = w.broadcastB ? bBase : Shape{w.batch, bBase[0], bBase[1]};
    Tensor a = randomTensor(aShape, rng), b = randomTensor(bShape, rng);
    Tensor bias = randomTensor(Shape{w.n}, rng),
           addend = randomTensor(Shape{w.batch, w.m, w.n}, rng);
    checkBf16(w, *c, epi, a, b, bias, addend, false);
    ++checked;
  }
  EXPECT_GE(checked, 30);
}

// The bf16 GEMM against the f32 one on the same f32 data: the error bf16's 8-bit significand
// brings, which a user of `--dtype bf16` accepts (relative L2 below 1e-2 at k = 768).
TEST(Bf16Matmul, StaysWithinBf16PrecisionOfTheF32Result) {
  std::mt19937 rng(3);
  MatmulWorkload w = bf16Workload(64, 96, 768, DType::F32);
  w.constantB = true;
  Tensor a = randomTensor(Shape{1, w.m, w.k}, rng), b = randomTensor(Shape{w.k, w.n}, rng);
  auto kernel = compileMatmul(test::bf16Jit(), w,
                              defaultMatmulConfig(w, Isa::Avx512, test::bf16Jit().target()), {},
                              b.dataAs<float>());
  ASSERT_TRUE(kernel.isOk()) << kernel.error().message();
  std::vector<uint16_t> aBits = bf16Bits(a);
  std::vector<float> out(static_cast<size_t>(w.m * w.n));
  kernel->runTyped(aBits.data(), nullptr, out.data());
  MatmulWorkload f32 = w;
  f32.types = {};
  Tensor want = referenceResult(f32, {}, a, b, Tensor(DType::F32, Shape{w.n}),
                                Tensor(DType::F32, Shape{1, w.m, w.n}));
  double num = 0, den = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    double d = out[i] - want.getDouble(static_cast<int64_t>(i));
    num += d * d,
        den += want.getDouble(static_cast<int64_t>(i)) * want.getDouble(static_cast<int64_t>(i));
  }
  double rel = std::sqrt(num / den);
  EXPECT_LT(rel, 1e-2);
  EXPECT_GT(rel, 1e-5); // the operands really were rounded to bf16
}

// What bf16 cannot take is refused by name: a transposed A, packed A, odd kc, a bf16 C over
// several K blocks, a target without avx512_bf16.
TEST(Bf16Matmul, ConfigsAndTargetsItCannotRunAreRefused) {
  MatmulWorkload w = bf16Workload(16, 32, 64, DType::BF16);
  MatmulConfig c = defaultMatmulConfig(w, Isa::Avx512, hostTarget());
  EXPECT_EQ(c.kc, 64);
  EXPECT_FALSE(c.packA);
  EXPECT_TRUE(validateMatmulConfig(w, c).isOk());
  c.kc = 32;
  EXPECT_EQ(validateMatmulConfig(w, c).error().message(),
            "matmul config: a bf16 C is written once, so kc=32 must cover k=64 (K blocks "
            "accumulate in f32 only)");
  w.types.dst = DType::F32;
  EXPECT_TRUE(validateMatmulConfig(w, c).isOk());
  c.kc = 31;
  EXPECT_EQ(validateMatmulConfig(w, c).error().message(),
            "matmul config: kc=31 must be even for bf16 (k-pairs)");
  c.kc = 32, c.packA = true;
  EXPECT_EQ(validateMatmulConfig(w, c).error().message(),
            "matmul config: bf16 reads A in place or converts it (pack_a is f32 only)");
  c.packA = false, c.isa = Isa::Avx2, c.nr = 16, c.mr = 4, c.mc = 16, c.nc = 32;
  EXPECT_EQ(validateMatmulConfig(w, c).error().message(),
            "matmul config: bf16 kernels are AMX or AVX-512 (vdpbf16ps), not avx2");
  MatmulWorkload t = w;
  t.transA = true;
  EXPECT_EQ(t.check().error().message(),
            "bf16 matmul workload: A must be stored row-major (trans_a is f32 only)");
  t.types.src = DType::F32, t.k = 63; // an f32 A is converted: transposed and odd k are fine
  EXPECT_TRUE(t.check().isOk());
  for (const Knob& knob : matmulKnobSpace(w, Isa::Avx512))
    for (const nlohmann::json& v : knob.values) {
      if (knob.name == "pack_a") {
        EXPECT_EQ(v, false);
      }
      if (knob.name == "kc") {
        EXPECT_EQ(v.get<int64_t>() % 2, 0);
      }
    }
  Target noBf16 = hostTarget();
  noBf16.avx512f = true, noBf16.fma = true, noBf16.avx512bf16 = false;
  Status s = checkTargetSupports(noBf16, Isa::Avx512, w.types);
  ASSERT_FALSE(s.isOk());
  EXPECT_NE(s.error().message().find("bf16 kernels need avx512_bf16 (vdpbf16ps)"),
            std::string::npos);
}

// B in k-pair panels: element (kk, j) of panel p at p*kp*nr + (kk/2)*2*nr + 2*j + kk%2, zero
// past n and past an odd k; the f32 packer rounds to nearest even, the bf16 one copies bits.
TEST(WeightPacking, Bf16PairPanelsInterleaveKPairsAndPad) {
  std::mt19937 rng(5);
  for (bool transposed : {false, true})
    for (auto [k, n, nr] : {std::array<int64_t, 3>{5, 21, 16}, {8, 32, 32}, {3, 7, 16}}) {
      Tensor b = randomTensor(transposed ? Shape{n, k} : Shape{k, n}, rng);
      std::vector<uint16_t> bits = bf16Bits(b);
      int64_t kp = (k + 1) / 2 * 2, panels = (n + nr - 1) / nr, ldb = transposed ? k : n;
      std::vector<uint16_t> fromF32(static_cast<size_t>(kp * panels * nr), 0xffff),
          fromBits(fromF32.size(), 0xffff);
      tunec_pack_b_f32_to_bf16(b.dataAs<float>(), ldb, transposed, k, n, nr, fromF32.data());
      tunec_pack_b_bf16(bits.data(), ldb, transposed, k, n, nr, fromBits.data());
      for (int64_t p = 0; p < panels; ++p)
        for (int64_t kk = 0; kk < kp; ++kk)
          for (int64_t j = 0; j < nr; ++j) {
            int64_t col = p * nr + j;
            uint16_t want = 0;
            if (kk < k && col < n)
              want = bits[static_cast<size_t>(transposed ? col * ldb + kk : kk * ldb + col)];
            size_t at = static_cast<size_t>(p * kp * nr + (kk / 2) * 2 * nr + 2 * j + kk % 2);
            ASSERT_EQ(fromF32[at], want) << "k " << kk << " column " << col;
            ASSERT_EQ(fromBits[at], want) << "k " << kk << " column " << col;
          }
    }
  // A's f32 rows rounded to bf16 rows of whole pairs (16 at a time with vcvtneps2bf16 where the
  // CPU has it, the same bits as floatToBf16), from A stored either way.
  for (bool transposed : {false, true})
    for (auto [rows, cols] : {std::pair<int64_t, int64_t>{3, 37}, {5, 32}, {1, 1}}) {
      Tensor a = randomTensor(transposed ? Shape{cols, rows} : Shape{rows, cols}, rng);
      int64_t cp = (cols + 1) / 2 * 2, lda = transposed ? rows : cols;
      std::vector<uint16_t> out(static_cast<size_t>(rows * cp), 0xffff);
      tunec_pack_a_f32_to_bf16(a.dataAs<float>(), lda, transposed, rows, cols, out.data());
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t kk = 0; kk < cp; ++kk) {
          uint16_t want =
              kk < cols ? floatToBf16(a.dataAs<float>()[transposed ? kk * lda + i : i * lda + kk])
                        : 0;
          ASSERT_EQ(out[static_cast<size_t>(i * cp + kk)], want) << "row " << i << " k " << kk;
        }
    }
  MatmulWorkload w = bf16Workload(2, 21, 6, DType::F32);
  MatmulConfig c;
  c.nr = 16;
  Tensor b = randomTensor(Shape{6, 21}, rng);
  codegen::PackedWeights packed = codegen::packMatmulB(w, c, b.dataAs<float>());
  EXPECT_EQ(packed.dtype, DType::BF16);
  EXPECT_EQ(packed.layout, codegen::WeightLayout::MatmulPairPanels);
  EXPECT_EQ(packed.bytes, 2u * 32u * 6u);
}

TEST(MatmulTemplate, JsonRoundTrips) {
  MatmulWorkload w;
  w.batch = 2, w.m = 3, w.n = 4, w.k = 5, w.transA = true, w.threads = 2;
  auto back = MatmulWorkload::fromJson(w.toJson());
  ASSERT_TRUE(back.isOk());
  EXPECT_EQ(back->toJson(), w.toJson());
  MatmulConfig c = defaultMatmulConfig(w, Isa::Avx2, hostTarget());
  auto cb = MatmulConfig::fromJson(c.toJson());
  ASSERT_TRUE(cb.isOk());
  EXPECT_EQ(*cb, c);
}

} // namespace
} // namespace tunec

namespace tunec {
namespace {

// Calls check(w, c, rng) for random valid configs of the workloads make(rng) draws (threads 2
// every third trial), until `wanted` were checked or 60 trials ran; returns how many ran.
template <typename Make, typename Check>
int checkRandomConfigs(uint32_t seed, int wanted, Make make, Check check) {
  std::mt19937 rng(seed);
  Isa isa = widestIsa(hostTarget());
  int checked = 0;
  for (int trial = 0; trial < 60 && checked < wanted; ++trial) {
    MatmulWorkload w = make(rng);
    w.threads = trial % 3 == 0 ? 2 : 1;
    auto c = randomConfig(w, isa, rng);
    EXPECT_TRUE(c.isOk());
    if (!c || !validateMatmulConfig(w, *c).isOk()) continue;
    check(w, *c, rng, trial);
    if (::testing::Test::HasFatalFailure()) return checked;
    ++checked;
  }
  return checked;
}

// A split C (merged sibling matmuls): part p of the columns is its own dense m x split_n
// matrix. Random valid configs (nr divides the split), bias and activations, against the
// reference result rearranged part by part.
TEST(MatmulTemplate, SplitOutputsAreDenseParts) {
  auto make = [](std::mt19937& rng) {
    MatmulWorkload w;
    w.m = 1 + rng() % 40, w.k = 1 + rng() % 50;
    w.splitN = 16 * (1 + rng() % 4);
    w.n = w.splitN * (2 + rng() % 2);
    return w;
  };
  auto check = [](const MatmulWorkload& w, const MatmulConfig& c, std::mt19937& rng, int trial) {
    Epilogue epi = {{PostOpKind::BiasPerColumn}};
    if (trial % 2) epi.push_back({PostOpKind::Gelu});
    Tensor a = randomTensor(Shape{1, w.m, w.k}, rng), b = randomTensor(Shape{w.k, w.n}, rng);
    Tensor bias = randomTensor(Shape{w.n}, rng), addend = randomTensor(Shape{1, w.m, w.n}, rng);
    auto kernel = compileMatmul(jit(), w, c, epi, b.dataAs<float>());
    ASSERT_TRUE(kernel.isOk()) << kernel.error().message();
    Tensor out = randomTensor(Shape{w.m * w.n}, rng);
    kernel->run(a.dataAs<float>(), nullptr, out.dataAs<float>(), bias.dataAs<float>());
    MatmulWorkload dense = w;
    dense.splitN = 0;
    Tensor want = referenceResult(dense, epi, a, b, bias, addend);
    double tol = 4.0 * static_cast<double>(w.k) * 1.1920929e-7 + 1e-5;
    for (int64_t i = 0; i < w.m; ++i)
      for (int64_t j = 0; j < w.n; ++j)
        ASSERT_NEAR(
            out.dataAs<float>()[j / w.splitN * w.m * w.splitN + i * w.splitN + j % w.splitN],
            want.dataAs<float>()[i * w.n + j], tol)
            << "(" << i << ", " << j << ") of " << w.toJson().dump() << " with "
            << c.toJson().dump();
  };
  EXPECT_GE(checkRandomConfigs(11, 12, make, check), 8);
}

} // namespace
} // namespace tunec

namespace tunec {
namespace {

// An epilogue that ends in a row normalization (BERT's residual add then LayerNorm): random
// valid configs, one and two threads, against the reference's
// MatMul, bias, residual Add and LayerNormalization.
TEST(MatmulTemplate, RowNormalizationEndsTheEpilogue) {
  auto make = [](std::mt19937& rng) {
    MatmulWorkload w;
    w.m = 1 + rng() % 50, w.n = 1 + rng() % 90, w.k = 1 + rng() % 60;
    return w;
  };
  auto check = [](const MatmulWorkload& w, const MatmulConfig& c, std::mt19937& rng, int) {
    const float eps = 1e-5f;
    Epilogue epi = {
        {PostOpKind::BiasPerColumn}, {PostOpKind::AddTensor}, {PostOpKind::LayerNormRow, eps}};
    Tensor a = randomTensor(Shape{1, w.m, w.k}, rng), b = randomTensor(Shape{w.k, w.n}, rng);
    Tensor bias = randomTensor(Shape{w.n}, rng), addend = randomTensor(Shape{1, w.m, w.n}, rng);
    Tensor params = randomTensor(Shape{2, w.n}, rng);
    auto kernel = compileMatmul(jit(), w, c, epi, b.dataAs<float>());
    ASSERT_TRUE(kernel.isOk()) << kernel.error().message();
    Tensor out = randomTensor(Shape{1, w.m, w.n}, rng);
    kernel->run(a.dataAs<float>(), nullptr, out.dataAs<float>(), bias.dataAs<float>(),
                addend.dataAs<float>(), params.dataAs<float>());
    Epilogue before(epi.begin(), epi.end() - 1);
    Graph g;
    ValueId y = g.addInput("y", {DType::F32, Shape{1, w.m, w.n}, {}});
    Tensor scale(DType::F32, Shape{w.n}), shift(DType::F32, Shape{w.n});
    std::copy_n(params.dataAs<float>(), w.n, scale.dataAs<float>());
    std::copy_n(params.dataAs<float>() + w.n, w.n, shift.dataAs<float>());
    g.addOutput(test::addOp(g, OpKind::LayerNormalization, NormAttrs{-1, eps},
                            {y, g.addConstant("scale", scale), g.addConstant("shift", shift)}));
    auto want = runReference(g, {referenceResult(w, before, a, b, bias, addend)});
    ASSERT_TRUE(want.isOk()) << want.error().message();
    // The normalization divides by the row's deviation: relative to the values' spread.
    double tol = 4.0 * static_cast<double>(w.k + w.n) * 1.1920929e-7 * 8 + 1e-5;
    for (int64_t i = 0; i < out.numel(); ++i)
      ASSERT_NEAR(out.getDouble(i), (*want)[0].getDouble(i), tol)
          << "element " << i << " of " << w.toJson().dump() << " with " << c.toJson().dump();
  };
  EXPECT_GE(checkRandomConfigs(5, 12, make, check), 8);
}

} // namespace
} // namespace tunec
