// The packing helpers against element-by-element definitions (packing.h), on random data, for
// every tail: K and N not multiples of the 8 x 8 transpose blocks or of the panel width.
#include "runtime/packing.h"

#include <gtest/gtest.h>
#include <random>
#include <vector>

namespace {

TEST(Packing, PackBMatchesItsDefinitionTransposedOrNot) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  int checked = 0;
  for (int64_t nr : {16, 24, 32, 64})
    for (int64_t k : {1, 7, 8, 13, 64})
      for (int64_t n : {1, 8, 9, 40, 48, 128})
        for (int32_t transposed : {0, 1}) {
          int64_t ld = (transposed ? k : n) + 3; // a strided source: rows 3 floats apart
          std::vector<float> b(static_cast<size_t>((transposed ? n : k) * ld));
          for (float& x : b) x = dist(rng);
          int64_t panels = (n + nr - 1) / nr;
          std::vector<float> got(static_cast<size_t>(panels * k * nr), 99.f);
          tunec_pack_b_f32(b.data(), ld, transposed, k, n, nr, got.data());
          for (int64_t p = 0; p < panels; ++p)
            for (int64_t kk = 0; kk < k; ++kk)
              for (int64_t j = 0; j < nr; ++j) {
                int64_t col = p * nr + j;
                float want = col >= n     ? 0.f
                             : transposed ? b[static_cast<size_t>(col * ld + kk)]
                                          : b[static_cast<size_t>(kk * ld + col)];
                ASSERT_EQ(got[static_cast<size_t>((p * k + kk) * nr + j)], want)
                    << "panel " << p << " k " << kk << " column " << j << " of k=" << k
                    << " n=" << n << " nr=" << nr << " transposed=" << transposed;
              }
          ++checked;
        }
  EXPECT_EQ(checked, 240);
}

} // namespace
