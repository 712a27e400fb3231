/// Ansor's gradient task scheduler (Zheng et al., OSDI 2020, §6): one trial budget over many
/// tuning tasks, each batch going to the task whose next trials are expected to shrink the
/// weighted sum of best latencies the most.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

namespace tessera {

struct SchedulerTask {
  double weight = 1;  // how often the network runs it (identical workloads merged)
  double flops = 0;   // of one run
  std::string group;  // similar tasks (the operator): the β term compares their throughput
};

/// How batches go to tasks after the warm-up.
enum class SchedulerPolicy {
  kGradient,   // Ansor's: observed improvement and an optimistic forecast
  kPredicted,  // each task's cost model forecasts its next batch (TuneSession::outlook)
};

/// "gradient" or "predicted"; throws tessera::Error for another name.
SchedulerPolicy parse_scheduler_policy(const std::string& name);

struct SchedulerParams {
  int batch_size = 64;      // trials per allocation
  int early_stop = 192;     // rest a task after this many trials without a better best; 0: never
  double alpha = 0.2;       // weight of the backward (observed) gradient; Ansor: 0.2
  double beta = 2.0;        // a task can be at most β times slower than its group's best
  int backward_window = 3;  // rounds the backward gradient looks back over; Ansor: 3
  SchedulerPolicy policy = SchedulerPolicy::kGradient;
  /// kPredicted: a task whose model forecasts less than this relative gain in two reports in a
  /// row rests.
  double min_gain = 0.01;
};

/// The objective is f = Σ_i weight_i · g_i, g_i the best latency of task i. After a round-robin
/// warm-up (one batch each), the next batch goes to the live task with the most negative
///   ∂f/∂t_i ≈ weight_i · (α · (g_i(r) − g_i(r − W)) / W
///                         + (1 − α) · (min(g_i − g_i / r, β · flops_i / best_group_flops) − g_i))
/// where r counts the task's rounds (batches): the first term its recent improvement, the second
/// an optimistic forecast. A task that has never succeeded (g = ∞) comes first. Ties go to the
/// task with the fewest trials.
///
/// A task that has gone `early_stop` trials without a better best rests: it gets nothing while
/// another task is live. When every task that can still run is resting and budget is left, they
/// all wake with fresh patience, so the whole budget is spent where the gradient points (a stall
/// in one task ends its turn, not the run).
///
/// With SchedulerPolicy::kPredicted the tasks' cost models decide instead. A task's forecast f
/// (its best proposal's predicted throughput over its best measured one's) prices its next batch
/// at weight · g · (1 − 1/f) seconds of the objective; the batch goes to the highest price, and
/// a task without a forecast is priced by the gradient above. The warm-up is short, half the
/// budget over the tasks when that is under a batch, and later batches are no larger than
/// needed: max(warm-up, 8) trials, so that the budget can follow the forecasts. A task whose
/// forecast stays under 1 + min_gain for two reports in a row rests (its model sees nothing
/// better than what it measured).
class GradientTaskScheduler {
 public:
  GradientTaskScheduler(std::vector<SchedulerTask> tasks, int total_trials,
                        SchedulerParams params = {});

  /// The next allocation: (task, trials), or nullopt when the budget is spent or every task's
  /// space is exhausted.
  std::optional<std::pair<int, int>> next();
  /// After running an allocation: trials actually measured, the task's best latency now
  /// (seconds; infinity when nothing succeeded yet) and its model's forecast for the next batch
  /// (used by kPredicted). A task that measured 0 trials (space exhausted) stops.
  void report(int task, int trials, double best_latency,
              std::optional<double> forecast = std::nullopt);
  /// Stops a task for good.
  void stop(int task) { state_.at(task).exhausted = true; }

  /// ∂f/∂t of a task as above (0 for a stopped or resting one).
  double gradient(int task) const;
  /// Seconds of the objective the task's next batch is expected to save: the forecast's price
  /// under kPredicted when the task has one, −gradient otherwise.
  double expected_saving(int task) const;
  /// The task's last forecast (nullopt when its model had none).
  std::optional<double> forecast(int task) const { return state_.at(task).forecast; }
  /// Out of the run for good: its space ran out, or stop() was called.
  bool stopped(int task) const { return state_.at(task).exhausted; }
  /// Out of its patience, until every other task is too.
  bool resting(int task) const { return state_.at(task).resting; }
  /// How often the resting tasks were woken because nothing else was left.
  int wakeups() const { return wakeups_; }
  int trials(int task) const { return state_.at(task).trials; }
  int rounds(int task) const { return static_cast<int>(state_.at(task).history.size()); }
  double best_latency(int task) const { return state_.at(task).best; }
  int trials_done() const { return done_; }
  int total_trials() const { return total_; }
  /// Σ weight_i · best latency_i (infinity while a task has none).
  double objective() const;
  size_t size() const { return tasks_.size(); }

 private:
  struct State {
    int trials = 0;
    int last_improvement = 0;  // trials when the best last improved
    double best = std::numeric_limits<double>::infinity();
    std::vector<double> history;  // best latency after each round
    bool exhausted = false;
    bool resting = false;
    std::optional<double> forecast;
    int reports_without_gain = 0;  // forecasts under 1 + min_gain in a row
    bool live() const { return !exhausted && !resting; }
  };
  std::vector<SchedulerTask> tasks_;
  std::vector<State> state_;
  SchedulerParams params_;
  int total_;
  int warmup_trials_;  // per task in the warm-up round
  int done_ = 0;
  int wakeups_ = 0;
};

}  // namespace tessera
