// Reference data movement: Reshape family, Transpose, Concat, Split, Slice, Gather,
// GatherElements, Expand, Tile, Pad, ConstantOfShape, DepthToSpace/SpaceToDepth.
// Elements are copied as bytes, so every dtype is handled alike.
#include "ir/op_registry.h"
#include "reference/kernels.h"

#include <cstring>

namespace tunec::reference {

namespace {

void copyElement(Tensor& dst, int64_t di, const Tensor& src, int64_t si) {
  size_t bytes = dtypeSize(src.dtype());
  std::memcpy(dst.data() + di * static_cast<int64_t>(bytes),
              src.data() + si * static_cast<int64_t>(bytes), bytes);
}

// Copies y[idx] = x[map(idx)] for every output index.
void gatherBy(const Tensor& x, Tensor& y,
              const std::function<int64_t(const std::vector<int64_t>&)>& map) {
  forEachIndex(y.shape(), [&](const std::vector<int64_t>& idx, int64_t linear) {
    copyElement(y, linear, x, map(idx));
  });
}

int64_t offsetOf(const std::vector<int64_t>& idx, const std::vector<int64_t>& strides) {
  int64_t o = 0;
  for (size_t d = 0; d < idx.size(); ++d) o += idx[d] * strides[d];
  return o;
}

Status gather(const Node& node, Inputs in, Tensor& y) {
  const Tensor& x = *in[0];
  const Tensor& indices = *in[1];
  auto axis = normalizeAxis(std::get<AxisAttrs>(node.attrs).axis, x.shape().rank()).value();
  int64_t axisLen = x.shape()[static_cast<int>(axis)];
  std::vector<int64_t> xStrides = x.shape().strides();
  int indRank = indices.shape().rank();
  std::vector<int64_t> indStrides = indices.shape().strides();
  Status status;
  gatherBy(x, y, [&](const std::vector<int64_t>& idx) {
    std::vector<int64_t> indIdx(idx.begin() + axis, idx.begin() + axis + indRank);
    int64_t j = indices.getInt(offsetOf(indIdx, indStrides));
    if (j < -axisLen || j >= axisLen) {
      if (status.isOk())
        status = makeError("index ", j, " is out of range for axis ", axis, " of size ", axisLen);
      j = 0;
    }
    if (j < 0) j += axisLen;
    std::vector<int64_t> src(idx.begin(), idx.begin() + axis);
    src.push_back(j);
    src.insert(src.end(), idx.begin() + axis + indRank, idx.end());
    return offsetOf(src, xStrides);
  });
  return status;
}

Status gatherElements(const Node& node, Inputs in, Tensor& y) {
  const Tensor& x = *in[0];
  const Tensor& indices = *in[1];
  auto axis = static_cast<size_t>(
      normalizeAxis(std::get<AxisAttrs>(node.attrs).axis, x.shape().rank()).value());
  int64_t axisLen = x.shape()[static_cast<int>(axis)];
  std::vector<int64_t> xStrides = x.shape().strides();
  Status status;
  forEachIndex(y.shape(), [&](const std::vector<int64_t>& idx, int64_t linear) {
    int64_t j = indices.getInt(linear);
    if (j < -axisLen || j >= axisLen) {
      if (status.isOk())
        status = makeError("index ", j, " is out of range for axis ", axis, " of size ", axisLen);
      j = 0;
    }
    std::vector<int64_t> src = idx;
    src[axis] = j < 0 ? j + axisLen : j;
    copyElement(y, linear, x, offsetOf(src, xStrides));
  });
  return status;
}

Status pad(const Node& node, const Tensor& x, Tensor& y) {
  const auto& a = std::get<PadAttrs>(node.attrs);
  const Shape& xs = x.shape();
  size_t rank = static_cast<size_t>(xs.rank());
  std::vector<int64_t> strides = xs.strides();
  forEachIndex(y.shape(), [&](const std::vector<int64_t>& idx, int64_t linear) {
    std::vector<int64_t> src(rank);
    bool outside = false;
    for (size_t d = 0; d < rank; ++d) {
      int64_t i = idx[d] - a.pads[d];
      int64_t n = xs[static_cast<int>(d)];
      if (i < 0 || i >= n) {
        if (a.mode == PadMode::Constant || n == 0)
          outside = true;
        else if (a.mode == PadMode::Edge)
          i = i < 0 ? 0 : n - 1;
        else {
          int64_t period = 2 * (n - 1);
          if (period == 0)
            i = 0;
          else {
            i = ((i % period) + period) % period;
            if (i >= n) i = period - i;
          }
        }
      }
      src[d] = i;
    }
    if (outside)
      y.setDouble(linear, a.value);
    else
      copyElement(y, linear, x, offsetOf(src, strides));
  });
  return {};
}

void depthToSpace(const Node& node, const Tensor& x, Tensor& y) {
  const auto& a = std::get<DepthToSpaceAttrs>(node.attrs);
  int64_t b = a.blockSize;
  std::vector<int64_t> xStrides = x.shape().strides();
  if (node.kind == OpKind::DepthToSpace) {
    int64_t c = y.shape()[1];
    gatherBy(x, y, [&](const std::vector<int64_t>& idx) {
      int64_t bh = idx[2] % b, bw = idx[3] % b;
      int64_t ic = a.columnRowDepth ? (idx[1] * b + bh) * b + bw : (bh * b + bw) * c + idx[1];
      return offsetOf({idx[0], ic, idx[2] / b, idx[3] / b}, xStrides);
    });
    return;
  }
  int64_t c = x.shape()[1];
  gatherBy(x, y, [&](const std::vector<int64_t>& idx) {
    int64_t blockIdx = idx[1] / c, ic = idx[1] % c;
    int64_t bh = blockIdx / b, bw = blockIdx % b;
    return offsetOf({idx[0], ic, idx[2] * b + bh, idx[3] * b + bw}, xStrides);
  });
}

} // namespace

Status dataMovement(const Node& node, Inputs in, Outputs out) {
  Tensor& y = out[0];
  switch (node.kind) {
  case OpKind::Trilu: {
    const auto& a = std::get<TriluAttrs>(node.attrs);
    const Shape& s = in[0]->shape();
    const int64_t rows = s[s.rank() - 2], cols = s[s.rank() - 1];
    const auto size = static_cast<int64_t>(dtypeSize(y.dtype()));
    const std::byte* src = in[0]->data();
    std::byte* dst = y.data();
    for (int64_t e = 0; e < s.numel(); ++e) {
      const int64_t i = e / cols % rows, j = e % cols;
      const bool keep = a.upper ? j - i >= a.k : j - i <= a.k;
      for (int64_t b = 0; b < size; ++b)
        dst[e * size + b] = keep ? src[e * size + b] : std::byte{0};
    }
    return {};
  }
  case OpKind::Reshape:
  case OpKind::Flatten:
  case OpKind::Squeeze:
  case OpKind::Unsqueeze:
    std::memcpy(y.data(), in[0]->data(), y.byteSize());
    return {};
  case OpKind::Transpose: {
    const auto& perm = std::get<TransposeAttrs>(node.attrs).perm;
    std::vector<int64_t> xStrides = in[0]->shape().strides();
    gatherBy(*in[0], y, [&](const std::vector<int64_t>& idx) {
      int64_t o = 0;
      for (size_t d = 0; d < idx.size(); ++d) o += idx[d] * xStrides[static_cast<size_t>(perm[d])];
      return o;
    });
    return {};
  }
  case OpKind::Concat: {
    auto axis = static_cast<int>(
        normalizeAxis(std::get<AxisAttrs>(node.attrs).axis, y.shape().rank()).value());
    int64_t outer = 1, inner = 1;
    for (int i = 0; i < axis; ++i) outer *= y.shape()[i];
    for (int i = axis + 1; i < y.shape().rank(); ++i) inner *= y.shape()[i];
    size_t bytes = dtypeSize(y.dtype());
    int64_t outRow = y.shape()[axis] * inner, offset = 0;
    for (const Tensor* t : in) {
      int64_t row = t->shape()[axis] * inner;
      for (int64_t o = 0; o < outer; ++o)
        std::memcpy(y.data() + (o * outRow + offset) * static_cast<int64_t>(bytes),
                    t->data() + o * row * static_cast<int64_t>(bytes),
                    static_cast<size_t>(row) * bytes);
      offset += row;
    }
    return {};
  }
  case OpKind::Split: {
    const auto& a = std::get<SplitAttrs>(node.attrs);
    const Tensor& x = *in[0];
    auto axis = static_cast<int>(normalizeAxis(a.axis, x.shape().rank()).value());
    std::vector<int64_t> xStrides = x.shape().strides();
    int64_t start = 0;
    for (size_t i = 0; i < out.size(); ++i) {
      gatherBy(x, out[i], [&](const std::vector<int64_t>& idx) {
        std::vector<int64_t> src = idx;
        src[static_cast<size_t>(axis)] += start;
        return offsetOf(src, xStrides);
      });
      start += a.sizes[i];
    }
    return {};
  }
  case OpKind::Slice: {
    const auto& a = std::get<SliceAttrs>(node.attrs);
    if (a.startsAtRunTime())
      return makeError("a slice at run-time starts (", a.runTimeStarts.front().toString(),
                       ", ...) runs in compiled code only: import the model at static shapes "
                       "for the reference");
    std::vector<int64_t> xStrides = in[0]->shape().strides();
    gatherBy(*in[0], y, [&](const std::vector<int64_t>& idx) {
      int64_t o = 0;
      for (size_t d = 0; d < idx.size(); ++d)
        o += (a.starts[d] + idx[d] * a.steps[d]) * xStrides[d];
      return o;
    });
    return {};
  }
  case OpKind::Gather:
    return gather(node, in, y);
  case OpKind::GatherElements:
    return gatherElements(node, in, y);
  case OpKind::Expand: {
    std::vector<int64_t> offsets = broadcastOffsets(in[0]->shape(), y.shape());
    for (size_t i = 0; i < offsets.size(); ++i)
      copyElement(y, static_cast<int64_t>(i), *in[0], offsets[i]);
    return {};
  }
  case OpKind::Tile: {
    const Shape& xs = in[0]->shape();
    std::vector<int64_t> xStrides = xs.strides();
    gatherBy(*in[0], y, [&](const std::vector<int64_t>& idx) {
      int64_t o = 0;
      for (size_t d = 0; d < idx.size(); ++d) o += (idx[d] % xs[static_cast<int>(d)]) * xStrides[d];
      return o;
    });
    return {};
  }
  case OpKind::Pad:
    return pad(node, *in[0], y);
  case OpKind::ConstantOfShape: {
    double v = std::get<ConstantOfShapeAttrs>(node.attrs).value;
    for (int64_t i = 0; i < y.numel(); ++i) y.setDouble(i, v);
    return {};
  }
  case OpKind::DepthToSpace:
  case OpKind::SpaceToDepth:
    depthToSpace(node, *in[0], y);
    return {};
  default:
    TUNEC_ASSERT(false, "not a data movement op: " << opName(node.kind));
    return {};
  }
}

} // namespace tunec::reference
