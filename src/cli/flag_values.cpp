#include "cli/flag_values.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>

namespace tunec::cli {

Expected<int64_t> parseInteger(const std::string& flag, const std::string& text, int64_t minimum,
                               int64_t maximum) {
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(text.c_str(), &end, 10);
  bool whole =
      !text.empty() && end && *end == 0 && text.find_first_of(" \t\n+") == std::string::npos;
  if (!whole || errno == ERANGE || v < minimum || v > maximum)
    return makeError("--", flag, " must be a whole number from ", minimum, " to ", maximum,
                     ", not '", text, "'");
  return static_cast<int64_t>(v);
}

Expected<double> parseNumber(const std::string& flag, const std::string& text, double minimum,
                             double maximum) {
  char* end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  if (text.empty() || !end || *end != 0 || !std::isfinite(v) || v < minimum || v > maximum)
    return makeError("--", flag, " must be a number from ", minimum, " to ", maximum, ", not '",
                     text, "'");
  return v;
}

Expected<double> parseDuration(const std::string& flag, const std::string& text,
                               double maxSeconds) {
  char* end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  std::string unit = end ? end : "";
  double scale = unit.empty() || unit == "s" ? 1 : unit == "m" ? 60 : unit == "h" ? 3600 : -1;
  if (text.empty() || end == text.c_str() || scale < 0 || !std::isfinite(v) || !(v > 0) ||
      v * scale > maxSeconds) {
    std::string most =
        maxSeconds >= 3600 ? std::to_string(static_cast<int64_t>(maxSeconds / 3600)) + "h"
        : maxSeconds >= 60 ? std::to_string(static_cast<int64_t>(maxSeconds / 60)) + "m"
                           : std::to_string(static_cast<int64_t>(maxSeconds)) + "s";
    return makeError("--", flag,
                     " must be a duration such as 0.5, 90s, 30m or 2h (positive, at most ", most,
                     "), not '", text, "'");
  }
  return v * scale;
}

} // namespace tunec::cli
