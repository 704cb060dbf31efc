// A dynamic batch of independent images (per_image.h).
#include "driver/per_image.h"

#include <algorithm>

namespace tunec::driver {

namespace {

// Whether a value is batched by `symbol` as an image batch: its leading dimension the symbol
// itself, every other dimension static. `batched` is false for a static value.
struct Leading {
  bool batched = false, valid = true;
};
Leading leadingOf(const Shape& shape, const DimExpr& symbol) {
  if (shape.isStatic()) return {};
  bool ok = shape.rank() >= 1 && shape.dim(0).expr == symbol;
  for (int d = 1; ok && d < shape.rank(); ++d) ok = shape.dim(d).isStatic();
  return {true, ok};
}

int64_t normalized(int64_t axis, int rank) {
  return axis < 0 ? axis + rank : axis;
}

// Whether an op with a batched input (its leading axis the images) computes each image alone,
// given that its outputs keep the batch leading (checked apart): false for the ops that
// normalize, accumulate, gather or order along the leading axis.
bool perImage(const Graph& graph, const Node& node) {
  const int rank = graph.value(node.inputs[0]).type.shape.rank();
  if (const auto* reduce = std::get_if<ReduceAttrs>(&node.attrs)) { // ReduceMean, ReduceSum, ...
    const auto& axes = reduce->axes;
    return !axes.empty() && std::none_of(axes.begin(), axes.end(),
                                         [&](int64_t a) { return normalized(a, rank) == 0; });
  }
  switch (node.kind) {
  case OpKind::Softmax:
  case OpKind::LogSoftmax:
  case OpKind::Hardmax: {
    const auto& a = std::get<SoftmaxAttrs>(node.attrs);
    return normalized(a.axis, rank) > 0;
  }
  case OpKind::LayerNormalization:
  case OpKind::RMSNormalization:
    return normalized(std::get<NormAttrs>(node.attrs).axis, rank) > 0;
  case OpKind::ArgMax:
  case OpKind::ArgMin:
    return normalized(std::get<ArgReduceAttrs>(node.attrs).axis, rank) > 0;
  case OpKind::Gather:
  case OpKind::GatherElements:
  case OpKind::Concat:
  case OpKind::Flatten:
    return normalized(std::get<AxisAttrs>(node.attrs).axis, rank) > 0;
  case OpKind::Slice: {
    const auto& a = std::get<SliceAttrs>(node.attrs);
    return !a.startsAtRunTime() && !a.starts.empty() && a.starts[0] == 0 && !a.steps.empty() &&
           a.steps[0] == 1;
  }
  case OpKind::Split:
    return false; // along the leading axis or not, its outputs are checked apart; rare here
  default:
    return true;
  }
}

bool convolutionOrPool(OpKind kind) {
  switch (kind) {
  case OpKind::Conv:
  case OpKind::IntegerConv:
  case OpKind::MaxPool:
  case OpKind::AveragePool:
  case OpKind::LpPool:
  case OpKind::GlobalAveragePool:
  case OpKind::GlobalMaxPool:
    return true;
  default:
    return false;
  }
}

} // namespace

std::optional<ImageBatch> imageBatchOf(const Graph& graph) {
  std::set<std::string> symbols;
  ImageBatch batch;
  for (const Value& v : graph.values())
    for (const Dim& d : v.type.shape.symbolicDims()) {
      for (const std::string& s : d.expr.symbols()) symbols.insert(s);
      if (d.expr.symbols().size() == 1 && d.expr == DimExpr::symbol(d.expr.symbols()[0]))
        batch.min = d.min, batch.max = d.max;
    }
  if (symbols.size() != 1) return std::nullopt;
  batch.symbol = *symbols.begin();
  const DimExpr symbol = DimExpr::symbol(batch.symbol);
  for (const Value& v : graph.values())
    if (!leadingOf(v.type.shape, symbol).valid) return std::nullopt;
  bool heavy = false;
  for (const Node& node : graph.nodes()) {
    heavy = heavy || convolutionOrPool(node.kind);
    bool readsImages = false;
    for (ValueId in : node.inputs)
      readsImages =
          readsImages || (in != kNoValue && leadingOf(graph.value(in).type.shape, symbol).batched);
    if (!readsImages) continue;
    for (ValueId out : node.outputs)
      if (!leadingOf(graph.value(out).type.shape, symbol).batched) return std::nullopt;
    if (!perImage(graph, node)) return std::nullopt;
  }
  if (!heavy) return std::nullopt;
  for (ValueId in : graph.inputs())
    if (leadingOf(graph.value(in).type.shape, symbol).batched)
      batch.inputs.insert(graph.value(in).name);
  for (ValueId out : graph.outputs())
    if (leadingOf(graph.value(out).type.shape, symbol).batched)
      batch.outputs.insert(graph.value(out).name);
  return batch;
}

Status runOncePerImage(rt::ModelPlan& plan, const ImageBatch& batch) {
  if (!plan.symbols.empty() || plan.imageExtent >= 0)
    return makeError("internal: the plan of one image has symbolic dimensions");
  plan.symbols = {{batch.symbol, batch.min, batch.max}};
  plan.extents = {rt::Extent{{rt::ExtentTerm{1, {0}}}}};
  plan.imageExtent = 0; // the arena of one image serves each in turn
  // One image of each batched input and output; the others are read or written whole.
  auto resize = [&](std::vector<rt::IoSpec>& ios, const std::set<std::string>& batched) {
    std::vector<int64_t> strides;
    for (rt::IoSpec& io : ios) {
      const bool images = batched.count(io.name) && !io.shape.empty() && io.shape[0] == 1;
      strides.push_back(images ? io.bytes : 0);
      if (!images) continue;
      io.shape[0] = batch.max;
      io.bytes *= batch.max;
      io.dimExtents.assign(io.shape.size(), -1);
      io.dimExtents[0] = 0;
    }
    return strides;
  };
  const std::vector<int64_t> inputStrides = resize(plan.inputs, batch.inputs);
  const std::vector<int64_t> outputStrides = resize(plan.outputs, batch.outputs);
  for (rt::TensorRef& t : plan.tensors) {
    const auto io = static_cast<size_t>(t.offset);
    switch (t.region) {
    case rt::Region::Input:
      t.imageStride = inputStrides.at(io);
      break;
    case rt::Region::Output:
      t.imageStride = outputStrides.at(io);
      break;
    case rt::Region::Arena:
    case rt::Region::Constant:
      t.imageStride = 0;
      break;
    }
  }
  return {};
}

} // namespace tunec::driver
