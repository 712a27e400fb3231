#include "cli/compile_command.h"

#include <fmt/format.h>

#include <iostream>
#include <map>

#include "graph/executor.h"
#include "graph/onnx_import.h"
#include "graph/passes.h"
#include "te/error.h"

namespace tessera {

namespace {

// A node name usable as a task name in a task list file: one word, no comment sign.
std::string task_name(const std::string& node, size_t index) {
  bool usable = !node.empty() && node.find_first_of(" \t\r\n#") == std::string::npos;
  return usable ? node : fmt::format("k{}", index);
}

int compile_command(const CompileArgs& args) {
  std::vector<TaskSpec> specs;
  size_t distinct = 0;
  try {
    graph::Graph g = graph::import_onnx(args.model);
    graph::run_default_passes(g);
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
    std::cerr << "tessera: error: " << message.substr(0, message.find('\n')) << "\n";
    return 2;
  }
  if (specs.empty()) {
    std::cerr << "tessera: error: " << args.model << ": no library operators to tune\n";
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
  std::cerr << fmt::format(
      "compile: {}: {} library operator steps, {} distinct workloads to tune with {} trials into "
      "{}\n",
      args.model, specs.size(), distinct, args.tune.params.tune.trials, args.tune.db);
  int code = tune_task_list(specs, args.tune);
  if (code == 0)
    std::cerr << fmt::format("compile: run it with: tessera run-model {} --db {}\n", args.model,
                             args.tune.db);
  return code;
}

}  // namespace

CompileCommand add_compile_command(CLI::App& app) {
  CompileCommand c;
  CompileArgs& a = *c.args;
  c.app = app.add_subcommand(
      "compile",
      "Import an ONNX model, extract the distinct library operators its executor runs and tune "
      "them as one task list (tune-all: weights are how often each runs)");
  c.app->add_option("model", a.model, "model.onnx")->required();
  c.app->add_flag("--list-tasks", a.list_tasks,
                  "Print the task list (tune-all's file format) and tune nothing");
  add_tune_all_options(c.app, a.tune);
  return c;
}

std::optional<int> run_compile_command(const CompileCommand& c) {
  if (!c.app->parsed()) return std::nullopt;
  return compile_command(*c.args);
}

}  // namespace tessera
