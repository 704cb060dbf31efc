// Matmul template: workload/config JSON, knob space, validation and the analytical default.
#include "templates/matmul_template.h"

#include <algorithm>
#include <numeric>

namespace tunec {

namespace {

// Bytes after which L2 set indices repeat: 1 MiB, 16 ways (Zen 4/5; Intel's 1.25-2 MiB L2s
// repeat at 64-128 KiB as well).
constexpr int64_t kL2SetPeriod = 64 * 1024;

} // namespace

Status MatmulWorkload::check() const {
  if (isBf16Gemm(types) && !convertsA(types)) {
    // vdpbf16ps multiplies k-pairs of A's rows: two adjacent values of a row (runtime/packing.h
    // pads B's k, but a bf16 A is read in place; an f32 A is converted and padded per block).
    if (transA)
      return makeError("bf16 matmul workload: A must be stored row-major (trans_a is f32 only)");
    if (k % 2)
      return makeError("bf16 matmul workload: k=", k, " must be even (k-pairs of A's rows)");
  } else if (isInt8Gemm(types)) {
    // The A tiles are packed from A's rows (runtime/packing.h: tunec_pack_a_u8_tiles).
    if (transA)
      return makeError("int8 matmul workload: A must be stored row-major (trans_a is f32 only)");
  } else if (!isBf16Gemm(types)) {
    TUNEC_TRY(checkKernelTypes(types, "matmul",
                               "f32, bf16 (bf16 B; f32 or bf16 A and C) or u8 x i8 (i32 sums; an "
                               "f32 or u8 C)"));
  }
  if (batch < 1 || m < 1 || n < 1 || k < 1)
    return makeError("matmul workload needs positive batch, m, n, k (got ", batch, ", ", m, ", ", n,
                     ", ", k, ")");
  if (threads < 1) return makeError("matmul workload needs threads >= 1");
  if (coldWeights && !constantB)
    return makeError("matmul workload: cold_weights needs a constant B (the weights it evicts)");
  if (lda < 0 || ldb < 0 || ldc < 0 || strideA < 0 || strideB < 0 || strideC < 0)
    return makeError("matmul workload: leading dimensions and batch strides must not be negative");
  if (aLd() < (transA ? m : k) || bLd() < (transB ? k : n) || cLd() < (splitN ? splitN : n))
    return makeError("matmul workload: a leading dimension is shorter than its row (lda=", aLd(),
                     ", ldb=", bLd(), ", ldc=", cLd(), ")");
  if (splitN < 0 || (splitN && (batch != 1 || ldc || strideC || n % splitN || splitN == n)))
    return makeError("matmul workload: split_n=", splitN, " must divide n=", n,
                     " into several parts of one dense C (batch 1)");
  if (constantB && (ldb || strideB))
    return makeError("matmul workload: a constant B is packed at compile time and must be dense");
  if (broadcastB && strideB)
    return makeError("matmul workload: a B broadcast to every batch has no batch stride");
  // Batches of C must not overlap, one after the other or interleaved row by row (heads): the
  // kernel writes them from different threads.
  bool sequential = cStride() >= (m - 1) * cLd() + n;
  bool interleaved = cStride() >= n && (batch - 1) * cStride() + n <= cLd();
  if (batch > 1 && !sequential && !interleaved)
    return makeError("matmul workload: C's batches overlap (ldc=", cLd(), ", stride_c=", cStride(),
                     ")");
  return {};
}

int64_t MatmulWorkload::aExtent() const {
  int64_t rows = transA ? k : m, cols = transA ? m : k;
  return (batch - 1) * aStride() + (rows - 1) * aLd() + cols;
}

int64_t MatmulWorkload::bExtent() const {
  int64_t rows = transB ? n : k, cols = transB ? k : n;
  return (broadcastB ? 0 : (batch - 1) * bStride()) + (rows - 1) * bLd() + cols;
}

int64_t MatmulWorkload::cExtent() const {
  if (splitN) return m * n; // the parts, each a dense m x split_n matrix, one after the other
  return (batch - 1) * cStride() + (m - 1) * cLd() + n;
}

nlohmann::json MatmulWorkload::toJson() const {
  nlohmann::json j = {{"template", "matmul"},
                      {"dtype", kernelTypesToJson(types)},
                      {"batch", batch},
                      {"m", m},
                      {"n", n},
                      {"k", k},
                      {"trans_a", transA},
                      {"trans_b", transB},
                      {"constant_b", constantB},
                      {"broadcast_b", broadcastB},
                      {"threads", threads}};
  // Strided operands only: dense workloads keep the keys they always had.
  for (auto [name, v] : {std::pair{"lda", lda},
                         {"ldb", ldb},
                         {"ldc", ldc},
                         {"stride_a", strideA},
                         {"stride_b", strideB},
                         {"stride_c", strideC},
                         {"split_n", splitN}})
    if (v) j[name] = v;
  if (coldWeights) j["cold_weights"] = true;
  return j;
}

Expected<MatmulWorkload> MatmulWorkload::fromJson(const nlohmann::json& j) {
  MatmulWorkload w;
  std::string error, tmpl;
  if (!readField(j, "template", tmpl, error) || tmpl != "matmul")
    return makeError("not a matmul workload: ",
                     error.empty() ? "template is '" + tmpl + "'" : error);
  TUNEC_TRY(readKernelTypes(j, "matmul", w.types));
  if (!readField(j, "batch", w.batch, error) || !readField(j, "m", w.m, error) ||
      !readField(j, "n", w.n, error) || !readField(j, "k", w.k, error) ||
      !readField(j, "trans_a", w.transA, error) || !readField(j, "trans_b", w.transB, error) ||
      !readField(j, "constant_b", w.constantB, error) ||
      !readField(j, "broadcast_b", w.broadcastB, error) ||
      !readField(j, "threads", w.threads, error))
    return makeError("matmul workload: ", error);
  for (auto [name, v] : {std::pair{"lda", &w.lda},
                         {"ldb", &w.ldb},
                         {"ldc", &w.ldc},
                         {"stride_a", &w.strideA},
                         {"stride_b", &w.strideB},
                         {"stride_c", &w.strideC},
                         {"split_n", &w.splitN}})
    if (j.contains(name) && !readField(j, name, *v, error))
      return makeError("matmul workload: ", error);
  if (j.contains("cold_weights") && !readField(j, "cold_weights", w.coldWeights, error))
    return makeError("matmul workload: ", error);
  TUNEC_TRY(w.check());
  return w;
}

namespace {

// The config's fields as records spell them: toJson, fromJson and configFromKnobs.
constexpr std::array kMatmulFields = {
    configField<MatmulConfig, &MatmulConfig::isa>("isa"),
    configField<MatmulConfig, &MatmulConfig::mr>("mr"),
    configField<MatmulConfig, &MatmulConfig::nr>("nr"),
    configField<MatmulConfig, &MatmulConfig::mc>("mc"),
    configField<MatmulConfig, &MatmulConfig::nc>("nc"),
    configField<MatmulConfig, &MatmulConfig::kc>("kc"),
    configField<MatmulConfig, &MatmulConfig::loopOrder>("loop_order"),
    configField<MatmulConfig, &MatmulConfig::parallel>("parallel"),
    configField<MatmulConfig, &MatmulConfig::packA>("pack_a")};

} // namespace

nlohmann::json MatmulConfig::toJson() const {
  return configToJson(*this, kMatmulFields);
}

Expected<MatmulConfig> MatmulConfig::fromJson(const nlohmann::json& j) {
  return configFromJson(j, kMatmulFields, "matmul");
}

Status validateMatmulConfig(const MatmulWorkload& w, const MatmulConfig& c) {
  TUNEC_TRY(w.check());
  const IsaInfo& info = isaInfo(c.isa);
  int lanes = info.f32Lanes();
  if (c.isa == Isa::Amx) {
    // A grid of C tiles of 16 rows x 16 columns: mr and nr whole tiles, at most 8 tiles in all.
    if (!isLowPrecisionGemm(w.types))
      return makeError("matmul config: AMX kernels are bf16 (tdpbf16ps) or u8 x i8 (tdpbusd); ",
                       kernelTypesToJson(w.types).dump(), " runs on avx512 or avx2");
    if (c.mr % 16 || c.nr % 16 || c.mr < 16 || c.nr < 16 || c.mr > 48 || c.nr > 64 ||
        amxTileCount(c.mr, c.nr) > 8)
      return makeError("matmul config: AMX tile grid mr=", c.mr, " nr=", c.nr,
                       " must be whole 16x16 tiles using at most 8 tiles with their A and B "
                       "(16x16..16x48, 32x16, 32x32, 48x16)");
    if (const int group = kGroup(c.isa, w.types); c.kc % group && c.kc != w.k)
      return makeError("matmul config: kc=", c.kc, " must be a multiple of ", group,
                       " on AMX (one tile row of ", dtypeName(w.types.wei), "), or cover k");
    if (c.packA)
      return makeError("matmul config: AMX packs A into tiles itself (pack_a is f32 only)");
  } else if (c.mr < 1 || c.nr < lanes || c.nr % lanes)
    return makeError("matmul config: nr=", c.nr, " must be a multiple of ", lanes, " and mr=", c.mr,
                     " positive");
  if (c.isa != Isa::Amx && tileRegisters(c.isa, c.mr, c.nr) > info.vectorRegisters)
    return makeError("matmul config: tile ", c.mr, "x", c.nr, " needs ",
                     tileRegisters(c.isa, c.mr, c.nr), " vector registers, ", info.name, " has ",
                     info.vectorRegisters);
  if (c.mc < c.mr || c.mc % c.mr)
    return makeError("matmul config: mc=", c.mc, " must be a positive multiple of mr=", c.mr);
  if (c.nc < c.nr || c.nc % c.nr)
    return makeError("matmul config: nc=", c.nc, " must be a positive multiple of nr=", c.nr);
  if (c.kc < 1) return makeError("matmul config: kc=", c.kc, " must be positive");
  if (w.splitN % c.nr)
    return makeError("matmul config: nr=", c.nr, " must divide the split of C (", w.splitN, ")");
  if (c.mc > roundUp(w.m, c.mr))
    return makeError("matmul config: mc=", c.mc, " exceeds m=", w.m, " rounded to mr");
  if (c.nc > roundUp(w.n, c.nr))
    return makeError("matmul config: nc=", c.nc, " exceeds n=", w.n, " rounded to nr");
  if (c.kc > w.k) return makeError("matmul config: kc=", c.kc, " exceeds k=", w.k);
  if (c.parallel == MatmulParallel::Batch && w.batch < 2)
    return makeError("matmul config: parallel over batch needs batch > 1");
  if (c.parallel != MatmulParallel::None && w.threads < 2)
    return makeError("matmul config: parallel loops need threads > 1");
  if (isInt8Gemm(w.types)) {
    if (!w.constantB)
      return makeError("matmul config: int8 kernels read B from quad panels packed at compile "
                       "time (a constant B); this B is computed");
    if (c.isa != Isa::Amx && (w.k % 4 || (c.kc % 4 && c.kc != w.k)))
      return makeError("matmul config: the ", c.isa == Isa::Avx2 ? "AVX2" : "VNNI",
                       " int8 kernel reads A's k-quads from its rows in place, so k=", w.k,
                       " and kc=", c.kc, " must be multiples of 4");
  }
  if (isBf16Gemm(w.types)) {
    if (c.isa != Isa::Avx512 && c.isa != Isa::Amx)
      return makeError("matmul config: bf16 kernels are AMX or AVX-512 (vdpbf16ps), not ",
                       info.name);
    if (c.packA)
      return makeError("matmul config: bf16 reads A in place or converts it (pack_a is f32 only)");
    if (c.kc % 2 && c.kc != w.k)
      return makeError("matmul config: kc=", c.kc, " must be even for bf16 (k-pairs)");
  }
  if (writesCOnce(w.types) && c.kc < w.k)
    return makeError("matmul config: a ", dtypeName(w.types.dst),
                     " C is written once, so kc=", c.kc, " must cover k=", w.k,
                     " (K blocks accumulate in f32 only)");
  return {};
}

namespace {

// AMX: a 2x2 grid of C tiles (32x32) where M and N allow, else 16 rows of up to 3 tiles. The
// loop nest is n, k, m over blocks of one row of tiles (mc = mr): the packed A block (mr x kc)
// stays in L1 (two thirds of it) while the block's B panels stream from L2 (tileloaddt1), and
// the B block (kc x nc) fits half of L2. Measured on the Xeon with AMX (docs/benchmarks.md),
// 1024^3: mc = 32, kc = 512 ran at 900 GFLOP/s where mc = m, kc = 352 (B panel in L1, A
// streaming) ran at 513.
MatmulConfig defaultAmxConfig(const MatmulWorkload& w, const Target& target) {
  MatmulConfig c;
  c.isa = Isa::Amx;
  int64_t nTiles = std::clamp<int64_t>((w.n + 15) / 16, 1, 3);
  while (nTiles > 1 && w.splitN % (16 * nTiles)) --nTiles;
  if (w.m > 16 && nTiles >= 2 && w.splitN % 32 == 0) { // (a split C's parts of whole grids)
    c.mr = 32;
    c.nr = 32;
  } else {
    c.mr = w.m > 16 && nTiles == 1 ? 32 : 16;
    c.nr = static_cast<int>(16 * nTiles);
  }
  // A is read packed into tiles whatever its stored type: u8 for the int8 GEMM, else bf16.
  const int64_t group = kGroup(Isa::Amx, w.types), srcBytes = isInt8Gemm(w.types) ? 1 : 2,
                weiBytes = w.types.weiBytes();
  int64_t kcMax = std::max<int64_t>(group, target.l1d * 2 / 3 / (c.mr * srcBytes) / group * group);
  int64_t kBlocks = (w.k + kcMax - 1) / kcMax;
  c.kc = kBlocks == 1 ? w.k : roundUp((w.k + kBlocks - 1) / kBlocks, group);
  if (writesCOnce(w.types)) c.kc = w.k;
  c.mc = c.mr;
  int64_t ncMax =
      std::max<int64_t>(c.nr, target.l2 / 2 / (roundUp(c.kc, group) * weiBytes) / c.nr * c.nr);
  int64_t nBlocks = (w.n + ncMax - 1) / ncMax;
  c.nc =
      std::clamp<int64_t>(roundUp((w.n + nBlocks - 1) / nBlocks, c.nr), c.nr, roundUp(w.n, c.nr));
  c.loopOrder = MatmulLoopOrder::Nkm;
  c.packA = false;
  c.parallel = MatmulParallel::None;
  if (w.threads > 1 && w.flops() >= 4e6) {
    if (w.batch >= w.threads) {
      c.parallel = MatmulParallel::Batch;
    } else {
      c.nc =
          std::min(c.nc, std::max<int64_t>(c.nr, roundUp((w.n + w.threads - 1) / w.threads, c.nr)));
      c.parallel = MatmulParallel::N;
    }
  }
  return c;
}

} // namespace

MatmulConfig defaultMatmulConfig(const MatmulWorkload& w, Isa isa, const Target& target) {
  if (isa == Isa::Amx) return defaultAmxConfig(w, target);
  MatmulConfig c;
  c.isa = isa;
  int lanes = isaInfo(isa).f32Lanes();
  // Register tile: up to four vectors wide and as many rows as the register file allows, at
  // most 8 (AVX-512: 6x64 or 8x32; AVX2: 6x16); narrower for small N so the tile is not padding.
  int64_t nVectors = std::min<int64_t>(isaInfo(isa).matmulNrVectors, (w.n + lanes - 1) / lanes);
  if (nVectors == 3) nVectors = 2;
  // A split C (merged sibling matmuls) is written part by part: the tile must divide a part
  // (an AVX-512 tile of 64 columns does not divide BERT-small's heads of 32).
  while (nVectors > 1 && w.splitN % (nVectors * lanes)) --nVectors;
  c.nr = static_cast<int>(nVectors * lanes);
  int maxRows = maxTileRows(isa, c.nr);
  c.mr = static_cast<int>(std::min<int64_t>(std::min(maxRows, 8), w.m));
  // kc: the A micro-panel (mr x kc) fills up to L1 while the B micro-panel (kc x nr) streams
  // from L2; a kc covering all of K also spares re-reading C between K blocks (measured: kc = K
  // beat kc = 256..512 by 5-10% on 1024^3). mc: the A block (mc x kc) in half of L2; nc:
  // the B block (kc x nc) in a quarter of L3.
  auto aBytes = static_cast<int64_t>(w.types.srcBytes()),
       bBytes = static_cast<int64_t>(w.types.weiBytes());
  int64_t kcMax = std::clamp<int64_t>(target.l1d / (c.mr * aBytes), 256, 1024);
  int64_t kBlocks = (w.k + kcMax - 1) / kcMax; // equal blocks: no short last block
  c.kc = std::min(w.k, roundUp((w.k + kBlocks - 1) / kBlocks, 16));
  if (writesCOnce(w.types)) c.kc = w.k; // written once (validateMatmulConfig)
  // M is split into equal blocks, so that no thin last block re-streams B for a few rows.
  // When K is split and A's row stride is a multiple of a large power of two, the kc-wide
  // pieces of the A block's rows fall into only some of L2's sets (rows 8 KiB apart, pieces of
  // 4 KiB: half of them), so the block takes that much more of L2 (2048^3: mc 132 -> 66,
  // measured 186 -> 197 GFLOP/s).
  int64_t aliasing = 1;
  if (!w.transA && c.kc < w.k)
    aliasing =
        std::max<int64_t>(1, std::gcd<int64_t>(w.k * aBytes, kL2SetPeriod) / (c.kc * aBytes));
  int64_t mcMax = std::max<int64_t>(c.mr, target.l2 / 2 / (c.kc * aBytes * aliasing));
  int64_t mBlocks = (w.m + mcMax - 1) / mcMax;
  c.mc =
      std::clamp<int64_t>(roundUp((w.m + mBlocks - 1) / mBlocks, c.mr), c.mr, roundUp(w.m, c.mr));
  int64_t ncMax = std::max<int64_t>(c.nr, target.l3 / 4 / (c.kc * bBytes));
  int64_t nBlocks = (w.n + ncMax - 1) / ncMax;
  c.nc =
      std::clamp<int64_t>(roundUp((w.n + nBlocks - 1) / nBlocks, c.nr), c.nr, roundUp(w.n, c.nr));
  c.loopOrder = MatmulLoopOrder::Nkm;
  // Rows of A are read in place (contiguous along k): packing cost more than it saved here.
  c.packA = false;
  c.parallel = MatmulParallel::None;
  if (w.threads > 1) {
    // Split the dimension with the most blocks; small work stays on one thread (STACK.md:
    // fork/join costs more than a 64^3 GEMM).
    int64_t mBlocks = (w.m + c.mc - 1) / c.mc, nBlocks = (w.n + c.nc - 1) / c.nc;
    if (w.flops() >= 4e6) {
      if (w.batch >= w.threads)
        c.parallel = MatmulParallel::Batch;
      else {
        if (nBlocks < w.threads && mBlocks < w.threads) {
          c.nc = std::max<int64_t>(c.nr, roundUp((w.n + w.threads - 1) / w.threads, c.nr));
          nBlocks = (w.n + c.nc - 1) / c.nc;
        }
        c.parallel = nBlocks >= mBlocks ? MatmulParallel::N : MatmulParallel::M;
      }
    }
  }
  return c;
}

KnobSpace matmulKnobSpace(const MatmulWorkload& w, Isa isa) {
  int lanes = isaInfo(isa).f32Lanes();
  KnobSpace space;
  Knob mr{"mr", {}}, nr{"nr", {}}, mc{"mc", {}}, nc{"nc", {}}, kc{"kc", {}};
  if (isa == Isa::Amx) { // whole tiles (validateMatmulConfig refuses grids over 8 tiles)
    for (int v : {16, 32, 48})
      if (v == 16 || v <= roundUp(w.m, 16)) mr.values.emplace_back(v);
    for (int v : {16, 32, 48})
      if (v == 16 || v <= roundUp(w.n, 16)) nr.values.emplace_back(v);
  } else {
    for (int v = 1; v <= 16; ++v)
      if (v <= w.m) mr.values.emplace_back(v);
    for (int v = lanes; v <= 4 * lanes; v += lanes)
      if (v <= roundUp(w.n, lanes)) nr.values.emplace_back(v);
  }
  for (int64_t v : {24, 48, 96, 128, 192, 256, 384, 512}) mc.values.emplace_back(v);
  for (int64_t v : {64, 128, 256, 512, 1024, 2048, 4096}) nc.values.emplace_back(v);
  for (int64_t v : {32, 64, 128, 192, 256, 384, 512, 768, 1024})
    if (v <= w.k) kc.values.emplace_back(v);
  if (std::find(kc.values.begin(), kc.values.end(), nlohmann::json(w.k)) == kc.values.end())
    kc.values.emplace_back(w.k);
  space = {mr, nr, mc, nc, kc};
  Knob order{"loop_order", {}};
  for (const auto& [value, name] : Spellings<MatmulLoopOrder>::values)
    order.values.emplace_back(name);
  space.push_back(order);
  Knob parallel{"parallel", {"none"}};
  if (w.threads > 1) {
    if (w.batch > 1) parallel.values.emplace_back("batch");
    parallel.values.emplace_back("m");
    parallel.values.emplace_back("n");
  }
  space.push_back(parallel);
  if (isLowPrecisionGemm(w.types)) { // A read in place or packed to tiles, whole k groups
    space.push_back({"pack_a", {false}});
    const int64_t group = kGroup(isa, w.types);
    std::erase_if(space[4].values, [&](const nlohmann::json& v) {
      return v.get<int64_t>() != w.k && (writesCOnce(w.types) || v.get<int64_t>() % group);
    });
  } else {
    space.push_back({"pack_a", {true, false}});
  }
  return space;
}

Expected<MatmulConfig> matmulConfigFromKnobs(const MatmulWorkload& w, Isa isa,
                                             const KnobSpace& space,
                                             const std::vector<nlohmann::json>& values) {
  MatmulConfig c;
  c.isa = isa;
  TUNEC_TRY(configSetKnobs(c, space, values, kMatmulFields, "matmul"));
  c.mc = std::clamp<int64_t>(c.mc / c.mr * c.mr, c.mr, roundUp(w.m, c.mr));
  c.nc = std::clamp<int64_t>(c.nc / c.nr * c.nr, c.nr, roundUp(w.n, c.nr));
  c.kc = std::clamp<int64_t>(c.kc, 1, w.k);
  if (isLowPrecisionGemm(w.types)) c.packA = false;
  return c;
}

} // namespace tunec
