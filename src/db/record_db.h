/// Tuning records in an SQLite file: workloads, targets (machine fingerprints), configurations
/// and results. Appends are one transaction per batch; nothing is ever overwritten.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "db/sqlite.h"
#include "measure/measure.h"
#include "measure/target.h"

namespace tessera {

/// The schema version this tessera writes (see db/schema.cpp for the migrations).
int current_schema_version();
/// The version of tessera that writes records ("0.1.0").
std::string tessera_version();
/// The name `tessera db` uses when --db is not given: `tessera.db` in the current directory.
inline constexpr const char* kDefaultDbPath = "tessera.db";

struct Record {
  MeasureResult result;
  Target target;
  std::string tessera_version;
  int schema_version = 0;  // of the tessera that measured it

  /// Stable hash of (workload, strategy): the configuration's key.
  std::string config_key() const;
  /// Stable hash of everything measured: two records with the same key are one measurement.
  std::string key() const;
};

/// One configuration of a re-timing (tune/retime.h): its fastest tuning measurement and its
/// medians in the rounds that timed all candidates together.
struct PickCandidate {
  std::string strategy;
  double tuned_median = 0;            // seconds: its fastest record when the re-timing began
  std::vector<double> round_medians;  // seconds per round; 0 where that round failed
  double median = 0;  // seconds: median over the rounds (failures as infinitely slow)
};

/// The configuration a run returns after re-timing its fastest ones together: `db best` and
/// `tessera bench` use it until a later measurement is faster than its re-timed median.
struct Pick {
  std::string workload;  // canonical text
  std::string strategy;  // the picked candidate's
  Target target;
  double median = 0;  // seconds: the picked candidate's median over the rounds
  int rounds = 0;
  std::vector<PickCandidate>
      candidates;            // in the order of their tuning measurements, fastest first
  int64_t picked_at_ms = 0;  // Unix time
  std::string tessera_version;
};

struct RecordQuery {
  std::string workload;    // canonical text; empty: all
  std::string target_key;  // Target::key(); empty: all
  bool only_ok = false;
  int64_t limit = -1;  // most recent first when limited; otherwise in insertion order
};

struct DbStats {
  int schema_version = 0;
  int64_t workloads = 0, targets = 0, configs = 0, results = 0, picks = 0;
  std::map<std::string, int64_t> results_by_error;  // error kind name -> count
};

/// Whether SQLite would take `path` as a temporary or in-memory database (empty, ":memory:", a
/// "file:" URI), where every record written is lost.
bool names_no_db_file(const std::string& path);

class RecordDb {
 public:
  enum class Mode { kReadOnly, kReadWrite };

  /// kReadWrite creates the file on first use and migrates an older schema. An existing file is
  /// first checked read-only (SQLite header, `PRAGMA quick_check`, application id, schema
  /// version): a corrupt, truncated, foreign or newer file gives tessera::Error with a one-line
  /// message and is left exactly as it was. kReadOnly never writes the file.
  static RecordDb open(const std::string& path, Mode mode);

  /// Appends the batch in one transaction: all of it or (on any failure, or a kill) none.
  /// Records already present (same key) are skipped; returns how many were added.
  size_t append(const std::vector<Record>& batch);
  /// Records for measurements of this tessera on `target`.
  size_t append(const Target& target, const std::vector<MeasureResult>& batch);

  /// The record of the configuration to use for `workload` on the target (empty key: any): the
  /// latest pick's (its fastest record), unless records measured after the pick are faster than
  /// its re-timed median, then the fastest of those; without a pick, the fastest correct record.
  std::optional<Record> best(const std::string& workload, const std::string& target_key);
  /// Records a re-timing's outcome. Its workload and every candidate must have records here
  /// (tessera::Error otherwise); nothing is overwritten: the latest pick counts.
  void add_pick(const Pick& pick);
  /// The latest pick of `workload` on the target (empty key: any), if any.
  std::optional<Pick> latest_pick(const std::string& workload, const std::string& target_key);
  /// The latest pick if best() returns its configuration (no later record beat its median).
  std::optional<Pick> current_pick(const std::string& workload, const std::string& target_key);
  /// What the DB holds, for resuming a tuning run (any number of records, zero included).
  std::vector<Record> records(const RecordQuery& query = {});
  DbStats stats();
  /// Known target fingerprints, by key.
  std::map<std::string, Target> targets();
  const std::string& path() const { return conn_.path(); }
  /// Damaged rows the queries so far passed over (a malformed repeats list, a successful run
  /// without a positive median): counted, never fatal.
  size_t skipped_rows() const { return skipped_rows_; }

 private:
  explicit RecordDb(SqliteConnection conn) : conn_(std::move(conn)) {}
  bool has_picks();
  /// The fastest correct record of the workload, narrowed by `extra` (SQL after the WHERE of the
  /// records query, parameters from ?4 bound by bind_extra).
  std::optional<Record> fastest(const std::string& workload, const std::string& target_key,
                                const std::string& extra,
                                const std::function<void(SqliteStatement&)>& bind_extra);
  std::optional<Record> resolve_best(const std::string& workload, const std::string& target_key,
                                     std::optional<Pick>* standing_pick);
  SqliteConnection conn_;
  size_t skipped_rows_ = 0;
};

/// Applies the migrations from the file's PRAGMA user_version up to current_schema_version()
/// (db/schema.cpp). Throws tessera::Error for a file of a newer schema.
void migrate_schema(SqliteConnection& conn);
/// The PRAGMA application_id of tessera record files ('TSRA').
inline constexpr int64_t kApplicationId = 0x54535241;

}  // namespace tessera
