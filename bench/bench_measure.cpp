// Measurement overhead and stability (docs/measurement.md):
//   1. overhead per candidate for a 256^3 matmul: build and run time outside the kernel's own
//      runs (code generation, compile, worker round trip, load, check, flushes);
//   2. candidates per second for a batch of 64 distinct candidates (builds on all cores);
//   3. run-to-run spread: max/min of the medians of 5 runs of the same kernel, with and
//      without the cache flush.
// With --context WORKLOAD STRATEGY it measures instead whether a kernel times differently as the
// last of a batch of other candidates (as inside `tessera tune`) than in a batch of its own (as
// `tessera measure` and every re-timing do), alternating the two.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <fstream>
#include <random>

#include "measure/measure.h"
#include "ops/templates.h"
#include "ops/workload.h"

using namespace tessera;

namespace {

const char* kWorkload = "matmul:M=256,N=256,K=256";
const char* kBlocked =
    "split(i, 32) ; split(j, 64) ; split(j.inner, 16) ; "
    "reorder(i.outer, j.outer, k, i.inner, j.inner.outer, j.inner.inner) ; "
    "vectorize(j.inner.inner) ; parallel(i.outer)";

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// The kernel's own time inside a run: the timed runs exactly, plus warm-up, check and
// calibration runs estimated at the fastest repeat's speed.
double kernel_seconds(const MeasureResult& r, const TimingParams& t) {
  double timed = 0, fastest = 1e30;
  for (double x : r.timing.repeats) {
    timed += x * static_cast<double>(r.timing.number);
    fastest = std::min(fastest, x);
  }
  const double calibration = t.min_repeat_ms > 0 ? t.number : 0;
  return timed + fastest * (t.warmup + 1 + calibration);
}

std::string load_average() {
  std::ifstream in("/proc/loadavg");
  std::string a, b, c;
  in >> a >> b >> c;
  return a + " " + b + " " + c;
}

// 64 distinct candidates: split factors of i and j, the inner j vectorized.
std::vector<MeasureInput> batch_of_64() {
  std::vector<MeasureInput> batch;
  for (int fi : {1, 2, 4, 8, 16, 32, 64, 128}) {
    for (int fj : {4, 8, 16, 32, 64, 128, 256, 2}) {
      batch.push_back({kWorkload,
                       fmt::format("split(i, {}) ; split(j, {}) ; reorder(i.outer, j.outer, k, "
                                   "i.inner, j.inner) ; vectorize(j.inner) ; parallel(i.outer)",
                                   fi, fj),
                       std::nullopt});
    }
  }
  return batch;
}

// The kernel alone, then after `others` candidates of its space, `rounds` times; GFLOP/s each.
int context_experiment(const MeasureParams& params, const std::string& workload,
                       const std::string& strategy, int others, int rounds) {
  ConfigSpace space = space_for(parse_workload(workload));
  std::mt19937_64 rng(1);
  std::vector<MeasureInput> batch;
  for (int i = 0; i < others; ++i)
    batch.push_back({workload, space.instantiate(space.sample(rng)).text(), std::nullopt});
  batch.push_back({workload, strategy, std::nullopt});
  Measurer m(params);
  m.measure(batch);  // builds everything once; later calls hit the build cache
  fmt::print("4. context: {} with {}\n   {:>5}  {:>14}  {:>22}\n", workload, strategy, "round",
             "alone GFLOP/s", fmt::format("after {} others", others));
  std::vector<double> alone, after;
  for (int r = 0; r < rounds; ++r) {
    MeasureResult a = m.measure({batch.back()}).front();
    MeasureResult b = m.measure(batch).back();
    if (a.error != ErrorKind::kOk || b.error != ErrorKind::kOk) {
      fmt::print("   failed: {} {}\n", a.message, b.message);
      return 1;
    }
    alone.push_back(a.gflops());
    after.push_back(b.gflops());
    fmt::print("   {:>5}  {:>14.1f}  {:>22.1f}\n", r, a.gflops(), b.gflops());
  }
  std::sort(alone.begin(), alone.end());
  std::sort(after.begin(), after.end());
  fmt::print("   median alone {:.1f}, after the batch {:.1f} GFLOP/s (ratio {:.2f})\n",
             alone[alone.size() / 2], after[after.size() / 2],
             after[after.size() / 2] / alone[alone.size() / 2]);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Measurement overhead, throughput and run-to-run spread"};
  MeasureParams params;
  int candidates = 64;
  app.add_option("--repeat", params.run.timing.repeat, "Timed repeats (default 5)");
  app.add_option("--min-repeat-ms", params.run.timing.min_repeat_ms, "default 20");
  app.add_option("--batch", candidates, "Candidates in the throughput batch (default 64)");
  std::vector<std::string> context;
  int others = 31, rounds = 5;
  app.add_option("--context", context,
                 "WORKLOAD STRATEGY: time this kernel alone and after a batch of others")
      ->expected(2);
  app.add_option("--others", others, "Candidates before it in the batch (default 31)");
  app.add_option("--rounds", rounds, "Alternations (default 5)");
  app.add_option("--threads", params.run.threads, "OpenMP threads (default: all cores)");
  CLI11_PARSE(app, argc, argv);
  if (!context.empty()) {
    try {
      return context_experiment(params, context[0], context[1], others, rounds);
    } catch (const std::exception& e) {
      fmt::print(stderr, "bench_measure: {}\n", e.what());
      return 1;
    }
  }
  const TimingParams& t = params.run.timing;
  fmt::print("load average at start: {}\n", load_average());
  fmt::print("timing protocol: warmup {}, number >= {}, repeat {}, min_repeat_ms {}\n", t.warmup,
             t.number, t.repeat, t.min_repeat_ms);

  {
    Measurer m(params);
    fmt::print("target: {}\nbuild jobs: {}\n\n", m.target().summary(), m.builder().params().jobs);
    // 1. Overhead per candidate, one candidate per call, fresh code each time (no cache hit).
    std::vector<MeasureInput> batch = batch_of_64();
    fmt::print("1. overhead per candidate ({}, one candidate per measure() call)\n", kWorkload);
    fmt::print("   {:>3}  {:>9}  {:>9}  {:>9}  {:>11}  {:>9}\n", "#", "total ms", "build ms",
               "run ms", "kernel ms", "overhead");
    std::vector<double> overheads;
    for (int i = 0; i < 6; ++i) {
      const auto start = std::chrono::steady_clock::now();
      MeasureResult r = m.measure({batch[static_cast<size_t>(i * 9)]}).front();
      const double total = seconds_since(start);
      if (r.error != ErrorKind::kOk) {
        fmt::print("   candidate failed: {} {}\n", error_kind_name(r.error), r.message);
        continue;
      }
      const double kernel = kernel_seconds(r, t);
      const double overhead = total - kernel;
      if (i > 0) overheads.push_back(overhead);  // the first also starts the worker
      fmt::print("   {:>3}  {:>9.1f}  {:>9.1f}  {:>9.1f}  {:>11.1f}  {:>9.1f}{}\n", i, total * 1e3,
                 r.build_seconds * 1e3, r.run_seconds * 1e3, kernel * 1e3, overhead * 1e3,
                 i == 0 ? "  (starts the worker, computes the reference)" : "");
    }
    std::sort(overheads.begin(), overheads.end());
    if (!overheads.empty()) {
      fmt::print("   median overhead per candidate (warm worker): {:.1f} ms\n\n",
                 overheads[overheads.size() / 2] * 1e3);
    }
  }
  {
    // 2. Throughput: a fresh Measurer (empty build cache), the whole batch at once.
    Measurer m(params);
    std::vector<MeasureInput> batch = batch_of_64();
    batch.resize(static_cast<size_t>(std::min<int>(candidates, static_cast<int>(batch.size()))));
    const auto start = std::chrono::steady_clock::now();
    double build_done = 0;
    std::vector<MeasureResult> results =
        m.measure(batch, [&](const char* stage, size_t done, size_t total) {
          if (std::string(stage) == "build" && done == total) build_done = seconds_since(start);
        });
    const double total = seconds_since(start);
    int ok = 0;
    double kernel = 0;
    for (const MeasureResult& r : results) {
      ok += r.error == ErrorKind::kOk;
      if (r.error == ErrorKind::kOk) kernel += kernel_seconds(r, t);
    }
    fmt::print(
        "2. batch of {} candidates: {:.2f} s, {:.2f} candidates/s ({} ok; builds {:.2f} s on "
        "{} jobs, runs {:.2f} s of which kernels {:.2f} s)\n\n",
        batch.size(), total, static_cast<double>(batch.size()) / total, ok, build_done,
        m.builder().params().jobs, total - build_done, kernel);
  }
  for (int threads : {0, 1}) {
    for (bool flush : {true, false}) {
      // 3. Spread: the same kernel measured 5 times (the build cache makes runs 2..5 pure runs
      // of the same shared object, in the same worker).
      MeasureParams p = params;
      p.run.timing.flush_cache = flush;
      p.run.threads = threads;
      Measurer m(p);
      std::vector<double> medians;
      for (int i = 0; i < 5; ++i) {
        MeasureResult r = m.measure({{kWorkload, kBlocked, std::nullopt}}).front();
        if (r.error != ErrorKind::kOk) {
          fmt::print("   failed: {} {}\n", error_kind_name(r.error), r.message);
          continue;
        }
        medians.push_back(r.timing.median);
      }
      if (medians.empty()) continue;
      auto [lo, hi] = std::minmax_element(medians.begin(), medians.end());
      std::vector<std::string> ms;
      for (double x : medians) ms.push_back(fmt::format("{:.4f}", x * 1e3));
      fmt::print("3. spread, {} threads, cache flush {}: medians {} ms; max/min = {:.3f}\n",
                 threads == 0 ? "all" : "1", flush ? "on " : "off", fmt::join(ms, " "), *hi / *lo);
    }
  }
  fmt::print("load average at end: {}\n", load_average());
  return 0;
}
