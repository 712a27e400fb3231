#include "tune/baseline_tuners.h"

#include <algorithm>

namespace tessera {

void Tuner::observe(const std::vector<Config>& configs, const std::vector<double>&) {
  for (const Config& c : configs) mark(c);
}

bool Tuner::sample_unvisited(Config* out, int attempts) {
  if (visited_.size() >= space_.size()) return false;
  for (int a = 0; a < attempts; ++a) {
    Config c = space_.sample(rng_);
    if (!visited(c)) {
      *out = c;
      return true;
    }
  }
  // A nearly exhausted space: scan for what is left.
  for (uint64_t i = 0; i < space_.size(); ++i) {
    if (!visited_.count(i)) {
      *out = space_.from_index(i);
      return true;
    }
  }
  return false;
}

std::vector<Config> RandomTuner::propose(int n) {
  std::vector<Config> out;
  Config c;
  while (static_cast<int>(out.size()) < n && sample_unvisited(&c)) {
    mark(c);
    out.push_back(c);
  }
  return out;
}

std::vector<Config> GridTuner::propose(int n) {
  std::vector<Config> out;
  while (static_cast<int>(out.size()) < n && next_ < space_.size()) {
    Config c = space_.from_index(next_++);
    if (visited(c)) continue;
    mark(c);
    out.push_back(c);
  }
  return out;
}

void GeneticTuner::observe(const std::vector<Config>& configs, const std::vector<double>& gflops) {
  Tuner::observe(configs, gflops);
  for (size_t i = 0; i < configs.size(); ++i) scored_.emplace_back(configs[i], gflops[i]);
}

std::vector<Config> GeneticTuner::propose(int n) {
  std::vector<Config> out;
  if (scored_.empty()) {
    Config c;
    while (static_cast<int>(out.size()) < n && sample_unvisited(&c)) {
      mark(c);
      out.push_back(c);
    }
    return out;
  }
  // The population: the best measured so far.
  std::vector<std::pair<Config, double>> pop = scored_;
  std::sort(pop.begin(), pop.end(),
            [](const auto& a, const auto& b) { return a.second > b.second; });
  if (static_cast<int>(pop.size()) > population_size_)
    pop.resize(static_cast<size_t>(population_size_));
  double total = 0;
  for (const auto& [c, s] : pop) total += s + 1e-9;
  auto parent = [&]() -> const Config& {
    double r = std::uniform_real_distribution<double>(0, total)(rng_);
    for (const auto& [c, s] : pop) {
      r -= s + 1e-9;
      if (r <= 0) return c;
    }
    return pop.back().first;
  };
  std::uniform_real_distribution<double> unit(0, 1);
  int attempts = 0;
  while (static_cast<int>(out.size()) < n && attempts++ < 50 * n) {
    const Config &a = parent(), &b = parent();
    Config child = a;
    for (size_t k = 0; k < child.choice.size(); ++k) {
      if (unit(rng_) < 0.5) child.choice[k] = b.choice[k];
      if (unit(rng_) < mutation_) {
        child.choice[k] = static_cast<int>(rng_() % space_.knobs()[k].values.size());
      }
    }
    if (visited(child)) continue;
    mark(child);
    out.push_back(child);
  }
  Config c;
  while (static_cast<int>(out.size()) < n && sample_unvisited(&c)) {
    mark(c);
    out.push_back(c);
  }
  return out;
}

}  // namespace tessera
