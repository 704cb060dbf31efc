// The code generator for a Target: LLVM 16 ORC LLJIT (running here) and object emission. This
// header keeps LLVM types out so that users of codegen compile quickly (see STACK.md).
#pragma once

#include "support/error.h"
#include "templates/isa.h"

#include <memory>
#include <string>

namespace tunec {

namespace codegen {
class ModuleBuilder;
}

/// The IR optimization pipeline before machine code generation (always at CodeGenOpt::Aggressive).
/// Lean (default): always-inline, SROA, EarlyCSE, InstCombine, SimplifyCFG, LICM; measured to
/// give the same kernel speed as O3 at about half the compile time, because the generated IR is
/// already vectorized and register-tiled (docs/benchmarks.md). O3: LLVM's full default pipeline.
enum class JitPipeline { Lean, O3 };

/// Which code the ISA-specific instructions become (codegen/tile_ops.h). Real: the
/// instructions. Twins: plain IR with the silicon's exact arithmetic, so kernels for AMX,
/// AVX512-BF16 or VNNI run (slowly) on any x86-64 CPU and are tested exactly there. Twin code is
/// for tests: it is never tuned, and a twin JIT refuses to write objects (model.so).
enum class JitInstructions { Real, Twins };

/// Owns the JIT session; every compiled kernel lives as long as the Jit.
class Jit {
public:
  /// Creates a code generator for `target`. Its JIT runs code in this process, so for a target
  /// with features this CPU lacks it only emits objects (addModule says which are missing).
  /// Fails with a message when the target lacks AVX2+FMA.
  /// With twins, the target may name features this CPU lacks (AVX-512, BF16, VNNI, AMX): their
  /// instructions are emitted as twins and the target's wide vectors legalized to this CPU's,
  /// so a twin kernel for any target runs on any x86-64 CPU with AVX2.
  static Expected<std::unique_ptr<Jit>>
  create(const Target& target, JitPipeline pipeline = JitPipeline::Lean,
         JitInstructions instructions = JitInstructions::Real);
  /// The machine the code is for: what codegen's choices (ISA, prefetch, cache fits) read.
  const Target& target() const;
  ~Jit();

  /// Optimizes (with the pipeline) and adds a module, then returns the address of `symbol` in it.
  Expected<void*> addAndLookup(std::unique_ptr<codegen::ModuleBuilder> module,
                               const std::string& symbol);
  /// Optimizes and adds a module; its external functions are then found with lookup(). Fails
  /// when the target has features this CPU lacks.
  Status addModule(std::unique_ptr<codegen::ModuleBuilder> module);
  /// The address of a symbol of an added module.
  Expected<void*> lookup(const std::string& symbol);
  /// Emits a module as a position-independent relocatable object file for the target (for
  /// model.so).
  Status emitObject(std::unique_ptr<codegen::ModuleBuilder> module, const std::string& path);
  /// A fresh module whose functions target `isa` (AVX-512 features disabled for Avx2).
  std::unique_ptr<codegen::ModuleBuilder> newModule(Isa isa, const std::string& name);

  struct Impl;

private:
  Jit();
  std::unique_ptr<Impl> impl_;
};

namespace codegen {
/// LLVM's name of this CPU ("znver3"), for `tunec target`.
std::string hostLlvmCpu();
} // namespace codegen

} // namespace tunec
