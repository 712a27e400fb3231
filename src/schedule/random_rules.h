/// Random one-step rules on a program's own loops and buffers: for property tests that check
/// every composition either refuses or preserves semantics, and for random search.
#pragma once

#include <random>

#include "schedule/rules.h"

namespace tessera {

/// A rule chosen uniformly from all rule kinds (every rule of rules.h), with arguments drawn from
/// the loops and buffers of `p` (and small random factors). It may well not apply.
ProgramStrategy random_rule(const Program& p, std::mt19937& rng);

}  // namespace tessera
