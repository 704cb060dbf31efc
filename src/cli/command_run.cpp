// `tunec run`: run a model on tensor files and write its outputs.
#include "cli/arguments.h"
#include "cli/commands.h"
#include "cli/load_model.h"
#include "cli/pipeline.h"
#include "frontend/tensor_io.h"
#include "reference/reference.h"

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>

namespace tunec::cli {

namespace {

const CommandSpec kRunSpec{
    "run",
    "tunec run MODEL.onnx --input NAME=FILE... [--output DIR] [flags]",
    "Runs the model on the given input tensors and writes one file per output to DIR.\n"
    "Input files are NumPy .npy or serialized ONNX TensorProto (.pb). This build runs the\n"
    "reference executor; compiled execution arrives with 'tunec compile'.",
    {
        {"input", "NAME=FILE", "tensor file for a model input", true},
        {"output", "DIR", "directory for the outputs (default: print a summary only)"},
        {"format", "npy|pb", "output file format (default npy)"},
        {"input-shape", "NAME=SHAPE", "static shape for a dynamic input, e.g. x=1x3x224x224", true},
        {"optimize", "", "run the graph passes (tunec inspect --print-after-all lists them) first"},
    },
    1,
    1};

std::string fileNameFor(const std::string& valueName) {
  std::string s = valueName;
  for (char& c : s)
    if (c == '/' || c == '\\' || c == ':' || c == ' ') c = '_';
  return s.empty() ? "output" : s;
}

} // namespace

int fail(const std::string& message) {
  std::fprintf(stderr, "tunec: %s\n", message.c_str());
  return 1;
}

int commandRun(const std::vector<std::string>& argv) {
  auto args = Arguments::parse(kRunSpec, argv);
  if (!args) return fail(args.error().message());
  if (args->helpRequested()) {
    std::fputs(helpText(kRunSpec).c_str(), stdout);
    return 0;
  }
  auto shapes = parseInputShapes(args->getAll("input-shape"));
  if (!shapes) return fail(shapes.error().message());
  std::string format = args->get("format", "npy");
  if (format != "npy" && format != "pb")
    return fail("--format must be npy or pb, not '" + format + "'");

  auto graph = loadModel(args->positionals()[0], *shapes);
  if (!graph) return fail(graph.error().message());
  if (args->has("optimize")) {
    graph = runGraphPipeline(std::move(*graph), nullptr);
    if (!graph) return fail(graph.error().message());
  }

  std::map<std::string, std::string> files;
  for (const auto& spec : args->getAll("input")) {
    auto eq = spec.find('=');
    if (eq == std::string::npos || eq == 0)
      return fail("--input '" + spec + "' is not of the form NAME=FILE");
    files[spec.substr(0, eq)] = spec.substr(eq + 1);
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

  std::string dir = args->get("output");
  if (!dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) return fail("cannot create output directory " + dir + ": " + ec.message());
  }
  for (size_t i = 0; i < outputs->size(); ++i) {
    const Value& v = graph->value(graph->outputs()[i]);
    const Tensor& t = (*outputs)[i];
    double sum = 0;
    for (int64_t j = 0; j < t.numel(); ++j) sum += t.getDouble(j);
    std::printf("output %s: %s mean %.6g", v.name.c_str(), t.typeString().c_str(),
                t.numel() ? sum / static_cast<double>(t.numel()) : 0.0);
    if (!dir.empty()) {
      std::string path = dir + "/" + fileNameFor(v.name) + "." + format;
      Status s = format == "npy" ? writeNpy(path, t) : writeTensorProto(path, t, v.name);
      if (!s) return fail(s.error().message());
      std::printf(" -> %s", path.c_str());
    }
    std::printf("\n");
  }
  std::printf("ran %zu nodes in %.1f ms (reference executor)\n", graph->nodes().size(), ms);
  return 0;
}

} // namespace tunec::cli
