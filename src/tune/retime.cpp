#include "tune/retime.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>

#include "te/error.h"

namespace tessera {

namespace {

double median_seconds(std::vector<double> v) {
  // Failures are 0 in the rounds and count as infinitely slow here.
  for (double& x : v)
    if (x <= 0) x = std::numeric_limits<double>::infinity();
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  if (n == 0) return std::numeric_limits<double>::infinity();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

int64_t unix_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

std::optional<Pick> retime(const std::string& workload,
                           const std::vector<std::pair<std::string, double>>& fastest_first,
                           Measurer& measurer, const RetimeParams& params,
                           const RetimeProgressFn& progress) {
  if (params.rounds <= 0) throw_error("re-timing needs at least one round, not {}", params.rounds);
  if (fastest_first.empty()) return std::nullopt;
  Pick pick;
  pick.workload = workload;
  pick.target = measurer.target();
  pick.rounds = params.rounds;
  for (const auto& [strategy, seconds] : fastest_first)
    pick.candidates.push_back({strategy, seconds, {}, 0});

  std::mt19937_64 rng(params.seed ^ 0x7e71e5ULL);
  std::vector<size_t> order(pick.candidates.size());
  std::iota(order.begin(), order.end(), 0);
  for (int round = 0; round < params.rounds; ++round) {
    // A fresh order each round: a slow stretch of the machine falls on different candidates.
    std::shuffle(order.begin(), order.end(), rng);
    std::vector<MeasureInput> inputs;
    for (size_t i : order) inputs.push_back({workload, pick.candidates[i].strategy, std::nullopt});
    std::vector<MeasureResult> measured = measurer.measure(inputs);
    for (size_t k = 0; k < order.size(); ++k) {
      const MeasureResult& m = measured[k];
      pick.candidates[order[k]].round_medians.push_back(m.error == ErrorKind::kOk ? m.timing.median
                                                                                  : 0.0);
    }
    if (progress) progress(round + 1, params.rounds);
  }
  if (!choose_pick(pick)) return std::nullopt;
  pick.picked_at_ms = unix_ms();
  return pick;
}

bool choose_pick(Pick& pick) {
  if (pick.candidates.empty()) return false;
  size_t best = 0;
  for (size_t i = 0; i < pick.candidates.size(); ++i) {
    PickCandidate& c = pick.candidates[i];
    c.median = median_seconds(c.round_medians);
    if (c.median < pick.candidates[best].median) best = i;
  }
  bool found = std::isfinite(pick.candidates[best].median);
  if (found) {
    pick.strategy = pick.candidates[best].strategy;
    pick.median = pick.candidates[best].median;
  }
  // JSON has no infinity: a candidate that failed in half the rounds or more is stored as 0.
  for (PickCandidate& c : pick.candidates)
    if (!std::isfinite(c.median)) c.median = 0;
  return found;
}

}  // namespace tessera
