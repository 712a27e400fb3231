/// The baselines the learned tuner is compared with: random, grid and a genetic algorithm.
#pragma once

#include "tune/tuner.h"

namespace tessera {

/// Uniform samples without replacement.
class RandomTuner : public Tuner {
 public:
  using Tuner::Tuner;
  std::vector<Config> propose(int n) override;
};

/// Every configuration in index order.
class GridTuner : public Tuner {
 public:
  using Tuner::Tuner;
  std::vector<Config> propose(int n) override;

 private:
  uint64_t next_ = 0;
};

/// A generational GA over knob values: elites kept, parents chosen in proportion to throughput,
/// uniform crossover per knob, each knob mutated with probability `mutation`.
class GeneticTuner : public Tuner {
 public:
  GeneticTuner(const ConfigSpace& space, uint64_t seed, int population, double mutation)
      : Tuner(space, seed), population_size_(population), mutation_(mutation) {}
  std::vector<Config> propose(int n) override;
  void observe(const std::vector<Config>& configs, const std::vector<double>& gflops) override;

 private:
  int population_size_;
  double mutation_;
  std::vector<std::pair<Config, double>> scored_;  // everything measured, for parent selection
};

}  // namespace tessera
