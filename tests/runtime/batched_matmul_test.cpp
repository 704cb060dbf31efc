// runBatchedMatmul (the run-time-extent matmul of light_kernels.h) against a double-precision
// definition on random data, on each register tile the CPU has (AVX-512, AVX2) and the portable
// form: row counts around its 4-row tiles, column counts around its 16- and 64-column tiles, B
// shared or per batch, stored [k, n] or transposed [n, k] (a prompt's Q K^T, a decode step's).
#include "runtime/light_kernels.h"

#include <algorithm>
#include <cmath>
#include <gtest/gtest.h>
#include <random>
#include <string>
#include <vector>

namespace {

using tunec::rt::RowsIsa;

TEST(BatchedMatmul, EveryRegisterTileMatchesItsDefinition) {
  std::vector<RowsIsa> isas = {RowsIsa::Portable};
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    isas.push_back(RowsIsa::Avx2);
  else
    std::printf("note: no AVX2 on this CPU: its register tile is not run\n");
  if (__builtin_cpu_supports("avx512f"))
    isas.push_back(RowsIsa::Avx512);
  else
    std::printf("note: no AVX-512 on this CPU: its register tile is not run\n");
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  const int64_t batch = 2;
  int checked = 0;
  for (RowsIsa isa : isas)
    for (int64_t m : {1, 3, 4, 5, 17})
      for (int64_t n : {1, 15, 16, 17, 64, 65, 130})
        for (int64_t k : {1, 7, 64})
          for (bool shared : {false, true})
            for (bool transposed : {false, true}) {
              SCOPED_TRACE("isa " + std::to_string(static_cast<int>(isa)) + ", m " +
                           std::to_string(m) + ", n " + std::to_string(n) + ", k " +
                           std::to_string(k) + (shared ? ", shared B" : "") +
                           (transposed ? ", B transposed" : ""));
              std::vector<float> a(static_cast<size_t>(batch * m * k)),
                  b(static_cast<size_t>((shared ? 1 : batch) * k * n));
              for (float& x : a) x = dist(rng);
              for (float& x : b) x = dist(rng);
              std::vector<float> c(static_cast<size_t>(batch * m * n + 5), 7.f);
              tunec::rt::runBatchedMatmul(a.data(), b.data(), c.data(), batch, m, n, k, m * k,
                                          shared ? 0 : k * n, 1, transposed, isa);
              double err = 0, norm = 0;
              for (int64_t i = 0; i < batch; ++i)
                for (int64_t r = 0; r < m; ++r)
                  for (int64_t j = 0; j < n; ++j) {
                    double want = 0;
                    const float* bi = b.data() + (shared ? 0 : i * k * n);
                    for (int64_t p = 0; p < k; ++p)
                      want += static_cast<double>(a[static_cast<size_t>((i * m + r) * k + p)]) *
                              (transposed ? bi[j * k + p] : bi[p * n + j]);
                    const double got = c[static_cast<size_t>((i * m + r) * n + j)];
                    err += (got - want) * (got - want);
                    norm += want * want;
                  }
              EXPECT_LE(std::sqrt(err / std::max(norm, 1e-30)), 1e-6);
              for (size_t i = static_cast<size_t>(batch * m * n); i < c.size(); ++i)
                EXPECT_EQ(c[i], 7.f) << "written past C at " << i;
              ++checked;
            }
  EXPECT_EQ(checked, static_cast<int>(isas.size()) * 5 * 7 * 3 * 2 * 2);
}

} // namespace
