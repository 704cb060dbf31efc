// Architecture facts as data (BLIS's cntx tables): per ISA the vector and register file sizes.
#pragma once

#include <optional>
#include <string_view>

namespace tunec {

/// The vector ISAs codegen targets.
enum class Isa { Avx2, Avx512 };

/// What the templates and the microkernel generator need to know about an ISA.
struct IsaInfo {
  Isa isa;
  std::string_view name; ///< "avx2", "avx512"
  int vectorBytes;       ///< 32 (ymm) or 64 (zmm)
  int vectorRegisters;   ///< 16 ymm or 32 zmm
  /// FMA can broadcast a scalar memory operand ({1toN}, AVX-512), so splatting an A element
  /// needs no register of its own.
  bool embeddedBroadcast;
  int f32Lanes() const { return vectorBytes / 4; }
};

/// Vector registers of a register tile of `rows` x `nr` floats: the accumulators, one row of B
/// vectors and, without embedded broadcasts, the broadcast A element. The one register-budget
/// rule of the microkernel and of every template's knob space.
int tileRegisters(Isa isa, int rows, int nr);

const IsaInfo& isaInfo(Isa isa);
std::optional<Isa> parseIsa(std::string_view name);
/// True when the host can run code for `isa`.
bool hostSupports(Isa isa);
/// The widest ISA the host supports (AVX2 at least is required).
Isa hostIsa();

} // namespace tunec
