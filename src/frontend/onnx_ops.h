// Internal: one ONNX converter per op, reading ONNX attributes into typed attributes.
#pragma once

#include "frontend/onnx_importer.h"
#include "ir/graph.h"

#include <onnx/onnx_pb.h>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace tunec::onnx_import {

/// Reads a NodeProto's attributes and remembers which were read, so that an attribute no
/// converter understands is reported by name instead of silently ignored.
class AttrReader {
public:
  explicit AttrReader(const onnx::NodeProto& node) : node_(node) {}
  bool has(const std::string& name) const;
  int64_t getInt(const std::string& name, int64_t fallback) const;
  float getFloat(const std::string& name, float fallback) const;
  std::string getString(const std::string& name, const std::string& fallback) const;
  std::optional<std::vector<int64_t>> getInts(const std::string& name) const;
  std::optional<std::vector<float>> getFloats(const std::string& name) const;
  const onnx::TensorProto* getTensor(const std::string& name) const;
  /// Marks an attribute as understood without reading it (e.g. training-only momentum).
  void ignore(const std::string& name) const { read_.insert(name); }
  /// Attributes present on the node that no getter has read.
  std::vector<std::string> unread() const;

private:
  const onnx::AttributeProto* find(const std::string& name) const;
  const onnx::NodeProto& node_;
  mutable std::set<std::string> read_;
};

/// What a converter sees of one node.
/// A value the model computes from symbolic dimensions by shape arithmetic (Shape, then Gather,
/// Unsqueeze, Concat, Mul, ...): its elements as dimensions. The graph holds a placeholder
/// constant of their bounds under its name, which only shape-aware readers may read.
struct ShapeValue {
  std::vector<Dim> elements;
  bool scalar = false;
  bool boolean = false; ///< a comparison's result: elements 0 or 1
};

/// A weight dequantized blockwise by a DequantizeLinear of block_size (opset 21: int4/uint4 or
/// 8-bit codes, a scale and zero point per block along one axis) from constants: what a MatMul
/// reading it needs to run it as tunec's MatMulNBits instead of an f32 weight.
struct BlockQuantized {
  Tensor codes;       ///< u8 [N, K], one code a byte
  Tensor scales;      ///< f32 [N, blocks]
  Tensor zeroPoints;  ///< f32 [N, blocks]
  int64_t bits = 4;   ///< 4 or 8: the codes' range
  int64_t block = 32; ///< along K
};

struct ConvertContext {
  Graph& graph;
  const onnx::NodeProto& proto;
  int opset;
  std::vector<ValueId> inputs; ///< kNoValue for omitted optional inputs
  int numOutputs;
  AttrReader attrs;
  const ImportOptions& options;
  std::string baseDir;

  bool hasInput(size_t i) const { return i < inputs.size() && inputs[i] != kNoValue; }
  const TensorType& inputType(size_t i) const { return graph.value(inputs[i]).type; }
  /// The compile-time value of input i (binding a model input through options.bindInput if
  /// needed); nullopt when the input is omitted; an error when it is not constant.
  Expected<std::optional<Tensor>> constantInput(size_t i, const char* role);
  /// The symbolic shape values of the import so far (null: none).
  const std::map<ValueId, ShapeValue>* shapeValues = nullptr;
  /// The blockwise-dequantized weights of the import so far, by their ONNX name (null: none).
  std::map<std::string, BlockQuantized>* blockQuantized = nullptr;
  /// The model's nodes that read each value, by name (null: not known).
  const std::map<std::string, std::vector<const onnx::NodeProto*>>* readers = nullptr;
  /// Every reader of the node's first output is a Cast to f32 (and the model does not output
  /// it): what the model computes of it is its value rounded to f32.
  bool onlyCastToFloat() const;
  /// Input i as dimensions: a shape value's elements, or a constant's integers.
  Expected<std::optional<std::vector<Dim>>> shapeInput(size_t i, const char* role);
};

/// The op a node becomes: kind, typed attributes and the inputs that stay data inputs.
struct Conversion {
  OpKind kind;
  OpAttrs attrs;
  std::vector<ValueId> inputs;
  /// Trailing outputs of the ONNX node that are constants, by output index (Dropout's mask in
  /// inference: all true); the op itself has the outputs before them.
  std::vector<std::pair<int, Tensor>> constantOutputs = {};
  /// Trailing outputs computed by nodes the converter added (DynamicQuantizeLinear's scale and
  /// zero point), by output index.
  std::vector<std::pair<int, ValueId>> valueOutputs = {};
};

using Converter = Expected<Conversion> (*)(ConvertContext&);

/// The converter for an ONNX op type in the default domain, or nullptr.
Converter findConverter(const std::string& opType);

/// Every ONNX op type that has a converter, sorted (for docs and `tunec ops`).
std::vector<std::string> supportedOnnxOps();
/// For an ONNX op the importer rewrites into other ops (the quantized operators), what it
/// becomes ("DequantizeLinear -> Conv -> QuantizeLinear"); nullopt for the others.
std::optional<std::string_view> onnxOpExpansion(std::string_view onnxOp);

} // namespace tunec::onnx_import
