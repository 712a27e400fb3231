/// Reads the text form of loop programs written by printer.h back into statements and programs.
#pragma once

#include <string_view>
#include <vector>

#include "te/expr.h"
#include "tir/program.h"
#include "tir/stmt.h"

namespace tessera {

/// Parses `program NAME(A: float32[4, 8], ...) -> (C: float32[4]) { ... }`.
/// Malformed text throws tessera::Error with the message `line L, column C: <what is wrong>`.
Program parse_program(std::string_view text);

/// Parses one expression; names resolve to `vars` (loop variables) and `buffers`.
/// Where names repeat, the later entry wins.
Expr parse_expr(std::string_view text, const std::vector<Var>& vars = {},
                const std::vector<Buffer>& buffers = {});

/// Parses a sequence of statements (as inside a block) with the given names in scope.
Stmt parse_stmt(std::string_view text, const std::vector<Var>& vars = {},
                const std::vector<Buffer>& buffers = {});

}  // namespace tessera
