// Loading a model for any command: ONNX import with the CLI's shapes and constant folding.
#pragma once

#include "frontend/onnx_importer.h"
#include "ir/graph.h"

#include <map>
#include <string>

namespace tunec::cli {

/// Imports an ONNX model with the input dimensions the user fixed or bounded; shape arithmetic
/// is folded with the reference executor.
Expected<Graph> loadModel(const std::string& path, const InputDims& inputDims);

} // namespace tunec::cli
