/// AutoTVM's Algorithm 1: a cost model fitted on every measurement guides parallel simulated
/// annealing; the batch is a diverse selection from its best candidates plus an epsilon share of
/// random ones.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <unordered_map>

#include "model/cost_model.h"
#include "tune/tuner.h"

namespace tessera {

class ModelTuner : public Tuner {
 public:
  /// Features of a configuration's program; false when its strategy does not apply.
  using FeatureFn = std::function<bool(const Config&, std::vector<float>*)>;

  ModelTuner(const ConfigSpace& space, const TuneParams& params, std::unique_ptr<CostModel> model,
             FeatureFn features);

  std::vector<Config> propose(int n) override;
  void observe(const std::vector<Config>& configs, const std::vector<double>& gflops) override;
  /// Fits the model again on everything observed (after the model's prior changed).
  void refit();
  /// Scores map to throughput through a least-squares line fitted on the measured successes
  /// (rank scores have no unit); the forecast is that line at the search's best candidate over
  /// the line at the best measured configuration. nullopt before the model is fitted on 3
  /// successes, or when its scores do not rise with throughput. The search it runs is the next
  /// propose()'s unless the model changes first (observe, refit).
  std::optional<double> outlook() override;
  /// The model knows something before any measurement (a transfer model with a global part):
  /// batches come from the search over it from the first one on.
  void use_model_from_start() { fitted_ = true; }
  /// Rows the model was last fitted on.
  size_t training_rows() const { return train_x_.size(); }

  /// The model's scores for configurations (-inf where the strategy does not apply).
  std::vector<double> predict(const std::vector<Config>& configs);
  /// Simulated annealing from the persistent chains: the best unvisited configurations found.
  std::vector<std::pair<double, Config>> anneal();
  /// Steps of one anneal(): params.sa_steps for a batch of 64, AutoTVM's, and as many per
  /// configuration for smaller batches (at least params.sa_early_stop). The chains persist, so
  /// a run anneals as long per measurement whatever its batches.
  int annealing_steps() const;
  /// Chains that anneal: params.sa_chains for a batch of 64, fewer for smaller ones (at least 32).
  int annealing_chains() const;
  /// Greedy submodular selection: n of the candidates maximizing normalised predicted score
  /// plus alpha times the number of knob values a pick adds to those already covered.
  static std::vector<Config> select_diverse(
      const ConfigSpace& space, const std::vector<std::pair<double, Config>>& candidates, int n,
      double alpha);

 private:
  const std::vector<float>* features_of(const Config& c);

  TuneParams params_;
  std::unique_ptr<CostModel> model_;
  FeatureFn feature_fn_;
  std::unordered_map<uint64_t, std::optional<std::vector<float>>> feature_cache_;
  std::vector<std::vector<float>> train_x_;
  std::vector<double> train_gflops_;
  std::vector<Config> chains_;
  // The batch the next anneal() plans for: the last propose()'s n, params.batch_size before it.
  int batch_;
  bool fitted_ = false;
  // anneal()'s result for the next propose(), when outlook() ran it; dropped when the model
  // changes.
  std::optional<std::vector<std::pair<double, Config>>> planned_;
};

}  // namespace tessera
