// reverse: a loop's iterations in the opposite order. Alternating it between calls that stream
// the same data (a recurrent layer's weights, step after step) starts each call on what the last
// one read most recently, still in cache, where the same order every time meets only what the
// cache evicted first.
#include <fmt/format.h>

#include "schedule/location.h"
#include "schedule/loop_tools.h"
#include "schedule/rules.h"
#include "tir/stmt_functor.h"

namespace tessera {

ProgramStrategy reverse(const std::string& loop_ref) {
  std::string text = fmt::format("reverse({})", loop_ref);
  return ProgramStrategy(text, [=](const Program& p) {
    Resolved ref = resolve_loop(p, loop_ref);
    if (!ref.ok()) return RewriteResult<Program>::not_applicable(text, ref.error);
    const std::string& loop = ref.name;
    return rewrite_loop(p, text, loop,
                        [&](const LoopSite& site) -> std::variant<Stmt, std::string> {
                          const ForNode& n = *site.loop;
                          if (n.for_kind != ForKind::kSerial)
                            return fmt::format("loop {} is {}", loop, for_kind_name(n.for_kind));
                          // Another order is the same computation only when no iteration reads or
                          // adds to what another writes (a reduction's order would change its
                          // rounding).
                          if (std::optional<std::string> why = iteration_conflict(n)) return *why;
                          Expr mirrored = n.min + make_int(n.extent - 1) - n.var;
                          return make_for(n.var, n.min, n.extent, n.for_kind,
                                          substitute(n.body, {{n.var.get(), mirrored}}));
                        });
  });
}

}  // namespace tessera
