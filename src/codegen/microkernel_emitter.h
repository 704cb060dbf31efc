// Internal to codegen: emits a microkernel function into a module (drivers inline it).
#pragma once

#include "codegen/microkernel.h"
#include "codegen/module_builder.h"

namespace tunec::codegen {

/// Emits the microkernel as a function with the MicrokernelFn signature. The spec must satisfy
/// checkMicrokernelSpec.
llvm::Function* emitMicrokernel(ModuleBuilder& mb, const MicrokernelSpec& spec,
                                const std::string& name, bool internal);

} // namespace tunec::codegen
