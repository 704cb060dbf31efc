// --precision bf16 between layers: the result of a bf16 kernel that only bf16 kernels read, each
// as its A, is stored as bf16. Each reader would round it to bf16 anyway (its copy or block
// conversion, nearest even), so the producer's epilogue rounds it once instead (vcvtneps2bf16,
// which flushes f32 denormals as the readers' vector conversion does): the same values, half the
// bytes written and read, and no conversion in the readers (a 1x1 convolution or a matmul reads
// it in place, a padded convolution copies bf16 as it is).
//
// A depthwise convolution has no bf16 form, but under --precision bf16 its f32 kernel takes bf16
// activations on both sides (widened exactly, rounded once): between an expand and a project
// convolution (MobileNetV2's inverted residuals) its input and output are bf16. That input was f32
// before, so this one changes values: the depthwise sums the rounded input, as PyTorch's bf16
// does.
//
// Decided when the producer is lowered, from what the readers will decide (anchorRunsBf16: the
// same functions their lowering calls), so the producer's C, the tensor's bytes and the readers'
// A agree by construction. Left f32: a result that a light op, an epilogue (a residual addend), an
// attention, a channel view or a transpose view reads, a model output, and the results of
// kernels whose epilogue reads an addend or normalizes rows (their C is read back as f32).
#include "driver/lowering.h"

#include <algorithm>

namespace tunec::driver {

namespace {

// The value the kernel writes: its anchor's output, or that of the last node its epilogue
// computes.
ValueId kernelResult(const Graph& g, const passes::FusedKernel& k) {
  return g.node(k.nodes[k.nodesInKernel() - 1]).outputs[0];
}

// A kernel whose C is written once as the epilogue's per-element result: no residual addend read
// beside it, no row normalization over it, no split, views or in-place writes.
bool writesPlainResult(Lowering& l, const passes::FusedKernel& k) {
  const Graph& g = l.graph();
  if (k.values >= 0 || k.split >= 0 || k.nhwcView >= 0 || k.plainView >= 0 ||
      k.dequantizedAddend >= 0 || l.operandViews().c.count(k.anchor))
    return false;
  if (std::any_of(k.epilogue.begin(), k.epilogue.end(), [](const passes::EpilogueStep& s) {
        return readsAddend(s.op.kind) || s.op.kind == PostOpKind::LayerNormRow;
      }))
    return false;
  return !l.channelViews().writtenInPlace.count(kernelResult(g, k));
}

// The layout a template reads and writes activations in: NHWC (conv2d, depthwise) or rows
// (matmul).
bool nhwc(TemplateKind t) {
  return t != TemplateKind::Matmul;
}

// Node `reader` reads `v` as the A of a bf16 kernel (or of a depthwise conv that takes bf16
// activations) of the same layout as `producer`'s result (NHWC between convolutions, rows between
// matmuls), and only as its A.
bool readsAsBf16A(Lowering& l, NodeId reader, ValueId v, const passes::FusedKernel& producer) {
  const Graph& g = l.graph();
  const int kernel = l.fusion().kernelOf[static_cast<size_t>(reader)];
  if (kernel < 0) return false;
  const passes::FusedKernel& k = l.fusion().kernels[static_cast<size_t>(kernel)];
  const Node& n = g.node(reader);
  if (k.anchor != reader || k.values >= 0 || nhwc(k.templ) != nhwc(producer.templ) ||
      k.prologue >= 0 || n.inputs.empty() || n.inputs[0] != v ||
      std::count(n.inputs.begin(), n.inputs.end(), v) != 1)
    return false;
  if (k.templ == TemplateKind::Matmul) {
    // A bf16 A is read in place: row-major, whole k-pairs per row.
    const Shape& as = g.value(v).type.shape;
    if (l.operandViews().a.count(reader) || as.rank() < 2 || as[as.rank() - 1] % 2) return false;
    if (n.kind == OpKind::Gemm && std::get<GemmAttrs>(n.attrs).transA) return false;
  }
  return anchorRunsBf16(l, k);
}

// Every reader of `producer`'s result reads it as a bf16 A (the result is kept bf16).
bool keepsResultBf16(Lowering& l, const passes::FusedKernel& producer, ValueId v) {
  const auto& outs = l.graph().outputs();
  if (!l.options().bf16Activations || !writesPlainResult(l, producer) ||
      std::find(outs.begin(), outs.end(), v) != outs.end())
    return false;
  const std::vector<NodeId>& readers = l.readers(v);
  return !readers.empty() && std::all_of(readers.begin(), readers.end(), [&](NodeId reader) {
    return readsAsBf16A(l, reader, v, producer);
  });
}

} // namespace

DType storeResult(Lowering& l, const passes::FusedKernel& producer) {
  const ValueId v = kernelResult(l.graph(), producer);
  if (keepsResultBf16(l, producer, v)) l.storeAsBf16(v);
  return l.storedType(v);
}

} // namespace tunec::driver
