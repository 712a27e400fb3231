/// Compiles a loop program of an operator, checks it against the operator's reference on random
/// inputs, and times it: what `tessera run` and the benchmarks report.
#pragma once

#include <cstdint>
#include <string>

#include "ops/workload.h"
#include "runtime/timer.h"

namespace tessera {

struct EvaluateParams {
  int threads = 0;             // 0: OpenMP's default (all cores)
  int repeat = 5;              // timed repeats; the median is reported
  double min_repeat_ms = 100;  // each repeat runs the kernel at least this long
  uint64_t seed = 42;          // random inputs
  bool check = true;           // compare with the naive reference
  bool time = true;
};

struct Evaluation {
  std::string code;  // the generated C
  bool checked = false;
  bool correct = false;
  double max_abs_err = 0;
  std::string mismatch;  // where the result differs, when it does
  Timing timing;
  double gflops = 0;  // from the median time
  int threads = 0;
};

/// Throws tessera::Error if the program does not compile.
Evaluation evaluate(const OpInstance& op, const Program& program,
                    const EvaluateParams& params = {});

}  // namespace tessera
