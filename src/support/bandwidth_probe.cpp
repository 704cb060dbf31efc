// The triad on std::threads, each over its own slice (first touched by that thread, so on its
// NUMA node).
#include "support/bandwidth_probe.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

namespace tunec {

double measureBandwidth(int threads, int64_t totalBytes) {
  threads = std::max(threads, 1);
  const int64_t arrayBytes = std::max<int64_t>(64 << 10, totalBytes / 3) / 64 * 64;
  const int64_t n = arrayBytes / static_cast<int64_t>(sizeof(float));
  std::unique_ptr<float[]> a(new float[static_cast<size_t>(n)]);
  std::unique_ptr<float[]> b(new float[static_cast<size_t>(n)]);
  std::unique_ptr<float[]> c(new float[static_cast<size_t>(n)]);
  auto pass = [&](bool init) {
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t)
      pool.emplace_back([&, t] {
        int64_t begin = n * t / threads, end = n * (t + 1) / threads;
        float* pa = a.get();
        const float* pb = b.get();
        const float* pc = c.get();
        if (init) {
          std::fill(a.get() + begin, a.get() + end, 0.f);
          std::fill(b.get() + begin, b.get() + end, 1.f);
          std::fill(c.get() + begin, c.get() + end, 2.f);
          return;
        }
        for (int64_t i = begin; i < end; ++i) pa[i] = pb[i] + 3.f * pc[i];
      });
    for (std::thread& t : pool) t.join();
  };
  pass(true);
  double best = 0, spent = 0;
  for (int run = 0; run < 5 || (spent < 0.2 && run < 1000); ++run) {
    auto t0 = std::chrono::steady_clock::now();
    pass(false);
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    spent += s;
    best = std::max(best, 3.0 * static_cast<double>(arrayBytes) / s / 1e9);
  }
  volatile float sink = a[static_cast<size_t>(n / 2)];
  (void)sink;
  return best;
}

} // namespace tunec
