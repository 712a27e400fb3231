/// Helpers shared by the tests: random inputs and comparison against references.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "ops/workload.h"
#include "tir/interpreter.h"
#include "tir/program.h"

namespace tessera::testing {

/// One array per argument of p: inputs random in [-1, 1] (integers in [-5, 5]), outputs NaN.
inline std::vector<std::vector<double>> random_args(const Program& p, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> real(-1.0, 1.0);
  std::uniform_int_distribution<int> integer(-5, 5);
  std::vector<std::vector<double>> args;
  for (const Buffer& b : p.inputs) {
    std::vector<double> v(b->num_elements());
    for (double& x : v) {
      x = is_float(b->dtype) ? real(rng) : integer(rng);
      if (b->dtype == DType::kFloat32) x = static_cast<float>(x);
    }
    args.push_back(std::move(v));
  }
  for (const Buffer& b : p.outputs) args.emplace_back(b->num_elements(), std::nan(""));
  return args;
}

/// Element-wise closeness of the outputs (the last `outputs` arrays).
inline ::testing::AssertionResult outputs_close(const std::vector<std::vector<double>>& actual,
                                                const std::vector<std::vector<double>>& expected,
                                                size_t outputs, double tol = 1e-4) {
  for (size_t a = actual.size() - outputs; a < actual.size(); ++a) {
    if (actual[a].size() != expected[a].size())
      return ::testing::AssertionFailure() << "size differs";
    for (size_t i = 0; i < actual[a].size(); ++i) {
      double x = actual[a][i], y = expected[a][i];
      if (!(std::abs(x - y) <= tol * (1 + std::abs(y)))) {
        return ::testing::AssertionFailure()
               << "output " << a << " element " << i << ": got " << x << ", expected " << y;
      }
    }
  }
  return ::testing::AssertionSuccess();
}

/// Interprets `p` on seeded random inputs and compares it with the operator's naive reference.
inline ::testing::AssertionResult interpreter_matches_reference(const OpInstance& op,
                                                                const Program& p,
                                                                uint64_t seed = 1) {
  auto expected = random_args(op.program, seed);
  auto actual = expected;
  op.reference(expected);
  try {
    interpret(p, actual);
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure() << "interpreter: " << e.what();
  }
  return outputs_close(actual, expected, p.outputs.size());
}

}  // namespace tessera::testing
