// libFuzzer target: tuning databases edited behind tunec's back. Each input is a script of
// edits applied with SQLite itself to a fresh tunec database holding two records (triggers,
// views, extra tables and indexes, dropped or renamed objects, schema and application ids,
// journal modes, rows with odd values, a byte written into the file), then the file is opened
// for writing and for reading and every operation the commands use runs on it. Any script must
// end in a clean error or a correct result: never a crash, hang or sanitizer report.
#include "tuning_db/database.h"

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <sqlite3.h>
#include <sstream>
#include <string>
#include <unistd.h>

namespace {

using tunec::db::Record;
using tunec::db::TuningDatabase;

Record record(int64_t m, double medianUs) {
  Record r;
  r.workload = {{"template", "matmul"}, {"m", m}, {"n", 64}, {"k", 64}};
  r.config = {{"mr", 8}, {"nr", 32}};
  r.target.isaFeatures = {"avx2", "fma"};
  r.target.cores = 2;
  r.target.l1d = 49152, r.target.l2 = 1048576, r.target.l3 = 33554432;
  r.target.model = "cpu";
  r.templateVersion = 1;
  r.medianUs = medianUs, r.minUs = medianUs, r.gflops = 1.0, r.repeats = 3;
  r.tunecVersion = "0.1.0", r.host = "h", r.createdAt = "2026-12-03T00:00:00Z";
  return r;
}

// The edits a script chooses from; `%d` takes a number and `%s` a text from the script.
const char* kEdits[] = {
    "CREATE TRIGGER t%d AFTER INSERT ON records BEGIN DELETE FROM records; END;",
    "CREATE TRIGGER u%d BEFORE UPDATE ON records BEGIN SELECT RAISE(ABORT, 'no'); END;",
    "CREATE VIEW v%d AS WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT x "
    "FROM c;",
    "ALTER TABLE records RENAME TO r%d; CREATE VIEW records AS SELECT * FROM r%d;",
    "CREATE TABLE extra%d(x);",
    "CREATE INDEX i%d ON records(gflops);",
    "DROP INDEX records_best;",
    "DROP INDEX workloads_template;",
    "DROP TABLE records;",
    "DROP TABLE targets;",
    "PRAGMA user_version = %d;",
    "PRAGMA application_id = %d;",
    "PRAGMA journal_mode = WAL;",
    "PRAGMA journal_mode = DELETE;",
    "UPDATE records SET config = '%s';",
    "UPDATE workloads SET json = '%s';",
    "UPDATE targets SET json = '%s';",
    "UPDATE records SET median_us = %d, min_us = -%d;",
    "UPDATE records SET status = 'ok', median_us = NULL;",
    "UPDATE records SET template_version = %d;",
    "DELETE FROM workloads;",
    "DELETE FROM targets WHERE id = %d;",
    "INSERT INTO records(workload_id, target_id, template_version, config, status, tunec_version, "
    "host, created_at) VALUES (%d, %d, 1, '%s', 'ok', '', '', '');",
    "UPDATE workloads SET key = '%s';",
};
constexpr size_t kEditCount = sizeof(kEdits) / sizeof(kEdits[0]);

std::string fill(const char* pattern, int64_t number, const std::string& text) {
  std::string out;
  for (const char* p = pattern; *p; ++p) {
    if (p[0] == '%' && p[1] == 'd') {
      out += std::to_string(number), ++p;
    } else if (p[0] == '%' && p[1] == 's') {
      for (char c : text) out += c == '\'' ? std::string("''") : std::string(1, c);
      ++p;
    } else {
      out += *p;
    }
  }
  return out;
}

const std::string& freshDatabase(const std::string& path) {
  static const std::string bytes = [&] {
    for (const char* s : {"", "-wal", "-shm"}) std::remove((path + s).c_str());
    {
      auto db = TuningDatabase::open(path);
      if (!db || !db->insert({record(64, 10.0), record(128, 20.0)})) __builtin_trap();
    }
    sqlite3* raw = nullptr;
    sqlite3_open(path.c_str(), &raw);
    sqlite3_exec(raw, "PRAGMA journal_mode = DELETE;", nullptr, nullptr, nullptr);
    sqlite3_close(raw);
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }();
  return bytes;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = "/tmp/tunec_db_fuzz_" + std::to_string(::getpid()) + ".db";
  const std::string& fresh = freshDatabase(path);
  for (const char* s : {"-wal", "-shm", "-journal"}) std::remove((path + s).c_str());
  std::ofstream(path, std::ios::binary | std::ios::trunc) << fresh;

  // The script: per edit, one byte choosing it, four of number and a length-prefixed text; an
  // edit byte of 0xff writes the next byte into the file at the offset the number gives.
  sqlite3* raw = nullptr;
  if (sqlite3_open(path.c_str(), &raw) != SQLITE_OK) __builtin_trap();
  size_t i = 0;
  for (int edits = 0; i + 5 <= size && edits < 16; ++edits) {
    uint8_t choice = data[i];
    int32_t number = static_cast<int32_t>(data[i + 1] | data[i + 2] << 8 | data[i + 3] << 16 |
                                          static_cast<uint32_t>(data[i + 4]) << 24);
    i += 5;
    size_t length = i < size ? std::min<size_t>(data[i], size - i - 1) : 0;
    std::string text =
        i < size ? std::string(reinterpret_cast<const char*>(data + i + 1), length) : std::string();
    i += i < size ? 1 + length : 0;
    if (choice == 0xff) {
      sqlite3_close(raw);
      std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
      f.seekp(static_cast<std::streamoff>(static_cast<uint32_t>(number) % (fresh.size() + 1)));
      f.put(text.empty() ? '\0' : text[0]);
      f.close();
      if (sqlite3_open(path.c_str(), &raw) != SQLITE_OK) break;
      continue;
    }
    std::string sql = fill(kEdits[choice % kEditCount], number, text);
    sqlite3_exec(raw, sql.c_str(), nullptr, nullptr, nullptr); // an edit may fail: fine
  }
  sqlite3_close(raw);

  for (bool readOnly : {false, true}) {
    auto db = readOnly ? TuningDatabase::openReadOnly(path) : TuningDatabase::open(path);
    if (!db) continue; // refused: the clean outcome for most scripts
    (void)db->stats();
    (void)db->verify(nullptr);
    (void)db->allRecords();
    (void)db->best(record(64, 1).workloadKey(), record(64, 1).target, 1);
    std::stringstream out;
    (void)db->exportJsonl(out, "", false);
    if (!readOnly) (void)db->insert({record(256, 5.0)});
  }
  return 0;
}
