// Reference Resize: each resampled axis in turn, from the last to the first (ONNX's reference
// interpolates the inner axes first), every output a sum of its taps (ir/resize.h) in double.
#include "ir/resize.h"

#include "reference/kernels.h"

#include <cstring>

namespace tunec::reference {

Status resize(const Node& node, Inputs in, Outputs out) {
  const auto& a = std::get<ResizeAttrs>(node.attrs);
  const Tensor& x = *in[0];
  Tensor& y = out[0];
  std::vector<int64_t> dims = x.shape().dims();
  const bool nearest = a.mode == ResizeMode::Nearest;
  const auto elem = static_cast<int64_t>(dtypeSize(x.dtype()));
  // Nearest copies bytes (every dtype exactly); the others sum in double.
  std::vector<std::byte> bytes(x.data(), x.data() + x.numel() * elem);
  std::vector<double> values = nearest ? std::vector<double>() : toDoubles(x);
  for (int axis = x.shape().rank() - 1; axis >= 0; --axis) {
    const auto d = static_cast<size_t>(axis);
    if (!resizesAxis(a, axis, dims[d])) continue;
    const ResizeTaps t = resizeTaps(a, axis, dims[d]);
    int64_t outer = 1, inner = 1;
    for (size_t k = 0; k < d; ++k) outer *= dims[k];
    for (size_t k = d + 1; k < dims.size(); ++k) inner *= dims[k];
    const int64_t inLength = dims[d], outLength = a.sizes[d];
    const int64_t count = outer * outLength * inner;
    std::vector<std::byte> nextBytes(nearest ? static_cast<size_t>(count * elem) : 0);
    std::vector<double> next(nearest ? 0 : static_cast<size_t>(count));
    for (int64_t p = 0; p < outer; ++p)
      for (int64_t o = 0; o < outLength; ++o)
        for (int64_t i = 0; i < inner; ++i) {
          const int64_t to = (p * outLength + o) * inner + i;
          if (nearest) {
            const int64_t from = (p * inLength + t.index[static_cast<size_t>(o)]) * inner + i;
            std::memcpy(&nextBytes[static_cast<size_t>(to * elem)],
                        &bytes[static_cast<size_t>(from * elem)], static_cast<size_t>(elem));
            continue;
          }
          double sum = 0;
          for (int64_t k = 0; k < t.taps; ++k) {
            const auto tap = static_cast<size_t>(o * t.taps + k);
            sum += t.weight[tap] *
                   values[static_cast<size_t>((p * inLength + t.index[tap]) * inner + i)];
          }
          next[static_cast<size_t>(to)] = sum;
        }
    bytes = std::move(nextBytes);
    values = std::move(next);
    dims[d] = outLength;
  }
  if (nearest)
    std::memcpy(y.data(), bytes.data(), bytes.size());
  else
    fromDoubles(y, values);
  return {};
}

} // namespace tunec::reference
