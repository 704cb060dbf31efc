// A STREAM-like memory bandwidth probe (the triad a = b + s c over arrays well beyond the last
// level cache), the memory roof of `tunec profile`'s roofline.
#pragma once

#include <cstdint>

namespace tunec {

/// Measured bandwidth in GB/s (10^9 bytes/s) of `threads` threads running the triad over three
/// arrays of `totalBytes` together, counting 3 arrays moved per pass (as STREAM does); the
/// fastest of the passes (at least five, and at least 0.2 s of them) after a first-touch pass,
/// since noise only slows it down. Give 4x the last-level cache for the memory bandwidth, half
/// of it for the cache's.
double measureBandwidth(int threads, int64_t totalBytes);

} // namespace tunec
