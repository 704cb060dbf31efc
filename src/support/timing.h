// Timing for benchmarks: warm-up, then repeats until a minimum duration; median and min.
#pragma once

#include <functional>
#include <string>

namespace tunec {

struct Timing {
  double medianSeconds = 0;
  double minSeconds = 0;
  int runs = 0;
};

/// The current time in ISO 8601 UTC ("2026-11-30T18:05:00Z"), for records.
std::string utcTimestamp();

/// Runs `fn` once to warm up, then repeatedly until `minSeconds` have passed and at least
/// `minRuns` runs were made. `beforeEach`, if given, runs untimed before every timed run (to
/// flush the caches, say).
Timing timeRepeated(const std::function<void()>& fn, double minSeconds, int minRuns = 5,
                    const std::function<void()>& beforeEach = {});

/// Writes back and evicts every cache line of [p, p + bytes) from every cache level (to time a
/// kernel whose weights come from memory, as in a model whose constants exceed the L3).
void evictFromCaches(const void* p, size_t bytes);

/// timeRepeated, and once more when the runs were disturbed (a median above `maxSpread` times
/// the minimum: another process's burst on a shared machine); returns the calmer of the two,
/// the one with the lower median. The tuner times candidates with it, so that one burst does
/// not rank a config far below what it runs at.
Timing timeSteady(const std::function<void()>& fn, double minSeconds, int minRuns,
                  const std::function<void()>& beforeEach = {}, double maxSpread = 1.25);

} // namespace tunec
