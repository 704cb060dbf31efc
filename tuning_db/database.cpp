// Tuning database: schema and migrations, record insert and lookup, JSONL export/import, merge.
#include "tuning_db/database.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fcntl.h>
#include <istream>
#include <map>
#include <ostream>
#include <sstream>
#include <sys/file.h>
#include <sys/stat.h>
#include <tuple>
#include <unistd.h>

namespace tunec::db {

namespace {

/// Forward migrations: entry i takes a database from schema version i to i + 1. A database is
/// migrated in one transaction, so a crash leaves it at its old version.
const std::vector<std::string>& migrations() {
  static const std::vector<std::string> list = {
      // 0 -> 1: the initial schema.
      R"sql(
      CREATE TABLE targets(
        id INTEGER PRIMARY KEY,
        key TEXT NOT NULL UNIQUE,
        isa_key TEXT NOT NULL,
        json TEXT NOT NULL);
      CREATE INDEX targets_isa ON targets(isa_key);
      CREATE TABLE workloads(
        id INTEGER PRIMARY KEY,
        key TEXT NOT NULL UNIQUE,
        template TEXT NOT NULL,
        json TEXT NOT NULL);
      CREATE INDEX workloads_template ON workloads(template);
      CREATE TABLE records(
        id INTEGER PRIMARY KEY,
        workload_id INTEGER NOT NULL REFERENCES workloads(id),
        target_id INTEGER NOT NULL REFERENCES targets(id),
        template_version INTEGER NOT NULL,
        config TEXT NOT NULL,
        status TEXT NOT NULL CHECK (status IN ('ok', 'error', 'timeout', 'wrong-result')),
        error TEXT NOT NULL DEFAULT '',
        median_us REAL,
        min_us REAL,
        gflops REAL,
        repeats INTEGER,
        tunec_version TEXT NOT NULL,
        host TEXT NOT NULL,
        created_at TEXT NOT NULL,
        UNIQUE (workload_id, target_id, template_version, config));
      CREATE INDEX records_best ON records(workload_id, target_id, template_version, status, median_us);
      )sql",
  };
  return list;
}

Expected<int64_t> pragmaInt(Connection& conn, const std::string& name) {
  TUNEC_ASSIGN_OR_RETURN(Statement stmt, conn.prepare("PRAGMA " + name));
  auto row = stmt.step();
  if (!row)
    return makeError(conn.path(), ": not a tunec tuning database (",
                     row.error().message().substr(conn.path().size() + 2), ")");
  return *row ? stmt.columnInt(0) : int64_t{0};
}

// A database this build can read: tunec's application_id and a schema no newer than this one.
// `created`: this process made the file, so an empty schema is a fresh database; an existing
// SQLite file without tunec's id is someone else's and is never taken over.
Status checkOwnership(Connection& conn, bool created, int64_t& version) {
  TUNEC_ASSIGN_OR_RETURN(int64_t appId, pragmaInt(conn, "application_id"));
  TUNEC_ASSIGN_OR_RETURN(version, pragmaInt(conn, "user_version"));
  TUNEC_ASSIGN_OR_RETURN(Statement tables, conn.prepare("SELECT count(*) FROM sqlite_schema"));
  TUNEC_ASSIGN_OR_RETURN(bool hasRow, tables.step());
  int64_t tableCount = hasRow ? tables.columnInt(0) : 0;
  bool fresh = created && appId == 0 && version == 0 && tableCount == 0;
  if (!fresh && appId != kApplicationId)
    return makeError(conn.path(), ": not a tunec tuning database (SQLite application_id ", appId,
                     "); give another --db file");
  if (version < 0)
    return makeError(conn.path(), ": schema version ", version,
                     " is not one tunec writes (an edited file?); restore it from a 'tunec db "
                     "export' file with 'tunec db import', or give another --db file");
  return {};
}

// One object of a database's schema as sqlite_schema lists it.
struct SchemaObject {
  std::string type, name, table, sql;
  bool operator<(const SchemaObject& o) const {
    return std::tie(type, name, table, sql) < std::tie(o.type, o.name, o.table, o.sql);
  }
  bool operator==(const SchemaObject& o) const = default;
};

Expected<std::vector<SchemaObject>> schemaOf(Connection& conn) {
  // SQLite's own tables (sqlite_stat1 after an ANALYZE, sqlite_sequence) are its business.
  TUNEC_ASSIGN_OR_RETURN(Statement stmt,
                         conn.prepare("SELECT type, name, tbl_name, coalesce(sql, '') FROM "
                                      "sqlite_schema WHERE name NOT LIKE 'sqlite\\_stat%' ESCAPE "
                                      "'\\' AND name <> 'sqlite_sequence'"));
  std::vector<SchemaObject> objects;
  while (true) {
    TUNEC_ASSIGN_OR_RETURN(bool row, stmt.step());
    if (!row) break;
    objects.push_back(
        {stmt.columnText(0), stmt.columnText(1), stmt.columnText(2), stmt.columnText(3)});
  }
  std::sort(objects.begin(), objects.end());
  return objects;
}

// The schema this build's migrations make, from a database in memory: what every tunec
// database at kSchemaVersion holds, object for object.
const std::vector<SchemaObject>& expectedSchema() {
  static const std::vector<SchemaObject> schema = [] {
    auto conn = Connection::open(":memory:", true, false);
    TUNEC_ASSERT(conn.isOk(), "an in-memory SQLite database: " << conn.error().message());
    for (const std::string& step : migrations())
      TUNEC_ASSERT(conn->exec(step).isOk(), "this build's migrations fail in memory");
    auto objects = schemaOf(*conn);
    TUNEC_ASSERT(objects.isOk(), "reading the in-memory schema");
    return *objects;
  }();
  return schema;
}

// A database is tunec's only if its schema is: the tables and indexes of this build's
// migrations and nothing else (no triggers, views or tables of its own: code or data that
// tunec's writes and reads would run into), checked before anything is read or written.
Status checkSchema(Connection& conn) {
  TUNEC_ASSIGN_OR_RETURN(std::vector<SchemaObject> have, schemaOf(conn));
  const std::vector<SchemaObject>& want = expectedSchema();
  auto name = [](const SchemaObject& o) { return o.type + " '" + o.name + "'"; };
  std::string differences;
  auto add = [&](const std::string& what) {
    differences += (differences.empty() ? "" : ", ") + what;
  };
  for (const SchemaObject& o : have)
    if (!std::binary_search(want.begin(), want.end(), o)) {
      bool known = std::any_of(want.begin(), want.end(), [&](const SchemaObject& w) {
        return w.type == o.type && w.name == o.name;
      });
      add((known ? "a changed " : "an extra ") + name(o));
    }
  for (const SchemaObject& o : want)
    if (!std::any_of(have.begin(), have.end(),
                     [&](const SchemaObject& h) { return h.type == o.type && h.name == o.name; }))
      add("no " + name(o));
  if (differences.empty()) return {};
  return makeError(conn.path(), ": its schema is not tunec's (", differences,
                   "); tunec runs nothing a database file brings: export its records where it "
                   "was made ('tunec db export') and import them into a new file, or give "
                   "another --db file");
}

Status checkIntegrity(Connection& conn) {
  auto notOurs = [&](const Error& e) {
    std::string why = e.message();
    why = why.substr(why.rfind(": ") + 2);
    return makeError(conn.path(), ": not a tunec tuning database (", why, ")");
  };
  auto check = conn.prepare("PRAGMA quick_check");
  if (!check) return notOurs(check.error());
  auto row = check->step();
  if (!row) return notOurs(row.error());
  std::string verdict = *row ? check->columnText(0) : "ok";
  if (verdict != "ok")
    return makeError(conn.path(), ": fails SQLite's integrity check (", verdict,
                     "); restore it from a 'tunec db export' file with 'tunec db import', or "
                     "delete it");
  return {};
}

// A read-only open cannot migrate: the schema must be this build's.
Status checkReadable(Connection& conn) {
  int64_t version = 0;
  TUNEC_TRY(checkOwnership(conn, false, version));
  if (version > kSchemaVersion)
    return makeError(conn.path(), ": written by a newer tunec (schema version ", version,
                     "; this build reads up to ", kSchemaVersion, "); upgrade tunec to use it");
  if (version < kSchemaVersion)
    return makeError(conn.path(), ": written by an older tunec (schema version ", version,
                     "); this command only reads, so it does not upgrade it to version ",
                     kSchemaVersion,
                     ": open it once with a command that writes (e.g. 'tunec db "
                     "merge', or 'tunec tune') where it is writable");
  return checkSchema(conn);
}

Status migrate(Connection& conn, bool created) {
  int64_t version = 0;
  TUNEC_TRY(checkOwnership(conn, created, version));
  if (version > kSchemaVersion)
    return makeError(conn.path(), ": written by a newer tunec (schema version ", version,
                     "; this build reads up to ", kSchemaVersion,
                     "); upgrade tunec to use it, or export it there with 'tunec db export'");
  if (version == kSchemaVersion) return checkSchema(conn);
  // The migrated schema is checked before the upgrade commits: a trigger or view it came with
  // rolls it back.
  TUNEC_ASSIGN_OR_RETURN(Transaction tx, Transaction::begin(conn));
  // Re-read inside the write lock: another process may have migrated meanwhile.
  TUNEC_ASSIGN_OR_RETURN(version, pragmaInt(conn, "user_version"));
  for (int64_t v = version; v < kSchemaVersion; ++v)
    TUNEC_TRY(conn.exec(migrations()[static_cast<size_t>(v)]));
  TUNEC_TRY(conn.exec("PRAGMA application_id = " + std::to_string(kApplicationId)));
  TUNEC_TRY(conn.exec("PRAGMA user_version = " + std::to_string(kSchemaVersion)));
  TUNEC_TRY(checkSchema(conn));
  return tx.commit();
}

const char* kRecordColumns = "w.json, r.config, t.json, r.template_version, r.status, r.error, "
                             "r.median_us, r.min_us, r.gflops, r.repeats, "
                             "r.tunec_version, r.host, r.created_at";
const char* kRecordJoin = " FROM records r JOIN workloads w ON w.id = r.workload_id JOIN targets t "
                          "ON t.id = r.target_id ";

constexpr size_t kMaxJsonField = 64 * 1024;
// nlohmann's parser recurses once per level: a line nested 65k deep would overflow the stack.
constexpr int kMaxJsonDepth = 64;

// The deepest nesting of arrays and objects in a JSON text (brackets inside strings skipped).
int jsonDepth(const std::string& text) {
  int depth = 0, deepest = 0;
  bool inString = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (inString) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        inString = false;
    } else if (c == '"') {
      inString = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return deepest;
}
constexpr size_t kMaxText = 16 * 1024;

} // namespace

nlohmann::json Record::toJson() const {
  return {{"format", "tunec-record"},
          {"version", 1},
          {"workload", workload},
          {"workload_key", workloadKey()},
          {"template_version", templateVersion},
          {"target", target.toJson()},
          {"config", config},
          {"result",
           {{"status", spell(status)},
            {"error", error},
            {"median_us", medianUs},
            {"min_us", minUs},
            {"gflops", gflops},
            {"repeats", repeats}}},
          {"tunec_version", tunecVersion},
          {"host", host},
          {"created_at", createdAt}};
}

Status Record::checkWorkloadKey(const nlohmann::json& j, const Record& r) {
  if (j.contains("workload_key") && j["workload_key"] != r.workloadKey())
    return makeError("workload_key does not match the workload (edited record?)");
  return {};
}

Expected<Record> Record::fromJson(const nlohmann::json& j, bool checkKey) {
  if (!j.is_object()) return makeError("a record must be a JSON object");
  if (!j.contains("format") || !j["format"].is_string() || j["format"] != "tunec-record")
    return makeError("field 'format' must be \"tunec-record\"");
  if (!j.contains("version") || !j["version"].is_number_integer() ||
      j["version"].get<int64_t>() != 1)
    return makeError("field 'version' must be 1 (records from a newer tunec need a newer tunec)");
  Record r;
  try {
    r.workload = j.at("workload");
    r.config = j.at("config");
    if (!r.workload.is_object() || !r.workload.contains("template") ||
        !r.workload["template"].is_string())
      return makeError("field 'workload' must be an object with a 'template' string");
    if (!r.config.is_object()) return makeError("field 'config' must be an object");
    if (r.workload.dump().size() > kMaxJsonField || r.config.dump().size() > kMaxJsonField)
      return makeError("workload or config is larger than 64 KiB");
    if (!j.at("template_version").is_number_integer())
      return makeError("field 'template_version' must be an integer");
    r.templateVersion = j.at("template_version").get<int>();
    std::string error;
    if (!TargetInfo::fromJson(j.at("target"), r.target, error)) return makeError(error);
    const auto& result = j.at("result");
    if (!result.is_object()) return makeError("field 'result' must be an object");
    std::string status = result.at("status").get<std::string>();
    auto parsed = parseSpelling<MeasureStatus>(status);
    if (!parsed)
      return makeError("result status '", status.substr(0, 40), "' is not ",
                       spellingList<MeasureStatus>());
    r.status = *parsed;
    r.error = result.value("error", std::string());
    for (auto [name, field] :
         {std::pair{"median_us", &r.medianUs}, {"min_us", &r.minUs}, {"gflops", &r.gflops}}) {
      if (!result.at(name).is_number())
        return makeError("result field '", name, "' must be a number");
      *field = result.at(name).get<double>();
    }
    if (!result.at("repeats").is_number_integer())
      return makeError("result field 'repeats' must be an integer");
    r.repeats = result.at("repeats").get<int64_t>();
    r.tunecVersion = j.at("tunec_version").get<std::string>();
    r.host = j.at("host").get<std::string>();
    r.createdAt = j.at("created_at").get<std::string>();
  } catch (const nlohmann::json::exception& e) {
    std::string what = e.what();
    return makeError("missing or mistyped field (", what.substr(what.find(']') + 2), ")");
  }
  TUNEC_TRY(r.check());
  if (checkKey) TUNEC_TRY(checkWorkloadKey(j, r));
  return r;
}

Status Record::check() const {
  for (auto [name, value] :
       {std::pair{"median_us", medianUs}, {"min_us", minUs}, {"gflops", gflops}})
    if (!std::isfinite(value) || value < 0)
      return makeError("result field '", name, "' must be finite and non-negative");
  if (status == MeasureStatus::Ok && medianUs <= 0)
    return makeError("an ok result needs a positive median_us");
  for (const std::string* s : {&error, &tunecVersion, &host, &createdAt})
    if (s->size() > kMaxText) return makeError("a text field is longer than 16 KiB");
  return {};
}

namespace {

// A fresh database is built under a temporary name beside `path` and published with link(2),
// which fails when `path` exists: concurrent first opens never see a half-made file (one of
// them publishes, the others drop theirs and open it), so a file that is empty when tunec finds
// it was not made by tunec.
Status createDatabase(const std::string& path) {
  static std::atomic<int> counter{0};
  std::string staging =
      path + ".new" + std::to_string(::getpid()) + "_" + std::to_string(counter++);
  auto cleanup = [&] {
    for (const char* suffix : {"", "-wal", "-shm", "-journal"})
      std::remove((staging + suffix).c_str());
  };
  {
    auto conn = Connection::open(staging, true, false);
    if (!conn) {
      cleanup();
      return conn.error();
    }
    Status made = migrate(*conn, true);
    if (made) made = conn->exec("PRAGMA journal_mode = WAL");
    if (!made) {
      cleanup();
      return Error(made.error().message());
    }
  }
  int linked = ::link(staging.c_str(), path.c_str());
  int error = errno;
  cleanup();
  if (linked != 0 && error != EEXIST)
    return makeError(path, ": cannot create: ", std::strerror(error));
  return {};
}

Status checkNotEmpty(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return {};
  if (!S_ISREG(st.st_mode))
    return makeError(path, ": not a regular file; give a tuning database file with --db");
  if (st.st_size == 0)
    return makeError(path, ": is empty (0 bytes), so not a tunec tuning database; delete it to "
                           "start a new one, or give another --db file");
  return {};
}

} // namespace

Expected<TuningDatabase> TuningDatabase::open(const std::string& path, bool create) {
  return openWith(path, create, false);
}

Expected<TuningDatabase> TuningDatabase::openReadOnly(const std::string& path) {
  return openWith(path, false, true);
}

Expected<TuningDatabase> TuningDatabase::openWith(const std::string& path, bool create,
                                                  bool readOnly) {
  if (path == ":memory:") {
    TUNEC_ASSIGN_OR_RETURN(Connection conn, Connection::open(path, true, false));
    TUNEC_TRY(migrate(conn, true));
    return TuningDatabase(std::move(conn));
  }
  struct stat st;
  bool exists = ::stat(path.c_str(), &st) == 0;
  if (!exists && !(create && !readOnly))
    return makeError(path, ": no such tuning database (run 'tunec tune' or 'tunec db import' to "
                           "create one)");
  if (!exists) TUNEC_TRY(createDatabase(path));
  TUNEC_TRY(checkNotEmpty(path));
  if (!readOnly) {
    // A writer needs the file and its directory (SQLite's -wal and -shm files live beside it).
    std::string dir = path.find('/') == std::string::npos ? "." : path.substr(0, path.rfind('/'));
    if (::access(path.c_str(), W_OK) != 0 || ::access(dir.empty() ? "/" : dir.c_str(), W_OK) != 0)
      return makeError(path, ": is read-only here (", std::strerror(errno),
                       "), and this command writes to it: give a writable --db file");
  }
  TUNEC_ASSIGN_OR_RETURN(Connection conn, Connection::open(path, false, readOnly));
  TUNEC_TRY(checkIntegrity(conn));
  if (readOnly) { // never migrated: a command that reads changes nothing
    TUNEC_TRY(checkReadable(conn));
    return TuningDatabase(std::move(conn));
  }
  TUNEC_TRY(migrate(conn, false));
  TUNEC_TRY(conn.exec("PRAGMA journal_mode = WAL"));
  TUNEC_TRY(conn.exec("PRAGMA synchronous = NORMAL"));
  TUNEC_TRY(conn.exec("PRAGMA foreign_keys = ON"));
  return TuningDatabase(std::move(conn));
}

Expected<int64_t> TuningDatabase::insert(const std::vector<Record>& records) {
  TUNEC_ASSIGN_OR_RETURN(Transaction tx, Transaction::begin(conn_));
  TUNEC_ASSIGN_OR_RETURN(
      Statement addTarget,
      conn_.prepare("INSERT OR IGNORE INTO targets(key, isa_key, json) VALUES (?1, ?2, ?3)"));
  TUNEC_ASSIGN_OR_RETURN(Statement getTarget,
                         conn_.prepare("SELECT id FROM targets WHERE key = ?1"));
  TUNEC_ASSIGN_OR_RETURN(
      Statement addWorkload,
      conn_.prepare("INSERT OR IGNORE INTO workloads(key, template, json) VALUES (?1, ?2, ?3)"));
  TUNEC_ASSIGN_OR_RETURN(Statement getWorkload,
                         conn_.prepare("SELECT id FROM workloads WHERE key = ?1"));
  TUNEC_ASSIGN_OR_RETURN(
      Statement addRecord,
      conn_.prepare("INSERT INTO records(workload_id, target_id, template_version, "
                    "config, status, error, median_us, min_us, "
                    "gflops, repeats, tunec_version, host, created_at) VALUES (?1, ?2, ?3, ?4, ?5, "
                    "?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13) "
                    // A config that timed out once is measured again by a later job: its new
                    // result replaces the timeout. A faster ok time of the same config (a merge
                    // of two machines of one target) replaces a slower one: the best is kept.
                    "ON CONFLICT(workload_id, target_id, template_version, config) DO UPDATE SET "
                    "status = excluded.status, error = excluded.error, median_us = "
                    "excluded.median_us, min_us = excluded.min_us, gflops = excluded.gflops, "
                    "repeats = excluded.repeats, tunec_version = excluded.tunec_version, host = "
                    "excluded.host, created_at = excluded.created_at "
                    "WHERE (records.status = 'timeout' AND excluded.status != 'timeout') OR "
                    "(records.status = 'ok' AND excluded.status = 'ok' AND excluded.median_us < "
                    "records.median_us)"));
  std::map<std::string, int64_t> targetIds, workloadIds;
  auto idOf = [&](std::map<std::string, int64_t>& cache, Statement& add, Statement& get,
                  const std::string& key, const std::string& second,
                  const std::string& json) -> Expected<int64_t> {
    if (auto it = cache.find(key); it != cache.end()) return it->second;
    add.bind(1, key).bind(2, second).bind(3, json);
    TUNEC_TRY(add.run());
    get.bind(1, key);
    TUNEC_ASSIGN_OR_RETURN(bool row, get.step());
    TUNEC_ASSERT(row, "row inserted above is missing");
    int64_t id = get.columnInt(0);
    get.reset();
    cache[key] = id;
    return id;
  };
  int64_t added = 0;
  for (const Record& r : records) {
    if (Status s = r.check(); !s)
      return s.error().withContext("record of workload " + r.workloadKey());
    TUNEC_ASSIGN_OR_RETURN(int64_t target,
                           idOf(targetIds, addTarget, getTarget, r.target.key(), r.target.isaKey(),
                                canonicalJson(r.target.toJson())));
    TUNEC_ASSIGN_OR_RETURN(int64_t workload,
                           idOf(workloadIds, addWorkload, getWorkload, r.workloadKey(),
                                r.templateName(), canonicalJson(r.workload)));
    addRecord.bind(1, workload)
        .bind(2, target)
        .bind(3, static_cast<int64_t>(r.templateVersion))
        .bind(4, canonicalJson(r.config))
        .bind(5, std::string(spell(r.status)))
        .bind(6, r.error)
        .bind(7, r.medianUs)
        .bind(8, r.minUs)
        .bind(9, r.gflops)
        .bind(10, r.repeats)
        .bind(11, r.tunecVersion)
        .bind(12, r.host)
        .bind(13, r.createdAt);
    TUNEC_TRY(addRecord.run());
    added += conn_.changes();
  }
  TUNEC_TRY(tx.commit());
  return added;
}

namespace {

/// A record from the columns kRecordColumns, starting at column `first`; `error` says what of
/// its stored JSON does not parse.
Record recordFromRow(Statement& stmt, int first, std::string& error) {
  Record r;
  r.workload = nlohmann::json::parse(stmt.columnText(first), nullptr, false);
  r.config = nlohmann::json::parse(stmt.columnText(first + 1), nullptr, false);
  nlohmann::json target = nlohmann::json::parse(stmt.columnText(first + 2), nullptr, false);
  if (r.workload.is_discarded()) error = "its workload JSON does not parse";
  if (r.config.is_discarded()) error = "its config JSON does not parse";
  std::string targetError;
  if (!TargetInfo::fromJson(target, r.target, targetError) && error.empty())
    error = "its target: " + targetError;
  r.templateVersion = static_cast<int>(stmt.columnInt(first + 3));
  // The schema's CHECK admits only the four spellings.
  r.status =
      parseSpelling<MeasureStatus>(stmt.columnText(first + 4)).value_or(MeasureStatus::Error);
  r.error = stmt.columnText(first + 5);
  r.medianUs = stmt.columnDouble(first + 6);
  r.minUs = stmt.columnDouble(first + 7);
  r.gflops = stmt.columnDouble(first + 8);
  r.repeats = stmt.columnInt(first + 9);
  r.tunecVersion = stmt.columnText(first + 10);
  r.host = stmt.columnText(first + 11);
  r.createdAt = stmt.columnText(first + 12);
  return r;
}

} // namespace

Expected<std::vector<Record>> TuningDatabase::query(Statement& stmt) {
  std::vector<Record> out;
  while (true) {
    TUNEC_ASSIGN_OR_RETURN(bool row, stmt.step());
    if (!row) break;
    std::string error;
    out.push_back(recordFromRow(stmt, 0, error));
  }
  stmt.reset();
  return out;
}

Expected<std::vector<Record>> TuningDatabase::allRecords() {
  TUNEC_ASSIGN_OR_RETURN(Statement stmt, conn_.prepare(std::string("SELECT ") + kRecordColumns +
                                                       kRecordJoin + "ORDER BY r.id"));
  return query(stmt);
}

Expected<std::optional<BestRecord>> TuningDatabase::best(const std::string& workloadKey,
                                                         const TargetInfo& target,
                                                         int templateVersion, TargetMatch match) {
  for (bool exact : {true, false}) {
    if (!exact && match == TargetMatch::Exact) break;
    std::string sql =
        std::string("SELECT ") + kRecordColumns + kRecordJoin + "WHERE w.key = ?1 AND " +
        (exact ? "t.key" : "t.isa_key") +
        " = ?2 AND r.template_version = ?3 AND r.status = 'ok' ORDER BY r.median_us LIMIT 1";
    TUNEC_ASSIGN_OR_RETURN(Statement stmt, conn_.prepare(sql));
    stmt.bind(1, workloadKey)
        .bind(2, exact ? target.key() : target.isaKey())
        .bind(3, static_cast<int64_t>(templateVersion));
    TUNEC_ASSIGN_OR_RETURN(std::vector<Record> rows, query(stmt));
    if (!rows.empty()) return std::optional<BestRecord>(BestRecord{std::move(rows[0]), exact});
  }
  return std::optional<BestRecord>();
}

Expected<std::vector<Record>> TuningDatabase::recordsOf(const std::string& workloadKey) {
  TUNEC_ASSIGN_OR_RETURN(Statement stmt,
                         conn_.prepare(std::string("SELECT ") + kRecordColumns + kRecordJoin +
                                       "WHERE w.key = ?1 ORDER BY r.status != 'ok', r.median_us"));
  stmt.bind(1, workloadKey);
  return query(stmt);
}

Expected<std::vector<Record>> TuningDatabase::recordsForTemplate(const std::string& templateName,
                                                                 const TargetInfo& target,
                                                                 int templateVersion) {
  TUNEC_ASSIGN_OR_RETURN(
      Statement stmt,
      conn_.prepare(std::string("SELECT ") + kRecordColumns + kRecordJoin +
                    "WHERE w.template = ?1 AND t.key = ?2 AND r.template_version = ?3 "
                    "AND r.status = 'ok'"));
  stmt.bind(1, templateName).bind(2, target.key()).bind(3, static_cast<int64_t>(templateVersion));
  return query(stmt);
}

Expected<bool> TuningDatabase::contains(const std::string& workloadKey, const TargetInfo& target,
                                        int templateVersion, const nlohmann::json& config) {
  TUNEC_ASSIGN_OR_RETURN(
      Statement stmt,
      conn_.prepare(
          "SELECT 1" + std::string(kRecordJoin) +
          "WHERE w.key = ?1 AND t.key = ?2 AND r.template_version = ?3 AND r.config = ?4"));
  stmt.bind(1, workloadKey)
      .bind(2, target.key())
      .bind(3, static_cast<int64_t>(templateVersion))
      .bind(4, canonicalJson(config));
  return stmt.step();
}

Expected<DatabaseStats> TuningDatabase::stats() {
  DatabaseStats s;
  TUNEC_ASSIGN_OR_RETURN(Statement counts,
                         conn_.prepare("SELECT (SELECT count(*) FROM workloads), (SELECT count(*) "
                                       "FROM records), (SELECT count(*) FROM targets)"));
  TUNEC_ASSIGN_OR_RETURN(bool row, counts.step());
  if (row) {
    s.workloads = counts.columnInt(0);
    s.records = counts.columnInt(1);
    s.targets = counts.columnInt(2);
  }
  TUNEC_ASSIGN_OR_RETURN(
      Statement per,
      conn_.prepare(
          "SELECT w.key, w.template, count(r.id), max(CASE WHEN r.status = 'ok' THEN r.gflops END) "
          "FROM workloads w LEFT JOIN records r ON r.workload_id = w.id GROUP BY w.id ORDER BY "
          "w.template, w.key"));
  while (true) {
    TUNEC_ASSIGN_OR_RETURN(bool more, per.step());
    if (!more) break;
    s.perWorkload.push_back({per.columnText(0), per.columnText(1), per.columnInt(2),
                             per.columnIsNull(3) ? 0.0 : per.columnDouble(3)});
  }
  return s;
}

Status TuningDatabase::exportJsonl(std::ostream& out, const std::string& targetKey, bool bestOnly) {
  std::string sql =
      std::string("SELECT ") + kRecordColumns + kRecordJoin + "WHERE (?1 = '' OR t.key = ?1)";
  if (bestOnly)
    sql += " AND r.status = 'ok' AND r.id = (SELECT r2.id FROM records r2 WHERE r2.workload_id = "
           "r.workload_id AND "
           "r2.target_id = r.target_id AND r2.template_version = r.template_version AND r2.status "
           "= 'ok' "
           "ORDER BY r2.median_us LIMIT 1)";
  sql += " ORDER BY r.id";
  TUNEC_ASSIGN_OR_RETURN(Statement stmt, conn_.prepare(sql));
  stmt.bind(1, targetKey);
  TUNEC_ASSIGN_OR_RETURN(std::vector<Record> rows, query(stmt));
  // Text fields come from the file as they are: bytes that are not UTF-8 (a damaged or edited
  // database) are written as U+FFFD rather than ending the export.
  for (const Record& r : rows)
    out << r.toJson().dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
  if (!out) return makeError("export: write failed");
  return {};
}

Expected<ImportReport> TuningDatabase::importJsonl(std::istream& in,
                                                   const ConfigValidator& validator) {
  ImportReport report;
  std::vector<Record> valid;
  std::string line;
  while (std::getline(in, line)) {
    ++report.lines;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    auto reject = [&](const std::string& why) {
      report.rejected.push_back("line " + std::to_string(report.lines) + ": " + why);
    };
    if (jsonDepth(line) > kMaxJsonDepth) {
      reject("JSON nested deeper than " + std::to_string(kMaxJsonDepth) +
             " levels (a record is at most 4 deep)");
      continue;
    }
    nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded()) {
      reject(in.eof() ? "not valid JSON (truncated last line?)" : "not valid JSON");
      continue;
    }
    // The key is checked after the template's validator, so that a workload this tunec cannot
    // run (say an unsupported dtype) is rejected for that reason rather than as an edited key.
    auto record = Record::fromJson(j, /*checkKey=*/false);
    if (!record) {
      reject(record.error().message());
      continue;
    }
    if (validator) {
      if (Status s = validator(*record); !s) {
        reject(s.error().message());
        continue;
      }
    }
    if (Status s = Record::checkWorkloadKey(j, *record); !s) {
      reject(s.error().message());
      continue;
    }
    valid.push_back(std::move(*record));
  }
  TUNEC_ASSIGN_OR_RETURN(int64_t added, insert(valid));
  report.imported = added;
  report.duplicates = static_cast<int64_t>(valid.size()) - added;
  return report;
}

Expected<VerifyReport> TuningDatabase::verify(const ConfigValidator& validator) {
  VerifyReport report;
  auto rows = [&](const std::string& sql, const std::function<void(Statement&)>& each) -> Status {
    TUNEC_ASSIGN_OR_RETURN(Statement stmt, conn_.prepare(sql));
    while (true) {
      TUNEC_ASSIGN_OR_RETURN(bool row, stmt.step());
      if (!row) return {};
      each(stmt);
    }
  };
  TUNEC_TRY(rows("PRAGMA integrity_check", [&](Statement& s) {
    if (s.columnText(0) != "ok") report.problems.push_back("SQLite integrity: " + s.columnText(0));
  }));
  TUNEC_TRY(rows("PRAGMA foreign_key_check", [&](Statement& s) {
    report.problems.push_back("table " + s.columnText(0) + ", row " +
                              std::to_string(s.columnInt(1)) + ": refers to a missing row of " +
                              s.columnText(2));
  }));
  // The schema was checked when the database was opened (checkSchema).
  TUNEC_TRY(rows("SELECT count(*) FROM workloads",
                 [&](Statement& s) { report.workloads = s.columnInt(0); }));
  TUNEC_TRY(
      rows("SELECT count(*) FROM targets", [&](Statement& s) { report.targets = s.columnInt(0); }));
  // Every record, as compile and tune would read it.
  TUNEC_TRY(
      rows(std::string("SELECT r.id, w.key, ") + kRecordColumns + kRecordJoin + "ORDER BY r.id",
           [&](Statement& s) {
             ++report.records;
             std::string where = "record " + std::to_string(s.columnInt(0)) + " (workload " +
                                 s.columnText(1) + "): ";
             std::string error;
             Record r = recordFromRow(s, 2, error);
             if (!error.empty()) {
               report.problems.push_back(where + error);
               return;
             }
             if (r.workloadKey() != s.columnText(1)) {
               report.problems.push_back(where + "its workload JSON has key " + r.workloadKey() +
                                         ", not the stored one");
               return;
             }
             if (Status st = r.check(); !st) {
               report.problems.push_back(where + st.error().message());
               return;
             }
             if (validator)
               if (Status st = validator(r); !st)
                 report.problems.push_back(where + st.error().message());
           }));
  return report;
}

Expected<std::vector<MergeInput>> mergeDatabases(const std::string& out,
                                                 const std::vector<std::string>& inputs,
                                                 const ConfigValidator& validator) {
  TUNEC_ASSIGN_OR_RETURN(TuningDatabase merged, TuningDatabase::open(out, true));
  struct stat outStat;
  if (::stat(out.c_str(), &outStat) != 0)
    return makeError(out, ": cannot stat the merged database (", std::strerror(errno), ")");
  std::vector<MergeInput> done;
  for (const std::string& path : inputs) {
    MergeInput in{path, {}, false};
    struct stat st;
    if (::stat(path.c_str(), &st) == 0 && st.st_dev == outStat.st_dev &&
        st.st_ino == outStat.st_ino) {
      in.skipped = true;
      done.push_back(std::move(in));
      continue;
    }
    std::stringstream records;
    {
      TUNEC_ASSIGN_OR_RETURN(TuningDatabase db, TuningDatabase::openReadOnly(path));
      TUNEC_TRY(db.exportJsonl(records, "", false));
    }
    TUNEC_ASSIGN_OR_RETURN(in.report, merged.importJsonl(records, validator));
    done.push_back(std::move(in));
  }
  return done;
}

} // namespace tunec::db
