// AMX and the AVX-512 dot products through their twins (codegen/tile_ops.h), on any machine (an
// AVX2-only CPU runs the twins of AVX-512 kernels too: codegen/jit.h):
// every line of the Xeon's recorded results (tests/fixtures/amx/golden.jsonl, copied from
// shared/amx) replayed bit for bit; the AMX matmul over every tile grid its template allows, with
// M, N and K tails and K blocks, exactly equal to a reference that splits K as tdpbf16ps does and
// within tolerance of the double-precision reference. On a machine with AMX the real kernels run
// too and equal the twins bit for bit, from two threads at once; elsewhere those tests skip,
// saying so, and TUNEC_REQUIRE_AMX=1 turns the skip into a failure. The AVX2 int8 kernel
// (vpmaddubsw) runs for real everywhere and equals its twin and the integer reference.
#include "codegen/attention_kernel.h"
#include "codegen/kernel_emitters.h"
#include "codegen/matmul_kernel.h"
#include "codegen/module_builder.h"
#include "codegen/tile_ops.h"
#include "templates/template.h"
#include "test_support.h"

#include <array>
#include <bit>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <llvm/IR/IRBuilder.h>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>
#include <unistd.h>

namespace tunec {
namespace {

using test::jit;

using test::hostHasAmx;
using test::twinJit;

std::vector<uint8_t> hexBytes(const std::string& hex) {
  std::vector<uint8_t> out(hex.size() / 2);
  for (size_t i = 0; i < out.size(); ++i)
    out[i] = static_cast<uint8_t>(std::stoi(hex.substr(2 * i, 2), nullptr, 16));
  return out;
}

// ---- golden.jsonl: one instruction per line ----

using GoldenFn = void (*)(const void* a, const void* b, void* c);

/// One recorded instruction on (a, b) into c (c_in in, c_out out).
void goldenBody(codegen::ModuleBuilder& mb, llvm::IRBuilder<>& b, const nlohmann::json& r,
                const std::string& op, bool tile, llvm::Value* a, llvm::Value* bv, llvm::Value* c) {
  if (tile) {
    const int m = r["m"], n = r["n"];
    const int kGroups = op == "tdpbf16ps" ? r["k_pairs"].get<int>() : r["k_quads"].get<int>();
    codegen::TilePalette palette;
    palette.rows = {m, m, kGroups, 0, 0, 0, 0, 0};
    palette.colsb = {4 * n, 4 * kGroups, 4 * n, 0, 0, 0, 0, 0};
    auto ops = codegen::makeTileOps(mb);
    ops->configure(b, palette);
    ops->load(b, 0, c, b.getInt64(4 * n));
    ops->load(b, 1, a, b.getInt64(4 * kGroups));
    ops->load(b, 2, bv, b.getInt64(4 * n));
    if (op == "tdpbf16ps") {
      ops->dotBf16(b, 0, 1, 2);
    } else {
      codegen::TileIntDot kind = op == "tdpbusd"   ? codegen::TileIntDot::Busd
                                 : op == "tdpbssd" ? codegen::TileIntDot::Bssd
                                 : op == "tdpbsud" ? codegen::TileIntDot::Bsud
                                                   : codegen::TileIntDot::Buud;
      ops->dotInt8(b, kind, 0, 1, 2);
    }
    ops->store(b, 0, c, b.getInt64(4 * n));
  } else {
    auto* ints = llvm::FixedVectorType::get(b.getInt32Ty(), 16);
    llvm::Value* x = b.CreateAlignedLoad(ints, a, llvm::Align(4));
    llvm::Value* y = b.CreateAlignedLoad(ints, bv, llvm::Align(4));
    llvm::Value* out;
    if (op == "vdpbf16ps") {
      auto* floats = llvm::FixedVectorType::get(b.getFloatTy(), 16);
      out = codegen::emitDotBf16Pairs(mb, b, b.CreateAlignedLoad(floats, c, llvm::Align(4)), x, y);
    } else {
      out = codegen::emitDotU8S8Quads(mb, b, b.CreateAlignedLoad(ints, c, llvm::Align(4)), x, y);
    }
    b.CreateAlignedStore(out, c, llvm::Align(4));
  }
}

using Body = std::function<void(codegen::ModuleBuilder&, llvm::IRBuilder<>&, llvm::Value* a,
                                llvm::Value* b, llvm::Value* c)>;

/// A JIT-compiled void f(const void* a, const void* b, void* c) whose body `body` emits.
Expected<GoldenFn> pointerFunction(Jit& j, Isa isa, const char* tag, const Body& body) {
  auto mb = j.newModule(isa, tag);
  llvm::LLVMContext& ctx = mb->context();
  std::string name = mb->module().getModuleIdentifier();
  auto* fnTy =
      llvm::FunctionType::get(llvm::Type::getVoidTy(ctx), {mb->ptr(), mb->ptr(), mb->ptr()}, false);
  llvm::Function* fn = mb->createFunction(name, fnTy);
  llvm::IRBuilder<> b(llvm::BasicBlock::Create(ctx, "entry", fn));
  body(*mb, b, fn->getArg(0), fn->getArg(1), fn->getArg(2));
  b.CreateRetVoid();
  TUNEC_ASSIGN_OR_RETURN(void* address, j.addAndLookup(std::move(mb), name));
  return reinterpret_cast<GoldenFn>(address);
}

/// A function running one recorded instruction.
Expected<GoldenFn> goldenKernel(Jit& j, const nlohmann::json& r) {
  const std::string op = r["op"];
  const bool tile = op[0] == 't';
  Isa isa = tile ? Isa::Amx : Isa::Avx512;
  if (!targetSupports(j.target(), isa)) isa = widestIsa(j.target());
  return pointerFunction(j, isa, "golden",
                         [&](codegen::ModuleBuilder& mbr, llvm::IRBuilder<>& b, llvm::Value* a,
                             llvm::Value* bv,
                             llvm::Value* c) { goldenBody(mbr, b, r, op, tile, a, bv, c); });
}

/// Equal bits, or both NaN (payloads are not compared), for f32 results; equal for s32.
bool sameResult(uint32_t got, uint32_t want, bool isFloat) {
  if (got == want) return true;
  if (!isFloat) return false;
  float g = std::bit_cast<float>(got), w = std::bit_cast<float>(want);
  return std::isnan(g) && std::isnan(w);
}

/// Replays every line through `j`'s instructions; returns the lines checked.
int replayGolden(Jit& j, bool realOnly) {
  std::ifstream in(std::string(TUNEC_SOURCE_DIR) + "/tests/fixtures/amx/golden.jsonl");
  EXPECT_TRUE(in.good()) << "tests/fixtures/amx/golden.jsonl is missing";
  std::string line;
  int lines = 0, lineNo = 0;
  while (std::getline(in, line)) {
    ++lineNo;
    nlohmann::json r = nlohmann::json::parse(line);
    const std::string op = r["op"];
    if (realOnly) { // the real instruction only where this CPU has it
      const Target& t = hostTarget();
      if (op[0] == 't' && !hostHasAmx()) continue;
      if (op == "vdpbf16ps" && !t.avx512bf16) continue;
      if (op == "vpdpbusd" && !t.avx512vnni) continue;
    }
    auto fn = goldenKernel(j, r);
    if (!fn) {
      ADD_FAILURE() << "line " << lineNo << " (" << op << "): " << fn.error().message();
      continue;
    }
    std::vector<uint8_t> a = hexBytes(r["a"]), b = hexBytes(r["b"]), c = hexBytes(r["c_in"]),
                         want = hexBytes(r["c_out"]);
    (*fn)(a.data(), b.data(), c.data());
    const bool isFloat = op == "tdpbf16ps" || op == "vdpbf16ps";
    int bad = 0;
    for (size_t e = 0; e < c.size() / 4; ++e) {
      uint32_t got, exp;
      std::memcpy(&got, c.data() + 4 * e, 4);
      std::memcpy(&exp, want.data() + 4 * e, 4);
      if (!sameResult(got, exp, isFloat) && bad++ < 3)
        ADD_FAILURE() << "line " << lineNo << " (" << op << ", families " << r["families"].dump()
                      << ") element " << e << ": got 0x" << std::hex << got << ", the Xeon gave 0x"
                      << exp << std::dec;
    }
    ++lines;
  }
  return lines;
}

TEST(TileTwins, GoldenReplaysEveryRecordedInstructionBitForBit) {
  EXPECT_EQ(replayGolden(twinJit(), false), 166);
}

TEST(TileReal, GoldenOnThisCpuEqualsTheRecordedXeon) {
  SKIP_WITHOUT_REAL_AMX();
  EXPECT_EQ(replayGolden(jit(), true), 166);
}

// ---- the AMX matmul ----

uint32_t bitsOf(float x) {
  return std::bit_cast<uint32_t>(x);
}
float flushSub(float x) { // DAZ/FTZ: subnormals as signed zeros
  uint32_t u = bitsOf(x);
  return (u & 0x7f800000u) == 0 ? std::bit_cast<float>(u & 0x80000000u) : x;
}

/// C = A * B (+ bias, relu) as the AMX kernel computes it: per K block of kc, tdpbf16ps steps of
/// 16 k-pairs (zeros past the block's k), each two partial sums added into the block's tile, the
/// blocks added in order through C.
std::vector<float> splitKReference(const MatmulWorkload& w, const MatmulConfig& c,
                                   const std::vector<float>& a, const std::vector<float>& b,
                                   const std::vector<float>& bias, bool relu) {
  auto bf = [](float x) { return flushSub(bf16ToFloat(floatToBf16(x))); };
  std::vector<float> out(static_cast<size_t>(w.m * w.n));
  for (int64_t i = 0; i < w.m; ++i)
    for (int64_t j = 0; j < w.n; ++j) {
      float cv = 0.f;
      for (int64_t pc = 0; pc < w.k; pc += c.kc) {
        int64_t kcur = std::min(c.kc, w.k - pc);
        float acc = 0.f;
        for (int64_t s = 0; s < kcur; s += 32) {
          float sums[2] = {0.f, 0.f};
          for (int64_t p = 0; p < 32; ++p) {
            int64_t kk = pc + s + p;
            float x = s + p < kcur ? bf(a[static_cast<size_t>(i * w.k + kk)]) : 0.f;
            float y = s + p < kcur ? bf(b[static_cast<size_t>(kk * w.n + j)]) : 0.f;
            sums[p % 2] = flushSub(std::fma(x, y, sums[p % 2]));
          }
          acc = flushSub(flushSub(acc) + flushSub(sums[0] + sums[1]));
        }
        cv = pc > 0 ? acc + cv : acc;
      }
      cv = cv + bias[static_cast<size_t>(j)];
      if (relu) cv = std::max(cv, 0.f);
      out[static_cast<size_t>(i * w.n + j)] = cv;
    }
  return out;
}

struct AmxCase {
  int64_t m, n, k, kc;
  int mr, nr;
  bool bf16A;
};

std::vector<AmxCase> amxCases() {
  std::vector<AmxCase> cases;
  const std::pair<int, int> grids[] = {{16, 16}, {16, 32}, {16, 48}, {32, 16}, {32, 32}, {48, 16}};
  const int64_t shapes[][3] = {{1, 16, 32}, {17, 33, 50}, {40, 64, 96}, {64, 80, 200}, {33, 47, 7}};
  int i = 0;
  for (auto [mr, nr] : grids)
    for (const auto& s : shapes) {
      int64_t kc = (i % 3 == 0) ? s[2] : (i % 3 == 1 ? 32 : 64);
      cases.push_back({s[0], s[1], s[2], std::min(kc, s[2]), mr, nr, i % 2 == 1 && s[2] % 2 == 0});
      ++i;
    }
  return cases;
}

struct AmxRun {
  std::vector<float> out;
  std::string error;
};

MatmulWorkload workloadOf(int64_t m, int64_t n, int64_t k, KernelTypes types) {
  MatmulWorkload w;
  w.m = m, w.n = n, w.k = k;
  w.types = types;
  return w;
}

/// The default config of `w` on `isa` with a grid of mr x nr, K blocks of kc, M blocks of up to
/// 64 rows and one N block.
MatmulConfig gridConfig(const MatmulWorkload& w, Isa isa, const Target& target, int mr, int nr,
                        int64_t kc) {
  MatmulConfig c = defaultMatmulConfig(w, isa, target);
  c.isa = isa;
  c.mr = mr, c.nr = nr, c.kc = kc;
  c.mc = std::min<int64_t>(64, (w.m + mr - 1) / mr * mr) / mr * mr;
  c.nc = (w.n + nr - 1) / nr * nr;
  return c;
}

/// Compiles the AMX matmul m x n x k of `types` with a grid of mr x nr, K blocks of kc and a bias
/// and relu epilogue (or `epi`), and runs it `repeats` times on A (of types.src) and the bias; the
/// error of validation or compilation instead, if any.
AmxRun runAmxKernel(Jit& j, int64_t m, int64_t n, int64_t k, int64_t kc, int mr, int nr,
                    KernelTypes types, const void* a, const float* b, const float* bias,
                    int repeats,
                    const Epilogue& epi = {{PostOpKind::BiasPerColumn}, {PostOpKind::Relu}},
                    const float* columnScale = nullptr, Isa isa = Isa::Amx,
                    const void* addend = nullptr) {
  MatmulWorkload w = workloadOf(m, n, k, types);
  MatmulConfig c = gridConfig(w, isa, j.target(), mr, nr, kc);
  AmxRun run;
  if (Status s = validateMatmulConfig(w, c); !s) {
    run.error = s.error().message();
    return run;
  }
  auto kernel = compileMatmul(j, w, c, epi, b);
  if (!kernel) {
    run.error = kernel.error().message();
    return run;
  }
  run.out.assign(static_cast<size_t>(m * n), 1234.5f);
  for (int r = 0; r < repeats; ++r)
    kernel->runTyped(a, nullptr, run.out.data(), bias, addend, nullptr, columnScale);
  return run;
}

AmxRun runAmx(Jit& j, const AmxCase& t, const std::vector<float>& a, const std::vector<float>& b,
              const std::vector<float>& bias, int repeats = 1) {
  std::vector<uint16_t> aBits(a.size());
  for (size_t i = 0; i < a.size(); ++i) aBits[i] = floatToBf16(a[i]);
  const void* aIn = t.bf16A ? static_cast<const void*>(aBits.data()) : a.data();
  return runAmxKernel(j, t.m, t.n, t.k, t.kc, t.mr, t.nr,
                      {t.bf16A ? DType::BF16 : DType::F32, DType::BF16, DType::F32, DType::F32},
                      aIn, b.data(), bias.data(), repeats);
}

std::string caseName(const AmxCase& t) {
  return std::to_string(t.m) + "x" + std::to_string(t.n) + "x" + std::to_string(t.k) + " kc " +
         std::to_string(t.kc) + " grid " + std::to_string(t.mr) + "x" + std::to_string(t.nr) +
         (t.bf16A ? " bf16 A" : " f32 A");
}

struct AmxData {
  std::vector<float> a, b, bias;
};
AmxData amxData(const AmxCase& t, std::mt19937& rng, bool smallIntegers) {
  AmxData d;
  auto fill = [&](size_t n) {
    std::vector<float> v = test::randomVector(n, rng);
    if (smallIntegers)
      for (float& x : v) x = std::round(x * 4.f);
    return v;
  };
  d.a = fill(static_cast<size_t>(t.m * t.k));
  d.b = fill(static_cast<size_t>(t.k * t.n));
  d.bias = fill(static_cast<size_t>(t.n));
  return d;
}

TEST(AmxMatmulTwin, EveryGridWithTailsEqualsTheSplitKReference) {
  std::mt19937 rng(29);
  for (const AmxCase& t : amxCases()) {
    AmxData d = amxData(t, rng, false);
    AmxRun run = runAmx(twinJit(), t, d.a, d.b, d.bias);
    ASSERT_TRUE(run.error.empty()) << caseName(t) << ": " << run.error;
    MatmulWorkload w;
    w.m = t.m, w.n = t.n, w.k = t.k;
    MatmulConfig c;
    c.kc = t.kc;
    std::vector<float> want = splitKReference(w, c, d.a, d.b, d.bias, true);
    int bad = 0;
    for (size_t i = 0; i < want.size(); ++i)
      if (bitsOf(run.out[i]) != bitsOf(want[i]) && bad++ < 3)
        ADD_FAILURE() << caseName(t) << " element " << i << ": " << run.out[i] << " != " << want[i];
    // And within f32 accumulation's bound of the double-precision product of the bf16 values.
    for (int64_t i = 0; i < t.m; ++i)
      for (int64_t j = 0; j < t.n; ++j) {
        double ref = d.bias[static_cast<size_t>(j)];
        for (int64_t kk = 0; kk < t.k; ++kk)
          ref += static_cast<double>(
                     bf16ToFloat(floatToBf16(d.a[static_cast<size_t>(i * t.k + kk)]))) *
                 bf16ToFloat(floatToBf16(d.b[static_cast<size_t>(kk * t.n + j)]));
        ref = std::max(ref, 0.0);
        double tol = 4.0 * static_cast<double>(t.k) * 1.1920929e-7 + 1e-5;
        EXPECT_NEAR(run.out[static_cast<size_t>(i * t.n + j)], ref, tol) << caseName(t);
      }
  }
}

// A computed bf16 B (the fused attention's K and V, or a tuning candidate of their matmuls):
// packed per call into panels of k padded to a tile row, transposed or not, then the same tiles:
// bit for bit the split-K reference, over every grid and shape with tails.
TEST(AmxMatmulTwin, AComputedBIsPackedPerCallAndEqualsTheSplitKReference) {
  std::mt19937 rng(43);
  int i = 0;
  for (const AmxCase& t : amxCases()) {
    const bool transposed = i++ % 2;
    AmxData d = amxData(t, rng, false);
    MatmulWorkload w = workloadOf(t.m, t.n, t.k, {DType::F32, DType::BF16, DType::F32, DType::F32});
    w.constantB = false, w.transB = transposed;
    MatmulConfig c = gridConfig(w, Isa::Amx, twinJit().target(), t.mr, t.nr, t.kc);
    ASSERT_TRUE(validateMatmulConfig(w, c).isOk()) << validateMatmulConfig(w, c).error().message();
    auto kernel =
        compileMatmul(twinJit(), w, c, {{PostOpKind::BiasPerColumn}, {PostOpKind::Relu}}, nullptr);
    ASSERT_TRUE(kernel.isOk()) << caseName(t) << ": " << kernel.error().message();
    std::vector<uint16_t> b(static_cast<size_t>(t.k * t.n));
    for (int64_t kk = 0; kk < t.k; ++kk)
      for (int64_t j = 0; j < t.n; ++j)
        b[static_cast<size_t>(transposed ? j * t.k + kk : kk * t.n + j)] =
            floatToBf16(d.b[static_cast<size_t>(kk * t.n + j)]);
    std::vector<float> out(static_cast<size_t>(t.m * t.n), 1234.5f);
    kernel->runTyped(d.a.data(), b.data(), out.data(), d.bias.data());
    MatmulConfig split;
    split.kc = t.kc;
    std::vector<float> want = splitKReference(w, split, d.a, d.b, d.bias, true);
    for (size_t e = 0; e < want.size(); ++e)
      ASSERT_EQ(bitsOf(out[e]), bitsOf(want[e]))
          << caseName(t) << (transposed ? " transposed B" : "") << " element " << e << ": "
          << out[e] << " != " << want[e];
  }
}

TEST(AmxMatmulTwin, SmallIntegersAreExact) {
  std::mt19937 rng(30);
  for (const AmxCase& t : amxCases()) {
    AmxData d = amxData(t, rng, true);
    AmxRun run = runAmx(twinJit(), t, d.a, d.b, d.bias);
    ASSERT_TRUE(run.error.empty()) << caseName(t) << ": " << run.error;
    for (int64_t i = 0; i < t.m; ++i)
      for (int64_t j = 0; j < t.n; ++j) {
        double ref = d.bias[static_cast<size_t>(j)];
        for (int64_t kk = 0; kk < t.k; ++kk)
          ref += static_cast<double>(d.a[static_cast<size_t>(i * t.k + kk)]) *
                 d.b[static_cast<size_t>(kk * t.n + j)];
        ASSERT_EQ(run.out[static_cast<size_t>(i * t.n + j)], std::max(ref, 0.0)) << caseName(t);
      }
  }
}

TEST(AmxMatmulTwin, GridsOverEightTilesAreRefusedByName) {
  MatmulWorkload w = workloadOf(64, 64, 64, {DType::F32, DType::BF16, DType::F32, DType::F32});
  MatmulConfig c = defaultMatmulConfig(w, Isa::Amx, twinJit().target());
  c.mr = 32, c.nr = 48; // 6 C + 2 A + 3 B
  Status s = validateMatmulConfig(w, c);
  ASSERT_FALSE(s.isOk());
  EXPECT_NE(s.error().message().find("at most 8 tiles"), std::string::npos) << s.error().message();
}

// ---- the int8 AMX matmul (tdpbusd): u8 A, i8 B, exact i32 sums ----

struct Int8Case {
  int64_t m, n, k, kc;
  int mr, nr;
};

// Every grid over every shape, K blocks of all of k, 64 or 128 in turn.
std::vector<Int8Case> casesOf(std::initializer_list<std::pair<int, int>> grids,
                              std::initializer_list<std::array<int64_t, 3>> shapes) {
  std::vector<Int8Case> cases;
  int i = 0;
  for (auto [mr, nr] : grids)
    for (const auto& s : shapes) {
      int64_t kc = (i % 3 == 0) ? s[2] : (i % 3 == 1 ? 64 : 128);
      cases.push_back({s[0], s[1], s[2], std::min(kc, s[2]), mr, nr});
      ++i;
    }
  return cases;
}

// AMX grids; K tails (50, 7, 1000), M and N tails, and K long enough (1000) that the i32 sums
// of full-range data round on their way to f32.
std::vector<Int8Case> int8Cases() {
  return casesOf({{16, 16}, {16, 32}, {16, 48}, {32, 16}, {32, 32}, {48, 16}},
                 {{1, 16, 64}, {17, 33, 50}, {40, 64, 192}, {33, 47, 7}, {20, 32, 1000}});
}

std::string int8CaseName(const Int8Case& t) {
  return std::to_string(t.m) + "x" + std::to_string(t.n) + "x" + std::to_string(t.k) + " kc " +
         std::to_string(t.kc) + " grid " + std::to_string(t.mr) + "x" + std::to_string(t.nr) +
         " u8 x i8";
}

struct Int8Data {
  std::vector<uint8_t> a;
  std::vector<float> b, bias; // b: the i8 weights as the compiler passes them (integer floats)
};

/// Full range: A in [0, 255], B in [-128, 127] (or, for the AVX2 kernel, the 7-bit weights
/// [-64, 64]); small: A in [0, 3], B in [-3, 3].
Int8Data int8Data(const Int8Case& t, std::mt19937& rng, bool small, bool sevenBit = false) {
  Int8Data d;
  const int bLo = sevenBit ? -kAvx2Int8WeightLimit : -128,
            bHi = sevenBit ? kAvx2Int8WeightLimit : 127;
  std::uniform_int_distribution<int> aDist(0, small ? 3 : 255),
      bDist(small ? -3 : bLo, small ? 3 : bHi);
  d.a.resize(static_cast<size_t>(t.m * t.k));
  for (uint8_t& x : d.a) x = static_cast<uint8_t>(aDist(rng));
  d.b.resize(static_cast<size_t>(t.k * t.n));
  for (float& x : d.b) x = static_cast<float>(bDist(rng));
  d.bias = test::randomVector(static_cast<size_t>(t.n), rng);
  return d;
}

AmxRun runAmxInt8(Jit& j, const Int8Case& t, const Int8Data& d, int repeats = 1) {
  return runAmxKernel(j, t.m, t.n, t.k, t.kc, t.mr, t.nr,
                      {DType::U8, DType::I8, DType::I32, DType::F32}, d.a.data(), d.b.data(),
                      d.bias.data(), repeats);
}

/// What the kernel computes: per K block of kc the exact integer sum, rounded to f32, the blocks
/// added in order through C (f32), then (unless !biasAndRelu) the bias and relu.
float int8Reference(const Int8Case& t, const Int8Data& d, int64_t i, int64_t j,
                    bool biasAndRelu = true) {
  float cv = 0.f;
  for (int64_t pc = 0; pc < t.k; pc += t.kc) {
    int64_t sum = 0;
    for (int64_t kk = pc; kk < std::min(t.k, pc + t.kc); ++kk)
      sum += static_cast<int64_t>(d.a[static_cast<size_t>(i * t.k + kk)]) *
             static_cast<int64_t>(d.b[static_cast<size_t>(kk * t.n + j)]);
    float block = static_cast<float>(static_cast<int32_t>(sum));
    cv = pc > 0 ? block + cv : block;
  }
  return biasAndRelu ? std::max(cv + d.bias[static_cast<size_t>(j)], 0.f) : cv;
}

// Every case of `cases` run by `run` on small-integer and full-range data equals the exact
// integer reference bit for bit.
void expectExactInt8(const std::vector<Int8Case>& cases, uint32_t seed,
                     const std::function<AmxRun(const Int8Case&, const Int8Data&)>& run,
                     bool sevenBit = false) {
  std::mt19937 rng(seed);
  for (bool small : {true, false})
    for (const Int8Case& t : cases) {
      Int8Data d = int8Data(t, rng, small, sevenBit);
      AmxRun r = run(t, d);
      ASSERT_TRUE(r.error.empty()) << int8CaseName(t) << ": " << r.error;
      int bad = 0;
      for (int64_t i = 0; i < t.m; ++i)
        for (int64_t j = 0; j < t.n; ++j) {
          float want = int8Reference(t, d, i, j), got = r.out[static_cast<size_t>(i * t.n + j)];
          if (bitsOf(got) != bitsOf(want) && bad++ < 3)
            ADD_FAILURE() << int8CaseName(t) << (small ? " small" : " full range") << " (" << i
                          << ", " << j << "): " << got << " != " << want;
        }
      EXPECT_EQ(bad, 0) << int8CaseName(t);
    }
}

TEST(AmxInt8MatmulTwin, EveryGridWithTailsEqualsTheExactIntegerReference) {
  expectExactInt8(int8Cases(), 41,
                  [](const Int8Case& t, const Int8Data& d) { return runAmxInt8(twinJit(), t, d); });
}

// A quantized linear layer, y = (sa (xq - za)) (sb[n] wq) + bias, as the int8 kernel runs it:
// the u8 x s8 sums, then the column scale sa sb[n] and a bias that carries the zero point's
// compensation, bias[n] - sa sb[n] za sum_k wq[k][n] (both folded at compile time). Within
// f32's rounding of the sums of the double-precision reference, K blocks included.
TEST(AmxInt8MatmulTwin, ScaleAndZeroPointCompensationDequantizeWithinF32Rounding) {
  std::mt19937 rng(43);
  const float sa = 0.0213f;
  const int za = 117;
  for (const Int8Case& t : int8Cases()) {
    Int8Data d = int8Data(t, rng, false);
    std::vector<float> scale(static_cast<size_t>(t.n)), bias(static_cast<size_t>(t.n));
    std::uniform_real_distribution<float> sbDist(0.001f, 0.02f);
    for (int64_t j = 0; j < t.n; ++j) {
      double colsum = 0;
      for (int64_t kk = 0; kk < t.k; ++kk) colsum += d.b[static_cast<size_t>(kk * t.n + j)];
      scale[static_cast<size_t>(j)] = sa * sbDist(rng);
      bias[static_cast<size_t>(j)] = static_cast<float>(
          d.bias[static_cast<size_t>(j)] - scale[static_cast<size_t>(j)] * za * colsum);
    }
    AmxRun run = runAmxKernel(
        twinJit(), t.m, t.n, t.k, t.kc, t.mr, t.nr, {DType::U8, DType::I8, DType::I32, DType::F32},
        d.a.data(), d.b.data(), bias.data(), 1,
        {{PostOpKind::ScalePerColumn}, {PostOpKind::BiasPerColumn}}, scale.data());
    ASSERT_TRUE(run.error.empty()) << int8CaseName(t) << ": " << run.error;
    for (int64_t i = 0; i < t.m; ++i)
      for (int64_t j = 0; j < t.n; ++j) {
        double sum = 0, magnitude = 0;
        for (int64_t kk = 0; kk < t.k; ++kk) {
          double p = (d.a[static_cast<size_t>(i * t.k + kk)] - za) *
                     static_cast<double>(d.b[static_cast<size_t>(kk * t.n + j)]);
          sum += p;
          magnitude += std::abs(p) + za * std::abs(d.b[static_cast<size_t>(kk * t.n + j)]);
        }
        const double s = scale[static_cast<size_t>(j)];
        double want = s * sum + d.bias[static_cast<size_t>(j)];
        double tol = 8 * 1.1920929e-7 * (s * magnitude + std::abs(want)) + 1e-6;
        EXPECT_NEAR(run.out[static_cast<size_t>(i * t.n + j)], want, tol)
            << int8CaseName(t) << " (" << i << ", " << j << ")";
      }
  }
}

// The requantizing epilogue: a u8 C (the next int8 layer's A), y = clamp(round(y / so) + zo, 0,
// 255) after the column scale and bias, exactly as the float arithmetic of the reference steps
// (round half to even; values far enough out to saturate at both ends).
TEST(AmxInt8MatmulTwin, RequantizingEpilogueWritesTheExactU8) {
  std::mt19937 rng(44);
  int saturatedLow = 0, saturatedHigh = 0;
  // Full-range data (the sums' exactness on small integers is tested above).
  for (Int8Case t : int8Cases()) {
    t.kc = t.k; // a u8 C is written once
    Int8Data d = int8Data(t, rng, false);
    std::vector<float> scale(static_cast<size_t>(t.n));
    std::uniform_real_distribution<float> sDist(0.5f, 2.f);
    for (float& x : scale) x = sDist(rng) / 64.f;
    const float so = 40.f, zo = 100.f;
    AmxRun run = runAmxKernel(twinJit(), t.m, t.n, t.k, t.kc, t.mr, t.nr,
                              {DType::U8, DType::I8, DType::I32, DType::U8}, d.a.data(), d.b.data(),
                              d.bias.data(), 1,
                              {{PostOpKind::ScalePerColumn},
                               {PostOpKind::BiasPerColumn},
                               {PostOpKind::QuantizeU8, so, zo}},
                              scale.data());
    ASSERT_TRUE(run.error.empty()) << int8CaseName(t) << ": " << run.error;
    // The kernel wrote m x n bytes at the start of the output buffer.
    const auto* got = reinterpret_cast<const uint8_t*>(run.out.data());
    int bad = 0;
    for (int64_t i = 0; i < t.m; ++i)
      for (int64_t j = 0; j < t.n; ++j) {
        float y = int8Reference(t, d, i, j, false);
        y = y * scale[static_cast<size_t>(j)] + d.bias[static_cast<size_t>(j)];
        float q = std::clamp(std::nearbyint(y / so) + zo, 0.f, 255.f);
        saturatedLow += q == 0.f, saturatedHigh += q == 255.f;
        if (got[i * t.n + j] != static_cast<uint8_t>(q) && bad++ < 3)
          ADD_FAILURE() << int8CaseName(t) << " (" << i << ", " << j
                        << "): " << int(got[i * t.n + j]) << " != " << q;
      }
  }
  EXPECT_GT(saturatedLow, 0);
  EXPECT_GT(saturatedHigh, 0);
}

TEST(AmxInt8MatmulTwin, AU8CNeedsTheRequantizingEpilogueAndOneKBlock) {
  Int8Case t{32, 32, 128, 128, 32, 32};
  std::mt19937 rng(45);
  Int8Data d = int8Data(t, rng, true);
  AmxRun run = runAmxKernel(twinJit(), t.m, t.n, t.k, t.kc, t.mr, t.nr,
                            {DType::U8, DType::I8, DType::I32, DType::U8}, d.a.data(), d.b.data(),
                            d.bias.data(), 1, {{PostOpKind::BiasPerColumn}});
  EXPECT_NE(run.error.find("a u8 C is written by a requantizing epilogue"), std::string::npos)
      << run.error;
  run = runAmxKernel(twinJit(), t.m, t.n, t.k, t.kc, t.mr, t.nr,
                     {DType::U8, DType::I8, DType::I32, DType::F32}, d.a.data(), d.b.data(),
                     d.bias.data(), 1, {{PostOpKind::QuantizeU8, 1.f, 0.f}});
  EXPECT_NE(run.error.find("only a u8 C is"), std::string::npos) << run.error;
  run = runAmxKernel(twinJit(), t.m, t.n, t.k, 64, t.mr, t.nr,
                     {DType::U8, DType::I8, DType::I32, DType::U8}, d.a.data(), d.b.data(),
                     d.bias.data(), 1, {{PostOpKind::QuantizeU8, 1.f, 0.f}});
  EXPECT_NE(run.error.find("a u8 C is written once, so kc=64 must cover k=128"), std::string::npos)
      << run.error;
}

TEST(AmxInt8MatmulTwin, KBlocksOffTileRowsOrQuadsAreRefusedByName) {
  MatmulWorkload w = workloadOf(32, 32, 64, {DType::U8, DType::I8, DType::I32, DType::F32});
  MatmulConfig c = defaultMatmulConfig(w, Isa::Amx, twinJit().target());
  ASSERT_EQ(c.isa, Isa::Amx);
  c.kc = 32;
  Status s = validateMatmulConfig(w, c);
  ASSERT_FALSE(s.isOk());
  EXPECT_NE(s.error().message().find("multiple of 64"), std::string::npos) << s.error().message();
  // On the vector ISAs K blocks are whole quads; vpmaddubsw is no target feature of its own.
  MatmulConfig avx = defaultMatmulConfig(w, Isa::Avx2, twinJit().target());
  EXPECT_TRUE(validateMatmulConfig(w, avx).isOk());
  avx.kc = 30;
  EXPECT_NE(validateMatmulConfig(w, avx).error().message().find("multiples of 4"),
            std::string::npos);
  Target noVnni = twinJit().target();
  noVnni.avx512vnni = noVnni.amx = false;
  EXPECT_EQ(kernelIsa(w, Isa::Avx512, noVnni), Isa::Avx2);
  EXPECT_NE(checkTargetSupports(noVnni, Isa::Avx512, w.types)
                .error()
                .message()
                .find("its int8 kernels run on avx2 (vpmaddubsw)"),
            std::string::npos);
}

// ---- the int8 VNNI matmul (vpdpbusd on AVX-512): the same quads, in vector registers ----

// VNNI register tiles; k a multiple of 4 (A's quads are read in place).
std::vector<Int8Case> vnniCases() {
  return casesOf({{1, 16}, {4, 32}, {6, 16}, {8, 48}, {2, 64}, {12, 16}},
                 {{1, 16, 64}, {17, 33, 52}, {40, 64, 192}, {33, 47, 8}, {20, 32, 1000}});
}

AmxRun runVnniInt8(Jit& j, const Int8Case& t, const Int8Data& d, int repeats = 1) {
  return runAmxKernel(j, t.m, t.n, t.k, t.kc, t.mr, t.nr,
                      {DType::U8, DType::I8, DType::I32, DType::F32}, d.a.data(), d.b.data(),
                      d.bias.data(), repeats, {{PostOpKind::BiasPerColumn}, {PostOpKind::Relu}},
                      nullptr, Isa::Avx512);
}

TEST(VnniInt8MatmulTwin, EveryGridWithTailsEqualsTheExactIntegerReference) {
  expectExactInt8(vnniCases(), 51, [](const Int8Case& t, const Int8Data& d) {
    return runVnniInt8(twinJit(), t, d);
  });
}

TEST(VnniInt8MatmulTwin, KOffWholeQuadsIsRefusedByName) {
  Int8Case t{8, 16, 50, 50, 4, 16};
  std::mt19937 rng(52);
  Int8Data d = int8Data(t, rng, true);
  AmxRun run = runVnniInt8(twinJit(), t, d);
  EXPECT_NE(run.error.find("k=50 and kc=50 must be multiples of 4"), std::string::npos)
      << run.error;
}

TEST(VnniInt8MatmulReal, EqualsItsTwinBitForBit) {
  if (!hostTarget().avx512vnni)
    GTEST_SKIP() << "this machine has no AVX512-VNNI: the real vpdpbusd cannot run here (its "
                    "twin is tested on every AVX-512 machine)";
  std::mt19937 rng(53);
  for (const Int8Case& t : vnniCases()) {
    Int8Data d = int8Data(t, rng, false);
    AmxRun twin = runVnniInt8(twinJit(), t, d), real = runVnniInt8(jit(), t, d, 3);
    ASSERT_TRUE(twin.error.empty() && real.error.empty()) << twin.error << real.error;
    for (size_t i = 0; i < twin.out.size(); ++i)
      ASSERT_EQ(bitsOf(real.out[i]), bitsOf(twin.out[i])) << int8CaseName(t) << " element " << i;
  }
}

// ---- the AVX2 int8 kernel (vpmaddubsw + vpmaddwd): real on every machine tunec runs on ----

std::vector<Int8Case> avx2Cases() {
  return casesOf({{1, 8}, {4, 16}, {6, 8}, {3, 24}, {2, 32}},
                 {{1, 8, 64}, {17, 33, 52}, {40, 64, 192}, {33, 47, 8}, {20, 32, 1000}});
}

AmxRun runAvx2Int8(Jit& j, const Int8Case& t, const Int8Data& d) {
  return runAmxKernel(j, t.m, t.n, t.k, t.kc, t.mr, t.nr,
                      {DType::U8, DType::I8, DType::I32, DType::F32}, d.a.data(), d.b.data(),
                      d.bias.data(), 1, {{PostOpKind::BiasPerColumn}, {PostOpKind::Relu}}, nullptr,
                      Isa::Avx2);
}

TEST(Avx2Int8Matmul, EveryTileWithTailsEqualsTheExactIntegerReference) {
  expectExactInt8(
      avx2Cases(), 61,
      [](const Int8Case& t, const Int8Data& d) { return runAvx2Int8(jit(), t, d); }, true);
}

TEST(Avx2Int8MatmulTwin, EqualsTheInstructionsBitForBit) {
  std::mt19937 rng(62);
  for (const Int8Case& t : avx2Cases()) {
    Int8Data d = int8Data(t, rng, false, true);
    AmxRun twin = runAvx2Int8(twinJit(), t, d), real = runAvx2Int8(jit(), t, d);
    ASSERT_TRUE(twin.error.empty() && real.error.empty()) << twin.error << real.error;
    for (size_t i = 0; i < twin.out.size(); ++i)
      ASSERT_EQ(bitsOf(real.out[i]), bitsOf(twin.out[i])) << int8CaseName(t) << " element " << i;
  }
}

// A residual of u8 values added before the ReLU and the requantization, as ResNet's blocks
// add their input: y = clamp(round((s[n] sum + bias[n] + (r - zr) sr) / so) + zo, 0, 255) with
// ReLU. The epilogue reads the u8 tensor itself (AddDequantizedU8) and computes the
// DequantizeLinear's f32, (r - zr) exact then one rounding by sr, so the result is the reference
// steps' bit for bit: on the AMX and VNNI twins and on AVX2's kernel, tiles with M and N tails.
TEST(Int8Matmul, ADequantizedU8ResidualIsReadInTheEpilogueExactly) {
  std::mt19937 rng(63);
  int checked = 0, saturated = 0;
  const std::pair<Isa, std::vector<Int8Case>> runs[] = {
      {Isa::Amx, int8Cases()}, {Isa::Avx512, vnniCases()}, {Isa::Avx2, avx2Cases()}};
  for (const auto& [isa, cases] : runs)
    for (Int8Case t : cases) {
      t.kc = t.k; // a u8 C is written once
      Int8Data d = int8Data(t, rng, false, isa == Isa::Avx2);
      std::vector<float> scale(static_cast<size_t>(t.n));
      for (float& x : scale) x = std::uniform_real_distribution<float>(0.5f, 2.f)(rng) / 64.f;
      std::vector<uint8_t> residual(static_cast<size_t>(t.m * t.n));
      for (uint8_t& r : residual) r = static_cast<uint8_t>(rng() % 256);
      const float sr = 0.73f + static_cast<float>(rng() % 1000) / 997.f, zr = 128.f - 3.f;
      const float so = 40.f, zo = 7.f;
      Jit& j = isa == Isa::Avx2 ? jit() : twinJit();
      AmxRun run = runAmxKernel(j, t.m, t.n, t.k, t.kc, t.mr, t.nr,
                                {DType::U8, DType::I8, DType::I32, DType::U8}, d.a.data(),
                                d.b.data(), d.bias.data(), 1,
                                {{PostOpKind::ScalePerColumn},
                                 {PostOpKind::BiasPerColumn},
                                 {PostOpKind::AddDequantizedU8, sr, zr},
                                 {PostOpKind::Relu},
                                 {PostOpKind::QuantizeU8, so, zo}},
                                scale.data(), isa, residual.data());
      ASSERT_TRUE(run.error.empty()) << int8CaseName(t) << ": " << run.error;
      const auto* got = reinterpret_cast<const uint8_t*>(run.out.data());
      for (int64_t i = 0; i < t.m; ++i)
        for (int64_t jj = 0; jj < t.n; ++jj) {
          float y = int8Reference(t, d, i, jj, false);
          y = y * scale[static_cast<size_t>(jj)] + d.bias[static_cast<size_t>(jj)];
          const auto r = static_cast<int32_t>(residual[static_cast<size_t>(i * t.n + jj)]);
          y += static_cast<float>(r - static_cast<int32_t>(zr)) * sr; // DequantizeLinear's f32
          y = std::max(y, 0.f);
          const float q = std::clamp(std::nearbyint(y / so) + zo, 0.f, 255.f);
          saturated += q == 255.f;
          ASSERT_EQ(static_cast<int>(got[i * t.n + jj]), static_cast<int>(q))
              << spell(isa) << " " << int8CaseName(t) << " (" << i << ", " << jj << ")";
        }
      ++checked;
    }
  EXPECT_EQ(checked, 85);
  EXPECT_GT(saturated, 0);
}

TEST(Avx2Int8Matmul, WeightsBeyondSevenBitsAndComputedBAreRefusedByName) {
  Int8Case t{8, 16, 64, 64, 4, 16};
  std::mt19937 rng(63);
  Int8Data d = int8Data(t, rng, false, true);
  d.b[37] = 65.f;
  AmxRun run = runAvx2Int8(jit(), t, d);
  EXPECT_NE(run.error.find("needs 7-bit weights (|w| <= 64"), std::string::npos) << run.error;
  EXPECT_NE(run.error.find("weight 37 is 65"), std::string::npos) << run.error;
  MatmulWorkload w = workloadOf(8, 16, 64, {DType::U8, DType::I8, DType::I32, DType::F32});
  w.constantB = false;
  MatmulConfig c = defaultMatmulConfig(w, Isa::Avx2, hostTarget());
  EXPECT_NE(validateMatmulConfig(w, c).error().message().find("packed at compile time"),
            std::string::npos);
}

// ---- lane instructions: the AVX2 int8 dot and vcvtneps2bf16, against the silicon's rules ----

/// c = emit(a, b, c) over one vector of each (a and b of `in`, c of `out`), through `j`.
Expected<GoldenFn>
laneKernel(Jit& j, Isa isa, llvm::Type* (*in)(llvm::LLVMContext&),
           llvm::Type* (*out)(llvm::LLVMContext&),
           const std::function<llvm::Value*(codegen::ModuleBuilder&, llvm::IRBuilder<>&,
                                            llvm::Value*, llvm::Value*, llvm::Value*)>& emit) {
  return pointerFunction(j, isa, "lane",
                         [&](codegen::ModuleBuilder& mb, llvm::IRBuilder<>& b, llvm::Value* a,
                             llvm::Value* bv, llvm::Value* c) {
                           llvm::LLVMContext& ctx = mb.context();
                           llvm::Value* x = b.CreateAlignedLoad(in(ctx), a, llvm::Align(4));
                           llvm::Value* y = b.CreateAlignedLoad(in(ctx), bv, llvm::Align(4));
                           llvm::Value* cv = b.CreateAlignedLoad(out(ctx), c, llvm::Align(2));
                           b.CreateAlignedStore(emit(mb, b, x, y, cv), c, llvm::Align(2));
                         });
}

llvm::Type* eightInts(llvm::LLVMContext& ctx) {
  return llvm::FixedVectorType::get(llvm::Type::getInt32Ty(ctx), 8);
}

// vpmaddubsw saturates each pair sum to s16, vpmaddwd adds the pairs exactly: the model the
// twin follows, and what the instructions give, at the extremes (255 x 127, 255 x -128, pairs
// that leave s16 either way) and on random bytes; with |b| <= 64 it is the plain quad sum.
TEST(Avx2Int8Dot, TwinAndInstructionsSaturateThePairSumsAlike) {
  auto dot = [](codegen::ModuleBuilder& mb, llvm::IRBuilder<>& b, llvm::Value* x, llvm::Value* y,
                llvm::Value* c) { return codegen::emitDotU8S8QuadsAvx2(mb, b, c, x, y); };
  auto real = laneKernel(jit(), Isa::Avx2, eightInts, eightInts, dot);
  auto twin = laneKernel(twinJit(), Isa::Avx2, eightInts, eightInts, dot);
  ASSERT_TRUE(real.isOk() && twin.isOk());
  std::mt19937 rng(64);
  const int extremes[] = {127, -128, -127, 64, -64, 0, 1, -1};
  int saturated = 0;
  for (int trial = 0; trial < 200; ++trial) {
    std::array<uint8_t, 32> a, b;
    std::array<int32_t, 8> c, got, again;
    const bool sevenBit = trial % 4 == 3;
    for (int i = 0; i < 32; ++i) {
      a[i] = trial % 2 ? 255 : static_cast<uint8_t>(rng());
      int w = trial % 3 ? extremes[rng() % 8] : static_cast<int8_t>(rng());
      if (sevenBit) w = std::clamp(w, -kAvx2Int8WeightLimit, kAvx2Int8WeightLimit);
      b[i] = static_cast<uint8_t>(static_cast<int8_t>(w));
    }
    for (int32_t& x : c) x = static_cast<int32_t>(rng());
    got = c, again = c;
    (*real)(a.data(), b.data(), got.data());
    (*twin)(a.data(), b.data(), again.data());
    for (int lane = 0; lane < 8; ++lane) {
      int64_t want = c[lane], exact = c[lane];
      for (int pair = 0; pair < 2; ++pair) {
        int i = 4 * lane + 2 * pair;
        int sum = a[i] * static_cast<int8_t>(b[i]) + a[i + 1] * static_cast<int8_t>(b[i + 1]);
        saturated += sum != std::clamp(sum, -32768, 32767);
        want += std::clamp(sum, -32768, 32767), exact += sum;
      }
      EXPECT_EQ(got[lane], static_cast<int32_t>(want)) << "trial " << trial << " lane " << lane;
      EXPECT_EQ(again[lane], got[lane]) << "trial " << trial << " lane " << lane;
      if (sevenBit) {
        EXPECT_EQ(got[lane], static_cast<int32_t>(exact)) << "7-bit weights, lane " << lane;
      }
    }
  }
  EXPECT_GT(saturated, 50) << "the extremes must reach the saturation";
}

/// vcvtneps2bf16 as the SDM defines it: denormals to signed zeros, NaNs quieted, else round to
/// nearest even.
uint16_t sdmBf16(uint32_t x) {
  if ((x & 0x7f800000u) == 0) return static_cast<uint16_t>((x >> 16) & 0x8000u);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
  return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

llvm::Type* sixteenFloats(llvm::LLVMContext& ctx) {
  return llvm::FixedVectorType::get(llvm::Type::getFloatTy(ctx), 16);
}
llvm::Type* sixteenHalves(llvm::LLVMContext& ctx) {
  return llvm::FixedVectorType::get(llvm::Type::getInt16Ty(ctx), 16);
}

// The twin of vcvtneps2bf16 on ties, denormals, infinities, NaNs, the largest finite values and
// random bits; on a CPU with AVX512-BF16 the instruction gives the same bits.
TEST(Bf16RoundingTwin, FollowsTheInstructionsDefinition) {
  auto round = [](codegen::ModuleBuilder& mb, llvm::IRBuilder<>& b, llvm::Value* x, llvm::Value*,
                  llvm::Value*) { return codegen::emitRoundToBf16(mb, b, x); };
  std::vector<std::pair<Jit*, const char*>> jits = {{&twinJit(), "twin"}};
  if (test::hostRunsBf16()) jits.push_back({&jit(), "vcvtneps2bf16"});
  std::mt19937 rng(65);
  std::vector<uint32_t> values = {0x3f808000u, 0x3f818000u, 0x3f80ffffu, 0x00000001u, 0x807fffffu,
                                  0x00800000u, 0x80000000u, 0x7f800000u, 0xff800000u, 0x7f800001u,
                                  0xffc00000u, 0x7f7fffffu, 0xff7f8000u, 0x7f7f7fffu, 0x3effffffu};
  while (values.size() % 16 || values.size() < 16 * 40) values.push_back(rng());
  for (auto [j, what] : jits) {
    auto fn = laneKernel(*j, Isa::Avx512, sixteenFloats, sixteenHalves, round);
    ASSERT_TRUE(fn.isOk()) << fn.error().message();
    for (size_t at = 0; at < values.size(); at += 16) {
      std::array<uint16_t, 16> out{};
      (*fn)(values.data() + at, values.data() + at, out.data());
      for (size_t i = 0; i < 16; ++i)
        ASSERT_EQ(out[i], sdmBf16(values[at + i]))
            << what << " on 0x" << std::hex << values[at + i];
    }
  }
}

// On any machine: the real AMX kernel emitted as an object for an AMX target (the Xeon's target
// file) has one tile configuration, at the kernel's entry outside its loops, and exactly the tile
// loads, dots and stores of its 2x2 grid: no tile is spilled.
// The assembly of a module an emitter fills, written as an object for `target` (through
// TUNEC_DUMP_ASM); `count` counts an instruction's lines.
struct AsmText {
  std::string text, error;
  int count(const std::string& mnemonic) const {
    int n = 0;
    std::istringstream lines(text);
    for (std::string line; std::getline(lines, line);)
      n += line.find("\t" + mnemonic + "\t") != std::string::npos;
    return n;
  }
};

AsmText objectAsm(const Target& target,
                  const std::function<Status(codegen::ModuleBuilder&)>& emit) {
  AsmText out;
  std::string dir =
      (std::filesystem::temp_directory_path() / ("tunec_amx_asm_" + std::to_string(::getpid())))
          .string();
  std::filesystem::create_directories(dir);
  auto j = Jit::create(target);
  if (!j) return {"", j.error().message()};
  auto mb = (*j)->newModule(Isa::Avx512, "amx_object");
  std::string id = mb->module().getModuleIdentifier();
  if (Status s = emit(*mb); !s.isOk()) return {"", s.error().message()};
  ::setenv("TUNEC_DUMP_ASM", dir.c_str(), 1);
  Status written = (*j)->emitObject(std::move(mb), dir + "/amx.o");
  ::unsetenv("TUNEC_DUMP_ASM");
  if (!written.isOk()) return {"", written.error().message()};
  std::ifstream in(dir + "/" + id + ".s");
  std::stringstream text;
  text << in.rdbuf();
  std::filesystem::remove_all(dir);
  out.text = text.str();
  return out;
}

TEST(AmxMatmulObject, OneTileConfigurationAndNoTileSpill) {
  auto xeon =
      readTargetFile(std::string(TUNEC_SOURCE_DIR) + "/tests/fixtures/amx/xeon_target.json");
  ASSERT_TRUE(xeon.isOk()) << xeon.error().message();
  MatmulWorkload w;
  w.m = 64, w.n = 64, w.k = 256;
  w.types = {DType::F32, DType::BF16, DType::F32, DType::F32};
  MatmulConfig c = defaultMatmulConfig(w, Isa::Amx, *xeon);
  ASSERT_EQ(c.isa, Isa::Amx);
  ASSERT_EQ(c.mr, 32);
  ASSERT_EQ(c.nr, 32);
  std::vector<float> b(static_cast<size_t>(w.k * w.n), 0.5f);
  AsmText text = objectAsm(*xeon, [&](codegen::ModuleBuilder& mb) {
    return codegen::emitMatmulKernel(mb, "amx_matmul", w, c, {}, b.data()).status();
  });
  ASSERT_TRUE(text.error.empty()) << text.error;
  // m and n are whole tiles and one K block: a single variant, inlined into the loop nest.
  EXPECT_EQ(text.count("ldtilecfg"), 1);
  EXPECT_EQ(text.count("tdpbf16ps"), 4);
  // 2 B tiles per k step reused from L1 by the block's row tiles, 2 A tiles streamed (mc > mr).
  EXPECT_EQ(text.count("tileloadd"), 2);
  EXPECT_EQ(text.count("tileloaddt1"), 2);
  EXPECT_EQ(text.count("tilestored"), 4); // the 4 C tiles, once, to the epilogue's scratch
}

// The same for the AMX convolution (an int8 3x3 of the kind ResNet-50 has): one tile
// configuration per task, the 2x2 grid's dots, loads and stores once each, no tile spilled.
TEST(AmxConv2dObject, OneTileConfigurationAndNoTileSpill) {
  auto xeon =
      readTargetFile(std::string(TUNEC_SOURCE_DIR) + "/tests/fixtures/amx/xeon_target.json");
  ASSERT_TRUE(xeon.isOk()) << xeon.error().message();
  Conv2dWorkload w;
  w.n = 1, w.ic = 64, w.h = w.w = 14, w.oc = 64, w.kh = w.kw = 3;
  w.padTop = w.padLeft = w.padBottom = w.padRight = 1;
  w.types = {DType::U8, DType::I8, DType::I32, DType::U8};
  w.aZeroPoint = 3;
  ASSERT_EQ(kernelIsa(w, Isa::Avx512, *xeon), Isa::Amx);
  Conv2dConfig c = defaultConv2dConfig(w, Isa::Amx, *xeon);
  ASSERT_EQ(c.owBlock, 32);
  ASSERT_EQ(c.ocBlock, 32);
  std::vector<float> weights(static_cast<size_t>(64 * 64 * 9), 1.f);
  Epilogue e = {{PostOpKind::ScalePerColumn},
                {PostOpKind::BiasPerColumn},
                {PostOpKind::QuantizeU8, 0.5f, 2.f}};
  AsmText text = objectAsm(*xeon, [&](codegen::ModuleBuilder& mb) {
    return codegen::emitConv2dKernel(mb, "amx_conv", w, c, e, weights.data()).status();
  });
  ASSERT_TRUE(text.error.empty()) << text.error;
  EXPECT_EQ(text.count("ldtilecfg"), 1);
  EXPECT_EQ(text.count("tdpbusd"), 4);
  EXPECT_EQ(text.count("tileloadd"), 4); // 2 A tiles read in place and 2 B tiles per k step
  EXPECT_EQ(text.count("tilestored"), 4);
}

// A BERT-base head's attention in bf16 on AMX (a Xeon's --precision bf16): K's and V's panels
// packed per head, the task's one tile configuration, each matmul's 2x2 grid of C tiles with
// its dots, loads and stores once (Q's tiles packed, P's rows read in place), no tile spilled.
AttentionParts amxBertHead(const Target& target) {
  AttentionParts p;
  p.qk.batch = p.av.batch = 12;
  p.qk.m = p.av.m = 128, p.qk.n = p.av.k = 128, p.qk.k = 64, p.av.n = 64;
  p.qk.transB = true;
  p.qk.broadcastB = p.av.broadcastB = p.qk.constantB = p.av.constantB = false;
  p.qk.types = {DType::F32, DType::BF16, DType::F32, DType::F32};
  p.av.types = {DType::BF16, DType::BF16, DType::F32, DType::F32};
  p.qkConfig = defaultMatmulConfig(p.qk, kernelIsa(p.qk, Isa::Avx512, target), target);
  p.avConfig = defaultMatmulConfig(p.av, kernelIsa(p.av, Isa::Avx512, target), target);
  p.qkEpilogue = {{PostOpKind::Scale, 0.125f}, {PostOpKind::AddTensor}};
  return p;
}

TEST(AmxAttentionObject, OneTileConfigurationPerTaskAndNoTileSpill) {
  auto xeon =
      readTargetFile(std::string(TUNEC_SOURCE_DIR) + "/tests/fixtures/amx/xeon_target.json");
  ASSERT_TRUE(xeon.isOk()) << xeon.error().message();
  AttentionParts p = amxBertHead(*xeon);
  ASSERT_EQ(p.qkConfig.isa, Isa::Amx);
  ASSERT_EQ(p.avConfig.isa, Isa::Amx);
  ASSERT_TRUE(checkAttention(p).isOk()) << checkAttention(p).error().message();
  AsmText text = objectAsm(*xeon, [&](codegen::ModuleBuilder& mb) {
    return codegen::emitAttentionKernel(mb, "amx_attention", p);
  });
  ASSERT_TRUE(text.error.empty()) << text.error;
  EXPECT_EQ(text.count("ldtilecfg"), 1);
  EXPECT_EQ(text.count("tdpbf16ps"), 8);
  EXPECT_EQ(text.count("tileloadd"), 8); // per k step 2 A and 2 B tiles, in each matmul
  EXPECT_EQ(text.count("tilestored"), 8);
}

// On a machine with AMX the attention's real tiles equal their twins bit for bit.
TEST(AmxAttentionReal, EqualsItsTwinBitForBit) {
  SKIP_WITHOUT_REAL_AMX();
  AttentionParts p = amxBertHead(twinJit().target());
  p.qk.batch = p.av.batch = 2, p.qk.m = p.av.m = 45, p.qk.n = p.av.k = 70, p.qk.k = 40;
  std::mt19937 rng(37);
  auto data = [&](int64_t n) {
    std::vector<float> v(static_cast<size_t>(n));
    for (float& x : v) x = std::uniform_real_distribution<float>(-1.f, 1.f)(rng);
    return v;
  };
  std::vector<float> q = data(2 * 45 * 40), k = data(2 * 70 * 40), v = data(2 * 70 * 64),
                     mask = data(2 * 45 * 70);
  std::vector<float> outs[2];
  Jit* jits[2] = {&twinJit(), &jit()};
  for (int i = 0; i < 2; ++i) {
    auto kernel = compileAttention(*jits[i], p);
    ASSERT_TRUE(kernel.isOk()) << kernel.error().message();
    outs[i].assign(2 * 45 * 64, 0.f);
    kernel->run(q.data(), k.data(), v.data(), outs[i].data(), mask.data());
  }
  for (size_t i = 0; i < outs[0].size(); ++i)
    ASSERT_EQ(bitsOf(outs[1][i]), bitsOf(outs[0][i])) << "element " << i;
}

TEST(AmxMatmulReal, EqualsItsTwinBitForBitFromTwoThreads) {
  SKIP_WITHOUT_REAL_AMX();
  std::mt19937 rng(31);
  for (const AmxCase& t : amxCases()) {
    AmxData d = amxData(t, rng, false);
    AmxRun twin = runAmx(twinJit(), t, d.a, d.b, d.bias);
    ASSERT_TRUE(twin.error.empty()) << caseName(t) << ": " << twin.error;
    AmxRun real[2];
    std::thread workers[2];
    for (int th = 0; th < 2; ++th)
      workers[th] = std::thread([&, th] { real[th] = runAmx(jit(), t, d.a, d.b, d.bias, 3); });
    for (auto& w : workers) w.join();
    for (const AmxRun& r : real) {
      ASSERT_TRUE(r.error.empty()) << caseName(t) << ": " << r.error;
      for (size_t i = 0; i < twin.out.size(); ++i)
        ASSERT_EQ(bitsOf(r.out[i]), bitsOf(twin.out[i]))
            << caseName(t) << " element " << i << ": real " << r.out[i] << ", twin " << twin.out[i];
    }
  }
}

TEST(AmxInt8MatmulReal, EqualsItsTwinBitForBitFromTwoThreads) {
  SKIP_WITHOUT_REAL_AMX();
  std::mt19937 rng(42);
  for (const Int8Case& t : int8Cases()) {
    Int8Data d = int8Data(t, rng, false);
    AmxRun twin = runAmxInt8(twinJit(), t, d);
    ASSERT_TRUE(twin.error.empty()) << int8CaseName(t) << ": " << twin.error;
    AmxRun real[2];
    std::thread workers[2];
    for (int th = 0; th < 2; ++th)
      workers[th] = std::thread([&, th] { real[th] = runAmxInt8(jit(), t, d, 3); });
    for (auto& w : workers) w.join();
    for (const AmxRun& r : real) {
      ASSERT_TRUE(r.error.empty()) << int8CaseName(t) << ": " << r.error;
      for (size_t i = 0; i < twin.out.size(); ++i)
        ASSERT_EQ(bitsOf(r.out[i]), bitsOf(twin.out[i]))
            << int8CaseName(t) << " element " << i << ": real " << r.out[i] << ", twin "
            << twin.out[i];
    }
  }
}

} // namespace
} // namespace tunec
