// ONNX import: a model file to a Graph with static or bounded symbolic shapes and typed
// attributes.
#pragma once

#include "ir/graph.h"

#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>

namespace tunec {

/// Evaluates one node on constant inputs (the reference executor, injected by the caller so
/// that the frontend does not depend on it).
using ConstantEvaluator =
    std::function<Status(const Node&, std::span<const Tensor* const>, std::span<Tensor>)>;

/// How the user fixes or bounds the model's input dimensions (the CLI's --input-shape and --dim).
struct InputDims {
  /// Static shapes for inputs whose shape in the model is dynamic or that the user overrides
  /// (--input-shape name=1x3x224x224): a static compile of those inputs.
  std::map<std::string, Shape> shapes;
  /// The bounds of a symbolic dimension, by symbol (--dim sequence=1..512): an ONNX dim_param of
  /// that name, or a dimension named by `names`. MIN == MAX fixes it.
  std::map<std::string, std::pair<int64_t, int64_t>> ranges;
  /// A symbol for a dimension of an input, by (input, axis) (--dim input_ids:1=sequence): for
  /// a dynamic dimension the model does not name, or to rename one.
  std::map<std::pair<std::string, int>, std::string> names;
  /// A symbol that is an expression of others (--dim total_sequence=past_sequence+sequence, or
  /// found by the import where the graph combines them elementwise): its dimensions are that
  /// expression, which each run checks.
  std::map<std::string, DimExpr> equal;
  /// The size buckets of a symbol's heavy kernels (--buckets sequence=16,32,64): each bucket's
  /// largest value, ascending, within the symbol's bounds (the last bucket ends at the bound).
  std::map<std::string, std::vector<int64_t>> buckets;
};

struct ImportOptions {
  InputDims inputDims;
  /// Called when an op needs a compile-time constant (a Reshape target, Slice bounds, ...)
  /// that is a model input; a returned tensor binds that input as a constant.
  std::function<std::optional<Tensor>(const std::string& inputName)> bindInput;
  /// When set, nodes whose inputs are all constant and whose outputs are small (shape
  /// arithmetic) are evaluated at import so that shape-defining values become constants.
  ConstantEvaluator evaluator;
  /// Told what the import decided that the user did not say (a symbol taken as an extent).
  std::function<void(const std::string&)> note;
};

/// Reads an ONNX model file (external data files next to it are resolved). The error names
/// the file and the problem: unreadable or non-ONNX file, every unsupported op in one message,
/// a dynamic dimension without bounds (with the --dim and --input-shape fixes), an unsupported
/// attribute, a bad shape.
Expected<Graph> importOnnxFile(const std::string& path, const ImportOptions& options = {});
/// The bytes of a model file (a regular file: a FIFO, device or directory is an error naming it),
/// for importing one file more than once without reading it again.
Expected<std::string> readOnnxFile(const std::string& path);

/// Imports from serialized ModelProto bytes; `baseDir` resolves external data.
Expected<Graph> importOnnxBytes(const std::string& bytes, const std::string& baseDir,
                                const ImportOptions& options = {});

} // namespace tunec
