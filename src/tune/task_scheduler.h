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

struct SchedulerParams {
  int batch_size = 64;      // trials per allocation
  int early_stop = 192;     // rest a task after this many trials without a better best; 0: never
  double alpha = 0.2;       // weight of the backward (observed) gradient; Ansor: 0.2
  double beta = 2.0;        // a task can be at most β times slower than its group's best
  int backward_window = 3;  // rounds the backward gradient looks back over; Ansor: 3
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
class GradientTaskScheduler {
 public:
  GradientTaskScheduler(std::vector<SchedulerTask> tasks, int total_trials,
                        SchedulerParams params = {});

  /// The next allocation: (task, trials), or nullopt when the budget is spent or every task's
  /// space is exhausted.
  std::optional<std::pair<int, int>> next();
  /// After running an allocation: trials actually measured and the task's best latency now
  /// (seconds; infinity when nothing succeeded yet). A task that measured 0 trials (space
  /// exhausted) stops.
  void report(int task, int trials, double best_latency);
  /// Stops a task for good.
  void stop(int task) { state_.at(task).exhausted = true; }

  /// ∂f/∂t of a task as above (0 for a stopped or resting one).
  double gradient(int task) const;
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
    bool live() const { return !exhausted && !resting; }
  };
  std::vector<SchedulerTask> tasks_;
  std::vector<State> state_;
  SchedulerParams params_;
  int total_;
  int done_ = 0;
  int wakeups_ = 0;
};

}  // namespace tessera
