#include "model/transfer_model.h"

namespace tessera {

double global_weight(size_t n_local, double n0) {
  if (n0 <= 0) return 0.0;
  return 1.0 / (1.0 + static_cast<double>(n_local) / n0);
}

TransferModel::TransferModel(std::shared_ptr<const CostModel> global,
                             std::unique_ptr<XGBoostModel> local, double n0)
    : global_(std::move(global)), local_(std::move(local)), n0_(n0) {}

void TransferModel::fit(const std::vector<std::vector<float>>& x, const std::vector<float>& y) {
  n_local_ = x.size();
  FitOptions options;
  if (global_ && !x.empty()) {
    double w = weight();
    options.base_margin = global_->predict(x);
    for (float& m : options.base_margin) m = static_cast<float>(w * m);
  }
  local_->fit(x, y, options);
}

std::vector<float> TransferModel::predict(const std::vector<std::vector<float>>& x) const {
  std::vector<float> out = local_->predict(x);
  if (!global_ || x.empty()) return out;
  double w = weight();
  std::vector<float> g = global_->predict(x);
  for (size_t i = 0; i < out.size(); ++i) out[i] += static_cast<float>(w * g[i]);
  return out;
}

std::string TransferModel::name() const {
  return global_ ? local_->name() + "+global" : local_->name();
}

}  // namespace tessera
