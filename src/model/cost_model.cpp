#include "model/cost_model.h"

#include <algorithm>
#include <numeric>

#include "te/error.h"

namespace tessera {
namespace {

// Indices ordered by value, highest first, ties by index.
std::vector<size_t> order_desc(const std::vector<float>& v) {
  std::vector<size_t> idx(v.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(), [&](size_t a, size_t b) { return v[a] > v[b]; });
  return idx;
}

void check_lengths(const std::vector<float>& pred, const std::vector<float>& truth) {
  if (pred.size() != truth.size()) {
    throw_error("recall: {} predictions for {} true values", pred.size(), truth.size());
  }
}

// recall@i for i = 1..k: curve[i - 1].
std::vector<double> recall_curve(const std::vector<float>& pred, const std::vector<float>& truth,
                                 size_t k) {
  std::vector<size_t> p = order_desc(pred);
  std::vector<size_t> t = order_desc(truth);
  std::vector<size_t> p_rank(p.size()), t_rank(t.size());
  for (size_t r = 0; r < p.size(); ++r) {
    p_rank[p[r]] = r;
    t_rank[t[r]] = r;
  }
  // Step s adds p[s] and t[s] to the two top sets; the intersection grows by the new items
  // already in the other set (counting p[s] == t[s] once).
  std::vector<double> curve(k);
  size_t common = 0;
  for (size_t s = 0; s < k; ++s) {
    if (p[s] == t[s]) {
      ++common;
    } else {
      common += t_rank[p[s]] < s ? 1 : 0;
      common += p_rank[t[s]] < s ? 1 : 0;
    }
    curve[s] = static_cast<double>(common) / static_cast<double>(s + 1);
  }
  return curve;
}

}  // namespace

CostModel::~CostModel() = default;

void RandomModel::fit(const std::vector<std::vector<float>>&, const std::vector<float>&) {}

std::vector<float> RandomModel::predict(const std::vector<std::vector<float>>& x) const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<float> out(x.size());
  // 24 random bits: uniform floats in [0, 1), identical on every platform.
  for (float& v : out) v = static_cast<float>(rng_() >> 40) / static_cast<float>(1 << 24);
  return out;
}

double recall_at_k(const std::vector<float>& pred, const std::vector<float>& truth, int k) {
  check_lengths(pred, truth);
  size_t kk = std::min<size_t>(k > 0 ? static_cast<size_t>(k) : 0, pred.size());
  if (kk == 0) return 1.0;
  return recall_curve(pred, truth, kk).back();
}

double average_recall(const std::vector<float>& pred, const std::vector<float>& truth, int k) {
  check_lengths(pred, truth);
  size_t kk = std::min<size_t>(k > 0 ? static_cast<size_t>(k) : 0, pred.size());
  if (kk == 0) return 1.0;
  std::vector<double> curve = recall_curve(pred, truth, kk);
  return std::accumulate(curve.begin(), curve.end(), 0.0) / static_cast<double>(kk);
}

}  // namespace tessera
