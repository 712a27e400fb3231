// The `tessera` command: run an operator under a strategy, list operators.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "bench/openblas_env.h"
#include "cli/compile_command.h"
#include "cli/db_command.h"
#include "cli/pretrain_command.h"
#include "cli/print_error.h"
#include "cli/run_model_command.h"
#include "cli/tune_all_command.h"
#include "cli/tune_command.h"
#include "cli/validators.h"
#include "graph/op_table.h"
#include "ops/evaluate.h"
#include "ops/workload.h"
#include "runtime/cleanup.h"
#include "runtime/isa.h"
#include "runtime/module.h"
#include "schedule/strategy_parser.h"
#include "te/error.h"
#include "tir/printer.h"

namespace tessera {
namespace {

// Exit codes: 0 success, 1 the kernel was wrong or failed to build, 2 bad input.
constexpr int kExitWrong = 1;
constexpr int kExitBadInput = 2;

struct RunArgs {
  std::string workload;
  std::string strategy;
  std::string strategy_file;
  int threads = 0;
  int repeat = 5;
  uint64_t seed = 42;
  bool show_code = false;
  bool json = false;
  bool no_check = false;
};

int bad_input(const std::string& message) {
  print_error(message);
  return kExitBadInput;
}

int run_command(const RunArgs& args) {
  OpInstance op;
  ProgramStrategy strategy = id<Program>();
  try {
    op = instantiate(parse_workload(args.workload));
    std::string text = args.strategy;
    if (!args.strategy_file.empty()) {
      // A folder opens as a stream that reads nothing: it would run as the empty strategy.
      std::error_code ec;
      if (!std::filesystem::is_regular_file(args.strategy_file, ec))
        return bad_input("cannot read strategy file " + args.strategy_file + " (not a file)");
      std::ifstream in(args.strategy_file);
      if (!in) return bad_input("cannot read strategy file " + args.strategy_file);
      std::stringstream ss;
      ss << in.rdbuf();
      text = ss.str();
    }
    strategy = parse_strategy(text);
  } catch (const Error& e) {
    return bad_input(e.what());
  }
  if (args.threads < 0) return bad_input("--threads must be positive");

  RewriteResult<Program> rewritten = strategy(op.program);
  if (!rewritten) return bad_input("strategy does not apply: " + rewritten.message());
  const Program& after = rewritten.program();

  EvaluateParams params;
  params.threads = args.threads;
  params.repeat = args.repeat;
  params.seed = args.seed;
  params.check = !args.no_check;
  Evaluation ev;
  try {
    ev = evaluate(op, after, params);
  } catch (const CompilerLimitError& e) {
    return bad_input(e.what());
  } catch (const Error& e) {
    print_error(e.what());
    return kExitWrong;
  }

  if (args.json) {
    nlohmann::json j;
    j["workload"] = parse_workload(args.workload).text();
    j["strategy"] = strategy.text();
    j["program_before"] = print_program(op.program);
    j["program_after"] = print_program(after);
    if (args.show_code) j["code"] = ev.code;
    if (ev.checked) {
      j["correct"] = ev.correct;
      j["max_abs_error"] = ev.max_abs_err;
      if (!ev.correct) j["mismatch"] = ev.mismatch;
    }
    j["threads"] = ev.threads;
    j["seconds_median"] = ev.timing.median;
    j["seconds_per_repeat"] = ev.timing.seconds_per_run;
    j["gflops"] = ev.gflops;
    std::cout << j.dump(2) << "\n";
  } else {
    std::cout << "workload  " << parse_workload(args.workload).text() << "\n";
    std::cout << "strategy  " << strategy.text() << "\n\n";
    std::cout << "-- loop program before the strategy --\n" << print_program(op.program) << "\n";
    std::cout << "-- loop program after the strategy --\n" << print_program(after) << "\n";
    if (args.show_code) std::cout << "-- generated C --\n" << ev.code << "\n";
    if (ev.checked) {
      std::cout << fmt::format("correct   {} (max abs error {:.3g} vs the naive reference)\n",
                               ev.correct ? "yes" : "NO", ev.max_abs_err);
      if (!ev.correct) std::cout << "          " << ev.mismatch << "\n";
    }
    std::cout << fmt::format("time      {:.4f} ms (median of {})\n", ev.timing.median * 1e3,
                             ev.timing.seconds_per_run.size());
    std::cout << fmt::format("GFLOP/s   {:.2f} ({} thread{})\n", ev.gflops, ev.threads,
                             ev.threads == 1 ? "" : "s");
  }
  return ev.checked && !ev.correct ? kExitWrong : 0;
}

// The graph layer's operator table: what a model may contain, and how each runs.
int graph_ops_command() {
  for (const graph::OpDef& def : graph::op_table()) {
    const char* how = "";
    switch (def.lowering) {
      case graph::Lowering::kPlanner:
        how = "library operators and layout-aware kernels";
        break;
      case graph::Lowering::kElementwise:
        how = "elementwise (runs in channel blocks)";
        break;
      case graph::Lowering::kView:
        how = "view (no kernel)";
        break;
      case graph::Lowering::kKernel:
        how = "te kernel";
        break;
      case graph::Lowering::kFolded:
        how = "folded at import";
        break;
    }
    std::cout << fmt::format(
        "{:<20} {}{}\n", def.name, how,
        def.attributes.empty() ? "" : fmt::format(" [{}]", fmt::join(def.attributes, ", ")));
  }
  return 0;
}

int ops_command(bool graph_ops) {
  if (graph_ops) return graph_ops_command();
  for (const OpDef& def : op_registry()) {
    std::vector<std::string> kv;
    for (const std::string& k : def.keys) kv.push_back(k + "=");
    for (const auto& [k, fallback] : def.optional)
      kv.push_back(fmt::format("[{}={}]", k, fallback));
    std::cout << fmt::format("{:<18} {}:{}\n{:<18} {}\n", def.name, def.name, fmt::join(kv, ","),
                             "", def.summary);
  }
  return 0;
}

}  // namespace
}  // namespace tessera

int main(int argc, char** argv) {
  // A killed command takes its compilers, workers and temporary folders with it.
  tessera::clean_up_on_termination_signals();
  // A TESSERA_ISA the CPU cannot run would otherwise surface deep inside the first compile.
  try {
    tessera::target_isa();
  } catch (const tessera::Error& e) {
    tessera::print_error(e.what());
    return 2;
  }
  using namespace tessera;
  CLI::App app{"tessera: a tensor compiler whose schedules are strategies"};
  app.require_subcommand(1);

  RunArgs run;
  CLI::App* run_cmd =
      app.add_subcommand("run",
                         "Run an operator under a strategy: loop program before and after, "
                         "check against the reference, GFLOP/s");
  run_cmd->add_option("workload", run.workload, "op:key=value,..., e.g. matmul:M=512,N=512,K=512")
      ->required();
  auto* strategy_opt = run_cmd->add_option(
      "--strategy,-s", run.strategy, "Strategy text, e.g. 'split(i, 32) ; vectorize(i.inner)'");
  run_cmd->add_option("--strategy-file", run.strategy_file, "Read the strategy text from a file")
      ->excludes(strategy_opt);
  run_cmd
      ->add_option("--threads,-t", run.threads,
                   "Threads for parallel loops (0, the default: all cores)")
      ->check(thread_count());
  run_cmd->add_option("--repeat", run.repeat, "Timed repeats (median reported)")
      ->check(positive_number());
  run_cmd->add_option("--seed", run.seed, "Seed of the random inputs")->check(seed_number());
  run_cmd->add_flag("--show-code", run.show_code, "Print the generated C");
  run_cmd->add_flag("--json", run.json, "Print the result as JSON");
  run_cmd->add_flag("--no-check", run.no_check, "Skip the comparison with the naive reference");

  bool graph_ops = false;
  app.add_subcommand("ops", "List the operators and their workload keys")
      ->add_flag("--graph", graph_ops,
                 "List the ONNX operators a model may contain instead, and how each runs");
  auto db_commands = add_db_commands(app);
  TuneCommands tune_commands = add_tune_commands(app);
  TuneAllCommand tune_all_cmd = add_tune_all_command(app);
  RunModelCommand run_model_cmd = add_run_model_command(app);
  CompileCommand compile_cmd = add_compile_command(app);
  PretrainCommand pretrain_cmd = add_pretrain_command(app);

  // CLI11 would take an unknown first word for an extra argument: name the commands instead.
  if (argc > 1 && argv[1][0] != '-') {
    std::vector<std::string> names;
    bool known = false;
    for (const CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) {
      names.push_back(sub->get_name());
      known = known || sub->get_name() == argv[1];
    }
    if (!known) {
      print_error(fmt::format("unknown command '{}' (commands: {}; see --help)", argv[1],
                              fmt::join(names, ", ")));
      return 2;
    }
  }
  // The library baselines of `tessera bench` run at their best (and only there).
  if (argc > 1 && std::string(argv[1]) == "bench") bench::use_openblas_at_its_best(argv);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    print_error(std::string(e.what()) + " (see --help)");
    return 2;
  }
  // The commands report their own errors; what escapes them still ends in one line, never in
  // std::terminate: a path the file system refuses (too long, a symlink loop) is bad input.
  try {
    if (run_cmd->parsed()) return run_command(run);
    if (std::optional<int> code = run_tune_commands(tune_commands)) return *code;
    if (std::optional<int> code = run_tune_all_command(tune_all_cmd)) return *code;
    if (std::optional<int> code = run_run_model_command(run_model_cmd)) return *code;
    if (std::optional<int> code = run_compile_command(compile_cmd)) return *code;
    if (std::optional<int> code = run_pretrain_command(pretrain_cmd)) return *code;
    if (std::optional<int> code = run_db_commands(*db_commands)) return *code;
    return ops_command(graph_ops);
  } catch (const std::filesystem::filesystem_error& e) {
    print_error(e.code().message() + ": " + e.path1().string());
    return 2;
  } catch (const Error& e) {
    print_error(e.what());
    return 2;
  } catch (const std::bad_alloc&) {
    print_error("out of memory");
    return 2;
  } catch (const std::exception& e) {
    print_error(std::string("internal error: ") + e.what());
    return 1;
  }
}
