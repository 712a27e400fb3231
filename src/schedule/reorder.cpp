#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "schedule/location.h"
#include "schedule/loop_tools.h"
#include "schedule/rules.h"
#include "tir/stmt_functor.h"

namespace tessera {

namespace {

// The first loop, in pre-order, whose name is in `names`: the outermost of them.
class FirstLoopFinder : public StmtVisitor {
 public:
  explicit FirstLoopFinder(const std::set<std::string>& names) : names_(names) {}
  std::string found;

 protected:
  void visit_(const ForNode& n, const Stmt& self) override {
    if (!found.empty()) return;
    if (names_.count(n.var.name())) {
      found = n.var.name();
      return;
    }
    StmtVisitor::visit_(n, self);
  }
  using StmtVisitor::visit_;

 private:
  const std::set<std::string>& names_;
};

}  // namespace

ProgramStrategy reorder(const std::vector<std::string>& loop_refs) {
  std::string text = fmt::format("reorder({})", fmt::join(loop_refs, ", "));
  return ProgramStrategy(text, [=](const Program& p) {
    std::vector<std::string> loops;
    for (const std::string& r : loop_refs) {
      Resolved ref = resolve_loop(p, r);
      if (!ref.ok()) return RewriteResult<Program>::not_applicable(text, ref.error);
      loops.push_back(ref.name);
    }
    std::set<std::string> names(loops.begin(), loops.end());
    if (names.size() != loops.size()) {
      return RewriteResult<Program>::not_applicable(text, "a loop is named twice");
    }
    if (loops.empty()) return RewriteResult<Program>::not_applicable(text, "no loops given");
    for (const std::string& n : loops) {
      if (!has_loop(p, n))
        return RewriteResult<Program>::not_applicable(text, "no loop named " + n);
    }
    FirstLoopFinder first(names);
    first.visit(p.body);
    return rewrite_loop(
        p, text, first.found, [&](const LoopSite& site) -> std::variant<Stmt, std::string> {
          // Walk the perfect nest down to the deepest named loop, collecting guards on the way.
          std::vector<const ForNode*> chain;
          std::vector<Expr> guards;
          size_t named_seen = 0;
          Stmt cur = site.stmt;
          while (true) {
            const auto* f = cur.as<ForNode>();
            if (!f) {
              return fmt::format("loops {} are not in one perfect nest (stopped at a {})",
                                 fmt::join(loops, ", "), stmt_kind_name(cur.kind()));
            }
            chain.push_back(f);
            if (names.count(f->var.name()) && ++named_seen == names.size()) break;
            cur = f->body;
            while (const auto* guard = cur.as<IfThenElseNode>()) {
              if (guard->else_case.defined()) break;
              guards.push_back(guard->cond);
              cur = guard->then_case;
            }
          }
          Stmt body = chain.back()->body;
          if (std::optional<std::string> dep = cross_element_dependence(body)) return *dep;

          std::vector<const ForNode*> order = chain;
          size_t next = 0;
          for (auto& slot : order) {
            if (names.count(slot->var.name())) {
              const std::string& want = loops[next++];
              slot = *std::find_if(chain.begin(), chain.end(),
                                   [&](const ForNode* f) { return f->var.name() == want; });
            }
          }
          // A loop whose range depends on another loop must stay inside it.
          for (size_t i = 0; i < order.size(); ++i) {
            for (size_t j = i + 1; j < order.size(); ++j) {
              if (uses_var(order[i]->min, order[j]->var.get())) {
                return fmt::format("the range of {} depends on {}", order[i]->var.name(),
                                   order[j]->var.name());
              }
            }
          }
          // Guards only read loop variables, so moving them innermost keeps their meaning.
          if (!guards.empty()) {
            Expr cond = guards[0];
            for (size_t g = 1; g < guards.size(); ++g) cond = cond && guards[g];
            body = make_if(cond, body);
          }
          for (size_t i = order.size(); i-- > 0;) {
            body =
                make_for(order[i]->var, order[i]->min, order[i]->extent, order[i]->for_kind, body);
          }
          return body;
        });
  });
}

}  // namespace tessera
