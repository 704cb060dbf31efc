// The per-ISA table and ISA selection for a target.
#include "templates/isa.h"

#include "templates/knobs.h"

namespace tunec {

namespace {

bool avx2Supported(const Target& t) {
  return t.avx2 && t.fma;
}
bool avx512Supported(const Target& t) {
  return t.avx512f && t.fma;
}

// AMX kernels need its tiles and their bf16 dot, and AVX-512 (with BF16, for a bf16 C) around them.
bool amxSupported(const Target& t) {
  return t.amx && t.avx512f && t.avx512bw && t.avx512bf16 && t.fma;
}

constexpr Isa kVectorIsas[] = {Isa::Avx2, Isa::Avx512};

} // namespace

const IsaInfo& isaInfo(Isa isa) {
  static const IsaInfo kAvx2{Isa::Avx2, spell(Isa::Avx2), 32, 16, avx2Supported, 2, 4};
  static const IsaInfo kAvx512{Isa::Avx512, spell(Isa::Avx512), 64, 32, avx512Supported, 4, 7};
  static const IsaInfo kAmx{Isa::Amx, spell(Isa::Amx), 64, 32, amxSupported, 2, 7};
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
  return isaInfo(isa).supportedBy(target);
}

Status checkTargetSupports(const Target& target, Isa isa) {
  if (targetSupports(target, isa)) return {};
  std::string has;
  for (const std::string& f : target.featureNames()) has += (has.empty() ? "" : ", ") + f;
  return makeError("isa '", isaInfo(isa).name, "': the target '", target.model,
                   "' cannot run it (its features: ", has, ")");
}

Status checkTargetSupports(const Target& target, Isa isa, const KernelTypes& types) {
  TUNEC_TRY(checkTargetSupports(target, isa));
  if (isInt8Gemm(types) && isa == Isa::Avx512 && !target.avx512vnni)
    return makeError("u8 x s8 kernels on avx512 use vpdpbusd (AVX512-VNNI), which the target '",
                     target.model, "' lacks; its int8 kernels run on avx2 (vpmaddubsw)");
  if (isBf16Gemm(types) && !target.avx512bf16)
    return makeError("bf16 kernels need avx512_bf16 (vdpbf16ps), which the target '", target.model,
                     "' lacks; run them in f32 or compile for a target that has it");
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
