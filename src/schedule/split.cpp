#include <fmt/format.h>

#include <algorithm>

#include "schedule/location.h"
#include "schedule/loop_tools.h"
#include "schedule/rules.h"
#include "tir/stmt_functor.h"

namespace tessera {

ProgramStrategy split(const std::string& loop_ref, int64_t factor) {
  std::string text = fmt::format("split({}, {})", loop_ref, factor);
  return ProgramStrategy(text, [=](const Program& p) {
    Resolved ref = resolve_loop(p, loop_ref);
    if (!ref.ok()) return RewriteResult<Program>::not_applicable(text, ref.error);
    const std::string& loop = ref.name;
    if (factor <= 0) {
      return RewriteResult<Program>::not_applicable(
          text, fmt::format("factor {} is not positive", factor));
    }
    if (!has_loop(p, loop))
      return RewriteResult<Program>::not_applicable(text, "no loop named " + loop);
    std::string outer_name = loop + ".outer", inner_name = loop + ".inner";
    for (const std::string& n : {outer_name, inner_name}) {
      if (has_loop(p, n))
        return RewriteResult<Program>::not_applicable(text,
                                                      "a loop named " + n + " exists already");
    }
    return rewrite_loop(
        p, text, loop, [&](const LoopSite& site) -> std::variant<Stmt, std::string> {
          const ForNode& n = *site.loop;
          const bool parallel = n.for_kind == ForKind::kParallel;
          if (n.for_kind != ForKind::kSerial && !parallel) {
            return fmt::format("loop {} is {}; split before annotating", loop,
                               for_kind_name(n.for_kind));
          }
          // A factor past the extent splits off nothing: the inner loop runs the extent itself
          // (split(i, 2147483648) ran 2^31 guarded iterations on 32-bit counters).
          const int64_t factor_used = std::min(factor, n.extent);
          int64_t outer_extent = (n.extent + factor_used - 1) / factor_used;
          Var outer(outer_name), inner(inner_name);
          Expr offset = outer * make_int(factor_used) + inner;
          Stmt body = substitute(n.body, {{n.var.get(), n.min + offset}});
          if (n.extent % factor_used != 0) body = make_if(offset < make_int(n.extent), body);
          Stmt inner_loop = make_for(inner, make_int(0), factor_used, ForKind::kSerial, body);
          return make_for(outer, make_int(0), outer_extent,
                          parallel ? ForKind::kParallel : ForKind::kSerial, inner_loop);
        });
  });
}

}  // namespace tessera
