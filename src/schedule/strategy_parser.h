/// The text form of strategies on loop programs: `split(i, 32) ; vectorize(i.inner)`.
#pragma once

#include <string_view>

#include "schedule/rules.h"

namespace tessera {

/// Parses a strategy expression. Grammar:
///   seq    := choice (';' choice)*
///   choice := atom ('<+' atom)*
///   atom   := 'id' | 'fail' | 'try' '(' seq ')' | 'repeat' '(' seq ')' | '(' seq ')'
///           | RULE '(' arg (',' arg)* ')'
/// with RULE one of split(loop, factor), reorder(loop, ...), fuse(outer, inner), vectorize(loop),
/// unroll(loop), parallel(loop); loops are names such as `i`, `i.outer`, `conv.n`.
/// Throws tessera::Error "column C: ..." on malformed text.
ProgramStrategy parse_strategy(std::string_view text);

}  // namespace tessera
