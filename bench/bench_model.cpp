// Cost-model throughput: feature extraction (candidates per second) on the blocked, packed,
// cache_write 1024^3 matmul, model fit time for 64/256/1024 samples, predictions per second.
// The labels are a smooth synthetic function of the tile sizes: this measures speed, not skill.

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "feature/feature.h"
#include "model/cost_model.h"
#include "model/xgboost_model.h"
#include "ops/workload.h"
#include "schedule/strategy_parser.h"

namespace {

using namespace tessera;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

struct Candidate {
  std::string strategy;
  float label = 0;
};

std::string blocked(int ti, int tj, int tk, bool unroll, bool par) {
  return fmt::format(
      "tile(i, j, {0}, {1}) ; split(k, {2}) ; reorder(i.outer, j.outer, k.outer, i.inner, "
      "k.inner, j.inner) ; vectorize(j.inner) ; pack(B, 1, {1}) ; cache_write(C, j.outer){3}{4}",
      ti, tj, tk, unroll ? " ; unroll(k.inner)" : "", par ? " ; parallel(i.outer)" : "");
}

// The candidate family of the matmul template, with a made-up smooth throughput.
std::vector<Candidate> candidates() {
  std::vector<Candidate> out;
  for (int ti : {4, 8, 16, 32, 64, 128}) {
    for (int tj : {8, 16, 32, 64}) {
      for (int tk : {1, 2, 4, 8, 16}) {
        for (int flags = 0; flags < 4; ++flags) {
          bool unroll = flags & 1, par = flags & 2;
          float y = 1.0f / (1.0f + std::fabs(std::log2(ti) - 5) + std::fabs(std::log2(tj) - 5) +
                            0.5f * std::fabs(std::log2(tk) - 2));
          y *= (par ? 1.0f : 0.5f) * (unroll ? 1.0f : 0.9f);
          out.push_back({blocked(ti, tj, tk, unroll, par), y});
        }
      }
    }
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Cost model benchmark: feature extraction, fit, prediction"};
  int reps = 2000;
  int threads = 1;
  app.add_option("--reps", reps, "Extractions timed per feature kind")->capture_default_str();
  app.add_option("--threads", threads, "Threads for batched extraction and XGBoost")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  OpInstance op = instantiate(parse_workload("matmul:M=1024,N=1024,K=1024"));
  const std::string text = blocked(32, 32, 4, true, true);
  ProgramStrategy strategy = parse_strategy(text);
  Program program = strategy(op.program).program();

  fmt::print("## Feature extraction (matmul 1024^3, `{}`)\n\n", text);
  fmt::print(
      "| kind | length | extract only, 1 thread | rewrite + extract, 1 thread | batched "
      "rewrite + extract, {} threads |\n|---|---|---|---|---|\n",
      threads);
  for (FeatureKind kind : {FeatureKind::kRelation, FeatureKind::kContext}) {
    auto t = Clock::now();
    size_t sink = 0;
    for (int r = 0; r < reps; ++r) sink += extract_features(program, kind).size();
    double extract = reps / seconds_since(t);
    t = Clock::now();
    for (int r = 0; r < reps; ++r) {
      sink += extract_features(strategy(op.program).program(), kind).size();
    }
    double full = reps / seconds_since(t);
    t = Clock::now();
    std::vector<Program> programs(reps);
#pragma omp parallel for num_threads(threads)
    for (int r = 0; r < reps; ++r) programs[r] = strategy(op.program).program();
    sink += extract_features(programs, kind, threads).size();
    double batched = reps / seconds_since(t);
    fmt::print("| {} | {} | {:.0f}/s | {:.0f}/s | {:.0f}/s |\n", feature_kind_name(kind),
               feature_length(kind), extract, full, batched);
    if (sink == 0) fmt::print("(unreachable)\n");
  }

  // Features of the candidate family, cycled to the sample counts.
  std::vector<Candidate> cands = candidates();
  std::vector<Program> programs;
  for (const Candidate& c : cands)
    programs.push_back(parse_strategy(c.strategy)(op.program).program());
  std::vector<std::vector<float>> features =
      extract_features(programs, FeatureKind::kRelation, threads);

  fmt::print("\n## Fit ({} distinct candidates, relation features, cycled; {} XGBoost threads)\n\n",
             cands.size(), threads);
  fmt::print("| model | samples | fit | rounds kept | train recall@8 |\n|---|---|---|---|---|\n");
  std::mt19937_64 rng(1);
  for (auto objective : {XGBoostParams::Objective::kRank, XGBoostParams::Objective::kRegression}) {
    for (size_t n : {64, 256, 1024}) {
      std::vector<std::vector<float>> x;
      std::vector<float> y;
      for (size_t i = 0; i < n; ++i) {
        size_t k = rng() % cands.size();
        x.push_back(features[k]);
        y.push_back(cands[k].label);
      }
      float best = *std::max_element(y.begin(), y.end());
      for (float& v : y) v /= best;
      XGBoostParams p;
      p.objective = objective;
      p.nthread = threads;
      XGBoostModel m(p);
      auto t = Clock::now();
      m.fit(x, y);
      double fit = seconds_since(t);
      fmt::print("| {} | {} | {:.3f} s | {} | {:.2f} |\n", m.name(), n, fit, m.num_rounds(),
                 recall_at_k(m.predict(x), y, 8));
    }
  }

  fmt::print(
      "\n## Prediction (batched: one in-place XGBoost call per batch)\n\n| model | batch | "
      "predictions/s |\n|---|---|---|\n");
  XGBoostParams p;
  p.nthread = threads;
  XGBoostModel m(p);
  std::vector<float> labels;
  for (const Candidate& c : cands) labels.push_back(c.label);
  m.fit(features, labels);
  for (size_t batch : {128, 4096}) {
    std::vector<std::vector<float>> x;
    for (size_t i = 0; i < batch; ++i) x.push_back(features[i % features.size()]);
    int calls = std::max<int>(1, static_cast<int>(40000 / batch));
    auto t = Clock::now();
    size_t sink = 0;
    for (int c = 0; c < calls; ++c) sink += m.predict(x).size();
    fmt::print("| {} ({} trees) | {} | {:.0f} |\n", m.name(), m.num_rounds(), batch,
               sink / seconds_since(t));
  }
  RandomModel random(1);
  std::vector<std::vector<float>> x(4096, features[0]);
  auto t = Clock::now();
  size_t sink = 0;
  for (int c = 0; c < 10; ++c) sink += random.predict(x).size();
  fmt::print("| random | 4096 | {:.0f} |\n", sink / seconds_since(t));
  return 0;
}
