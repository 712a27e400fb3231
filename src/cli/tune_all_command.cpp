#include "cli/tune_all_command.h"

#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/print_error.h"
#include "cli/tune_command.h"
#include "cli/validators.h"
#include "runtime/text_file.h"
#include "te/error.h"

namespace tessera {

namespace {

std::string task_label(const Task& t) {
  return t.names.empty() ? t.workload : fmt::format("{}", fmt::join(t.names, "="));
}

std::string latency_text(double s) {
  return std::isfinite(s) ? fmt::format("{:.4g} ms", s * 1e3) : "n/a";
}

void show_progress(const TuneAllProgress& p) {
  if (p.retimed) {
    const TaskReport& r = (*p.tasks)[static_cast<size_t>(p.last_task)];
    std::cerr << fmt::format(
        "tune-all: re-timed {} ({}/{}): {:.2f} GFLOP/s (fastest single measurement {:.2f}), "
        "total {}, {:.0f} s\n",
        task_label(r.task), p.last_task + 1, p.tasks->size(), r.result.best_gflops,
        r.result.best_tuned_gflops, latency_text(p.total_latency_s), p.elapsed_s);
    return;
  }
  std::cerr << fmt::format(
      "tune-all: {}/{} trials, total {} (sum of best latencies), {}, {:.0f} s\n", p.trials_done,
      p.trials_total, latency_text(p.total_latency_s), transfer_text(p.transfer), p.elapsed_s);
  for (size_t i = 0; i < p.tasks->size(); ++i) {
    const TaskReport& r = (*p.tasks)[i];
    std::cerr << fmt::format(
        "  {} {:<12} {:>5} trials, best {:8.2f} GFLOP/s{}{}  {}\n",
        static_cast<int>(i) == p.last_task ? '>' : ' ', task_label(r.task), r.result.trials,
        r.result.best_gflops, r.task.weight > 1 ? fmt::format(" (x{})", r.task.weight) : "",
        r.forecast ? fmt::format(", forecast {:+.1f}%", (*r.forecast - 1) * 100) : "",
        r.task.names.empty() ? "" : r.task.workload);
  }
}

int bad_input(const std::string& message) {
  print_error(message);
  return 2;
}

int tune_all_command(const TuneAllArgs& args) {
  if (args.file.empty() == args.model.empty())
    return bad_input("tune-all needs a task FILE or --model NAME (one of them)");
  std::vector<TaskSpec> specs;
  try {
    if (!args.model.empty()) {
      specs = model_tasks(args.model);
    } else {
      if (!std::filesystem::is_regular_file(args.file))
        return bad_input("cannot read task list " + args.file);
      specs = parse_task_list(read_text_file(args.file), args.file);
    }
  } catch (const Error& e) {
    std::string message = e.what();
    return bad_input(message.substr(0, message.find('\n')));
  }
  return tune_task_list(specs, args);
}

}  // namespace

int tune_task_list(const std::vector<TaskSpec>& specs, const TuneAllArgs& args) {
  TuneAllResult r;
  try {
    MeasureParams measure;
    measure.run.threads = args.threads;
    measure.as_in_model = args.timing == "in-model";
    TuneAllParams params = args.params;
    params.scheduler.batch_size = params.tune.batch_size;
    params.scheduler.policy = parse_scheduler_policy(args.scheduler);
    r = tune_all(specs, params, measure, args.db, show_progress);
  } catch (const Error& e) {
    std::string message = e.what();
    return bad_input(message.substr(0, message.find('\n')));
  }
  // Where the wall time went: issue 31 wants model fitting and search under a tenth of it.
  double measure_seconds = 0, tuner_seconds = r.global_seconds;
  for (const TaskReport& t : r.tasks) {
    measure_seconds += t.result.measure_seconds;
    tuner_seconds += t.result.tuner_seconds;
  }
  if (args.json) {
    nlohmann::json j;
    j["trials"] = r.trials;
    j["measure_seconds"] = measure_seconds;
    j["tuner_seconds"] = tuner_seconds;
    j["total_latency_ms"] = std::isfinite(r.total_latency_s) ? r.total_latency_s * 1e3 : -1.0;
    j["seconds"] = r.seconds;
    j["out_of_time"] = r.out_of_time;
    j["transfer"] = transfer_json(r.transfer);
    j["global_refreshes"] = r.global_refreshes;
    j["global_seconds"] = r.global_seconds;
    for (const TaskReport& t : r.tasks) {
      nlohmann::json task;
      task["names"] = t.task.names;
      task["workload"] = t.task.workload;
      task["weight"] = t.task.weight;
      task["trials"] = t.result.trials;
      task["resumed"] = t.result.resumed;
      task["errors"] = t.result.errors;
      task["best_gflops"] = t.result.best_gflops;
      task["best_tuned_gflops"] = t.result.best_tuned_gflops;
      task["retime"] = retime_json(t.result);
      task["best_latency_ms"] = std::isfinite(t.best_latency_s) ? t.best_latency_s * 1e3 : -1.0;
      task["best_strategy"] = t.result.best_strategy;
      task["best_config"] = t.result.best_config;
      task["stopped"] = t.stopped;
      if (t.forecast) task["forecast"] = *t.forecast;
      j["tasks"].push_back(task);
    }
    std::cout << j.dump(2) << "\n";
  } else {
    std::cout << fmt::format("{:<12} {:>7} {:>12} {:>12}  {}\n", "task", "trials", "GFLOP/s",
                             "latency", "workload");
    for (const TaskReport& t : r.tasks) {
      std::cout << fmt::format("{:<12} {:>7} {:>12.2f} {:>12}  {}{}{}\n", task_label(t.task),
                               t.result.trials, t.result.best_gflops,
                               latency_text(t.best_latency_s), t.task.workload,
                               t.task.weight > 1 ? fmt::format(" (x{})", t.task.weight) : "",
                               t.stopped ? " (stopped)" : "");
    }
    std::cout << fmt::format(
        "total        {:>7} trials, sum of best latencies {}, {:.1f} s ({:.1f} s measuring, {:.1f} "
        "s model and search: {:.1f}%){}\n",
        r.trials, latency_text(r.total_latency_s), r.seconds, measure_seconds, tuner_seconds,
        r.seconds > 0 ? 100 * tuner_seconds / r.seconds : 0.0,
        r.out_of_time ? " (the time budget ended the trials)" : "");
    std::cout << "model        " << transfer_text(r.transfer)
              << fmt::format(", {} refreshes of the global model, {:.1f} s\n", r.global_refreshes,
                             r.global_seconds);
  }
  for (const TaskReport& t : r.tasks) {
    // A task the time budget left without a trial has no kernel to show, which is no failure.
    if (r.out_of_time && t.result.trials == 0 && t.result.resumed == 0) {
      std::cerr << fmt::format("tune-all: the time budget ended the trials before {} had one\n",
                               task_label(t.task));
      continue;
    }
    if (t.result.best_gflops <= 0) return 1;  // a task without a working kernel
  }
  return 0;
}

TuneAllCommand add_tune_all_command(CLI::App& app) {
  TuneAllCommand c;
  TuneAllArgs& a = *c.args;
  c.app = app.add_subcommand(
      "tune-all",
      "Tune a list of workloads with one trial budget, each batch to the task whose cost model "
      "forecasts the most time saved, with transfer learning across them");
  c.app->add_option("file", a.file,
                    "Task list: one workload per line, optionally after a name; # comments");
  c.app->add_option("--model", a.model, "A built-in list instead of FILE: resnet18-convs");
  add_tune_all_options(c.app, a);
  return c;
}

void add_tune_all_options(CLI::App* app, TuneAllArgs& a, bool allow_zero_trials) {
  a.params.tune.trials = 1024;
  app->add_option("--trials,-n", a.params.tune.trials,
                  allow_zero_trials ? "Trials for all tasks together (0: tune nothing)"
                                    : "Trials for all tasks together")
      ->check(allow_zero_trials ? non_negative_number() : positive_number());
  app->add_option("--tuner", a.params.tune.tuner,
                  "xgb (rank loss), xgb-reg, treegru (rank loss), treegru-reg, random, grid or ga")
      ->check(CLI::IsMember(tuner_names()));
  app->add_option("--features", a.params.tune.features,
                  "Cost-model features: relation (default), context or knob")
      ->check(CLI::IsMember({"relation", "context", "knob"}));
  app->add_option("--transfer", a.params.tune.transfer,
                  "Transfer learning through the DB's global model: on (auto: the default) or "
                  "off")
      ->check(CLI::IsMember({"on", "off", "auto"}));
  app->add_option(
         "--pretrained", a.params.tune.pretrained,
         "A pretrained cost model (tessera pretrain) to transfer from, in place of the "
         "DB's records of other workloads (default with the xgb tuner and relation features: "
         "the model shipped for this ISA, when the DB holds no record of this machine; "
         "none: not that either)")
      ->check(nonempty_path());
  app->add_option("--transfer-n0", a.params.tune.transfer_n0,
                  "Local records at which the global model's weight has halved: w = 1 / (1 + "
                  "n / n0)")
      ->check(positive_number());
  app->add_option("--transfer-epsilon", a.params.tune.transfer_epsilon,
                  "Extra random share of each batch while the global model dominates: epsilon + "
                  "this * w (default 0.25; 0 explores no more than without transfer)")
      ->check(CLI::Range(0.0, 1.0));
  app->add_option("--batch", a.params.tune.batch_size, "Trials per allocation to one task")
      ->check(positive_number());
  add_retime_options(app, a.params.tune);
  app->add_option("--time-budget", a.params.time_budget_s,
                  "Wall seconds for the trials (the re-timing after them not counted): a batch is "
                  "cut to what the time left affords at the run's pace, and none starts once it "
                  "is spent (0, the default: no limit)")
      ->check(CLI::NonNegativeNumber);
  app->add_option(
         "--task-early-stop", a.params.scheduler.early_stop,
         "Rest a task after this many trials without a better best, until every task rests "
         "(0: never)")
      ->check(non_negative_number());
  app->add_option("--scheduler", a.scheduler,
                  "How trials go to tasks: predicted (the default: to the task whose cost model "
                  "forecasts the most model time saved; a task whose model forecasts no gain "
                  "rests) or gradient (Ansor's task scheduler)")
      ->check(CLI::IsMember({"gradient", "predicted"}));
  app->add_option("--timing", a.timing,
                  "How candidates are timed: alone (back to back, operands in cache) or in-model "
                  "(with the model's cache hints, weights and output flushed before each run, "
                  "the input in cache; filed apart from records timed alone) (default: " +
                      a.timing + ")")
      ->check(CLI::IsMember({"alone", "in-model"}));
  app->add_option("--db", a.db, "Records DB (SQLite; created on first use)")->check(db_path());
  app->add_option("--threads,-t", a.threads,
                  "Threads of the measured kernels (0, the default: all cores)")
      ->check(thread_count());
  app->add_option("--seed", a.params.tune.seed, "Seed of every random choice")
      ->check(seed_number());
  app->add_flag("--json", a.json, "Print the result as one JSON object");
}

std::optional<int> run_tune_all_command(const TuneAllCommand& c) {
  if (!c.app->parsed()) return std::nullopt;
  return tune_all_command(*c.args);
}

}  // namespace tessera
