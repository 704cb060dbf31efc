// Folds a per-output-channel constant Mul or Add after a Conv into the Conv's weights and bias
// (the scale-and-shift form of a batch norm, or a constant residual bias), so that the
// anchor's epilogue has one op less. After an int8 convolution, whose weights are integers, a
// per-channel Add b after its (sums + k) x m folds into the shift instead: (sums + k + b / m) x
// m, one f32 rounding of its own (m != 0 and finite on every channel, else it stays): a
// fake-quant export's batch norm after the convolution (the kernel's epilogue reads one shift).
#include "passes/passes.h"
#include "passes/pattern.h"
#include "passes/rewriter.h"

#include <cmath>
#include <optional>

namespace tunec::passes {

namespace {

// The per-channel values of a constant that broadcasts against N x OC x H x W only along the
// channel axis (or is a scalar); empty when it does not.
std::vector<double> perChannel(const Tensor& c, int64_t channels, int outputRank) {
  const auto& d = c.shape().dims();
  if (c.shape().rank() > outputRank) return {};
  std::vector<int64_t> aligned(static_cast<size_t>(outputRank - c.shape().rank()), 1);
  aligned.insert(aligned.end(), d.begin(), d.end());
  for (size_t i = 0; i < aligned.size(); ++i)
    if (i != 1 && aligned[i] != 1) return {};
  if (aligned.size() > 1 && aligned[1] != 1 && aligned[1] != channels) return {};
  std::vector<double> values(static_cast<size_t>(channels));
  bool broadcast = c.numel() == 1;
  for (int64_t ch = 0; ch < channels; ++ch)
    values[static_cast<size_t>(ch)] = c.getDouble(broadcast ? 0 : ch);
  return values;
}

// The constant input of a binary node of the new graph and its other input, or nullopt.
std::optional<std::pair<const Tensor*, ValueId>> constantOperand(const GraphRewriter& rw,
                                                                 const Node* n) {
  if (!n || n->inputs.size() != 2) return std::nullopt;
  for (int side = 0; side < 2; ++side)
    if (const Tensor* c = rw.constantOf(n->inputs[static_cast<size_t>(side)]))
      return std::pair{c, n->inputs[static_cast<size_t>(1 - side)]};
  return std::nullopt;
}

// Add(Mul(Add(IntegerConv, k), m), b) -> Mul(Add(IntegerConv, k + b / m), m), per channel.
Expected<bool> foldShiftAfterIntegerConv(const Graph& graph, const std::vector<int>& uses,
                                         GraphRewriter& rw, const Node& node) {
  if (node.kind != OpKind::Add) return false;
  const Node* mul = nullptr;
  ValueId bValue = kNoValue;
  for (int side = 0; side < 2 && !mul; ++side) {
    const ValueId x = node.inputs[static_cast<size_t>(side)];
    bValue = node.inputs[static_cast<size_t>(1 - side)];
    if (uses[static_cast<size_t>(x)] == 1 && rw.constantOf(rw.map(bValue)))
      mul = producerOf(rw.target(), rw.map(x), OpKind::Mul);
  }
  const auto scale = constantOperand(rw, mul);
  const Node* shift = scale ? producerOf(rw.target(), scale->second, OpKind::Add) : nullptr;
  const auto k = constantOperand(rw, shift);
  const Node* conv = k ? producerOf(rw.target(), k->second, OpKind::IntegerConv) : nullptr;
  if (!conv) return false;
  const TensorType& type = graph.value(node.outputs[0]).type;
  if (type.shape.rank() < 2 || !(rw.target().value(mul->outputs[0]).type == type)) return false;
  const int64_t channels = type.shape[1];
  const int rank = type.shape.rank();
  const std::vector<double> b = perChannel(*rw.constantOf(rw.map(bValue)), channels, rank),
                            m = perChannel(*scale->first, channels, rank),
                            kv = perChannel(*k->first, channels, rank);
  if (b.empty() || m.empty() || kv.empty()) return false;
  std::vector<int64_t> dims(static_cast<size_t>(rank), 1); // 1 x C x 1 x 1
  dims[1] = channels;
  Tensor shifted(DType::F32, Shape(dims)), scaled(DType::F32, Shape(dims));
  for (size_t ch = 0; ch < static_cast<size_t>(channels); ++ch) {
    if (!std::isfinite(m[ch]) || m[ch] == 0) return false;
    shifted.setDouble(static_cast<int64_t>(ch), kv[ch] + b[ch] / m[ch]);
    scaled.setDouble(static_cast<int64_t>(ch), m[ch]);
  }
  const ValueId sums = k->second;
  const std::string name = graph.value(node.outputs[0]).name;
  TUNEC_ASSIGN_OR_RETURN(auto added,
                         rw.add(node.name + "/shift", OpKind::Add, NoAttrs{},
                                {sums, rw.constant(node.name + ".shift", std::move(shifted))},
                                {name + "/shifted"}));
  TUNEC_ASSIGN_OR_RETURN(
      auto out, rw.add(node.name, OpKind::Mul, NoAttrs{},
                       {added[0], rw.constant(node.name + ".scale", std::move(scaled))}, {name}));
  rw.replace(node.outputs[0], out[0]);
  return true;
}

} // namespace

Expected<Graph> foldChannelAffine(const Graph& graph) {
  std::vector<int> uses = useCounts(graph);
  GraphRewriter rw(graph);
  for (const Node& node : graph.nodes()) {
    TUNEC_ASSIGN_OR_RETURN(bool folded, foldShiftAfterIntegerConv(graph, uses, rw, node));
    if (folded) continue;
    bool affine = node.kind == OpKind::Mul || node.kind == OpKind::Add;
    const Node* conv = nullptr;
    ValueId x = kNoValue, c = kNoValue;
    if (affine)
      for (int side = 0; side < 2 && !conv; ++side) {
        x = node.inputs[static_cast<size_t>(side)];
        c = node.inputs[static_cast<size_t>(1 - side)];
        const Node* p = producerOf(rw.target(), rw.map(x), OpKind::Conv);
        if (p && uses[static_cast<size_t>(x)] == 1 && rw.constantOf(rw.map(c)) &&
            rw.constantOf(p->inputs[1]) &&
            (p->inputs.size() < 3 || p->inputs[2] == kNoValue || rw.constantOf(p->inputs[2])))
          conv = p;
      }
    const Tensor* w = conv ? rw.constantOf(conv->inputs[1]) : nullptr;
    std::vector<double> k;
    if (w && w->dtype() == DType::F32)
      k = perChannel(*rw.constantOf(rw.map(c)), w->shape()[0],
                     graph.value(node.outputs[0]).type.shape.rank());
    if (k.empty() || !(rw.target().value(rw.map(x)).type == graph.value(node.outputs[0]).type)) {
      TUNEC_TRY(rw.copy(node));
      continue;
    }
    int64_t oc = w->shape()[0], per = w->numel() / oc;
    bool hasBias = conv->inputs.size() > 2 && conv->inputs[2] != kNoValue;
    Tensor newW = w->clone(), newB(DType::F32, Shape{oc});
    for (int64_t ch = 0; ch < oc; ++ch) {
      double s = node.kind == OpKind::Mul ? k[static_cast<size_t>(ch)] : 1.0;
      double b = hasBias ? rw.constantOf(conv->inputs[2])->getDouble(ch) : 0.0;
      for (int64_t i = 0; i < per; ++i)
        newW.setDouble(ch * per + i, w->getDouble(ch * per + i) * s);
      newB.setDouble(ch, node.kind == OpKind::Mul ? b * s : b + k[static_cast<size_t>(ch)]);
    }
    ValueId wId = rw.constant(conv->name + ".w." + node.name, std::move(newW));
    ValueId bId = rw.constant(conv->name + ".b." + node.name, std::move(newB));
    TUNEC_ASSIGN_OR_RETURN(std::vector<ValueId> outs, rw.add(conv->name, OpKind::Conv, conv->attrs,
                                                             {conv->inputs[0], wId, bId},
                                                             {graph.value(node.outputs[0]).name}));
    rw.replace(node.outputs[0], outs[0]);
  }
  return rw.finish();
}

} // namespace tunec::passes
