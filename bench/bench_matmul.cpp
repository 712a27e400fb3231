// matmul: tessera with no strategy and with a blocked strategy, against OpenBLAS's cblas_sgemm,
// measured in the same process. Prints a Markdown table of GFLOP/s and ratios.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <vector>

#include "bench/openblas_env.h"
#include "ops/evaluate.h"
#include "runtime/module.h"
#include "runtime/ndarray.h"
#include "runtime/timer.h"
#include "schedule/strategy_parser.h"

namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw tessera::Error("cannot read " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

int main(int argc, char** argv) {
  using namespace tessera;
  bench::use_openblas_at_its_best(argv);

  CLI::App app{"matmul: tessera vs OpenBLAS"};
  int64_t size = 1024;
  std::vector<int> thread_counts{1, 2};
  int repeat = 5;
  std::string strategy_file = std::string(TESSERA_BENCH_DIR) + "/strategies/matmul_blocked.txt";
  std::string out_path;
  bool skip_plain = false;
  app.add_option("--size", size, "M = N = K")->check(CLI::PositiveNumber);
  app.add_option("--threads", thread_counts, "Thread counts to measure")->delimiter(',');
  app.add_option("--repeat", repeat, "Timed repeats (median reported)")->check(CLI::PositiveNumber);
  app.add_option("--strategy-file", strategy_file, "The tessera strategy to measure");
  app.add_option("--out", out_path, "Also write the Markdown table to this file");
  app.add_flag("--skip-plain", skip_plain,
               "Do not time the unscheduled loop nest (slow at large sizes)");
  CLI11_PARSE(app, argc, argv);

  try {
    std::string workload = fmt::format("matmul:M={0},N={0},K={0}", size);
    OpInstance op = instantiate(parse_workload(workload));
    ProgramStrategy strategy = parse_strategy(read_file(strategy_file));
    RewriteResult<Program> scheduled = strategy(op.program);
    if (!scheduled) throw Error(scheduled.message());

    std::cout << "OpenBLAS core: " << bench::openblas_core_description() << "\n";
    std::cout << "strategy: " << strategy.text() << "\n\n";

    std::ostringstream table;
    table << "| " << workload
          << " | threads | GFLOP/s | vs OpenBLAS | correct |\n|---|---|---|---|---|\n";
    for (int threads : thread_counts) {
      double blas_gflops =
          op.flops / bench::time_openblas_sgemm(size, size, size, threads, repeat) * 1e-9;

      EvaluateParams params;
      params.threads = threads;
      params.repeat = repeat;
      std::vector<std::pair<std::string, Evaluation>> rows;
      if (!skip_plain && threads == thread_counts.front()) {
        EvaluateParams plain = params;
        plain.repeat = 3;
        plain.min_repeat_ms = 0;
        rows.emplace_back("tessera, no strategy", evaluate(op, op.program, plain));
      }
      rows.emplace_back("tessera, split+reorder+vectorize+parallel",
                        evaluate(op, scheduled.program(), params));
      for (const auto& [name, ev] : rows) {
        table << fmt::format("| {} | {} | {:.1f} | {:.2f} | {} |\n", name, threads, ev.gflops,
                             ev.gflops / blas_gflops, ev.correct ? "yes" : "NO");
      }
      table << fmt::format("| OpenBLAS cblas_sgemm | {} | {:.1f} | 1.00 | |\n", threads,
                           blas_gflops);
    }
    std::cout << table.str() << std::flush;
    if (!out_path.empty()) std::ofstream(out_path) << table.str();
  } catch (const std::exception& e) {
    std::cerr << "bench_matmul: error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
