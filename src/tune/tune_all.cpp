#include "tune/tune_all.h"

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <limits>
#include <map>
#include <sstream>

#include "te/error.h"

namespace tessera {

namespace {

// ResNet-18's convolutions, single batch, fp32, NCHW: Table 1 of the AutoTVM paper, as in
// shared/workloads/resnet18-conv.txt (tests/tune checks that they agree).
constexpr const char* kResnet18Convs = R"(
C1  conv2d:N=1,C=3,H=224,W=224,O=64,K=7,S=2,P=3
C2  conv2d:N=1,C=64,H=56,W=56,O=64,K=3,S=1,P=1
C3  conv2d:N=1,C=64,H=56,W=56,O=64,K=1,S=1,P=0
C4  conv2d:N=1,C=64,H=56,W=56,O=128,K=3,S=2,P=1
C5  conv2d:N=1,C=64,H=56,W=56,O=128,K=1,S=2,P=0
C6  conv2d:N=1,C=128,H=28,W=28,O=128,K=3,S=1,P=1
C7  conv2d:N=1,C=128,H=28,W=28,O=256,K=3,S=2,P=1
C8  conv2d:N=1,C=128,H=28,W=28,O=256,K=1,S=2,P=0
C9  conv2d:N=1,C=256,H=14,W=14,O=256,K=3,S=1,P=1
C10 conv2d:N=1,C=256,H=14,W=14,O=512,K=3,S=2,P=1
C11 conv2d:N=1,C=256,H=14,W=14,O=512,K=1,S=2,P=0
C12 conv2d:N=1,C=512,H=7,W=7,O=512,K=3,S=1,P=1
)";

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

double latency(double flops, double gflops) {
  return gflops > 0 ? flops / (gflops * 1e9) : std::numeric_limits<double>::infinity();
}

}  // namespace

std::vector<TaskSpec> parse_task_list(const std::string& text, const std::string& source) {
  std::vector<TaskSpec> out;
  std::istringstream in(text);
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    line = line.substr(0, line.find('#'));
    std::istringstream words(line);
    std::vector<std::string> w;
    for (std::string word; words >> word;) w.push_back(word);
    if (w.empty()) continue;
    if (w.size() > 2) {
      throw_error("{}:{}: expected a workload, or a name and a workload, got '{}'", source, number,
                  line);
    }
    TaskSpec spec;
    spec.name = w.size() == 2 ? w[0] : "";
    try {
      spec.workload = canonical_workload(w.back());
    } catch (const Error& e) {
      throw_error("{}:{}: {}", source, number, e.what());
    }
    out.push_back(std::move(spec));
  }
  if (out.empty()) throw_error("{}: no workloads", source);
  return out;
}

std::vector<TaskSpec> model_tasks(const std::string& model) {
  if (model == "resnet18-convs") return parse_task_list(kResnet18Convs, model);
  throw_error("unknown model '{}' (models: resnet18-convs)", model);
}

std::vector<Task> dedup_tasks(const std::vector<TaskSpec>& specs) {
  std::vector<Task> tasks;
  std::map<std::string, size_t> index;
  for (const TaskSpec& s : specs) {
    auto [it, fresh] = index.emplace(s.workload, tasks.size());
    if (fresh) tasks.push_back(Task{s.workload, {}, 0});
    Task& t = tasks[it->second];
    ++t.weight;
    if (!s.name.empty()) t.names.push_back(s.name);
  }
  return tasks;
}

TuneAllResult tune_all(const std::vector<TaskSpec>& specs, const TuneAllParams& params,
                       const MeasureParams& measure_params, const std::string& db_path,
                       const TuneAllProgressFn& progress, const WarnFn& warn) {
  auto start = std::chrono::steady_clock::now();
  WarnFn say = warn ? warn : WarnFn(warn_to_stderr);
  if (db_path.empty()) throw_error("tune-all needs a records DB");
  const TuneParams& tp = params.tune;
  check_tuner_names(tp);
  // Before the DB is opened: a bad file must leave none behind.
  std::shared_ptr<GlobalModel> given = open_pretrained(tp);
  if (tp.transfer != "on" && tp.transfer != "off" && tp.transfer != "auto")
    throw_error("--transfer must be on, off or auto, not '{}'", tp.transfer);
  bool model_tuner = is_xgb_tuner(tp.tuner);
  if (tp.retime_top > 0 && tp.retime_rounds <= 0)
    throw_error("--retime-rounds must be positive, not {}", tp.retime_rounds);
  // Across tasks transfer is on unless asked off: the tasks' own records feed it as they come.
  bool transfer = model_tuner && tp.transfer != "off";

  std::vector<Task> tasks = dedup_tasks(specs);
  if (tasks.empty()) throw_error("tune-all: no workloads");
  Measurer measurer(measure_params);
  RecordDb db = RecordDb::open(db_path, RecordDb::Mode::kReadWrite);
  std::string target_key = measurer.target().key();
  // A pretrained model stands in for the DB's global model of every task; the tasks' own
  // records refine it through their local models.
  TransferInfo pretrained_transfer;
  std::shared_ptr<GlobalModel> pretrained =
      start_pretrained(tp, std::move(given), &db, target_key, say, &pretrained_transfer);
  if (pretrained) transfer = true;

  TuneAllResult result;
  if (pretrained_transfer.used && !pretrained) result.transfer = pretrained_transfer;  // TreeGRU
  std::vector<std::unique_ptr<TuneSession>> sessions;
  std::vector<SchedulerTask> sched_tasks;
  for (const Task& t : tasks) {
    sessions.push_back(std::make_unique<TuneSession>(t.workload, tp, measurer, &db, transfer));
    const TuneSession& s = *sessions.back();
    TaskReport report;
    report.task = t;
    report.result = s.result();
    report.flops = s.flops();
    report.best_latency_s = latency(report.flops, report.result.best_gflops);
    result.tasks.push_back(std::move(report));
    sched_tasks.push_back({static_cast<double>(t.weight), s.flops(), s.workload().op});
  }
  GradientTaskScheduler scheduler(sched_tasks, tp.trials, params.scheduler);

  // One global model per feature layout (all tasks share one, except knob features of
  // different templates), refreshed from the DB before a task's batch when the DB has grown.
  std::map<std::string, std::unique_ptr<GlobalModel>> globals;
  auto objective =
      tp.tuner == "xgb" ? XGBoostParams::Objective::kRank : XGBoostParams::Objective::kRegression;
  auto refresh_global = [&](TuneSession& s) {
    if (pretrained) {
      if (s.global() != pretrained->model().get()) {
        s.set_global(pretrained->model(), pretrained_transfer);
        result.transfer = pretrained_transfer;
      }
      return;
    }
    std::string layout = tp.features == "knob" ? knob_layout(s.space()) : "";
    auto& g = globals[layout];
    if (!g) g = std::make_unique<GlobalModel>(db_path, tp.features, objective, layout, tp.seed);
    auto refresh_start = std::chrono::steady_clock::now();
    bool changed = g->refresh(db, target_key, say);
    result.global_refreshes += changed;
    result.global_seconds += seconds_since(refresh_start);
    TransferInfo info;
    info.seconds = seconds_since(refresh_start);
    info.records = g->records();
    info.workloads = g->workloads().size();
    info.rebuilt = g->rebuilt();
    info.model_path = g->model_path();
    info.used = g->model() != nullptr;
    if (!info.used) info.reason = "no usable records in the DB for this target yet";
    if (s.global() != g->model().get() || (changed && g->model())) s.set_global(g->model(), info);
    result.transfer = info;
  };

  auto total_latency = [&] {
    double f = 0;
    for (const TaskReport& r : result.tasks) f += r.task.weight * r.best_latency_s;
    return f;
  };
  auto report_progress = [&](int last_task, bool retimed) {
    if (!progress) return;
    TuneAllProgress p;
    p.tasks = &result.tasks;
    p.last_task = last_task;
    p.trials_done = scheduler.trials_done();
    p.trials_total = tp.trials;
    p.total_latency_s = total_latency();
    p.elapsed_s = seconds_since(start);
    p.transfer = result.transfer;
    p.retimed = retimed;
    progress(p);
  };
  bool warned_busy = false;
  while (std::optional<std::pair<int, int>> next = scheduler.next()) {
    auto [i, n] = *next;
    if (params.time_budget_s > 0 && scheduler.trials_done() > 0) {
      const double elapsed = seconds_since(start), left = params.time_budget_s - elapsed;
      const double per_trial = elapsed / scheduler.trials_done();
      const int affordable = left > 0 ? static_cast<int>(left / per_trial) : 0;
      if (affordable < 1) {
        result.out_of_time = true;
        break;
      }
      n = std::min(n, affordable);
    }
    TuneSession& s = *sessions[static_cast<size_t>(i)];
    if (transfer && s.accepts_global()) refresh_global(s);
    int measured = s.step(n);
    TaskReport& report = result.tasks[static_cast<size_t>(i)];
    // The search behind the forecast is kept for the task's next batch, unless a refreshed
    // global model refits the task's model before then.
    if (params.scheduler.policy == SchedulerPolicy::kPredicted && measured > 0)
      report.forecast = s.outlook();
    report.result = s.result();
    report.best_latency_s = latency(report.flops, report.result.best_gflops);
    scheduler.report(i, measured, report.best_latency_s, report.forecast);
    result.trials = scheduler.trials_done();
    report_progress(i, false);
    if (std::optional<std::string> busy = busy_machine_warning(report.result);
        busy && !warned_busy) {
      say(*busy);
      warned_busy = true;
    }
  }
  // Every task's pick comes from one re-timing after all the trials, so that the totals of two
  // runs compare like with like (TuneSession::retime).
  for (size_t i = 0; i < result.tasks.size(); ++i) {
    if (tp.retime_top <= 0) break;
    TuneSession& s = *sessions[i];
    s.retime(nullptr, say);
    TaskReport& report = result.tasks[i];
    report.result = s.result();
    report.best_latency_s = latency(report.flops, report.result.best_gflops);
    report_progress(static_cast<int>(i), true);
  }
  for (size_t i = 0; i < result.tasks.size(); ++i) {
    result.tasks[i].stopped =
        scheduler.stopped(static_cast<int>(i)) || scheduler.resting(static_cast<int>(i));
    result.tasks[i].result.transfer = result.transfer;
  }
  result.total_latency_s = total_latency();
  result.seconds = seconds_since(start);
  return result;
}

}  // namespace tessera
