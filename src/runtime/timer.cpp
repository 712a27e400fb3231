#include "runtime/timer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>

namespace tessera {

namespace {

double run_seconds(const std::function<void()>& f, int64_t number) {
  const auto start = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < number; ++i) f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

Timing time_function(const std::function<void()>& f, int repeat, double min_repeat_ms,
                     double min_warm_up_ms) {
  repeat = std::max(repeat, 1);
  const double min_seconds = min_repeat_ms / 1000;
  // Warm-up: page faults, instruction cache, OpenMP thread pool start-up.
  const auto warm_until =
      std::chrono::steady_clock::now() + std::chrono::duration<double, std::milli>(min_warm_up_ms);
  do {
    f();
  } while (std::chrono::steady_clock::now() < warm_until);

  Timing t;
  // Calibrate: grow `number` until one repeat is long enough; that repeat counts as the first.
  int64_t number = 1;
  for (;;) {
    const double elapsed = run_seconds(f, number);
    if (elapsed >= min_seconds || number >= (int64_t{1} << 40)) {
      t.seconds_per_run.push_back(elapsed / static_cast<double>(number));
      break;
    }
    // Aim 20% past the target, growing at least 2x and at most 100x per step.
    const double want = elapsed > 0 ? number * min_seconds * 1.2 / elapsed : number * 100.0;
    number = static_cast<int64_t>(std::clamp(std::ceil(want), 2.0 * number, 100.0 * number));
  }
  while (static_cast<int>(t.seconds_per_run.size()) < repeat) {
    t.seconds_per_run.push_back(run_seconds(f, number) / static_cast<double>(number));
  }

  std::vector<double> sorted = t.seconds_per_run;
  std::sort(sorted.begin(), sorted.end());
  const size_t n = sorted.size();
  t.median = n % 2 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
  t.mean = std::accumulate(sorted.begin(), sorted.end(), 0.0) / static_cast<double>(n);
  t.min = sorted.front();
  return t;
}

}  // namespace tessera
