/// The text form of loop programs: expressions, statements and whole programs (see parser.h).
#pragma once

#include <string>

#include "te/expr.h"
#include "tir/program.h"
#include "tir/stmt.h"

namespace tessera {

/// One expression with minimal parentheses, e.g. `C[i.outer*4 + 1, j] + 0.5f`.
std::string print_expr(const Expr& e);
/// A statement, one line each, `indent` nesting levels (two spaces per level) deep.
std::string print_stmt(const Stmt& s, int indent = 0);
/// `program NAME(inputs) -> (outputs) { ... }` followed by a newline; parse_program reads it back.
std::string print_program(const Program& p);

/// The literal text of a float constant of type t (float32 or float64), e.g. `0.1f`, `2.0`, `-inf`.
std::string print_float_literal(double value, DType t);

/// Binding strength of a kind's operator in the text form: 1 for `||`, 2 `&&`, 3 `==` `!=`,
/// 4 `<` `<=` `>` `>=`, 5 `+` `-`, 6 `*` `/` `%`, 7 unary `!`, 8 for everything else.
int expr_precedence(ExprKind kind);
/// The infix operator of a binary kind (`+`, `&&`, ...); nullptr for kinds printed as calls.
const char* expr_infix_symbol(ExprKind kind);

}  // namespace tessera
