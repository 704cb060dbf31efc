// Internal to codegen: emits a microkernel function into a module (drivers inline it).
#pragma once

#include "codegen/microkernel.h"
#include "codegen/module_builder.h"

namespace tunec::codegen {

/// Emits the microkernel as a function with the MicrokernelFn signature. The spec must satisfy
/// checkMicrokernelSpec. An internal kernel is inlined into its caller when `inlined` (the full
/// tile of a loop nest) and kept out of line otherwise (tail tiles: less code to optimize).
llvm::Function* emitMicrokernel(ModuleBuilder& mb, const MicrokernelSpec& spec,
                                const std::string& name, bool internal, bool inlined = false);

} // namespace tunec::codegen
