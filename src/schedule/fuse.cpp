#include <fmt/format.h>

#include "schedule/location.h"
#include "schedule/loop_tools.h"
#include "schedule/rules.h"
#include "tir/stmt_functor.h"

namespace tessera {

ProgramStrategy fuse(const std::string& outer_ref, const std::string& inner_ref) {
  std::string text = fmt::format("fuse({}, {})", outer_ref, inner_ref);
  return ProgramStrategy(text, [=](const Program& p) {
    Resolved ro = resolve_loop(p, outer_ref), ri = resolve_loop(p, inner_ref);
    if (!ro.ok()) return RewriteResult<Program>::not_applicable(text, ro.error);
    if (!ri.ok()) return RewriteResult<Program>::not_applicable(text, ri.error);
    const std::string &outer = ro.name, &inner = ri.name;
    std::string fused_name = outer + "." + inner + ".fused";
    if (has_loop(p, fused_name)) {
      return RewriteResult<Program>::not_applicable(
          text, "a loop named " + fused_name + " exists already");
    }
    return rewrite_loop(
        p, text, outer, [&](const LoopSite& site) -> std::variant<Stmt, std::string> {
          const ForNode& a = *site.loop;
          const auto* b = a.body.as<ForNode>();
          if (!b || b->var.name() != inner) {
            return fmt::format("loop {} is not the only statement in the body of {}", inner, outer);
          }
          if (a.for_kind != ForKind::kSerial || b->for_kind != ForKind::kSerial) {
            return std::string("only serial loops can be fused");
          }
          if (uses_var(b->min, a.var.get())) {
            return fmt::format("the range of {} depends on {}", inner, outer);
          }
          Var fused(fused_name);
          Expr ext_b = make_int(b->extent);
          Stmt body = substitute(b->body, {{a.var.get(), a.min + fused / ext_b},
                                           {b->var.get(), b->min + fused % ext_b}});
          return make_for(fused, make_int(0), a.extent * b->extent, ForKind::kSerial, body);
        });
  });
}

}  // namespace tessera
