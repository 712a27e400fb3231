/// Choosing a schedule per kernel, the second of the model's three steps (plan, choose,
/// build): for a library workload, a strategy given for it (the in-model choice), else the
/// records DB's best for this target, else the template's default configuration, else its knobs'
/// first values; then what it needs in a model and not alone (weights prefetched). And the
/// in-model choice itself: profiling the model to keep, per workload, whichever of the tuned
/// configuration, its runners-up and the default ran fastest inside it.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "db/record_db.h"
#include "graph/executor.h"
#include "ops/workload.h"
#include "space/config_space.h"
#include "tir/program.h"

namespace tessera::graph {

struct ChosenSchedule {
  Program program;  // the workload's program with the schedule applied
  KernelInfo info;  // where the schedule came from (uses left 0)
};

class ScheduleChooser {
 public:
  /// Opens params.db (read only) when given.
  explicit ScheduleChooser(const ExecutorParams& params);
  ChosenSchedule choose(const std::string& workload_key) const;

 private:
  ExecutorParams params_;
  mutable std::optional<RecordDb> db_;    // queries prepare statements
  std::vector<std::string> target_keys_;  // model_target_keys(), with a records DB
};

/// Every knob at its first value, except that the outer loop runs in parallel where a
/// `parallel` knob offers it: the fallback for a kernel whose default configuration
/// (ops/templates.h) does not apply.
Config first_values_config(const ConfigSpace& space, bool parallel);

/// The same kernel with its output rows (`j.outer`) in the opposite order, each thread's share
/// reversed in place when the loop is parallel over `threads`, for a step that alternates
/// directions over the same weights; nullopt if the program has no such loop.
std::optional<ProgramStrategy> reversed_order(const Program& program, int threads);

/// With `with_records` compiled from params (params.db set), profiles the model with its tuned
/// kernels, its default ones and each workload's runners-up of the re-timing, in turn, and
/// records in params which workloads run their default (skip_records) or a runner-up
/// (strategies) because it ran faster in the model. Then times the chosen model whole against
/// the untuned one, interleaved, and keeps every default where the chosen one is not faster.
/// Returns the executor of the choice. `log` hears one line per change.
Executor choose_in_model(const Graph& g, ExecutorParams& params, Executor with_records,
                         const std::function<void(const std::string&)>& log = {});

/// The one way from a graph to a compiled model, for `tessera compile`, `tessera run-model` and
/// the library: plan, choose (with the in-model check where records exist and `in_model_check`),
/// build. `params` comes back with the in-model choices made.
Executor compile_model(const Graph& g, ExecutorParams& params, bool in_model_check = false,
                       const std::function<void(const std::string&)>& log = {});

}  // namespace tessera::graph
