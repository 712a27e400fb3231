/// Gradient-boosted trees through XGBoost's C API: the pairwise rank loss of AutoTVM's eq. 2 by
/// default, squared-error regression as an option, early stopping on top-k recall.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "model/cost_model.h"

namespace tessera {

/// Defaults follow AutoTVM's XGBoostCostModel (max_depth 3, eta 0.3, gamma 1e-4, early stopping
/// on the training set's average top-k recall) with a lower cap on rounds.
struct XGBoostParams {
  enum class Objective {
    kRank,        // "rank:pairwise": all samples of one fit form one query group (eq. 2)
    kRegression,  // "reg:squarederror" on the normalised throughput
  };
  Objective objective = Objective::kRank;
  int max_depth = 3;
  double eta = 0.3;               // learning rate
  double subsample = 1.0;         // row subsampling per tree
  double colsample_bytree = 1.0;  // feature subsampling per tree
  double min_child_weight = 1.0;
  double gamma = 1e-4;               // minimum loss reduction to split
  double lambda = 1.0;               // L2 regularisation
  double alpha = 0.0;                // L1 regularisation
  std::string tree_method = "hist";  // "hist", "exact", "approx" or "auto"
  int num_boost_round = 400;         // upper bound on trees
  /// Stop when the score has not improved for this many rounds (0: never stop early) and keep
  /// the trees up to the best round.
  int early_stopping_rounds = 20;
  /// The score: average_recall(pred, truth, recall_top_k) (AutoTVM's a-recall@k; it uses the
  /// plan size, 64), clamped to the number of evaluated samples.
  int recall_top_k = 64;
  /// Share of the samples held out (a seeded random split) to compute the score on. 0 scores on
  /// the training set as AutoTVM does. With fewer than 16 samples in either part the training
  /// set is used.
  double validation_fraction = 0.0;
  /// rank:pairwise samples this many pairs per sample and round (XGBoost's num_pairsample).
  /// XGBoost's and AutoTVM's 1 learns slowly on one large group: on the synthetic set of
  /// tests/model, 8 raises held-out recall@30 from about 0.8 to 0.9 at the same fit time.
  int rank_pair_samples = 8;
  /// XGBoost's threads; 0: all cores. 1 by default: training sets of a tuner (up to a few
  /// thousand rows) gain little from threads, and on cores shared with builds and measurements
  /// XGBoost's OpenMP threads slow fits down several times (bench/bench_model).
  int nthread = 1;
  uint64_t seed = 0;  // XGBoost's seed and the validation split's
};

const char* objective_name(XGBoostParams::Objective objective);

/// Extras of a fit beyond rows and labels.
struct FitOptions {
  /// Query groups of the rank objective: sizes of consecutive runs of rows, summing to the row
  /// count (empty: all rows are one group). With groups, early stopping scores the mean over
  /// groups of each group's average recall, on the training rows (no validation split).
  std::vector<unsigned> groups;
  /// A prior score per row (XGBoost's base_margin, empty: none): the trees learn a correction on
  /// top of it. predict() does not add it back; the caller does (see TransferModel).
  std::vector<float> base_margin;
};

class XGBoostModel : public CostModel {
 public:
  explicit XGBoostModel(XGBoostParams params = {});
  ~XGBoostModel() override;
  XGBoostModel(XGBoostModel&&) noexcept;
  XGBoostModel& operator=(XGBoostModel&&) noexcept;

  /// Trains a new booster. With no samples the model is unfitted; with one sample or equal
  /// labels XGBoost learns a constant. Non-finite labels count as failures (0). Throws
  /// tessera::Error on rows of different lengths or a failing XGBoost call.
  void fit(const std::vector<std::vector<float>>& x, const std::vector<float>& y) override;
  /// fit() with query groups and/or a base margin; throws tessera::Error when their sizes do not
  /// match the rows.
  void fit(const std::vector<std::vector<float>>& x, const std::vector<float>& y,
           const FitOptions& options);
  /// All rows in one in-place XGBoost call (no DMatrix copy). An unfitted model predicts 0 for
  /// every row. Throws
  /// tessera::Error when the row length differs from the one the model was trained on.
  std::vector<float> predict(const std::vector<std::vector<float>>& x) const override;
  /// Predictions for rows stored one after another in `data` (rows * cols floats).
  std::vector<float> predict_flat(const float* data, size_t rows, size_t cols) const;
  /// "xgb-rank" or "xgb-reg".
  std::string name() const override;

  bool fitted() const { return booster_ != nullptr; }
  /// Trees kept after early stopping.
  int num_rounds() const { return rounds_; }
  /// The best early-stopping score of the last fit (average recall; 0 before any fit).
  double best_score() const { return best_score_; }
  /// Feature row length the model was trained on (0 when unfitted).
  size_t num_features() const { return num_features_; }
  const XGBoostParams& params() const { return params_; }

  /// Writes the booster as XGBoost JSON; throws tessera::Error if unfitted or on I/O failure.
  void save(const std::string& path) const;
  /// Replaces this model by the booster in `path`.
  void load(const std::string& path);
  /// The booster as XGBoost JSON text; throws tessera::Error if unfitted.
  std::string to_json() const;
  /// Replaces this model by the booster in `bytes` (XGBoost JSON); `source` names them in errors.
  void load_bytes(const std::string& bytes, const std::string& source);

 private:
  struct BoosterDeleter {
    void operator()(void* handle) const;
  };
  using BoosterPtr = std::unique_ptr<void, BoosterDeleter>;

  XGBoostParams params_;
  BoosterPtr booster_;
  int rounds_ = 0;
  double best_score_ = 0;
  size_t num_features_ = 0;
  mutable std::unique_ptr<std::mutex> mutex_;  // XGBoost prediction buffers are per booster
};

}  // namespace tessera
