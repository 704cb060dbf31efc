#include "cli/agreement.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

namespace tunec::cli {

double elementError(double got, double want) {
  if (std::isnan(got) || std::isnan(want))
    return std::isnan(got) && std::isnan(want) ? 0.0 : std::numeric_limits<double>::infinity();
  return got == want ? 0.0 : got - want; // equal infinities: no error
}

void Agreement::add(const Tensor& got, const Tensor& want) {
  for (int64_t i = 0; i < want.numel(); ++i) {
    const double g = got.getDouble(i), w = want.getDouble(i);
    const double d = elementError(g, w);
    nanMismatches += std::isnan(g) != std::isnan(w);
    num += d * d;
    if (std::isfinite(w)) den += w * w;
    maxAbs = std::max(maxAbs, std::fabs(d));
  }
  const Shape& s = want.shape();
  int64_t cols = s.rank() ? s[s.rank() - 1] : 1;
  if (cols < 2) return;
  for (int64_t r = 0; r < want.numel() / cols; ++r) {
    int64_t gi = 0, wi = 0;
    bool nan = false;
    for (int64_t c = 0; c < cols; ++c) {
      nan = nan ||
            std::isnan(got.getDouble(r * cols + c)) != std::isnan(want.getDouble(r * cols + c));
      if (got.getDouble(r * cols + c) > got.getDouble(r * cols + gi)) gi = c;
      if (want.getDouble(r * cols + c) > want.getDouble(r * cols + wi)) wi = c;
    }
    ++rows;
    sameTop1 += gi == wi && !nan; // a NaN where the reference has a number picks nothing
  }
}

std::string Agreement::text() const {
  char buf[160];
  int n = std::snprintf(buf, sizeof(buf), "relative L2 %.3e, max abs %.3e",
                        std::sqrt(num / std::max(den, 1e-300)), maxAbs);
  if (rows)
    n += std::snprintf(buf + n, sizeof(buf) - static_cast<size_t>(n),
                       ", top-1 agreement %.1f%% (%lld rows)",
                       100.0 * static_cast<double>(sameTop1) / static_cast<double>(rows),
                       static_cast<long long>(rows));
  std::string out = buf;
  if (nanMismatches)
    out += ", " + std::to_string(nanMismatches) + " NaN where the other is a number";
  return out;
}

} // namespace tunec::cli
