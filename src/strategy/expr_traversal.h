/// Scalar expressions (`Expr`) as a traversable program type, and small rules on them.
#pragma once

#include <string>

#include "strategy/strategy.h"
#include "strategy/traversal.h"
#include "te/expr.h"

namespace tessera {

using ExprStrategy = Strategy<Expr>;

/// The immediate sub-terms of an expression are its operands: both sides of a binary operator,
/// the operand of `!` and of a cast, condition and branches of a select, the indices of a load
/// or tensor read, the source of a reduction (its axes bind variables and are not sub-terms).
/// Literals and variables are leaves. Rebuilding goes through the validating makers, so a rewrite
/// that makes a node ill-typed is an internal error, not a broken tree.
template <>
struct Traversable<Expr> {
  static RewriteResult<Expr> all(const ExprStrategy& s, const Expr& e, RewriteStats* st);
  static RewriteResult<Expr> one(const ExprStrategy& s, const Expr& e, RewriteStats* st);
  static RewriteResult<Expr> some(const ExprStrategy& s, const Expr& e, RewriteStats* st);
  /// Structural equality (tir/structural_equal.h).
  static bool equal(const Expr& a, const Expr& b);
  static std::string print(const Expr& e);
};

/// At the root: evaluates an operator on two literals (`2 + 3` -> `5`, `0.5f*2.0f` -> `1.0f`) or
/// drops an identity operand (`x + 0`, `0 + x`, `x - 0`, `x*1`, `1*x`, `x/1` -> `x`).
ExprStrategy fold_constants();
/// At the root: `a + b` -> `b + a`.
ExprStrategy commute_add();

}  // namespace tessera
