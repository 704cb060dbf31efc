// MatMulNBits on the weight-only kernel (runtime/weight_only.h): the codes, scales and zero
// points packed once into the kernel's layout, A's rows (the run's, where symbolic) against
// them.
#include "driver/light_ops.h"
#include "runtime/weight_only.h"

namespace tunec::driver {

bool lowerMatMulNBits(Lowering& l, const Node& n) {
  const Graph& g = l.graph();
  const auto& q = std::get<BlockQuantAttrs>(n.attrs);
  const Shape& as = g.value(n.inputs[0]).type.shape;
  const Value& codes = g.value(n.inputs[1]);
  const Value& scales = g.value(n.inputs[2]);
  const Value& zeros = g.value(n.inputs[3]);
  rt::WeightOnlyShape s{codes.type.shape[1], codes.type.shape[0], q.bits, q.block};
  if (!codes.constant || !scales.constant || !zeros.constant || !s.valid()) {
    l.unsupported(n, "the weight-only kernel takes constant 4- or 8-bit codes in blocks of a "
                     "multiple of 16 (here " +
                         std::to_string(q.bits) + "-bit, block " + std::to_string(q.block) + ")");
    return false;
  }
  // The constants as they are (no copies: the codes are a byte a weight).
  std::span<const uint8_t> codeBytes(codes.constant->dataAs<uint8_t>(),
                                     static_cast<size_t>(codes.constant->numel()));
  std::span<const float> scaleValues(scales.constant->dataAs<float>(),
                                     static_cast<size_t>(scales.constant->numel()));
  std::span<const float> zeroValues(zeros.constant->dataAs<float>(),
                                    static_cast<size_t>(zeros.constant->numel()));
  // Int8 activations where the model allows them (accuracy level 4) and the target has the
  // int8 dot product (vpdpbusd); f32 activations otherwise.
  const bool int8 = q.accuracyLevel == 4 && l.options().target.avx512vnni &&
                    rt::weightOnlyQ8Supports(s, zeroValues);
  std::vector<uint8_t> packed = int8 ? rt::packWeightOnlyQ8(s, codeBytes, scaleValues, zeroValues)
                                     : rt::packWeightOnly(s, codeBytes, scaleValues, zeroValues);
  int weights = l.addConstant(packed.data(), packed.size());
  int in = l.tensorIn(n.inputs[0], Phys::Plain);
  int out = l.defineOutput(n.outputs[0], Phys::Plain);
  DimExpr rows(1);
  std::vector<DimExpr> d = Lowering::extentsOf(as);
  for (size_t i = 0; i + 1 < d.size(); ++i) rows = rows * d[i];
  rt::Step step;
  step.kind = rt::StepKind::WeightOnlyMatmul;
  step.label = lightLabel(n) + " " + as.toString() + " x " + std::to_string(s.n) + " (" +
               std::to_string(q.bits) + "-bit, block " + std::to_string(q.block) +
               (int8 ? ", int8 activations" : "") + ")";
  step.tensors = {out, in, weights};
  l.setInts(step, {rows, DimExpr(s.k), DimExpr(s.n), DimExpr(s.bits), DimExpr(s.block),
                   DimExpr(int8 ? 1 : 0)});
  step.flops = 2.0 * static_cast<double>(as.numel()) * static_cast<double>(s.n);
  step.int8Ops = int8 ? step.flops : 0; // vpdpbusd's products
  step.bytes = static_cast<int64_t>(packed.size()) + 4 * (as.numel() / s.k) * (s.k + s.n);
  l.addStep(std::move(step), {in, weights}, {out});
  return true;
}

} // namespace tunec::driver
