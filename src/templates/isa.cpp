// The per-ISA table and ISA selection for a target.
#include "templates/isa.h"

#include "templates/knobs.h"

namespace tunec {

namespace {

using F = CpuFeature;
const CpuFeatures kAvx2Needs{F::avx2, F::fma};
// Every AVX-512 CPU tunec targets has the four subsets (Skylake-SP on, Zen 4 on), and codegen
// may use any of them (byte-masked loads are avx512bw's).
const CpuFeatures kAvx512Needs{F::avx2, F::fma, F::avx512f, F::avx512bw, F::avx512vl, F::avx512dq};
// AMX kernels need its tiles and their dots, and AVX-512 (with BF16, for a bf16 C) around them.
const CpuFeatures kAmxNeeds = CpuFeatures(kAvx512Needs).add(CpuFeatures{F::avx512bf16, F::amx});

constexpr Isa kVectorIsas[] = {Isa::Avx2, Isa::Avx512};

} // namespace

const IsaInfo& isaInfo(Isa isa) {
  static const IsaInfo kAvx2{Isa::Avx2, spell(Isa::Avx2), 32, 16, kAvx2Needs, 2, 4};
  static const IsaInfo kAvx512{Isa::Avx512, spell(Isa::Avx512), 64, 32, kAvx512Needs, 4, 7};
  static const IsaInfo kAmx{Isa::Amx, spell(Isa::Amx), 64, 32, kAmxNeeds, 2, 7};
  switch (isa) {
  case Isa::Avx2:
    return kAvx2;
  case Isa::Avx512:
    return kAvx512;
  case Isa::Amx:
    return kAmx;
  }
  TUNEC_ASSERT(false, "isa " << static_cast<int>(isa) << " has no row");
}

int tileRegisters(Isa isa, int rows, int nr) {
  const IsaInfo& info = isaInfo(isa);
  int vectors = (nr + info.f32Lanes() - 1) / info.f32Lanes();
  return rows * vectors + vectors + 1;
}

int maxTileRows(Isa isa, int nr) {
  const IsaInfo& info = isaInfo(isa);
  int vectors = (nr + info.f32Lanes() - 1) / info.f32Lanes();
  return (info.vectorRegisters - 1 - vectors) / vectors;
}

std::optional<Isa> parseIsa(std::string_view name) {
  return parseSpelling<Isa>(name);
}

bool targetSupports(const Target& target, Isa isa) {
  return isaInfo(isa).needs.missingFrom(target.features()).empty();
}

Status checkTargetSupports(const Target& target, Isa isa) {
  if (targetSupports(target, isa)) return {};
  std::string has;
  for (const std::string& f : target.featureNames()) has += (has.empty() ? "" : ", ") + f;
  return makeError("isa '", isaInfo(isa).name, "': the target '", target.model,
                   "' cannot run it (its features: ", has, ")");
}

CpuFeatures kernelNeeds(Isa isa, const KernelTypes& types) {
  CpuFeatures needs = isaInfo(isa).needs;
  // (A bf16 output is rounded by vcvtneps2bf16.)
  if (isBf16Gemm(types) || (isF32OnBf16Activations(types) && types.dst == DType::BF16))
    needs.add(CpuFeature::avx512bf16);
  if (isInt8Gemm(types) && isa == Isa::Avx512) needs.add(CpuFeature::avx512vnni);
  return needs;
}

Status checkTargetSupports(const Target& target, Isa isa, const KernelTypes& types) {
  TUNEC_TRY(checkTargetSupports(target, isa));
  const CpuFeatures missing = kernelNeeds(isa, types).missingFrom(target.features());
  if (missing.has(CpuFeature::avx512vnni))
    return makeError("u8 x s8 kernels on avx512 use vpdpbusd (AVX512-VNNI), which the target '",
                     target.model, "' lacks; its int8 kernels run on avx2 (vpmaddubsw)");
  if (missing.has(CpuFeature::avx512bf16))
    return makeError("bf16 kernels need avx512_bf16 (vdpbf16ps), which the target '", target.model,
                     "' lacks; run them in f32 or compile for a target that has it");
  TUNEC_ASSERT(missing.empty(), "kernelNeeds adds a feature the check does not name");
  return {};
}

Isa widestIsa(const Target& target) {
  Isa best = Isa::Avx2;
  for (Isa isa : kVectorIsas)
    if (targetSupports(target, isa) && isaInfo(isa).vectorBytes > isaInfo(best).vectorBytes)
      best = isa;
  return best;
}

} // namespace tunec

namespace tunec {

Isa bf16GemmIsa(const Target& target) {
  return targetSupports(target, Isa::Amx) ? Isa::Amx : Isa::Avx512;
}

bool vectorBf16Pays(const Target& target) {
  return target.avx512bf16 && !target.amx;
}

int kGroup(Isa isa, const KernelTypes& types) {
  if (isInt8Gemm(types)) return isa == Isa::Amx ? 64 : 4; // tile rows of 64 bytes, or quads
  if (!isBf16Gemm(types)) return 1;
  return isa == Isa::Amx ? 32 : 2;
}

} // namespace tunec
