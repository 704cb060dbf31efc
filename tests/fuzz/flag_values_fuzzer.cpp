// libFuzzer target: arbitrary text as the value of a count, number or duration flag. A value is
// refused, or accepted inside its range and finite; nothing else (no wrap, NaN or throw).
#include "cli/flag_values.h"

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  if (auto n = tunec::cli::parseInteger("trials", text, 1, 1'000'000'000))
    if (*n < 1 || *n > 1'000'000'000) std::abort();
  if (auto n = tunec::cli::parseInteger("seed", text, -5, INT64_MAX))
    if (*n < -5) std::abort();
  if (auto x = tunec::cli::parseNumber("tolerance", text, 0, 1000))
    if (!std::isfinite(*x) || *x < 0 || *x > 1000) std::abort();
  if (auto s = tunec::cli::parseDuration("time-budget", text, 3600))
    if (!std::isfinite(*s) || !(*s > 0) || *s > 3600) std::abort();
  return 0;
}
