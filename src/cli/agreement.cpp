#include "cli/agreement.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace tunec::cli {

void Agreement::add(const Tensor& got, const Tensor& want) {
  for (int64_t i = 0; i < want.numel(); ++i) {
    double d = got.getDouble(i) - want.getDouble(i);
    num += d * d;
    den += want.getDouble(i) * want.getDouble(i);
    maxAbs = std::max(maxAbs, std::fabs(d));
  }
  const Shape& s = want.shape();
  int64_t cols = s.rank() ? s[s.rank() - 1] : 1;
  if (cols < 2) return;
  for (int64_t r = 0; r < want.numel() / cols; ++r) {
    int64_t gi = 0, wi = 0;
    for (int64_t c = 1; c < cols; ++c) {
      if (got.getDouble(r * cols + c) > got.getDouble(r * cols + gi)) gi = c;
      if (want.getDouble(r * cols + c) > want.getDouble(r * cols + wi)) wi = c;
    }
    ++rows;
    sameTop1 += gi == wi;
  }
}

std::string Agreement::text() const {
  char buf[160];
  int n = std::snprintf(buf, sizeof(buf), "relative L2 %.3e, max abs %.3e",
                        std::sqrt(num / std::max(den, 1e-300)), maxAbs);
  if (rows)
    std::snprintf(buf + n, sizeof(buf) - static_cast<size_t>(n),
                  ", top-1 agreement %.1f%% (%lld rows)",
                  100.0 * static_cast<double>(sameTop1) / static_cast<double>(rows),
                  static_cast<long long>(rows));
  return buf;
}

} // namespace tunec::cli
