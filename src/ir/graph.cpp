// Graph construction with inference at every added node, and dead-code removal.
#include "ir/graph.h"

#include "ir/op_registry.h"

namespace tunec {

std::string TensorType::toString() const {
  std::string s = std::string(dtypeName(dtype)) + "[" + shape.toString() + "]";
  if (!layout.isPlain()) s += "{" + layout.toString(shape.rank()) + "}";
  return s;
}

ValueId Graph::addInput(std::string name, TensorType type) {
  values_.push_back(Value{std::move(name), std::move(type), -1, std::nullopt});
  auto id = static_cast<ValueId>(values_.size() - 1);
  inputs_.push_back(id);
  return id;
}

ValueId Graph::addConstant(std::string name, Tensor value) {
  TensorType type{value.dtype(), value.shape(), {}};
  values_.push_back(Value{std::move(name), std::move(type), -1, std::move(value)});
  return static_cast<ValueId>(values_.size() - 1);
}

Expected<NodeId> Graph::addNode(std::string name, OpKind kind, OpAttrs attrs,
                                std::vector<ValueId> inputs, std::vector<std::string> outputNames) {
  auto types = inferNodeTypes(*this, kind, attrs, inputs, static_cast<int>(outputNames.size()));
  if (!types) {
    std::string input;
    for (size_t i = 0; i < inputs.size(); ++i)
      input += (i ? ", " : "") +
               (inputs[i] == kNoValue ? std::string("<none>") : value(inputs[i]).type.toString());
    return types.error().withContext("node '" + name + "' (" + std::string(opName(kind)) +
                                     ") with inputs (" + input + ")");
  }
  // Every tensor the graph can hold has a countable size: a shape whose element count overflows
  // (or passes 2^40) comes from a damaged model and must not reach an allocation.
  constexpr int64_t kMaxElements = int64_t{1} << 40;
  for (const TensorType& t : *types) {
    int64_t count = 1;
    for (int64_t d : t.shape.dims()) {
      if (d < 0 || (d > 0 && count > kMaxElements / d))
        return makeError("node '", name, "' (", opName(kind), "): output shape ",
                         t.shape.toString(), " is implausible (over 2^40 elements or negative)");
      count *= d;
    }
  }
  auto nodeId = static_cast<NodeId>(nodes_.size());
  Node node{std::move(name), kind, std::move(attrs), std::move(inputs), {}};
  for (size_t i = 0; i < outputNames.size(); ++i) {
    values_.push_back(Value{std::move(outputNames[i]), (*types)[i], nodeId, std::nullopt});
    node.outputs.push_back(static_cast<ValueId>(values_.size() - 1));
  }
  nodes_.push_back(std::move(node));
  return nodeId;
}

void Graph::bindInput(ValueId input, Tensor data) {
  TUNEC_ASSERT(data.dtype() == value(input).type.dtype && data.shape() == value(input).type.shape,
               "binding " << data.typeString() << " to " << value(input).type.toString());
  std::erase(inputs_, input);
  value(input).constant = std::move(data);
}

std::optional<ValueId> Graph::findValue(const std::string& name) const {
  for (size_t i = values_.size(); i-- > 0;)
    if (values_[i].name == name) return static_cast<ValueId>(i);
  return std::nullopt;
}

void Graph::removeDeadCode() {
  std::vector<bool> live(values_.size(), false);
  for (ValueId v : outputs_) live[static_cast<size_t>(v)] = true;
  std::vector<bool> keepNode(nodes_.size(), false);
  for (size_t n = nodes_.size(); n-- > 0;) {
    for (ValueId o : nodes_[n].outputs) keepNode[n] = keepNode[n] || live[static_cast<size_t>(o)];
    if (!keepNode[n]) continue;
    for (ValueId i : nodes_[n].inputs)
      if (i != kNoValue) live[static_cast<size_t>(i)] = true;
  }
  std::vector<Node> kept;
  for (size_t n = 0; n < nodes_.size(); ++n)
    if (keepNode[n]) kept.push_back(std::move(nodes_[n]));
  nodes_ = std::move(kept);
  for (size_t n = 0; n < nodes_.size(); ++n)
    for (ValueId o : nodes_[n].outputs)
      values_[static_cast<size_t>(o)].producer = static_cast<NodeId>(n);
  // Unused constants keep their slot (ids stay stable) but drop their data.
  for (size_t v = 0; v < values_.size(); ++v)
    if (!live[v] && values_[v].constant) values_[v].constant.reset();
}

} // namespace tunec
