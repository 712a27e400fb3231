/// The timing protocol: warm-up, `number` runs per repeat (grown to last min_repeat_ms),
/// `repeat` repeats, optional cache flush before each repeat, statistics without the extremes.
/// See docs/measurement.md.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

namespace tessera {

struct TimingParams {
  int warmup = 1;             // untimed runs first (page faults, i-cache, OpenMP pool start-up)
  int number = 1;             // runs per repeat, at least; grown so one repeat lasts min_repeat_ms
  int repeat = 5;             // timed repeats; every one is kept in the result
  double min_repeat_ms = 20;  // 0: use `number` as given
  bool flush_cache = true;    // flush the kernel's buffers from the caches before each repeat
  // The first argument (a layer's input, which its producer has just written in a model) stays
  // in cache when the others are flushed.
  bool keep_first_cached = false;
};

struct TimingResult {
  std::vector<double> repeats;  // seconds per run, one entry per repeat, in the order measured
  int64_t number = 0;           // runs per repeat after calibration
  // Over the repeats without one minimum and one maximum when there are more than two:
  double mean = 0;
  double median = 0;
  double std = 0;  // sample standard deviation (n - 1); 0 for a single value
};

/// Fills mean/median/std of `repeats` per the protocol (drop min and max when size > 2).
TimingResult summarize_repeats(std::vector<double> repeats, int64_t number = 1);

/// Runs the protocol: `warmup` calls of run(); a calibration when min_repeat_ms > 0 (times
/// `number` calls; while that is shorter than min_repeat_ms, raises `number` to reach it with
/// 10% to spare and times again; these runs are not counted); then `repeat` times: flush() when
/// flush_cache, then time `number` back-to-back calls. Seconds per run = elapsed / number.
TimingResult time_kernel(const std::function<void()>& run, const std::function<void()>& flush,
                         const TimingParams& params);

/// Evicts [data, data + bytes) from every cache level (clflush on x86-64; elsewhere a write and
/// read of a 256 MiB buffer).
void flush_from_caches(const void* data, size_t bytes);

}  // namespace tessera
