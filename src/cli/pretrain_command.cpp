#include "cli/pretrain_command.h"

#include <fmt/format.h>

#include <chrono>
#include <iostream>
#include <set>

#include "cli/validators.h"
#include "db/record_db.h"
#include "measure/target.h"
#include "model/treegru_model.h"
#include "runtime/output_file.h"
#include "te/error.h"
#include "tune/global_model.h"
#include "tune/tuner.h"

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
  auto nothing_to_learn = [&] {
    throw_error("nothing to learn: no workload of {} has a successful record",
                fmt::join(a.dbs, ", "));
  };
  auto seconds = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  if (is_treegru_tuner(a.tuner)) {
    // The TreeGRU learns every workload's programs at once, its labels each workload's
    // throughput over its best: what the tuner's local fits go on from (--pretrained).
    GlobalModel rows(a.output, "tree", XGBoostParams::Objective::kRank, "", a.seed);
    GlobalModel::TrainingSet set = rows.training_set(records);
    if (set.x.empty()) nothing_to_learn();
    TreeGRUParams params;
    params.objective = a.tuner == "treegru" ? TreeGRUParams::Objective::kRank
                                            : TreeGRUParams::Objective::kRegression;
    params.seed = a.seed;
    params.first_fit_steps = a.steps;
    TreeGRUModel model(params);
    model.fit(set.x, set.y);
    model.save(a.output);
    std::cout << fmt::format(
        "pretrain: wrote {} (loop-tree features, {} tuner): {} records of {} workloads, {} "
        "steps, final loss {:.4f}, {:.1f} s\n",
        a.output, a.tuner, set.x.size(), set.workloads.size(), a.steps, model.last_loss(),
        seconds());
    return 0;
  }
  const auto objective =
      a.tuner == "xgb" ? XGBoostParams::Objective::kRank : XGBoostParams::Objective::kRegression;
  GlobalModel model(a.output, a.features, objective, "", a.seed);
  model.fit(records, target);
  if (!model.model()) nothing_to_learn();
  model.save_pretrained(a.output);
  std::cout << fmt::format(
      "pretrain: wrote {} ({} features, {} tuner): {} records of {} workloads, {:.1f} s\n",
      a.output, a.features, a.tuner, model.records(), model.workloads().size(), seconds());
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
  c.app
      ->add_option("--tuner", a.tuner,
                   "The tuner it will serve: xgb (rank loss), xgb-reg, treegru (rank loss) or "
                   "treegru-reg; a TreeGRU reads the loop tree, not --features")
      ->check(CLI::IsMember({"xgb", "xgb-reg", "treegru", "treegru-reg"}));
  c.app
      ->add_option("--steps", a.steps,
                   "Training steps of a TreeGRU (Adam, 128 programs a step; default 600)")
      ->check(CLI::Range(1, 1000000));
  c.app->add_option("--seed", a.seed, "Seed of the model's training")->check(seed_number());
  return c;
}

std::optional<int> run_pretrain_command(const PretrainCommand& c) {
  if (!c.app->parsed()) return std::nullopt;
  return pretrain_command(*c.args);
}

}  // namespace tessera
