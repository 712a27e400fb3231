#include "tune/task_scheduler.h"

#include <algorithm>
#include <cmath>

#include "te/error.h"

namespace tessera {

SchedulerPolicy parse_scheduler_policy(const std::string& name) {
  if (name == "gradient") return SchedulerPolicy::kGradient;
  if (name == "predicted") return SchedulerPolicy::kPredicted;
  throw_error("unknown scheduler '{}' (gradient, predicted)", name);
}

GradientTaskScheduler::GradientTaskScheduler(std::vector<SchedulerTask> tasks, int total_trials,
                                             SchedulerParams params)
    : tasks_(std::move(tasks)), state_(tasks_.size()), params_(params), total_(total_trials) {
  if (params_.batch_size <= 0) throw_error("task scheduler: batch size must be positive");
  int n = std::max<int>(1, static_cast<int>(tasks_.size()));
  warmup_trials_ = params_.policy == SchedulerPolicy::kPredicted
                       ? std::clamp(total_ / (2 * n), 1, params_.batch_size)
                       : params_.batch_size;
}

std::optional<std::pair<int, int>> GradientTaskScheduler::next() {
  int left = total_ - done_;
  if (left <= 0) return std::nullopt;
  bool any_live =
      std::any_of(state_.begin(), state_.end(), [](const State& s) { return s.live(); });
  if (!any_live) {
    bool woke = false;
    for (State& s : state_) {
      if (s.exhausted || !s.resting) continue;
      s.resting = false;
      s.last_improvement = s.trials;
      s.reports_without_gain = 0;
      woke = true;
    }
    if (!woke) return std::nullopt;
    ++wakeups_;
  }
  // Warm-up: every live task gets a first round, the budget shared when it is short.
  int cold = 0;
  for (const State& s : state_) cold += s.live() && s.history.empty();
  for (size_t i = 0; i < state_.size(); ++i) {
    if (!state_[i].live() || !state_[i].history.empty()) continue;
    int n = std::min(warmup_trials_, std::max(1, left / cold));
    return std::make_pair(static_cast<int>(i), n);
  }
  int best = -1;
  double best_saving = 0;
  for (size_t i = 0; i < state_.size(); ++i) {
    if (!state_[i].live()) continue;
    double saving = expected_saving(static_cast<int>(i));
    if (best < 0 || saving > best_saving ||
        (saving == best_saving && state_[i].trials < state_[static_cast<size_t>(best)].trials)) {
      best = static_cast<int>(i);
      best_saving = saving;
    }
  }
  if (best < 0) return std::nullopt;
  int n = params_.policy == SchedulerPolicy::kPredicted
              ? std::min(params_.batch_size, std::max(warmup_trials_, 8))
              : params_.batch_size;
  return std::make_pair(best, std::min(n, left));
}

double GradientTaskScheduler::expected_saving(int task) const {
  const State& s = state_.at(task);
  if (params_.policy != SchedulerPolicy::kPredicted || !s.forecast || !s.live() ||
      !std::isfinite(s.best))
    return -gradient(task);
  double gain = std::max(0.0, 1.0 - 1.0 / std::max(*s.forecast, 1e-9));
  return tasks_.at(task).weight * s.best * gain;
}

void GradientTaskScheduler::report(int task, int trials, double best_latency,
                                   std::optional<double> forecast) {
  State& s = state_.at(task);
  done_ += trials;
  s.trials += trials;
  if (trials <= 0) {
    s.exhausted = true;  // nothing left to propose
    return;
  }
  if (best_latency < s.best) {
    s.best = best_latency;
    s.last_improvement = s.trials;
  }
  s.history.push_back(s.best);
  if (params_.early_stop > 0 && s.trials - s.last_improvement >= params_.early_stop)
    s.resting = true;
  s.forecast = forecast;
  if (params_.policy == SchedulerPolicy::kPredicted) {
    bool no_gain = forecast && *forecast < 1 + params_.min_gain;
    s.reports_without_gain = no_gain ? s.reports_without_gain + 1 : 0;
    if (s.reports_without_gain >= 2) s.resting = true;
  }
}

double GradientTaskScheduler::gradient(int task) const {
  const State& s = state_.at(task);
  if (!s.live()) return 0;
  const SchedulerTask& t = tasks_.at(task);
  if (!std::isfinite(s.best)) return -std::numeric_limits<double>::infinity();
  int r = static_cast<int>(s.history.size());
  if (r == 0) return -std::numeric_limits<double>::infinity();
  // Backward: the improvement over the last W rounds, per round.
  double backward = 0;
  int w = params_.backward_window;
  if (w > 0 && r - 1 - w >= 0) backward = (s.history[r - 1] - s.history[r - 1 - w]) / w;
  // Forward: optimistic, the next round gains what an average round gained so far, but no more
  // than reaching β times slower than the fastest similar task.
  double next = s.best - s.best / r;
  double group_best_flops = 0;
  int similar = 0;
  for (size_t j = 0; j < tasks_.size(); ++j) {
    if (tasks_[j].group != t.group) continue;
    ++similar;
    if (std::isfinite(state_[j].best) && state_[j].best > 0)
      group_best_flops = std::max(group_best_flops, tasks_[j].flops / state_[j].best);
  }
  if (similar > 1 && group_best_flops > 0)
    next = std::min(next, params_.beta * t.flops / group_best_flops);
  double forward = next - s.best;
  return t.weight * (params_.alpha * backward + (1 - params_.alpha) * forward);
}

double GradientTaskScheduler::objective() const {
  double f = 0;
  for (size_t i = 0; i < tasks_.size(); ++i) f += tasks_[i].weight * state_[i].best;
  return f;
}

}  // namespace tessera
