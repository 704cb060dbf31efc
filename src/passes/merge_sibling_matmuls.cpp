// Sibling matmuls: MatMuls of one input by constant weights of one shape (attention's Q, K and
// V projections; Inception-style 1x1 branches) become one MatMul over the concatenated weights
// (and biases), whose output a Split along the last axis hands back as the original values. The
// input is read once, and the driver writes each part as its own dense tensor (split C).
#include "passes/passes.h"
#include "passes/pattern.h"
#include "passes/rewriter.h"

#include <cstring>
#include <map>
#include <set>

namespace tunec::passes {

namespace {

struct Sibling {
  NodeId matmul;
  NodeId bias = -1;      ///< the Add of a constant bias vector after it, if any
  ValueId result;        ///< the value the group hands back: the Add's output, or the MatMul's
  const Tensor* weights; ///< [k, n]
  const Tensor* biasData = nullptr;
};

// A MatMul of `a` by a constant f32 [k, n] B, with the bias Add that alone reads its output.
std::optional<Sibling> siblingOf(const Graph& g, NodeId id, const std::vector<int>& uses,
                                 const std::vector<NodeId>& onlyReader) {
  const Node& n = g.node(id);
  if (n.kind != OpKind::MatMul || n.inputs.size() != 2) return std::nullopt;
  const Value& a = g.value(n.inputs[0]);
  const Value& b = g.value(n.inputs[1]);
  // A symbolic A stays unmerged: a split of C at a run-time M is not lowered yet.
  if (a.constant || a.type.dtype != DType::F32 || a.type.shape.rank() < 2 || !b.constant ||
      b.type.dtype != DType::F32 || b.type.shape.rank() != 2 || !a.type.shape.isStatic())
    return std::nullopt;
  Sibling s{id, -1, n.outputs[0], &*b.constant};
  ValueId y = n.outputs[0];
  NodeId reader = uses[static_cast<size_t>(y)] == 1 ? onlyReader[static_cast<size_t>(y)] : -1;
  if (reader >= 0 && g.node(reader).kind == OpKind::Add) {
    ValueId other = otherInput(g.node(reader), y);
    const Value& c = g.value(other);
    if (other != kNoValue && c.constant && c.type.dtype == DType::F32 && c.type.shape.rank() == 1 &&
        c.type.shape[0] == b.type.shape[1]) {
      s.bias = reader;
      s.result = g.node(reader).outputs[0];
      s.biasData = &*c.constant;
    }
  }
  return s;
}

} // namespace

Expected<Graph> mergeSiblingMatmuls(const Graph& graph) {
  std::vector<int> uses = useCounts(graph);
  std::vector<NodeId> onlyReader(graph.values().size(), -1);
  for (size_t n = 0; n < graph.nodes().size(); ++n)
    for (ValueId in : graph.nodes()[n].inputs)
      if (in != kNoValue) onlyReader[static_cast<size_t>(in)] = static_cast<NodeId>(n);
  // Groups by input, weight shape and whether a bias follows.
  std::map<std::tuple<ValueId, int64_t, int64_t, bool>, std::vector<Sibling>> groups;
  for (size_t n = 0; n < graph.nodes().size(); ++n)
    if (auto s = siblingOf(graph, static_cast<NodeId>(n), uses, onlyReader)) {
      const Shape& w = s->weights->shape();
      groups[{graph.node(s->matmul).inputs[0], w[0], w[1], s->bias >= 0}].push_back(*s);
    }
  std::map<NodeId, const std::vector<Sibling>*> firstOf;
  std::set<NodeId> merged;
  for (const auto& [key, group] : groups) {
    if (group.size() < 2) continue;
    firstOf[group.front().matmul] = &group;
    for (const Sibling& s : group) {
      merged.insert(s.matmul);
      if (s.bias >= 0) merged.insert(s.bias);
    }
  }
  if (firstOf.empty()) return graph;
  GraphRewriter rw(graph);
  for (size_t n = 0; n < graph.nodes().size(); ++n) {
    const Node& node = graph.nodes()[n];
    auto first = firstOf.find(static_cast<NodeId>(n));
    if (first == firstOf.end()) {
      if (!merged.count(static_cast<NodeId>(n))) TUNEC_TRY(rw.copy(node));
      continue;
    }
    const std::vector<Sibling>& group = *first->second;
    int64_t k = group.front().weights->shape()[0], part = group.front().weights->shape()[1];
    int64_t parts = static_cast<int64_t>(group.size()), width = part * parts;
    Tensor weights(DType::F32, Shape{k, width});
    Tensor bias(DType::F32, Shape{width});
    for (int64_t p = 0; p < parts; ++p) {
      const Sibling& s = group[static_cast<size_t>(p)];
      for (int64_t r = 0; r < k; ++r)
        std::memcpy(weights.dataAs<float>() + r * width + p * part,
                    s.weights->dataAs<float>() + r * part, static_cast<size_t>(part) * 4);
      if (s.biasData)
        std::memcpy(bias.dataAs<float>() + p * part, s.biasData->dataAs<float>(),
                    static_cast<size_t>(part) * 4);
    }
    std::string name = node.name + ".merged";
    ValueId a = rw.map(node.inputs[0]);
    TUNEC_ASSIGN_OR_RETURN(auto y, rw.add(name, OpKind::MatMul, NoAttrs{},
                                          {a, rw.constant(name + ".weights", std::move(weights))},
                                          {name + "_output"}));
    if (group.front().bias >= 0) {
      TUNEC_ASSIGN_OR_RETURN(y, rw.add(name + ".bias", OpKind::Add, NoAttrs{},
                                       {y[0], rw.constant(name + ".bias_data", std::move(bias))},
                                       {name + "_biased"}));
    }
    std::vector<std::string> names;
    for (const Sibling& s : group) names.push_back(graph.value(s.result).name);
    int64_t axis = graph.value(node.inputs[0]).type.shape.rank() - 1;
    TUNEC_ASSIGN_OR_RETURN(auto outs,
                           rw.add(name + ".split", OpKind::Split,
                                  SplitAttrs{axis, std::vector<int64_t>(group.size(), part)},
                                  {y[0]}, names));
    for (size_t p = 0; p < group.size(); ++p) rw.replace(group[p].result, outs[p]);
  }
  return rw.finish();
}

} // namespace tunec::passes
