// GraphRewriter: copy-based graph rewriting with value mapping.
#include "passes/rewriter.h"

namespace tunec::passes {

GraphRewriter::GraphRewriter(const Graph& source) : source_(source) {
  for (ValueId in : source.inputs())
    mapping_[in] = graph_.addInput(source.value(in).name, source.value(in).type);
  for (size_t v = 0; v < source.values().size(); ++v) {
    const Value& value = source.values()[v];
    if (value.constant)
      mapping_[static_cast<ValueId>(v)] = graph_.addConstant(value.name, *value.constant);
  }
}

ValueId GraphRewriter::map(ValueId source) const {
  if (source == kNoValue) return kNoValue;
  auto it = mapping_.find(source);
  TUNEC_ASSERT(it != mapping_.end(),
               "value '" << source_.value(source).name << "' used before it was rewritten");
  return it->second;
}

Status GraphRewriter::copy(const Node& node) {
  std::vector<ValueId> inputs;
  for (ValueId in : node.inputs) inputs.push_back(map(in));
  std::vector<std::string> names;
  for (ValueId out : node.outputs) names.push_back(source_.value(out).name);
  TUNEC_ASSIGN_OR_RETURN(std::vector<ValueId> outs,
                         add(node.name, node.kind, node.attrs, inputs, names));
  for (size_t i = 0; i < outs.size(); ++i) mapping_[node.outputs[i]] = outs[i];
  return {};
}

Expected<std::vector<ValueId>> GraphRewriter::add(std::string name, OpKind kind, OpAttrs attrs,
                                                  std::vector<ValueId> inputs,
                                                  std::vector<std::string> outputNames) {
  TUNEC_ASSIGN_OR_RETURN(NodeId id, graph_.addNode(std::move(name), kind, std::move(attrs),
                                                   std::move(inputs), std::move(outputNames)));
  return graph_.node(id).outputs;
}

const Tensor* GraphRewriter::constantOf(ValueId value) const {
  if (value == kNoValue) return nullptr;
  const Value& v = graph_.value(value);
  return v.constant ? &*v.constant : nullptr;
}

Graph GraphRewriter::finish() {
  for (size_t i = 0; i < source_.outputs().size(); ++i)
    graph_.addOutput(map(source_.outputs()[i]), source_.outputName(i));
  graph_.removeDeadCode();
  return std::move(graph_);
}

Expected<Graph> replaceMatches(const Graph& graph, const std::map<NodeId, Replacement>& roots,
                               const std::set<NodeId>& interior, const std::string& suffix) {
  GraphRewriter rw(graph);
  for (size_t n = 0; n < graph.nodes().size(); ++n) {
    const Node& node = graph.nodes()[n];
    if (interior.count(static_cast<NodeId>(n))) continue;
    auto root = roots.find(static_cast<NodeId>(n));
    if (root == roots.end()) {
      TUNEC_TRY(rw.copy(node));
      continue;
    }
    std::vector<ValueId> inputs;
    for (ValueId in : root->second.inputs) inputs.push_back(rw.map(in));
    for (size_t c = 0; c < root->second.constants.size(); ++c)
      inputs.push_back(
          rw.constant(node.name + suffix + ".c" + std::to_string(c), root->second.constants[c]));
    TUNEC_ASSIGN_OR_RETURN(std::vector<ValueId> outs,
                           rw.add(node.name + suffix, root->second.kind, root->second.attrs, inputs,
                                  {graph.value(node.outputs[0]).name}));
    rw.replace(node.outputs[0], outs[0]);
  }
  return rw.finish();
}

std::vector<int> useCounts(const Graph& graph) {
  std::vector<int> uses(graph.values().size(), 0);
  for (const Node& node : graph.nodes())
    for (ValueId in : node.inputs)
      if (in != kNoValue) ++uses[static_cast<size_t>(in)];
  for (ValueId out : graph.outputs()) ++uses[static_cast<size_t>(out)];
  return uses;
}

std::vector<std::vector<NodeId>> readersOf(const Graph& graph) {
  std::vector<std::vector<NodeId>> readers(graph.values().size());
  for (size_t n = 0; n < graph.nodes().size(); ++n)
    for (ValueId in : graph.nodes()[n].inputs)
      if (in != kNoValue) readers[static_cast<size_t>(in)].push_back(static_cast<NodeId>(n));
  return readers;
}

} // namespace tunec::passes
