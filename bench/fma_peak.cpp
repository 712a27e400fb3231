// The machine's float32 FMA peak, the roof that kernels and libraries are measured against:
// 24 independent AVX-512 FMA chains per thread (more than latency x ports on any current core),
// registers only, best of several runs per thread count.
#include <immintrin.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

namespace {

constexpr int kChains = 24;

__attribute__((target("avx512f"))) float fma_chains(long iterations) {
  __m512 acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = _mm512_set1_ps(0.001f * float(c));
  const __m512 scale = _mm512_set1_ps(0.999f), shift = _mm512_set1_ps(1e-4f);
  for (long i = 0; i < iterations; ++i) {
#pragma GCC unroll 24
    for (int c = 0; c < kChains; ++c) acc[c] = _mm512_fmadd_ps(acc[c], scale, shift);
  }
  float lanes[16], sum = 0;
  for (int c = 0; c < kChains; ++c) {
    _mm512_storeu_ps(lanes, acc[c]);
    for (float v : lanes) sum += v;
  }
  return sum;  // returned so that the chains are not dead code
}

double gflops_on(int threads, long iterations) {
  std::vector<std::thread> workers;
  std::vector<float> sink(static_cast<size_t>(threads));
  auto start = std::chrono::steady_clock::now();
  for (int t = 0; t < threads; ++t)
    workers.emplace_back([&, t] { sink[static_cast<size_t>(t)] = fma_chains(iterations); });
  for (std::thread& w : workers) w.join();
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return double(threads) * double(iterations) * kChains * 16 * 2 / seconds * 1e-9;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"AVX-512 float32 FMA peak in GFLOP/s, per thread count (best of --runs)"};
  std::vector<int> thread_counts{1, 2};
  int runs = 5;
  long iterations = 50'000'000;
  app.add_option("--threads", thread_counts, "Thread counts to measure")
      ->check(CLI::PositiveNumber);
  app.add_option("--runs", runs, "Runs per thread count")->check(CLI::PositiveNumber);
  app.add_option("--iterations", iterations, "FMA rounds per thread per run")
      ->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);
  if (!__builtin_cpu_supports("avx512f")) {
    std::fprintf(stderr, "fma_peak: this CPU has no AVX-512F\n");
    return 1;
  }
  for (int threads : thread_counts) {
    double best = 0;
    for (int r = 0; r < runs; ++r) best = std::max(best, gflops_on(threads, iterations));
    std::printf("threads %d  peak %.1f GFLOP/s\n", threads, best);
  }
  return 0;
}
