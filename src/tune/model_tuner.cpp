#include "tune/model_tuner.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <unordered_set>

namespace tessera {

namespace {
constexpr double kInvalid = -std::numeric_limits<double>::infinity();

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}
}  // namespace

ModelTuner::ModelTuner(const ConfigSpace& space, const TuneParams& params,
                       std::unique_ptr<CostModel> model, FeatureFn features)
    : Tuner(space, params.seed),
      params_(params),
      model_(std::move(model)),
      feature_fn_(std::move(features)),
      batch_(params.batch_size) {}

const std::vector<float>* ModelTuner::features_of(const Config& c) {
  uint64_t index = space_.to_index(c);
  auto it = feature_cache_.find(index);
  if (it == feature_cache_.end()) {
    std::vector<float> f;
    std::optional<std::vector<float>> entry;
    if (feature_fn_(c, &f)) entry = std::move(f);
    it = feature_cache_.emplace(index, std::move(entry)).first;
  }
  return it->second ? &*it->second : nullptr;
}

std::vector<double> ModelTuner::predict(const std::vector<Config>& configs) {
  // Features of configurations not seen before, computed on all cores: instantiating and
  // applying a strategy and extracting features is most of the search's time.
  std::vector<Config> missing;
  std::unordered_set<uint64_t> queued;
  for (const Config& c : configs) {
    uint64_t index = space_.to_index(c);
    if (!feature_cache_.count(index) && queued.insert(index).second) missing.push_back(c);
  }
  std::vector<std::optional<std::vector<float>>> computed(missing.size());
#pragma omp parallel for schedule(dynamic)
  for (size_t i = 0; i < missing.size(); ++i) {
    std::vector<float> f;
    if (feature_fn_(missing[i], &f)) computed[i] = std::move(f);
  }
  for (size_t i = 0; i < missing.size(); ++i)
    feature_cache_.emplace(space_.to_index(missing[i]), std::move(computed[i]));

  std::vector<double> scores(configs.size(), kInvalid);
  std::vector<std::vector<float>> rows;
  std::vector<size_t> where;
  for (size_t i = 0; i < configs.size(); ++i) {
    if (const std::vector<float>* f = features_of(configs[i])) {
      rows.push_back(*f);
      where.push_back(i);
    }
  }
  if (rows.empty()) return scores;
  std::vector<float> pred = model_->predict(rows);
  for (size_t r = 0; r < where.size(); ++r) scores[where[r]] = pred[r];
  return scores;
}

void ModelTuner::observe(const std::vector<Config>& configs, const std::vector<double>& gflops) {
  Tuner::observe(configs, gflops);
  auto start = std::chrono::steady_clock::now();
  for (size_t i = 0; i < configs.size(); ++i) {
    const std::vector<float>* f = features_of(configs[i]);
    if (!f) continue;  // never applicable: nothing to learn about its program
    train_x_.push_back(*f);
    train_gflops_.push_back(gflops[i]);
  }
  overhead_seconds_ += seconds_since(start);
  refit();
}

std::optional<double> ModelTuner::outlook() {
  if (!fitted_) return std::nullopt;
  auto start = std::chrono::steady_clock::now();
  std::vector<std::vector<float>> rows;
  std::vector<double> measured;
  for (size_t i = 0; i < train_x_.size(); ++i) {
    if (train_gflops_[i] <= 0) continue;
    rows.push_back(train_x_[i]);
    measured.push_back(train_gflops_[i]);
  }
  if (rows.size() < 3) return std::nullopt;
  std::vector<float> scores = model_->predict(rows);
  double n = static_cast<double>(rows.size());
  double mean_s = 0, mean_g = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    mean_s += scores[i] / n;
    mean_g += measured[i] / n;
  }
  double cov = 0, var = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    cov += (scores[i] - mean_s) * (measured[i] - mean_g);
    var += (scores[i] - mean_s) * (scores[i] - mean_s);
  }
  std::optional<double> forecast;
  if (var > 0 && cov > 0) {
    double slope = cov / var;
    auto line = [&](double score) { return mean_g + slope * (score - mean_s); };
    size_t best =
        static_cast<size_t>(std::max_element(measured.begin(), measured.end()) - measured.begin());
    double at_best = line(scores[best]);
    if (at_best > 0) {
      if (!planned_) planned_ = anneal();
      // Capped: a line extrapolated far beyond the data says "large", not how large.
      forecast =
          planned_->empty() ? 0.0 : std::clamp(line(planned_->front().first) / at_best, 0.0, 2.0);
    }
  }
  overhead_seconds_ += seconds_since(start);
  return forecast;
}

void ModelTuner::refit() {
  auto start = std::chrono::steady_clock::now();
  planned_.reset();
  double best =
      train_gflops_.empty() ? 0 : *std::max_element(train_gflops_.begin(), train_gflops_.end());
  if (best > 0) {
    // Labels are throughput relative to the best so far; failures stay at 0, the worst.
    std::vector<float> y;
    for (double g : train_gflops_) y.push_back(static_cast<float>(g / best));
    model_->fit(train_x_, y);
    fitted_ = true;
  }
  overhead_seconds_ += seconds_since(start);
}

namespace {

// AutoTVM's 128 chains and 500 steps are per batch of 64 measurements. A compile's scheduler
// hands each of a model's tasks batches of 8, and a whole anneal per batch took model and search
// to 36% of MobileNet-v2's 300 trials (AMD EPYC, Zen 5, 2 threads): most of it applying
// strategies to extract the features of configurations not seen before.
constexpr int kReferenceBatch = 64;

int scaled_to_batch(int full, int batch, int floor) {
  const int64_t scaled = int64_t{full} * batch / kReferenceBatch;
  return static_cast<int>(std::clamp<int64_t>(scaled, std::min(floor, full), full));
}

}  // namespace

int ModelTuner::annealing_steps() const {
  return scaled_to_batch(params_.sa_steps, batch_, params_.sa_early_stop);
}

int ModelTuner::annealing_chains() const {
  return scaled_to_batch(params_.sa_chains, batch_, 32);
}

std::vector<std::pair<double, Config>> ModelTuner::anneal() {
  std::uniform_real_distribution<double> unit(0, 1);
  // The first `active` of the persistent chains anneal; the rest wait for a larger batch.
  const size_t active = static_cast<size_t>(annealing_chains());
  while (chains_.size() < active) chains_.push_back(space_.sample(rng_));
  std::vector<double> scores =
      predict(std::vector<Config>(chains_.begin(), chains_.begin() + active));
  // The best unvisited configurations seen, by score (a set keyed by index keeps them unique).
  std::map<uint64_t, double> seen;
  std::multimap<double, uint64_t> top;
  auto offer = [&](const Config& c, double score) {
    uint64_t index = space_.to_index(c);
    if (score == kInvalid || visited(c) || seen.count(index)) return false;
    if (static_cast<int>(top.size()) >= params_.plan_size && score <= top.begin()->first)
      return false;
    seen[index] = score;
    top.emplace(score, index);
    if (static_cast<int>(top.size()) > params_.plan_size) {
      seen.erase(top.begin()->second);
      top.erase(top.begin());
    }
    return true;
  };
  for (size_t i = 0; i < active; ++i) offer(chains_[i], scores[i]);
  int unchanged = 0;
  const int steps = annealing_steps();
  for (int step = 0; step < steps && unchanged < params_.sa_early_stop; ++step) {
    // Temperature cooled linearly from 1 to 0.
    double t = 1.0 - static_cast<double>(step) / steps;
    std::vector<Config> proposals;
    for (size_t i = 0; i < active; ++i)
      proposals.push_back(space_.random_neighbour(chains_[i], rng_));
    std::vector<double> proposal_scores = predict(proposals);
    bool improved = false;
    for (size_t i = 0; i < active; ++i) {
      double delta = proposal_scores[i] - scores[i];
      bool accept = proposal_scores[i] != kInvalid && (scores[i] == kInvalid || delta >= 0 ||
                                                       (t > 0 && unit(rng_) < std::exp(delta / t)));
      if (accept) {
        chains_[i] = proposals[i];
        scores[i] = proposal_scores[i];
      }
      improved |= offer(proposals[i], proposal_scores[i]);
    }
    unchanged = improved ? 0 : unchanged + 1;
  }
  std::vector<std::pair<double, Config>> out;
  for (auto it = top.rbegin(); it != top.rend(); ++it)
    out.emplace_back(it->first, space_.from_index(it->second));
  return out;
}

std::vector<Config> ModelTuner::select_diverse(
    const ConfigSpace& space, const std::vector<std::pair<double, Config>>& candidates, int n,
    double alpha) {
  if (candidates.empty()) return {};
  double lo = candidates.front().first, hi = lo;
  for (const auto& [s, c] : candidates) {
    lo = std::min(lo, s);
    hi = std::max(hi, s);
  }
  auto norm = [&](double s) { return hi > lo ? (s - lo) / (hi - lo) : 1.0; };
  std::vector<std::set<int>> covered(space.knobs().size());
  std::vector<bool> taken(candidates.size(), false);
  std::vector<Config> out;
  while (static_cast<int>(out.size()) < n && out.size() < candidates.size()) {
    double best_gain = -1;
    size_t best = 0;
    for (size_t i = 0; i < candidates.size(); ++i) {
      if (taken[i]) continue;
      int added = 0;
      for (size_t k = 0; k < covered.size(); ++k)
        added += covered[k].count(candidates[i].second.choice[k]) == 0;
      double gain = norm(candidates[i].first) + alpha * added;
      if (gain > best_gain) {
        best_gain = gain;
        best = i;
      }
    }
    taken[best] = true;
    for (size_t k = 0; k < covered.size(); ++k)
      covered[k].insert(candidates[best].second.choice[k]);
    out.push_back(candidates[best].second);
  }
  return out;
}

std::vector<Config> ModelTuner::propose(int n) {
  auto start = std::chrono::steady_clock::now();
  batch_ = n;
  std::vector<Config> out;
  if (fitted_) {
    const double epsilon =
        std::min(1.0, params_.epsilon + params_.transfer_epsilon * model_->prior_weight());
    int n_random = static_cast<int>(std::lround(epsilon * n));
    std::vector<std::pair<double, Config>> candidates = planned_ ? std::move(*planned_) : anneal();
    planned_.reset();
    out = select_diverse(space_, candidates, n - n_random, params_.diversity_alpha);
    for (const Config& c : out) mark(c);
  }
  // Before the first fit, and for the epsilon share: random unvisited configurations whose
  // strategy applies.
  Config c;
  int attempts = 0;
  while (static_cast<int>(out.size()) < n && sample_unvisited(&c) && attempts++ < 20 * n) {
    mark(c);
    if (features_of(c) || attempts > 10 * n) out.push_back(c);
  }
  overhead_seconds_ += seconds_since(start);
  return out;
}

}  // namespace tessera
