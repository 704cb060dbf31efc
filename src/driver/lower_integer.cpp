// The exact integer form of MatMulInteger and ConvInteger (frontend/onnx_ops.cpp): a MatMul or
// Conv of i32 operands, summed in integers modulo 2^32 by the runtime's integer steps
// (rt::runIntegerMatmul, rt::runIntegerConv), never in f32.
#include "driver/light_ops.h"
#include "ir/op_registry.h"
#include "runtime/light_kernels.h"

#include <cstring>

namespace tunec::driver {

namespace {

bool lowerIntegerMatmul(Lowering& l, const Node& n) {
  const Graph& g = l.graph();
  const Shape& as = g.value(n.inputs[0]).type.shape;
  const Shape& bs = g.value(n.inputs[1]).type.shape;
  const Shape& ys = g.value(n.outputs[0]).type.shape;
  std::vector<DimExpr> a = Lowering::extentsOf(as), b = Lowering::extentsOf(bs);
  if (a.size() == 1) a.insert(a.begin(), DimExpr(1)); // a vector: one row
  if (b.size() == 1) b.push_back(DimExpr(1));         // a vector: one column
  const DimExpr m = a[a.size() - 2], k = a[a.size() - 1], cols = b[b.size() - 1];
  const DimExpr aBatch = extentProduct(a, 0, a.size() - 2),
                bBatch = extentProduct(b, 0, b.size() - 2);
  const bool aShared = aBatch == DimExpr(1), bShared = bBatch == DimExpr(1);
  // Batch dimensions: one operand's alone (the other's all 1), or the same on both.
  const std::vector<DimExpr> aDims(a.begin(), a.end() - 2), bDims(b.begin(), b.end() - 2);
  if (!aShared && !bShared && aDims != bDims) {
    l.unsupported(n, "an integer matmul whose operands' batch dimensions broadcast against each "
                     "other is not compiled yet");
    return false;
  }
  const DimExpr batch = aShared ? bBatch : aBatch;
  int in = l.tensorIn(n.inputs[0], Phys::Plain), weights = l.tensorIn(n.inputs[1], Phys::Plain);
  int out = l.defineOutput(n.outputs[0], Phys::Plain);
  rt::Step step;
  step.kind = rt::StepKind::IntegerMatmul;
  step.label = lightLabel(n) + " " + as.toString() + " times " + bs.toString() + " (int32)";
  step.tensors = {out, in, weights};
  // A constant B of int16 values (MatMulInteger's weights less their zero point) packed once here
  // as the 16-bit tiles read it: the run neither checks nor packs it.
  const Value& bv = g.value(n.inputs[1]);
  if (bShared && bv.constant && bv.type.dtype == DType::I32 && k.constant() && cols.constant()) {
    std::vector<int32_t> packed =
        rt::packIntegerPairs(bv.constant->dataAs<int32_t>(), *k.constant(), *cols.constant());
    if (!packed.empty()) step.tensors.push_back(l.addConstant(packed));
  }
  l.setInts(step,
            {batch, m, cols, k, aShared ? DimExpr(0) : m * k, bShared ? DimExpr(0) : k * cols});
  step.flops = 2.0 * static_cast<double>(ys.numel()) * static_cast<double>(as.dims().back());
  std::vector<int> reads = {in, weights};
  if (step.tensors.size() == 4) reads.push_back(step.tensors[3]);
  l.noteExactIntegerStep(lightLabel(n));
  l.addStep(std::move(step), reads, {out});
  return true;
}

bool lowerIntegerConv(Lowering& l, const Node& n) {
  const Graph& g = l.graph();
  const Shape& xs = g.value(n.inputs[0]).type.shape;
  const Shape& ws = g.value(n.inputs[1]).type.shape;
  const Shape& ys = g.value(n.outputs[0]).type.shape;
  const auto& a = std::get<ConvAttrs>(n.attrs);
  const size_t spatial = a.kernel.size();
  if ((spatial != 1 && spatial != 2) || !xs.isStatic() || !ys.isStatic() ||
      (n.inputs.size() > 2 && n.inputs[2] != kNoValue)) {
    l.unsupported(n, "an integer convolution runs 1-d and 2-d windows of static shape without a "
                     "bias");
    return false;
  }
  // A 1-d convolution as 2-d rows of height 1.
  const auto at = [&](const std::vector<int64_t>& v, size_t i, int64_t one) {
    return spatial == 2 ? v[i] : i == 0 ? one : v[0];
  };
  const std::vector<int64_t> pads = a.pads;
  rt::IntegerConvParams p{xs[0],
                          xs[1],
                          spatial == 2 ? xs[2] : 1,
                          xs[xs.rank() - 1],
                          ws[0],
                          at(a.kernel, 0, 1),
                          at(a.kernel, 1, 1),
                          spatial == 2 ? ys[2] : 1,
                          ys[ys.rank() - 1],
                          at(a.strides, 0, 1),
                          at(a.strides, 1, 1),
                          spatial == 2 ? pads[0] : 0,
                          spatial == 2 ? pads[1] : pads[0],
                          at(a.dilations, 0, 1),
                          at(a.dilations, 1, 1),
                          a.group};
  if (!p.valid()) {
    l.unsupported(n, "the integer convolution's window does not fit its input");
    return false;
  }
  int in = l.tensorIn(n.inputs[0], Phys::Plain), weights = l.tensorIn(n.inputs[1], Phys::Plain);
  int out = l.defineOutput(n.outputs[0], Phys::Plain);
  rt::Step step;
  step.kind = rt::StepKind::IntegerConv;
  step.label = lightLabel(n) + " " + xs.toString() + " by " + ws.toString() + " (int32)";
  step.tensors = {out, in, weights};
  // Constant weights of one group packed once here as the pair tiles read them (the matmul's
  // packing of B = w^T [k, oc]): the run neither checks nor packs them.
  const Value& wv = g.value(n.inputs[1]);
  if (p.group == 1 && wv.constant && wv.type.dtype == DType::I32) {
    const int64_t k = ws.numel() / ws[0], oc = ws[0];
    std::vector<int32_t> transposed(static_cast<size_t>(k * oc));
    const int32_t* w = wv.constant->dataAs<int32_t>();
    for (int64_t o = 0; o < oc; ++o)
      for (int64_t i = 0; i < k; ++i) transposed[static_cast<size_t>(i * oc + o)] = w[o * k + i];
    std::vector<int32_t> packed = rt::packIntegerPairs(transposed.data(), k, oc);
    if (!packed.empty()) step.tensors.push_back(l.addConstant(packed));
  }
  step.ints.resize(sizeof(p) / sizeof(int64_t));
  std::memcpy(step.ints.data(), &p, sizeof(p));
  step.flops = 2.0 * static_cast<double>(ys.numel()) * static_cast<double>(ws.numel() / ws[0]);
  std::vector<int> reads = {in, weights};
  if (step.tensors.size() == 4) reads.push_back(step.tensors[3]);
  l.noteExactIntegerStep(lightLabel(n));
  l.addStep(std::move(step), reads, {out});
  return true;
}

} // namespace

bool lowerIntegerProduct(Lowering& l, const Node& n) {
  const Graph& g = l.graph();
  for (ValueId v : {n.inputs[0], n.inputs[1], n.outputs[0]})
    if (g.value(v).type.dtype != DType::I32) {
      l.unsupported(n, "an integer " + std::string(opName(n.kind)) +
                           " runs int32 operands (MatMulInteger's and ConvInteger's exact form), "
                           "not " +
                           g.value(v).type.toString());
      return false;
    }
  return n.kind == OpKind::MatMul ? lowerIntegerMatmul(l, n) : lowerIntegerConv(l, n);
}

} // namespace tunec::driver
