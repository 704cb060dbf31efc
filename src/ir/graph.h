// The graph IR: Values (typed tensors, maybe constant) produced and consumed by Nodes.
#pragma once

#include "ir/op_attrs.h"
#include "ir/op_kind.h"
#include "ir/shape.h"
#include "ir/tensor.h"
#include "support/error.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tunec {

using ValueId = int32_t;
using NodeId = int32_t;
/// Marks an omitted optional input.
inline constexpr ValueId kNoValue = -1;

/// Static type of a value: element type, shape and memory layout.
struct TensorType {
  DType dtype = DType::F32;
  Shape shape;
  Layout layout;
  bool operator==(const TensorType& other) const = default;
  /// "f32[1x3x224x224]" (plus "{nChw16c}" when the layout is not plain).
  std::string toString() const;
};

/// A tensor in the graph: a model input, a constant, or the output of one node.
struct Value {
  std::string name;
  TensorType type;
  NodeId producer = -1;           ///< -1 for inputs and constants
  std::optional<Tensor> constant; ///< set for initializers and folded values
};

/// One operator application. Nodes are kept in topological order.
struct Node {
  std::string name;
  OpKind kind;
  OpAttrs attrs;
  std::vector<ValueId> inputs; ///< kNoValue for an omitted optional input
  std::vector<ValueId> outputs;
};

/// A dataflow graph with static or bounded symbolic shapes. Construction through addNode runs shape
/// and dtype inference, so every value has a known type (DESIGN.md, decision 1).
class Graph {
public:
  /// Adds a model input.
  ValueId addInput(std::string name, TensorType type);
  /// Adds a constant (initializer) value.
  ValueId addConstant(std::string name, Tensor value);
  /// Adds a node after all existing ones, inferring the types of its `outputNames.size()`
  /// outputs; the error names the node and the problem.
  Expected<NodeId> addNode(std::string name, OpKind kind, OpAttrs attrs,
                           std::vector<ValueId> inputs, std::vector<std::string> outputNames);
  /// Marks a value as a model output, named `name` for the user (default: the value's name).
  /// The name is the model's and stays when a pass replaces the value that produces it.
  void addOutput(ValueId value, std::string name = "") {
    outputs_.push_back(value);
    outputNames_.push_back(std::move(name));
  }
  /// Turns a model input into a constant with the given data (binding it at compile time).
  void bindInput(ValueId input, Tensor data);

  const std::vector<Value>& values() const { return values_; }
  const std::vector<Node>& nodes() const { return nodes_; }
  const std::vector<ValueId>& inputs() const { return inputs_; }
  const std::vector<ValueId>& outputs() const { return outputs_; }
  /// The model's name of output i: the name it was added with, else its value's name.
  const std::string& outputName(size_t i) const {
    return outputNames_[i].empty() ? values_[static_cast<size_t>(outputs_[i])].name
                                   : outputNames_[i];
  }
  const Value& value(ValueId id) const { return values_[static_cast<size_t>(id)]; }
  Value& value(ValueId id) { return values_[static_cast<size_t>(id)]; }
  const Node& node(NodeId id) const { return nodes_[static_cast<size_t>(id)]; }
  /// Finds a value by name.
  std::optional<ValueId> findValue(const std::string& name) const;

  /// Drops nodes whose outputs reach no model output and constants no node reads.
  void removeDeadCode();

private:
  std::vector<Value> values_;
  std::vector<Node> nodes_;
  std::vector<ValueId> inputs_;
  std::vector<ValueId> outputs_;
  std::vector<std::string> outputNames_;
};

} // namespace tunec
