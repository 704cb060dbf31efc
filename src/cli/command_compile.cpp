// `tunec compile`: an ONNX model to model.so, with the report of tuned and default kernels.
#include "cli/arguments.h"
#include "cli/commands.h"
#include "cli/model_session.h"
#include "cli/target_flag.h"
#include "support/terminal_text.h"

#include <chrono>
#include <cstdio>
#include <filesystem>

namespace tunec::cli {

namespace {

const CommandSpec kCompileSpec{
    "compile",
    "tunec compile MODEL.onnx -o model.so [--db tuning.db] [flags]",
    "Compiles the model into one shared library that carries its code and packed weights.\n"
    "Heavy kernels use the best config recorded for this machine in the tuning database (see\n"
    "'tunec tune'), or the template's analytical default; the report says which. Load the\n"
    "result with 'tunec run', 'tunec bench' or the C API in include/tunec/runtime.h.",
    {
        {"o", "FILE", "the shared library to write (required)"},
        {"db", "FILE",
         "tuning database with the configs to use (default: $TUNEC_DB or ./tuning.db if it "
         "exists)"},
        {"threads", "N", "threads the kernels are built for (default: the target's cores)"},
        targetFlag("build for the machine this file describes ('tunec target --json > FILE' "
                   "there): its ISA, its caches and its tuning records (default: this machine)"),
        {"input-shape", "NAME=SHAPE", "static shape for a dynamic input, e.g. x=1x3x224x224", true},
        {"dim", "NAME=MIN..MAX", kDimFlagHelp, true},
        {"buckets", "NAME=E1,E2,...", kBucketsFlagHelp, true},
        precisionFlag(),
    },
    1,
    1};

} // namespace

int commandCompile(const std::vector<std::string>& argv) {
  auto args = Arguments::parse(kCompileSpec, argv);
  if (!args) return fail(args.error().message());
  if (args->helpRequested()) {
    std::fputs(helpText(kCompileSpec).c_str(), stdout);
    return 0;
  }
  if (!args->has("o")) return fail("tunec compile: say where to write the library with -o FILE");
  // Writing the library over one of the command's inputs would destroy it.
  std::error_code same;
  for (const std::string& input : {args->positionals()[0], args->get("target"), args->get("db")})
    if (!input.empty() && std::filesystem::equivalent(input, args->get("o"), same))
      return fail("tunec compile: -o " + args->get("o") + " is the input " + input +
                  "; write the library to another file");
  SessionOptions options;
  auto shapes =
      parseInputDims(args->getAll("input-shape"), args->getAll("dim"), args->getAll("buckets"));
  if (!shapes) return fail(shapes.error().message());
  options.inputDims = *shapes;
  options.dbPath = databaseForCompile(*args);
  auto precision = precisionFromArgs(*args);
  if (!precision) return fail(precision.error().message());
  options.precision = *precision;
  auto target = targetFromArgs(*args);
  if (!target) return fail(target.error().message());
  options.target = *target;
  // Kernels are built for the machine's cores, whatever this process may use (taskset):
  // the thread count is part of every workload key.
  auto threads = args->has("threads") ? parseThreads(args->get("threads")) : target->cores;
  if (!threads) return fail(threads.error().message());
  options.threads = *threads;
  auto start = std::chrono::steady_clock::now();
  auto report = compileToFile(args->positionals()[0], args->get("o"), options);
  if (!report) return fail(report.error().message());
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::fputs(forTerminal(*report).c_str(), stdout);
  std::printf("wrote %s in %.1f s (kernels for %d thread%s)\n", args->get("o").c_str(), seconds,
              options.threads, options.threads > 1 ? "s" : "");
  return 0;
}

} // namespace tunec::cli
