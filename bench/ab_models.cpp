// Two model libraries (`tessera compile -o`) timed in one process, one run of each in turn, so
// that a guest's speed phases (minutes long on the shared machines) slow both alike. Separate
// `run-model` processes, even alternating, saw the same library read 1.3 to 1.9 ms within
// minutes; interleaved, a library against a copy of itself reads a median ratio within 1-2%.
//
//   bench/ab_models A.so B.so [--runs 200] [--threads 2]
//
// Prints each library's median and the median of the per-pair ratios B/A (below 1: B faster).
// Adaptive threads are off: both use the thread count throughout. The same file named twice
// loads once; copy it to compare a library with itself.

#include <fmt/format.h>
#include <omp.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "graph/compiled_model.h"

namespace {

double median(std::vector<double> v) {
  std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
  return v[v.size() / 2];
}

// Deterministic inputs: floats in [-0.5, 0.5), ids 0 (a valid row of any table).
void fill_inputs(tessera::CompiledModel& m) {
  for (size_t i = 0; i < m.num_inputs(); ++i) {
    size_t count = 1;
    for (int64_t d : m.input_shape(i)) count *= static_cast<size_t>(d);
    if (m.input_is_int(i)) {
      m.set_input_ids(i, std::vector<int64_t>(count, 0));
      continue;
    }
    std::vector<float> data(count);
    for (size_t k = 0; k < count; ++k) data[k] = static_cast<float>(k * 7919 % 1000) / 1000 - 0.5f;
    m.set_input(i, data);
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Interleaved A/B timing of two tessera model libraries"};
  std::string path_a, path_b;
  int runs = 200, threads = 2, warmup = 20;
  app.add_option("a", path_a, "Library A (model.so)")->required()->check(CLI::ExistingFile);
  app.add_option("b", path_b, "Library B (model.so)")->required()->check(CLI::ExistingFile);
  app.add_option("--runs", runs, "Timed runs of each")->check(CLI::PositiveNumber);
  app.add_option("--threads", threads, "Threads of both")->check(CLI::PositiveNumber);
  app.add_option("--warmup", warmup, "Untimed runs of each first")->check(CLI::NonNegativeNumber);
  CLI11_PARSE(app, argc, argv);
  // Called here so that libgomp is this program's own dependency: loaded only by the libraries,
  // it was unloaded with the last of them while its threads still ran (a crash at exit).
  omp_set_num_threads(threads);
  try {
    std::vector<tessera::CompiledModel> models;
    for (const std::string& p : {path_a, path_b}) {
      // dlopen needs a slash to take the path as a file rather than a library name.
      models.push_back(
          tessera::CompiledModel::load(p.find('/') == std::string::npos ? "./" + p : p));
      models.back().set_num_threads(threads);
      models.back().set_adaptive_threads(false);
      fill_inputs(models.back());
    }
    for (int i = 0; i < warmup; ++i)
      for (auto& m : models) m.run();
    std::vector<double> ms[2], ratio;
    using Clock = std::chrono::steady_clock;
    for (int i = 0; i < runs; ++i) {
      double t[2];
      for (int j = 0; j < 2; ++j) {
        const int k = (i + j) % 2;  // which one goes first alternates
        auto start = Clock::now();
        models[k].run();
        t[k] = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
        ms[k].push_back(t[k]);
      }
      ratio.push_back(t[1] / t[0]);
    }
    fmt::print("A {:.4f} ms  B {:.4f} ms  median B/A {:.4f}  ({} interleaved runs, {} threads)\n",
               median(ms[0]), median(ms[1]), median(ratio), runs, threads);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ab_models: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
