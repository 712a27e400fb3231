// The long version of the rule property test: many random compositions of all rules on random
// operator instances; each must refuse or keep the result (interpreter, and compiled every few).
#include <CLI/CLI.hpp>
#include <cmath>
#include <iostream>
#include <random>

#include "ops/evaluate.h"
#include "schedule/random_rules.h"
#include "tir/interpreter.h"

int main(int argc, char** argv) {
  using namespace tessera;
  CLI::App app{"random rule compositions must preserve semantics"};
  int trials = 3000, steps = 8, compile_every = 25;
  unsigned seed = 1;
  app.add_option("--trials", trials);
  app.add_option("--steps", steps, "Rules tried per composition");
  app.add_option("--compile-every", compile_every, "Also compile and run every n-th composition");
  app.add_option("--seed", seed);
  CLI11_PARSE(app, argc, argv);

  std::mt19937 rng(seed);
  auto dim = [&](int lo, int hi) {
    return lo + static_cast<int>(rng() % static_cast<unsigned>(hi - lo + 1));
  };
  int applied = 0, failures = 0;
  for (int t = 0; t < trials; ++t) {
    std::string w;
    switch (t % 4) {
      case 0:
        w = fmt::format("matmul:M={},N={},K={}", dim(1, 24), dim(1, 24), dim(1, 12));
        break;
      case 1: {
        int k = dim(1, 3), p = dim(0, 2);
        w = fmt::format("conv2d:N={},C={},H={},W={},O={},K={},S={},P={}", dim(1, 2), dim(1, 3),
                        dim(k, 9), dim(k, 9), dim(1, 4), k, dim(1, 2), p);
        break;
      }
      case 2:
        w = fmt::format("conv2d_bias_relu:N=1,C={},H={},W={},O={},K=3,S=1,P=1", dim(1, 3),
                        dim(3, 7), dim(3, 7), dim(1, 4));
        break;
      default:
        w = fmt::format("add:M={},N={}", dim(1, 20), dim(1, 40));
        break;
    }
    OpInstance op = instantiate(parse_workload(w));
    Program p = op.program;
    std::string history = "id";
    for (int s = 0; s < steps; ++s) {
      ProgramStrategy rule = random_rule(p, rng);
      RewriteResult<Program> r = rule(p);
      if (r.kind() == RewriteResult<Program>::Kind::kInternalError) {
        std::cout << "INTERNAL " << w << ": " << history << " ; " << r.message() << "\n";
        ++failures;
        break;
      }
      if (!r) continue;
      p = r.program();
      history += " ; " + rule.text();
      ++applied;
    }
    EvaluateParams params;
    params.time = false;
    params.seed = static_cast<uint64_t>(t);
    std::vector<std::vector<double>> expected, actual;
    try {
      if (compile_every > 0 && t % compile_every == 0) {
        Evaluation ev = evaluate(op, p, params);
        if (!ev.correct) throw Error("compiled kernel differs: " + ev.mismatch);
      }
      for (const Buffer& b : p.args()) {
        std::vector<double> v(static_cast<size_t>(b->num_elements()));
        for (double& x : v)
          x = static_cast<float>(std::uniform_real_distribution<double>(-1, 1)(rng));
        expected.push_back(v);
      }
      actual = expected;
      op.reference(expected);
      interpret(p, actual);
      for (size_t a = p.inputs.size(); a < actual.size(); ++a) {
        for (size_t i = 0; i < actual[a].size(); ++i) {
          if (!(std::abs(actual[a][i] - expected[a][i]) <= 1e-4 * (1 + std::abs(expected[a][i])))) {
            throw Error(fmt::format("element {} of {}: {} vs {}", i, p.args()[a]->name,
                                    actual[a][i], expected[a][i]));
          }
        }
      }
    } catch (const std::exception& e) {
      std::cout << "WRONG " << w << ": " << history << ": " << e.what() << "\n";
      ++failures;
    }
  }
  std::cout << fmt::format("{} compositions, {} rule applications, {} failures\n", trials, applied,
                           failures);
  return failures == 0 ? 0 : 1;
}
