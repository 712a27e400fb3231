/// The one-step loop rules, as strategies on loop programs. Each checks its own legality and,
/// where it does not apply, says so (naming itself and the reason) instead of changing the program.
#pragma once

#include <string>
#include <vector>

#include "strategy/strategy.h"
#include "tir/program.h"

namespace tessera {

using ProgramStrategy = Strategy<Program>;

/// for x in [0, n) -> for x.outer in [0, ceil(n/f)) for x.inner in [0, f), guarded when f does not
/// divide n.
ProgramStrategy split(const std::string& loop, int64_t factor);
/// Permutes the named loops among their positions in one perfect nest (others stay in place).
ProgramStrategy reorder(const std::vector<std::string>& loops);
/// for a for b -> for a.b.fused in [0, |a|*|b|); b must be a's only child.
ProgramStrategy fuse(const std::string& outer, const std::string& inner);
/// Marks an innermost loop vectorized; fails if iterations may depend on each other.
ProgramStrategy vectorize(const std::string& loop);
/// Marks a loop fully unrolled.
ProgramStrategy unroll(const std::string& loop);
/// Runs a loop's iterations on threads; fails on dependences or inside another parallel loop.
ProgramStrategy parallel(const std::string& loop);

}  // namespace tessera
