#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>

#include "model/cost_model.h"
#include "model/xgboost_model.h"
#include "te/error.h"

namespace tessera {
namespace {

struct Data {
  std::vector<std::vector<float>> x;
  std::vector<float> y;
};

// Labels are a known function of features 0, 1 and 2 of 12 uniform features, normalised so
// that the best is 1; the 10% of samples with feature 3 above 0.9 are failures (label 0), like
// configurations that do not build.
Data synthetic(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(0, 1);
  Data d;
  for (size_t i = 0; i < n; ++i) {
    std::vector<float> row(12);
    for (float& v : row) v = u(rng);
    float y = 2 * row[0] + std::sin(3 * row[1]) + row[0] * row[2];
    d.x.push_back(row);
    d.y.push_back(row[3] > 0.9f ? 0 : y);
  }
  float best = *std::max_element(d.y.begin(), d.y.end());
  for (float& y : d.y) y /= best;
  return d;
}

TEST(ModelRecall, CountsTheTrueTopKFound) {
  std::vector<float> truth = {0.1f, 0.9f, 0.5f, 0.7f, 0.2f};
  EXPECT_DOUBLE_EQ(recall_at_k(truth, truth, 2), 1.0);
  std::vector<float> reversed = {0.9f, 0.1f, 0.5f, 0.2f, 0.7f};
  EXPECT_DOUBLE_EQ(recall_at_k(reversed, truth, 2), 0.0);
  EXPECT_DOUBLE_EQ(recall_at_k(reversed, truth, 3), 1.0 / 3);
  EXPECT_DOUBLE_EQ(recall_at_k(reversed, truth, 99), 1.0);  // k clamped to 5
  EXPECT_DOUBLE_EQ(recall_at_k({}, {}, 3), 1.0);
  std::vector<float> second = {0.0f, 0.8f, 0.9f, 0.1f, 0.2f};  // finds 1 at place 2
  EXPECT_DOUBLE_EQ(recall_at_k(second, truth, 1), 0.0);
  EXPECT_DOUBLE_EQ(recall_at_k(second, truth, 2), 0.5);
  EXPECT_DOUBLE_EQ(average_recall(second, truth, 2), 0.25);
  EXPECT_DOUBLE_EQ(average_recall(truth, truth, 5), 1.0);
  EXPECT_THROW(recall_at_k({1.0f}, {}, 1), Error);
}

TEST(ModelRandom, SeededUniformPredictions) {
  RandomModel a(7), b(7), c(8);
  std::vector<std::vector<float>> x(100, std::vector<float>(3, 0.0f));
  a.fit(x, std::vector<float>(100, 1.0f));
  std::vector<float> pa = a.predict(x);
  EXPECT_EQ(pa, b.predict(x));
  EXPECT_NE(pa, c.predict(x));
  EXPECT_NE(pa, a.predict(x));  // the sequence continues
  for (float v : pa) {
    EXPECT_GE(v, 0.0f);
    EXPECT_LT(v, 1.0f);
  }
  EXPECT_EQ(a.name(), "random");
}

double held_out_recall(XGBoostParams params, int k) {
  Data train = synthetic(400, 1);
  Data test = synthetic(300, 2);
  XGBoostModel m(params);
  m.fit(train.x, train.y);
  EXPECT_TRUE(m.fitted());
  EXPECT_GT(m.num_rounds(), 0);
  EXPECT_LE(m.num_rounds(), params.num_boost_round);
  return recall_at_k(m.predict(test.x), test.y, k);
}

TEST(ModelXGBoost, RankObjectiveOrdersASyntheticSet) {
  XGBoostParams p;
  p.nthread = 1;
  double recall = held_out_recall(p, 30);
  EXPECT_GE(recall, 0.7);
  // The random baseline finds about k/n of the top k.
  RandomModel r(3);
  Data test = synthetic(300, 2);
  EXPECT_LT(recall_at_k(r.predict(test.x), test.y, 30), 0.4);
}

TEST(ModelXGBoost, RegressionPredictsTheLabels) {
  XGBoostParams p;
  p.objective = XGBoostParams::Objective::kRegression;
  p.nthread = 1;
  EXPECT_GE(held_out_recall(p, 30), 0.7);
  Data train = synthetic(400, 1);
  XGBoostModel m(p);
  EXPECT_EQ(m.name(), "xgb-reg");
  m.fit(train.x, train.y);
  std::vector<float> pred = m.predict(train.x);
  double se = 0;
  for (size_t i = 0; i < pred.size(); ++i) se += (pred[i] - train.y[i]) * (pred[i] - train.y[i]);
  EXPECT_LT(se / pred.size(), 0.01);
}

TEST(ModelXGBoost, HeldOutEarlyStopping) {
  XGBoostParams p;
  p.nthread = 1;
  p.validation_fraction = 0.25;
  p.early_stopping_rounds = 10;
  EXPECT_GE(held_out_recall(p, 30), 0.6);
}

TEST(ModelXGBoost, TinyTrainingSetsPredictAConstant) {
  for (auto objective : {XGBoostParams::Objective::kRank, XGBoostParams::Objective::kRegression}) {
    XGBoostParams p;
    p.objective = objective;
    p.nthread = 1;
    std::vector<std::vector<float>> probe = {{0, 0, 0}, {1, 2, 3}, {5, 5, 5}};
    XGBoostModel m(p);
    EXPECT_EQ(m.predict(probe), std::vector<float>(3, 0.0f));  // unfitted
    m.fit({}, {});
    EXPECT_FALSE(m.fitted());
    EXPECT_EQ(m.predict(probe), std::vector<float>(3, 0.0f));
    for (const Data& d :
         {Data{{{1, 2, 3}}, {1.0f}}, Data{{{1, 2, 3}, {3, 2, 1}}, {0.5f, 0.5f}},
          Data{std::vector<std::vector<float>>(10, {1, 1, 1}), std::vector<float>(10, 0.0f)},
          Data{{{1, 2, 3}, {3, 2, 1}}, {NAN, 1.0f}}}) {
      ASSERT_NO_THROW(m.fit(d.x, d.y));
      std::vector<float> pred = m.predict(probe);
      ASSERT_EQ(pred.size(), 3u);
      for (float v : pred) EXPECT_TRUE(std::isfinite(v));
      if (d.x.size() == 1 || d.y[0] == d.y[1]) {
        EXPECT_EQ(pred[0], pred[1]);
        EXPECT_EQ(pred[1], pred[2]);
      }
    }
  }
}

TEST(ModelXGBoost, RejectsRaggedRows) {
  XGBoostParams p;
  p.nthread = 1;
  XGBoostModel m(p);
  EXPECT_THROW(m.fit({{1, 2}, {1}}, {1, 0}), Error);
  EXPECT_THROW(m.fit({{1, 2}}, {1, 0}), Error);
  m.fit({{1, 2}, {2, 1}, {3, 3}}, {0.2f, 1.0f, 0.5f});
  EXPECT_THROW(m.predict({{1, 2, 3}}), Error);
  EXPECT_THROW(m.load("/nonexistent/model.json"), Error);
}

TEST(ModelXGBoost, SaveLoadRoundTrip) {
  Data train = synthetic(200, 5);
  Data test = synthetic(50, 6);
  XGBoostParams p;
  p.nthread = 1;
  XGBoostModel m(p);
  std::string path = ::testing::TempDir() + "tessera_model_test.json";
  EXPECT_THROW(m.save(path), Error);  // nothing to save yet
  m.fit(train.x, train.y);
  m.save(path);
  XGBoostModel loaded(p);
  loaded.load(path);
  EXPECT_EQ(loaded.num_features(), 12u);
  EXPECT_EQ(loaded.num_rounds(), m.num_rounds());
  EXPECT_EQ(loaded.predict(test.x), m.predict(test.x));
  std::remove(path.c_str());
}

TEST(ModelXGBoost, SameSeedSameModel) {
  Data train = synthetic(200, 5);
  XGBoostParams p;
  p.subsample = 0.8;
  p.seed = 11;
  p.nthread = 1;
  XGBoostModel a(p), b(p);
  a.fit(train.x, train.y);
  b.fit(train.x, train.y);
  EXPECT_EQ(a.predict(train.x), b.predict(train.x));
}

}  // namespace
}  // namespace tessera
