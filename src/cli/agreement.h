// How far one model's outputs are from another's over several inputs: the relative L2 error,
// the largest absolute error and the top-1 agreement (the argmax over the last axis). Shared by
// `tunec accuracy` and the accuracy report of `tunec quantize`.
#pragma once

#include "ir/tensor.h"

#include <cstdint>
#include <string>

namespace tunec::cli {

struct Agreement {
  double num = 0, den = 0, maxAbs = 0;
  int64_t rows = 0, sameTop1 = 0;
  /// Elements where one side is NaN and the other is not: errors of unbounded size (they make
  /// the relative L2 and the largest difference infinite, and their rows disagree on top-1).
  int64_t nanMismatches = 0;

  /// Adds one input's output `got` against the reference's `want` (same shape).
  void add(const Tensor& got, const Tensor& want);
  /// "relative L2 1.234e-03, max abs 5.678e-04[, top-1 agreement 100.0% (4 rows)][, 3 NaN where
  /// the other is a number]".
  std::string text() const;
};

/// The difference of two elements for an error norm: 0 where both are NaN (or equal infinities),
/// +inf where exactly one is NaN, else got - want.
double elementError(double got, double want);

} // namespace tunec::cli
