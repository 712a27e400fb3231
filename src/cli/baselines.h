/// The libraries a user would call instead of a tessera kernel, timed in this process on the same
/// workload: what `tessera bench` compares against.
#pragma once

#include <string>
#include <vector>

#include "ops/workload.h"

namespace tessera {

struct Baseline {
  std::string name;
  double gflops = 0;
  /// True when the library works in the kernel's own layout (plain row-major / NCHW in and out):
  /// the ratio `tessera bench` reports is against the best of these. Blocked-layout figures
  /// (oneDNN's preferred, data already converted) are shown beside them.
  bool same_layout = true;
  /// True for oneDNN's convolution in the layouts it prefers, data already converted: the
  /// "blocked best" that tables show beside the comparison.
  bool own_layouts = false;
};

/// Every baseline linked for the workload's operator (empty when none is); OpenBLAS and oneDNN run
/// with the current thread count (set_num_threads).
std::vector<Baseline> library_baselines(const OpInstance& op, const Workload& w, int repeat);

/// The best same-layout baseline, or nullptr.
const Baseline* primary_baseline(const std::vector<Baseline>& baselines);

}  // namespace tessera
