// libFuzzer target: arbitrary bytes as a JSONL import into an in-memory tuning database. Any
// input must be rejected line by line or imported; never a crash, hang or sanitizer report.
#include "tuning_db/database.h"

#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto db = tunec::db::TuningDatabase::open(":memory:", true);
  if (!db) __builtin_trap();
  std::stringstream in(std::string(reinterpret_cast<const char*>(data), size));
  auto report = db->importJsonl(in, nullptr);
  if (!report) __builtin_trap();
  std::stringstream out;
  if (!db->exportJsonl(out, "", false)) __builtin_trap();
  return 0;
}
