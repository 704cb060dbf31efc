// The one place the Target is built (DESIGN.md, decision 10): this machine, or the file that
// `--target FILE` names (written by `tunec target --json` on another machine).
#pragma once

#include "cli/arguments.h"
#include "support/target.h"

namespace tunec::cli {

/// The --target flag's spec, shared by the commands that take it.
FlagSpec targetFlag(const std::string& help);

/// This machine, with LLVM's name for its CPU.
const Target& thisMachine();

/// The target of `--target FILE` when given, else this machine.
Expected<Target> targetFromArgs(const Arguments& args);

/// As targetFromArgs, for commands that measure here (tune, tune-op, bench-op): a target file
/// that describes another machine is refused, naming both.
Expected<Target> measuringTarget(const Arguments& args, const std::string& command);

/// The key of a target, as tuning records store it (tuning_db/keys.h).
std::string targetKey(const Target& target);

} // namespace tunec::cli
