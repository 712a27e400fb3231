#include "cli/pretrain_command.h"

#include <fmt/format.h>

#include <chrono>
#include <iostream>
#include <set>

#include "cli/validators.h"
#include "db/record_db.h"
#include "measure/target.h"
#include "runtime/output_file.h"
#include "te/error.h"
#include "tune/global_model.h"

namespace tessera {

namespace {

int pretrain_command(const PretrainArgs& a) {
  const auto start = std::chrono::steady_clock::now();
  check_output_path(a.output, FileKind::kCostModel, a.dbs);
  const std::string target = detect_target().key();
  // Every record of this machine's target in every DB, each once (the same record imported into
  // two DBs counts once).
  // Every DB is read before anything is said, so that a bad one is the command's one line.
  std::vector<Record> records;
  std::set<std::string> seen;
  std::vector<std::string> counts;
  for (const std::string& path : a.dbs) {
    RecordDb db = RecordDb::open(path, RecordDb::Mode::kReadOnly);
    RecordQuery q;
    q.target_key = target;
    size_t added = 0;
    for (Record& r : db.records(q)) {
      if (!seen.insert(r.key()).second) continue;
      records.push_back(std::move(r));
      ++added;
    }
    counts.push_back(fmt::format("pretrain: {}: {} record{} of this machine\n", path, added,
                                 added == 1 ? "" : "s"));
  }
  if (records.empty())
    throw_error("no records of this machine ({}) in {}", target, fmt::join(a.dbs, ", "));
  for (const std::string& line : counts) std::cerr << line;
  const auto objective =
      a.tuner == "xgb" ? XGBoostParams::Objective::kRank : XGBoostParams::Objective::kRegression;
  GlobalModel model(a.output, a.features, objective, "", a.seed);
  model.fit(records, target);
  if (!model.model())
    throw_error("nothing to learn: no workload of {} has a successful record",
                fmt::join(a.dbs, ", "));
  model.save_pretrained(a.output);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << fmt::format(
      "pretrain: wrote {} ({} features, {} tuner): {} records of {} workloads, {:.1f} s\n",
      a.output, a.features, a.tuner, model.records(), model.workloads().size(), seconds);
  return 0;
}

}  // namespace

PretrainCommand add_pretrain_command(CLI::App& app) {
  PretrainCommand c;
  c.app = app.add_subcommand(
      "pretrain",
      "Train a cost model on the records of many workloads (any operators, any models) for this "
      "machine, for tune, tune-all and compile to start from (--pretrained)");
  PretrainArgs& a = *c.args;
  c.app->add_option("--db", a.dbs, "Records DB to learn from (repeat for several)")
      ->required()
      ->check(db_path());
  c.app->add_option("-o,--output", a.output, "The cost model file to write")
      ->required()
      ->check(nonempty_path());
  c.app->add_option("--features", a.features, "relation (default) or context")
      ->check(CLI::IsMember({"relation", "context"}));
  c.app->add_option("--tuner", a.tuner, "The tuner it will serve: xgb (rank loss) or xgb-reg")
      ->check(CLI::IsMember({"xgb", "xgb-reg"}));
  c.app->add_option("--seed", a.seed, "Seed of XGBoost")->check(seed_number());
  return c;
}

std::optional<int> run_pretrain_command(const PretrainCommand& c) {
  if (!c.app->parsed()) return std::nullopt;
  return pretrain_command(*c.args);
}

}  // namespace tessera
