// Reference Gemm and MatMul (batched, broadcasting, 1-d promotion) in double.
#include "ir/op_registry.h"
#include "reference/kernels.h"

namespace tunec::reference {

namespace {

// C[m x n] += A[m x k] * B[k x n], all row-major with the given leading dimensions.
void matmulBlock(const double* a, const double* b, double* c, int64_t m, int64_t n, int64_t k) {
  for (int64_t i = 0; i < m; ++i)
    for (int64_t p = 0; p < k; ++p) {
      double av = a[i * k + p];
      const double* brow = b + p * n;
      double* crow = c + i * n;
      for (int64_t j = 0; j < n; ++j) crow[j] += av * brow[j];
    }
}

std::vector<double> transposed(const std::vector<double>& v, int64_t rows, int64_t cols) {
  std::vector<double> t(v.size());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      t[static_cast<size_t>(c * rows + r)] = v[static_cast<size_t>(r * cols + c)];
  return t;
}

} // namespace

Status gemm(const Node& node, Inputs in, Outputs out) {
  const auto& attrs = std::get<GemmAttrs>(node.attrs);
  const Shape& sa = in[0]->shape();
  const Shape& sb = in[1]->shape();
  int64_t m = out[0].shape()[0], n = out[0].shape()[1];
  int64_t k = attrs.transA ? sa[0] : sa[1];
  std::vector<double> a = toDoubles(*in[0]), b = toDoubles(*in[1]);
  if (attrs.transA) a = transposed(a, sa[0], sa[1]);
  if (attrs.transB) b = transposed(b, sb[0], sb[1]);
  std::vector<double> c(static_cast<size_t>(m * n), 0.0);
  matmulBlock(a.data(), b.data(), c.data(), m, n, k);
  for (auto& v : c) v *= attrs.alpha;
  if (in.size() > 2 && in[2]) {
    std::vector<double> bias = toDoubles(*in[2]);
    std::vector<int64_t> offsets = broadcastOffsets(in[2]->shape(), out[0].shape());
    for (size_t i = 0; i < c.size(); ++i)
      c[i] += attrs.beta * bias[static_cast<size_t>(offsets[i])];
  }
  fromDoubles(out[0], c);
  return {};
}

Status matmul(const Node&, Inputs in, Outputs out) {
  Shape sa = in[0]->shape(), sb = in[1]->shape();
  if (sa.rank() == 1) sa = Shape({1, sa[0]});
  if (sb.rank() == 1) sb = Shape({sb[0], 1});
  int64_t m = sa[sa.rank() - 2], k = sa[sa.rank() - 1], n = sb[sb.rank() - 1];
  Shape batchA(std::vector<int64_t>(sa.dims().begin(), sa.dims().end() - 2));
  Shape batchB(std::vector<int64_t>(sb.dims().begin(), sb.dims().end() - 2));
  auto batch = broadcastShapes(batchA, batchB);
  TUNEC_ASSERT(batch.isOk(), "inference accepted unbroadcastable batch dims");
  std::vector<int64_t> offA = broadcastOffsets(batchA, *batch),
                       offB = broadcastOffsets(batchB, *batch);
  std::vector<double> a = toDoubles(*in[0]), b = toDoubles(*in[1]);
  std::vector<double> c(static_cast<size_t>(batch->numel() * m * n), 0.0);
  for (int64_t i = 0; i < batch->numel(); ++i)
    matmulBlock(&a[static_cast<size_t>(offA[static_cast<size_t>(i)] * m * k)],
                &b[static_cast<size_t>(offB[static_cast<size_t>(i)] * k * n)],
                &c[static_cast<size_t>(i * m * n)], m, n, k);
  fromSums(out[0], c);
  return {};
}

// Y[..., n] = sum_k A[..., k] (code[n, k] - zero_point[n, k / block]) scale[n, k / block].
Status matmulNBits(const Node& node, Inputs in, Outputs out) {
  const auto& q = std::get<BlockQuantAttrs>(node.attrs);
  const Shape& codes = in[1]->shape();
  const int64_t n = codes[0], k = codes[1], blocks = (k + q.block - 1) / q.block;
  const int64_t rows = in[0]->numel() / k;
  std::vector<double> a = toDoubles(*in[0]), scales = toDoubles(*in[2]), zp = toDoubles(*in[3]);
  const auto* c = in[1]->dataAs<uint8_t>();
  std::vector<double> w(static_cast<size_t>(n * k));
  for (int64_t col = 0; col < n; ++col)
    for (int64_t i = 0; i < k; ++i) {
      auto b = static_cast<size_t>(col * blocks + i / q.block);
      w[static_cast<size_t>(i * n + col)] =
          (static_cast<double>(c[col * k + i]) - zp[b]) * scales[b];
    }
  std::vector<double> y(static_cast<size_t>(rows * n), 0.0);
  matmulBlock(a.data(), w.data(), y.data(), rows, n, k);
  fromDoubles(out[0], y);
  return {};
}

} // namespace tunec::reference
