// Layout planning by forward propagation in topological order.
#include "passes/layout_plan.h"

#include "ir/op_registry.h"

namespace tunec::passes {

namespace {

// Ops that compute the same thing in NHWC as in NCHW given their inputs in NHWC.
bool layoutAgnostic(const Node& node) {
  switch (node.kind) {
  case OpKind::MaxPool:
  case OpKind::AveragePool:
  case OpKind::GlobalAveragePool:
  case OpKind::GlobalMaxPool:
    return true;
  case OpKind::Concat:
    return std::get<AxisAttrs>(node.attrs).axis == 1;
  default:
    return opInfo(node.kind).mapping == MappingType::OneToOne;
  }
}

// Same bytes in NCHW and NHWC: 4-d with 1x1 spatial size, or a single channel.
bool layoutFree(const Shape& s) {
  return s.rank() == 4 && ((s[2] == 1 && s[3] == 1) || s[1] == 1);
}

} // namespace

Layout nhwcLayout() {
  return Layout{{0, 2, 3, 1}, {}};
}

LayoutPlan planLayouts(const Graph& graph) {
  LayoutPlan plan;
  plan.layouts.assign(graph.values().size(), Layout::plain());
  const Layout nhwc = nhwcLayout();
  auto need = [&](ValueId v, NodeId consumer, const Layout& wanted) {
    const Shape& s = graph.value(v).type.shape;
    if (plan.layouts[static_cast<size_t>(v)] == wanted || layoutFree(s) || graph.value(v).constant)
      return;
    plan.reorders.push_back({v, consumer, wanted});
  };
  for (size_t n = 0; n < graph.nodes().size(); ++n) {
    const Node& node = graph.nodes()[n];
    auto id = static_cast<NodeId>(n);
    Layout out = Layout::plain();
    if (node.kind == OpKind::Conv && graph.value(node.inputs[0]).type.shape.rank() == 4) {
      need(node.inputs[0], id, nhwc);
      out = nhwc;
    } else if (layoutAgnostic(node)) {
      // Follow the first 4-d activation input; other full-size activations must match.
      const Layout* chosen = nullptr;
      for (ValueId in : node.inputs) {
        if (in == kNoValue || graph.value(in).constant || graph.value(in).type.shape.rank() != 4)
          continue;
        if (!chosen)
          chosen = &plan.layouts[static_cast<size_t>(in)];
        else
          need(in, id, *chosen);
      }
      if (chosen) out = *chosen;
    } else {
      for (ValueId in : node.inputs)
        if (in != kNoValue && graph.value(in).type.shape.rank() == 4) need(in, id, Layout::plain());
    }
    for (ValueId o : node.outputs)
      plan.layouts[static_cast<size_t>(o)] =
          graph.value(o).type.shape.rank() == 4 ? out : Layout::plain();
  }
  for (ValueId out : graph.outputs()) need(out, -1, Layout::plain());
  // Model inputs arrive plain; a conv reading one directly was recorded above.
  return plan;
}

} // namespace tunec::passes
