// A model ready to run, for `tunec run` and `tunec bench`: model.so through the C API of
// include/tunec/runtime.h, or an ONNX model compiled in this process with the JIT.
#pragma once

#include "cli/arguments.h"
#include "cli/target_flag.h"
#include "driver/compile_model.h"
#include "ir/graph.h"
#include "runtime/generator.h"
#include "runtime/model_plan.h"

#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace tunec::cli {

/// A step of the model, with its cost for rooflines (rt::Step's flops and bytes).
struct StepInfo {
  std::string label;
  bool generated = false; ///< a generated kernel (else a loop kernel)
  double flops = 0;
  int64_t bytes = 0;
  double bf16Flops = 0; ///< of flops, those of bf16 kernels (their roof: the vdpbf16ps peak)
  double int8Ops = 0;   ///< of flops, those of int8 kernels (their roof: the int8 dot's peak)
  /// A weight-only matmul: it streams its packed weights, read once a run.
  bool streamsWeights = false;
};

struct ModelSession {
  std::vector<rt::IoSpec> inputs, outputs; ///< shapes: the bounds of symbolic dimensions
  std::function<Status(const void* const*, void* const*)> run;
  /// The symbols of a model compiled with symbolic dimensions (empty: a static model), and per
  /// input and output dimension "" or its extent ("sequence", "batch*sequence").
  std::vector<rt::SymbolSpec> symbols;
  std::vector<std::vector<std::string>> inputDimNames, outputDimNames;
  /// A run at the given input shapes (dense buffers of those shapes) that writes the output
  /// shapes; the error names an input outside its bounds before anything runs.
  std::function<Status(const void* const*, const std::vector<std::vector<int64_t>>&, void* const*,
                       std::vector<std::vector<int64_t>>&)>
      runShaped;
  bool symbolic() const { return !symbols.empty(); }
  /// The K/V caches kept in place (rt::KvCache), and runShaped with their pasts and presents as
  /// buffers in the cache layout (tunec_model_run_cached).
  std::vector<rt::KvCache> caches;
  std::function<Status(const void* const*, const std::vector<std::vector<int64_t>>&, void* const*,
                       std::vector<std::vector<int64_t>>&)>
      runCached;
  /// A run that adds each step's seconds to `stepSeconds` (sized to steps); at the given input
  /// shapes for a symbolic model (nullptr: a static one's).
  std::function<Status(const void* const*, const std::vector<std::vector<int64_t>>*, void* const*,
                       std::vector<double>&)>
      runProfiled;
  std::vector<StepInfo> steps;
  /// A symbolic model's steps with their cost in a run of these input shapes (rt::stepCostAt).
  std::function<Expected<std::vector<StepInfo>>(const std::vector<std::vector<int64_t>>&)> stepsAt;
  CpuFeatures requiredFeatures; ///< the CPU features the model's code uses (rt::ModelPlan)
  std::shared_ptr<void> owner;
  std::string report; ///< the compile report (JIT only)
  double compileSeconds = 0;
};

struct SessionOptions {
  /// The machine the code is for (a foreign one can only be compiled to a file).
  Target target = thisMachine();
  int threads = 1;
  std::string dbPath;  ///< tuned configs for the JIT path ("" for defaults)
  InputDims inputDims; ///< --input-shape and --dim
  driver::Precision precision = driver::Precision::Fp32; ///< --precision (ONNX models)
};

/// The --precision flag's spec, shared by the commands that compile a model.
FlagSpec precisionFlag();
/// --precision when given (fp32 or bf16), else fp32; the error names the flag.
Expected<driver::Precision> precisionFromArgs(const Arguments& args);

/// Opens `path`: a .so file is loaded, anything else is imported, optimized and JIT-compiled.
Expected<ModelSession> openModel(const std::string& path, const SessionOptions& options);

/// The graph pipeline, then compile to `out` (.so); returns the compile report.
Expected<std::string> compileToFile(const std::string& model, const std::string& out,
                                    const SessionOptions& options);

/// A generator over the session (rt::Generator): `tunec generate` and Python's tunec.Generator.
Expected<std::unique_ptr<rt::Generator>> openGenerator(const ModelSession& session);

/// The default tuning database: $TUNEC_DB, else tuning.db in the working directory.
std::string defaultDatabasePath();
/// --db when given, else the default database when that file exists, else "" (defaults).
std::string databaseForCompile(const Arguments& args);

/// The logical CPUs this process may use: the default thread count of running here.
int defaultThreads();

/// The options of the commands that open a model to time it (`bench`, `profile`): --threads,
/// --db (ONNX models) and --input-shape.
Expected<SessionOptions> timingSessionOptions(const Arguments& args);

/// Latency of whole runs, in milliseconds.
struct LatencyStats {
  double medianMs = 0, p90Ms = 0, minMs = 0;
};
/// `warmup` untimed runs, then `runs` (>= 1) timed ones on `in` and `out`.
Expected<LatencyStats> timeRuns(const ModelSession& session, const void* const* in,
                                void* const* out, int warmup, int runs);

/// A session's random inputs (randomInput, seeded) and output buffers, with the pointer arrays
/// its run takes (`tunec bench` and `tunec profile`).
struct RunBuffers {
  std::vector<Tensor> inputs, outputs;
  std::vector<const void*> in;
  std::vector<void*> out;
  std::vector<std::vector<int64_t>> inputShapes; ///< the run's (the bounds, or the files')
};
/// timeRuns on the buffers, at their input shapes when the model is symbolic.
Expected<LatencyStats> timeRuns(const ModelSession& session, const RunBuffers& buffers, int warmup,
                                int runs);
RunBuffers randomRunBuffers(const ModelSession& session, uint32_t seed);
/// One run on the buffers (at their input shapes when the model is symbolic), adding each step's
/// seconds to `stepSeconds` when given.
Status runBuffers(const ModelSession& session, RunBuffers& buffers,
                  std::vector<double>* stepSeconds = nullptr);
/// The --input NAME=FILE flags by input name; an error for a malformed or repeated one.
Expected<std::map<std::string, std::string>> parseInputFiles(const std::vector<std::string>& specs);
/// The tensor file for model input `io` (.npy or .pb), checked against its element type and
/// shape (any shape of its rank where `symbolic`: the run checks it against the bounds); the
/// error names the input, the file, what it holds and what the model expects.
Expected<Tensor> readInputFile(const rt::IoSpec& io, const std::string& path,
                               bool symbolic = false);
/// For a model of symbolic dimensions: random inputs at the given run shapes (`bench
/// --input-shape` on a model.so) in place of those at the bounds; a name that is no model input,
/// or a shape of another rank, is an error (the run checks the bounds).
Status useInputShapes(const ModelSession& session, const std::map<std::string, Shape>& shapes,
                      RunBuffers& buffers);
/// Replaces the buffers of the inputs named in `files` by the tensors read from them (the others
/// keep their random values); a name that is no model input is an error.
Status useInputFiles(const ModelSession& session, const std::map<std::string, std::string>& files,
                     RunBuffers& buffers);

/// A random model input of `io`'s type and shape: floats uniform in [-1, 1], integers in 0..9
/// (valid token ids and indices for the models tunec runs).
Tensor randomInput(const rt::IoSpec& io, std::mt19937& rng);

} // namespace tunec::cli
