/// A thin RAII layer over the SQLite C API: connections and prepared statements that throw
/// SqliteError (a tessera::Error) with SQLite's message and result code.
#pragma once

#include <cstdint>
#include <string>

#include "te/error.h"

struct sqlite3;
struct sqlite3_stmt;

namespace tessera {

class SqliteStatement;

class SqliteError : public Error {
 public:
  SqliteError(const std::string& message, int code) : Error(message), code_(code) {}
  /// SQLite's extended result code (SQLITE_CORRUPT, SQLITE_CANTOPEN, ...).
  int code() const { return code_; }
  /// A damaged or foreign file (SQLITE_CORRUPT, SQLITE_NOTADB), rather than one that could not
  /// be opened or locked.
  bool damaged() const;

 private:
  int code_;
};

class SqliteConnection {
 public:
  /// Opens `path` read-only, or read-write creating it if absent. Throws tessera::Error.
  SqliteConnection(const std::string& path, bool read_only);
  ~SqliteConnection();
  SqliteConnection(SqliteConnection&& other) noexcept;
  SqliteConnection& operator=(SqliteConnection&& other) noexcept;
  SqliteConnection(const SqliteConnection&) = delete;
  SqliteConnection& operator=(const SqliteConnection&) = delete;

  /// Runs one or more statements that return no rows.
  void exec(const std::string& sql);
  SqliteStatement prepare(const std::string& sql);
  /// The first column of the first row of a query, as text ("" when no row).
  std::string query_text(const std::string& sql);
  int64_t query_int(const std::string& sql);
  int64_t last_insert_id() const;
  int changes() const;
  sqlite3* handle() const { return db_; }
  const std::string& path() const { return path_; }

 private:
  sqlite3* db_ = nullptr;
  std::string path_;
};

class SqliteStatement {
 public:
  SqliteStatement(sqlite3* db, sqlite3_stmt* stmt) : db_(db), stmt_(stmt) {}
  ~SqliteStatement();
  SqliteStatement(SqliteStatement&& other) noexcept;
  SqliteStatement(const SqliteStatement&) = delete;
  SqliteStatement& operator=(const SqliteStatement&) = delete;
  SqliteStatement& operator=(SqliteStatement&&) = delete;

  /// Parameters are numbered from 1.
  SqliteStatement& bind(int i, const std::string& v);
  SqliteStatement& bind(int i, int64_t v);
  SqliteStatement& bind(int i, double v);
  /// True while there is a row to read; false when done.
  bool step();
  void reset();
  std::string text(int col) const;
  int64_t integer(int col) const;
  double real(int col) const;

 private:
  sqlite3* db_;
  sqlite3_stmt* stmt_;
};

}  // namespace tessera
