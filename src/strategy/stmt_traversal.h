/// Loop-program statements (`Stmt`) as a traversable program type, and small rules on them.
#pragma once

#include <string>

#include "strategy/strategy.h"
#include "strategy/traversal.h"
#include "tir/program.h"
#include "tir/stmt.h"

namespace tessera {

using StmtStrategy = Strategy<Stmt>;

/// The immediate sub-terms of a statement are its sub-statements: a loop's or an allocation's
/// body, the elements of a sequence, the branches of an if (the else branch when present). A
/// store is a leaf; expressions inside statements are not visited (use Traversable<Expr>).
/// Untouched children stay shared. A sequence is rebuilt with make_seq, which flattens a child
/// rewritten into a sequence.
template <>
struct Traversable<Stmt> {
  static RewriteResult<Stmt> all(const StmtStrategy& s, const Stmt& p, RewriteStats* st);
  static RewriteResult<Stmt> one(const StmtStrategy& s, const Stmt& p, RewriteStats* st);
  static RewriteResult<Stmt> some(const StmtStrategy& s, const Stmt& p, RewriteStats* st);
  /// Structural equality (tir/structural_equal.h).
  static bool equal(const Stmt& a, const Stmt& b);
  static std::string print(const Stmt& s);
};

// Examples for the traversals, without legality checks (the real rules are schedule/rules.h):
// they mark a serial loop at the root and fail on anything else.
/// At the root: `for` -> `unrolled for`.
StmtStrategy unroll_loop_here();
/// At the root: `for` -> `vectorized for`.
StmtStrategy vectorize_loop_here();
/// Predicate: succeeds unchanged iff the root is a loop named `name`.
StmtStrategy is_loop(const std::string& name);

/// At the root: `for v in (e)..+1 { body }` (serial) -> body with v replaced by e, simplified.
/// compute_at leaves such loops where one iteration needs one row; without them a store's index
/// says directly which outer iteration writes it (what `parallel` needs to prove rows disjoint).
StmtStrategy inline_unit_loop();

/// Elevate's `body(s)` for loop programs: s on the program's statement.
Strategy<Program> body(StmtStrategy s);

}  // namespace tessera
