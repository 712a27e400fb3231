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
#include "tune/tune.h"

namespace tessera {
namespace {

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
  ASSERT_EQ(seen.size(), 2u);  // one report per batch
  EXPECT_EQ(seen.back().trials_done, 8);
  EXPECT_GT(first.best_gflops, 0);
  ASSERT_EQ(first.best_curve.size(), 8u);
  EXPECT_TRUE(std::is_sorted(first.best_curve.begin(), first.best_curve.end()));

  {
    RecordDb records = RecordDb::open(db, RecordDb::Mode::kReadOnly);
    RecordQuery q;
    q.workload = "matmul:M=32,N=32,K=16";
    EXPECT_EQ(records.records(q).size(), 8u);
  }

  params.trials = 4;
  TuneResult second = tune("matmul:M=32,N=32,K=16", params, measure, db);
  EXPECT_EQ(second.resumed, 8);
  EXPECT_EQ(second.trials, 4);
  EXPECT_GE(second.best_gflops, first.best_gflops);
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

}  // namespace
}  // namespace tessera
