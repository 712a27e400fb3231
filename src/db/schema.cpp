// The records DB schema as a list of migrations. Version N of the schema is what migrations
// 1..N build; PRAGMA user_version holds the version of a file. Append a migration to change
// the schema, never edit an old one: files written by older tessera versions are upgraded by
// running the ones they lack, each in the transaction that also bumps user_version.
#include <fmt/format.h>

#include <vector>

#include "db/record_db.h"
#include "te/error.h"

namespace tessera {

namespace {

const std::vector<const char*>& migrations() {
  static const std::vector<const char*> list = {
      // 1: the four tables.
      R"sql(
      CREATE TABLE workloads (
        id INTEGER PRIMARY KEY,
        key TEXT NOT NULL UNIQUE,        -- canonical `op:key=value,...`
        op TEXT NOT NULL,
        shape TEXT NOT NULL,             -- JSON object of the workload's parameters
        dtype TEXT NOT NULL,
        flops REAL NOT NULL
      );
      CREATE TABLE targets (
        id INTEGER PRIMARY KEY,
        key TEXT NOT NULL UNIQUE,        -- stable hash of the other columns
        cpu_model TEXT NOT NULL,
        isa TEXT NOT NULL,               -- space-separated ISA extensions
        cores INTEGER NOT NULL,
        compiler TEXT NOT NULL,          -- first line of `cc --version`
        flags TEXT NOT NULL
      );
      CREATE TABLE configs (
        id INTEGER PRIMARY KEY,
        key TEXT NOT NULL UNIQUE,        -- stable hash of (workload, strategy)
        workload_id INTEGER NOT NULL REFERENCES workloads(id),
        strategy TEXT NOT NULL
      );
      CREATE TABLE results (
        id INTEGER PRIMARY KEY,
        key TEXT NOT NULL UNIQUE,        -- stable hash of the whole measurement: duplicates
        config_id INTEGER NOT NULL REFERENCES configs(id),
        target_id INTEGER NOT NULL REFERENCES targets(id),
        error_kind TEXT NOT NULL,        -- ok, instantiation, compile_error, ...
        error_message TEXT NOT NULL,
        repeats TEXT NOT NULL,           -- JSON array: seconds per run of every repeat
        number INTEGER NOT NULL,         -- runs per repeat
        mean REAL NOT NULL,              -- statistics without min and max (when > 2 repeats)
        median REAL NOT NULL,
        std REAL NOT NULL,
        build_seconds REAL NOT NULL,
        run_seconds REAL NOT NULL,
        measured_at_ms INTEGER NOT NULL, -- Unix time
        tessera_version TEXT NOT NULL,
        schema_version INTEGER NOT NULL  -- of the tessera that measured it
      );
      CREATE INDEX results_by_config ON results(config_id, target_id);
      CREATE INDEX results_by_speed ON results(target_id, error_kind, median);
      )sql",
      // 2: picks, the outcome of re-timing a run's fastest configurations together
      // (tune/retime.h): the single fastest measurement is the luckiest of many noisy ones.
      R"sql(
      CREATE TABLE picks (
        id INTEGER PRIMARY KEY,
        workload_id INTEGER NOT NULL REFERENCES workloads(id),
        target_id INTEGER NOT NULL REFERENCES targets(id),
        config_id INTEGER NOT NULL REFERENCES configs(id),
        median REAL NOT NULL,            -- seconds: the picked configuration's median over rounds
        rounds INTEGER NOT NULL,
        candidates TEXT NOT NULL,        -- JSON array: strategy, tuned_median, medians per round
        picked_at_ms INTEGER NOT NULL,   -- Unix time
        tessera_version TEXT NOT NULL
      );
      CREATE INDEX picks_by_workload ON picks(workload_id, target_id, picked_at_ms);
      )sql",
  };
  return list;
}

}  // namespace

int current_schema_version() {
  return static_cast<int>(migrations().size());
}

void migrate_schema(SqliteConnection& conn) {
  conn.exec("BEGIN IMMEDIATE");
  try {
    const int64_t version = conn.query_int("PRAGMA user_version");
    if (version < 0) throw_error("{} is corrupt: schema version {}", conn.path(), version);
    if (version > current_schema_version()) {
      throw_error("{} has schema version {}, newer than this tessera's {}; use a newer tessera",
                  conn.path(), version, current_schema_version());
    }
    if (version == 0) conn.exec(fmt::format("PRAGMA application_id = {}", kApplicationId));
    for (int v = static_cast<int>(version); v < current_schema_version(); ++v) {
      conn.exec(migrations()[static_cast<size_t>(v)]);
    }
    conn.exec(fmt::format("PRAGMA user_version = {}", current_schema_version()));
    conn.exec("COMMIT");
  } catch (...) {
    conn.exec("ROLLBACK");
    throw;
  }
}

}  // namespace tessera
