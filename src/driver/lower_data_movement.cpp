// Light data movement: reshapes are views; transpose, tile, depth/space rearrangements, pad,
// expand, slice, split, concat and gather are strided copies of any element type (or channel
// runs of NHWC activations, or views where the bytes already lie in place).
#include "driver/light_ops.h"
#include "ir/op_registry.h"
#include "passes/pattern.h"

#include <algorithm>
#include <cstring>
#include <map>

namespace tunec::driver {

namespace {

// True when strides `a` and `b` walk a tensor of `shape` over the same elements (dimensions of
// extent 1 are never stepped along).
bool sameWalk(const Shape& shape, const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  for (int d = 0; d < shape.rank(); ++d)
    if (shape[d] > 1 && a[static_cast<size_t>(d)] != b[static_cast<size_t>(d)]) return false;
  return true;
}

// Pad in reflect or edge mode: the input into the interior, then axis by axis the borders,
// copied within the output from what is already written (after axis d, every dim up to d is
// complete): edge rows read the first or last interior row with stride 0 along d, reflected
// rows read it backwards (stride -1 along d), starting one row inside the edge.
bool lowerBorderPad(Lowering& l, const Node& n, const std::string& label, DType dt) {
  const Graph& g = l.graph();
  const auto& a = std::get<PadAttrs>(n.attrs);
  const Shape& xs = g.value(n.inputs[0]).type.shape;
  const Shape& ys = g.value(n.outputs[0]).type.shape;
  auto r = static_cast<size_t>(xs.rank());
  bool reflect = a.mode == PadMode::Reflect;
  for (size_t k = 0; k < r; ++k) {
    int64_t before = a.pads[k], after = a.pads[k + r], size = xs[static_cast<int>(k)];
    if (before < 0 || after < 0) {
      l.unsupported(n, "negative pads (cropping) are compiled only in constant mode");
      return false;
    }
    if ((before > 0 || after > 0) && (reflect ? std::max(before, after) >= size : size == 0)) {
      l.unsupported(n, reflect ? "reflect padding needs pads smaller than the padded dimension"
                               : "edge padding of an empty dimension");
      return false;
    }
  }
  int in = l.tensorIn(n.inputs[0], Phys::Plain);
  int out = l.defineOutput(n.outputs[0], Phys::Plain);
  std::vector<int64_t> sy = ys.strides();
  int64_t interior = 0;
  for (size_t k = 0; k < r; ++k) interior += a.pads[k] * sy[k];
  if (xs.numel() > 0 && !copyAny(l, label, out, xs, interior, sy, in, xs.strides(), 0, dt))
    return false;
  for (size_t d = 0; d < r; ++d)
    for (bool front : {true, false}) {
      int64_t width = front ? a.pads[d] : a.pads[d + r];
      if (width == 0) continue;
      std::vector<int64_t> dims;
      int64_t base = 0; // the region's offset along every dim but d
      for (size_t k = 0; k < r; ++k) {
        dims.push_back(k < d ? ys[static_cast<int>(k)] : k == d ? width : xs[static_cast<int>(k)]);
        if (k > d) base += a.pads[k] * sy[k];
      }
      if (Shape(dims).numel() == 0) continue;
      int64_t first = a.pads[d], last = a.pads[d] + xs[static_cast<int>(d)] - 1;
      int64_t to = front ? 0 : last + 1;
      // The row the border's first row reads, and the step along d.
      int64_t from = reflect ? (front ? 2 * first : last - 1) : (front ? first : last);
      int64_t step = reflect ? -1 : 0;
      std::vector<int64_t> src = sy;
      src[d] = step * sy[d];
      if (!copyAny(l, label + " (border)", out, Shape(dims), base + to * sy[d], sy, out, src,
                   base + from * sy[d], dt))
        return false;
    }
  return true;
}

// The runs (src, dst, len) of a Gather of channels by `indices` (normalized), written from
// channel `at` on, appended to `runs` (joined with the last run where they go on).
void appendChannelRuns(const std::vector<int64_t>& indices, int64_t at,
                       std::vector<int64_t>& runs) {
  for (size_t k = 0; k < indices.size(); ++k) {
    int64_t i = indices[k], dst = at + static_cast<int64_t>(k);
    size_t m = runs.size();
    if (m && runs[m - 3] + runs[m - 1] == i && runs[m - 2] + runs[m - 1] == dst)
      ++runs[m - 1];
    else
      runs.insert(runs.end(), {i, dst, 1});
  }
}

void addChannelRunsStep(Lowering& l, const std::string& label, int out, int in, int64_t pixels,
                        int64_t inLd, int64_t outLd, const std::vector<int64_t>& runs) {
  rt::Step step;
  step.kind = rt::StepKind::ChannelRuns;
  step.label = label;
  step.tensors = {out, in};
  step.ints = {pixels, inLd, outLd, static_cast<int64_t>(runs.size() / 3)};
  step.ints.insert(step.ints.end(), runs.begin(), runs.end());
  l.addStep(std::move(step), {in}, {out});
}

// A Concat along the channels of NHWC activations (passes/channel_views.h): one buffer, whose
// parts its producers wrote in place; the Gathers of channels into it run here, one
// ChannelRuns step per source they read, and any other input is copied into its part.
bool lowerChannelConcat(Lowering& l, const Node& n, const std::string& label) {
  const Graph& g = l.graph();
  const Shape& ys = g.value(n.outputs[0]).type.shape;
  int out = l.concatBuffer(g.value(n.outputs[0]).producer);
  std::vector<int64_t> ystr = Lowering::logicalStrides(ys, Phys::Nhwc);
  struct Source {
    int64_t ld = 0;
    std::string name;
    std::vector<int64_t> runs; ///< (src, dst, len) triples
  };
  std::map<int, Source> sources;
  int64_t start = 0;
  for (ValueId v : n.inputs) {
    const Shape& is = g.value(v).type.shape;
    const Node* gather = passes::producerOf(g, v, OpKind::Gather);
    if (l.wroteInPlace(v)) {
      start += is[1];
      continue;
    }
    if (gather && l.channelViews().writtenInPlace.count(v)) {
      int64_t ld = 0;
      int data = l.tensorStrided(gather->inputs[0], ld);
      Source& source = sources[data];
      source.ld = ld ? ld : g.value(gather->inputs[0]).type.shape[1];
      source.name = g.value(gather->inputs[0]).name;
      // The channel views took only Gathers by constant indices in range.
      appendChannelRuns(*passes::constantGatherIndices(g, *gather, 1), start, source.runs);
      start += is[1];
      continue;
    }
    Phys phys;
    int in = l.tensorAny(v, phys);
    if (is.numel() > 0)
      copyAny(l, label, out, is, start * ystr[1], ystr, in, Lowering::logicalStrides(is, phys), 0,
              g.value(v).type.dtype);
    start += is[1];
  }
  for (auto& [data, source] : sources)
    addChannelRunsStep(l, label + " (channels of '" + source.name + "')", out, data,
                       ys[0] * ys[2] * ys[3], source.ld, ys[1], source.runs);
  return true;
}

bool lowerGatherElements(Lowering& l, const Node& n, const std::string& label) {
  const Graph& g = l.graph();
  const Value& x = g.value(n.inputs[0]);
  const Shape& xs = x.type.shape;
  const Value& idx = g.value(n.inputs[1]);
  if (idx.type.dtype != DType::I64 && idx.type.dtype != DType::I32) {
    l.unsupported(n, "these dtypes are not compiled");
    return false;
  }
  int64_t axis = normalizeAxis(std::get<AxisAttrs>(n.attrs).axis, xs.rank());
  int data = l.tensorIn(n.inputs[0], Phys::Plain);
  int indices = l.tensorIn(n.inputs[1], Phys::Plain);
  int out = l.defineOutput(n.outputs[0], Phys::Plain);
  rt::Step step;
  step.kind = rt::StepKind::GatherElements;
  step.label = label;
  step.tensors = {out, data, indices};
  step.ints = {xs.rank(), axis, static_cast<int64_t>(dtypeSize(x.type.dtype)),
               static_cast<int64_t>(dtypeSize(idx.type.dtype))};
  step.ints.insert(step.ints.end(), xs.dims().begin(), xs.dims().end());
  const auto& idims = idx.type.shape.dims();
  step.ints.insert(step.ints.end(), idims.begin(), idims.end());
  l.addStep(std::move(step), {data, indices}, {out});
  return true;
}

} // namespace

bool lowerDataMovement(Lowering& l, const Node& n) {
  const Graph& g = l.graph();
  const Value& x = g.value(n.inputs[0]);
  const Shape& xs = x.type.shape;
  const Shape& ys = g.value(n.outputs[0]).type.shape;
  std::string label = lightLabel(n);
  DType dt = x.type.dtype;
  switch (n.kind) {
  case OpKind::Reshape:
  case OpKind::Flatten:
  case OpKind::Squeeze:
  case OpKind::Unsqueeze:
    l.defineAlias(n.outputs[0], l.tensorIn(n.inputs[0], Phys::Plain), Phys::Plain);
    return true;
  case OpKind::GatherElements:
    return lowerGatherElements(l, n, label);
  case OpKind::Transpose: {
    // Read in the layout the input has. When the permuted strides are those of the output in
    // one of the layouts, the bytes are already in place: a view (ConvNeXt's permute of an NHWC
    // activation to [N, H, W, C] and back, DNNFusion's reorganization as an index remap).
    const auto& perm = std::get<TransposeAttrs>(n.attrs).perm;
    Phys inPhys;
    int in = l.tensorAny(n.inputs[0], inPhys);
    std::vector<int64_t> xstr = Lowering::logicalStrides(xs, inPhys), s;
    for (int64_t p : perm) s.push_back(xstr[static_cast<size_t>(p)]);
    for (Phys phys : {Phys::Plain, Phys::Nhwc})
      if ((phys == Phys::Plain || ys.rank() == 4) &&
          sameWalk(ys, s, Lowering::logicalStrides(ys, phys))) {
        l.defineAlias(n.outputs[0], in, phys);
        return true;
      }
    int out = l.defineOutput(n.outputs[0], Phys::Plain);
    return copyAny(l, label, out, ys, 0, ys.strides(), in, s, 0, dt);
  }
  case OpKind::Tile: {
    // y viewed as [r0, d0, r1, d1, ...]: the repeat dims read with stride 0.
    const auto& reps = std::get<TileAttrs>(n.attrs).repeats;
    std::vector<int64_t> dims, inStrides, xstr = xs.strides();
    for (int k = 0; k < xs.rank(); ++k) {
      dims.push_back(reps[static_cast<size_t>(k)]);
      dims.push_back(xs[k]);
      inStrides.push_back(0);
      inStrides.push_back(xstr[static_cast<size_t>(k)]);
    }
    Shape vs(dims);
    int in = l.tensorIn(n.inputs[0], Phys::Plain);
    int out = l.defineOutput(n.outputs[0], Phys::Plain);
    return copyAny(l, label, out, vs, 0, vs.strides(), in, inStrides, 0, dt);
  }
  case OpKind::DepthToSpace:
  case OpKind::SpaceToDepth: {
    const auto& a = std::get<DepthToSpaceAttrs>(n.attrs);
    int64_t b = a.blockSize;
    std::vector<int64_t> sx = xs.strides(), dims, inStrides;
    if (n.kind == OpKind::DepthToSpace) {
      // y[n, c, h*b+bh, w*b+bw] over [N, C, H, b, W, b].
      int64_t c = ys[1];
      dims = {ys[0], c, xs[2], b, xs[3], b};
      int64_t cs = sx[1];
      if (a.columnRowDepth)
        inStrides = {sx[0], b * b * cs, sx[2], b * cs, sx[3], cs};
      else
        inStrides = {sx[0], cs, sx[2], b * c * cs, sx[3], c * cs};
    } else {
      // y[n, (bh*b+bw)*C + c, h, w] over [N, b, b, C, H, W].
      dims = {xs[0], b, b, xs[1], ys[2], ys[3]};
      inStrides = {sx[0], sx[2], sx[3], sx[1], b * sx[2], b * sx[3]};
    }
    Shape vs(dims);
    int in = l.tensorIn(n.inputs[0], Phys::Plain);
    int out = l.defineOutput(n.outputs[0], Phys::Plain);
    return copyAny(l, label, out, vs, 0, vs.strides(), in, inStrides, 0, dt);
  }
  case OpKind::Pad: {
    const auto& a = std::get<PadAttrs>(n.attrs);
    if (a.mode != PadMode::Constant) return lowerBorderPad(l, n, label, dt);
    // Fill with the value, then copy the (possibly cropped) input into the interior.
    Tensor value(dt, {1});
    value.setDouble(0, a.value);
    int fill = l.addConstant(value.data(), value.byteSize());
    int in = l.tensorIn(n.inputs[0], Phys::Plain);
    int out = l.defineOutput(n.outputs[0], Phys::Plain);
    if (!copyAny(l, label + " (fill)", out, ys, 0, ys.strides(), fill,
                 std::vector<int64_t>(static_cast<size_t>(ys.rank()), 0), 0, dt))
      return false;
    std::vector<int64_t> len, sy = ys.strides(), sx = xs.strides();
    int64_t outOffset = 0, inOffset = 0;
    auto r = static_cast<size_t>(xs.rank());
    for (size_t k = 0; k < r; ++k) {
      int64_t begin = a.pads[k];
      int64_t ob = std::max<int64_t>(begin, 0), ib = std::max<int64_t>(-begin, 0);
      len.push_back(std::max<int64_t>(
          0, std::min(xs[static_cast<int>(k)] - ib, ys[static_cast<int>(k)] - ob)));
      outOffset += ob * sy[k];
      inOffset += ib * sx[k];
    }
    Shape region(len);
    if (region.numel() == 0) return true;
    return copyAny(l, label, out, region, outOffset, sy, in, sx, inOffset, dt);
  }
  case OpKind::Expand: {
    int in = l.tensorIn(n.inputs[0], Phys::Plain);
    int out = l.defineOutput(n.outputs[0], Phys::Plain);
    return copyAny(l, label, out, ys, 0, ys.strides(), in,
                   Lowering::broadcastStrides(xs, xs.strides(), ys), 0, dt);
  }
  case OpKind::Slice: {
    const auto& a = std::get<SliceAttrs>(n.attrs);
    if (l.channelViews().slices.count(l.graph().value(n.outputs[0]).producer)) {
      // Read in place by the convolutions after it: its channels where they lie.
      int64_t ld = 0;
      int in = l.tensorStrided(n.inputs[0], ld);
      l.defineChannelView(n.outputs[0], in, a.starts[1], ld ? ld : xs[1]);
      return true;
    }
    // Data movement keeps its input's layout (a channel slice of an NHWC activation stays
    // NHWC, so the convolution after it needs no reorder).
    Phys phys;
    int in = l.tensorAny(n.inputs[0], phys);
    std::vector<int64_t> xstr = Lowering::logicalStrides(xs, phys), s;
    int64_t offset = 0;
    for (size_t d = 0; d < xstr.size(); ++d) {
      offset += a.starts[d] * xstr[d];
      s.push_back(a.steps[d] * xstr[d]);
    }
    int out = l.defineOutput(n.outputs[0], phys);
    return copyAny(l, label, out, ys, 0, Lowering::logicalStrides(ys, l.producedPhys(n.outputs[0])),
                   in, s, offset, dt);
  }
  case OpKind::Split: {
    const auto& a = std::get<SplitAttrs>(n.attrs);
    int axis = static_cast<int>(normalizeAxis(a.axis, xs.rank()));
    Phys phys;
    int in = l.tensorAny(n.inputs[0], phys);
    std::vector<int64_t> xstr = Lowering::logicalStrides(xs, phys);
    int64_t start = 0;
    for (size_t i = 0; i < n.outputs.size(); ++i) {
      const Shape& os = g.value(n.outputs[i]).type.shape;
      int out = l.defineOutput(n.outputs[i], phys);
      copyAny(l, label, out, os, 0, Lowering::logicalStrides(os, l.producedPhys(n.outputs[i])), in,
              xstr, start * xstr[static_cast<size_t>(axis)], dt);
      start += a.sizes[i];
    }
    return true;
  }
  case OpKind::Concat: {
    if (l.channelViews().concats.count(l.graph().value(n.outputs[0]).producer))
      return lowerChannelConcat(l, n, label);
    // NHWC when every input is (the branches of a ShuffleNet or Inception block); each input is
    // read in its own layout.
    int axis = static_cast<int>(normalizeAxis(std::get<AxisAttrs>(n.attrs).axis, ys.rank()));
    Phys want = ys.rank() == 4 ? Phys::Nhwc : Phys::Plain;
    for (ValueId v : n.inputs)
      if (l.producedPhys(v) != Phys::Nhwc) want = Phys::Plain;
    int out = l.defineOutput(n.outputs[0], want);
    std::vector<int64_t> ystr = Lowering::logicalStrides(ys, l.producedPhys(n.outputs[0]));
    int64_t start = 0;
    for (ValueId v : n.inputs) {
      const Shape& is = g.value(v).type.shape;
      Phys phys;
      int in = l.tensorAny(v, phys);
      if (is.numel() > 0)
        copyAny(l, label, out, is, start * ystr[static_cast<size_t>(axis)], ystr, in,
                Lowering::logicalStrides(is, phys), 0, dt);
      start += is[axis];
    }
    return true;
  }
  case OpKind::Gather: {
    // A Gather into its part of a Concat's buffer runs with the Concat (lowerChannelConcat).
    if (l.channelViews().writtenInPlace.count(n.outputs[0])) return true;
    const Value& idx = g.value(n.inputs[1]);
    if (idx.type.dtype != DType::I64 && idx.type.dtype != DType::I32) {
      l.unsupported(n, "Gather indices must be int64 or int32");
      return false;
    }
    auto axis = static_cast<size_t>(normalizeAxis(std::get<AxisAttrs>(n.attrs).axis, xs.rank()));
    // Channels of an NHWC activation in runs of 4 or more (a shuffled half's parts): copied run
    // by run, NHWC. Shorter runs (an interleaving shuffle) copy faster plane by plane, plain.
    auto channels = xs.rank() == 4 ? passes::constantGatherIndices(g, n, 1) : std::nullopt;
    if (channels && l.producedPhys(n.inputs[0]) == Phys::Nhwc && dtypeSize(x.type.dtype) == 4) {
      std::vector<int64_t> runs;
      appendChannelRuns(*channels, 0, runs);
      if (static_cast<int64_t>(runs.size()) / 3 * 4 <= static_cast<int64_t>(channels->size())) {
        int64_t ld = 0;
        int data = l.tensorStrided(n.inputs[0], ld);
        int out = l.defineOutput(n.outputs[0], Phys::Nhwc);
        addChannelRunsStep(l, label, out, data, xs[0] * xs[2] * xs[3], ld ? ld : xs[1], ys[1],
                           runs);
        return true;
      }
    }
    int data = l.tensorIn(n.inputs[0], Phys::Plain);
    int indices = l.tensorIn(n.inputs[1], Phys::Plain);
    int out = l.defineOutput(n.outputs[0], Phys::Plain);
    rt::Step step;
    step.kind = rt::StepKind::Gather;
    step.label = label;
    step.tensors = {out, data, indices};
    step.ints = {product(xs.dims(), 0, axis),
                 xs.dims()[axis],
                 product(xs.dims(), axis + 1, xs.dims().size()),
                 idx.type.shape.numel(),
                 static_cast<int64_t>(dtypeSize(x.type.dtype)),
                 static_cast<int64_t>(dtypeSize(idx.type.dtype))};
    l.addStep(std::move(step), {data, indices}, {out});
    return true;
  }
  default:
    TUNEC_ASSERT(false, "lowerDataMovement: not a data movement op");
    return false;
  }
}

} // namespace tunec::driver
