// RAII wrappers over SQLite: a connection, prepared statements with bound parameters (never
// string-built SQL) and transactions that roll back unless committed.
#pragma once

#include "support/error.h"

#include <cstdint>
#include <optional>
#include <string>

struct sqlite3;
struct sqlite3_stmt;

namespace tunec::db {

class Statement;

/// An open database connection.
class Connection {
public:
  /// Opens (or creates) `path`; WAL mode and a busy timeout so that concurrent writers wait
  /// instead of failing with "database is locked".
  static Expected<Connection> open(const std::string& path, bool create, bool readOnly);
  Connection(Connection&& other) noexcept : db_(other.db_), path_(std::move(other.path_)) {
    other.db_ = nullptr;
  }
  Connection& operator=(Connection&& other) noexcept;
  ~Connection();

  /// Runs SQL without parameters (schema statements, pragmas).
  Status exec(const std::string& sql);
  Expected<Statement> prepare(const std::string& sql);
  sqlite3* handle() const { return db_; }
  /// Rows changed by the last INSERT/UPDATE/DELETE.
  int64_t changes() const;
  const std::string& path() const { return path_; }
  /// The last SQLite error message, prefixed with the path.
  Error lastError(const std::string& what) const;

private:
  Connection(sqlite3* db, std::string path) : db_(db), path_(std::move(path)) {}
  sqlite3* db_ = nullptr;
  std::string path_;
};

/// A prepared statement; bind parameters by 1-based index, then step.
class Statement {
public:
  Statement(Statement&& other) noexcept : stmt_(other.stmt_), conn_(other.conn_) {
    other.stmt_ = nullptr;
  }
  ~Statement();
  Statement& bind(int index, int64_t value);
  Statement& bind(int index, double value);
  Statement& bind(int index, const std::string& value);
  Statement& bindNull(int index);
  /// true: a row is available; false: done. Errors carry SQLite's message.
  Expected<bool> step();
  /// Steps to completion (for statements without results).
  Status run();
  void reset();
  int64_t columnInt(int column) const;
  double columnDouble(int column) const;
  std::string columnText(int column) const;
  bool columnIsNull(int column) const;

private:
  friend class Connection;
  Statement(sqlite3_stmt* stmt, const Connection* conn) : stmt_(stmt), conn_(conn) {}
  sqlite3_stmt* stmt_ = nullptr;
  const Connection* conn_ = nullptr;
};

/// BEGIN IMMEDIATE ... COMMIT; rolls back in the destructor unless committed.
class Transaction {
public:
  static Expected<Transaction> begin(Connection& conn);
  Transaction(Transaction&& other) noexcept : conn_(other.conn_), done_(other.done_) {
    other.done_ = true;
  }
  ~Transaction();
  Status commit();

private:
  explicit Transaction(Connection& conn) : conn_(&conn) {}
  Connection* conn_;
  bool done_ = false;
};

} // namespace tunec::db
