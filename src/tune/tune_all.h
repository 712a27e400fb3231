/// Multi-task tuning: many workloads, one trial budget, batches allocated by the gradient task
/// scheduler (tune/task_scheduler.h), transfer across tasks through the DB's global model.
#pragma once

#include <string>
#include <vector>

#include "tune/task_scheduler.h"
#include "tune/tune.h"

namespace tessera {

/// A workload of a task list with the name it was given ("" when none).
struct TaskSpec {
  std::string name;
  std::string workload;  // canonical text (ops/workload.h canonical_workload)
};

/// Parses a task list: one workload per line, optionally after a name (`C1 conv2d:...`); `#`
/// starts a comment; blank lines are skipped. Throws tessera::Error naming `source` and the line
/// for a malformed one or an empty list.
std::vector<TaskSpec> parse_task_list(const std::string& text, const std::string& source);
/// The workloads of a named model: "resnet18-convs" (ResNet-18's twelve convolutions, C1-C12 of
/// the AutoTVM paper's Table 1). Throws tessera::Error for another name.
std::vector<TaskSpec> model_tasks(const std::string& model);

/// Workloads that are the same up to naming, merged: each task's names and weight (how many
/// entries it stands for), in first-appearance order.
struct Task {
  std::string workload;
  std::vector<std::string> names;
  int weight = 1;
};
std::vector<Task> dedup_tasks(const std::vector<TaskSpec>& specs);

struct TuneAllParams {
  TuneParams tune;  // tune.trials is the total budget; tune.transfer "auto" means on
  SchedulerParams scheduler;
  /// Wall seconds for the trials (not the re-timing after them); 0: no limit. A batch is cut to
  /// the trials the time left affords at the run's pace so far, and none starts once it is spent.
  double time_budget_s = 0;
};

struct TaskReport {
  Task task;
  TuneResult result;  // trials of this run, best over the run and resumed records
  double flops = 0;
  double best_latency_s = 0;  // infinity when no success
  bool stopped = false;       // resting (stalled) or its space exhausted when the run ended
  /// The model's forecast after the task's last batch (SchedulerPolicy::kPredicted only):
  /// predicted best proposal over best measured throughput.
  std::optional<double> forecast;
};

struct TuneAllProgress {
  const std::vector<TaskReport>* tasks = nullptr;
  int last_task = -1;  // the task that just ran a batch
  int trials_done = 0;
  int trials_total = 0;
  double total_latency_s = 0;  // Σ weight · best latency (infinity while a task has none)
  double elapsed_s = 0;
  TransferInfo transfer;  // the global model as of the last refresh
  bool retimed = false;   // after the trials: last_task's fastest configurations were re-timed
};
using TuneAllProgressFn = std::function<void(const TuneAllProgress&)>;

struct TuneAllResult {
  std::vector<TaskReport> tasks;
  int trials = 0;
  bool out_of_time = false;  // the time budget ended the trials before the trial budget did
  double total_latency_s = 0;
  double seconds = 0;
  TransferInfo transfer;
  int global_refreshes = 0;   // times the global model was refitted or reloaded
  double global_seconds = 0;  // spent on them
};

/// Tunes every task with params.tune.trials trials in all, then re-times each task's fastest
/// configurations (params.tune.retime_top; not counted as trials). Needs a records DB (transfer and
/// resume go through it). Throws tessera::Error on bad input.
TuneAllResult tune_all(const std::vector<TaskSpec>& specs, const TuneAllParams& params,
                       const MeasureParams& measure, const std::string& db_path,
                       const TuneAllProgressFn& progress = nullptr, const WarnFn& warn = nullptr);

}  // namespace tessera
