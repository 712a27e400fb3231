/// Structural equality and hashing of expressions, statements and programs, up to loop-var
/// renaming.
#pragma once

#include <cstddef>

#include "te/expr.h"
#include "tir/program.h"
#include "tir/stmt.h"

namespace tessera {

// Two trees are equal when they have the same shape, node kinds, dtypes, constants, loop kinds
// and extents. Variables bound by a loop (or a reduce axis) are equal when bound at corresponding
// places, whatever their names; free variables are equal only to themselves. Buffers are equal
// when name, dtype and shape are. NaN constants equal each other; 0.0 and -0.0 differ.
bool structural_equal(const Expr& a, const Expr& b);
bool structural_equal(const Stmt& a, const Stmt& b);
/// Also compares the program name and the input and output buffers.
bool structural_equal(const Program& a, const Program& b);

// Hashes consistent with structural_equal: bound variables hash by binding depth, not by name or
// address, so alpha-renamed trees hash alike. Stable across runs (no pointers are hashed).
size_t structural_hash(const Expr& e);
size_t structural_hash(const Stmt& s);
size_t structural_hash(const Program& p);

}  // namespace tessera
