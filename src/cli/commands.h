// The tunec subcommands; each returns the process exit code.
#pragma once

#include "support/error.h"

#include <string>
#include <vector>

namespace tunec::cli {

/// `tunec run`: runs a model on input tensor files and writes one file per output.
int commandRun(const std::vector<std::string>& args);
/// `tunec inspect`: prints a model's graph and a summary.
int commandInspect(const std::vector<std::string>& args);
/// `tunec ops`: lists the supported ONNX ops with their mapping types.
int commandOps(const std::vector<std::string>& args);

/// `tunec bench-op`: times one heavy kernel against the machine's measured peak.
int commandBenchOp(const std::vector<std::string>& args);

/// `tunec db`: export, import, merge, stats and best of tuning records.
int commandDb(const std::vector<std::string>& args);
/// `tunec target`: this machine's target description and key.
int commandTarget(const std::vector<std::string>& args);

/// `tunec quantize`: post-training static quantization to a QDQ ONNX model.
int commandQuantize(const std::vector<std::string>& args);
/// `tunec accuracy`: a compiled model's outputs against the reference executor's.
int commandAccuracy(const std::vector<std::string>& args);
/// `tunec compile`: compiles a model to model.so.
int commandCompile(const std::vector<std::string>& args);
/// `tunec generate`: greedy generation with a decoder of past/present K/V.
int commandGenerate(const std::vector<std::string>& args);
/// `tunec bench`: latency statistics of a compiled model.
int commandBench(const std::vector<std::string>& args);
/// `tunec profile`: every step against the machine's roofline.
int commandProfile(const std::vector<std::string>& args);
/// `tunec report`: an HTML report of a tuning database.
int commandReport(const std::vector<std::string>& args);
/// `tunec tune`, `tunec tune-op` and the measurement worker `tunec tune-worker`.
int commandTune(const std::vector<std::string>& args);
int commandTuneOp(const std::vector<std::string>& args);
int commandTuneWorker(const std::vector<std::string>& args);
/// Parses --threads (empty: the machine's cores).
Expected<int> parseThreads(const std::string& text);
/// Prints "tunec: <message>" to stderr and returns exit code 1.
int fail(const std::string& message);

} // namespace tunec::cli
