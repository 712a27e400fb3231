#include "cli/compile_command.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <map>
#include <set>

#include "cli/print_error.h"
#include "cli/validators.h"
#include "db/record_db.h"
#include "graph/choose_schedule.h"
#include "graph/executor.h"
#include "graph/onnx_import.h"
#include "graph/passes.h"
#include "measure/target.h"
#include "runtime/output_file.h"
#include "te/error.h"

namespace tessera {

namespace {

// A node name usable as a task name in a task list file: one word, no comment sign.
std::string task_name(const std::string& node, size_t index) {
  bool usable = !node.empty() && node.find_first_of(" \t\r\n#") == std::string::npos;
  return usable ? node : fmt::format("k{}", index);
}

// Builds the model with the DB's best configurations (default ones where it has none, or where
// the default ran faster inside the model) and writes it as one shared object.
int write_library(const graph::Graph& g, const CompileArgs& args) {
  graph::ExecutorParams params;
  if (std::filesystem::exists(args.tune.db)) params.db = args.tune.db;
  params.threads = args.tune.threads;
  try {
    graph::Executor ex = graph::compile_model(
        g, params, !args.no_model_check,
        [](const std::string& line) { std::cerr << "compile: " << line << "\n"; });
    graph::ExportOptions options;
    options.model = args.model;
    graph::Executor::MemoryPlan memory = ex.export_library(args.output, options);
    int tuned = 0, fixed = 0;
    for (const graph::KernelInfo& k : ex.kernels()) {
      tuned += k.schedule == "db";
      fixed += k.schedule == "fixed";
    }
    int defaults = static_cast<int>(ex.kernels().size()) - tuned - fixed;
    std::string why =
        params.db.empty() ? " (no records DB)"
        : params.skip_records.empty()
            ? ""
            : fmt::format(" ({} kept there by the in-model check)", params.skip_records.size());
    if (!params.strategies.empty())
      why +=
          fmt::format("; {} tuned kernels run a runner-up of their re-timing, faster in the model",
                      params.strategies.size());
    std::cerr << fmt::format(
        "compile: wrote {} ({} kernels in {} steps: {} tuned, {} at the default "
        "configuration{}, {} graph te; intermediates {:.1f} MB packed into {:.1f} MB)\n",
        args.output, ex.kernels().size(), ex.steps(), tuned, defaults, why, fixed,
        memory.separate_bytes / 1e6, memory.arena_bytes / 1e6);
    std::cerr << fmt::format("compile: run it with: tessera run-model {}{}\n",
                             args.output.find('/') == std::string::npos ? "./" : "", args.output);
  } catch (const graph::KernelBuildError& e) {
    print_error(e.what());
    return 1;
  } catch (const Error& e) {
    print_error(e.what());
    return 2;
  }
  return 0;
}

int compile_command(const CompileArgs& args) {
  std::vector<TaskSpec> specs;
  size_t distinct = 0;
  graph::Graph g;
  try {
    // Refused before any tuning is spent on a library that could not be written.
    if (!args.output.empty())
      check_output_path(args.output, FileKind::kSharedLibrary, {args.model, args.tune.db});
    g = graph::import_onnx(args.model);
    graph::run_default_passes(
        g, {.blocked_layout = args.layout == "nchwc", .winograd = args.conv_algorithm == "auto"});
    // One spec per step the executor runs, named after the first node that needs the workload:
    // tune-all merges the repeats into one task whose weight is how often the model runs it.
    std::map<std::string, bool> seen;
    for (const graph::PlannedWorkload& w : graph::Executor::library_workloads(g)) {
      bool first = seen.emplace(w.workload, true).second;
      specs.push_back({first ? task_name(w.node, specs.size()) : "", w.workload});
      distinct += first;
    }
  } catch (const Error& e) {
    std::string message = e.what();
    print_error(message.substr(0, message.find('\n')));
    return 2;
  }
  if (specs.empty() && args.output.empty()) {
    print_error(args.model + ": no library operators to tune");
    return 2;
  }
  if (args.list_tasks) {
    // The task list in tune-all's file format, with how often each workload runs.
    std::map<std::string, int> uses;
    for (const TaskSpec& s : specs) ++uses[s.workload];
    for (const TaskSpec& s : specs)
      if (!s.name.empty())
        std::cout << fmt::format("{} {}  # x{}\n", s.name, s.workload, uses[s.workload]);
    return 0;
  }
  if (args.tune.params.tune.trials > 0 && !specs.empty()) {
    // A DB that cannot be used is refused before the plan is announced.
    try {
      RecordDb::open(args.tune.db, RecordDb::Mode::kReadWrite);
    } catch (const Error& e) {
      print_error(e.what());
      return 2;
    }
    std::cerr << fmt::format(
        "compile: {}: {} library operator steps, {} distinct workloads to tune with {} trials "
        "into {}\n",
        args.model, specs.size(), distinct, args.tune.params.tune.trials, args.tune.db);
    int code = tune_task_list(specs, args.tune);
    if (code != 0) return code;
  } else if (args.output.empty()) {
    print_error("--trials 0 without -o does nothing");
    return 2;
  }
  if (!args.output.empty()) return write_library(g, args);
  std::cerr << fmt::format("compile: run it with: tessera run-model {} --db {}\n", args.model,
                           args.tune.db);
  return 0;
}

}  // namespace

CompileCommand add_compile_command(CLI::App& app) {
  CompileCommand c;
  CompileArgs& a = *c.args;
  c.app = app.add_subcommand(
      "compile",
      "Import an ONNX model, extract the distinct library operators its executor runs, tune them "
      "as one task list (tune-all: weights are how often each runs) and with -o write the model "
      "as one shared object");
  c.app->add_option("model", a.model, "model.onnx")->required();
  c.app
      ->add_option("-o,--output", a.output,
                   "Write the compiled model (kernels at their best recorded configurations, "
                   "weights, step list) as one shared object, for run-model or "
                   "graph/compiled_model.h")
      ->check(nonempty_path());
  c.app->add_flag("--list-tasks", a.list_tasks,
                  "Print the task list (tune-all's file format) and tune nothing");
  c.app->add_flag("--no-model-check", a.no_model_check,
                  "With -o, do not profile the model with its default configurations and the "
                  "re-timing's runners-up to keep those that run faster in the model than the "
                  "tuned ones, nor time the tuned model whole against the untuned one");
  add_layout_option(c.app, a.layout);
  add_conv_algorithm_option(c.app, a.conv_algorithm);
  // A model's kernels are tuned as they run in it.
  a.tune.timing = "in-model";
  add_tune_all_options(c.app, a.tune, /*allow_zero_trials=*/true);
  return c;
}

std::optional<int> run_compile_command(const CompileCommand& c) {
  if (!c.app->parsed()) return std::nullopt;
  return compile_command(*c.args);
}

}  // namespace tessera
