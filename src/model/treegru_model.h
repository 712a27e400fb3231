/// AutoTVM's second cost model: a recursive network over the loop program's tree (a child-sum
/// tree GRU, bottom-up), read from kTree feature rows, trained with the pairwise rank loss of
/// eq. 2 or squared error, through libtorch.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "model/cost_model.h"

namespace tessera {

struct TreeGRUParams {
  enum class Objective { kRank, kRegression };
  Objective objective = Objective::kRank;
  int hidden = 48;  // width of each node's state and of the head's hidden layer
  /// Programs per training step; the rank loss takes every ordered pair within a step.
  int batch_rows = 128;
  /// Adam steps of the first fit, and of every later one: later fits go on from the weights the
  /// previous fit left (the tuner refits after every batch on a set that only grows), so they
  /// need fewer steps to take the new rows in.
  int first_fit_steps = 300;
  int refit_steps = 100;
  double learning_rate = 3e-3;
  double weight_decay = 1e-5;
  uint64_t seed = 0;  // weight initialization and the order of training rows
};

const char* objective_name(TreeGRUParams::Objective objective);

class TreeGRUModel : public CostModel {
 public:
  explicit TreeGRUModel(TreeGRUParams params = {});
  ~TreeGRUModel() override;
  TreeGRUModel(TreeGRUModel&&) noexcept;
  TreeGRUModel& operator=(TreeGRUModel&&) noexcept;

  /// Rows are extract_features(p, FeatureKind::kTree). Trains on them, starting from the
  /// weights of the previous fit if there was one; the input scaling is fixed by the first fit.
  /// Non-finite labels count as failures (0). Throws tessera::Error on rows of another length.
  void fit(const std::vector<std::vector<float>>& x, const std::vector<float>& y) override;
  /// All rows in batches; an unfitted model predicts 0 for every row. Throws tessera::Error on
  /// rows of another length.
  std::vector<float> predict(const std::vector<std::vector<float>>& x) const override;
  /// "treegru-rank" or "treegru-reg".
  std::string name() const override;

  bool fitted() const;
  const TreeGRUParams& params() const { return params_; }
  /// Mean training loss of the last fit's final 10% of steps (0 before any fit).
  double last_loss() const { return last_loss_; }

  /// The weights, the input scaling and the shape of the network as bytes (libtorch's archive
  /// format); throws tessera::Error if unfitted.
  std::string to_bytes() const;
  /// Replaces this model by one to_bytes wrote; `source` names the bytes in errors.
  void load_bytes(const std::string& bytes, const std::string& source);
  void save(const std::string& path) const;
  void load(const std::string& path);

 private:
  struct Impl;
  TreeGRUParams params_;
  std::unique_ptr<Impl> impl_;
  double last_loss_ = 0;
};

}  // namespace tessera
