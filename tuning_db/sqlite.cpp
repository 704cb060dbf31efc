// SQLite RAII wrappers.
#include "tuning_db/sqlite.h"

#include <cstdio>
#include <sqlite3.h>
#include <sys/stat.h>

namespace tunec::db {

Expected<Connection> Connection::open(const std::string& path, bool create, bool readOnly) {
  sqlite3* db = nullptr;
  int flags =
      readOnly ? SQLITE_OPEN_READONLY : (SQLITE_OPEN_READWRITE | (create ? SQLITE_OPEN_CREATE : 0));
  int rc = sqlite3_open_v2(path.c_str(), &db, flags | SQLITE_OPEN_FULLMUTEX, nullptr);
  if (rc == SQLITE_OK && readOnly &&
      sqlite3_exec(db, "SELECT 1 FROM sqlite_schema LIMIT 1", nullptr, nullptr, nullptr) !=
          SQLITE_OK) {
    // A WAL database in a read-only directory or mount cannot get its shared-memory file: read
    // it as immutable (nothing else can be writing it there), unless a write-ahead log is left
    // beside it: immutable reads ignore it, so they would see stale records.
    sqlite3_close(db);
    db = nullptr;
    struct stat wal;
    if (::stat((path + "-wal").c_str(), &wal) == 0 && wal.st_size > 0)
      return makeError(path, ": has a write-ahead log (", path,
                       "-wal) that cannot be applied where the database is read-only, so reading "
                       "it would miss records; open it once where it is writable (any 'tunec db' "
                       "command), or run: sqlite3 ",
                       path, " 'PRAGMA wal_checkpoint(TRUNCATE)'");
    std::string uri = "file:";
    for (char c : path) {
      if (c == '%' || c == '?' || c == '#') {
        char hex[4];
        std::snprintf(hex, sizeof(hex), "%%%02X", static_cast<unsigned char>(c));
        uri += hex;
      } else {
        uri += c;
      }
    }
    uri += "?mode=ro&immutable=1";
    rc =
        sqlite3_open_v2(uri.c_str(), &db, flags | SQLITE_OPEN_FULLMUTEX | SQLITE_OPEN_URI, nullptr);
  }
  if (rc != SQLITE_OK) {
    std::string message = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
    sqlite3_close(db);
    if (rc == SQLITE_CANTOPEN && !create)
      return makeError(
          path, ": no such tuning database (run 'tunec tune' or 'tunec db import' to create one)");
    return makeError(path, ": cannot open: ", message);
  }
  Connection conn(db, path);
  // A database file is data, never code: its triggers and views do not run, and SQL functions
  // stored in its schema are not trusted (the schema check in database.cpp refuses such files
  // by name; this holds even before it).
  sqlite3_db_config(db, SQLITE_DBCONFIG_ENABLE_TRIGGER, 0, nullptr);
  sqlite3_db_config(db, SQLITE_DBCONFIG_ENABLE_VIEW, 0, nullptr);
  sqlite3_db_config(db, SQLITE_DBCONFIG_TRUSTED_SCHEMA, 0, nullptr);
  sqlite3_db_config(db, SQLITE_DBCONFIG_DEFENSIVE, 1, nullptr);
  sqlite3_busy_timeout(db, 30000);
  sqlite3_extended_result_codes(db, 1);
  return conn;
}

Connection& Connection::operator=(Connection&& other) noexcept {
  if (this != &other) {
    if (db_) sqlite3_close(db_);
    db_ = other.db_;
    path_ = std::move(other.path_);
    other.db_ = nullptr;
  }
  return *this;
}

Connection::~Connection() {
  if (db_) sqlite3_close(db_);
}

int64_t Connection::changes() const {
  return sqlite3_changes64(db_);
}

Error Connection::lastError(const std::string& what) const {
  return makeError(path_, ": ", what, ": ", sqlite3_errmsg(db_));
}

Status Connection::exec(const std::string& sql) {
  char* message = nullptr;
  if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &message) != SQLITE_OK) {
    std::string text = message ? message : "unknown error";
    sqlite3_free(message);
    return makeError(path_, ": ", text);
  }
  return {};
}

Expected<Statement> Connection::prepare(const std::string& sql) {
  sqlite3_stmt* stmt = nullptr;
  if (sqlite3_prepare_v2(db_, sql.c_str(), static_cast<int>(sql.size()), &stmt, nullptr) !=
      SQLITE_OK)
    return lastError("cannot prepare a statement");
  return Statement(stmt, this);
}

Statement::~Statement() {
  if (stmt_) sqlite3_finalize(stmt_);
}

Statement& Statement::bind(int index, int64_t value) {
  sqlite3_bind_int64(stmt_, index, value);
  return *this;
}

Statement& Statement::bind(int index, double value) {
  sqlite3_bind_double(stmt_, index, value);
  return *this;
}

Statement& Statement::bind(int index, const std::string& value) {
  sqlite3_bind_text(stmt_, index, value.data(), static_cast<int>(value.size()), SQLITE_TRANSIENT);
  return *this;
}

Statement& Statement::bindNull(int index) {
  sqlite3_bind_null(stmt_, index);
  return *this;
}

Expected<bool> Statement::step() {
  int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  return conn_->lastError("query failed");
}

Status Statement::run() {
  while (true) {
    TUNEC_ASSIGN_OR_RETURN(bool row, step());
    if (!row) break;
  }
  reset();
  return {};
}

void Statement::reset() {
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
}

int64_t Statement::columnInt(int column) const {
  return sqlite3_column_int64(stmt_, column);
}
double Statement::columnDouble(int column) const {
  return sqlite3_column_double(stmt_, column);
}
bool Statement::columnIsNull(int column) const {
  return sqlite3_column_type(stmt_, column) == SQLITE_NULL;
}

std::string Statement::columnText(int column) const {
  const unsigned char* text = sqlite3_column_text(stmt_, column);
  int bytes = sqlite3_column_bytes(stmt_, column);
  return text ? std::string(reinterpret_cast<const char*>(text), static_cast<size_t>(bytes))
              : std::string();
}

Expected<Transaction> Transaction::begin(Connection& conn) {
  TUNEC_TRY(conn.exec("BEGIN IMMEDIATE"));
  return Transaction(conn);
}

Transaction::~Transaction() {
  if (!done_) (void)conn_->exec("ROLLBACK");
}

Status Transaction::commit() {
  done_ = true;
  return conn_->exec("COMMIT");
}

} // namespace tunec::db
