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

} // namespace tunec::cli
