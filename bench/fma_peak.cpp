// The machine's roofs, that kernels and libraries are measured against: the float32 FMA peak
// (24 independent AVX-512 FMA chains per thread, or 12 AVX2 ones, more than latency x ports on
// any current core, registers only) and, with --bandwidth, the read bandwidth from buffers sized
// for each cache level and for memory. Best of several runs per thread count; --json for
// bench/roofline.py. The ISA is the kernels' (TESSERA_ISA, else the best the CPU has) or --isa.
#include <immintrin.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr int kChains = 24;
// 12 of the 16 AVX2 registers: FMA latency 4-5 cycles x 2 ports needs 8-10 chains.
constexpr int kAvx2Chains = 12;

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

__attribute__((target("avx2,fma"))) float fma_chains_avx2(long iterations) {
  __m256 acc[kAvx2Chains];
  for (int c = 0; c < kAvx2Chains; ++c) acc[c] = _mm256_set1_ps(0.001f * float(c));
  const __m256 scale = _mm256_set1_ps(0.999f), shift = _mm256_set1_ps(1e-4f);
  for (long i = 0; i < iterations; ++i) {
#pragma GCC unroll 12
    for (int c = 0; c < kAvx2Chains; ++c) acc[c] = _mm256_fmadd_ps(acc[c], scale, shift);
  }
  float lanes[8], sum = 0;
  for (int c = 0; c < kAvx2Chains; ++c) {
    _mm256_storeu_ps(lanes, acc[c]);
    for (float v : lanes) sum += v;
  }
  return sum;
}

double gflops_on(int threads, long iterations, bool avx512) {
  std::vector<std::thread> workers;
  std::vector<float> sink(static_cast<size_t>(threads));
  auto start = std::chrono::steady_clock::now();
  for (int t = 0; t < threads; ++t)
    workers.emplace_back([&, t] {
      sink[static_cast<size_t>(t)] = avx512 ? fma_chains(iterations) : fma_chains_avx2(iterations);
    });
  for (std::thread& w : workers) w.join();
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double flops_per_round = avx512 ? kChains * 16 * 2 : kAvx2Chains * 8 * 2;
  return double(threads) * double(iterations) * flops_per_round / seconds * 1e-9;
}

// Sums a buffer with 8 independent vector accumulators: loads only, so that the figure is what
// a kernel streaming its operands from that level can get.
__attribute__((target("avx512f"))) float read_sum(const float* data, size_t floats, long passes) {
  __m512 acc[8];
  for (__m512& a : acc) a = _mm512_setzero_ps();
  for (long p = 0; p < passes; ++p) {
    for (size_t i = 0; i + 128 <= floats; i += 128) {
#pragma GCC unroll 8
      for (int c = 0; c < 8; ++c)
        acc[c] = _mm512_add_ps(acc[c], _mm512_load_ps(data + i + size_t(c) * 16));
    }
  }
  float lanes[16], sum = 0;
  for (const __m512& a : acc) {
    _mm512_storeu_ps(lanes, a);
    for (float v : lanes) sum += v;
  }
  return sum;
}

__attribute__((target("avx2"))) float read_sum_avx2(const float* data, size_t floats, long passes) {
  __m256 acc[8];
  for (__m256& a : acc) a = _mm256_setzero_ps();
  for (long p = 0; p < passes; ++p) {
    for (size_t i = 0; i + 64 <= floats; i += 64) {
#pragma GCC unroll 8
      for (int c = 0; c < 8; ++c)
        acc[c] = _mm256_add_ps(acc[c], _mm256_load_ps(data + i + size_t(c) * 8));
    }
  }
  float lanes[8], sum = 0;
  for (const __m256& a : acc) {
    _mm256_storeu_ps(lanes, a);
    for (float v : lanes) sum += v;
  }
  return sum;
}

// Each thread reads a private buffer of `bytes` (so that levels private to a core are measured
// per core), about 2 GB per thread in all.
double read_gbytes_per_s(int threads, size_t bytes, bool avx512) {
  const size_t floats = bytes / sizeof(float) / 128 * 128;
  const long passes = std::max(1L, long((size_t{2} << 30) / (floats * sizeof(float))));
  std::vector<float*> buffers(static_cast<size_t>(threads));
  for (float*& b : buffers) {
    b = static_cast<float*>(std::aligned_alloc(64, floats * sizeof(float)));
    if (!b) {
      std::fprintf(stderr, "fma_peak: cannot allocate %zu bytes\n", floats * sizeof(float));
      std::exit(1);
    }
  }
  std::vector<float> sink(static_cast<size_t>(threads));
  auto run = [&](long n) {
    std::vector<std::thread> workers;
    for (int t = 0; t < threads; ++t)
      workers.emplace_back([&, t] {
        sink[size_t(t)] = avx512 ? read_sum(buffers[size_t(t)], floats, n)
                                 : read_sum_avx2(buffers[size_t(t)], floats, n);
      });
    for (std::thread& w : workers) w.join();
  };
  {
    // Each thread writes its own buffer, so that its pages are placed near the core reading them.
    std::vector<std::thread> workers;
    for (int t = 0; t < threads; ++t)
      workers.emplace_back([&, t] {
        float* b = buffers[size_t(t)];
        for (size_t i = 0; i < floats; ++i) b[i] = 1e-6f * float(i % 1000);
      });
    for (std::thread& w : workers) w.join();
  }
  run(1);  // warm-up: the timed passes find the buffer in the level its size puts it
  auto start = std::chrono::steady_clock::now();
  run(passes);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (float* b : buffers) std::free(b);
  return double(threads) * double(passes) * double(floats * sizeof(float)) / seconds * 1e-9;
}

struct Level {
  std::string name;
  size_t bytes;
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"float32 FMA peak in GFLOP/s, per thread count (best of --runs)"};
  std::vector<int> thread_counts{1, 2};
  int runs = 5;
  long iterations = 50'000'000;
  app.add_option("--threads", thread_counts, "Thread counts to measure")
      ->check(CLI::PositiveNumber);
  app.add_option("--runs", runs, "Runs per thread count")->check(CLI::PositiveNumber);
  app.add_option("--iterations", iterations, "FMA rounds per thread per run")
      ->check(CLI::PositiveNumber);
  bool bandwidth = false, json = false;
  app.add_flag("--bandwidth", bandwidth,
               "Also the read bandwidth (GB/s) from buffers that fit L1, L2, L3 and from memory");
  app.add_flag("--json", json, "One JSON object on stdout instead of text");
  const char* env_isa = std::getenv("TESSERA_ISA");
  std::string isa = env_isa && *env_isa && std::string(env_isa) != "native" ? env_isa : "";
  app.add_option("--isa", isa, "avx512 or avx2 (default: TESSERA_ISA, else the CPU's best)")
      ->check(CLI::IsMember({"avx512", "avx2"}));
  CLI11_PARSE(app, argc, argv);
  if (isa.empty()) isa = __builtin_cpu_supports("avx512f") ? "avx512" : "avx2";
  const bool avx512 = isa == "avx512";
  if (avx512 ? !__builtin_cpu_supports("avx512f")
             : !(__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))) {
    std::fprintf(stderr, "fma_peak: this CPU has no %s\n", avx512 ? "AVX-512F" : "AVX2 and FMA");
    return 1;
  }
  if (!json) std::printf("isa %s\n", isa.c_str());
  // A buffer half the size of each cache level (per thread for L1 and L2, which are per core;
  // shared by all for L3) and one far past the last level. The sizes come from the C library's
  // view of the caches; the JSON carries them so that bench/roofline.py can place a working set.
  auto cache_bytes = [](int name, size_t fallback) {
    long v = sysconf(name);
    return v > 0 ? static_cast<size_t>(v) : fallback;
  };
  const size_t l1 = cache_bytes(_SC_LEVEL1_DCACHE_SIZE, size_t{32} << 10);
  const size_t l2 = cache_bytes(_SC_LEVEL2_CACHE_SIZE, size_t{1} << 20);
  const size_t l3 = cache_bytes(_SC_LEVEL3_CACHE_SIZE, size_t{32} << 20);
  // L3 is shared: each thread's half-L3 share, but never less than twice L2, so that it is
  // still L3 that is measured with many threads.
  auto levels_for = [&](int threads) {
    return std::vector<Level>{{"L1", l1 / 2},
                              {"L2", l2 / 2},
                              {"L3", std::max(l3 / 2 / size_t(threads), 2 * l2)},
                              {"memory", std::max(size_t{1} << 30, 4 * l3)}};
  };
  nlohmann::json out;
  out["isa"] = isa;
  for (int threads : thread_counts) {
    double best = 0;
    for (int r = 0; r < runs; ++r) best = std::max(best, gflops_on(threads, iterations, avx512));
    out["peak_gflops"][std::to_string(threads)] = best;
    if (!json) std::printf("threads %d  peak %.1f GFLOP/s\n", threads, best);
  }
  for (int threads : bandwidth ? thread_counts : std::vector<int>{}) {
    for (const Level& level : levels_for(threads)) {
      // Fewer runs for memory: each is seconds long and the figure varies little.
      const int level_runs = level.name == "memory" ? std::min(runs, 2) : runs;
      double best = 0;
      for (int r = 0; r < level_runs; ++r)
        best = std::max(best, read_gbytes_per_s(threads, level.bytes, avx512));
      out["read_gbytes_per_s"][std::to_string(threads)][level.name] = best;
      if (!json)
        std::printf("threads %d  read from %-6s %.1f GB/s\n", threads, level.name.c_str(), best);
    }
  }
  if (bandwidth)
    out["cache_bytes"] = {{"L1", l1}, {"L2", l2}, {"L3", l3}, {"private", {"L1", "L2"}}};
  if (json) std::printf("%s\n", out.dump().c_str());
  return 0;
}
