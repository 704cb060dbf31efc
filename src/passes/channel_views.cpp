// planChannelViews: which Concat inputs are written in place and which channel Slices are read
// in place (passes/channel_views.h).
#include "passes/channel_views.h"

#include "ir/op_registry.h"
#include "passes/pattern.h"
#include "passes/rewriter.h"

namespace tunec::passes {

namespace {

bool channelSlice(const Graph& graph, const Node& n) {
  const Value& x = graph.value(n.inputs[0]);
  return n.kind == OpKind::Slice && x.type.shape.rank() == 4 && x.type.dtype == DType::F32 &&
         slicedRange(graph, n, 1);
}

// The value a fused kernel's generated code writes last (its result).
ValueId kernelResult(const Graph& graph, const FusedKernel& k) {
  return graph.node(k.nodes[k.nodesInKernel() - 1]).outputs[0];
}

bool writesInPlace(const Graph& graph, const FusionPlan& fusion, ValueId v) {
  NodeId p = graph.value(v).producer;
  if (p < 0) return false;
  const Node& producer = graph.node(p);
  if (producer.kind == OpKind::Gather)
    return graph.value(producer.inputs[0]).type.shape.rank() == 4 &&
           graph.value(v).type.dtype == DType::F32 && constantGatherIndices(graph, producer, 1);
  const FusedKernel& k =
      fusion.kernels[static_cast<size_t>(fusion.kernelOf[static_cast<size_t>(p)])];
  if (k.anchor < 0 || k.templ != TemplateKind::Conv2d || kernelResult(graph, k) != v ||
      graph.value(v).type.dtype != DType::F32 || k.nhwcView >= 0 || k.plainView >= 0 ||
      k.nodesInKernel() != k.nodes.size())
    return false;
  for (const EpilogueStep& s : k.epilogue)
    if (readsAddend(s.op.kind)) return false;
  return true;
}

// A Conv that the conv2d template runs as its kernel's anchor, reading `v` as its input with
// no padding and no prologue.
bool readsInPlace(const Graph& graph, const FusionPlan& fusion, NodeId reader, ValueId v) {
  const Node& n = graph.node(reader);
  const FusedKernel& k =
      fusion.kernels[static_cast<size_t>(fusion.kernelOf[static_cast<size_t>(reader)])];
  if (n.kind != OpKind::Conv || k.anchor != reader || k.templ != TemplateKind::Conv2d ||
      k.prologue >= 0 || n.inputs[0] != v)
    return false;
  for (size_t i = 1; i < n.inputs.size(); ++i)
    if (n.inputs[i] == v) return false;
  for (int64_t pad : std::get<ConvAttrs>(n.attrs).pads)
    if (pad) return false;
  return true;
}

} // namespace

ChannelViews planChannelViews(const Graph& graph, const FusionPlan& fusion) {
  ChannelViews views;
  std::vector<int> uses = useCounts(graph);
  std::vector<std::vector<NodeId>> readers = readersOf(graph);
  for (size_t n = 0; n < graph.nodes().size(); ++n) {
    const Node& node = graph.nodes()[n];
    auto id = static_cast<NodeId>(n);
    if (node.kind == OpKind::Concat) {
      const Value& y = graph.value(node.outputs[0]);
      auto axis = normalizeAxis(std::get<AxisAttrs>(node.attrs).axis, y.type.shape.rank());
      bool output = std::find(graph.outputs().begin(), graph.outputs().end(), node.outputs[0]) !=
                    graph.outputs().end();
      if (y.type.shape.rank() != 4 || !axis || *axis != 1 || output || y.type.dtype != DType::F32)
        continue;
      views.concats.insert(id);
      int64_t offset = 0;
      for (ValueId in : node.inputs) {
        if (uses[static_cast<size_t>(in)] == 1 && writesInPlace(graph, fusion, in))
          views.writtenInPlace[in] = {id, offset};
        offset += graph.value(in).type.shape[1];
      }
    } else if (channelSlice(graph, node)) {
      const std::vector<NodeId>& r = readers[static_cast<size_t>(node.outputs[0])];
      bool all =
          !r.empty() && uses[static_cast<size_t>(node.outputs[0])] == static_cast<int>(r.size());
      for (NodeId reader : r) all = all && readsInPlace(graph, fusion, reader, node.outputs[0]);
      if (all) views.slices.insert(id);
    }
  }
  return views;
}

} // namespace tunec::passes
