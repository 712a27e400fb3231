// A short real tuning run: measured in workers, recorded in the DB, resumable, and the best
// configuration replays to a correct kernel.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <set>

#include "db/record_db.h"
#include "ops/evaluate.h"
#include "schedule/strategy_parser.h"
#include "tune/retime.h"
#include "tune/tune.h"
#include "tune/tune_test_util.h"

namespace tessera {
namespace {

// A busy machine is named once a quarter of at least 8 timed trials spread past 10%.
TEST(TuneRun, NoisyTimingsWarnOfABusyMachine) {
  TuneResult r;
  r.workload = "matmul:M=8,N=8,K=8";
  r.timed_trials = 7, r.noisy_trials = 7;
  EXPECT_FALSE(busy_machine_warning(r)) << "too few trials to tell";
  r.timed_trials = 40, r.noisy_trials = 9;
  EXPECT_FALSE(busy_machine_warning(r));
  r.noisy_trials = 10;
  std::optional<std::string> warning = busy_machine_warning(r);
  ASSERT_TRUE(warning);
  EXPECT_NE(warning->find("10 of 40 trials"), std::string::npos) << *warning;
  EXPECT_NE(warning->find("busy"), std::string::npos) << *warning;
}

TEST(TuneRun, RecordsEveryTrialResumesAndTheBestReplays) {
  std::string db = (std::filesystem::temp_directory_path() /
                    ("tessera_tune_" + std::to_string(getpid()) + ".db"))
                       .string();
  std::filesystem::remove(db);
  TuneParams params;
  params.tuner = "xgb";
  params.trials = 8;
  params.batch_size = 4;
  params.sa_chains = 16;
  params.sa_steps = 30;
  params.seed = 3;
  MeasureParams measure;
  measure.run.threads = 1;
  measure.run.timing.repeat = 3;
  measure.run.timing.min_repeat_ms = 1;
  std::vector<TuneProgress> seen;
  TuneResult first = tune("matmul:M=32,N=32,K=16", params, measure, db,
                          [&](const TuneProgress& p) { seen.push_back(p); });
  EXPECT_EQ(first.trials, 8);
  EXPECT_EQ(first.resumed, 0);
  ASSERT_EQ(seen.size(), 5u);  // one report per batch, then one per round of re-timing
  EXPECT_EQ(seen[1].trials_done, 8);
  EXPECT_EQ(seen[1].retime_rounds, 0);
  EXPECT_EQ(seen[2].retime_round, 1);
  EXPECT_EQ(seen.back().retime_round, 3);
  EXPECT_EQ(seen.back().retime_rounds, 3);
  EXPECT_GT(first.best_gflops, 0);
  ASSERT_EQ(first.best_curve.size(), 8u);
  EXPECT_TRUE(std::is_sorted(first.best_curve.begin(), first.best_curve.end()));
  // The five fastest were re-timed together; the pick is the result and lands in the DB.
  ASSERT_TRUE(first.pick);
  EXPECT_EQ(first.pick->candidates.size(), 5u);
  EXPECT_EQ(first.pick->rounds, 3);
  EXPECT_EQ(first.best_strategy, first.pick->strategy);
  EXPECT_DOUBLE_EQ(first.best_gflops, first.flops / first.pick->median * 1e-9);
  EXPECT_DOUBLE_EQ(first.best_tuned_gflops, first.best_curve.back());
  for (size_t i = 0; i < first.pick->candidates.size(); ++i) {
    const PickCandidate& c = first.pick->candidates[i];
    EXPECT_EQ(c.round_medians.size(), 3u);
    if (i > 0) {
      EXPECT_GE(c.tuned_median, first.pick->candidates[i - 1].tuned_median);
    }
  }
  EXPECT_DOUBLE_EQ(first.pick->candidates[0].tuned_median,
                   first.flops / first.best_tuned_gflops * 1e-9);

  {
    RecordDb records = RecordDb::open(db, RecordDb::Mode::kReadOnly);
    RecordQuery q;
    q.workload = "matmul:M=32,N=32,K=16";
    EXPECT_EQ(records.records(q).size(), 8u);  // re-timing adds no trials
    EXPECT_EQ(records.latest_pick(q.workload, "")->strategy, first.best_strategy);
    EXPECT_EQ(records.best(q.workload, "")->result.strategy, first.best_strategy);
  }

  params.trials = 4;
  TuneResult second = tune("matmul:M=32,N=32,K=16", params, measure, db);
  EXPECT_EQ(second.resumed, 8);
  EXPECT_EQ(second.trials, 4);
  ASSERT_TRUE(second.pick);  // its candidates include the first run's configurations
  EXPECT_GE(second.best_tuned_gflops, first.best_tuned_gflops);
  {
    RecordDb records = RecordDb::open(db, RecordDb::Mode::kReadOnly);
    RecordQuery q;
    q.workload = "matmul:M=32,N=32,K=16";
    std::vector<Record> all = records.records(q);
    EXPECT_EQ(all.size(), 12u);
    std::set<std::string> strategies;
    for (const Record& r : all) strategies.insert(r.result.strategy);
    EXPECT_EQ(strategies.size(), 12u) << "a resumed run proposed a configuration again";
  }

  {
    // A session resuming from the DB starts from the standing pick, as db best answers.
    RecordDb records = RecordDb::open(db, RecordDb::Mode::kReadWrite);
    Measurer measurer(measure);
    TuneSession resumed("matmul:M=32,N=32,K=16", params, measurer, &records);
    std::optional<Pick> pick = records.current_pick("matmul:M=32,N=32,K=16", "");
    ASSERT_TRUE(pick);
    EXPECT_EQ(pick->strategy, second.best_strategy);
    EXPECT_EQ(resumed.result().best_strategy, pick->strategy);
    EXPECT_DOUBLE_EQ(resumed.result().best_gflops, second.best_gflops);
    EXPECT_EQ(resumed.result().best_config, second.best_config);
  }

  OpInstance op = instantiate(parse_workload("matmul:M=32,N=32,K=16"));
  RewriteResult<Program> best = parse_strategy(second.best_strategy)(op.program);
  ASSERT_TRUE(best.ok()) << best.message();
  EvaluateParams eval;
  eval.time = false;
  EXPECT_TRUE(evaluate(op, best.program(), eval).correct);
  std::filesystem::remove(db);
  std::filesystem::remove(db + "-wal");
  std::filesystem::remove(db + "-shm");
}

// Tuning starts from what an untuned model runs, so it never ends slower than that.
TEST(TuneRun, TheFirstTrialIsTheDefaultConfiguration) {
  testing::TempDb db("tune_default_first");
  TuneParams params;
  params.tuner = "random";
  params.trials = 3;
  params.batch_size = 3;
  params.seed = 5;
  MeasureParams measure;
  measure.run.threads = 1;
  measure.run.timing.repeat = 1;
  measure.run.timing.min_repeat_ms = 1;
  const std::string workload = "matmul:M=64,N=64,K=64";
  tune(workload, params, measure, db.path);
  Workload w = parse_workload(workload);
  ConfigSpace space = space_for(w);
  std::string expected = space.instantiate(default_config(space, w, 1)).text();
  RecordDb records = RecordDb::open(db.path, RecordDb::Mode::kReadOnly);
  RecordQuery q;
  q.workload = workload;
  std::vector<Record> all = records.records(q);
  ASSERT_EQ(all.size(), 3u);
  size_t defaults = 0;
  for (const Record& r : all) defaults += r.result.strategy == expected;
  EXPECT_EQ(defaults, 1u) << "the default configuration was measured once: " << expected;
  // A resumed run does not measure it again.
  tune(workload, params, measure, db.path);
  RecordDb again = RecordDb::open(db.path, RecordDb::Mode::kReadOnly);
  defaults = 0;
  for (const Record& r : again.records(q)) defaults += r.result.strategy == expected;
  EXPECT_EQ(defaults, 1u);
}

// AutoTVM's tuning curves start from the tuner's own proposals (`tune --first tuner`): the
// same seeded random search then measures what it draws, and the default configuration only if
// drawn, which in a space of this size it is not.
TEST(TuneRun, WithoutTheDefaultStartTheTunerProposesTheFirstTrial) {
  const std::string workload = "matmul:M=64,N=64,K=64";
  Workload w = parse_workload(workload);
  ConfigSpace space = space_for(w);
  const std::string expected = space.instantiate(default_config(space, w, 1)).text();
  std::vector<std::vector<std::string>> runs;
  for (bool from_default : {true, false}) {
    testing::TempDb db(from_default ? "tune_first_default" : "tune_first_tuner");
    TuneParams params;
    params.tuner = "random";
    params.trials = 4;
    params.batch_size = 4;
    params.seed = 9;
    params.start_from_default = from_default;
    MeasureParams measure;
    measure.run.threads = 1;
    measure.run.timing.repeat = 1;
    measure.run.timing.min_repeat_ms = 1;
    tune(workload, params, measure, db.path);
    RecordDb records = RecordDb::open(db.path, RecordDb::Mode::kReadOnly);
    RecordQuery q;
    q.workload = workload;
    std::vector<std::string> strategies;
    for (const Record& r : records.records(q)) strategies.push_back(r.result.strategy);
    ASSERT_EQ(strategies.size(), 4u);
    runs.push_back(strategies);
  }
  EXPECT_EQ(std::count(runs[0].begin(), runs[0].end(), expected), 1);
  EXPECT_EQ(std::count(runs[1].begin(), runs[1].end(), expected), 0);
  // The draws the default displaced are the tuner's: three of them are the same in both runs.
  int shared = 0;
  for (const std::string& s : runs[0]) shared += std::count(runs[1].begin(), runs[1].end(), s);
  EXPECT_EQ(shared, 3);
}

TEST(TuneRun, TrialsWithoutGainCountFromTheLastRise) {
  EXPECT_EQ(trials_without_gain({}), 0);
  EXPECT_EQ(trials_without_gain({0, 0, 0}), 3) << "nothing found counts every trial";
  EXPECT_EQ(trials_without_gain({1, 2, 3}), 0);
  EXPECT_EQ(trials_without_gain({1, 2, 2, 2}), 2);
  EXPECT_EQ(trials_without_gain({0, 5, 5, 6, 6, 6, 6}), 3);
}

// With early_stop 1 a run ends at the first trial that finds no better best.
TEST(TuneRun, EarlyStopEndsARunThatStopsGaining) {
  testing::TempDb db("tune_early_stop");
  TuneParams params;
  params.tuner = "random";
  params.trials = 64;
  params.batch_size = 1;
  params.early_stop = 1;
  params.retime_top = 0;
  params.seed = 3;
  MeasureParams measure;
  measure.run.threads = 1;
  measure.run.timing.repeat = 1;
  measure.run.timing.min_repeat_ms = 1;
  TuneResult r = tune("matmul:M=16,N=16,K=16", params, measure, db.path);
  ASSERT_TRUE(r.stopped_early);
  ASSERT_LT(r.trials, 64);
  const std::vector<double>& curve = r.best_curve;
  ASSERT_EQ(curve.size(), static_cast<size_t>(r.trials));
  ASSERT_GE(curve.size(), 2u);
  for (size_t i = 1; i + 1 < curve.size(); ++i) EXPECT_GT(curve[i], curve[i - 1]) << i;
  EXPECT_EQ(curve.back(), curve[curve.size() - 2]);
  params.early_stop = 0;
  params.trials = 4;
  testing::TempDb other("tune_no_early_stop");
  TuneResult all = tune("matmul:M=16,N=16,K=16", params, measure, other.path);
  EXPECT_FALSE(all.stopped_early);
  EXPECT_EQ(all.trials, 4);
}

TEST(Retime, ThePickIsTheBestMedianNotTheLuckiestMeasurement) {
  Pick pick;
  // a measured fastest once (its tuning figure) but is slower in two rounds of three.
  pick.candidates = {{"a", 0.5, {1.0, 5.0, 5.0}, 0},
                     {"b", 0.9, {2.0, 2.0, 2.5}, 0},
                     {"c", 0.9, {0.1, 0, 0}, 0}};  // failed in two rounds: never picked
  ASSERT_TRUE(choose_pick(pick));
  EXPECT_EQ(pick.strategy, "b");
  EXPECT_DOUBLE_EQ(pick.median, 2.0);
  EXPECT_DOUBLE_EQ(pick.candidates[0].median, 5.0);
  EXPECT_DOUBLE_EQ(pick.candidates[2].median, 0);  // stored as 0: a failure
  // Even rounds: the mean of the middle two; a tie goes to the earlier candidate.
  Pick even;
  even.candidates = {{"x", 1, {1.0, 3.0}, 0}, {"y", 1, {2.0, 2.0}, 0}};
  ASSERT_TRUE(choose_pick(even));
  EXPECT_EQ(even.strategy, "x");
  Pick failed;
  failed.candidates = {{"z", 1, {0, 0, 1.0}, 0}};
  EXPECT_FALSE(choose_pick(failed));
  EXPECT_FALSE(choose_pick(failed = Pick{}));
}

TEST(Retime, ACandidateThatFailsNowIsNotPicked) {
  MeasureParams measure;
  measure.run.threads = 1;
  measure.run.timing.repeat = 3;
  measure.run.timing.min_repeat_ms = 1;
  Measurer measurer(measure);
  RetimeParams params;
  params.rounds = 2;
  int rounds_seen = 0;
  // The first candidate claims the faster tuning figure but no longer applies.
  std::optional<Pick> pick =
      retime("matmul:M=16,N=16,K=16", {{"split(nope, 4)", 1e-9}, {"split(i, 4)", 1e-3}}, measurer,
             params, [&](int done, int total) {
               EXPECT_EQ(total, 2);
               rounds_seen = done;
             });
  ASSERT_TRUE(pick);
  EXPECT_EQ(rounds_seen, 2);
  EXPECT_EQ(pick->strategy, "split(i, 4)");
  EXPECT_EQ(pick->candidates[0].round_medians, (std::vector<double>{0, 0}));
  EXPECT_EQ(pick->candidates[0].median, 0);
  EXPECT_GT(pick->median, 0);
  EXPECT_GT(pick->picked_at_ms, 0);
  EXPECT_EQ(pick->target.key(), measurer.target().key());
  EXPECT_FALSE(retime("matmul:M=16,N=16,K=16", {{"split(nope, 4)", 1e-9}}, measurer, params));
}

}  // namespace
}  // namespace tessera
