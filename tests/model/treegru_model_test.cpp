// The TreeGRU cost model on loop trees of real schedules: it learns an order that depends on
// the tree, batches keep programs apart, and saved models predict as the model that saved them.
#include "model/treegru_model.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <set>
#include <string>

#include "feature/feature.h"
#include "feature/loop_stats.h"
#include "ops/templates.h"
#include "ops/workload.h"
#include "te/error.h"

namespace tessera {
namespace {

struct TreeData {
  std::vector<std::vector<float>> x;
  std::vector<float> y;
};

// A cost only the tree tells: it rewards a main nest whose innermost loop runs 16 iterations,
// is vectorized, and sits under a parallel loop, and penalizes deep nests. No single feature of
// the row gives it: the model must find the main nest's innermost node and its ancestors.
float tree_cost(const ProgramStats& s) {
  if (s.main_path.empty()) return 0;
  const LoopStats& inner = s.loops[s.main_path.back()];
  float score = std::exp(-std::abs(std::log2(static_cast<float>(inner.extent)) - 4));
  if (inner.kind == ForKind::kVectorized) score *= 2;
  for (int k : s.main_path)
    if (s.loops[k].kind == ForKind::kParallel) score *= 1.5f;
  return score / (1 + 0.1f * static_cast<float>(s.main_path.size()));
}

// Distinct configurations of a matmul's schedule space, their tree rows and costs (best = 1).
TreeData tree_data(size_t n, uint64_t seed) {
  Workload w = parse_workload("matmul:M=64,N=64,K=64");
  OpInstance op = instantiate(w);
  ConfigSpace space = space_for(w);
  std::mt19937_64 rng(seed);
  std::set<uint64_t> seen;
  TreeData d;
  for (int attempt = 0; d.x.size() < n && attempt < 20 * static_cast<int>(n); ++attempt) {
    Config c = space.sample(rng);
    if (!seen.insert(space.to_index(c)).second) continue;
    RewriteResult<Program> r = space.instantiate(c)(op.program);
    if (!r) continue;
    d.x.push_back(extract_features(r.program(), FeatureKind::kTree));
    d.y.push_back(tree_cost(analyze_loops(r.program())));
  }
  float best = *std::max_element(d.y.begin(), d.y.end());
  for (float& y : d.y) y /= best;
  return d;
}

// Share of the pairs with different labels that the scores order the same way.
double pair_accuracy(const std::vector<float>& score, const std::vector<float>& truth) {
  size_t right = 0, total = 0;
  for (size_t i = 0; i < truth.size(); ++i) {
    for (size_t j = 0; j < truth.size(); ++j) {
      if (truth[i] <= truth[j]) continue;
      ++total;
      right += score[i] > score[j];
    }
  }
  return total ? static_cast<double>(right) / total : 1.0;
}

class TreeGRU : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    train_ = new TreeData(tree_data(320, 1));
    test_ = new TreeData(tree_data(160, 2));
  }
  static void TearDownTestSuite() {
    delete train_;
    delete test_;
  }
  static TreeData* train_;
  static TreeData* test_;
};
TreeData* TreeGRU::train_ = nullptr;
TreeData* TreeGRU::test_ = nullptr;

TEST_F(TreeGRU, LearnsAnOrderThatOnlyTheTreeGives) {
  ASSERT_GE(train_->x.size(), 300u);
  for (auto objective : {TreeGRUParams::Objective::kRank, TreeGRUParams::Objective::kRegression}) {
    SCOPED_TRACE(objective_name(objective));
    TreeGRUParams params;
    params.objective = objective;
    TreeGRUModel model(params);
    EXPECT_FALSE(model.fitted());
    model.fit(train_->x, train_->y);
    EXPECT_TRUE(model.fitted());
    double held_out = pair_accuracy(model.predict(test_->x), test_->y);
    RandomModel random(3);
    double chance = pair_accuracy(random.predict(test_->x), test_->y);
    EXPECT_GT(held_out, 0.85) << "chance: " << chance;
    EXPECT_LT(chance, 0.6);
    // A refit on more rows starts from the learned weights and keeps what they knew.
    std::vector<std::vector<float>> more = train_->x;
    std::vector<float> more_y = train_->y;
    more.insert(more.end(), test_->x.begin(), test_->x.begin() + 40);
    more_y.insert(more_y.end(), test_->y.begin(), test_->y.begin() + 40);
    model.fit(more, more_y);
    EXPECT_GT(pair_accuracy(model.predict(test_->x), test_->y), 0.85);
  }
}

TEST_F(TreeGRU, ABatchScoresEachProgramAsAloneAndSeedsRepeat) {
  TreeGRUParams params;
  params.first_fit_steps = 40;
  params.seed = 9;
  TreeGRUModel a(params), b(params);
  std::vector<std::vector<float>> x(train_->x.begin(), train_->x.begin() + 100);
  std::vector<float> y(train_->y.begin(), train_->y.begin() + 100);
  a.fit(x, y);
  b.fit(x, y);
  std::vector<float> batch = a.predict(test_->x);
  EXPECT_EQ(batch, b.predict(test_->x));
  for (size_t i = 0; i < test_->x.size(); i += 7) {
    std::vector<float> alone = a.predict({test_->x[i]});
    EXPECT_NEAR(alone[0], batch[i], 1e-4 * (1 + std::abs(batch[i]))) << i;
  }
  // Not a constant: the programs get different scores.
  EXPECT_GT(*std::max_element(batch.begin(), batch.end()),
            *std::min_element(batch.begin(), batch.end()));
}

TEST_F(TreeGRU, ASavedModelPredictsAsTheOneThatSavedIt) {
  TreeGRUParams params;
  params.objective = TreeGRUParams::Objective::kRegression;
  params.first_fit_steps = 30;
  TreeGRUModel model(params);
  EXPECT_THROW(model.to_bytes(), Error);
  model.fit(train_->x, train_->y);
  std::string bytes = model.to_bytes();
  TreeGRUModel loaded;  // rank by default: the file says regression
  loaded.load_bytes(bytes, "saved");
  EXPECT_EQ(loaded.name(), "treegru-reg");
  EXPECT_EQ(loaded.predict(test_->x), model.predict(test_->x));
  loaded.fit(train_->x, train_->y);  // a loaded model trains on from its weights
  EXPECT_TRUE(loaded.fitted());

  auto refused = [&](const std::string& b, const std::string& expected) {
    TreeGRUModel m;
    try {
      m.load_bytes(b, "model.bin");
      ADD_FAILURE() << "loaded: " << expected;
    } catch (const Error& e) {
      std::string what = e.what();
      EXPECT_NE(what.find("model.bin"), std::string::npos) << what;
      EXPECT_NE(what.find(expected), std::string::npos) << what;
      EXPECT_EQ(what.find('\n'), std::string::npos) << what;
    }
    EXPECT_FALSE(m.fitted());
  };
  size_t header_end = bytes.find('\n', bytes.find('\n') + 1);
  refused("", "not a TreeGRU model");
  refused("{\"width\": 56}", "not a TreeGRU model");
  refused(bytes.substr(0, header_end - 3), "cut short");
  std::string bad_json = bytes;
  bad_json[bad_json.find("\"mean\"")] = 'x';
  refused(bad_json, "its header");
  refused(bytes.substr(0, header_end + 1), "its weights");
  refused(bytes.substr(0, bytes.size() / 2), "its weights");
  std::string other_width = bytes;
  other_width.replace(other_width.find("\"width\":") + 8, 2, "57");
  refused(other_width, "inputs");
  std::string other_hidden = bytes;
  size_t h = other_hidden.find("\"hidden\":") + 9;
  other_hidden.replace(h, 2, "32");
  refused(other_hidden, "another shape");
}

TEST_F(TreeGRU, RefusesRowsThatAreNotTrees) {
  TreeGRUModel model;
  std::vector<std::vector<float>> x(train_->x.begin(), train_->x.begin() + 4);
  EXPECT_EQ(model.predict(x), std::vector<float>(4, 0.0f));  // unfitted: no preference
  EXPECT_THROW(model.fit({std::vector<float>(548, 1.0f)}, {1.0f}), Error);
  EXPECT_THROW(model.fit(x, {1.0f}), Error);
  TreeLayout t = tree_layout();
  std::vector<float> forward = x[0];
  forward[t.globals + 1] = 3;  // node 0 names slot 2 as its parent
  EXPECT_THROW(model.fit({forward, x[1]}, {1.0f, 0.5f}), Error);
  std::vector<float> orphan = x[0];
  orphan[t.globals + t.nodes * t.node_width - t.node_width] = 1;       // last slot present...
  orphan[t.globals + t.nodes * t.node_width - t.node_width + 1] = 31;  // ...under an empty one
  EXPECT_THROW(model.fit({orphan, x[1]}, {1.0f, 0.5f}), Error);
  EXPECT_FALSE(model.fitted());
}

}  // namespace
}  // namespace tessera
