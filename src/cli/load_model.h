// Loading a model for any command: ONNX import with the CLI's shapes and constant folding.
#pragma once

#include "ir/graph.h"

#include <map>
#include <string>

namespace tunec::cli {

/// Imports an ONNX model with static input shapes; shape arithmetic is folded with the
/// reference executor.
Expected<Graph> loadModel(const std::string& path, const std::map<std::string, Shape>& inputShapes);

} // namespace tunec::cli
