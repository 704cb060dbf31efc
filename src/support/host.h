// This machine, read with cpuid and sysfs. Only src/cli (and tests) call it: everything else
// takes the Target that cli built (DESIGN.md, decision 10).
#pragma once

#include "support/target.h"

namespace tunec {

/// This machine as a Target, read once (cached). `llvmCpu` is left empty: LLVM names the CPU
/// (codegen's hostLlvmCpu()).
const Target& hostTarget();

/// The logical CPUs this process may run on (its affinity mask): the default thread count.
int availableCpus();

} // namespace tunec
