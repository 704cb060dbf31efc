// The tunec command: dispatches to one subcommand.
#include "cli/commands.h"

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace {

const char* kUsage = R"(usage: tunec <command> [args] [--help]

tunec compiles ONNX models for x86-64 CPUs.

commands:
  tune      tune a model's heavy kernels on this machine; records go to a tuning database
  tune-op   tune one matmul or conv2d workload
  compile   compile an ONNX model into model.so (code and packed weights)
  quantize  quantize an ONNX model to int8 QDQ form, calibrated on sample inputs
  accuracy  a compiled model's error against a reference (e.g. its fp32 original)
  run       run a model (model.so or ONNX) on input tensors (.npy or .pb), write its outputs
  bench     latency of a model: median, p90 and min over N runs
  generate  greedy generation with a decoder of past/present K/V: time to first token, tokens/s
  profile   every step of a model against this machine's roofline (text, JSON or an HTML page)
  report    an HTML report of a tuning database: convergence per task, errors, latency
  inspect   print a model's graph, op counts and FLOPs
  ops       list the supported ONNX ops and their fusion mapping types
  bench-op  time one heavy kernel (matmul, conv2d) against the machine's measured FMA peak
  db        share tuning records: export, import, merge, verify, stats, best
  target    print this machine's target description and key

'tunec <command> --help' describes a command's flags.
)";

int dispatch(int argc, char** argv) {
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h") ||
      !std::strcmp(argv[1], "help")) {
    std::fputs(kUsage, argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  if (!std::strcmp(argv[1], "--version")) {
    std::puts("tunec 0.1.0");
    return 0;
  }
  std::string command = argv[1];
  std::vector<std::string> args(argv + 2, argv + argc);
  if (command == "run") return tunec::cli::commandRun(args);
  if (command == "tune") return tunec::cli::commandTune(args);
  if (command == "tune-op") return tunec::cli::commandTuneOp(args);
  if (command == "tune-worker") return tunec::cli::commandTuneWorker(args);
  if (command == "compile") return tunec::cli::commandCompile(args);
  if (command == "quantize") return tunec::cli::commandQuantize(args);
  if (command == "accuracy") return tunec::cli::commandAccuracy(args);
  if (command == "bench") return tunec::cli::commandBench(args);
  if (command == "generate") return tunec::cli::commandGenerate(args);
  if (command == "profile") return tunec::cli::commandProfile(args);
  if (command == "report") return tunec::cli::commandReport(args);
  if (command == "inspect") return tunec::cli::commandInspect(args);
  if (command == "ops") return tunec::cli::commandOps(args);
  if (command == "bench-op") return tunec::cli::commandBenchOp(args);
  if (command == "db") return tunec::cli::commandDb(args);
  if (command == "target") return tunec::cli::commandTarget(args);
  std::fprintf(stderr, "tunec: unknown command '%s'; see 'tunec --help'\n", command.c_str());
  return 2;
}

} // namespace

// Every user error is a returned Error with exit 1; an exception that escapes a command is a
// bug in tunec: say so, with the command, instead of dying with SIGABRT.
int main(int argc, char** argv) {
  std::string command;
  for (int i = 0; i < argc; ++i) command += (i ? " " : "") + std::string(argv[i]);
  try {
    return dispatch(argc, argv);
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "tunec: out of memory running '%s'\n", command.c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr,
                 "tunec: internal error running '%s': %s\nthis is a bug in tunec; please report "
                 "it with the command and its input files\n",
                 command.c_str(), e.what());
  } catch (...) {
    std::fprintf(stderr,
                 "tunec: internal error running '%s' (unknown exception)\nthis is a bug in "
                 "tunec; please report it with the command and its input files\n",
                 command.c_str());
  }
  return 2;
}
