// Opening a model for running: model.so via the C API, ONNX via passes + driver + JIT.
#include "cli/model_session.h"

#include "cli/commands.h"
#include "cli/load_model.h"
#include "cli/pipeline.h"
#include "driver/compile_model.h"
#include "frontend/tensor_io.h"
#include "passes/passes.h"
#include "runtime/model_executor.h"
#include "support/atomic_file.h"
#include "support/host.h"
#include "tunec/runtime.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <sstream>

namespace tunec::cli {

namespace {

bool isSharedLibrary(const std::string& path) {
  return path.size() > 3 && path.compare(path.size() - 3, 3, ".so") == 0;
}

Expected<ModelSession> openSharedLibrary(const std::string& path, int threads) {
  tunec_model* raw = nullptr;
  if (tunec_model_load(path.c_str(), threads, &raw) != 0) return Error(tunec_last_error());
  std::shared_ptr<tunec_model> model(raw, tunec_model_free);
  ModelSession s;
  auto info = [&](const tunec_tensor_info& t) -> Expected<rt::IoSpec> {
    auto dtype = parseDType(t.dtype);
    if (!dtype)
      return makeError(path, ": tensor '", t.name, "' has an unknown dtype '", t.dtype, "'");
    return rt::IoSpec{t.name, *dtype, std::vector<int64_t>(t.dims, t.dims + t.rank), t.bytes, {}};
  };
  for (int32_t i = 0; i < tunec_model_num_inputs(raw); ++i) {
    tunec_tensor_info t;
    if (tunec_model_input_info(raw, i, &t) != 0) return Error(tunec_last_error());
    TUNEC_ASSIGN_OR_RETURN(rt::IoSpec io, info(t));
    s.inputs.push_back(std::move(io));
  }
  for (int32_t i = 0; i < tunec_model_num_outputs(raw); ++i) {
    tunec_tensor_info t;
    if (tunec_model_output_info(raw, i, &t) != 0) return Error(tunec_last_error());
    TUNEC_ASSIGN_OR_RETURN(rt::IoSpec io, info(t));
    s.outputs.push_back(std::move(io));
  }
  s.run = [raw](const void* const* in, void* const* out) -> Status {
    if (tunec_model_run(raw, in, out) != 0) return Error(tunec_last_error());
    return {};
  };
  for (int32_t i = 0; i < tunec_model_num_steps(raw); ++i) {
    StepInfo step;
    step.label = tunec_model_step_label(raw, i);
    int32_t generated = 0;
    if (tunec_model_step_cost(raw, i, &step.flops, &step.bytes, &generated) != 0 ||
        tunec_model_step_bf16_flops(raw, i, &step.bf16Flops) != 0 ||
        tunec_model_step_int8_ops(raw, i, &step.int8Ops) != 0)
      return Error(tunec_last_error());
    step.generated = generated != 0;
    step.streamsWeights =
        tunec_model_step_kind(raw, i) == static_cast<int32_t>(rt::StepKind::WeightOnlyMatmul);
    s.steps.push_back(std::move(step));
  }
  std::vector<std::string> names;
  std::stringstream list(tunec_model_isa(raw));
  for (std::string name; std::getline(list >> std::ws, name, ',');) names.push_back(name);
  TUNEC_ASSIGN_OR_RETURN(s.requiredFeatures, CpuFeatures::parse(names));
  s.runProfiled = [raw](const void* const* in, const std::vector<std::vector<int64_t>>* shapes,
                        void* const* out, std::vector<double>& seconds) -> Status {
    int rc = 0;
    if (shapes) {
      std::vector<const int64_t*> dims;
      for (const auto& shape : *shapes) dims.push_back(shape.data());
      rc = tunec_model_run_shaped_profiled(raw, in, dims.data(), out, nullptr, seconds.data());
    } else {
      rc = tunec_model_run_profiled(raw, in, out, seconds.data());
    }
    if (rc != 0) return Error(tunec_last_error());
    return {};
  };
  for (int32_t i = 0; i < tunec_model_num_symbols(raw); ++i) {
    const char* name = nullptr;
    int64_t min = 0, max = 0;
    if (tunec_model_symbol_info(raw, i, &name, &min, &max) != 0) return Error(tunec_last_error());
    s.symbols.push_back({name, min, max});
  }
  for (int32_t out = 0; out < 2; ++out) {
    auto& names = out ? s.outputDimNames : s.inputDimNames;
    const auto& ios = out ? s.outputs : s.inputs;
    for (size_t i = 0; i < ios.size(); ++i) {
      names.emplace_back();
      for (size_t d = 0; d < ios[i].shape.size(); ++d)
        names.back().push_back(
            tunec_model_dim_name(raw, out, static_cast<int32_t>(i), static_cast<int32_t>(d)));
    }
  }
  // tunec_model_run_shaped and tunec_model_run_cached take the same arrays.
  auto shapedRun = [raw, outputs = s.outputs](auto entry) {
    return [raw, outputs, entry](const void* const* in,
                                 const std::vector<std::vector<int64_t>>& shapes, void* const* out,
                                 std::vector<std::vector<int64_t>>& outShapes) -> Status {
      std::vector<const int64_t*> dims;
      for (const auto& shape : shapes) dims.push_back(shape.data());
      outShapes.resize(outputs.size());
      std::vector<int64_t*> outDims;
      for (size_t o = 0; o < outputs.size(); ++o) {
        outShapes[o].resize(outputs[o].shape.size());
        outDims.push_back(outShapes[o].data());
      }
      if (entry(raw, in, dims.data(), out, outDims.data()) != 0) return Error(tunec_last_error());
      return {};
    };
  };
  s.runShaped = shapedRun(tunec_model_run_shaped);
  s.runCached = shapedRun(tunec_model_run_cached);
  s.stepsAt =
      [raw, steps = s.steps](
          const std::vector<std::vector<int64_t>>& shapes) -> Expected<std::vector<StepInfo>> {
    std::vector<const int64_t*> dims;
    for (const auto& shape : shapes) dims.push_back(shape.data());
    const size_t n = steps.size();
    std::vector<double> flops(n), bf16(n), int8(n);
    std::vector<int64_t> bytes(n);
    if (tunec_model_step_costs_at(raw, dims.data(), flops.data(), bytes.data(), bf16.data(),
                                  int8.data()) != 0)
      return Error(tunec_last_error());
    std::vector<StepInfo> at = steps;
    for (size_t i = 0; i < n; ++i) {
      at[i].flops = flops[i];
      at[i].bytes = bytes[i];
      at[i].bf16Flops = bf16[i];
      at[i].int8Ops = int8[i];
    }
    return at;
  };
  for (int32_t i = 0; i < tunec_model_num_caches(raw); ++i) {
    tunec_cache_info c;
    if (tunec_model_cache_info(raw, i, &c) != 0) return Error(tunec_last_error());
    s.caches.push_back({c.input, c.output, c.axis, c.capacity, 0, c.bytes});
  }
  s.owner = model;
  return s;
}

struct Compiled {
  std::shared_ptr<Jit> jit;
  std::optional<db::TuningDatabase> database;
  driver::CompiledModel model;
};

Expected<Compiled> compileGraph(const std::string& path, const SessionOptions& options) {
  TUNEC_ASSIGN_OR_RETURN(CompileInput input, loadForCompile(path, options.inputDims));
  Graph graph = std::move(input.graph);
  const std::optional<driver::ImageBatch>& images = input.images;
  int64_t quantizeNodes = 0;
  for (const Node& n : graph.nodes())
    quantizeNodes += n.kind == OpKind::QuantizeLinear || n.kind == OpKind::DequantizeLinear;
  std::vector<std::pair<std::string, std::string>> keptFloat;
  TUNEC_ASSIGN_OR_RETURN(graph, runGraphPipeline(std::move(graph), nullptr, &keptFloat));
  Compiled c;
  TUNEC_ASSIGN_OR_RETURN(std::unique_ptr<Jit> jit, Jit::create(options.target));
  c.jit = std::move(jit);
  driver::CompileOptions co;
  co.threads = options.threads;
  co.target = options.target;
  co.isa = widestIsa(options.target);
  co.precision = options.precision;
  co.buckets = options.inputDims.buckets;
  if (!options.dbPath.empty()) {
    auto opened = db::TuningDatabase::openReadOnly(options.dbPath);
    if (!opened) return opened.error().withContext("--db " + options.dbPath);
    c.database.emplace(std::move(*opened));
    co.database = &*c.database;
  }
  auto model = driver::compileModel(graph, *c.jit, co);
  if (!model) return model.error().withContext(path);
  c.model = std::move(*model);
  if (images) {
    TUNEC_TRY(driver::runOncePerImage(c.model.plan, *images));
  }
  c.model.stats.quantizeNodesImported = quantizeNodes;
  c.model.stats.quantizedKeptFloat = std::move(keptFloat);
  return c;
}

} // namespace

std::string defaultDatabasePath() {
  const char* env = std::getenv("TUNEC_DB");
  return env && *env ? env : "tuning.db";
}

std::string databaseForCompile(const Arguments& args) {
  if (args.has("db")) return args.get("db");
  std::string path = defaultDatabasePath();
  // A path that cannot even be checked (a directory the user cannot search) is passed on, so
  // that opening it names the problem, rather than throwing filesystem_error here.
  std::error_code ec;
  bool exists = std::filesystem::exists(path, ec);
  return exists || ec ? path : std::string();
}

FlagSpec precisionFlag() {
  return {"precision", "fp32|bf16",
          "ONNX models: bf16 runs convolutions, MatMul/Gemm layers with constant weights and the "
          "fused attention in bf16 (weights packed to bf16, f32 accumulation, activations between "
          "bf16 kernels stored as bf16) where the target's bf16 is faster (vdpbf16ps with "
          "avx512_bf16; AMX for matmuls, convolutions and the attention on a Xeon with AMX, where "
          "vdpbf16ps is slower than fp32), the rest in fp32; a target without a bf16 instruction "
          "runs all of it in fp32, the report saying why (default fp32)"};
}

Expected<driver::Precision> precisionFromArgs(const Arguments& args) {
  auto p = driver::parsePrecision(args.get("precision", "fp32"));
  if (!p) return makeError("--", p.error().message());
  return *p;
}

Expected<SessionOptions> timingSessionOptions(const Arguments& args) {
  SessionOptions options;
  TUNEC_ASSIGN_OR_RETURN(options.precision, precisionFromArgs(args));
  TUNEC_ASSIGN_OR_RETURN(options.threads, parseThreads(args.get("threads")));
  TUNEC_ASSIGN_OR_RETURN(
      options.inputDims,
      parseInputDims(args.getAll("input-shape"), args.getAll("dim"), args.getAll("buckets")));
  options.dbPath = databaseForCompile(args);
  return options;
}

Expected<LatencyStats> timeRuns(const ModelSession& session, const void* const* in,
                                void* const* out, int warmup, int runs) {
  for (int i = 0; i < warmup; ++i) TUNEC_TRY(session.run(in, out));
  std::vector<double> ms;
  for (int i = 0; i < runs; ++i) {
    auto start = std::chrono::steady_clock::now();
    TUNEC_TRY(session.run(in, out));
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                     .count());
  }
  std::sort(ms.begin(), ms.end());
  return LatencyStats{ms[ms.size() / 2], ms[std::min(ms.size() - 1, ms.size() * 9 / 10)],
                      ms.front()};
}

RunBuffers randomRunBuffers(const ModelSession& session, uint32_t seed) {
  std::mt19937 rng(seed);
  RunBuffers b;
  for (const rt::IoSpec& io : session.inputs) b.inputs.push_back(randomInput(io, rng));
  for (const rt::IoSpec& io : session.outputs) b.outputs.emplace_back(io.dtype, Shape(io.shape));
  for (const Tensor& t : b.inputs) b.in.push_back(t.data());
  for (Tensor& t : b.outputs) b.out.push_back(t.data());
  for (const rt::IoSpec& io : session.inputs) b.inputShapes.push_back(io.shape);
  return b;
}

Status runBuffers(const ModelSession& session, RunBuffers& buffers,
                  std::vector<double>* stepSeconds) {
  const auto* shapes = session.symbolic() ? &buffers.inputShapes : nullptr;
  if (stepSeconds)
    return session.runProfiled(buffers.in.data(), shapes, buffers.out.data(), *stepSeconds);
  if (!shapes) return session.run(buffers.in.data(), buffers.out.data());
  std::vector<std::vector<int64_t>> outShapes;
  return session.runShaped(buffers.in.data(), *shapes, buffers.out.data(), outShapes);
}

Expected<LatencyStats> timeRuns(const ModelSession& session, const RunBuffers& buffers, int warmup,
                                int runs) {
  if (!session.symbolic())
    return timeRuns(session, buffers.in.data(), buffers.out.data(), warmup, runs);
  ModelSession shaped = session; // a run at the buffers' shapes
  shaped.run = [&session, &buffers](const void* const* in, void* const* out) {
    std::vector<std::vector<int64_t>> outShapes;
    return session.runShaped(in, buffers.inputShapes, out, outShapes);
  };
  return timeRuns(shaped, buffers.in.data(), buffers.out.data(), warmup, runs);
}

Expected<std::map<std::string, std::string>>
parseInputFiles(const std::vector<std::string>& specs) {
  std::map<std::string, std::string> files;
  for (const auto& spec : specs) {
    auto eq = spec.find('=');
    if (eq == std::string::npos || eq == 0)
      return makeError("--input '", spec, "' is not of the form NAME=FILE");
    auto [at, fresh] = files.emplace(spec.substr(0, eq), spec.substr(eq + 1));
    if (!fresh)
      return makeError("--input '", at->first, "' is given twice (", at->second, " and ",
                       spec.substr(eq + 1), "); give each model input once");
  }
  return files;
}

Expected<Tensor> readInputFile(const rt::IoSpec& io, const std::string& path, bool symbolic) {
  std::string type = std::string(dtypeName(io.dtype)) + "[" + Shape(io.shape).toString() + "]";
  TUNEC_ASSIGN_OR_RETURN(Tensor tensor, readTensorFile(path));
  if (symbolic && tensor.dtype() == io.dtype &&
      tensor.shape().rank() == static_cast<int>(io.shape.size()))
    return tensor; // the run binds its symbols and checks it against their bounds
  if (tensor.dtype() != io.dtype || tensor.shape().dims() != io.shape)
    return makeError("input '", io.name, "' from ", path, " is ", tensor.typeString(),
                     ", but the model expects ", type);
  return tensor;
}

// The index of model input `name`, or an error naming `flag`.
static Expected<size_t> inputIndex(const ModelSession& session, const std::string& name,
                                   const char* flag) {
  for (size_t i = 0; i < session.inputs.size(); ++i)
    if (session.inputs[i].name == name) return i;
  return makeError(flag, " names '", name, "', which is not a model input");
}

Status useInputFiles(const ModelSession& session, const std::map<std::string, std::string>& files,
                     RunBuffers& buffers) {
  for (const auto& [name, path] : files) {
    TUNEC_ASSIGN_OR_RETURN(size_t i, inputIndex(session, name, "--input"));
    TUNEC_ASSIGN_OR_RETURN(buffers.inputs[i],
                           readInputFile(session.inputs[i], path, session.symbolic()));
    buffers.in[i] = buffers.inputs[i].data();
    buffers.inputShapes[i] = buffers.inputs[i].shape().dims();
  }
  return {};
}

Status useInputShapes(const ModelSession& session, const std::map<std::string, Shape>& shapes,
                      RunBuffers& buffers) {
  std::mt19937 rng(11);
  for (const auto& [name, shape] : shapes) {
    TUNEC_ASSIGN_OR_RETURN(size_t i, inputIndex(session, name, "--input-shape"));
    rt::IoSpec io = session.inputs[i];
    if (shape.rank() != std::ssize(io.shape))
      return makeError("--input-shape ", name, "=", shape.toString(), ": input '", name,
                       "' has rank ", io.shape.size());
    io.shape = shape.dims();
    buffers.inputs[i] = randomInput(io, rng);
    buffers.in[i] = buffers.inputs[i].data();
    buffers.inputShapes[i] = io.shape;
  }
  return {};
}

Tensor randomInput(const rt::IoSpec& io, std::mt19937& rng) {
  Tensor t(io.dtype, Shape(io.shape));
  std::uniform_real_distribution<double> real(-1.0, 1.0);
  std::uniform_int_distribution<int> whole(0, 9);
  for (int64_t i = 0; i < t.numel(); ++i)
    t.setDouble(i, isFloat(io.dtype) ? real(rng) : whole(rng));
  return t;
}

int defaultThreads() {
  return availableCpus();
}

Expected<ModelSession> openModel(const std::string& path, const SessionOptions& options) {
  if (isSharedLibrary(path)) return openSharedLibrary(path, options.threads);
  auto start = std::chrono::steady_clock::now();
  TUNEC_ASSIGN_OR_RETURN(Compiled c, compileGraph(path, options));
  ModelSession s;
  s.report = driver::compileReport(c.model);
  s.inputs = c.model.plan.inputs;
  s.outputs = c.model.plan.outputs;
  TUNEC_ASSIGN_OR_RETURN(std::unique_ptr<rt::ModelExecutor> executor,
                         driver::loadInProcess(std::move(c.model), c.jit, options.threads));
  s.compileSeconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::shared_ptr<rt::ModelExecutor> shared(std::move(executor));
  s.run = [shared](const void* const* in, void* const* out) { return shared->run(in, out); };
  for (const rt::Step& step : shared->plan().steps)
    s.steps.push_back({step.label, step.kind == rt::StepKind::Kernel, step.flops, step.bytes,
                       step.bf16Flops, step.int8Ops, step.kind == rt::StepKind::WeightOnlyMatmul});
  s.requiredFeatures = shared->plan().requiredFeatures;
  s.runProfiled = [shared](const void* const* in, const std::vector<std::vector<int64_t>>* shapes,
                           void* const* out, std::vector<double>& seconds) -> Status {
    std::vector<double> run;
    TUNEC_TRY(shapes ? shared->runShaped(in, *shapes, out, nullptr, &run)
                     : shared->run(in, out, &run));
    for (size_t i = 0; i < run.size(); ++i) seconds[i] += run[i];
    return Status();
  };
  s.symbols = shared->plan().symbols;
  for (int out = 0; out < 2; ++out) {
    auto& names = out ? s.outputDimNames : s.inputDimNames;
    for (const rt::IoSpec& io : out ? s.outputs : s.inputs) {
      names.emplace_back(io.shape.size());
      for (size_t d = 0; d < io.dimExtents.size(); ++d)
        if (io.dimExtents[d] >= 0)
          names.back()[d] = rt::extentName(shared->plan(), io.dimExtents[d]);
    }
  }
  s.runShaped = [shared](const void* const* in, const std::vector<std::vector<int64_t>>& shapes,
                         void* const* out, std::vector<std::vector<int64_t>>& outShapes) {
    return shared->runShaped(in, shapes, out, &outShapes);
  };
  s.stepsAt =
      [shared, steps = s.steps](
          const std::vector<std::vector<int64_t>>& shapes) -> Expected<std::vector<StepInfo>> {
    TUNEC_ASSIGN_OR_RETURN(rt::RunExtents run, rt::bindRunExtents(shared->plan(), shapes));
    std::vector<StepInfo> at = steps;
    for (size_t i = 0; i < at.size(); ++i) {
      rt::StepCost c = rt::stepCostAt(shared->plan().steps[i], run);
      at[i].flops = c.flops;
      at[i].bytes = c.bytes;
      at[i].bf16Flops = c.bf16Flops;
      at[i].int8Ops = c.int8Ops;
    }
    return at;
  };
  s.caches = shared->plan().caches;
  s.runCached = [shared](const void* const* in, const std::vector<std::vector<int64_t>>& shapes,
                         void* const* out, std::vector<std::vector<int64_t>>& outShapes) {
    return shared->runShaped(in, shapes, out, &outShapes, nullptr, true);
  };
  s.owner = shared;
  return s;
}

Expected<std::unique_ptr<rt::Generator>> openGenerator(const ModelSession& session) {
  rt::GenerationModel g;
  g.inputs = session.inputs;
  g.outputs = session.outputs;
  g.inputDimNames = session.inputDimNames;
  g.caches = session.caches;
  // The runs hold the session's owner: the model stays loaded while the generator lives.
  g.run = [dense = session.runShaped, cached = session.runCached, owner = session.owner](
              const void* const* in, const std::vector<std::vector<int64_t>>& shapes,
              void* const* out, std::vector<std::vector<int64_t>>& outShapes, bool inPlace) {
    (void)owner;
    return inPlace ? cached(in, shapes, out, outShapes) : dense(in, shapes, out, outShapes);
  };
  return rt::Generator::create(std::move(g));
}

Expected<std::string> compileToFile(const std::string& model, const std::string& out,
                                    const SessionOptions& options) {
  // The output is checked before the compile's minutes: not a device, not the model or database.
  const std::vector<std::string> inputs = {model, options.dbPath};
  TUNEC_TRY(checkOutputPath(out, inputs));
  TUNEC_ASSIGN_OR_RETURN(Compiled c, compileGraph(model, options));
  std::string report = driver::compileReport(c.model);
  TUNEC_TRY(driver::writeSharedLibrary(std::move(c.model), out, inputs));
  return report;
}

} // namespace tunec::cli
