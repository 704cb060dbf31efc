// Graph verifier: every use after its definition and every type as inference says.
#include "ir/verifier.h"

#include "ir/op_registry.h"

namespace tunec {

Status verifyGraph(const Graph& graph) {
  std::vector<bool> defined(graph.values().size(), false);
  for (ValueId v : graph.inputs()) defined[static_cast<size_t>(v)] = true;
  for (size_t v = 0; v < graph.values().size(); ++v)
    if (graph.values()[v].constant) defined[v] = true;
  for (size_t n = 0; n < graph.nodes().size(); ++n) {
    const Node& node = graph.nodes()[n];
    std::string where = "node '" + node.name + "' (" + std::string(opName(node.kind)) + ")";
    if (node.attrs.index() == std::variant_npos) return makeError(where, ": has no attributes");
    for (ValueId in : node.inputs) {
      if (in == kNoValue) continue;
      if (in < 0 || static_cast<size_t>(in) >= defined.size())
        return makeError(where, ": input id ", in, " does not exist");
      if (!defined[static_cast<size_t>(in)])
        return makeError(where, ": reads '", graph.value(in).name, "' before it is defined");
    }
    auto types = inferNodeTypes(graph, node.kind, node.attrs, node.inputs,
                                static_cast<int>(node.outputs.size()));
    if (!types) return types.error().withContext(where);
    for (size_t i = 0; i < node.outputs.size(); ++i) {
      const Value& out = graph.value(node.outputs[i]);
      if (out.producer != static_cast<NodeId>(n))
        return makeError(where, ": output '", out.name, "' names another producer");
      TensorType expected = (*types)[i];
      expected.layout = out.type.layout; // layouts are assigned by passes, not inferred
      if (!(expected == out.type))
        return makeError(where, ": output '", out.name, "' has type ", out.type.toString(),
                         " but inference gives ", expected.toString());
      defined[static_cast<size_t>(node.outputs[i])] = true;
    }
  }
  for (ValueId out : graph.outputs())
    if (!defined[static_cast<size_t>(out)])
      return makeError("graph output '", graph.value(out).name, "' is never defined");
  return {};
}

} // namespace tunec
