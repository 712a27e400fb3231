#include "db/record_db.h"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "measure/hash.h"
#include "ops/workload.h"
#include "te/error.h"

namespace tessera {

bool names_no_db_file(const std::string& path) {
  return path.empty() || path == ":memory:" || path.starts_with("file:");
}

namespace fs = std::filesystem;
using nlohmann::json;

std::string tessera_version() {
#ifdef TESSERA_VERSION
  return TESSERA_VERSION;
#else
  return "unknown";
#endif
}

namespace {

// Checks an existing file without writing it: anything wrong is one line of tessera::Error.
void verify_existing(const std::string& path) {
  std::error_code ec;
  const auto size = fs::file_size(path, ec);
  if (ec) throw_error("cannot read {}: {}", path, ec.message());
  if (size == 0) return;  // what SQLite creates before the first write: an empty database
  char header[16] = {};
  std::ifstream in(path, std::ios::binary);
  in.read(header, sizeof header);
  if (!in || std::string(header, 16) != std::string("SQLite format 3\0", 16)) {
    throw_error("{} is not a tessera records database (not an SQLite file)", path);
  }
  // SQLite's own errors (SQLITE_CORRUPT, SQLITE_NOTADB) while checking mean a damaged file.
  std::string check_result;
  int64_t app = 0, version = 0, tables = 0;
  try {
    SqliteConnection conn(path, /*read_only=*/true);
    SqliteStatement check = conn.prepare("PRAGMA quick_check");
    check_result = check.step() ? check.text(0) : "no result";
    app = conn.query_int("PRAGMA application_id");
    version = conn.query_int("PRAGMA user_version");
    tables = conn.query_int("SELECT count(*) FROM sqlite_master");
  } catch (const SqliteError& e) {
    std::string msg = e.what();
    if (msg.rfind(path + ": ", 0) == 0) msg = msg.substr(path.size() + 2);
    if (e.damaged()) throw_error("{} is corrupt: {}", path, msg);
    // A healthy file SQLite could not open or lock: a WAL database needs its -shm file beside it,
    // which a read-only folder refuses.
    throw_error("cannot read {}: {} (is its folder writable?)", path, msg);
  }
  if (check_result != "ok") {
    for (char& c : check_result) c = c == '\n' ? ' ' : c;
    throw_error("{} is corrupt (integrity check: {})", path, check_result);
  }
  if (app != kApplicationId && !(app == 0 && version == 0 && tables == 0)) {
    throw_error("{} is an SQLite database but not a tessera records database", path);
  }
  if (version < 0) throw_error("{} is corrupt: schema version {}", path, version);
  if (version > current_schema_version()) {
    throw_error("{} has schema version {}, newer than this tessera's {}; use a newer tessera", path,
                version, current_schema_version());
  }
}

std::string shape_json(const std::string& workload, std::string& op) {
  try {
    Workload w = parse_workload(workload);
    op = w.op;
    json shape = json::object();
    for (const auto& [k, v] : w.params) shape[k] = v;
    return shape.dump();
  } catch (const Error&) {
    op = workload.substr(0, workload.find(':'));
    return "{}";
  }
}

// Runs `insert` (INSERT OR IGNORE ... key = ?1 ...) and returns the id of the row with `key`.
int64_t upsert_id(SqliteStatement& insert, SqliteStatement& select, const std::string& key) {
  insert.step();
  insert.reset();
  select.bind(1, key);
  if (!select.step()) throw_internal("row {} vanished after insert", key);
  const int64_t id = select.integer(0);
  select.reset();
  return id;
}

const char* kInsertTarget =
    "INSERT OR IGNORE INTO targets(key, cpu_model, isa, cores, compiler, flags) "
    "VALUES (?1, ?2, ?3, ?4, ?5, ?6)";
const char* kSelectTarget = "SELECT id FROM targets WHERE key = ?1";

// The id of target `t`'s row, inserted first when new (statements of kInsertTarget and
// kSelectTarget).
int64_t target_id(SqliteStatement& insert, SqliteStatement& select, const Target& t) {
  const std::string key = t.key();
  insert.bind(1, key).bind(2, t.cpu_model);
  insert.bind(3, fmt::format("{}", fmt::join(t.isa, " ")));
  insert.bind(4, int64_t{t.cores}).bind(5, t.compiler).bind(6, t.flags);
  return upsert_id(insert, select, key);
}

const char* kSelectRecords = R"sql(
  SELECT w.key, c.strategy, w.dtype, w.flops, r.error_kind, r.error_message, r.repeats,
         r.number, r.mean, r.median, r.std, r.build_seconds, r.run_seconds, r.measured_at_ms,
         r.tessera_version, r.schema_version,
         t.cpu_model, t.isa, t.cores, t.compiler, t.flags, t.key
  FROM results r JOIN configs c ON r.config_id = c.id JOIN workloads w ON c.workload_id = w.id
       JOIN targets t ON r.target_id = t.id
  WHERE (?1 = '' OR w.key = ?1) AND (?2 = '' OR t.key = ?2) AND (?3 = 0 OR r.error_kind = 'ok')
)sql";

// A target from six columns of `s` starting at `first`: cpu_model, isa, cores, compiler, flags
// and the key its row was filed under, which tells records timed in-model (Target::timing, not a
// column of its own) from those timed alone.
Target read_target(const SqliteStatement& s, int first) {
  Target t;
  t.cpu_model = s.text(first);
  const std::string isa = s.text(first + 1);
  for (size_t pos = 0; pos < isa.size();) {
    size_t sp = isa.find(' ', pos);
    if (sp == std::string::npos) sp = isa.size();
    if (sp > pos) t.isa.push_back(isa.substr(pos, sp - pos));
    pos = sp + 1;
  }
  t.cores = static_cast<int>(s.integer(first + 2));
  t.compiler = s.text(first + 3);
  t.flags = s.text(first + 4);
  if (s.text(first + 5) == t.in_model().key()) t.timing = t.in_model().timing;
  return t;
}

// A row written by another program or damaged on disk (its repeats not a JSON list of numbers,
// a successful run without a positive median): nullopt, and the caller skips it rather than
// aborting or ranking a zero time first.
std::optional<Record> read_record(const SqliteStatement& s) {
  Record rec;
  MeasureResult& r = rec.result;
  r.workload = s.text(0);
  r.strategy = s.text(1);
  r.dtype = s.text(2);
  r.flops = s.real(3);
  r.error = parse_error_kind(s.text(4)).value_or(ErrorKind::kUnknown);
  r.message = s.text(5);
  try {
    r.timing.repeats = json::parse(s.text(6)).get<std::vector<double>>();
  } catch (const json::exception&) {
    return std::nullopt;
  }
  r.timing.number = s.integer(7);
  r.timing.mean = s.real(8);
  r.timing.median = s.real(9);
  r.timing.std = s.real(10);
  r.build_seconds = s.real(11);
  r.run_seconds = s.real(12);
  r.timestamp_ms = s.integer(13);
  rec.tessera_version = s.text(14);
  rec.schema_version = static_cast<int>(s.integer(15));
  rec.target = read_target(s, 16);
  if (r.error == ErrorKind::kOk && !(r.timing.median > 0)) return std::nullopt;
  return rec;
}

}  // namespace

std::string Record::config_key() const {
  return stable_hash({result.workload, result.strategy});
}

std::string Record::key() const {
  const MeasureResult& r = result;
  return stable_hash({r.workload, r.strategy, target.key(), error_kind_name(r.error), r.message,
                      fmt::format("{}", fmt::join(r.timing.repeats, ",")),
                      std::to_string(r.timing.number), std::to_string(r.timestamp_ms),
                      fmt::format("{} {}", r.build_seconds, r.run_seconds)});
}

RecordDb RecordDb::open(const std::string& path, Mode mode) {
  // SQLite reads these as a temporary or in-memory database: tuning into one keeps nothing.
  if (path.empty() || path == ":memory:" || path.starts_with("file:"))
    throw_error("records database path '{}' names no file: every record would be lost", path);
  std::error_code ec;
  if (fs::exists(path, ec)) {
    verify_existing(path);
  } else if (mode == Mode::kReadOnly) {
    throw_error("{}: no such records database", path);
  }
  SqliteConnection conn(path, mode == Mode::kReadOnly);
  if (mode == Mode::kReadWrite) {
    conn.exec("PRAGMA journal_mode = WAL");
    // FULL: a committed batch is on disk before append() returns.
    conn.exec("PRAGMA synchronous = FULL");
    conn.exec("PRAGMA foreign_keys = ON");
    migrate_schema(conn);
  } else {
    conn.exec("PRAGMA query_only = ON");
    if (conn.query_int("PRAGMA user_version") == 0) {
      throw_error("{} holds no records database yet (it was never written)", path);
    }
  }
  return RecordDb(std::move(conn));
}

size_t RecordDb::append(const Target& target, const std::vector<MeasureResult>& batch) {
  std::vector<Record> records;
  for (const MeasureResult& r : batch) {
    records.push_back({r, target, tessera_version(), current_schema_version()});
  }
  return append(records);
}

size_t RecordDb::append(const std::vector<Record>& batch) {
  SqliteStatement ins_w = conn_.prepare(
      "INSERT OR IGNORE INTO workloads(key, op, shape, dtype, flops) VALUES (?1, ?2, ?3, ?4, ?5)");
  SqliteStatement sel_w = conn_.prepare("SELECT id FROM workloads WHERE key = ?1");
  SqliteStatement ins_t = conn_.prepare(kInsertTarget);
  SqliteStatement sel_t = conn_.prepare(kSelectTarget);
  SqliteStatement ins_c = conn_.prepare(
      "INSERT OR IGNORE INTO configs(key, workload_id, strategy) VALUES (?1, ?2, ?3)");
  SqliteStatement sel_c = conn_.prepare("SELECT id FROM configs WHERE key = ?1");
  SqliteStatement ins_r = conn_.prepare(R"sql(
    INSERT OR IGNORE INTO results(key, config_id, target_id, error_kind, error_message, repeats,
        number, mean, median, std, build_seconds, run_seconds, measured_at_ms, tessera_version,
        schema_version)
    VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15))sql");

  size_t added = 0;
  conn_.exec("BEGIN IMMEDIATE");
  try {
    for (const Record& rec : batch) {
      const MeasureResult& r = rec.result;
      std::string op;
      const std::string shape = shape_json(r.workload, op);
      ins_w.bind(1, r.workload).bind(2, op).bind(3, shape).bind(4, r.dtype).bind(5, r.flops);
      const int64_t wid = upsert_id(ins_w, sel_w, r.workload);

      const int64_t tid = target_id(ins_t, sel_t, rec.target);

      const std::string ckey = rec.config_key();
      ins_c.bind(1, ckey).bind(2, wid).bind(3, r.strategy);
      const int64_t cid = upsert_id(ins_c, sel_c, ckey);

      ins_r.bind(1, rec.key())
          .bind(2, cid)
          .bind(3, tid)
          .bind(4, std::string(error_kind_name(r.error)));
      ins_r.bind(5, r.message).bind(6, json(r.timing.repeats).dump()).bind(7, r.timing.number);
      ins_r.bind(8, r.timing.mean).bind(9, r.timing.median).bind(10, r.timing.std);
      ins_r.bind(11, r.build_seconds).bind(12, r.run_seconds).bind(13, r.timestamp_ms);
      ins_r.bind(14, rec.tessera_version).bind(15, int64_t{rec.schema_version});
      ins_r.step();
      added += static_cast<size_t>(conn_.changes());
      ins_r.reset();
    }
    conn_.exec("COMMIT");
  } catch (...) {
    conn_.exec("ROLLBACK");
    throw;
  }
  return added;
}

std::optional<Record> RecordDb::fastest(const std::string& workload, const std::string& target_key,
                                        const std::string& extra,
                                        const std::function<void(SqliteStatement&)>& bind_extra) {
  SqliteStatement s =
      conn_.prepare(std::string(kSelectRecords) + extra + " ORDER BY r.median ASC, r.id ASC");
  s.bind(1, workload).bind(2, target_key).bind(3, int64_t{1});
  if (bind_extra) bind_extra(s);
  while (s.step()) {
    if (std::optional<Record> r = read_record(s)) return r;
    ++skipped_rows_;
  }
  return std::nullopt;
}

std::optional<Record> RecordDb::resolve_best(const std::string& workload,
                                             const std::string& target_key,
                                             std::optional<Pick>* standing_pick) {
  std::optional<Pick> pick = latest_pick(workload, target_key);
  if (pick) {
    // A later measurement faster than the pick's re-timed median supersedes it (the pick only
    // ranked what was measured before it); the fastest such one is the answer, never a record
    // from before the pick, which the re-timing already ranked.
    std::optional<Record> later =
        fastest(workload, target_key, " AND r.measured_at_ms > ?4 AND r.median < ?5",
                [&](SqliteStatement& s) { s.bind(4, pick->picked_at_ms).bind(5, pick->median); });
    if (later) return later;
    std::optional<Record> picked = fastest(workload, target_key, " AND c.strategy = ?4",
                                           [&](SqliteStatement& s) { s.bind(4, pick->strategy); });
    if (picked) {
      if (standing_pick) *standing_pick = std::move(pick);
      return picked;
    }
  }
  return fastest(workload, target_key, "", nullptr);
}

std::optional<Record> RecordDb::best(const std::string& workload, const std::string& target_key) {
  return resolve_best(workload, target_key, nullptr);
}

std::optional<Pick> RecordDb::current_pick(const std::string& workload,
                                           const std::string& target_key) {
  std::optional<Pick> pick;
  resolve_best(workload, target_key, &pick);
  return pick;
}

void RecordDb::add_pick(const Pick& pick) {
  json candidates = json::array();
  for (const PickCandidate& c : pick.candidates) {
    candidates.push_back({{"strategy", c.strategy},
                          {"tuned_median", c.tuned_median},
                          {"round_medians", c.round_medians},
                          {"median", c.median}});
  }
  conn_.exec("BEGIN IMMEDIATE");
  try {
    SqliteStatement ins_t = conn_.prepare(kInsertTarget);
    SqliteStatement sel_t = conn_.prepare(kSelectTarget);
    const int64_t tid = target_id(ins_t, sel_t, pick.target);
    SqliteStatement sel_c = conn_.prepare(
        "SELECT c.id, w.id FROM configs c JOIN workloads w ON c.workload_id = w.id "
        "WHERE w.key = ?1 AND c.strategy = ?2");
    auto config_of = [&](const std::string& strategy) {
      sel_c.bind(1, pick.workload).bind(2, strategy);
      if (!sel_c.step()) {
        throw_error("{}: cannot record a pick of {}: no record of configuration '{}'", path(),
                    pick.workload, strategy);
      }
      std::pair<int64_t, int64_t> ids{sel_c.integer(0), sel_c.integer(1)};
      sel_c.reset();
      return ids;
    };
    for (const PickCandidate& c : pick.candidates) config_of(c.strategy);
    auto [cid, wid] = config_of(pick.strategy);
    SqliteStatement ins = conn_.prepare(R"sql(
      INSERT INTO picks(workload_id, target_id, config_id, median, rounds, candidates,
                        picked_at_ms, tessera_version)
      VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8))sql");
    ins.bind(1, wid).bind(2, tid).bind(3, cid).bind(4, pick.median);
    ins.bind(5, int64_t{pick.rounds}).bind(6, candidates.dump()).bind(7, pick.picked_at_ms);
    ins.bind(8, pick.tessera_version.empty() ? tessera_version() : pick.tessera_version);
    ins.step();
    conn_.exec("COMMIT");
  } catch (...) {
    conn_.exec("ROLLBACK");
    throw;
  }
}

std::optional<Pick> RecordDb::latest_pick(const std::string& workload,
                                          const std::string& target_key) {
  if (!has_picks()) return std::nullopt;
  SqliteStatement s = conn_.prepare(R"sql(
    SELECT w.key, c.strategy, p.median, p.rounds, p.candidates, p.picked_at_ms, p.tessera_version,
           t.cpu_model, t.isa, t.cores, t.compiler, t.flags, t.key
    FROM picks p JOIN configs c ON p.config_id = c.id JOIN workloads w ON p.workload_id = w.id
         JOIN targets t ON p.target_id = t.id
    WHERE w.key = ?1 AND (?2 = '' OR t.key = ?2)
    ORDER BY p.picked_at_ms DESC, p.id DESC LIMIT 1)sql");
  s.bind(1, workload).bind(2, target_key);
  if (!s.step()) return std::nullopt;
  Pick pick;
  pick.workload = s.text(0);
  pick.strategy = s.text(1);
  pick.median = s.real(2);
  pick.rounds = static_cast<int>(s.integer(3));
  try {
    for (const json& c : json::parse(s.text(4))) {
      pick.candidates.push_back(
          {c.at("strategy").get<std::string>(), c.at("tuned_median").get<double>(),
           c.at("round_medians").get<std::vector<double>>(), c.at("median").get<double>()});
    }
  } catch (const json::exception&) {
    // The pick itself (strategy, median) is intact; the runners-up it was chosen from are only
    // its history. A damaged list is skipped and counted like a damaged record.
    pick.candidates.clear();
    ++skipped_rows_;
  }
  pick.picked_at_ms = s.integer(5);
  pick.tessera_version = s.text(6);
  pick.target = read_target(s, 7);
  return pick;
}

std::vector<Record> RecordDb::records(const RecordQuery& q) {
  std::string sql = kSelectRecords;
  sql += q.limit >= 0 ? " ORDER BY r.id DESC LIMIT ?4" : " ORDER BY r.id ASC";
  SqliteStatement s = conn_.prepare(sql);
  s.bind(1, q.workload).bind(2, q.target_key).bind(3, int64_t{q.only_ok ? 1 : 0});
  if (q.limit >= 0) s.bind(4, q.limit);
  std::vector<Record> out;
  while (s.step()) {
    if (std::optional<Record> r = read_record(s))
      out.push_back(std::move(*r));
    else
      ++skipped_rows_;
  }
  return out;
}

bool RecordDb::has_picks() {
  // A file of schema 1 opened read-only is not migrated and has no picks table.
  return conn_.query_int(
             "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND "
             "name = 'picks'") > 0;
}

DbStats RecordDb::stats() {
  DbStats st;
  st.schema_version = static_cast<int>(conn_.query_int("PRAGMA user_version"));
  st.workloads = conn_.query_int("SELECT count(*) FROM workloads");
  st.targets = conn_.query_int("SELECT count(*) FROM targets");
  st.configs = conn_.query_int("SELECT count(*) FROM configs");
  st.results = conn_.query_int("SELECT count(*) FROM results");
  st.picks = has_picks() ? conn_.query_int("SELECT count(*) FROM picks") : 0;
  SqliteStatement s =
      conn_.prepare("SELECT error_kind, count(*) FROM results GROUP BY error_kind ORDER BY 1");
  while (s.step()) st.results_by_error[s.text(0)] = s.integer(1);
  return st;
}

std::map<std::string, Target> RecordDb::targets() {
  std::map<std::string, Target> out;
  SqliteStatement s =
      conn_.prepare("SELECT key, cpu_model, isa, cores, compiler, flags, key FROM targets");
  while (s.step()) out[s.text(0)] = read_target(s, 1);
  return out;
}

}  // namespace tessera
