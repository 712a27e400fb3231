/// Helpers shared by the tests: random inputs and comparison against references.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "ops/workload.h"
#include "tir/interpreter.h"
#include "tir/program.h"

namespace tessera::testing {

using tessera::random_args;  // tir/interpreter.h

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
