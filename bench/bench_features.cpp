// What the cost model's inputs cost: for random configurations of a workload's space, the time
// to apply the configuration's strategy to the loop program and the time to extract the features
// of the result. The search scores thousands of new configurations a batch, so these two are most
// of "model and search" in a tuning run (docs/tuning.md).
//   bench/bench_features [WORKLOAD ...] [--configs N] [--features relation|context|tree]
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>
#include <random>

#include "feature/feature.h"
#include "ops/templates.h"
#include "te/error.h"
#include "tir/structural_equal.h"

int main(int argc, char** argv) {
  using namespace tessera;
  using Clock = std::chrono::steady_clock;
  CLI::App app{"time applying strategies and extracting features per configuration"};
  std::vector<std::string> workloads{
      "matmul:M=1024,N=1024,K=1024", "conv2d_nchwc:N=1,C=128,H=30,W=30,O=128,K=3,S=1,P=0,CB=16",
      "conv2d_nchwc:N=1,C=96,H=14,W=14,O=576,K=1,S=1,P=0,CB=16",
      "depthwise_conv2d_nchwc:N=1,C=144,H=58,W=58,K=3,S=1,P=0,CB=16"};
  int configs = 300;
  unsigned seed = 1;
  std::string features = "relation";
  app.add_option("workloads", workloads, "Workloads whose spaces to sample");
  app.add_option("--configs", configs, "Random configurations per workload");
  app.add_option("--features", features, "relation, context or tree");
  app.add_option("--seed", seed);
  CLI11_PARSE(app, argc, argv);

  try {
    const FeatureKind kind = parse_feature_kind(features);
    std::mt19937_64 rng(seed);
    // The hash of the programs and the sum of their features: a change that makes this faster
    // must leave both as they were.
    fmt::print("{:<66} {:>8} {:>10} {:>10} {:>16} {:>14}\n", "workload", "applied", "apply us",
               "extract us", "programs hash", "feature sum");
    for (const std::string& w : workloads) {
      OpInstance op = instantiate(parse_workload(w));
      ConfigSpace space = space_for(parse_workload(w));
      std::vector<Config> sample;
      for (int i = 0; i < configs; ++i) sample.push_back(space.sample(rng));
      std::vector<Program> programs;
      const auto t0 = Clock::now();
      for (const Config& c : sample) {
        RewriteResult<Program> r = space.instantiate(c)(op.program);
        if (r) programs.push_back(r.program());
      }
      const auto t1 = Clock::now();
      double checksum = 0;
      size_t hash = 0;
      for (const Program& p : programs) {
        hash = hash * 31 + structural_hash(p);
        std::vector<float> f = extract_features(p, kind);
        checksum += std::accumulate(f.begin(), f.end(), 0.0);
      }
      const auto t2 = Clock::now();
      auto us = [](auto d, size_t n) {
        return std::chrono::duration<double, std::micro>(d).count() / static_cast<double>(n);
      };
      fmt::print("{:<66} {:>8} {:>10.1f} {:>10.1f} {:>16x} {:>14.6g}\n", w.substr(0, 66),
                 programs.size(), us(t1 - t0, sample.size()),
                 us(t2 - t1, std::max<size_t>(programs.size(), 1)), hash, checksum);
      if (!std::isfinite(checksum)) throw_error("features of {} are not finite", w);
    }
  } catch (const Error& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return 2;
  }
  return 0;
}
