/// Arithmetic simplification of index expressions: linear canonical forms, floor div/mod by
/// constants under known variable ranges, and guards that ranges prove always true.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <unordered_map>
#include <utility>

#include "te/expr.h"
#include "tir/stmt.h"

namespace tessera {

/// Inclusive integer interval.
struct IntRange {
  int64_t min = 0;
  int64_t max = 0;
};

using RangeMap = std::unordered_map<const VarNode*, IntRange>;

/// Simplifies with the given variable ranges (variables missing from the map are unbounded).
Expr simplify(const Expr& e, const RangeMap& ranges = {});
/// Simplifies every expression of a statement, using the ranges of enclosing loops, and removes
/// guards the ranges prove true.
Stmt simplify(const Stmt& s, const RangeMap& ranges = {});
/// Simplifies a statement that sits inside `enclosing` (outermost first), whose ranges it uses
/// as simplify(Stmt) of the whole program would: for a rewrite that changed one loop nest of an
/// already simplified program, the same result without visiting the rest.
Stmt simplify_in_loops(const Stmt& s, const std::vector<const ForNode*>& enclosing);
/// A bound on an int expression's value, if one follows from the ranges.
std::optional<IntRange> bound_of(const Expr& e, const RangeMap& ranges);

/// An int expression's linear form (a sum of coefficient x atom, plus a constant) in two parts:
/// the terms whose atom `in_first` accepts, and the other terms plus the constant. nullopt unless
/// each part has a term.
std::optional<std::pair<Expr, Expr>> split_linear(const Expr& e,
                                                  const std::function<bool(const Expr&)>& in_first);

/// Structural equality where variables are equal only if they are the same variable.
bool same_expr(const Expr& a, const Expr& b);

/// e = coeff * var + rest, with var nowhere in rest: returns coeff (nullopt if not affine in var).
std::optional<int64_t> affine_coefficient(const Expr& e, const VarNode* var);

}  // namespace tessera
