// Resize's sampling along one axis, decided once for the reference and the compiled kernel:
// each output index reads `taps` inputs (indices clamped into the axis, ONNX's edge padding)
// with weights from the coordinate transform and the mode (ONNX's Resize, opsets 10 to 19).
#pragma once

#include "ir/op_attrs.h"

#include <cstdint>
#include <vector>

namespace tunec {

struct ResizeTaps {
  int64_t taps = 1; ///< 1 (nearest), 2 (linear) or 4 (cubic)
  /// [output length x taps] input indices in [0, input length) and their weights.
  std::vector<int64_t> index;
  std::vector<double> weight;
};

/// The taps of axis `axis` of input length `inLength` (a.sizes[axis] outputs).
ResizeTaps resizeTaps(const ResizeAttrs& a, int axis, int64_t inLength);

/// True when axis `axis` is resampled (its length or its scale differs from 1:1).
bool resizesAxis(const ResizeAttrs& a, int axis, int64_t inLength);

} // namespace tunec
