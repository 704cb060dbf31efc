// Aborting path of TUNEC_ASSERT: internal invariants only, never user input.
#include "support/error.h"

namespace tunec {

void assertionFailed(const char* file, int line, const char* condition,
                     const std::string& message) {
  std::fprintf(stderr, "tunec internal error at %s:%d: assertion '%s' failed%s%s\n", file, line,
               condition, message.empty() ? "" : ": ", message.c_str());
  std::fflush(stderr);
  std::abort();
}

} // namespace tunec
