/// Measuring candidates end to end: (workload, strategy) -> instantiate, apply the strategy,
/// generate C, build (in parallel), run in a worker (one at a time), one MeasureResult each.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "measure/builder.h"
#include "measure/error_kind.h"
#include "measure/runner.h"
#include "measure/target.h"
#include "measure/timing.h"

namespace tessera {

struct MeasureInput {
  std::string workload;  // `op:key=value,...`
  std::string strategy;  // strategy text, e.g. `split(i, 32) ; vectorize(i.inner)`
  /// Hand-written C to build and run instead of the code generated from the strategy (which is
  /// still recorded as given): for measuring a kernel written by hand, and for tests that need
  /// kernels which crash, hang or compute the wrong thing.
  std::optional<std::string> c_source;
};

struct MeasureResult {
  std::string workload;  // canonical text when it parses, else as given
  std::string strategy;  // canonical text when it parses, else as given
  std::string dtype;     // element type of the workload's output ("float32"); "" if unknown
  ErrorKind error = ErrorKind::kOk;
  std::string message;  // empty when ok
  TimingResult timing;  // every repeat (empty unless ok) and the statistics
  double flops = 0;     // of one run of the workload
  double build_seconds = 0;
  double run_seconds = 0;    // wall time in the runner: load, check and timing protocol
  int64_t timestamp_ms = 0;  // Unix time when the measurement finished

  double gflops() const { return timing.median > 0 ? flops / timing.median * 1e-9 : 0; }
};

struct MeasureParams {
  BuildParams build;
  RunParams run;
  /// Time each candidate as it runs in a model: with the in-model cache hints the executor adds
  /// (ops/in_model.h), and once per repeat after its weights and output are flushed, the input
  /// kept in cache. Tuned alone, back to back with every operand in cache, a kernel's best
  /// configuration was often not the fastest in the model. The records go under
  /// Target::in_model().
  bool as_in_model = false;
};

class Measurer {
 public:
  explicit Measurer(MeasureParams params = {});

  /// Measures a batch: builds all, then runs the built ones one after another. Results in input
  /// order; failures are results, never exceptions. progress(stage, done, total) reports
  /// "build" and "run" stages.
  /// `on_result(i, result)` is called once per input as soon as its result is final (a failed
  /// instantiation or build after the builds, a run right after it), so a caller can keep each
  /// one before the rest of the batch runs.
  using ResultFn = std::function<void(size_t index, const MeasureResult& result)>;
  std::vector<MeasureResult> measure(const std::vector<MeasureInput>& inputs,
                                     const ProgressFn& progress = nullptr,
                                     const ResultFn& on_result = nullptr);

  /// The fingerprint of this machine and compiler that results belong to.
  const Target& target() const { return target_; }
  Builder& builder() { return builder_; }
  Runner& runner() { return runner_; }

 private:
  Builder builder_;
  Runner runner_;
  Target target_;
  bool as_in_model_;
};

}  // namespace tessera
