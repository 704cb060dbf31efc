// Internal: the reference kernels by op family, dispatched from executor.cpp.
#pragma once

#include "ir/graph.h"

#include <functional>
#include <span>
#include <vector>

namespace tunec::reference {

using Inputs = std::span<const Tensor* const>;
using Outputs = std::span<Tensor>;

/// All elements converted to double, and back (rounded to the tensor's dtype).
std::vector<double> toDoubles(const Tensor& t);
void fromDoubles(Tensor& t, const std::vector<double>& values);
/// Sums of integer products (MatMul, Conv) into `t`: rounded to its dtype when it is a float;
/// when it is an integer, the sums are exact (double holds every integer below 2^53: 8-bit
/// products over 10^11 terms) and are stored wrapping to its width, as ONNX Runtime's and
/// tunec's integer kernels wrap.
void fromSums(Tensor& t, const std::vector<double>& values);

/// For every element of `out` (row-major), the linear offset of the element of a tensor of
/// shape `in` that numpy broadcasting reads.
std::vector<int64_t> broadcastOffsets(const Shape& in, const Shape& out);

/// Calls f(index, linear) for every multi-index of `shape` in row-major order.
void forEachIndex(const Shape& shape,
                  const std::function<void(const std::vector<int64_t>&, int64_t)>& f);

Status elementwise(const Node& node, Inputs in, Outputs out);
Status conv(const Node& node, Inputs in, Outputs out);
Status gemm(const Node& node, Inputs in, Outputs out);
Status matmul(const Node& node, Inputs in, Outputs out);
Status matmulNBits(const Node& node, Inputs in, Outputs out);
Status pool(const Node& node, Inputs in, Outputs out);
Status normalize(const Node& node, Inputs in, Outputs out);
Status reduce(const Node& node, Inputs in, Outputs out);
Status dataMovement(const Node& node, Inputs in, Outputs out);
Status resize(const Node& node, Inputs in, Outputs out);
/// QuantizeLinear and DequantizeLinear.
Status quantize(const Node& node, Inputs in, Outputs out);
/// One element quantized to u8 or i8 (as a float holding the integer).
float quantizeValue(float x, float scale, int64_t zeroPoint, DType to);

} // namespace tunec::reference
