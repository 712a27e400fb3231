// vectorize, unroll and parallel: rules that change only a loop's kind, after a legality check.
#include <fmt/format.h>

#include "schedule/location.h"
#include "schedule/loop_tools.h"
#include "schedule/rules.h"
#include "tir/stmt_functor.h"

namespace tessera {

namespace {

class InnerLoopFinder : public StmtVisitor {
 public:
  bool has_loop = false;
  bool has_alloc = false;
  std::string parallel_loop;

 protected:
  void visit_(const ForNode& n, const Stmt& self) override {
    has_loop = true;
    if (n.for_kind == ForKind::kParallel) parallel_loop = n.var.name();
    StmtVisitor::visit_(n, self);
  }
  void visit_(const AllocateNode& n, const Stmt& self) override {
    has_alloc = true;
    StmtVisitor::visit_(n, self);
  }
  using StmtVisitor::visit_;
};

using Check = std::function<std::optional<std::string>(const LoopSite&)>;

ProgramStrategy annotate(const std::string& rule, const std::string& loop_ref, ForKind kind,
                         Check check) {
  std::string text = fmt::format("{}({})", rule, loop_ref);
  return ProgramStrategy(text, [=](const Program& p) {
    Resolved ref = resolve_loop(p, loop_ref);
    if (!ref.ok()) return RewriteResult<Program>::not_applicable(text, ref.error);
    const std::string& loop = ref.name;
    return rewrite_loop(
        p, text, loop,
        [&](const LoopSite& site) -> std::variant<Stmt, std::string> {
          const ForNode& n = *site.loop;
          if (n.for_kind == kind)
            return fmt::format("loop {} is already {}", loop, for_kind_name(kind));
          if (n.for_kind != ForKind::kSerial) {
            return fmt::format("loop {} is {}, not serial", loop, for_kind_name(n.for_kind));
          }
          if (std::optional<std::string> why = check(site)) return *why;
          return make_for(n.var, n.min, n.extent, kind, n.body);
        },
        Resimplify::kNo);
  });
}

}  // namespace

ProgramStrategy vectorize(const std::string& loop) {
  return annotate("vectorize", loop, ForKind::kVectorized,
                  [](const LoopSite& site) -> std::optional<std::string> {
                    InnerLoopFinder f;
                    f.visit(site.loop->body);
                    if (f.has_loop || f.has_alloc)
                      return "loop " + site.loop->var.name() + " is not innermost";
                    return iteration_conflict(*site.loop);
                  });
}

ProgramStrategy unroll(const std::string& loop) {
  return annotate("unroll", loop, ForKind::kUnrolled, [](const LoopSite&) { return std::nullopt; });
}

ProgramStrategy parallel(const std::string& loop) {
  return annotate(
      "parallel", loop, ForKind::kParallel, [](const LoopSite& site) -> std::optional<std::string> {
        for (const ForNode* outer : site.enclosing) {
          if (outer->for_kind == ForKind::kParallel) {
            return "loop " + site.loop->var.name() + " is inside parallel loop " +
                   outer->var.name();
          }
        }
        InnerLoopFinder f;
        f.visit(site.loop->body);
        if (!f.parallel_loop.empty()) {
          return "loop " + site.loop->var.name() + " contains parallel loop " + f.parallel_loop;
        }
        return iteration_conflict(*site.loop);
      });
}

}  // namespace tessera
