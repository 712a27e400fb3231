/// Re-timing at the end of a tuning run. A run's fastest measurement is the luckiest of hundreds
/// of noisy ones (the winner's curse: on this project's machines one kernel runs at two speeds
/// from one measurement to the next, docs/measurement.md), so the run times its few fastest
/// configurations again, together, in rounds of a fresh random order each, and returns the one
/// with the best median.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "db/record_db.h"
#include "measure/measure.h"

namespace tessera {

struct RetimeParams {
  int rounds = 3;  // each times all the candidates once
  uint64_t seed = 0;
};

/// Fills each candidate's median over its round_medians (a failed round, 0, counts as
/// infinitely slow; stored as 0 when the median is a failure) and makes the fastest median the
/// pick's strategy and median (the earlier candidate on a tie). False when every candidate
/// failed in half the rounds or more.
bool choose_pick(Pick& pick);

/// (round done, rounds): after each round.
using RetimeProgressFn = std::function<void(int, int)>;

/// Times `fastest_first` (strategy, fastest tuning measurement in seconds; the caller's top
/// configurations, fastest first) params.rounds times each with `measurer`, every round all of
/// them as one batch in a fresh random order. A failed measurement counts as infinitely slow.
/// Returns the pick: the candidate with the smallest median (the earlier one on a tie), or
/// nullopt when every candidate failed in half the rounds or more.
std::optional<Pick> retime(const std::string& workload,
                           const std::vector<std::pair<std::string, double>>& fastest_first,
                           Measurer& measurer, const RetimeParams& params,
                           const RetimeProgressFn& progress = nullptr);

}  // namespace tessera
