/// Transfer learning (AutoTVM §3.3): f(x) = w · f_global(x) + f_local(x). The global model was
/// trained on the records of other workloads; the local model is fitted on this workload's
/// measurements as a correction on top of the weighted global score, and the global weight falls
/// as local data grows.
#pragma once

#include <cstddef>
#include <memory>

#include "model/xgboost_model.h"

namespace tessera {

/// The global model's weight with n local samples: w = 1 / (1 + n / n0). 1 with no local data,
/// 1/2 at n = n0, toward 0 as local data dominates. n0 <= 0 gives 0 (no transfer).
double global_weight(size_t n_local, double n0);

class TransferModel : public CostModel {
 public:
  /// `global` may be null (then this is the local model alone, w irrelevant).
  TransferModel(std::shared_ptr<const CostModel> global, std::unique_ptr<XGBoostModel> local,
                double n0);

  /// Fits the local model on (x, y) with base margin w(n) · f_global(x), n = x.size().
  void fit(const std::vector<std::vector<float>>& x, const std::vector<float>& y) override;
  /// w(n) · f_global(x) + f_local(x), n = the rows of the last fit (0 before any fit).
  std::vector<float> predict(const std::vector<std::vector<float>>& x) const override;
  /// "<local>+global", or the local model's name without a global model.
  std::string name() const override;

  /// Replaces the global model (e.g. refreshed from a grown DB). The local model keeps the
  /// margins of the old one until the next fit.
  void set_global(std::shared_ptr<const CostModel> global) { global_ = std::move(global); }
  const CostModel* global() const { return global_.get(); }
  const XGBoostModel& local() const { return *local_; }
  size_t local_samples() const { return n_local_; }
  /// The global weight the next predict() applies.
  double weight() const { return global_ ? global_weight(n_local_, n0_) : 0.0; }
  double prior_weight() const override { return weight(); }

 private:
  std::shared_ptr<const CostModel> global_;
  std::unique_ptr<XGBoostModel> local_;
  double n0_;
  size_t n_local_ = 0;
};

}  // namespace tessera
