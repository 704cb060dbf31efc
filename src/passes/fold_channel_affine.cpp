// Folds a per-output-channel constant Mul or Add after a Conv into the Conv's weights and bias
// (the scale-and-shift form of a batch norm, or a constant residual bias), so that the
// anchor's epilogue has one op less.
#include "passes/passes.h"
#include "passes/pattern.h"
#include "passes/rewriter.h"

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

} // namespace

Expected<Graph> foldChannelAffine(const Graph& graph) {
  std::vector<int> uses = useCounts(graph);
  GraphRewriter rw(graph);
  for (const Node& node : graph.nodes()) {
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
