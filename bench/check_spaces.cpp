// The long version of the space correctness test: for every operator, random shapes and random
// configurations of its search space, each compiled, run on two threads and compared with the
// operator's naive reference. Prints every mismatch; exits 1 if there was one.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <iostream>
#include <random>

#include "ops/evaluate.h"
#include "ops/templates.h"
#include "te/error.h"

int main(int argc, char** argv) {
  using namespace tessera;
  CLI::App app{"random configurations of every operator's space against the naive reference"};
  int shapes = 6, configs = 10;
  unsigned seed = 1;
  app.add_option("--shapes", shapes, "Random shapes per operator");
  app.add_option("--configs", configs, "Random configurations per shape");
  app.add_option("--seed", seed);
  CLI11_PARSE(app, argc, argv);

  std::mt19937_64 rng(seed);
  auto dim = [&](int lo, int hi) {
    return lo + static_cast<int>(rng() % static_cast<unsigned>(hi - lo + 1));
  };
  // One random workload of each operator with a space.
  const std::vector<std::function<std::string()>> makers = {
      [&] { return fmt::format("matmul:M={},N={},K={}", dim(1, 40), dim(1, 70), dim(1, 30)); },
      [&] { return fmt::format("dense:B={},I={},O={}", dim(1, 9), dim(1, 40), dim(1, 70)); },
      [&] {
        return fmt::format("batch_matmul:B={},M={},N={},K={}", dim(1, 3), dim(1, 20), dim(1, 40),
                           dim(1, 20));
      },
      [&] {
        int k = dim(1, 3), d = dim(1, 2), span = (k - 1) * d + 1, g = dim(1, 2);
        return fmt::format("conv2d:N=1,C={},H={},W={},O={},K={},S={},P={},D={},G={}", g * dim(1, 4),
                           dim(span, 12), dim(span, 12), g * dim(1, 20), k, dim(1, 2), dim(0, 2), d,
                           g);
      },
      [&] {
        return fmt::format("conv2d_bias_relu:N=1,C={},H={},W={},O={},K=3,S={},P=1", dim(1, 4),
                           dim(3, 10), dim(3, 10), dim(1, 20), dim(1, 2));
      },
      [&] {
        int k = dim(1, 3);
        // Multiples of 8 channels also get the channel-block form.
        int c = rng() % 2 ? 8 * dim(1, 4) : dim(1, 6);
        return fmt::format("depthwise_conv2d:N=1,C={},H={},W={},K={},S={},P={}", c, dim(k, 12),
                           dim(k, 20), k, dim(1, 2), dim(0, k - 1));
      },
      [&] {
        int k = dim(1, 3), cb = 4 << (rng() % 3), c = rng() % 3 ? cb * dim(1, 3) : dim(1, 3);
        return fmt::format("conv2d_nchwc:N=1,C={},H={},W={},O={},K={},S={},P={},CB={}", c,
                           dim(k, 12), dim(k, 16), cb * dim(1, 3), k, dim(1, 2), dim(0, k - 1), cb);
      },
      [&] {
        int k = dim(1, 3), cb = 4 << (rng() % 3);
        return fmt::format("depthwise_conv2d_nchwc:N=1,C={},H={},W={},K={},S={},P={},CB={}",
                           cb * dim(1, 3), dim(k, 12), dim(k, 20), k, dim(1, 2), dim(0, k - 1), cb);
      },
      [&] {
        int k = dim(1, 3);
        return fmt::format("{}:N=1,C={},H={},W={},K={},S={},P={}",
                           rng() % 2 ? "max_pool2d" : "avg_pool2d", dim(1, 5), dim(k, 12),
                           dim(k, 20), k, dim(1, 2), dim(0, k - 1));
      },
      [&] { return fmt::format("softmax:M={},N={}", dim(1, 12), dim(1, 60)); },
      [&] { return fmt::format("bias_add:M={},N={}", dim(1, 12), dim(1, 60)); },
  };
  int checked = 0, refused = 0, wrong = 0;
  for (const auto& make : makers) {
    for (int s = 0; s < shapes; ++s) {
      std::string w = make();
      OpInstance op = instantiate(parse_workload(w));
      ConfigSpace space = space_for(parse_workload(w));
      for (int c = 0; c < configs; ++c) {
        Config config = space.sample(rng);
        ProgramStrategy strategy = space.instantiate(config);
        RewriteResult<Program> r = strategy(op.program);
        if (!r) {
          ++refused;
          continue;
        }
        EvaluateParams params;
        params.time = false;
        params.threads = 2;
        params.seed = rng();
        ++checked;
        try {
          Evaluation ev = evaluate(op, r.program(), params);
          if (ev.correct) continue;
          std::cout << "WRONG " << w << " with " << strategy.text() << ": " << ev.mismatch << "\n";
        } catch (const Error& e) {
          std::cout << "FAILED " << w << " with " << strategy.text() << ": " << e.what() << "\n";
        }
        ++wrong;
      }
    }
  }
  std::cout << fmt::format(
      "{} configurations compiled and checked, {} refused by a rule, {} wrong\n", checked, refused,
      wrong);
  return wrong == 0 ? 0 : 1;
}
