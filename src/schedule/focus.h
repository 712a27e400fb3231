/// Applying statement-level strategies at a place in a loop program, and the loop normal form.
#pragma once

#include <string>

#include "strategy/stmt_traversal.h"

namespace tessera {

/// `s` on the loop that `loop` names (a name or an @-location), as a rewrite of the program.
Strategy<Program> on_loop(const std::string& loop, const StmtStrategy& s);
/// `s` on the body of that loop.
Strategy<Program> on_body(const std::string& loop, const StmtStrategy& s);

/// At the root: `if (c) { for v ... { b } }` (no else) -> `for v ... { if (c) { b } }`. The
/// guard cannot mention v, which is bound inside it, so it means the same one level down.
StmtStrategy sink_guard();

/// The loop normal form the rules expect (docs/strategies.md): guards innermost, around the
/// statement they protect. `normalize(sink_guard)` over the whole program.
Strategy<Program> loop_normal_form();

}  // namespace tessera
