// Algebraic simplification by mathematical properties (DNNFusion): identities (x*1, x+0, x-0,
// x/1, Identity, Dropout, a Cast to the type it has or back through an exact Cast), Sub/Div by a
// constant turned into Add/Mul (so that later passes see one commutative op), constants gathered by
// associativity ((x+c1)+c2, (x*c1)*c2), double transposes composed, reshape chains collapsed.
#include "ir/op_registry.h"
#include "passes/passes.h"
#include "passes/pattern.h"
#include "passes/rewriter.h"
#include "reference/reference.h"

#include <functional>
#include <set>

namespace tunec::passes {

namespace {

bool allEqual(const Tensor& t, double v) {
  for (int64_t i = 0; i < t.numel(); ++i)
    if (t.getDouble(i) != v) return false;
  return true;
}

// Evaluates `kind` elementwise on two constants (numpy broadcasting), with the reference op.
Expected<Tensor> combine(OpKind kind, const Tensor& a, const Tensor& b) {
  TUNEC_ASSIGN_OR_RETURN(Shape shape, broadcastShapes(a.shape(), b.shape()));
  Node node{"combine", kind, NoAttrs{}, {}, {}};
  Tensor out(a.dtype(), shape);
  const Tensor* in[2] = {&a, &b};
  TUNEC_TRY(runReferenceNode(node, in, std::span<Tensor>(&out, 1)));
  return out;
}

Tensor mapValues(const Tensor& t, const std::function<double(double)>& f) {
  Tensor out(t.dtype(), t.shape());
  for (int64_t i = 0; i < t.numel(); ++i) out.setDouble(i, f(t.getDouble(i)));
  return out;
}

class Simplifier {
public:
  explicit Simplifier(const Graph& graph) : graph_(graph), rw_(graph) {
    for (const Node& n : graph.nodes())
      if (n.kind == OpKind::QuantizeLinear && n.inputs.size() > 1) quantScales_.insert(n.inputs[1]);
  }

  Expected<Graph> run() {
    for (const Node& node : graph_.nodes()) TUNEC_TRY(visit(node));
    return rw_.finish();
  }

private:
  const Graph& graph_;
  GraphRewriter rw_;
  /// Values a QuantizeLinear divides by: their rounding decides codes (DynamicQuantizeLinear's
  /// range / 255), so x / c stays a division there (x * (1/c) rounds otherwise).
  std::set<ValueId> quantScales_;

  const Graph& target() const { return rw_.target(); }
  bool sameType(ValueId newValue, ValueId sourceOut) const {
    return target().value(newValue).type == graph_.value(sourceOut).type;
  }

  Status emit(const Node& node, OpKind kind, OpAttrs attrs, std::vector<ValueId> inputs) {
    TUNEC_ASSIGN_OR_RETURN(std::vector<ValueId> outs,
                           rw_.add(node.name, kind, std::move(attrs), std::move(inputs),
                                   {graph_.value(node.outputs[0]).name}));
    rw_.replace(node.outputs[0], outs[0]);
    return {};
  }

  Status visit(const Node& node) {
    std::vector<ValueId> in;
    for (ValueId v : node.inputs) in.push_back(rw_.map(v));
    ValueId out = node.outputs.empty() ? kNoValue : node.outputs[0];
    switch (node.kind) {
    case OpKind::Identity:
    case OpKind::Dropout:
      rw_.replace(out, in[0]);
      return {};
    case OpKind::Cast: { // to the type it has (PyTorch's quantized export casts u8 to u8)
      const DType to = std::get<CastAttrs>(node.attrs).to;
      if (target().value(in[0]).type.dtype == to) {
        rw_.replace(out, in[0]);
        return {};
      }
      // Back to the type of an exact Cast's input (an integer product's f32 form cast to i32,
      // then to f32 by ONNX Runtime's dynamic quantization): the values are that input's.
      if (NodeId p = target().value(in[0]).producer; p >= 0) {
        const Node& inner = target().node(p);
        if (inner.kind == OpKind::Cast && std::get<CastAttrs>(inner.attrs).exact &&
            target().value(inner.inputs[0]).type.dtype == to) {
          rw_.replace(out, inner.inputs[0]);
          return {};
        }
      }
      return rw_.copy(node);
    }
    case OpKind::Add:
    case OpKind::Sub:
    case OpKind::Mul:
    case OpKind::Div:
      return visitArithmetic(node, in);
    case OpKind::Transpose:
      return visitTranspose(node, in);
    case OpKind::Reshape:
    case OpKind::Flatten:
    case OpKind::Squeeze:
    case OpKind::Unsqueeze:
      return visitReshape(node, in);
    default:
      return rw_.copy(node);
    }
  }

  Status visitArithmetic(const Node& node, const std::vector<ValueId>& in) {
    ValueId out = node.outputs[0];
    const Tensor* c0 = rw_.constantOf(in[0]);
    const Tensor* c1 = rw_.constantOf(in[1]);
    if ((c0 != nullptr) == (c1 != nullptr) || !isFloat(graph_.value(out).type.dtype))
      return rw_.copy(node);
    bool commutative = node.kind == OpKind::Add || node.kind == OpKind::Mul;
    if (c0 && !commutative) return rw_.copy(node); // c - x, c / x stay
    if (node.kind == OpKind::Div && quantScales_.count(out)) return rw_.copy(node);
    ValueId x = c0 ? in[1] : in[0];
    const Tensor& c = c0 ? *c0 : *c1;
    double identity = node.kind == OpKind::Add || node.kind == OpKind::Sub ? 0.0 : 1.0;
    if (allEqual(c, identity) && sameType(x, out)) {
      rw_.replace(out, x);
      return {};
    }
    // x - c = x + (-c), x / c = x * (1/c): one commutative op for the passes after this one.
    OpKind kind = node.kind;
    Tensor constant = c;
    if (kind == OpKind::Sub) {
      kind = OpKind::Add;
      constant = mapValues(c, [](double v) { return -v; });
    } else if (kind == OpKind::Div) {
      kind = OpKind::Mul;
      constant = mapValues(c, [](double v) { return 1.0 / v; });
    }
    // (y op c1) op c2 = y op (c1 op c2) when op is Add or Mul.
    if (const Node* inner = producerOf(target(), x, kind)) {
      const Tensor* ic0 = rw_.constantOf(inner->inputs[0]);
      const Tensor* ic1 = rw_.constantOf(inner->inputs[1]);
      if ((ic0 != nullptr) != (ic1 != nullptr)) {
        TUNEC_ASSIGN_OR_RETURN(Tensor merged, combine(kind, ic0 ? *ic0 : *ic1, constant));
        ValueId y = ic0 ? inner->inputs[1] : inner->inputs[0];
        ValueId mergedId = rw_.constant(node.name + ".constant", std::move(merged));
        return emit(node, kind, NoAttrs{}, {y, mergedId});
      }
    }
    if (kind == node.kind) return rw_.copy(node);
    return emit(node, kind, NoAttrs{},
                {x, rw_.constant(node.name + ".constant", std::move(constant))});
  }

  Status visitTranspose(const Node& node, const std::vector<ValueId>& in) {
    const Node* inner = producerOf(target(), in[0], OpKind::Transpose);
    if (!inner) return rw_.copy(node);
    const auto& p1 = std::get<TransposeAttrs>(inner->attrs).perm;
    const auto& p2 = std::get<TransposeAttrs>(node.attrs).perm;
    std::vector<int64_t> composed(p2.size());
    bool identity = true;
    for (size_t i = 0; i < p2.size(); ++i) {
      composed[i] = p1[static_cast<size_t>(p2[i])];
      identity = identity && composed[i] == static_cast<int64_t>(i);
    }
    if (identity) {
      rw_.replace(node.outputs[0], inner->inputs[0]);
      return {};
    }
    return emit(node, OpKind::Transpose, TransposeAttrs{composed}, {inner->inputs[0]});
  }

  Status visitReshape(const Node& node, const std::vector<ValueId>& in) {
    ValueId out = node.outputs[0];
    const Shape& target = graph_.value(out).type.shape;
    ValueId source = in[0];
    // Reshape-like ops are row-major regroupings: a chain of them is one Reshape.
    if (const Node* inner = producerOf(this->target(), source)) {
      OpKind k = inner->kind;
      if (k == OpKind::Reshape || k == OpKind::Flatten || k == OpKind::Squeeze ||
          k == OpKind::Unsqueeze)
        source = inner->inputs[0];
    }
    if (this->target().value(source).type.shape == target) {
      rw_.replace(out, source);
      return {};
    }
    if (source == in[0]) return rw_.copy(node);
    return emit(node, OpKind::Reshape, ReshapeAttrs{target.symbolicDims()}, {source});
  }
};

} // namespace

Expected<Graph> simplifyAlgebra(const Graph& graph) {
  return Simplifier(graph).run();
}

} // namespace tunec::passes
