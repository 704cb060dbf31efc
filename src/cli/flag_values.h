// Numbers the user types as flag values: every count, size and duration parsed whole, with its
// range checked and NaN and infinity refused, the error naming the flag and the range.
#pragma once

#include "support/error.h"

#include <cstdint>
#include <string>

namespace tunec::cli {

/// A whole number in [minimum, maximum] for `--flag` (decimal, no sign other than '-', no
/// trailing text); "4294967297" for a range up to 2^31 is an error, never a wrapped value.
Expected<int64_t> parseInteger(const std::string& flag, const std::string& text, int64_t minimum,
                               int64_t maximum);
/// A finite number in [minimum, maximum] for `--flag` (NaN and infinity refused).
Expected<double> parseNumber(const std::string& flag, const std::string& text, double minimum,
                             double maximum);
/// A positive duration for `--flag`: a number with an optional unit s, m or h ("90s", "30m",
/// "2h", "0.5"), at most `maxSeconds`; returns seconds.
Expected<double> parseDuration(const std::string& flag, const std::string& text, double maxSeconds);

} // namespace tunec::cli
