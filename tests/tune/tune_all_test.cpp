// Task lists, deduplication, transfer in a single-task run, and a short real multi-task run.
#include "tune/tune_all.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "runtime/isa.h"
#include "te/error.h"
#include "tune/shipped_model.h"
#include "tune_test_util.h"

namespace tessera {
namespace {

using testing::add_synthetic_records;
using testing::TempDb;

MeasureParams quick_measure() {
  MeasureParams m;
  m.run.threads = 1;
  m.run.timing.repeat = 3;
  m.run.timing.min_repeat_ms = 1;
  return m;
}

TuneParams quick_tune(int trials, int batch) {
  TuneParams p;
  p.trials = trials;
  p.batch_size = batch;
  p.sa_chains = 16;
  p.sa_steps = 30;
  p.seed = 3;
  return p;
}

TEST(TuneAll, TaskListsTakeNamesCommentsAndAnyKeyOrder) {
  std::vector<TaskSpec> specs = parse_task_list(
      "# two layers\n\nC1 conv2d:N=1,C=3,H=8,W=8,O=4,K=3,S=1,P=1  # the first\n"
      "  matmul:N=8,M=4,K=2\n",
      "list.txt");
  ASSERT_EQ(specs.size(), 2u);
  EXPECT_EQ(specs[0].name, "C1");
  EXPECT_EQ(specs[0].workload, "conv2d:N=1,C=3,H=8,W=8,O=4,K=3,S=1,P=1");
  EXPECT_EQ(specs[1].name, "");
  EXPECT_EQ(specs[1].workload, "matmul:M=4,N=8,K=2");
}

TEST(TuneAll, AMalformedLineIsReportedWithItsNumber) {
  auto message = [](const std::string& text) {
    try {
      parse_task_list(text, "list.txt");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message("matmul:M=4,N=4,K=4\nmatmul:M=4,N").find("list.txt:2:"), std::string::npos);
  EXPECT_NE(message("a b c\n").find("list.txt:1: expected a workload"), std::string::npos);
  EXPECT_NE(message("x nosuchop:M=1\n").find("unknown op"), std::string::npos);
  EXPECT_NE(message("# nothing\n\n").find("no workloads"), std::string::npos);
  EXPECT_THROW(model_tasks("resnet50"), Error);
}

TEST(TuneAll, Resnet18ConvsAreTheTwelveOfTheSharedList) {
  std::vector<TaskSpec> specs = model_tasks("resnet18-convs");
  ASSERT_EQ(specs.size(), 12u);
  EXPECT_EQ(specs[0].name, "C1");
  EXPECT_EQ(specs[11].workload, "conv2d:N=1,C=512,H=7,W=7,O=512,K=3,S=1,P=1");
  EXPECT_EQ(dedup_tasks(specs).size(), 12u);
  std::filesystem::path shared =
      std::filesystem::path(__FILE__).parent_path() / "../../../shared/workloads/resnet18-conv.txt";
  if (!std::filesystem::exists(shared)) GTEST_SKIP() << shared << " is not here";
  std::ifstream in(shared);
  std::stringstream text;
  text << in.rdbuf();
  std::vector<TaskSpec> from_file = parse_task_list(text.str(), shared.string());
  ASSERT_EQ(from_file.size(), specs.size());
  for (size_t i = 0; i < specs.size(); ++i) {
    EXPECT_EQ(from_file[i].name, specs[i].name);
    EXPECT_EQ(from_file[i].workload, specs[i].workload);
  }
}

TEST(TuneAll, WorkloadsTheSameUpToNamingAreOneTask) {
  std::vector<Task> tasks = dedup_tasks(parse_task_list(
      "a matmul:M=4,N=8,K=2\nb matmul:M=4,N=8,K=4\nc matmul:K=2,N=8,M=4\nmatmul:M=4,N=8,K=2\n",
      "list"));
  ASSERT_EQ(tasks.size(), 2u);
  EXPECT_EQ(tasks[0].workload, "matmul:M=4,N=8,K=2");
  EXPECT_EQ(tasks[0].weight, 3);
  EXPECT_EQ(tasks[0].names, (std::vector<std::string>{"a", "c"}));
  EXPECT_EQ(tasks[1].weight, 1);
}

TEST(TuneTransfer, OnByDefaultWhenTheDbHoldsOtherWorkloadsOfThisMachine) {
  TempDb tmp("tune_transfer");
  MeasureParams measure = quick_measure();
  {
    RecordDb db = RecordDb::open(tmp.path, RecordDb::Mode::kReadWrite);
    add_synthetic_records(db, Measurer(measure).target(), "matmul:M=64,N=32,K=32", 30, 1);
  }
  TuneParams params = quick_tune(4, 4);
  std::vector<TuneProgress> seen;
  TuneResult r = tune("matmul:M=32,N=32,K=16", params, measure, tmp.path,
                      [&](const TuneProgress& p) { seen.push_back(p); });
  EXPECT_TRUE(r.transfer.used) << r.transfer.reason;
  EXPECT_EQ(r.transfer.records, 30u);
  EXPECT_EQ(r.transfer.workloads, 1u);
  EXPECT_TRUE(r.transfer.rebuilt);
  ASSERT_FALSE(seen.empty());
  EXPECT_TRUE(seen.back().transfer.used);
  EXPECT_EQ(r.trials, 4);
  EXPECT_GT(r.best_gflops, 0);

  params.transfer = "off";
  TuneResult off = tune("matmul:M=32,N=32,K=16", params, measure, tmp.path);
  EXPECT_FALSE(off.transfer.used);
  EXPECT_EQ(off.resumed, 4);

  // A fresh DB holds nothing of this machine: the run starts from the model shipped for its ISA
  // when one ships, and from nothing otherwise.
  TempDb fresh("tune_transfer_fresh");
  params.transfer = "auto";
  params.trials = 2;
  params.batch_size = 2;
  const std::optional<std::string> shipped = shipped_cost_model(target_isa().name);
  TuneResult first = tune("matmul:M=16,N=16,K=16", params, measure, fresh.path);
  EXPECT_EQ(first.transfer.used, shipped.has_value()) << first.transfer.reason;
  EXPECT_EQ(first.transfer.shipped, shipped.has_value());
  if (shipped) {
    EXPECT_EQ(first.transfer.model_path, *shipped);
  }
  // Now the DB has records of this machine: another workload transfers from those instead.
  TuneResult second = tune("matmul:M=16,N=16,K=8", params, measure, fresh.path);
  EXPECT_TRUE(second.transfer.used) << second.transfer.reason;
  EXPECT_FALSE(second.transfer.shipped);
  EXPECT_EQ(second.transfer.workloads, 1u);
  params.transfer = "on";
  params.tuner = "random";
  EXPECT_THROW(tune("matmul:M=16,N=16,K=16", params, measure, fresh.path), Error);
}

TEST(TuneAll, TwoTinyWorkloadsShareOneBudgetAndBothLandInTheDb) {
  TempDb tmp("tune_all");
  TuneAllParams params;
  params.tune = quick_tune(12, 2);
  params.tune.pretrained = kNoPretrained;  // transfer through the DB, which starts empty
  params.scheduler.batch_size = 2;
  params.scheduler.early_stop = 0;
  std::vector<TaskSpec> specs = parse_task_list(
      "A matmul:M=32,N=32,K=16\nB matmul:M=16,N=16,K=16\n"
      "A2 matmul:N=32,M=32,K=16\n",
      "list");
  std::vector<int> last_tasks, retimed_tasks;
  TuneAllResult r =
      tune_all(specs, params, quick_measure(), tmp.path, [&](const TuneAllProgress& p) {
        EXPECT_EQ(p.tasks->size(), 2u);
        (p.retimed ? retimed_tasks : last_tasks).push_back(p.last_task);
      });
  ASSERT_EQ(r.tasks.size(), 2u) << "A and A2 are one workload";
  EXPECT_EQ(r.tasks[0].task.weight, 2);
  EXPECT_EQ(r.trials, 12);
  EXPECT_EQ(r.tasks[0].result.trials + r.tasks[1].result.trials, 12);
  EXPECT_EQ(last_tasks.size(), 6u);
  EXPECT_EQ(last_tasks[0], 0);
  EXPECT_EQ(last_tasks[1], 1);
  EXPECT_EQ(retimed_tasks, (std::vector<int>{0, 1}));  // after all the trials
  for (const TaskReport& t : r.tasks) {
    EXPECT_GT(t.result.best_gflops, 0) << t.task.workload;
    EXPECT_GT(t.best_latency_s, 0);
    // The total counts each task's re-timed pick.
    ASSERT_TRUE(t.result.pick) << t.task.workload;
    EXPECT_DOUBLE_EQ(t.best_latency_s, t.result.pick->median);
  }
  EXPECT_NEAR(r.total_latency_s, 2 * r.tasks[0].best_latency_s + r.tasks[1].best_latency_s, 1e-12);
  // Transfer across the tasks: the global model was refreshed from their records.
  EXPECT_TRUE(r.transfer.used);
  EXPECT_GT(r.transfer.records, 0u);
  EXPECT_GE(r.global_refreshes, 2);

  RecordDb db = RecordDb::open(tmp.path, RecordDb::Mode::kReadOnly);
  for (const TaskReport& t : r.tasks) {
    RecordQuery q;
    q.workload = t.task.workload;
    EXPECT_EQ(db.records(q).size(), static_cast<size_t>(t.result.trials)) << t.task.workload;
  }
  EXPECT_EQ(db.records().size(), 12u);
  EXPECT_EQ(db.stats().picks, 2);
}

}  // namespace
}  // namespace tessera
