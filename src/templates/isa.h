// Architecture facts as data (BLIS's cntx tables): per ISA the vector and register file sizes,
// the target features it needs and the default tiles of its templates.
#pragma once

#include "support/spellings.h"
#include "support/target.h"

#include <optional>
#include <string_view>

namespace tunec {

struct KernelTypes; // templates/knobs.h

/// The ISAs codegen targets. A new ISA is a compile error in isaInfo() until it has a row. Amx:
/// the matmul's reduction on AMX tiles (bf16 today), with AVX-512 vectors for everything else.
enum class Isa { Avx2, Avx512, Amx };

/// The ISAs' names in configs, records and flags.
template <> struct Spellings<Isa> {
  static constexpr std::pair<Isa, std::string_view> values[] = {
      {Isa::Avx2, "avx2"}, {Isa::Avx512, "avx512"}, {Isa::Amx, "amx"}};
};

/// What the templates and the microkernel generator need to know about an ISA.
struct IsaInfo {
  Isa isa;
  std::string_view name; ///< spell(isa): "avx2", "avx512", "amx"
  int vectorBytes;       ///< 32 (ymm) or 64 (zmm; AMX's epilogue vectors)
  int vectorRegisters;   ///< 16 ymm or 32 zmm
  CpuFeatures needs;     ///< every feature this ISA's code may use
  int matmulNrVectors;   ///< default matmul tile width in vectors (fp32)
  int depthwiseOwBlock;  ///< default depthwise output-column block
  int f32Lanes() const { return vectorBytes / 4; }
};

/// Vector registers of a register tile of `rows` x `nr` floats: the accumulators, one row of B
/// vectors and the broadcast A element. The one register-budget rule of the microkernel and of
/// every template's knob space. (AVX-512's FMA could take the broadcast as a {1to16} memory
/// operand, but LLVM 16 materializes it with vbroadcastss: a 7x64 tile spilled 17 times.)
int tileRegisters(Isa isa, int rows, int nr);
/// The most rows a tile `nr` floats wide can have within the register file (tileRegisters).
int maxTileRows(Isa isa, int nr);

const IsaInfo& isaInfo(Isa isa);
std::optional<Isa> parseIsa(std::string_view name);
/// True when `target` can run code for `isa`.
bool targetSupports(const Target& target, Isa isa);
/// An error naming the ISA and what the target lacks, unless the target supports it.
Status checkTargetSupports(const Target& target, Isa isa);
/// The features a kernel of these element types needs on `isa`: the ISA's, and avx512_bf16 for
/// bf16 (vdpbf16ps, and AMX's bf16 C), avx512_vnni for int8 on avx512 (vpdpbusd). A model's
/// plan requires the union over its kernels; decided here, for the checks and the plan alike.
CpuFeatures kernelNeeds(Isa isa, const KernelTypes& types);
/// As above, and the target has the instructions of these element types' kernels
/// (kernelNeeds); the error names the feature the target lacks.
Status checkTargetSupports(const Target& target, Isa isa, const KernelTypes& types);
/// The widest vector ISA `target` supports (AVX2 at least is required of every target): the
/// ISA of fp32 kernels. AMX is chosen per kernel by its element types (bf16GemmIsa).
Isa widestIsa(const Target& target);
/// The ISA of a bf16 GEMM on `target`: AMX where the target has it, else AVX-512 (vdpbf16ps);
/// decided here and passed, never re-derived.
Isa bf16GemmIsa(const Target& target);
/// Whether a bf16 kernel on AVX512-BF16's vdpbf16ps beats the same kernel in f32 on `target`:
/// measured 2x the FMA rate on AMD Zen 4 and 5, but about 0.65x on the Intel Xeon with AMX
/// (Sapphire Rapids issues vdpbf16ps on one port: 99-101 GFLOP/s against 152-155 in f32), where
/// bf16 pays only on the AMX tiles. --precision bf16 keeps a kernel fp32 where its bf16 strategy
/// is vdpbf16ps and this is false; decided here.
bool vectorBf16Pays(const Target& target);
/// The compile report's reason for such a kernel.
inline constexpr const char* kVectorBf16SlowerNote =
    " (fp32: vdpbf16ps is slower than the FMA on this target, and AMX runs only matmuls and "
    "convolutions whose input channels fill its tile rows)";

/// The k that packed operands of these element types are padded to on `isa`: 1 (f32), 2 (bf16
/// pairs for vdpbf16ps), 32 (an AMX tile row of 64 bytes of bf16). The one source of the k
/// grouping for packers and loop nests.
int kGroup(Isa isa, const KernelTypes& types);

/// `v` rounded up to a whole number of `m` (k padded to its groups, keys to whole panels).
inline int64_t roundUp(int64_t v, int64_t m) {
  return (v + m - 1) / m * m;
}

/// Tiles an AMX tile grid of mr x nr uses: ceil(mr/16) x nr/16 C tiles, their A and B tiles
/// (AMX has 8).
inline int amxTileCount(int mr, int nr) {
  const int rowTiles = (mr + 15) / 16, colTiles = nr / 16;
  return rowTiles * colTiles + rowTiles + colTiles;
}

/// The largest weight magnitude of the AVX2 int8 kernel: vpmaddubsw sums two u8 x s8 products
/// into s16 with saturation, and 2 * 255 * 64 = 32640 fits, so 7-bit weights (as oneDNN keeps
/// them there) make it exact.
inline constexpr int kAvx2Int8WeightLimit = 64;

} // namespace tunec
