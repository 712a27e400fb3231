#include "measure/timing.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>

#include "te/error.h"

namespace tessera {

namespace {

double elapsed_seconds(const std::function<void()>& run, int64_t number) {
  const auto start = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < number; ++i) run();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

TimingResult summarize_repeats(std::vector<double> repeats, int64_t number) {
  TimingResult r;
  r.repeats = repeats;
  r.number = number;
  if (repeats.empty()) return r;
  std::sort(repeats.begin(), repeats.end());
  if (repeats.size() > 2) repeats = std::vector<double>(repeats.begin() + 1, repeats.end() - 1);
  const size_t n = repeats.size();
  r.median = n % 2 ? repeats[n / 2] : (repeats[n / 2 - 1] + repeats[n / 2]) / 2;
  r.mean = std::accumulate(repeats.begin(), repeats.end(), 0.0) / static_cast<double>(n);
  if (n > 1) {
    double ss = 0;
    for (double x : repeats) ss += (x - r.mean) * (x - r.mean);
    r.std = std::sqrt(ss / static_cast<double>(n - 1));
  }
  return r;
}

TimingResult time_kernel(const std::function<void()>& run, const std::function<void()>& flush,
                         const TimingParams& params) {
  if (params.repeat < 1 || params.number < 1 || params.warmup < 0 || params.min_repeat_ms < 0) {
    throw_error(
        "timing: repeat and number must be positive, warmup and min_repeat_ms not negative");
  }
  for (int i = 0; i < params.warmup; ++i) run();

  int64_t number = params.number;
  const double min_seconds = params.min_repeat_ms / 1000;
  if (min_seconds > 0) {
    // Grow `number` until one round of it lasts min_repeat_ms; a kernel that takes that long
    // already keeps params.number. Each step aims 10% past the target from the measured rate.
    for (int round = 0; round < 30; ++round) {
      const double t = elapsed_seconds(run, number);
      if (t >= min_seconds) break;
      const double per_run = std::max(t / static_cast<double>(number), 1e-9);
      const double want = std::ceil(min_seconds * 1.1 / per_run);
      number = std::max(number + 1, static_cast<int64_t>(std::min(want, 1e12)));
    }
  }

  std::vector<double> repeats;
  for (int r = 0; r < params.repeat; ++r) {
    if (params.flush_cache && flush) flush();
    repeats.push_back(elapsed_seconds(run, number) / static_cast<double>(number));
  }
  return summarize_repeats(std::move(repeats), number);
}

void flush_from_caches(const void* data, size_t bytes) {
#if defined(__x86_64__)
  const char* p = static_cast<const char*>(data);
  for (size_t i = 0; i < bytes; i += 64) __builtin_ia32_clflush(p + i);
  if (bytes > 0) __builtin_ia32_clflush(p + bytes - 1);
  __builtin_ia32_mfence();
#else
  (void)data;
  (void)bytes;
  // Writing then reading a buffer larger than any last-level cache evicts everything else.
  static std::vector<char> big(size_t{256} << 20);
  volatile char sink = 0;
  for (size_t i = 0; i < big.size(); i += 64) big[i] = static_cast<char>(i);
  for (size_t i = 0; i < big.size(); i += 64) sink = sink + big[i];
#endif
}

}  // namespace tessera
