/// Locations: loop references that are resolved against the program when a rule runs.
#pragma once

#include <string>
#include <variant>

#include "tir/program.h"

namespace tessera {

/// Resolves a loop reference to a loop name. A plain name refers to itself; `@`-references find
/// a loop by its place in a nest:
///   @outermost, @innermost           the outermost/innermost loop of the program's last nest
///   @outermost(S), @innermost(S)     ... of the last nest that writes buffer S (a stage)
///   @loop(n), @loop(S, n)            the n-th loop (0 = outermost) of that nest
/// Descending a nest passes through guards and stops where a body is not a single loop.
/// Returns the name, or (as the second alternative) why nothing was found.
struct Resolved {
  std::string name;
  std::string error;
  bool ok() const { return error.empty(); }
};
Resolved resolve_loop(const Program& p, const std::string& ref);

}  // namespace tessera
