// Loading a model for any command: ONNX import with the CLI's shapes and constant folding.
#pragma once

#include "driver/per_image.h"
#include "frontend/onnx_importer.h"
#include "ir/graph.h"

#include <map>
#include <string>

namespace tunec::cli {

/// Imports an ONNX model with the input dimensions the user fixed or bounded; shape arithmetic
/// is folded with the reference executor.
Expected<Graph> loadModel(const std::string& path, const InputDims& inputDims);

/// What compile and tune lower: the imported graph, or, for a dynamic batch of independent
/// images (a CNN exported with a dynamic batch axis), the graph of one image and that batch, whose
/// plan runs once per image (driver/per_image.h).
struct CompileInput {
  Graph graph;
  std::optional<driver::ImageBatch> images;
};
Expected<CompileInput> loadForCompile(const std::string& path, const InputDims& inputDims);

} // namespace tunec::cli
