// The binomial blur (Elevate's separable-filter example) on one image: the 2-D stencil against
// the separated version (separate_filter, a te-level rewrite) in two full passes and as scanline
// with parallel rows. Prints a Markdown table of milliseconds and ratios (docs/blur.md).
#include <CLI/CLI.hpp>
#include <fstream>
#include <iostream>
#include <sstream>

#include "ops/blur_schedules.h"
#include "ops/evaluate.h"
#include "schedule/strategy_parser.h"

int main(int argc, char** argv) {
  using namespace tessera;
  CLI::App app{"binomial blur: 2-D vs separated vs separated + scanline + parallel"};
  int64_t size = 2048;
  std::vector<int> thread_counts{1, 2};
  int repeat = 7;
  std::string out_path;
  app.add_option("--size", size, "Image height and width")->check(CLI::Range(3, 1 << 14));
  app.add_option("--threads", thread_counts, "Thread counts")->delimiter(',');
  app.add_option("--repeat", repeat, "Timed repeats (median reported)")->check(CLI::PositiveNumber);
  app.add_option("--out", out_path, "Also write the Markdown table to this file");
  CLI11_PARSE(app, argc, argv);

  struct Version {
    const char* name;
    int separate;
    const char* strategy;
  };
  const Version versions[] = {
      {"2-D, no schedule", 0, "id"},
      {"2-D", 0, kBlur2dSchedule},
      {"separated, two passes", 1, kBlurTwoPassSchedule},
      {"separated, scanline + parallel rows", 1, kBlurScanlineSchedule},
  };
  try {
    std::ostringstream table;
    table << fmt::format(
                 "| blur2d {0}x{0} | threads | ms | speedup vs 2-D | rewrite steps | correct | "
                 "strategy |\n",
                 size)
          << "|---|---|---|---|---|---|---|\n";
    for (int threads : thread_counts) {
      struct Row {
        const Version* v;
        double ms;
        std::string steps;
        bool correct;
      };
      std::vector<Row> rows;
      double base_ms = 0;
      for (const Version& v : versions) {
        OpInstance op = instantiate(
            parse_workload(fmt::format("blur2d:H={0},W={0},separate={1}", size, v.separate)));
        RewriteStats stats;
        RewriteResult<Program> r = parse_strategy(v.strategy)(op.program, &stats);
        if (!r) throw Error(r.message());
        EvaluateParams params;
        params.threads = threads;
        params.repeat = repeat;
        Evaluation ev = evaluate(op, r.program(), params);
        double ms = ev.timing.median * 1e3;
        if (&v == &versions[1]) base_ms = ms;
        // separate=1 programs come from one te-level rewrite (separate_filter) before lowering.
        rows.push_back(
            {&v, ms, std::to_string(stats.steps) + (v.separate ? " + 1 te" : ""), ev.correct});
        std::cout << "." << std::flush;
      }
      for (const Row& row : rows) {
        table << fmt::format("| {} | {} | {:.3f} | {:.2f} | {} | {} | `{}` |\n", row.v->name,
                             threads, row.ms, base_ms / row.ms, row.steps,
                             row.correct ? "yes" : "NO", row.v->strategy);
      }
    }
    std::cout << "\n" << table.str() << std::flush;
    if (!out_path.empty()) std::ofstream(out_path) << table.str();
  } catch (const std::exception& e) {
    std::cerr << "bench_blur: error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
