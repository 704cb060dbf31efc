// Building the Target from this machine or a target file.
#include "cli/target_flag.h"

#include "codegen/jit.h"
#include "support/host.h"
#include "tuning_db/keys.h"

namespace tunec::cli {

FlagSpec targetFlag(const std::string& help) {
  return {"target", "FILE", help};
}

const Target& thisMachine() {
  static const Target target = [] {
    Target t = hostTarget();
    t.llvmCpu = codegen::hostLlvmCpu();
    return t;
  }();
  return target;
}

std::string targetKey(const Target& target) {
  return db::TargetInfo::fromTarget(target).key();
}

Expected<Target> targetFromArgs(const Arguments& args) {
  if (!args.has("target")) return thisMachine();
  auto target = readTargetFile(args.get("target"));
  if (!target) return target.error().withContext("--target");
  return target;
}

Expected<Target> measuringTarget(const Arguments& args, const std::string& command) {
  TUNEC_ASSIGN_OR_RETURN(Target target, targetFromArgs(args));
  if (targetKey(target) != targetKey(thisMachine()))
    return makeError(command, ": --target ", args.get("target"), " describes another machine ('",
                     target.model, "', target key ", targetKey(target), ") than this one ('",
                     thisMachine().model, "', ", targetKey(thisMachine()),
                     "); measurements are only valid where they run: run this command on that "
                     "machine, then share the records ('tunec db export')");
  return target;
}

} // namespace tunec::cli
