#include "measure/measure.h"

#include <algorithm>
#include <chrono>

#include "codegen/codegen_c.h"
#include "ops/in_model.h"
#include "ops/workload.h"
#include "schedule/strategy_parser.h"
#include "te/dtype.h"

namespace tessera {

namespace {

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Fills the canonical names and returns the C source, or sets an instantiation error.
std::optional<std::string> instantiate_candidate(const MeasureInput& in, bool as_in_model,
                                                 MeasureResult& r) {
  r.workload = in.workload;
  r.strategy = in.strategy;
  try {
    Workload w = parse_workload(in.workload);
    r.workload = w.text();
    OpInstance op = instantiate(w);
    r.flops = op.flops;
    if (!op.program.outputs.empty()) r.dtype = dtype_name(op.program.outputs.front()->dtype);
    ProgramStrategy s = parse_strategy(in.strategy);
    r.strategy = s.text();
    RewriteResult<Program> rewritten = s(op.program);
    if (!rewritten) {
      r.error = ErrorKind::kInstantiation;
      r.message = rewritten.message();
      return std::nullopt;
    }
    if (in.c_source) return *in.c_source;
    if (as_in_model) return codegen_c(with_in_model_hints(w, rewritten.program()));
    return codegen_c(rewritten.program());
  } catch (const std::exception& e) {
    r.error = ErrorKind::kInstantiation;
    r.message = e.what();
    return std::nullopt;
  }
}

// One run per repeat, each after the flush, as a model runs a layer once with its weights on
// their way from DRAM; more repeats for the noise of single runs.
RunParams timed_as_in_model(RunParams run) {
  run.timing.number = 1;
  run.timing.min_repeat_ms = 0;
  run.timing.repeat = std::max(run.timing.repeat, 15);
  run.timing.flush_cache = true;
  run.timing.keep_first_cached = true;
  return run;
}

}  // namespace

Measurer::Measurer(MeasureParams params)
    : builder_(std::move(params.build)),
      runner_(params.as_in_model ? timed_as_in_model(std::move(params.run))
                                 : std::move(params.run)),
      target_(params.as_in_model ? detect_target(builder_.params().compile).in_model()
                                 : detect_target(builder_.params().compile)),
      as_in_model_(params.as_in_model) {}

std::vector<MeasureResult> Measurer::measure(const std::vector<MeasureInput>& inputs,
                                             const ProgressFn& progress,
                                             const ResultFn& on_result) {
  auto finish = [&](size_t i, MeasureResult& r) {
    r.timestamp_ms = now_ms();
    if (on_result) on_result(i, r);
  };
  std::vector<MeasureResult> results(inputs.size());
  std::vector<std::string> sources;
  std::vector<size_t> source_of;  // result index of each source
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (auto code = instantiate_candidate(inputs[i], as_in_model_, results[i])) {
      sources.push_back(std::move(*code));
      source_of.push_back(i);
    }
  }
  std::vector<BuildResult> built = builder_.build(sources, progress);
  std::vector<bool> pending(inputs.size(), false);
  for (size_t i : source_of) pending[i] = true;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!pending[i]) finish(i, results[i]);  // did not instantiate
  }

  std::vector<RunInput> runs;
  std::vector<size_t> run_of;
  for (size_t s = 0; s < built.size(); ++s) {
    MeasureResult& r = results[source_of[s]];
    r.build_seconds = built[s].seconds;
    if (built[s].error != ErrorKind::kOk) {
      r.error = built[s].error;
      r.message = built[s].message;
      finish(source_of[s], r);
      continue;
    }
    runs.push_back({r.workload, built[s].library, "tsr_main"});
    run_of.push_back(source_of[s]);
  }
  for (size_t k = 0; k < runs.size(); ++k) {
    RunResult rr = runner_.run(runs[k]);
    MeasureResult& r = results[run_of[k]];
    r.error = rr.error;
    r.message = rr.message;
    r.timing = rr.timing;
    r.run_seconds = rr.seconds;
    finish(run_of[k], r);
    if (progress) progress("run", k + 1, runs.size());
  }
  return results;
}

}  // namespace tessera
