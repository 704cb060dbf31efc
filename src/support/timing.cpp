// Repeated timing with a steady clock.
#include "support/timing.h"

#include <algorithm>
#include <chrono>
#include <ctime>
#include <immintrin.h>
#include <vector>

namespace tunec {

std::string utcTimestamp() {
  std::time_t now = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  return buf;
}

void evictFromCaches(const void* p, size_t bytes) {
  const char* c = static_cast<const char*>(p);
  for (size_t i = 0; i < bytes; i += 64) _mm_clflush(c + i);
  _mm_mfence();
}

Timing timeRepeated(const std::function<void()>& fn, double minSeconds, int minRuns,
                    const std::function<void()>& beforeEach) {
  using Clock = std::chrono::steady_clock;
  fn();
  std::vector<double> samples;
  auto start = Clock::now();
  while (static_cast<int>(samples.size()) < minRuns ||
         std::chrono::duration<double>(Clock::now() - start).count() < minSeconds) {
    if (beforeEach) beforeEach();
    auto t0 = Clock::now();
    fn();
    samples.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
    if (samples.size() > 100000) break;
  }
  std::sort(samples.begin(), samples.end());
  return {samples[samples.size() / 2], samples.front(), static_cast<int>(samples.size())};
}

Timing timeSteady(const std::function<void()>& fn, double minSeconds, int minRuns,
                  const std::function<void()>& beforeEach, double maxSpread) {
  Timing first = timeRepeated(fn, minSeconds, minRuns, beforeEach);
  if (first.medianSeconds <= maxSpread * first.minSeconds) return first;
  Timing second = timeRepeated(fn, minSeconds, minRuns, beforeEach);
  return second.medianSeconds < first.medianSeconds ? second : first;
}

} // namespace tunec
