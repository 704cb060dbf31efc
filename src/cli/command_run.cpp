// `tunec run`: run a model on tensor files and write its outputs.
#include "cli/agreement.h"
#include "cli/arguments.h"
#include "cli/commands.h"
#include "cli/flag_values.h"
#include "cli/load_model.h"
#include "cli/model_session.h"
#include "cli/pipeline.h"
#include "frontend/tensor_io.h"
#include "reference/reference.h"
#include "support/atomic_file.h"
#include "support/terminal_text.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>

namespace tunec::cli {

namespace {

const CommandSpec kRunSpec{
    "run",
    "tunec run MODEL.onnx|model.so --input NAME=FILE... [--output DIR] [flags]",
    "Runs the model on the given input tensors and writes one file per output to DIR.\n"
    "Input files are NumPy .npy or serialized ONNX TensorProto (.pb). A model.so (from\n"
    "'tunec compile') is loaded; an ONNX model is compiled in memory with the JIT, or run\n"
    "on the reference executor with --reference.",
    {
        {"input", "NAME=FILE", "tensor file for a model input", true},
        {"threads", "N", "threads per run (default: the machine's cores)"},
        {"db", "FILE",
         "ONNX models: tuned configs (default: $TUNEC_DB or ./tuning.db if it exists)"},
        {"reference", "", "ONNX models: run the reference executor (double precision) instead"},
        {"report", "", "ONNX models: print the compile report (tuned and default kernels)"},
        {"output", "DIR", "directory for the outputs (default: print a summary only)"},
        {"format", "npy|pb", "output file format (default npy)"},
        {"input-shape", "NAME=SHAPE", "static shape for a dynamic input, e.g. x=1x3x224x224", true},
        {"dim", "NAME=MIN..MAX", kDimFlagHelp, true},
        {"buckets", "NAME=E1,E2,...", kBucketsFlagHelp, true},
        precisionFlag(),
        {"optimize", "", "with --reference: run the graph passes first"},
        {"expect", "NAME=FILE",
         "compare output NAME with the tensor in FILE and print the verdict; exit status 1 if "
         "they differ",
         true},
        {"tolerance", "R",
         "--expect: the largest relative L2 error that matches (default 1e-4; 2e-2 for a model "
         "with bf16 kernels)"},
    },
    1,
    1};

std::string fileNameFor(const std::string& valueName) {
  std::string s = valueName;
  for (char& c : s)
    if (c == '/' || c == '\\' || c == ':' || c == ' ' || static_cast<unsigned char>(c) < 0x20 ||
        c == 0x7f)
      c = '_';
  return s.empty() ? "output" : s;
}

/// The file name of each output: fileNameFor, and where two names map to the same file (a/b and
/// a_b), the later ones numbered (a_b_2) so that none is overwritten; the printed "-> path"
/// gives the mapping.
std::vector<std::string> outputFileNames(const std::vector<std::string>& names) {
  std::vector<std::string> files;
  std::set<std::string> taken;
  for (const std::string& name : names) {
    std::string base = fileNameFor(name), file = base;
    for (int i = 2; taken.count(file); ++i) file = base + "_" + std::to_string(i);
    taken.insert(file);
    files.push_back(file);
  }
  return files;
}

/// The files the command reads: the model, the --input and --expect tensors, the database. No
/// output may be one of them (checkOutputPath), whatever path names it.
std::vector<std::string> commandInputs(const Arguments& args) {
  std::vector<std::string> files = {args.positionals()[0]};
  for (const char* flag : {"input", "expect"})
    for (const std::string& spec : args.getAll(flag))
      if (size_t eq = spec.find('='); eq != std::string::npos) files.push_back(spec.substr(eq + 1));
  if (args.has("db")) files.push_back(args.get("db"));
  return files;
}

int writeOutputs(const Arguments& args, const std::string& format,
                 const std::vector<std::string>& names, const std::vector<Tensor>& outputs) {
  const std::string dir = args.get("output");
  if (!dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) return fail("cannot create output directory " + dir + ": " + ec.message());
  }
  const std::vector<std::string> files = outputFileNames(names);
  // Every path is checked before the first is written: an output over an input is refused
  // with nothing written.
  if (!dir.empty())
    for (const std::string& file : files)
      if (Status s = checkOutputPath(dir + "/" + file + "." + format, commandInputs(args)); !s)
        return fail("--output " + dir + ": " + s.error().message());
  for (size_t i = 0; i < outputs.size(); ++i) {
    const Tensor& t = outputs[i];
    double sum = 0;
    for (int64_t j = 0; j < t.numel(); ++j) sum += t.getDouble(j);
    std::printf("output %s: %s mean %.6g", forTerminal(names[i]).c_str(), t.typeString().c_str(),
                t.numel() ? sum / static_cast<double>(t.numel()) : 0.0);
    if (!dir.empty()) {
      std::string path = dir + "/" + files[i] + "." + format;
      Status s = format == "npy" ? writeNpy(path, t) : writeTensorProto(path, t, names[i]);
      if (!s) return fail(s.error().message());
      std::printf(" -> %s", forTerminal(path).c_str());
    }
    std::printf("\n");
  }
  return 0;
}

/// --expect: each named output against its file, by relative L2 error (and the largest absolute
/// difference, printed); 0 when all match, 1 otherwise.
/// `bf16`: the model has bf16 kernels (--precision bf16), whose results are within about 1e-2
/// of fp32's, so the default tolerance is 2e-2.
int checkExpected(const Arguments& args, const std::vector<std::string>& names,
                  const std::vector<Tensor>& outputs, bool bf16 = false) {
  if (!args.has("expect")) return 0;
  double tolerance = bf16 ? 2e-2 : 1e-4;
  if (args.has("tolerance")) {
    auto parsed = parseNumber("tolerance", args.get("tolerance"), 0, 1000);
    if (!parsed) return fail(parsed.error().message());
    tolerance = *parsed;
  }
  int differing = 0;
  for (const std::string& spec : args.getAll("expect")) {
    auto eq = spec.find('=');
    if (eq == std::string::npos || eq == 0)
      return fail("--expect '" + spec + "' is not of the form NAME=FILE");
    std::string name = spec.substr(0, eq), file = spec.substr(eq + 1);
    auto at = std::find(names.begin(), names.end(), name);
    if (at == names.end())
      return fail("--expect names '" + name + "', which is not a model output");
    const Tensor& got = outputs[static_cast<size_t>(at - names.begin())];
    auto want = readTensorFile(file);
    if (!want) return fail(want.error().message());
    if (!(want->shape() == got.shape()))
      return fail("--expect " + name + ": " + file + " is " + want->typeString() +
                  ", but the output is " + got.typeString());
    Agreement agreement;
    agreement.add(got, *want);
    const double rel =
        agreement.den > 0 ? std::sqrt(agreement.num / agreement.den) : std::sqrt(agreement.num);
    bool ok = rel <= tolerance; // false for NaN and infinite errors
    differing += !ok;
    std::printf("check %s: %s %s: relative L2 error %.2e (tolerance %.0e), largest difference "
                "%.2e%s\n",
                forTerminal(name).c_str(), ok ? "matches" : "DIFFERS from",
                forTerminal(file).c_str(), rel, tolerance, agreement.maxAbs,
                agreement.nanMismatches ? (", " + std::to_string(agreement.nanMismatches) +
                                           " NaN where the expected is a number or the reverse")
                                              .c_str()
                                        : "");
  }
  return differing == 0 ? 0 : 1;
}

int runCompiled(const Arguments& args, const InputDims& shapes,
                std::map<std::string, std::string> files, const std::string& format) {
  SessionOptions options;
  options.inputDims = shapes;
  options.dbPath = databaseForCompile(args);
  auto precision = precisionFromArgs(args);
  if (!precision) return fail(precision.error().message());
  options.precision = *precision;
  auto threads = parseThreads(args.get("threads"));
  if (!threads) return fail(threads.error().message());
  options.threads = *threads;
  const std::string& path = args.positionals()[0];
  auto session = openModel(path, options);
  if (!session) return fail(session.error().message());
  if (args.has("report")) std::fputs(forTerminal(session->report).c_str(), stdout);
  std::vector<Tensor> inputs;
  std::vector<const void*> inPtrs;
  for (const rt::IoSpec& io : session->inputs) {
    std::string type = std::string(dtypeName(io.dtype)) + "[" + Shape(io.shape).toString() + "]";
    auto it = files.find(io.name);
    if (it == files.end())
      return fail("missing --input for model input '" + io.name + "' (" + type + ")");
    auto tensor = readInputFile(io, it->second, session->symbolic());
    if (!tensor) return fail(tensor.error().message());
    inputs.push_back(*tensor);
    inPtrs.push_back(inputs.back().data());
    files.erase(it);
  }
  if (!files.empty())
    return fail("--input names '" + files.begin()->first + "', which is not a model input");
  std::vector<Tensor> outputs;
  std::vector<void*> outPtrs;
  std::vector<std::string> names;
  for (const rt::IoSpec& io : session->outputs) {
    outputs.emplace_back(io.dtype, Shape(io.shape));
    names.push_back(io.name);
  }
  for (Tensor& t : outputs) outPtrs.push_back(t.data());
  auto start = std::chrono::steady_clock::now();
  Status status;
  std::vector<std::vector<int64_t>> outShapes;
  if (session->symbolic()) { // at the input files' shapes, within the bounds
    std::vector<std::vector<int64_t>> shapes;
    for (const Tensor& t : inputs) shapes.push_back(t.shape().dims());
    status = session->runShaped(inPtrs.data(), shapes, outPtrs.data(), outShapes);
  } else {
    status = session->run(inPtrs.data(), outPtrs.data());
  }
  double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  if (!status) return fail(status.error().message());
  // A symbolic output is dense at the run's shape at the start of its bound-sized buffer.
  for (size_t o = 0; o < outShapes.size(); ++o) {
    Tensor shaped(outputs[o].dtype(), Shape(outShapes[o]));
    std::memcpy(shaped.data(), outputs[o].data(), shaped.byteSize());
    outputs[o] = shaped;
  }
  if (int rc = writeOutputs(args, format, names, outputs)) return rc;
  if (session->compileSeconds > 0) std::printf("compiled in %.2f s; ", session->compileSeconds);
  std::printf("ran in %.2f ms on %d thread%s (%s)\n", ms, options.threads,
              options.threads > 1 ? "s" : "",
              path.size() > 3 && path.ends_with(".so") ? "model.so" : "JIT");
  const bool bf16 = std::any_of(session->steps.begin(), session->steps.end(),
                                [](const StepInfo& s) { return s.bf16Flops > 0; });
  return checkExpected(args, names, outputs, bf16);
}

} // namespace

Expected<int> parseThreads(const std::string& text) {
  if (text.empty()) return defaultThreads();
  TUNEC_ASSIGN_OR_RETURN(int64_t n, parseInteger("threads", text, 1, 1024));
  return static_cast<int>(n);
}

int fail(const std::string& message) {
  std::fprintf(stderr, "tunec: %s\n", forTerminal(message).c_str());
  return 1;
}

int commandRun(const std::vector<std::string>& argv) {
  auto args = Arguments::parse(kRunSpec, argv);
  if (!args) return fail(args.error().message());
  if (args->helpRequested()) {
    std::fputs(helpText(kRunSpec).c_str(), stdout);
    return 0;
  }
  auto shapes =
      parseInputDims(args->getAll("input-shape"), args->getAll("dim"), args->getAll("buckets"));
  if (!shapes) return fail(shapes.error().message());
  std::string format = args->get("format", "npy");
  if (format != "npy" && format != "pb")
    return fail("--format must be npy or pb, not '" + format + "'");

  auto parsedFiles = parseInputFiles(args->getAll("input"));
  if (!parsedFiles) return fail(parsedFiles.error().message());
  std::map<std::string, std::string> files = *parsedFiles;
  if (!args->has("reference")) return runCompiled(*args, *shapes, files, format);
  auto graph = loadModel(args->positionals()[0], *shapes);
  if (!graph) return fail(graph.error().message());
  if (args->has("optimize")) {
    graph = runGraphPipeline(std::move(*graph), nullptr);
    if (!graph) return fail(graph.error().message());
  }

  std::vector<Tensor> inputs;
  for (ValueId id : graph->inputs()) {
    const Value& v = graph->value(id);
    auto it = files.find(v.name);
    if (it == files.end())
      return fail("missing --input for model input '" + v.name + "' (" + v.type.toString() + ")");
    auto tensor = readTensorFile(it->second);
    if (!tensor) return fail(tensor.error().message());
    if (tensor->dtype() != v.type.dtype || !(tensor->shape() == v.type.shape))
      return fail("input '" + v.name + "' from " + it->second + " is " + tensor->typeString() +
                  ", but the model expects " + v.type.toString());
    inputs.push_back(*tensor);
    files.erase(it);
  }
  if (!files.empty())
    return fail("--input names '" + files.begin()->first + "', which is not a model input");

  auto start = std::chrono::steady_clock::now();
  auto outputs = runReference(*graph, inputs);
  double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  if (!outputs) return fail(outputs.error().message());

  std::vector<std::string> names;
  for (size_t i = 0; i < graph->outputs().size(); ++i) names.push_back(graph->outputName(i));
  if (int rc = writeOutputs(*args, format, names, *outputs)) return rc;
  std::printf("ran %zu nodes in %.1f ms (reference executor)\n", graph->nodes().size(), ms);
  return checkExpected(*args, names, *outputs);
}

} // namespace tunec::cli
