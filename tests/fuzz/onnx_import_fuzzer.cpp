// libFuzzer target: arbitrary bytes as an ONNX model file. Any input must import or be
// rejected with an Error; never a crash, hang, huge allocation or sanitizer report.
#include "frontend/onnx_importer.h"
#include "ir/verifier.h"
#include "reference/reference.h"

#include <cstddef>
#include <cstdint>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tunec::ImportOptions options;
  options.evaluator = tunec::runReferenceNode;
  // External data may only be read inside the model's directory: one that does not exist.
  auto graph = tunec::importOnnxBytes(std::string(reinterpret_cast<const char*>(data), size),
                                      "/nonexistent/fuzz", options);
  if (graph && !tunec::verifyGraph(*graph)) __builtin_trap(); // imported graphs are well formed
  return 0;
}
