// `tessera db list|best|export|import|stats` and `tessera measure`. Every failure is one line on
// stderr; a DB or JSON file that is corrupt is reported and left as it was.
#include "cli/db_command.h"

#include <fmt/format.h>
#include <unistd.h>

#include <ctime>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/print_error.h"
#include "cli/validators.h"
#include "db/jsonl.h"
#include "db/record_db.h"
#include "measure/measure.h"
#include "ops/workload.h"
#include "runtime/output_file.h"
#include "runtime/text_file.h"
#include "schedule/strategy_parser.h"
#include "te/error.h"

namespace tessera {

namespace {

constexpr int kExitFailure = 1;
constexpr int kExitBadInput = 2;

int fail(int code, const std::string& message) {
  std::string line = message;
  for (char& c : line) c = c == '\n' ? ' ' : c;
  print_error(line);
  return code;
}

std::string format_time(int64_t ms) {
  std::time_t t = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm);
  return buf;
}

std::string one_line(std::string s, size_t max) {
  for (char& c : s) c = c == '\n' ? ' ' : c;
  return s.size() > max ? s.substr(0, max - 3) + "..." : s;
}

// Progress on a terminal: "build 12/64" rewritten in place; nothing when stderr is a file.
ProgressFn terminal_progress() {
  if (!isatty(2)) return nullptr;
  return [](const char* stage, size_t done, size_t total) {
    std::cerr << fmt::format("\r{} {}/{}   ", stage, done, total) << (done == total ? "\n" : "")
              << std::flush;
  };
}

}  // namespace

struct DbCommands {
  std::string db = kDefaultDbPath;
  std::string workload;
  std::string file;
  int64_t limit = 20;
  bool errors_only = false;
  bool any_target = false;
  bool json = false;
  bool strategy_only = false;
  CLI::App* list = nullptr;
  CLI::App* best = nullptr;
  CLI::App* export_ = nullptr;
  CLI::App* import = nullptr;
  CLI::App* stats = nullptr;

  // `tessera measure`
  CLI::App* measure = nullptr;
  std::string strategy = "id";
  MeasureParams params;
  bool no_flush = false;
  bool no_db = false;
};

std::shared_ptr<DbCommands> add_db_commands(CLI::App& app) {
  auto c = std::make_shared<DbCommands>();
  CLI::App* db = app.add_subcommand("db", "Tuning records: list, best, export, import, stats");
  db->require_subcommand(1);
  const std::string db_help = fmt::format(
      "Records database (SQLite; default: {} in the current directory)", kDefaultDbPath);
  auto add_db = [&](CLI::App* cmd) { cmd->add_option("--db", c->db, db_help)->check(db_path()); };

  c->list = db->add_subcommand("list", "List records, most recent first");
  add_db(c->list);
  c->list->add_option("--workload,-w", c->workload, "Only this workload (op:key=value,...)");
  c->list->add_option("--limit,-n", c->limit, "At most this many (default 20; 0: all)")
      ->check(whole_number(INT64_MAX, "a whole number of 0 or more"));
  c->list->add_flag("--errors", c->errors_only, "Only failed measurements");
  c->list->add_flag("--json", c->json, "One JSON object per line (as `db export` writes)");

  c->best =
      db->add_subcommand("best", "The fastest correct strategy for a workload on this machine");
  add_db(c->best);
  c->best->add_option("workload", c->workload, "op:key=value,...")->required();
  c->best->add_flag("--any-target", c->any_target, "Consider records of every machine");
  c->best->add_flag("--strategy-only", c->strategy_only, "Print only the strategy text");
  c->best->add_flag("--json", c->json, "Print the record as JSON");

  c->export_ = db->add_subcommand("export", "Write every record as JSON lines");
  add_db(c->export_);
  c->export_->add_option("file", c->file, "Output file (default: standard output)");

  c->import = db->add_subcommand(
      "import", "Merge JSON-lines records into the DB (duplicates skipped; all or nothing)");
  add_db(c->import);
  c->import->add_option("file", c->file, "JSON-lines file written by `db export`")->required();

  c->stats = db->add_subcommand("stats", "Counts of workloads, targets, configurations, results");
  add_db(c->stats);

  CLI::App* m = c->measure = app.add_subcommand(
      "measure", "Build and run one candidate in a worker process, check it, time it, record it");
  m->add_option("workload", c->workload, "op:key=value,..., e.g. matmul:M=256,N=256,K=256")
      ->required();
  m->add_option("--strategy,-s", c->strategy, "Strategy text (default: id)");
  m->add_option("--db", c->db, db_help)->check(db_path());
  m->add_flag("--no-db", c->no_db, "Do not record the result");
  RunParams& run = c->params.run;
  m->add_option("--repeat", run.timing.repeat, "Timed repeats (default 5)")
      ->check(positive_number());
  m->add_option("--number", run.timing.number, "Runs per repeat, at least (default 1)")
      ->check(positive_number());
  m->add_option("--min-repeat-ms", run.timing.min_repeat_ms,
                "Grow --number until a repeat lasts this long (default 20)")
      ->check(non_negative_number());
  m->add_flag("--no-flush", c->no_flush, "Do not flush caches before each repeat");
  m->add_option("--threads,-t", run.threads, "OpenMP threads (0, the default: all cores)")
      ->check(thread_count());
  m->add_option("--cpus", run.cpus, "Pin the worker's threads to these CPUs (e.g. --cpus 0 1)")
      ->check(cpu_id());
  m->add_option("--timeout", run.timeout_s, "Run time limit in seconds (default 10)")
      ->check(positive_number());
  m->add_option("--build-timeout", c->params.build.timeout_s,
                "Build time limit in seconds (default 30)")
      ->check(positive_number());
  m->add_flag("--json", c->json, "Print the record as one JSON line");
  return c;
}

namespace {

int list_command(const DbCommands& c) {
  RecordDb db = RecordDb::open(c.db, RecordDb::Mode::kReadOnly);
  RecordQuery q;
  q.workload = c.workload.empty() ? "" : parse_workload(c.workload).text();
  std::vector<Record> records = db.records(q);  // oldest first
  std::vector<const Record*> shown;
  for (auto it = records.rbegin(); it != records.rend(); ++it) {
    if (c.errors_only && it->result.error == ErrorKind::kOk) continue;
    if (c.limit > 0 && static_cast<int64_t>(shown.size()) >= c.limit) break;
    shown.push_back(&*it);
  }
  if (c.json) {
    for (const Record* r : shown) std::cout << record_to_json(*r) << "\n";
    return 0;
  }
  std::cout << fmt::format("{:<19}  {:<26}  {:<15}  {:>10}  {:>8}  {}\n", "measured (UTC)",
                           "workload", "result", "median ms", "GFLOP/s", "strategy");
  for (const Record* rec : shown) {
    const MeasureResult& r = rec->result;
    const bool ok = r.error == ErrorKind::kOk;
    std::cout << fmt::format("{:<19}  {:<26}  {:<15}  {:>10}  {:>8}  {}\n",
                             format_time(r.timestamp_ms), one_line(r.workload, 26),
                             error_kind_name(r.error),
                             ok ? fmt::format("{:.4f}", r.timing.median * 1e3) : "-",
                             ok ? fmt::format("{:.2f}", r.gflops()) : "-",
                             ok ? r.strategy : r.strategy + "  (" + one_line(r.message, 80) + ")");
  }
  std::cout << fmt::format("{} of {} records{}\n", shown.size(), records.size(),
                           c.workload.empty() ? "" : " for " + q.workload);
  return 0;
}

int best_command(const DbCommands& c) {
  const std::string workload = parse_workload(c.workload).text();
  RecordDb db = RecordDb::open(c.db, RecordDb::Mode::kReadOnly);
  const Target here = detect_target();
  // Records timed alone first; a workload that compile tuned has records timed in-model only.
  std::string target = c.any_target ? "" : here.key();
  std::optional<Record> best = db.best(workload, target);
  if (!best && !c.any_target) {
    target = here.in_model().key();
    best = db.best(workload, target);
  }
  if (!best) {
    return fail(kExitFailure,
                fmt::format("no correct record of {} {} in {}", workload,
                            c.any_target ? "on any machine" : "on this machine", c.db));
  }
  const MeasureResult& r = best->result;
  std::optional<Pick> pick = db.current_pick(workload, target);
  if (c.strategy_only) {
    std::cout << r.strategy << "\n";
  } else if (c.json) {
    nlohmann::json j = nlohmann::json::parse(record_to_json(*best));
    if (pick) {
      j["pick"] = {{"median", pick->median},
                   {"gflops", r.flops / pick->median * 1e-9},
                   {"rounds", pick->rounds},
                   {"candidates", pick->candidates.size()},
                   {"picked_at_ms", pick->picked_at_ms}};
    }
    std::cout << j.dump() << "\n";
  } else {
    std::cout << fmt::format(
        "workload  {}\nstrategy  {}\ntime      {:.4f} ms (median of {})\n"
        "GFLOP/s   {:.2f}\nmeasured  {} UTC on {}\n",
        r.workload, r.strategy, r.timing.median * 1e3, r.timing.repeats.size(), r.gflops(),
        format_time(r.timestamp_ms), best->target.cpu_model);
    if (pick) {
      std::cout << fmt::format(
          "picked    {} UTC: {:.2f} GFLOP/s, median of {} rounds timing the {} fastest "
          "configurations together\n",
          format_time(pick->picked_at_ms), r.flops / pick->median * 1e-9, pick->rounds,
          pick->candidates.size());
    }
  }
  return 0;
}

int export_command(const DbCommands& c) {
  RecordDb db = RecordDb::open(c.db, RecordDb::Mode::kReadOnly);
  if (c.file.empty() || c.file == "-") {
    export_jsonl(db, std::cout);
    return 0;
  }
  size_t n = 0;
  try {
    check_output_path(c.file, FileKind::kJsonl, {c.db});
    write_file_atomically(c.file, [&](std::ostream& out) { n = export_jsonl(db, out); });
  } catch (const Error& e) {
    return fail(kExitBadInput, e.what());
  }
  std::cerr << fmt::format("exported {} records to {}\n", n, c.file);
  return 0;
}

int import_command(const DbCommands& c) {
  // Parse the file before touching the DB: a malformed file leaves a missing DB uncreated.
  require_regular_file(c.file, "records file");
  std::ifstream in(c.file, std::ios::binary);
  if (!in) return fail(kExitBadInput, "cannot read " + c.file);
  std::vector<Record> records = parse_jsonl(in, c.file);
  // The workloads must be ones tessera knows: `tune` and `bench` rebuild them.
  for (size_t i = 0; i < records.size(); ++i) {
    try {
      canonical_workload(records[i].result.workload);
    } catch (const Error& e) {
      return fail(kExitBadInput,
                  fmt::format("{}: record {}: {}; nothing was imported", c.file, i + 1, e.what()));
    }
  }
  RecordDb db = RecordDb::open(c.db, RecordDb::Mode::kReadWrite);
  const size_t added = db.append(records);
  std::cout << fmt::format("imported {} new records into {} ({} in the file, {} already there)\n",
                           added, c.db, records.size(), records.size() - added);
  return 0;
}

int stats_command(const DbCommands& c) {
  RecordDb db = RecordDb::open(c.db, RecordDb::Mode::kReadOnly);
  DbStats st = db.stats();
  std::cout << fmt::format("database        {}\nschema version  {}\n", c.db, st.schema_version);
  std::cout << fmt::format(
      "workloads       {}\ntargets         {}\nconfigurations  {}\n"
      "results         {}\n",
      st.workloads, st.targets, st.configs, st.results);
  for (const auto& [kind, n] : st.results_by_error) {
    std::cout << fmt::format("  {:<14}{}\n", kind, n);
  }
  std::cout << fmt::format("picks           {}\n", st.picks);
  return 0;
}

int measure_command(const DbCommands& c) {
  // Bad input is refused before anything runs or is recorded.
  MeasureParams params = c.params;
  params.run.timing.flush_cache = !c.no_flush;
  instantiate(parse_workload(c.workload));  // throws for a bad workload
  parse_strategy(c.strategy);               // throws for text that does not parse
  std::optional<RecordDb> db;
  if (!c.no_db) db.emplace(RecordDb::open(c.db, RecordDb::Mode::kReadWrite));
  Measurer m(params);
  MeasureResult r =
      m.measure({{c.workload, c.strategy, std::nullopt}}, terminal_progress()).front();
  if (db) db->append(m.target(), {r});
  if (c.json) {
    Record rec{r, m.target(), tessera_version(), current_schema_version()};
    std::cout << record_to_json(rec) << "\n";
  } else {
    std::cout << fmt::format("workload  {}\nstrategy  {}\nresult    {}\n", r.workload, r.strategy,
                             error_kind_name(r.error));
    if (r.error == ErrorKind::kOk) {
      std::cout << fmt::format(
          "time      {:.4f} ms median of {} repeats (mean {:.4f}, std {:.4f}; {} runs each; "
          "caches {})\nGFLOP/s   {:.2f}\n",
          r.timing.median * 1e3, r.timing.repeats.size(), r.timing.mean * 1e3, r.timing.std * 1e3,
          r.timing.number, c.no_flush ? "not flushed" : "flushed", r.gflops());
    } else {
      std::cout << "message   " << one_line(r.message, 500) << "\n";
    }
    if (r.error != ErrorKind::kInstantiation) {
      std::cout << fmt::format("build     {:.3f} s{}, run {:.3f} s\n", r.build_seconds,
                               r.build_seconds == 0 ? " (cached)" : "", r.run_seconds);
    }
    if (db) std::cout << "recorded  in " << c.db << "\n";
  }
  // Not applicable: recorded (the tuner learns from it too), and bad input like `tessera run`.
  if (r.error == ErrorKind::kInstantiation) {
    print_error("strategy does not apply: " + one_line(r.message, 500));
    return kExitBadInput;
  }
  return r.error == ErrorKind::kOk ? 0 : kExitFailure;
}

}  // namespace

std::optional<int> run_db_commands(const DbCommands& c) {
  try {
    if (c.list->parsed()) return list_command(c);
    if (c.best->parsed()) return best_command(c);
    if (c.export_->parsed()) return export_command(c);
    if (c.import->parsed()) return import_command(c);
    if (c.stats->parsed()) return stats_command(c);
    if (c.measure->parsed()) return measure_command(c);
  } catch (const Error& e) {
    return fail(kExitBadInput, e.what());
  } catch (const std::exception& e) {
    return fail(kExitFailure, e.what());
  }
  return std::nullopt;
}

}  // namespace tessera
