// Fusion planning by mapping type (DNNFusion's table), never by lists of op patterns.
#include "passes/fusion_plan.h"

#include "ir/op_registry.h"
#include "passes/rewriter.h"

namespace tunec::passes {

namespace {

enum class Verdict { Green, Yellow, Red };

struct Cell {
  Verdict verdict;
  MappingType result;
};

// DNNFusion's table (DESIGN.md): row = the group so far, column = the consumer.
Cell table(MappingType first, MappingType then) {
  using M = MappingType;
  constexpr auto G = Verdict::Green, Y = Verdict::Yellow, R = Verdict::Red;
  auto idx = [](M m) { return static_cast<int>(m); };
  // Column order: one-to-one, one-to-many, many-to-many, reorganize, shuffle.
  static const Cell cells[5][5] = {
      /* one-to-one   */ {{G, M::OneToOne},
                          {Y, M::OneToMany},
                          {Y, M::ManyToMany},
                          {G, M::Reorganize},
                          {G, M::Shuffle}},
      /* one-to-many  */
      {{G, M::OneToMany},
       {Y, M::OneToMany},
       {R, M::ManyToMany},
       {Y, M::OneToMany},
       {Y, M::OneToMany}},
      /* many-to-many */
      {{G, M::ManyToMany},
       {Y, M::ManyToMany},
       {R, M::ManyToMany},
       {Y, M::ManyToMany},
       {Y, M::ManyToMany}},
      /* reorganize   */
      {{G, M::Reorganize},
       {Y, M::OneToMany},
       {Y, M::ManyToMany},
       {G, M::Reorganize},
       {G, M::Reorganize}},
      /* shuffle      */
      {{G, M::Shuffle}, {Y, M::OneToMany}, {Y, M::ManyToMany}, {G, M::Reorganize}, {G, M::Shuffle}},
  };
  return cells[idx(first)][idx(then)];
}

bool isReshapeLike(OpKind k) {
  return k == OpKind::Reshape || k == OpKind::Flatten || k == OpKind::Squeeze ||
         k == OpKind::Unsqueeze;
}

// The cheap analysis behind a yellow cell: when does fusing pay without profiling?
// - reshape-like reorganizations are free views, so they always join;
// - a one-to-one op after a one-to-many group is a per-element epilogue;
// - a many-to-many reduction may take a light one-to-one prologue (e.g. Exp before Softmax).
// (An anchor followed by a reduction is red in the table: fusing it would need the anchor's
// tile to span the reduced axis, which only codegen can decide from the config.)
bool yellowPays(MappingType group, const Node& consumer, std::string& reason) {
  MappingType m = opInfo(consumer.kind).mapping;
  if (isReshapeLike(consumer.kind)) return true;
  if (m == MappingType::OneToOne) return true;
  if (m == MappingType::ManyToMany && group == MappingType::OneToOne) return true;
  reason = std::string(mappingTypeName(group)) + " followed by " + std::string(mappingTypeName(m)) +
           " does not pay without a profile";
  return false;
}

} // namespace

bool isAnchor(OpKind kind) {
  return kind == OpKind::Conv || kind == OpKind::Gemm || kind == OpKind::MatMul;
}

FusionPlan planFusion(const Graph& graph) {
  FusionPlan plan;
  plan.kernelOf.assign(graph.nodes().size(), -1);
  std::vector<int> uses = useCounts(graph);
  std::vector<std::vector<NodeId>> consumers(graph.values().size());
  for (size_t n = 0; n < graph.nodes().size(); ++n)
    for (ValueId in : graph.nodes()[n].inputs)
      if (in != kNoValue) consumers[static_cast<size_t>(in)].push_back(static_cast<NodeId>(n));
  std::vector<bool> isOutput(graph.values().size(), false);
  for (ValueId out : graph.outputs()) isOutput[static_cast<size_t>(out)] = true;

  for (size_t start = 0; start < graph.nodes().size(); ++start) {
    if (plan.kernelOf[start] >= 0) continue;
    int k = static_cast<int>(plan.kernels.size());
    FusedKernel kernel;
    const Node& first = graph.nodes()[start];
    kernel.anchor = isAnchor(first.kind) ? static_cast<NodeId>(start) : -1;
    kernel.nodes.push_back(static_cast<NodeId>(start));
    kernel.mapping = opInfo(first.kind).mapping;
    plan.kernelOf[start] = k;
    // Grow along the single consumer of the group's last output.
    NodeId last = static_cast<NodeId>(start);
    while (true) {
      const Node& tail = graph.node(last);
      if (tail.outputs.size() != 1) break;
      ValueId out = tail.outputs[0];
      if (consumers[static_cast<size_t>(out)].empty()) break;
      NodeId next = consumers[static_cast<size_t>(out)].front();
      const Node& consumer = graph.node(next);
      auto boundary = [&](const std::string& why) { plan.boundaries.push_back({last, next, why}); };
      if (uses[static_cast<size_t>(out)] != 1 || isOutput[static_cast<size_t>(out)]) {
        for (NodeId c : consumers[static_cast<size_t>(out)])
          plan.boundaries.push_back({last, c, "the value has several uses"});
        break;
      }
      if (plan.kernelOf[static_cast<size_t>(next)] >= 0) break;
      if (isAnchor(consumer.kind)) {
        boundary(
            kernel.anchor >= 0
                ? "two anchors never fuse"
                : "an anchor starts its own kernel (light producers are not fused as prologues)");
        break;
      }
      // Every other input of the consumer must be ready before this kernel starts.
      bool ready = true;
      for (ValueId in : consumer.inputs) {
        if (in == kNoValue || in == out) continue;
        NodeId p = graph.value(in).producer;
        if (p >= 0 && plan.kernelOf[static_cast<size_t>(p)] == k) ready = false;
        if (p >= 0 && plan.kernelOf[static_cast<size_t>(p)] < 0) ready = false;
      }
      if (!ready) {
        boundary("another input of the consumer is computed after this kernel starts");
        break;
      }
      Cell cell = table(kernel.mapping, opInfo(consumer.kind).mapping);
      std::string why;
      bool fuse = cell.verdict == Verdict::Green ||
                  (cell.verdict == Verdict::Yellow && yellowPays(kernel.mapping, consumer, why));
      if (cell.verdict == Verdict::Red)
        why = "DNNFusion table: " + std::string(mappingTypeName(kernel.mapping)) + " then " +
              std::string(mappingTypeName(opInfo(consumer.kind).mapping)) + " is red";
      if (!fuse) {
        boundary(why);
        break;
      }
      // An anchor's post-ops keep the anchor's many-to-many type; light groups take the table's.
      if (kernel.anchor < 0) kernel.mapping = cell.result;
      kernel.nodes.push_back(next);
      plan.kernelOf[static_cast<size_t>(next)] = k;
      last = next;
    }
    plan.kernels.push_back(std::move(kernel));
  }
  return plan;
}

} // namespace tunec::passes
