/// Wall-clock timing of a callable, repeated and calibrated the way TVM's time_evaluator does.
#pragma once

#include <functional>
#include <vector>

namespace tessera {

struct Timing {
  /// Seconds per call, one entry per repeat.
  std::vector<double> seconds_per_run;
  double median = 0;
  double mean = 0;
  double min = 0;
};

/// Calls f to warm up (once, or until min_warm_up_ms have passed), then `repeat` times measures
/// the mean time of `number` back-to-back calls, where `number` is calibrated so that one repeat
/// lasts at least min_repeat_ms.
Timing time_function(const std::function<void()>& f, int repeat = 5, double min_repeat_ms = 100,
                     double min_warm_up_ms = 0);

}  // namespace tessera
