// Quantization carried through the ops that only select, move or max values, as exporters leave
// it: a fake-quant export (PyTorch's QAT modules, NNCF, pytorch-quantization) quantizes each
// layer's input once, where it is computed, so a pooled or reshaped value reaches the next
// quantized layer as f32, with no QuantizeLinear of its own. Three rewrites, each exact:
//
// 1. op(DequantizeLinear(q, s, z), ...) = DequantizeLinear(op(q, ...), s, z) for MaxPool,
//    GlobalMaxPool, Reshape, Flatten, Squeeze, Unsqueeze, Transpose, Slice, Identity, and a
//    Concat whose inputs all share one quantization (per-tensor constant s > 0 and z):
//    dequantizing is elementwise and monotone increasing, so it commutes with selecting, moving
//    and taking maxima. The op runs on the integers, and the layer after it reads a
//    DequantizeLinear, which lower-quantized-layers makes an int8 kernel (as ONNX Runtime's QDQ
//    propagation does, without its QuantizeLinear/DequantizeLinear pair).
// 2. QuantizeLinear(DequantizeLinear(v, s, z), s, z) = v for the same per-tensor s (a normal
//    number below 1e30), z and type: (v - z) s / s is within 255 * 2^-22 of v - z, far from a
//    rounding boundary. What rewrite 1 leaves before a converted export's own QuantizeLinear.
// 3. Clip(QuantizeLinear(x, s, z), lo, hi) = QuantizeLinear(Clip(x, (lo - z) s, (hi - z) s), s,
//    z): PyTorch exports a fake quantization of a narrower range than its type (fbgemm's
//    reduce_range, 0..127 in u8) as a Clip of the integers. Quantizing is monotone, so it
//    commutes with the clip, and Q((hi - z) s) = hi by the argument of rule 2. The f32 clip
//    then fuses into the layer's epilogue like a ReLU6; NaN quantizes to z either way when lo
//    <= z <= hi (required).
// 4. Relu(DequantizeLinear(QuantizeLinear(x, s, z), s, z)) = DequantizeLinear(QuantizeLinear(
//    Relu(x), s, z), s, z): a fake quantization between a layer and its ReLU (a model quantized
//    without fusing them). Quantizing is monotone and Q(0) = z, so Q(Relu(x)) = max(Q(x), z),
//    whose dequantization is max(DQ(Q(x)), 0). The ReLU fuses into the layer before, and the
//    layer after reads a DequantizeLinear again.
#include "passes/passes.h"
#include "passes/pattern.h"
#include "passes/rewriter.h"

#include <cmath>
#include <optional>

namespace tunec::passes {

namespace {

class Propagation {
public:
  explicit Propagation(const Graph& graph) : graph_(graph), rw_(graph) {}

  Expected<Graph> run() {
    for (const Node& node : graph_.nodes()) {
      bool done = false;
      for (auto rule :
           {&Propagation::moveDequantization, &Propagation::cancelRoundTrip,
            &Propagation::clipBeforeQuantization, &Propagation::reluBeforeQuantization}) {
        TUNEC_ASSIGN_OR_RETURN(done, (this->*rule)(node));
        if (done) break;
      }
      if (!done) TUNEC_TRY(rw_.copy(node));
    }
    return rw_.finish();
  }

private:
  // The DequantizeLinear of the new graph producing source value `v`, or nullptr.
  const Node* detensorQuantization(ValueId v) const {
    return producerOf(rw_.target(), rw_.map(v), OpKind::DequantizeLinear);
  }

  // Rule 1.
  Expected<bool> moveDequantization(const Node& node) {
    const size_t data = selectedInputs(node);
    if (data == 0) return false;
    const Node* first = detensorQuantization(node.inputs[0]);
    if (!first) return false;
    const auto quantization = tensorQuantization(rw_.target(), *first);
    if (!quantization) return false;
    std::vector<ValueId> inputs;
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      if (i >= data) {
        inputs.push_back(rw_.map(node.inputs[i]));
        continue;
      }
      const Node* dq = detensorQuantization(node.inputs[i]);
      if (!dq || tensorQuantization(rw_.target(), *dq) != quantization ||
          rw_.target().value(dq->inputs[0]).type.dtype !=
              rw_.target().value(first->inputs[0]).type.dtype)
        return false;
      inputs.push_back(dq->inputs[0]);
    }
    const ValueId scale = first->inputs[1], zero = first->inputs[2];
    const std::string& name = graph_.value(node.outputs[0]).name;
    TUNEC_ASSIGN_OR_RETURN(
        auto moved, rw_.add(node.name, node.kind, node.attrs, inputs, {name + "/quantized"}));
    TUNEC_ASSIGN_OR_RETURN(auto dequantized,
                           rw_.add(node.name + "/dequantize", OpKind::DequantizeLinear,
                                   QuantAttrs{0}, {moved[0], scale, zero}, {name}));
    rw_.replace(node.outputs[0], dequantized[0]);
    return true;
  }

  // Rule 2.
  Expected<bool> cancelRoundTrip(const Node& node) {
    if (node.kind != OpKind::QuantizeLinear) return false;
    const Node* dq = detensorQuantization(node.inputs[0]);
    if (!dq) return false;
    const auto outer = tensorQuantization(graph_, node),
               inner = tensorQuantization(rw_.target(), *dq);
    if (!outer || outer != inner ||
        rw_.target().value(dq->inputs[0]).type.dtype != graph_.value(node.outputs[0]).type.dtype)
      return false;
    rw_.replace(node.outputs[0], dq->inputs[0]);
    return true;
  }

  // Rule 3.
  Expected<bool> clipBeforeQuantization(const Node& node) {
    if (node.kind != OpKind::Clip || node.inputs.size() != 1) return false;
    const Node* q = producerOf(graph_, node.inputs[0], OpKind::QuantizeLinear);
    if (!q) return false;
    const auto quantization = tensorQuantization(graph_, *q);
    if (!quantization) return false;
    const auto [lo, hi] = std::get<ClipAttrs>(node.attrs);
    const auto zero = static_cast<double>(quantization->zero);
    if (!(lo <= zero && zero <= hi)) return false;
    auto bound = [&](double b) {
      return std::isinf(b)
                 ? b
                 : static_cast<double>(static_cast<float>((b - zero) * quantization->scale));
    };
    const std::string& name = graph_.value(node.outputs[0]).name;
    TUNEC_ASSIGN_OR_RETURN(auto clipped,
                           rw_.add(node.name, OpKind::Clip, ClipAttrs{bound(lo), bound(hi)},
                                   {rw_.map(q->inputs[0])}, {name + "/f32"}));
    TUNEC_ASSIGN_OR_RETURN(auto quantized,
                           rw_.add(q->name + "/clipped", OpKind::QuantizeLinear, q->attrs,
                                   {clipped[0], rw_.map(q->inputs[1]), rw_.map(q->inputs[2])},
                                   {name}));
    rw_.replace(node.outputs[0], quantized[0]);
    return true;
  }

  // Rule 4.
  Expected<bool> reluBeforeQuantization(const Node& node) {
    if (node.kind != OpKind::Relu) return false;
    const Node* dq = detensorQuantization(node.inputs[0]);
    const Node* q = dq ? producerOf(rw_.target(), dq->inputs[0], OpKind::QuantizeLinear) : nullptr;
    if (!q) return false;
    const auto quantization = tensorQuantization(rw_.target(), *dq);
    if (!quantization || quantization != tensorQuantization(rw_.target(), *q)) return false;
    // Copied: adding nodes to the new graph moves its nodes.
    const ValueId x = q->inputs[0], qs = q->inputs[1], qz = q->inputs[2];
    const ValueId ds = dq->inputs[1], dz = dq->inputs[2];
    const OpAttrs qAttrs = q->attrs, dqAttrs = dq->attrs;
    const std::string& name = graph_.value(node.outputs[0]).name;
    TUNEC_ASSIGN_OR_RETURN(auto relu,
                           rw_.add(node.name, OpKind::Relu, NoAttrs{}, {x}, {name + "/f32"}));
    TUNEC_ASSIGN_OR_RETURN(auto quantized,
                           rw_.add(node.name + "/quantize", OpKind::QuantizeLinear, qAttrs,
                                   {relu[0], qs, qz}, {name + "/quantized"}));
    TUNEC_ASSIGN_OR_RETURN(auto dequantized,
                           rw_.add(node.name + "/dequantize", OpKind::DequantizeLinear, dqAttrs,
                                   {quantized[0], ds, dz}, {name}));
    rw_.replace(node.outputs[0], dequantized[0]);
    return true;
  }

  const Graph& graph_;
  GraphRewriter rw_;
};

} // namespace

Expected<Graph> propagateQuantization(const Graph& graph) {
  return Propagation(graph).run();
}

} // namespace tunec::passes
