// Every register tile the microkernel generator accepts, on both ISAs, against a naive GEMM:
// k around the k-block, batch 1 and 3, accumulate on and off, masked column tails, transposed
// A, and the epilogue (bias, clip, residual add). Tolerance: 4 * k * eps * max|a| * max|b|.
#include "codegen/microkernel.h"
#include "codegen/microkernel_emitter.h"
#include "support/host.h"
#include "test_support.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <gtest/gtest.h>
#include <random>
#include <set>

namespace tunec {
namespace {

using test::jit;
using test::randomTensor;
using test::randomVector;

struct Case {
  int64_t k;
  int64_t batch;
  bool accumulate;
};

// Runs one call of the kernel and checks every valid element, and that columns past nValid
// and the padding between rows are untouched.
void checkKernel(const MicrokernelSpec& spec, MicrokernelFn fn, const Case& cs, uint32_t seed) {
  std::mt19937 rng(seed);
  const int64_t mr = spec.mr, nr = spec.nr, k = cs.k, lda = spec.aTransposed ? mr + 3 : k + 5;
  const int64_t ldb = nr, ldc = nr + 7, ldAdd = nr + 2;
  const int64_t group = spec.aRowGroup, ldaGroup = group * lda + 11;
  // Offset of A row i (non-transposed): affine, or in groups with a gap between groups.
  auto rowOffset = [&](int64_t i) {
    return group ? (i / group) * ldaGroup + (i % group) * lda : i * lda;
  };
  std::vector<std::vector<float>> as, bs;
  std::vector<const float*> aPtrs, bPtrs;
  for (int64_t b = 0; b < cs.batch; ++b) {
    as.push_back(randomVector(
        static_cast<size_t>(spec.aTransposed ? k * lda : rowOffset(mr - 1) + lda), rng));
    bs.push_back(randomVector(static_cast<size_t>(k * ldb), rng));
  }
  for (int64_t b = 0; b < cs.batch; ++b) {
    aPtrs.push_back(as[static_cast<size_t>(b)].data());
    bPtrs.push_back(bs[static_cast<size_t>(b)].data());
  }
  std::vector<float> c = randomVector(static_cast<size_t>(mr * ldc), rng);
  std::vector<float> bias = randomVector(static_cast<size_t>(nr), rng);
  std::vector<float> addend = randomVector(static_cast<size_t>(mr * ldAdd), rng);
  std::vector<float> original = c;
  // Per-k scales of B (spec.scaleK): batch element b's row kk times kScale[b * k + kk].
  std::vector<float> kScale = randomVector(static_cast<size_t>(k * cs.batch), rng);
  std::vector<float> columnScale = randomVector(static_cast<size_t>(nr), rng);
  int32_t flags = (cs.accumulate ? kUkrAccumulate : 0) | kUkrApplyEpilogue;
  fn(aPtrs.data(), bPtrs.data(), c.data(), k, lda, ldb, ldc, cs.batch, flags, bias.data(),
     addend.data(), ldAdd, ldaGroup, bPtrs[0], kScale.data(), columnScale.data(), nullptr);

  double tol = 4.0 * static_cast<double>(k * cs.batch + 2) * 1.1920929e-7 + 1e-6;
  for (int64_t i = 0; i < mr; ++i)
    for (int64_t j = 0; j < nr; ++j) {
      size_t at = static_cast<size_t>(i * ldc + j);
      if (j >= spec.nValid) {
        ASSERT_EQ(c[at], original[at])
            << "column " << j << " past nValid was written; tile " << microkernelName(spec);
        continue;
      }
      double want = cs.accumulate ? original[at] : 0.0;
      for (int64_t b = 0; b < cs.batch; ++b)
        for (int64_t kk = 0; kk < k; ++kk) {
          double av = spec.aTransposed
                          ? as[static_cast<size_t>(b)][static_cast<size_t>(kk * lda + i)]
                          : as[static_cast<size_t>(b)][static_cast<size_t>(rowOffset(i) + kk)];
          double scale = spec.scaleK ? kScale[static_cast<size_t>(b * k + kk)] : 1.0;
          want += av * scale * bs[static_cast<size_t>(b)][static_cast<size_t>(kk * ldb + j)];
        }
      for (const PostOp& op : spec.epilogue) {
        if (op.kind == PostOpKind::BiasPerColumn) want += bias[static_cast<size_t>(j)];
        if (op.kind == PostOpKind::ScalePerColumn) want *= columnScale[static_cast<size_t>(j)];
        if (op.kind == PostOpKind::PReluPerColumn && want < 0)
          want *= columnScale[static_cast<size_t>(j)];
        if (op.kind == PostOpKind::Relu) want = std::max(want, 0.0);
        if (op.kind == PostOpKind::Clip)
          want = std::min(std::max(want, double(op.lo)), double(op.hi));
        if (op.kind == PostOpKind::AddTensor) want += addend[static_cast<size_t>(i * ldAdd + j)];
        if (op.kind == PostOpKind::Scale) want *= op.lo;
        if (op.kind == PostOpKind::Gelu)
          want = 0.5 * want * (1.0 + std::erf(want / std::sqrt(2.0)));
      }
      ASSERT_NEAR(c[at], want, tol)
          << "tile " << microkernelName(spec) << " m=" << i << " n=" << j << " k=" << k
          << " batch=" << cs.batch << " accumulate=" << cs.accumulate;
    }
  for (int64_t i = 0; i < mr; ++i)
    for (int64_t j = nr; j < ldc; ++j)
      ASSERT_EQ(c[static_cast<size_t>(i * ldc + j)], original[static_cast<size_t>(i * ldc + j)])
          << "row padding written";
}

class MicrokernelTiles : public ::testing::TestWithParam<Isa> {};

TEST_P(MicrokernelTiles, EveryAcceptedTileMatchesNaiveGemm) {
  Isa isa = GetParam();
  if (!targetSupports(hostTarget(), isa))
    GTEST_SKIP() << isaInfo(isa).name << " is not available on this CPU";
  int lanes = isaInfo(isa).f32Lanes();
  int tiles = 0;
  uint32_t seed = 1;
  for (int nr = lanes; nr <= 4 * lanes; nr += lanes)
    for (int mr = 1;; ++mr) {
      MicrokernelSpec spec{isa, mr, nr, nr, false, true, {}};
      if (!checkMicrokernelSpec(spec).isOk()) break;
      ++tiles;
      auto plain = compileMicrokernel(jit(), spec);
      ASSERT_TRUE(plain.isOk()) << plain.error().message();
      for (Case cs : {Case{1, 1, false}, Case{17, 3, true}, Case{130, 1, true}})
        checkKernel(spec, *plain, cs, seed++);
      // Masked tail, transposed A, k unrolled by 3 (so k % 3 exercises the remainder loop), a
      // four-op epilogue and, on every other tile, the per-k scale of B in one variant.
      MicrokernelSpec tail{isa,
                           mr,
                           nr,
                           std::max(1, nr - 1 - mr % lanes),
                           true,
                           true,
                           {{PostOpKind::BiasPerColumn},
                            {PostOpKind::ScalePerColumn},
                            {PostOpKind::Scale, -1.5f},
                            {PostOpKind::Clip, -0.5f, 2.f},
                            {PostOpKind::AddTensor}}};
      tail.kUnroll = 3;
      tail.scaleK = mr % 2 == 0;
      tail.prefetchB = true; // prefetches change no result
      tail.prefetchBGroup = mr % 2 ? 4 : 2;
      auto masked = compileMicrokernel(jit(), tail);
      ASSERT_TRUE(masked.isOk()) << masked.error().message();
      for (Case cs : {Case{1, 2, false}, Case{33, 1, true}, Case{7, 2, true}})
        checkKernel(tail, *masked, cs, seed++);
      // Rows in groups (a conv tile spanning output rows), when the tile has two groups or more.
      if (mr >= 2) {
        MicrokernelSpec grouped{
            isa, mr, nr, nr, false, true, {{PostOpKind::PReluPerColumn}, {PostOpKind::Gelu}}};
        grouped.aRowGroup = (mr + 1) / 2;
        grouped.prefetchA = true; // prefetches change no result
        grouped.prefetchB = true, grouped.prefetchBLines = 1 + mr % 4;
        auto g = compileMicrokernel(jit(), grouped);
        ASSERT_TRUE(g.isOk()) << g.error().message();
        checkKernel(grouped, *g, Case{19, 2, true}, seed++);
      }
    }
  EXPECT_GE(tiles, isa == Isa::Avx512 ? 50 : 20);
}

INSTANTIATE_TEST_SUITE_P(Isas, MicrokernelTiles, ::testing::Values(Isa::Avx2, Isa::Avx512),
                         [](const auto& info) { return std::string(isaInfo(info.param).name); });

TEST(Microkernel, EmitsAnObjectFileForAheadOfTimeLinking) {
  MicrokernelSpec spec{widestIsa(hostTarget()),
                       4,
                       2 * isaInfo(widestIsa(hostTarget())).f32Lanes(),
                       2 * isaInfo(widestIsa(hostTarget())).f32Lanes(),
                       false,
                       true,
                       {}};
  std::string path = ::testing::TempDir() + "/ukr.o";
  auto module = jit().newModule(spec.isa, "aot");
  codegen::emitMicrokernel(*module, spec, "tunec_aot_kernel", false);
  Status s = jit().emitObject(std::move(module), path);
  ASSERT_TRUE(s.isOk()) << s.error().message();
  std::ifstream f(path, std::ios::binary);
  std::string bytes(std::istreambuf_iterator<char>(f), {});
  ASSERT_GT(bytes.size(), 64u);
  EXPECT_EQ(bytes.substr(0, 4), "\x7f"
                                "ELF");
  EXPECT_NE(bytes.find("tunec_aot_kernel"), std::string::npos);
}

TEST(Microkernel, RowsThatShareAnL1SetAreDetected) {
  // A 512-channel stride-2 conv tile: 14 rows 4 KiB apart all land in one set.
  EXPECT_TRUE(aRowsAliasInL1(14, 1024, 0, 0, 4));
  // Two row groups of 7, 16 KiB apart: still one set.
  EXPECT_TRUE(aRowsAliasInL1(14, 1024, 7, 4096, 4));
  // 1 KiB apart: four sets of at most four rows.
  EXPECT_FALSE(aRowsAliasInL1(14, 256, 0, 0, 4));
  // Six rows of a 2048-wide GEMM: 8 KiB apart, six in one set, within its ways.
  EXPECT_FALSE(aRowsAliasInL1(6, 2048, 0, 0, 4));
  // The same 1024-element rows of 2-byte elements are 2 KiB apart: two sets of seven.
  EXPECT_FALSE(aRowsAliasInL1(14, 1024, 0, 0, 2));
}

TEST(Microkernel, ImpossibleTileIsRejectedWithRegisterCount) {
  MicrokernelSpec spec{Isa::Avx2, 8, 16, 16, false, true, {}};
  Status s = checkMicrokernelSpec(spec);
  ASSERT_FALSE(s.isOk());
  EXPECT_EQ(s.error().message(), "microkernel 8x16 needs 19 vector registers (16 accumulators, 2 B "
                                 "vectors, 1 broadcast) but avx2 has 16");
  spec = {Isa::Avx512, 4, 24, 24, false, true, {}};
  s = checkMicrokernelSpec(spec);
  ASSERT_FALSE(s.isOk());
  EXPECT_EQ(s.error().message(), "microkernel nr=24 must be a positive multiple of 16 for avx512");
  spec = {Isa::Avx512, 4, 32, 32, false, true, {}};
  spec.prefetchB = true, spec.prefetchBGroup = 3;
  s = checkMicrokernelSpec(spec);
  ASSERT_FALSE(s.isOk());
  EXPECT_EQ(s.error().message(), "microkernel B prefetch group 3 is not 1, 2 or 4");
  spec.prefetchBGroup = 1, spec.prefetchBLines = 9;
  s = checkMicrokernelSpec(spec);
  ASSERT_FALSE(s.isOk());
  EXPECT_EQ(s.error().message(), "microkernel B prefetch lines 9 is not in 1..8");
}

// The tiles that read a B panel in turn prefetch every line of the next one, in each row phase,
// and never past a row's end: as many tiles as line columns or more (a column each, the rows
// spread over up to 4 times as many), and fewer (several columns each: 1 to 3 row tiles of a
// panel of 64 columns left a quarter of it to the hardware prefetcher before).
TEST(Microkernel, ThePanelPrefetchCoversEveryLineOfTheNextPanel) {
  for (int nr : {8, 16, 24, 32, 48, 64, 80, 96})
    for (int64_t tiles = 1; tiles <= 24; ++tiles) {
      PanelPrefetch p = panelPrefetchFor(tiles, nr);
      SCOPED_TRACE("nr " + std::to_string(nr) + ", " + std::to_string(tiles) + " tiles");
      EXPECT_EQ(p.columns, (nr + 15) / 16);
      ASSERT_TRUE(p.lines >= 1 && p.lines <= 8);
      ASSERT_TRUE(p.group == 1 || p.group == 2 || p.group == 4);
      EXPECT_FALSE(p.lines > 1 && p.group > 1);
      std::set<std::pair<int64_t, int64_t>> covered; // (line column, row phase)
      for (int64_t t = 0; t < tiles; ++t) {
        int64_t first = p.firstLine(t);
        EXPECT_GE(first, 0);
        EXPECT_LE(first + p.lines, p.columns);
        for (int64_t c = first; c < first + p.lines; ++c) covered.insert({c, p.phase(t)});
      }
      EXPECT_EQ(std::ssize(covered), p.columns * p.group);
    }
  // Fewer tiles than columns share them: 3 tiles of 64 columns take two lines each.
  PanelPrefetch three = panelPrefetchFor(3, 64);
  EXPECT_EQ(three.lines, 2);
  EXPECT_EQ(three.group, 1);
  EXPECT_EQ(three.firstLine(0), 0);
  EXPECT_EQ(three.firstLine(1), 2);
  EXPECT_EQ(panelPrefetchFor(1, 64).lines, 4);
  EXPECT_EQ(panelPrefetchFor(8, 64).group, 2);
}

// The k step is chosen by the element types: types no strategy implements are refused by name
// before any code is generated (bf16 and int8 strategies come with their kernels).
TEST(Microkernel, ElementTypesWithoutAKStepStrategyAreRefused) {
  MicrokernelSpec spec{Isa::Avx2, 4, 16, 16, false, true, {}};
  EXPECT_TRUE(checkMicrokernelSpec(spec).isOk());
  EXPECT_EQ(microkernelName(spec), "tunec_f32_brgemm_4x16_avx2");
  spec.types = {DType::BF16, DType::BF16, DType::F32, DType::F32};
  Status s = checkMicrokernelSpec(spec);
  ASSERT_FALSE(s.isOk());
  EXPECT_EQ(s.error().message(),
            "microkernel: no k-step strategy for element types "
            "{\"acc\":\"f32\",\"dst\":\"f32\",\"src\":\"bf16\",\"wei\":\"bf16\"} on avx2");
  spec.types = {DType::U8, DType::I8, DType::I32, DType::U8};
  EXPECT_EQ(microkernelName(spec).rfind("tunec_u8i8_brgemm_4x16", 0), 0u);
  EXPECT_FALSE(checkMicrokernelSpec(spec).isOk());
}

} // namespace
} // namespace tunec
