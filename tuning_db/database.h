// The tuning database: the interface between tuning and compiling (DESIGN.md, decision 6).
// Records are data: this layer knows no template, tuner or codegen.
#pragma once

#include "support/error.h"
#include "support/spellings.h"
#include "tuning_db/keys.h"
#include "tuning_db/sqlite.h"

#include <functional>
#include <iosfwd>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace tunec::db {

/// The outcome of measuring a config: a time, or why there is none.
enum class MeasureStatus : uint8_t { Ok, Error, Timeout, WrongResult };

} // namespace tunec::db

namespace tunec {
template <> struct Spellings<db::MeasureStatus> {
  static constexpr std::pair<db::MeasureStatus, std::string_view> values[] = {
      {db::MeasureStatus::Ok, "ok"},
      {db::MeasureStatus::Error, "error"},
      {db::MeasureStatus::Timeout, "timeout"},
      {db::MeasureStatus::WrongResult, "wrong-result"}};
};
} // namespace tunec

namespace tunec::db {

/// Schema version written by this build (PRAGMA user_version).
inline constexpr int kSchemaVersion = 1;
/// PRAGMA application_id of tunec databases: "tunc".
inline constexpr int32_t kApplicationId = 0x74756e63;

/// One measurement of one config of one workload on one target.
struct Record {
  nlohmann::json workload; ///< canonical workload JSON (has "template")
  nlohmann::json config;
  TargetInfo target;
  int templateVersion = 0;
  MeasureStatus status = MeasureStatus::Ok;
  std::string error; ///< error text for non-ok records
  double medianUs = 0, minUs = 0, gflops = 0;
  int64_t repeats = 0;
  std::string tunecVersion;
  std::string host;
  std::string createdAt; ///< ISO 8601 UTC

  std::string templateName() const { return workload.value("template", std::string()); }
  std::string workloadKey() const { return db::workloadKey(workload); }
  /// One self-describing JSONL line (docs/tuning-records.md).
  nlohmann::json toJson() const;
  /// Parses and checks a record line's JSON; the error names the field. With `checkKey` a
  /// "workload_key" field must match the workload (see checkWorkloadKey).
  static Expected<Record> fromJson(const nlohmann::json& j, bool checkKey = true);
  /// A record line's "workload_key", when present, is the hash of its workload (not edited).
  static Status checkWorkloadKey(const nlohmann::json& j, const Record& r);
  /// Checks the fields' values (finite non-negative numbers, sizes).
  Status check() const;
};

/// How to match the target in a lookup.
enum class TargetMatch {
  Exact,       ///< same target key
  IsaFeatures, ///< any target with the same ISA features (only when asked; said in the result)
};

struct BestRecord {
  Record record;
  bool exactTarget = true; ///< false when found through TargetMatch::IsaFeatures
};

struct WorkloadStats {
  std::string key;
  std::string templateName;
  int64_t records = 0;
  double bestGflops = 0;
};

struct DatabaseStats {
  int64_t workloads = 0, records = 0, targets = 0;
  std::vector<WorkloadStats> perWorkload;
};

/// Validates a record's config against its template's knob space (injected by the caller).
using ConfigValidator = std::function<Status(const Record&)>;

struct ImportReport {
  int64_t lines = 0, imported = 0, duplicates = 0;
  std::vector<std::string> rejected; ///< "line N: reason"
};

/// What `verify` found: counts, and one line per problem (empty: the database is sound).
struct VerifyReport {
  int64_t records = 0, workloads = 0, targets = 0;
  std::vector<std::string> problems;
};

class TuningDatabase {
public:
  /// Opens or creates a database; checks application_id and schema version, migrating older
  /// schemas forward. A non-SQLite, foreign or newer-version file is an error and is not changed.
  static Expected<TuningDatabase> open(const std::string& path, bool create = true);
  /// Opens an existing database for reading only (compile, bench-op, export, stats, best): it
  /// works in read-only directories and mounts, and never changes the file.
  static Expected<TuningDatabase> openReadOnly(const std::string& path);

  /// Inserts measurements in one transaction; a config already recorded for the same workload,
  /// target and template version is kept, except that a result replaces a timeout and a faster
  /// ok time replaces a slower one (one record per config, its best; returns how many were new
  /// or replaced one).
  Expected<int64_t> insert(const std::vector<Record>& records);
  /// The fastest ok record of a workload for a target and template version.
  Expected<std::optional<BestRecord>> best(const std::string& workloadKey, const TargetInfo& target,
                                           int templateVersion,
                                           TargetMatch match = TargetMatch::Exact);
  /// Every record, in the order they were recorded (a job's measurement order).
  Expected<std::vector<Record>> allRecords();
  /// Every record of a workload (all targets and versions), fastest first.
  Expected<std::vector<Record>> recordsOf(const std::string& workloadKey);
  /// Ok records of a template on a target and version (the cost model's training data).
  Expected<std::vector<Record>> recordsForTemplate(const std::string& templateName,
                                                   const TargetInfo& target, int templateVersion);
  /// True when the config is already recorded for the workload/target/version.
  Expected<bool> contains(const std::string& workloadKey, const TargetInfo& target,
                          int templateVersion, const nlohmann::json& config);
  Expected<DatabaseStats> stats();

  /// Writes one JSON record per line; `targetKey` filters by target, `bestOnly` keeps each
  /// workload's best ok record per target and template version.
  Status exportJsonl(std::ostream& out, const std::string& targetKey, bool bestOnly);
  /// Imports JSONL: every line validated (JSON, record schema, config via `validator`); bad lines
  /// are reported with their numbers and reasons and the rest imported, in one transaction.
  /// Idempotent: re-importing adds nothing.
  Expected<ImportReport> importJsonl(std::istream& in, const ConfigValidator& validator);

  /// Checks the whole database: SQLite's full integrity check, its references, the schema
  /// against this build's, and every record (its JSON, its workload key, and `validator`: its
  /// config against its template version's knob space).
  Expected<VerifyReport> verify(const ConfigValidator& validator);

  const std::string& path() const { return conn_.path(); }

private:
  explicit TuningDatabase(Connection conn) : conn_(std::move(conn)) {}
  static Expected<TuningDatabase> openWith(const std::string& path, bool create, bool readOnly);
  Expected<std::vector<Record>> query(Statement& stmt);
  Connection conn_;
};

struct MergeInput {
  std::string path;
  ImportReport report;
  bool skipped = false; ///< the output database itself
};

/// Merges databases into `out` (created if missing; an existing one keeps its records): every
/// record of every input, each checked by `validator`, one per config with its best time.
/// Merging the same inputs again changes nothing. Each input is one transaction.
Expected<std::vector<MergeInput>> mergeDatabases(const std::string& out,
                                                 const std::vector<std::string>& inputs,
                                                 const ConfigValidator& validator);

} // namespace tunec::db
