// Timing for benchmarks: warm-up, then repeats until a minimum duration; median and min.
#pragma once

#include <functional>

namespace tunec {

struct Timing {
  double medianSeconds = 0;
  double minSeconds = 0;
  int runs = 0;
};

/// Runs `fn` once to warm up, then repeatedly until `minSeconds` have passed and at least
/// `minRuns` runs were made.
Timing timeRepeated(const std::function<void()>& fn, double minSeconds, int minRuns = 5);

} // namespace tunec
