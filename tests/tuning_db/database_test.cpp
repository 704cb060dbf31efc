// The tuning database: lookups, sharing, and robustness (concurrent writers, a writer killed
// mid-batch, corrupt/foreign/newer files, truncated and hostile JSONL).
#include "tuning_db/database.h"

#include <csignal>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sstream>
#include <sys/wait.h>
#include <unistd.h>

namespace tunec::db {
namespace {

std::string tempDb(const std::string& name) {
  std::string path = ::testing::TempDir() + "/" + name + "_" + std::to_string(::getpid()) + ".db";
  for (const char* suffix : {"", "-wal", "-shm"}) std::remove((path + suffix).c_str());
  return path;
}

TargetInfo target(const std::string& model = "Test CPU", int cores = 2) {
  TargetInfo t;
  t.isaFeatures = {"avx2", "avx512f", "fma"};
  t.cores = cores;
  t.l1d = 49152, t.l2 = 1048576, t.l3 = 33554432;
  t.model = model;
  return t;
}

Record record(int64_t m, int tile, double medianUs, const TargetInfo& t = target()) {
  Record r;
  r.workload = {{"template", "matmul"}, {"m", m}, {"n", 64}, {"k", 64}};
  r.config = {{"mr", tile}, {"nr", 32}};
  r.target = t;
  r.templateVersion = 1;
  r.medianUs = medianUs;
  r.minUs = medianUs * 0.9;
  r.gflops = 2.0 * m * 64 * 64 / medianUs / 1e3;
  r.repeats = 10;
  r.tunecVersion = "0.1.0";
  r.host = "testhost";
  r.createdAt = "2026-11-30T00:00:00Z";
  return r;
}

std::string readBytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

TEST(TuningDb, BestLookupExactAndCompatibleTarget) {
  auto db = TuningDatabase::open(tempDb("best"));
  ASSERT_TRUE(db.isOk()) << db.error().message();
  auto added =
      db->insert({record(128, 4, 50), record(128, 8, 30), record(128, 6, 40), record(256, 8, 90)});
  ASSERT_TRUE(added.isOk()) << added.error().message();
  EXPECT_EQ(*added, 4);
  std::string key = record(128, 0, 1).workloadKey();
  auto best = db->best(key, target(), 1);
  ASSERT_TRUE(best.isOk() && best->has_value());
  EXPECT_EQ((*best)->record.config["mr"], 8);
  EXPECT_TRUE((*best)->exactTarget);
  // Another machine with the same ISA: nothing exact, found only when asked, and said so.
  TargetInfo other = target("Other CPU", 64);
  auto none = db->best(key, other, 1);
  ASSERT_TRUE(none.isOk());
  EXPECT_FALSE(none->has_value());
  auto compatible = db->best(key, other, 1, TargetMatch::IsaFeatures);
  ASSERT_TRUE(compatible.isOk() && compatible->has_value());
  EXPECT_FALSE((*compatible)->exactTarget);
  // Records of an older template version are not applied.
  auto newer = db->best(key, target(), 2);
  ASSERT_TRUE(newer.isOk());
  EXPECT_FALSE(newer->has_value());
  // Duplicates are skipped.
  EXPECT_EQ(*db->insert({record(128, 8, 31)}), 0);
  auto stats = db->stats();
  ASSERT_TRUE(stats.isOk());
  EXPECT_EQ(stats->workloads, 2);
  EXPECT_EQ(stats->records, 4);
  EXPECT_EQ(stats->targets, 1);
}

TEST(TuningDb, ExportImportRoundTripIsIdempotent) {
  auto a = TuningDatabase::open(tempDb("export_a"));
  ASSERT_TRUE(a.isOk());
  Record failed = record(64, 2, 0);
  failed.status = db::MeasureStatus::Error;
  failed.error = "crash: SIGSEGV";
  failed.gflops = 0;
  ASSERT_TRUE(a->insert({record(64, 4, 20), record(64, 8, 10), failed}).isOk());
  std::stringstream all, best;
  ASSERT_TRUE(a->exportJsonl(all, "", false).isOk());
  ASSERT_TRUE(a->exportJsonl(best, "", true).isOk());
  std::string allText = all.str(), bestText = best.str();
  EXPECT_EQ(std::count(allText.begin(), allText.end(), '\n'), 3);
  EXPECT_EQ(std::count(bestText.begin(), bestText.end(), '\n'), 1);
  auto b = TuningDatabase::open(tempDb("export_b"));
  ASSERT_TRUE(b.isOk());
  std::stringstream in1(all.str()), in2(all.str());
  auto r1 = b->importJsonl(in1, nullptr);
  ASSERT_TRUE(r1.isOk());
  EXPECT_EQ(r1->imported, 3);
  auto r2 = b->importJsonl(in2, nullptr);
  ASSERT_TRUE(r2.isOk());
  EXPECT_EQ(r2->imported, 0);
  EXPECT_EQ(r2->duplicates, 3);
  auto records = b->recordsOf(record(64, 0, 1).workloadKey());
  ASSERT_TRUE(records.isOk());
  ASSERT_EQ(records->size(), 3u);
  EXPECT_EQ(records->back().error, "crash: SIGSEGV");
}

TEST(TuningDb, ImportReportsEveryBadLineAndImportsTheRest) {
  auto db = TuningDatabase::open(tempDb("import"));
  ASSERT_TRUE(db.isOk());
  nlohmann::json good = record(32, 4, 5).toJson();
  nlohmann::json badStatus = good, badType = good, hugeValue = good, badKey = good,
                 hostile = record(33, 4, 5).toJson();
  badStatus["result"]["status"] = "'; DROP TABLE records; --";
  badType["template_version"] = "one";
  hugeValue["result"]["median_us"] = 1e308 * 10; // inf is not representable: becomes null
  badKey["workload_key"] = "0000000000000000";
  hostile["host"] = "robert'); DROP TABLE records;--\"\\";
  std::string text = good.dump() + "\n" + "{not json\n" + badStatus.dump() + "\n" + badType.dump() +
                     "\n" + hugeValue.dump() + "\n" + badKey.dump() + "\n" + hostile.dump() + "\n" +
                     "[1, 2, 3]\n" + "{\"format\":1}\n" + good.dump().substr(0, 40);
  std::stringstream in(text);
  auto report = db->importJsonl(in, [](const Record& r) -> Status {
    if (r.config.value("mr", 0) > 16) return makeError("config: mr is out of the template's range");
    return {};
  });
  ASSERT_TRUE(report.isOk()) << report.error().message();
  EXPECT_EQ(report->imported, 2);
  ASSERT_EQ(report->rejected.size(), 8u);
  EXPECT_EQ(report->rejected[0], "line 2: not valid JSON");
  EXPECT_NE(report->rejected[1].find("line 3: result status"), std::string::npos);
  EXPECT_EQ(report->rejected[2], "line 4: field 'template_version' must be an integer");
  EXPECT_EQ(report->rejected[3], "line 5: result field 'median_us' must be a number");
  EXPECT_EQ(report->rejected[4],
            "line 6: workload_key does not match the workload (edited record?)");
  EXPECT_EQ(report->rejected[5], "line 8: a record must be a JSON object");
  // A mistyped format field (found by the fuzzer) is a rejected line, not an exception.
  EXPECT_EQ(report->rejected[6], "line 9: field 'format' must be \"tunec-record\"");
  EXPECT_EQ(report->rejected[7], "line 10: not valid JSON (truncated last line?)");
  // The hostile string is stored verbatim and executed nowhere.
  auto rows = db->recordsOf(record(33, 0, 1).workloadKey());
  ASSERT_TRUE(rows.isOk());
  ASSERT_EQ(rows->size(), 1u);
  EXPECT_EQ(rows->front().host, "robert'); DROP TABLE records;--\"\\");
  EXPECT_EQ(db->stats()->records, 2);
}

TEST(TuningDb, CorruptForeignAndNewerFilesAreRejectedUnchanged) {
  std::string garbage = tempDb("garbage");
  std::ofstream(garbage, std::ios::binary) << std::string(5000, 'x');
  auto g = TuningDatabase::open(garbage);
  ASSERT_FALSE(g.isOk());
  EXPECT_NE(g.error().message().find("not a tunec tuning database"), std::string::npos)
      << g.error().message();
  EXPECT_EQ(readBytes(garbage), std::string(5000, 'x'));

  std::string foreign = tempDb("foreign");
  sqlite3* raw = nullptr;
  sqlite3_open(foreign.c_str(), &raw);
  sqlite3_exec(raw, "CREATE TABLE customers(name TEXT); PRAGMA application_id = 42;", nullptr,
               nullptr, nullptr);
  sqlite3_close(raw);
  std::string before = readBytes(foreign);
  auto f = TuningDatabase::open(foreign);
  ASSERT_FALSE(f.isOk());
  EXPECT_NE(f.error().message().find("not a tunec tuning database (SQLite application_id 42)"),
            std::string::npos);
  EXPECT_EQ(readBytes(foreign), before);

  std::string newer = tempDb("newer");
  { ASSERT_TRUE(TuningDatabase::open(newer).isOk()); }
  sqlite3_open(newer.c_str(), &raw);
  sqlite3_exec(raw, "PRAGMA journal_mode = DELETE; PRAGMA user_version = 99;", nullptr, nullptr,
               nullptr);
  sqlite3_close(raw);
  before = readBytes(newer);
  auto n = TuningDatabase::open(newer);
  ASSERT_FALSE(n.isOk());
  EXPECT_NE(n.error().message().find("written by a newer tunec (schema version 99"),
            std::string::npos);
  EXPECT_EQ(readBytes(newer), before);
}

// Files tunec did not make are never taken over, by a writing or a reading open: a 0-byte file,
// an empty SQLite database, a file that fails the integrity check; a read-only open of tunec's
// own database works and changes nothing.
// A line nested 65k deep (130 KB) is rejected before the recursive parser sees it.
TEST(TuningDb, DeeplyNestedJsonIsRejectedWithoutRecursion) {
  auto db = TuningDatabase::open(tempDb("deep"));
  ASSERT_TRUE(db.isOk());
  std::string deep = std::string(65536, '[') + std::string(65536, ']');
  nlohmann::json good = record(32, 4, 5).toJson();
  good["host"] = "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[";
  std::stringstream in(deep + "\n" + good.dump() + "\n");
  auto report = db->importJsonl(in, nullptr);
  ASSERT_TRUE(report.isOk()) << report.error().message();
  ASSERT_EQ(report->rejected.size(), 1u);
  EXPECT_EQ(report->rejected[0],
            "line 1: JSON nested deeper than 64 levels (a record is at most 4 deep)");
  EXPECT_EQ(report->imported, 1) << "brackets inside a string are not nesting";
}

TEST(TuningDb, EmptyAndCorruptFilesAreRejectedAndReadOnlyOpensChangeNothing) {
  std::string empty = tempDb("empty");
  std::ofstream(empty).close();
  for (bool readOnly : {false, true}) {
    auto e = readOnly ? TuningDatabase::openReadOnly(empty) : TuningDatabase::open(empty);
    ASSERT_FALSE(e.isOk());
    EXPECT_NE(e.error().message().find("is empty (0 bytes), so not a tunec tuning database"),
              std::string::npos)
        << e.error().message();
  }
  EXPECT_EQ(readBytes(empty), "");

  std::string bare = tempDb("bare");
  sqlite3* raw = nullptr;
  sqlite3_open(bare.c_str(), &raw);
  sqlite3_exec(raw, "PRAGMA page_size = 4096; VACUUM;", nullptr, nullptr, nullptr);
  sqlite3_close(raw);
  std::string before = readBytes(bare);
  ASSERT_FALSE(before.empty());
  auto b = TuningDatabase::open(bare);
  ASSERT_FALSE(b.isOk());
  EXPECT_NE(b.error().message().find("not a tunec tuning database (SQLite application_id 0)"),
            std::string::npos)
      << b.error().message();
  EXPECT_EQ(readBytes(bare), before);

  std::string good = tempDb("readonly");
  {
    auto db = TuningDatabase::open(good);
    ASSERT_TRUE(db.isOk());
    ASSERT_TRUE(db->insert({record(64, 4, 10.0), record(128, 6, 20.0)}).isOk());
  }
  before = readBytes(good);
  {
    auto db = TuningDatabase::openReadOnly(good);
    ASSERT_TRUE(db.isOk()) << db.error().message();
    EXPECT_EQ(db->stats()->records, 2);
    EXPECT_FALSE(db->insert({record(256, 4, 30.0)}).isOk()) << "a read-only open wrote";
  }
  EXPECT_EQ(readBytes(good), before);
  auto missing = TuningDatabase::openReadOnly(tempDb("missing"));
  ASSERT_FALSE(missing.isOk());
  EXPECT_NE(missing.error().message().find("no such tuning database"), std::string::npos);

  // Flip bytes inside a table page: the integrity check (or SQLite itself) refuses the file.
  std::string corrupt = tempDb("corrupt");
  {
    auto db = TuningDatabase::open(corrupt);
    ASSERT_TRUE(db.isOk());
    std::vector<Record> many;
    for (int i = 0; i < 200; ++i) many.push_back(record(8 + i, 4, 10.0 + i));
    ASSERT_TRUE(db->insert(many).isOk());
    ASSERT_TRUE(db->stats().isOk());
  }
  sqlite3_open(corrupt.c_str(), &raw);
  sqlite3_exec(raw, "PRAGMA wal_checkpoint(TRUNCATE); PRAGMA journal_mode = DELETE;", nullptr,
               nullptr, nullptr);
  sqlite3_close(raw);
  std::string bytes = readBytes(corrupt);
  ASSERT_GT(bytes.size(), 3 * 4096u);
  for (size_t i = 2 * 4096 + 8; i < 2 * 4096 + 400; ++i) bytes[i] = static_cast<char>(0xA5);
  std::ofstream(corrupt, std::ios::binary | std::ios::trunc) << bytes;
  for (bool readOnly : {false, true}) {
    auto c = readOnly ? TuningDatabase::openReadOnly(corrupt) : TuningDatabase::open(corrupt);
    ASSERT_FALSE(c.isOk()) << "a corrupt database was opened";
    EXPECT_NE(c.error().message().find(corrupt), std::string::npos) << c.error().message();
  }
}

// A database is tunec's only if its schema is: a trigger (one that deletes records as they are
// imported), a view in place of a table, an extra table, and a negative schema version are each
// refused by name, by a writing and a reading open alike, before anything runs, and the file is
// left as it was.
TEST(TuningDb, HostileSchemasAreRefusedByNameAndNothingRuns) {
  struct Case {
    const char* name;
    const char* sql;
    const char* message;
  } cases[] = {
      {"trigger", "CREATE TRIGGER wipe AFTER INSERT ON records BEGIN DELETE FROM records; END;",
       "its schema is not tunec's (an extra trigger 'wipe')"},
      {"view",
       "ALTER TABLE records RENAME TO records_t; CREATE VIEW records AS WITH RECURSIVE c(x) AS "
       "(SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT * FROM records_t, c;",
       "its schema is not tunec's"},
      {"table", "CREATE TABLE notes(text TEXT);",
       "its schema is not tunec's (an extra table 'notes')"},
      {"changed", "DROP INDEX records_best; CREATE INDEX records_best ON records(median_us);",
       "its schema is not tunec's (a changed index 'records_best')"},
      {"version", "PRAGMA user_version = -3;", "schema version -3 is not one tunec writes"},
  };
  for (const Case& c : cases) {
    std::string path = tempDb(std::string("hostile_") + c.name);
    {
      auto db = TuningDatabase::open(path);
      ASSERT_TRUE(db.isOk());
      ASSERT_TRUE(db->insert({record(64, 4, 10.0)}).isOk());
    }
    sqlite3* raw = nullptr;
    sqlite3_open(path.c_str(), &raw);
    ASSERT_EQ(sqlite3_exec(raw, "PRAGMA journal_mode = DELETE;", nullptr, nullptr, nullptr),
              SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(raw, c.sql, nullptr, nullptr, nullptr), SQLITE_OK)
        << c.name << ": " << sqlite3_errmsg(raw);
    sqlite3_close(raw);
    const std::string before = readBytes(path);
    for (bool readOnly : {false, true}) {
      auto db = readOnly ? TuningDatabase::openReadOnly(path) : TuningDatabase::open(path);
      ASSERT_FALSE(db.isOk()) << c.name << (readOnly ? " (read-only)" : "") << " was opened";
      EXPECT_NE(db.error().message().find(c.message), std::string::npos)
          << c.name << ": " << db.error().message();
      EXPECT_NE(db.error().message().find(path), std::string::npos) << db.error().message();
    }
    EXPECT_EQ(readBytes(path), before) << c.name << ": the file changed";
  }
}

// Found by the database fuzzer: a byte that is not UTF-8 in a record's text field (written into
// the file) made the export throw and end the process. It is exported as U+FFFD, and the record
// with it.
TEST(TuningDb, TextThatIsNotUtf8IsExportedReplacedNotFatal) {
  std::string path = tempDb("not_utf8");
  {
    auto db = TuningDatabase::open(path);
    ASSERT_TRUE(db.isOk());
    ASSERT_TRUE(db->insert({record(64, 4, 10.0)}).isOk());
  }
  sqlite3* raw = nullptr;
  sqlite3_open(path.c_str(), &raw);
  ASSERT_EQ(sqlite3_exec(raw, "UPDATE records SET host = CAST(X'68FF' AS TEXT);", nullptr, nullptr,
                         nullptr),
            SQLITE_OK);
  sqlite3_close(raw);
  auto db = TuningDatabase::openReadOnly(path);
  ASSERT_TRUE(db.isOk()) << db.error().message();
  std::stringstream out;
  ASSERT_TRUE(db->exportJsonl(out, "", false).isOk());
  EXPECT_NE(out.str().find("\"host\":\"h\xef\xbf\xbd\""), std::string::npos) << out.str();
}

// A read-only open where SQLite cannot use the write-ahead log (a read-only directory) refuses
// a database with a leftover -wal instead of reading it without the records the log holds.
TEST(TuningDb, ReadOnlyOpenWithAnUnappliedWalIsRefused) {
  if (::geteuid() == 0)
    GTEST_SKIP() << "running as root: a read-only directory does not stop SQLite from making "
                    "its shared-memory file, so the case cannot be made here";
  std::string dir = ::testing::TempDir() + "/wal_ro_" + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::string path = dir + "/t.db";
  {
    sqlite3* holder = nullptr; // keeps the log from being checkpointed at close
    auto db = TuningDatabase::open(path);
    ASSERT_TRUE(db.isOk());
    sqlite3_open(path.c_str(), &holder);
    sqlite3_exec(holder, "PRAGMA wal_autocheckpoint = 0; SELECT 1 FROM records;", nullptr, nullptr,
                 nullptr);
    ASSERT_TRUE(db->insert({record(64, 4, 10.0), record(128, 4, 12.0)}).isOk());
    std::filesystem::copy_file(path, path + ".copy");
    std::filesystem::copy_file(path + "-wal", path + ".copy-wal");
    sqlite3_close(holder);
  }
  std::filesystem::remove(path);
  std::filesystem::remove(path + "-wal");
  std::filesystem::remove(path + "-shm");
  std::filesystem::rename(path + ".copy", path);
  std::filesystem::rename(path + ".copy-wal", path + "-wal");
  std::filesystem::permissions(dir, std::filesystem::perms::owner_read |
                                        std::filesystem::perms::owner_exec);
  auto db = TuningDatabase::openReadOnly(path);
  std::filesystem::permissions(dir, std::filesystem::perms::owner_all);
  if (db.isOk()) {
    EXPECT_EQ(db->stats()->records, 2) << "a read-only open read stale records";
  } else {
    EXPECT_NE(db.error().message().find("has a write-ahead log"), std::string::npos)
        << db.error().message();
  }
  std::filesystem::remove_all(dir);
}

// Eight processes opening one fresh database at once, twenty times: every open succeeds (the
// creator holds a lock while it makes the schema; the others wait for it).
TEST(TuningDb, ConcurrentFirstOpensWaitForTheCreator) {
  for (int round = 0; round < 20; ++round) {
    std::string path = tempDb("first_open");
    pid_t children[8];
    for (pid_t& child : children) {
      child = ::fork();
      if (child == 0) {
        auto db = TuningDatabase::open(path);
        if (!db) {
          std::fprintf(stderr, "%s\n", db.error().message().c_str());
          ::_exit(1);
        }
        ::_exit(db->insert({record(64, 4, 10.0)}).isOk() ? 0 : 3);
      }
    }
    for (pid_t child : children) {
      int status = 0;
      ::waitpid(child, &status, 0);
      ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
          << "round " << round << ": a first open failed (status " << status << ")";
    }
    auto db = TuningDatabase::open(path);
    ASSERT_TRUE(db.isOk());
    EXPECT_EQ(db->stats()->records, 1);
  }
}

TEST(TuningDb, TwoProcessesWritingAtOnceLoseNothing) {
  std::string path = tempDb("concurrent");
  { ASSERT_TRUE(TuningDatabase::open(path).isOk()); }
  pid_t children[2];
  for (int c = 0; c < 2; ++c) {
    children[c] = ::fork();
    if (children[c] == 0) {
      auto db = TuningDatabase::open(path);
      if (!db) ::_exit(2);
      for (int batch = 0; batch < 25; ++batch) {
        std::vector<Record> records;
        for (int i = 0; i < 8; ++i) records.push_back(record(1000 + c, batch * 8 + i, 10.0 + i));
        if (!db->insert(records)) ::_exit(3);
      }
      ::_exit(0);
    }
  }
  for (pid_t child : children) {
    int status = 0;
    ::waitpid(child, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "writer failed with " << status;
  }
  auto db = TuningDatabase::open(path);
  ASSERT_TRUE(db.isOk());
  EXPECT_EQ(db->stats()->records, 400);
}

TEST(TuningDb, WriterKilledMidBatchLosesOnlyThatBatch) {
  std::string path = tempDb("killed");
  int pipeFd[2];
  ASSERT_EQ(::pipe(pipeFd), 0);
  pid_t child = ::fork();
  if (child == 0) {
    auto db = TuningDatabase::open(path);
    if (!db) ::_exit(2);
    std::vector<Record> first;
    for (int i = 0; i < 50; ++i) first.push_back(record(7, i, 5));
    if (!db->insert(first)) ::_exit(3);
    std::vector<Record> huge;
    for (int i = 0; i < 400000; ++i) huge.push_back(record(8 + i % 1000, i, 5));
    (void)!::write(pipeFd[1], "r", 1);
    (void)db->insert(huge); // killed while this transaction is open
    ::_exit(0);
  }
  char c;
  ASSERT_EQ(::read(pipeFd[0], &c, 1), 1);
  ::usleep(300000);
  ::kill(child, SIGKILL);
  int status = 0;
  ::waitpid(child, &status, 0);
  ASSERT_TRUE(WIFSIGNALED(status))
      << "the writer finished before it was killed; make the batch larger";
  auto db = TuningDatabase::open(path);
  ASSERT_TRUE(db.isOk()) << db.error().message();
  EXPECT_EQ(db->stats()->records, 50);
  sqlite3* raw = nullptr;
  sqlite3_open(path.c_str(), &raw);
  sqlite3_stmt* stmt = nullptr;
  sqlite3_prepare_v2(raw, "PRAGMA integrity_check", -1, &stmt, nullptr);
  ASSERT_EQ(sqlite3_step(stmt), SQLITE_ROW);
  EXPECT_STREQ(reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0)), "ok");
  sqlite3_finalize(stmt);
  sqlite3_close(raw);
}

TEST(TuningDb, MergeKeepsEveryConfigAndTheBestTimeAndIsIdempotent) {
  std::string a = tempDb("merge_a"), b = tempDb("merge_b"), out = tempDb("merge_out");
  {
    auto da = TuningDatabase::open(a);
    auto dbb = TuningDatabase::open(b);
    // Config (16, 8) is in both: b measured it faster, so the merge keeps b's time.
    Record slow = record(16, 8, 2), fast = record(16, 8, 2);
    slow.medianUs = 40;
    fast.medianUs = 2.5;
    ASSERT_TRUE(da->insert({record(16, 4, 3), slow}).isOk());
    ASSERT_TRUE(dbb->insert({fast, record(17, 8, 2, target("B CPU"))}).isOk());
  }
  auto merged = mergeDatabases(out, {a, b}, nullptr);
  ASSERT_TRUE(merged.isOk()) << merged.error().message();
  ASSERT_EQ(merged->size(), 2u);
  EXPECT_EQ((*merged)[0].report.imported, 2);
  EXPECT_EQ((*merged)[1].report.imported, 2); // the new config and the faster time
  auto result = [&] {
    auto db = TuningDatabase::open(out, false);
    EXPECT_TRUE(db.isOk());
    auto st = db->stats();
    auto best = db->best(record(16, 8, 2).workloadKey(), target(), 1);
    EXPECT_TRUE(best.isOk() && best->has_value());
    return std::make_tuple(st->records, st->targets, (*best)->record.medianUs);
  };
  EXPECT_EQ(result(), std::make_tuple(int64_t{3}, int64_t{2}, 2.5));
  // Again, in the other order, and with the output among the inputs: nothing changes.
  auto again = mergeDatabases(out, {b, a, out}, nullptr);
  ASSERT_TRUE(again.isOk()) << again.error().message();
  EXPECT_EQ((*again)[0].report.imported + (*again)[1].report.imported, 0);
  EXPECT_TRUE((*again)[2].skipped);
  EXPECT_EQ(result(), std::make_tuple(int64_t{3}, int64_t{2}, 2.5));
  // A missing input is an error naming it.
  auto missing = mergeDatabases(out, {tempDb("merge_missing")}, nullptr);
  ASSERT_FALSE(missing.isOk());
  EXPECT_NE(missing.error().message().find("merge_missing"), std::string::npos);
}

TEST(TuningDb, VerifyFindsBrokenRecordsAndSchema) {
  std::string path = tempDb("verify");
  {
    auto db = TuningDatabase::open(path);
    ASSERT_TRUE(db->insert({record(16, 4, 3), record(16, 8, 2)}).isOk());
    auto report = db->verify(nullptr);
    ASSERT_TRUE(report.isOk()) << report.error().message();
    EXPECT_TRUE(report->problems.empty()) << report->problems.front();
    EXPECT_EQ(report->records, 2);
    // The validator sees every record.
    int seen = 0;
    auto counted = db->verify([&](const Record&) {
      ++seen;
      return seen == 2 ? Status(Error("bad config")) : Status();
    });
    ASSERT_TRUE(counted.isOk());
    EXPECT_EQ(seen, 2);
    ASSERT_EQ(counted->problems.size(), 1u);
    EXPECT_NE(counted->problems[0].find("bad config"), std::string::npos);
  }
  // Damage a record's config behind tunec's back: verify names the record.
  sqlite3* raw = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &raw), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(raw, "UPDATE records SET config = '{not json' WHERE id = 1;", nullptr,
                         nullptr, nullptr),
            SQLITE_OK);
  {
    auto db = TuningDatabase::open(path);
    ASSERT_TRUE(db.isOk()) << db.error().message();
    auto report = db->verify(nullptr);
    ASSERT_TRUE(report.isOk());
    std::string all;
    for (const std::string& p : report->problems) all += p + "\n";
    EXPECT_NE(all.find("record 1 "), std::string::npos) << all;
    EXPECT_NE(all.find("config JSON does not parse"), std::string::npos) << all;
    EXPECT_EQ(report->problems.size(), 1u) << all;
  }
  // And its schema: the open itself refuses it, naming every difference.
  ASSERT_EQ(sqlite3_exec(raw, "DROP INDEX records_best; CREATE TABLE extra(x);", nullptr, nullptr,
                         nullptr),
            SQLITE_OK);
  sqlite3_close(raw);
  for (bool readOnly : {false, true}) {
    auto db = readOnly ? TuningDatabase::openReadOnly(path) : TuningDatabase::open(path);
    ASSERT_FALSE(db.isOk());
    EXPECT_NE(db.error().message().find(
                  "its schema is not tunec's (an extra table 'extra', no index 'records_best')"),
              std::string::npos)
        << db.error().message();
  }
}

TEST(TuningDb, WorkloadKeyIsCanonical) {
  nlohmann::json a = nlohmann::json::parse(R"({"template":"matmul","m":1,"n":2})");
  nlohmann::json b = nlohmann::json::parse(R"({"n":2, "m":1, "template":"matmul"})");
  EXPECT_EQ(workloadKey(a), workloadKey(b));
  EXPECT_NE(workloadKey(a),
            workloadKey(nlohmann::json::parse(R"({"template":"matmul","m":1,"n":3})")));
  EXPECT_EQ(stableHash(""), "cbf29ce484222325");
}

} // namespace
} // namespace tunec::db
