// Model loading shared by the commands.
#include "cli/load_model.h"

#include "frontend/onnx_importer.h"
#include "reference/reference.h"

namespace tunec::cli {

Expected<Graph> loadModel(const std::string& path, const InputDims& inputDims) {
  ImportOptions options;
  options.inputDims = inputDims;
  options.evaluator = runReferenceNode;
  return importOnnxFile(path, options);
}

Expected<CompileInput> loadForCompile(const std::string& path, const InputDims& inputDims) {
  CompileInput in;
  TUNEC_ASSIGN_OR_RETURN(in.graph, loadModel(path, inputDims));
  in.images = driver::imageBatchOf(in.graph);
  if (in.images) {
    InputDims one = inputDims;
    one.ranges[in.images->symbol] = {1, 1};
    TUNEC_ASSIGN_OR_RETURN(in.graph, loadModel(path, one));
  }
  return in;
}

} // namespace tunec::cli
