// Ansor's gradient task scheduler on mock tasks whose best latency follows a known curve.
#include "tune/task_scheduler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "te/error.h"

namespace tessera {
namespace {

// A mock task: best latency (seconds) as a function of the trials it has had.
using Curve = std::function<double(int trials)>;

// Runs the scheduler to the end against the curves; returns the allocations in order.
std::vector<int> run(GradientTaskScheduler& s, const std::vector<Curve>& curves) {
  std::vector<int> order;
  while (auto next = s.next()) {
    auto [task, n] = *next;
    order.push_back(task);
    s.report(task, n, curves[static_cast<size_t>(task)](s.trials(task) + n));
  }
  return order;
}

SchedulerParams params(int batch, int early_stop) {
  SchedulerParams p;
  p.batch_size = batch;
  p.early_stop = early_stop;
  return p;
}

TEST(TaskScheduler, WarmsUpRoundRobinThenFavoursTheTaskWithTheLargerExpectedGain) {
  // Both improve like 1/sqrt(trials); task 0 takes ten times longer, so its trials gain more.
  std::vector<Curve> curves = {
      [](int t) { return 10e-3 / std::sqrt(static_cast<double>(t)); },
      [](int t) { return 1e-3 / std::sqrt(static_cast<double>(t)); },
  };
  GradientTaskScheduler s({{1, 1e6, "a"}, {1, 1e6, "b"}}, 640, params(16, 0));
  std::vector<int> order = run(s, curves);
  ASSERT_GE(order.size(), 2u);
  EXPECT_EQ(order[0], 0);
  EXPECT_EQ(order[1], 1);
  EXPECT_EQ(s.trials_done(), 640);
  EXPECT_EQ(s.trials(0) + s.trials(1), 640);
  EXPECT_GT(s.trials(0), 3 * s.trials(1));
  EXPECT_LT(s.gradient(0), 0);
  EXPECT_DOUBLE_EQ(s.objective(), s.best_latency(0) + s.best_latency(1));
}

TEST(TaskScheduler, AStalledTaskRestsAndTheRestOfTheBudgetGoesToTheOthers) {
  // Task 1 found its best in the first batch. Ansor's forward estimate is optimistic about it
  // (the next batch might gain what the average one did); early stopping ends that while task 0
  // is still live.
  std::vector<Curve> curves = {
      [](int t) { return 1e-3 / std::sqrt(static_cast<double>(t)); },
      [](int) { return 1e-3; },
  };
  GradientTaskScheduler s({{1, 1e6, "a"}, {1, 1e6, "b"}}, 640, params(16, 64));
  run(s, curves);
  EXPECT_TRUE(s.resting(1));
  EXPECT_FALSE(s.stopped(1));
  EXPECT_EQ(s.trials(1), 16 + 64);
  EXPECT_FALSE(s.resting(0));
  EXPECT_EQ(s.trials(0), 640 - 80);
  EXPECT_EQ(s.wakeups(), 0);
}

TEST(TaskScheduler, WeighsImprovementsByTheTasksShareOfTheTotal) {
  // Two tasks with the same relative progress; task 1 runs five times per inference, so its
  // trials are worth more.
  Curve improving = [](int t) { return 1e-3 * (1 + 4.0 / t); };
  GradientTaskScheduler s({{1, 1e6, "a"}, {5, 1e6, "b"}}, 960, params(16, 0));
  run(s, {improving, improving});
  EXPECT_GT(s.trials(1), 2 * s.trials(0));
}

TEST(TaskScheduler, StopsATaskThatHasNotImprovedForEarlyStopTrials) {
  std::vector<Curve> curves = {
      [](int t) { return 1e-3 / t; },                      // improves at every batch
      [](int t) { return t <= 8 ? 2e-3 : 1.5e-3; },        // one improvement, then stalls
      [](int t) { return t <= 8 ? 5e-3 : 5e-3 * 8 / t; },  // stalls only after the warm-up
  };
  GradientTaskScheduler s({{1, 1e6, "a"}, {100, 1e6, "b"}, {1, 1e6, "c"}}, 4000, params(8, 32));
  run(s, curves);
  EXPECT_TRUE(s.resting(1)) << "no better best for 32 trials: resting";
  // Task 1 is weighted 100x, so it is scheduled until it has gone 32 trials without
  // improvement, and no further.
  EXPECT_EQ(s.trials(1), 16 + 32);
  EXPECT_FALSE(s.resting(0));
  EXPECT_EQ(s.trials_done(), 4000);
}

TEST(TaskScheduler, WakesTheRestingTasksWhenNothingElseCanUseTheBudget) {
  GradientTaskScheduler s({{1, 1e6, "a"}, {1, 1e6, "a"}}, 1000, params(10, 20));
  // Task 0 never changes; task 1's space runs out after 15 trials.
  int exhausted_after = 15;
  std::vector<int> trials_at_wakeup;
  int wakeups = 0;
  while (auto next = s.next()) {
    auto [task, n] = *next;
    if (s.wakeups() != wakeups) {
      wakeups = s.wakeups();
      trials_at_wakeup.push_back(s.trials(0));
    }
    if (task == 0) {
      s.report(0, n, 1e-3);
    } else {
      int left = std::max(0, exhausted_after - s.trials(1));
      s.report(1, std::min(n, left), 2e-3);
    }
  }
  EXPECT_TRUE(s.stopped(1));
  EXPECT_EQ(s.trials(1), 15);
  EXPECT_FALSE(s.stopped(0));
  EXPECT_EQ(s.trials(0), 1000 - 15) << "a stall rests the task; it does not end the run";
  ASSERT_GE(trials_at_wakeup.size(), 2u);
  // It first rests after 10 (the first best) + 20 trials, then after each further 20.
  EXPECT_EQ(trials_at_wakeup[0], 30);
  EXPECT_EQ(trials_at_wakeup[1], 50);
  EXPECT_EQ(s.trials_done(), 1000);
}

TEST(TaskScheduler, EndsWhenEveryTasksSpaceRanOut) {
  GradientTaskScheduler s({{1, 1e6, "a"}, {1, 1e6, "a"}}, 1000, params(10, 20));
  std::vector<int> size = {25, 15};
  while (auto next = s.next()) {
    auto [task, n] = *next;
    int left = std::max(0, size[static_cast<size_t>(task)] - s.trials(task));
    s.report(task, std::min(n, left), 1e-3);
  }
  EXPECT_TRUE(s.stopped(0));
  EXPECT_TRUE(s.stopped(1));
  EXPECT_EQ(s.trials_done(), 40);
}

TEST(TaskScheduler, AShortBudgetIsSharedInTheWarmUp) {
  GradientTaskScheduler s({{1, 1e6, "a"}, {1, 1e6, "a"}, {1, 1e6, "a"}}, 7, params(64, 0));
  run(s, {[](int) { return 1e-3; }, [](int) { return 1e-3; }, [](int) { return 1e-3; }});
  EXPECT_EQ(s.trials(0), 2);
  EXPECT_EQ(s.trials(1), 2);
  EXPECT_EQ(s.trials(2), 3);
  EXPECT_EQ(s.trials_done(), 7);
}

// A mock task under the predicted policy: best latency and the model's forecast as functions
// of the trials it has had.
struct Forecasting {
  Curve latency;
  std::function<double(int trials)> forecast;
};

std::vector<std::pair<int, int>> run(GradientTaskScheduler& s,
                                     const std::vector<Forecasting>& tasks) {
  std::vector<std::pair<int, int>> order;
  while (auto next = s.next()) {
    auto [task, n] = *next;
    order.push_back(*next);
    const Forecasting& t = tasks[static_cast<size_t>(task)];
    int after = s.trials(task) + n;
    s.report(task, n, t.latency(after), t.forecast(after));
  }
  return order;
}

SchedulerParams predicted(int batch) {
  SchedulerParams p = params(batch, 0);
  p.policy = SchedulerPolicy::kPredicted;
  return p;
}

TEST(TaskScheduler, PredictedPolicySpendsTheBudgetWhereTheForecastSavesTheMostTime) {
  // Task 0 forecasts +50% of 1 ms (0.33 ms saved) until it has had 60 trials, then nothing;
  // task 1 +5% of 4 ms (0.19 ms); task 2 forecasts no gain.
  std::vector<Forecasting> tasks = {
      {[](int) { return 1e-3; }, [](int t) { return t < 60 ? 1.5 : 1.0; }},
      {[](int) { return 4e-3; }, [](int) { return 1.05; }},
      {[](int) { return 1e-3; }, [](int) { return 0.9; }},
  };
  GradientTaskScheduler s({{1, 1e6, "a"}, {1, 1e6, "a"}, {1, 1e6, "a"}}, 200, predicted(64));
  std::vector<std::pair<int, int>> order = run(s, tasks);
  // A warm-up of half the budget over the tasks (33 each), then batches of that size.
  ASSERT_GE(order.size(), 5u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(order[static_cast<size_t>(i)], std::make_pair(i, 33));
  EXPECT_EQ(order[3], std::make_pair(0, 33));
  EXPECT_EQ(order[4].first, 1);
  EXPECT_EQ(s.trials(0), 66);
  EXPECT_EQ(s.trials(1), 200 - 66 - 33);
  EXPECT_EQ(s.trials(2), 33) << "a task that forecasts no gain gets nothing after its warm-up";
  EXPECT_DOUBLE_EQ(s.expected_saving(1), 4e-3 * (1 - 1 / 1.05));
}

TEST(TaskScheduler, PredictedPolicyRestsATaskWhoseModelForecastsNoGainTwiceInARow) {
  // Task 1 saves the most per batch (0.05 ms against 0.02), but its model sees less than the
  // 1% that counts as a gain: it rests after its second report, and task 0 gets the rest.
  std::vector<Forecasting> tasks = {
      {[](int) { return 1e-3; }, [](int) { return 1.02; }},
      {[](int) { return 10e-3; }, [](int) { return 1.005; }},
  };
  GradientTaskScheduler s({{1, 1e6, "a"}, {1, 1e6, "a"}}, 400, predicted(64));
  run(s, tasks);
  EXPECT_TRUE(s.resting(1));
  EXPECT_EQ(s.trials(1), 128);
  EXPECT_FALSE(s.resting(0));
  EXPECT_EQ(s.trials(0), 400 - 128);
  EXPECT_EQ(s.wakeups(), 0);
}

TEST(TaskScheduler, PredictedPolicyPricesATaskWithoutAForecastByTheGradient) {
  GradientTaskScheduler s({{1, 1e6, "a"}, {1, 1e6, "a"}}, 400, predicted(64));
  s.report(0, 10, 2e-3, std::nullopt);
  s.report(1, 10, 2e-3, 1.5);
  EXPECT_DOUBLE_EQ(s.expected_saving(0), -s.gradient(0));
  EXPECT_GT(s.expected_saving(0), 0);
  EXPECT_NEAR(s.expected_saving(1), 2e-3 / 3, 1e-15);
  EXPECT_THROW(parse_scheduler_policy("fastest"), Error);
  EXPECT_EQ(parse_scheduler_policy("predicted"), SchedulerPolicy::kPredicted);
}

}  // namespace
}  // namespace tessera
