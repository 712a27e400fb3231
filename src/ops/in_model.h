/// What a library kernel needs in a model and not alone: cache hints for weights that come from
/// DRAM there, and are in cache when the kernel is timed by itself.
#pragma once

#include <string>
#include <vector>

#include "ops/workload.h"
#include "schedule/rules.h"
#include "tir/program.h"

namespace tessera {

/// The hints a workload's kernel may take in a model, in order of preference; empty if none.
std::vector<ProgramStrategy> in_model_strategies(const Workload& w);

/// `program` (w's kernel under some strategy) with the first of w's in-model hints that applies
/// and pays on this machine's ISA; `applied` gets its text, or "" when there is none.
Program with_in_model_hints(const Workload& w, Program program, std::string* applied = nullptr);

}  // namespace tessera
