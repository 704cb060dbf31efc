// libFuzzer target: arbitrary bytes as model.so's plan blob (header, plan JSON, constants). A
// blob must parse with every tensor and step operand in range, or be rejected.
#include "runtime/model_plan.h"

#include <cstddef>
#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto parsed = tunec::rt::parseModel(data, static_cast<int64_t>(size));
  (void)parsed;
  return 0;
}
