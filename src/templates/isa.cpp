// The per-ISA table and host ISA selection.
#include "templates/isa.h"

#include "support/host.h"

namespace tunec {

const IsaInfo& isaInfo(Isa isa) {
  static const IsaInfo kAvx2{Isa::Avx2, "avx2", 32, 16};
  static const IsaInfo kAvx512{Isa::Avx512, "avx512", 64, 32};
  return isa == Isa::Avx512 ? kAvx512 : kAvx2;
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
  if (name == "avx2") return Isa::Avx2;
  if (name == "avx512") return Isa::Avx512;
  return std::nullopt;
}

bool hostSupports(Isa isa) {
  const HostInfo& h = hostInfo();
  if (isa == Isa::Avx512) return h.avx512f && h.fma;
  return h.avx2 && h.fma;
}

Isa hostIsa() {
  return hostSupports(Isa::Avx512) ? Isa::Avx512 : Isa::Avx2;
}

} // namespace tunec
