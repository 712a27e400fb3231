#include "db/sqlite.h"

#include <sqlite3.h>

#include <utility>

#include "te/error.h"

namespace tessera {

bool SqliteError::damaged() const {
  return (code_ & 0xff) == SQLITE_CORRUPT || (code_ & 0xff) == SQLITE_NOTADB;
}

SqliteConnection::SqliteConnection(const std::string& path, bool read_only) : path_(path) {
  const int flags = read_only ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
  int rc = sqlite3_open_v2(path.c_str(), &db_, flags | SQLITE_OPEN_FULLMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    std::string msg = db_ ? sqlite3_errmsg(db_) : sqlite3_errstr(rc);
    sqlite3_close(db_);
    db_ = nullptr;
    throw SqliteError(fmt::format("cannot open {}: {}", path, msg), rc);
  }
  sqlite3_extended_result_codes(db_, 1);
  // Another process (a second tuner) may hold the write lock for one batch.
  sqlite3_busy_timeout(db_, 10000);
}

SqliteConnection::~SqliteConnection() {
  if (db_) sqlite3_close_v2(db_);
}

SqliteConnection::SqliteConnection(SqliteConnection&& other) noexcept
    : db_(std::exchange(other.db_, nullptr)), path_(std::move(other.path_)) {}

SqliteConnection& SqliteConnection::operator=(SqliteConnection&& other) noexcept {
  if (this != &other) {
    if (db_) sqlite3_close_v2(db_);
    db_ = std::exchange(other.db_, nullptr);
    path_ = std::move(other.path_);
  }
  return *this;
}

void SqliteConnection::exec(const std::string& sql) {
  char* err = nullptr;
  if (int rc = sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err); rc != SQLITE_OK) {
    std::string msg = err ? err : sqlite3_errmsg(db_);
    sqlite3_free(err);
    throw SqliteError(fmt::format("{}: {}", path_, msg), sqlite3_extended_errcode(db_));
  }
}

SqliteStatement SqliteConnection::prepare(const std::string& sql) {
  sqlite3_stmt* stmt = nullptr;
  if (sqlite3_prepare_v2(db_, sql.c_str(), -1, &stmt, nullptr) != SQLITE_OK) {
    throw SqliteError(fmt::format("{}: {}", path_, sqlite3_errmsg(db_)),
                      sqlite3_extended_errcode(db_));
  }
  return SqliteStatement(db_, stmt);
}

std::string SqliteConnection::query_text(const std::string& sql) {
  SqliteStatement s = prepare(sql);
  return s.step() ? s.text(0) : "";
}

int64_t SqliteConnection::query_int(const std::string& sql) {
  SqliteStatement s = prepare(sql);
  return s.step() ? s.integer(0) : 0;
}

int64_t SqliteConnection::last_insert_id() const {
  return sqlite3_last_insert_rowid(db_);
}
int SqliteConnection::changes() const {
  return sqlite3_changes(db_);
}

SqliteStatement::~SqliteStatement() {
  if (stmt_) sqlite3_finalize(stmt_);
}

SqliteStatement::SqliteStatement(SqliteStatement&& other) noexcept
    : db_(other.db_), stmt_(std::exchange(other.stmt_, nullptr)) {}

SqliteStatement& SqliteStatement::bind(int i, const std::string& v) {
  sqlite3_bind_text(stmt_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
  return *this;
}
SqliteStatement& SqliteStatement::bind(int i, int64_t v) {
  sqlite3_bind_int64(stmt_, i, v);
  return *this;
}
SqliteStatement& SqliteStatement::bind(int i, double v) {
  sqlite3_bind_double(stmt_, i, v);
  return *this;
}

bool SqliteStatement::step() {
  int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  throw SqliteError(sqlite3_errmsg(db_), sqlite3_extended_errcode(db_));
}

void SqliteStatement::reset() {
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
}

std::string SqliteStatement::text(int col) const {
  const unsigned char* t = sqlite3_column_text(stmt_, col);
  return t ? std::string(reinterpret_cast<const char*>(t),
                         static_cast<size_t>(sqlite3_column_bytes(stmt_, col)))
           : std::string();
}
int64_t SqliteStatement::integer(int col) const {
  return sqlite3_column_int64(stmt_, col);
}
double SqliteStatement::real(int col) const {
  return sqlite3_column_double(stmt_, col);
}

}  // namespace tessera
