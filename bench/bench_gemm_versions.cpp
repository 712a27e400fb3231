// TVM's "how to optimize GEMM on CPU" versions, written as tessera strategies (schedule/library),
// next to OpenBLAS in the same run: GFLOP/s, ratio, rewrite steps and rewrite time per version.

#include <CLI/CLI.hpp>
#include <fstream>
#include <iostream>
#include <sstream>

#include "bench/openblas_env.h"
#include "ops/evaluate.h"
#include "runtime/ndarray.h"
#include "schedule/library.h"

int main(int argc, char** argv) {
  using namespace tessera;
  bench::use_openblas_at_its_best(argv);

  CLI::App app{"GEMM versions as strategies vs OpenBLAS"};
  int64_t size = 1024, bn = 32, kfactor = 4;
  std::vector<int> thread_counts{1, 2};
  int repeat = 5;
  std::string out_path;
  app.add_option("--size", size, "M = N = K")->check(CLI::PositiveNumber);
  app.add_option("--bn", bn, "Block size of the tiles")->check(CLI::PositiveNumber);
  app.add_option("--kfactor", kfactor, "Split factor of k")->check(CLI::PositiveNumber);
  app.add_option("--threads", thread_counts, "Thread counts")->delimiter(',');
  app.add_option("--repeat", repeat, "Timed repeats (median reported)")->check(CLI::PositiveNumber);
  app.add_option("--out", out_path, "Also write the Markdown table to this file");
  CLI11_PARSE(app, argc, argv);

  try {
    std::string workload = fmt::format("matmul:M={0},N={0},K={0}", size);
    OpInstance op = instantiate(parse_workload(workload));
    std::cout << "OpenBLAS core: " << bench::openblas_core_description() << "\n\n";

    std::ostringstream table;
    table << fmt::format(
                 "| version ({}) | threads | GFLOP/s | vs OpenBLAS | rewrite steps | rewrite ms | "
                 "correct |\n",
                 workload)
          << "|---|---|---|---|---|---|---|\n";
    for (int threads : thread_counts) {
      double blas_gflops =
          op.flops / bench::time_openblas_sgemm(size, size, size, threads, repeat) * 1e-9;
      for (const NamedStrategy& v : gemm_versions(bn, kfactor)) {
        RewriteStats stats;
        RewriteResult<Program> r = v.strategy(op.program, &stats);
        if (!r) throw Error(v.name + ": " + r.message());
        EvaluateParams params;
        params.threads = threads;
        params.repeat = v.name == "baseline" ? 1 : repeat;
        params.min_repeat_ms = v.name == "baseline" ? 0 : 100;
        Evaluation ev = evaluate(op, r.program(), params);
        table << fmt::format("| {} | {} | {:.1f} | {:.3f} | {} | {:.2f} | {} |\n", v.name, threads,
                             ev.gflops, ev.gflops / blas_gflops, stats.steps, stats.seconds * 1e3,
                             ev.correct ? "yes" : "NO");
        std::cerr << v.name << " (" << threads << " threads): " << fmt::format("{:.1f}", ev.gflops)
                  << " GFLOP/s\n";
      }
      table << fmt::format("| OpenBLAS cblas_sgemm | {} | {:.1f} | 1.000 | | | |\n", threads,
                           blas_gflops);
    }
    std::cout << table.str();
    if (!out_path.empty()) std::ofstream(out_path) << table.str();
    std::cout << "\nstrategies:\n";
    for (const NamedStrategy& v : gemm_versions(bn, kfactor))
      std::cout << "- " << v.name << ": `" << v.strategy.text() << "`\n";
  } catch (const std::exception& e) {
    std::cerr << "bench_gemm_versions: error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
