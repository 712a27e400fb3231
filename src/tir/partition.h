/// Loop partitioning of split tails, applied before code generation.
#pragma once

#include "tir/stmt.h"

namespace tessera {

/// A split whose factor does not divide the extent leaves a guard deep inside the nest (the
/// register tile's update, a cache's write-back) that every iteration evaluates, and that keeps
/// the vector code and the register accumulators of the full tiles behind a branch. For each loop
/// l whose body holds guards on l and loops, this finds the first iterations [min, t) for which
/// the guards that hold at l = min provably hold throughout, and rewrites the body as
/// `if (l < t) { body with those guards removed } else { body }` (TVM's partition of constant
/// loops; an if rather than two loops, so a parallel l stays one parallel loop). An innermost
/// loop that is one guard, holding on its first iterations and failing on the rest, runs only
/// the first ones, unguarded. The result computes the same values.
Stmt partition_tail_guards(const Stmt& s);

}  // namespace tessera
