#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "tune/baseline_tuners.h"
#include "tune/model_tuner.h"

namespace tessera {
namespace {

// A synthetic space whose cost is known: the best configuration has every knob at value 3.
ConfigSpace synthetic_space() {
  std::vector<Knob> knobs;
  for (int k = 0; k < 6; ++k)
    knobs.push_back(int_knob("k" + std::to_string(k), {0, 1, 2, 3, 4, 5, 6, 7}));
  return ConfigSpace("synthetic", knobs,
                     [](const ConfigSpace&, const Config&) { return id<Program>(); });
}

double true_score(const Config& c) {
  double s = 0;
  for (int v : c.choice) s -= (v - 3) * (v - 3);
  return s;
}

// A model that knows the cost: the features are the knob values.
class OracleModel : public CostModel {
 public:
  void fit(const std::vector<std::vector<float>>&, const std::vector<float>&) override {}
  std::vector<float> predict(const std::vector<std::vector<float>>& x) const override {
    std::vector<float> out;
    for (const auto& row : x) {
      float s = 0;
      for (float v : row) s -= (v - 3) * (v - 3);
      out.push_back(s);
    }
    return out;
  }
  std::string name() const override { return "oracle"; }
  double prior_weight() const override { return prior; }
  double prior = 0;  // as if that share of the scores came from other workloads
};

ModelTuner::FeatureFn knob_values() {
  return [](const Config& c, std::vector<float>* out) {
    out->assign(c.choice.begin(), c.choice.end());
    return true;
  };
}

TEST(ModelTuner, SimulatedAnnealingFindsTheOptimumOfAKnownCost) {
  ConfigSpace space = synthetic_space();  // 8^6 = 262144 configurations
  TuneParams params;
  params.seed = 5;
  ModelTuner tuner(space, params, std::make_unique<OracleModel>(), knob_values());
  std::mt19937_64 rng(1);
  tuner.observe({space.sample(rng)}, {1.0});  // fit once so the model guides
  std::vector<std::pair<double, Config>> best = tuner.anneal();
  ASSERT_FALSE(best.empty());
  EXPECT_EQ(best.front().first, 0.0) << "best found: " << space.describe(best.front().second);
  EXPECT_EQ(true_score(best.front().second), 0.0);
}

// The annealing per batch is AutoTVM's (128 chains, 500 steps) for its batch of 64 and shrinks
// with smaller batches, down to 32 chains and sa_early_stop steps; a batch of 8 (a compile's
// tasks) still finds the optimum of the oracle's cost over its persistent chains.
TEST(ModelTuner, AnnealingScalesWithTheBatch) {
  ConfigSpace space = synthetic_space();
  TuneParams params;
  params.seed = 5;
  ModelTuner tuner(space, params, std::make_unique<OracleModel>(), knob_values());
  EXPECT_EQ(tuner.annealing_steps(), 500);
  EXPECT_EQ(tuner.annealing_chains(), 128);
  std::mt19937_64 rng(1);
  tuner.observe({space.sample(rng)}, {1.0});
  double best = -1e9;
  for (int batch = 0; batch < 4; ++batch) {
    for (const Config& c : tuner.propose(8)) best = std::max(best, true_score(c));
    EXPECT_EQ(tuner.annealing_steps(), 62);
    EXPECT_EQ(tuner.annealing_chains(), 32);
  }
  EXPECT_EQ(best, 0.0);
  tuner.propose(2);
  EXPECT_EQ(tuner.annealing_steps(), 50);
  EXPECT_EQ(tuner.annealing_chains(), 32);
  tuner.propose(32);
  EXPECT_EQ(tuner.annealing_steps(), 250);
  EXPECT_EQ(tuner.annealing_chains(), 64);
}

// While the scores come from other workloads (transfer), more of each batch is drawn at random:
// epsilon + transfer_epsilon * w. Random draws are far from the optimum the oracle knows, the
// model's picks are near it.
TEST(ModelTuner, TransferredScoresBuyMoreRandomDraws) {
  ConfigSpace space = synthetic_space();
  auto far_picks = [&](double prior) {
    TuneParams params;
    params.seed = 9;
    params.epsilon = 0.05;
    params.transfer_epsilon = 0.25;
    auto model = std::make_unique<OracleModel>();
    model->prior = prior;
    ModelTuner tuner(space, params, std::move(model), knob_values());
    std::mt19937_64 rng(2);
    tuner.observe({space.sample(rng)}, {1.0});
    int far = 0;
    for (const Config& c : tuner.propose(20)) far += true_score(c) < -12;
    return far;
  };
  const int without = far_picks(0.0), with_prior = far_picks(1.0);
  EXPECT_LE(without, 2);     // 5% of 20: one draw
  EXPECT_GE(with_prior, 4);  // 30% of 20: six draws
  EXPECT_LE(with_prior, 7);
}

// The forecast maps scores to throughput with a line fitted on the measured successes; with an
// oracle whose scores are the throughput minus 100, the line is exact and the forecast is the
// optimum's throughput over the best measured one's.
TEST(ModelTuner, OutlookForecastsTheSearchsBestOverTheBestMeasured) {
  ConfigSpace space = synthetic_space();
  TuneParams params;
  params.seed = 3;
  ModelTuner tuner(space, params, std::make_unique<OracleModel>(), knob_values());
  EXPECT_FALSE(tuner.outlook()) << "nothing measured: no forecast";
  auto throughput = [](const Config& c) { return 100 + true_score(c); };
  std::vector<Config> measured = {Config{{3, 3, 3, 3, 1, 1}}, Config{{0, 3, 3, 3, 3, 3}},
                                  Config{{7, 7, 3, 3, 3, 3}}};
  tuner.observe({measured[0], measured[1]}, {throughput(measured[0]), throughput(measured[1])});
  EXPECT_FALSE(tuner.outlook()) << "two successes are too few to fit the line";
  tuner.observe({measured[2], Config{{5, 5, 5, 5, 5, 5}}}, {throughput(measured[2]), 0.0});
  std::optional<double> forecast = tuner.outlook();
  ASSERT_TRUE(forecast);
  EXPECT_NEAR(*forecast, 100.0 / 92.0, 1e-9) << "the optimum (100) over the best measured (92)";
  // The search behind the forecast is the batch's.
  std::vector<Config> batch = tuner.propose(4);
  ASSERT_FALSE(batch.empty());
  EXPECT_EQ(batch[0], (Config{{3, 3, 3, 3, 3, 3}}));
  tuner.observe({batch[0]}, {100.0});
  forecast = tuner.outlook();
  ASSERT_TRUE(forecast);
  EXPECT_NEAR(*forecast, 99.0 / 100.0, 1e-9) << "the optimum is measured: the next best is worse";
}

TEST(ModelTuner, NoOutlookWhenTheScoresFallAsTheThroughputRises) {
  ConfigSpace space = synthetic_space();
  ModelTuner tuner(space, TuneParams{}, std::make_unique<OracleModel>(), knob_values());
  // Measured throughputs ordered against the oracle's scores: the model has no signal.
  tuner.observe(
      {Config{{3, 3, 3, 3, 3, 2}}, Config{{3, 3, 3, 3, 1, 1}}, Config{{0, 0, 3, 3, 3, 3}}},
      {10.0, 20.0, 30.0});
  EXPECT_FALSE(tuner.outlook());
}

TEST(ModelTuner, DiverseSelectionCoversMoreKnobValuesThanTopB) {
  ConfigSpace space = synthetic_space();
  // Ten near-identical top candidates and ten slightly worse, all different.
  std::vector<std::pair<double, Config>> candidates;
  for (int i = 0; i < 10; ++i)
    candidates.push_back({1.0 - 0.001 * i, Config{{3, 3, 3, 3, 3, i % 8}}});
  for (int i = 0; i < 10; ++i)
    candidates.push_back({0.95, Config{{i % 8, (i + 1) % 8, (i + 2) % 8, 0, 1, 2}}});
  auto coverage = [&](const std::vector<Config>& picked) {
    std::vector<std::set<int>> values(6);
    for (const Config& c : picked) {
      for (size_t k = 0; k < 6; ++k) values[k].insert(c.choice[k]);
    }
    size_t n = 0;
    for (const auto& v : values) n += v.size();
    return n;
  };
  std::vector<Config> top_b;
  for (int i = 0; i < 6; ++i) top_b.push_back(candidates[static_cast<size_t>(i)].second);
  std::vector<Config> diverse =
      ModelTuner::select_diverse(space, candidates, 6, TuneParams{}.diversity_alpha);
  ASSERT_EQ(diverse.size(), 6u);
  EXPECT_GT(coverage(diverse), coverage(top_b));
  // The best candidate is still picked first.
  EXPECT_EQ(diverse[0], candidates[0].second);
  // Without the diversity term it is plain top-b.
  EXPECT_EQ(ModelTuner::select_diverse(space, candidates, 6, 0.0), top_b);
}

TEST(BaselineTuners, NeverProposeTwiceAndAreSeeded) {
  ConfigSpace space = synthetic_space();
  for (int kind = 0; kind < 3; ++kind) {
    auto make = [&](uint64_t seed) -> std::unique_ptr<Tuner> {
      if (kind == 0) return std::make_unique<RandomTuner>(space, seed);
      if (kind == 1) return std::make_unique<GridTuner>(space, seed);
      return std::make_unique<GeneticTuner>(space, seed, 16, 0.1);
    };
    auto a = make(7), b = make(7);
    std::set<uint64_t> seen;
    for (int round = 0; round < 5; ++round) {
      std::vector<Config> pa = a->propose(16), pb = b->propose(16);
      ASSERT_EQ(pa.size(), 16u);
      EXPECT_EQ(pa, pb) << "kind " << kind;
      std::vector<double> scores;
      for (const Config& c : pa) {
        EXPECT_TRUE(seen.insert(space.to_index(c)).second) << "kind " << kind;
        scores.push_back(std::exp(true_score(c) / 10));
      }
      a->observe(pa, scores);
      b->observe(pb, scores);
    }
  }
}

TEST(BaselineTuners, GridRunsOutWithTheSpace) {
  ConfigSpace tiny("tiny", {int_knob("a", {1, 2}), int_knob("b", {1, 2, 3})},
                   [](const ConfigSpace&, const Config&) { return id<Program>(); });
  GridTuner grid(tiny, 0);
  EXPECT_EQ(grid.propose(4).size(), 4u);
  EXPECT_EQ(grid.propose(4).size(), 2u);
  EXPECT_TRUE(grid.propose(4).empty());
}

}  // namespace
}  // namespace tessera
