// libFuzzer target: arbitrary bytes as a .npy or TensorProto tensor file.
#include "frontend/tensor_io.h"

#include <cstddef>
#include <cstdint>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto t = tunec::parseTensorBytes(std::string(reinterpret_cast<const char*>(data), size), "f");
  if (t && t->byteSize() > size) __builtin_trap(); // a tensor holds no more than the file gave
  return 0;
}
