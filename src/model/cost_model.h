/// Cost models: learn from measured feature vectors, predict a score per candidate (higher is
/// better); the random baseline and the recall metric the tuner and early stopping use.
#pragma once

#include <cstdint>
#include <mutex>
#include <random>
#include <string>
#include <vector>

namespace tessera {

class CostModel {
 public:
  virtual ~CostModel();
  /// x: one feature row per measured candidate (all rows the same length); y: normalised
  /// throughput, best = 1, failures = 0 (higher is better). Replaces what was learned before.
  virtual void fit(const std::vector<std::vector<float>>& x, const std::vector<float>& y) = 0;
  /// One score per row; higher = predicted faster. Only the order is meaningful for rank models.
  virtual std::vector<float> predict(const std::vector<std::vector<float>>& x) const = 0;
  virtual std::string name() const = 0;
  /// How much of the scores comes from other workloads' data (transfer): 1 all of it, 0 none.
  virtual double prior_weight() const { return 0.0; }
};

/// Uniform predictions in [0, 1) from a seeded generator: the baseline that knows nothing.
/// Successive predict calls continue the same sequence; the same seed repeats it.
class RandomModel : public CostModel {
 public:
  explicit RandomModel(uint64_t seed = 0) : rng_(seed) {}
  void fit(const std::vector<std::vector<float>>& x, const std::vector<float>& y) override;
  std::vector<float> predict(const std::vector<std::vector<float>>& x) const override;
  std::string name() const override { return "random"; }

 private:
  mutable std::mutex mutex_;
  mutable std::mt19937_64 rng_;
};

/// |true top-k ∩ predicted top-k| / k, where top-k orders by value, highest first, ties by
/// index. k is clamped to the number of items; 1.0 when that leaves nothing to find (k <= 0 or
/// no items). Throws tessera::Error if the lengths differ.
double recall_at_k(const std::vector<float>& pred, const std::vector<float>& truth, int k);

/// AutoTVM's "a-recall@k": the mean of recall_at_k(pred, truth, i) over i = 1..k (k clamped as
/// above), computed in O(n log n). Rewards getting the very best first.
double average_recall(const std::vector<float>& pred, const std::vector<float>& truth, int k);

}  // namespace tessera
