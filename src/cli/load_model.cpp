// Model loading shared by the commands.
#include "cli/load_model.h"

#include "frontend/onnx_importer.h"
#include "reference/reference.h"

#include <cstdio>
#include <filesystem>

namespace tunec::cli {

namespace {

ImportOptions importOptions(const InputDims& inputDims) {
  ImportOptions options;
  options.inputDims = inputDims;
  options.evaluator = runReferenceNode;
  options.note = [](const std::string& text) {
    std::fprintf(stderr, "tunec: note: %s\n", text.c_str());
  };
  return options;
}

} // namespace

Expected<Graph> loadModel(const std::string& path, const InputDims& inputDims) {
  return importOnnxFile(path, importOptions(inputDims));
}

Expected<CompileInput> loadForCompile(const std::string& path, const InputDims& inputDims) {
  // Read once: a batch of images imports the same bytes again with the symbol fixed at 1.
  TUNEC_ASSIGN_OR_RETURN(std::string bytes, readOnnxFile(path));
  const std::string baseDir = std::filesystem::path(path).parent_path().string();
  auto import = [&](const InputDims& dims) -> Expected<Graph> {
    auto graph = importOnnxBytes(bytes, baseDir, importOptions(dims));
    if (!graph) return graph.error().withContext(path);
    return graph;
  };
  CompileInput in;
  TUNEC_ASSIGN_OR_RETURN(in.graph, import(inputDims));
  in.images = driver::imageBatchOf(in.graph);
  if (in.images) {
    InputDims one = inputDims;
    one.ranges[in.images->symbol] = {1, 1};
    TUNEC_ASSIGN_OR_RETURN(in.graph, import(one));
  }
  return in;
}

} // namespace tunec::cli
