// Transfer learning: the weight schedule, f = w·f_global + f_local, and a synthetic case where a
// global model trained on a related task ranks a new task better than a local model alone.
#include "model/transfer_model.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "te/error.h"

namespace tessera {
namespace {

// A fixed "global model": the sum of the first two features.
class SumModel : public CostModel {
 public:
  void fit(const std::vector<std::vector<float>>&, const std::vector<float>&) override {}
  std::vector<float> predict(const std::vector<std::vector<float>>& x) const override {
    std::vector<float> out;
    for (const auto& row : x) out.push_back(row[0] + row[1]);
    return out;
  }
  std::string name() const override { return "sum"; }
};

std::vector<std::vector<float>> uniform_rows(size_t n, size_t cols, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(0, 1);
  std::vector<std::vector<float>> x(n, std::vector<float>(cols));
  for (auto& row : x)
    for (float& v : row) v = u(rng);
  return x;
}

TEST(TransferModel, GlobalWeightFallsAsLocalDataGrows) {
  EXPECT_DOUBLE_EQ(global_weight(0, 64), 1.0);
  EXPECT_DOUBLE_EQ(global_weight(64, 64), 0.5);
  EXPECT_DOUBLE_EQ(global_weight(192, 64), 0.25);
  EXPECT_DOUBLE_EQ(global_weight(10, 0), 0.0);
  for (size_t n = 0; n < 1000; n += 37) EXPECT_GT(global_weight(n, 64), global_weight(n + 1, 64));
}

TEST(TransferModel, PredictsTheWeightedGlobalPlusTheLocalCorrection) {
  auto global = std::make_shared<SumModel>();
  XGBoostParams p;
  p.objective = XGBoostParams::Objective::kRegression;
  p.early_stopping_rounds = 0;  // all 100 rounds: the fit should match the labels
  p.num_boost_round = 100;
  TransferModel model(global, std::make_unique<XGBoostModel>(p), 32);
  auto x = uniform_rows(40, 4, 1);
  // Before any local data the prediction is the global model's alone, at full weight.
  std::vector<float> g = global->predict(x);
  std::vector<float> before = model.predict(x);
  for (size_t i = 0; i < x.size(); ++i) EXPECT_FLOAT_EQ(before[i], g[i]);
  EXPECT_DOUBLE_EQ(model.weight(), 1.0);

  std::vector<float> y;
  for (const auto& row : x) y.push_back(row[2]);
  model.fit(x, y);
  EXPECT_EQ(model.local_samples(), 40u);
  double w = global_weight(40, 32);
  EXPECT_DOUBLE_EQ(model.weight(), w);
  std::vector<float> local = model.local().predict(x);
  std::vector<float> combined = model.predict(x);
  for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(combined[i], w * g[i] + local[i], 1e-5) << i;
  // The local part learned the correction on top of w·g: together they fit the labels.
  double err = 0;
  for (size_t i = 0; i < x.size(); ++i) err += std::abs(combined[i] - y[i]);
  EXPECT_LT(err / x.size(), 0.1);
  EXPECT_EQ(model.name(), "xgb-reg+global");

  // Without a global model it is the local model.
  TransferModel alone(nullptr, std::make_unique<XGBoostModel>(p), 32);
  alone.fit(x, y);
  EXPECT_EQ(alone.predict(x), alone.local().predict(x));
  EXPECT_DOUBLE_EQ(alone.weight(), 0.0);
}

TEST(ModelXGBoost, QueryGroupsAndBaseMarginsAreChecked) {
  auto x = uniform_rows(20, 3, 2);
  std::vector<float> y(20, 0.5f);
  XGBoostModel m;
  FitOptions bad_groups;
  bad_groups.groups = {10, 5};
  EXPECT_THROW(m.fit(x, y, bad_groups), Error);
  FitOptions bad_margin;
  bad_margin.base_margin = std::vector<float>(3, 0.0f);
  EXPECT_THROW(m.fit(x, y, bad_margin), Error);
  FitOptions ok;
  ok.groups = {10, 10};
  for (size_t i = 0; i < 20; ++i) y[i] = x[i][0];
  m.fit(x, y, ok);
  EXPECT_TRUE(m.fitted());
}

// Two related tasks over 10 features: the throughput depends on the same features in the same
// way, with a task-specific term. The source task has many samples, the new one few.
float source_task(const std::vector<float>& r) {
  return 3 * r[0] - 2 * std::abs(r[1] - 0.5f) + std::sin(4 * r[2]) + 0.3f * r[3];
}
float target_task(const std::vector<float>& r) {
  return 3 * r[0] - 2 * std::abs(r[1] - 0.5f) + std::sin(4 * r[2]) - 0.3f * r[3] + 0.5f * r[4];
}

TEST(TransferModel, AGlobalModelOfARelatedTaskRanksANewTaskBetterThanFewLocalPoints) {
  double with_transfer = 0, local_only = 0;
  const int seeds = 3;
  for (int seed = 0; seed < seeds; ++seed) {
    auto src_x = uniform_rows(1000, 10, 100 + seed);
    std::vector<float> src_y;
    for (const auto& r : src_x) src_y.push_back(source_task(r));
    float best = *std::max_element(src_y.begin(), src_y.end());
    for (float& v : src_y) v /= best;
    auto global = std::make_shared<XGBoostModel>();
    global->fit(src_x, src_y);

    auto few = uniform_rows(16, 10, 200 + seed);
    std::vector<float> few_y;
    for (const auto& r : few) few_y.push_back(target_task(r));
    float few_best = *std::max_element(few_y.begin(), few_y.end());
    for (float& v : few_y) v /= few_best;
    auto test = uniform_rows(500, 10, 300 + seed);
    std::vector<float> truth;
    for (const auto& r : test) truth.push_back(target_task(r));

    TransferModel transfer(global, std::make_unique<XGBoostModel>(), 64);
    transfer.fit(few, few_y);
    XGBoostModel local;
    local.fit(few, few_y);
    with_transfer += average_recall(transfer.predict(test), truth, 32);
    local_only += average_recall(local.predict(test), truth, 32);
  }
  with_transfer /= seeds;
  local_only /= seeds;
  EXPECT_GT(with_transfer, local_only + 0.15)
      << "transfer " << with_transfer << ", local only " << local_only;
}

}  // namespace
}  // namespace tessera
