// f16 models computed in f32. A model converted to float16 (onnxconverter-common's
// convert_float_to_float16, as published fp16 ONNX files are) computes every op in f16 between
// a Cast of its inputs and one of its outputs; x86 CPUs without AVX512-FP16 have no f16
// arithmetic, and ONNX Runtime's CPU provider runs such ops in f32 (its InsertCastTransformer,
// then the removal of the Cast pairs between them). The same here: f16 constants become f32
// (exactly), every op of f16 values computes in f32, a Cast to f16 of an f32 value is dropped
// (no rounding between ops, as ONNX Runtime), and a Cast from f16 to f32 is its input's f32
// value. The model's f16 inputs are cast to f32 first and its f16 outputs back at the end, so
// its interface is unchanged.
#include "ir/op_registry.h"
#include "passes/passes.h"
#include "passes/rewriter.h"

#include <map>

namespace tunec::passes {

namespace {

class HalfInFloat {
public:
  explicit HalfInFloat(const Graph& graph) : graph_(graph), rw_(graph) {}

  Expected<Graph> run() {
    for (const Node& node : graph_.nodes()) TUNEC_TRY(visit(node));
    for (ValueId out : graph_.outputs()) {
      if (graph_.value(out).type.dtype != DType::F16) continue;
      ValueId v = rw_.map(out);
      if (rw_.target().value(v).type.dtype != DType::F32) continue;
      TUNEC_ASSIGN_OR_RETURN(auto cast, rw_.add(graph_.value(out).name + "/f16", OpKind::Cast,
                                                CastAttrs{DType::F16}, {v},
                                                {graph_.value(out).name + "/f16"}));
      rw_.replace(out, cast[0]);
    }
    return rw_.finish();
  }

private:
  const Graph& graph_;
  GraphRewriter rw_;
  std::map<ValueId, ValueId> twins_; ///< a target f16 value -> its f32 value

  bool half(ValueId source) const {
    return source != kNoValue && graph_.value(source).type.dtype == DType::F16;
  }

  // The f32 value of source value `v` in the target (itself unless it is still f16 there: a
  // constant converted, a model input cast).
  Expected<ValueId> f32Of(ValueId v) {
    ValueId mapped = rw_.map(v);
    const Value& value = rw_.target().value(mapped);
    if (value.type.dtype != DType::F16) return mapped;
    if (auto it = twins_.find(mapped); it != twins_.end()) return it->second;
    ValueId twin;
    if (value.constant) {
      Tensor f(DType::F32, value.type.shape);
      for (int64_t i = 0; i < f.numel(); ++i) f.setDouble(i, value.constant->getDouble(i));
      twin = rw_.constant(value.name + "/f32", std::move(f));
    } else {
      TUNEC_ASSIGN_OR_RETURN(auto cast,
                             rw_.add(value.name + "/f32", OpKind::Cast, CastAttrs{DType::F32},
                                     {mapped}, {value.name + "/f32"}));
      twin = cast[0];
    }
    twins_[mapped] = twin;
    return twin;
  }

  Status visit(const Node& node) {
    bool any = false;
    for (ValueId v : node.inputs) any = any || half(v);
    for (ValueId v : node.outputs) any = any || half(v);
    if (!any) return rw_.copy(node);
    OpAttrs attrs = node.attrs;
    if (node.kind == OpKind::Cast) {
      const DType to = std::get<CastAttrs>(node.attrs).to;
      TUNEC_ASSIGN_OR_RETURN(ValueId in, f32Of(node.inputs[0]));
      const DType from = rw_.target().value(in).type.dtype;
      // To f16 from f32, or from f16 to f32: the f32 value, unrounded.
      if ((to == DType::F16 || to == DType::F32) && from == DType::F32) {
        rw_.replace(node.outputs[0], in);
        return {};
      }
      if (to == DType::F16) attrs = CastAttrs{DType::F32}; // an integer to f16: to f32
      return emit(node, std::move(attrs), {in});
    }
    if (auto* c = std::get_if<ConstantOfShapeAttrs>(&attrs); c && c->dtype == DType::F16)
      c->dtype = DType::F32;
    std::vector<ValueId> inputs;
    for (ValueId v : node.inputs) {
      if (v == kNoValue) {
        inputs.push_back(kNoValue);
        continue;
      }
      TUNEC_ASSIGN_OR_RETURN(ValueId in, f32Of(v));
      inputs.push_back(in);
    }
    return emit(node, std::move(attrs), std::move(inputs));
  }

  Status emit(const Node& node, OpAttrs attrs, std::vector<ValueId> inputs) {
    std::vector<std::string> names;
    for (ValueId out : node.outputs) names.push_back(graph_.value(out).name);
    TUNEC_ASSIGN_OR_RETURN(auto outs, rw_.add(node.name, node.kind, std::move(attrs),
                                              std::move(inputs), std::move(names)));
    for (size_t i = 0; i < outs.size(); ++i) rw_.replace(node.outputs[i], outs[i]);
    return {};
  }
};

} // namespace

Expected<Graph> computeHalfInFloat(const Graph& graph) {
  bool any = false;
  for (const Value& v : graph.values()) any = any || v.type.dtype == DType::F16;
  if (!any) return graph;
  return HalfInFloat(graph).run();
}

} // namespace tunec::passes
