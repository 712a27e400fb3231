#include "strategy/stmt_traversal.h"

#include "tir/printer.h"
#include "tir/simplify.h"
#include "tir/stmt_functor.h"
#include "tir/structural_equal.h"

namespace tessera {

namespace {

std::vector<Stmt> children(const Stmt& s) {
  switch (s.kind()) {
    case StmtKind::kFor:
      return {s.as<ForNode>()->body};
    case StmtKind::kAllocate:
      return {s.as<AllocateNode>()->body};
    case StmtKind::kSeq:
      return s.as<SeqNode>()->stmts;
    case StmtKind::kIfThenElse: {
      const auto* n = s.as<IfThenElseNode>();
      if (n->else_case.defined()) return {n->then_case, n->else_case};
      return {n->then_case};
    }
    case StmtKind::kStore:
    case StmtKind::kPrefetch:
      return {};
  }
  return {};
}

Stmt rebuild(const Stmt& s, std::vector<Stmt> c) {
  switch (s.kind()) {
    case StmtKind::kFor: {
      const auto* n = s.as<ForNode>();
      return make_for(n->var, n->min, n->extent, n->for_kind, c[0]);
    }
    case StmtKind::kAllocate:
      return make_allocate(s.as<AllocateNode>()->buffer, c[0]);
    case StmtKind::kSeq:
      return make_seq(std::move(c));
    case StmtKind::kIfThenElse:
      return make_if(s.as<IfThenElseNode>()->cond, c[0], c.size() > 1 ? c[1] : Stmt());
    case StmtKind::kStore:
    case StmtKind::kPrefetch:
      break;
  }
  return s;
}

RewriteResult<Stmt> traverse(TraversalMode mode, const StmtStrategy& strategy, const Stmt& s,
                             RewriteStats* st) {
  return traverse_children<Stmt>(
      mode, strategy, s, children(s), st, [](const Stmt& a, const Stmt& b) { return a.same_as(b); },
      [&s](std::vector<Stmt> c) { return rebuild(s, std::move(c)); });
}

StmtStrategy mark_loop_here(const char* name, ForKind kind) {
  return StmtStrategy(
      name, StmtStrategy::RuleFn([name, kind](const Stmt& s) {
        const auto* f = s.as<ForNode>();
        if (!f) return RewriteResult<Stmt>::not_applicable(name, "not a loop");
        if (f->for_kind != ForKind::kSerial) {
          return RewriteResult<Stmt>::not_applicable(
              name, "loop " + f->var.name() + " is " + for_kind_name(f->for_kind));
        }
        return RewriteResult<Stmt>::success(make_for(f->var, f->min, f->extent, kind, f->body));
      }));
}

}  // namespace

RewriteResult<Stmt> Traversable<Stmt>::all(const StmtStrategy& s, const Stmt& p, RewriteStats* st) {
  return traverse(TraversalMode::kAll, s, p, st);
}
RewriteResult<Stmt> Traversable<Stmt>::one(const StmtStrategy& s, const Stmt& p, RewriteStats* st) {
  return traverse(TraversalMode::kOne, s, p, st);
}
RewriteResult<Stmt> Traversable<Stmt>::some(const StmtStrategy& s, const Stmt& p,
                                            RewriteStats* st) {
  return traverse(TraversalMode::kSome, s, p, st);
}
bool Traversable<Stmt>::equal(const Stmt& a, const Stmt& b) {
  return structural_equal(a, b);
}
std::string Traversable<Stmt>::print(const Stmt& s) {
  return print_stmt(s);
}

StmtStrategy unroll_loop_here() {
  return mark_loop_here("unroll_loop_here", ForKind::kUnrolled);
}
StmtStrategy vectorize_loop_here() {
  return mark_loop_here("vectorize_loop_here", ForKind::kVectorized);
}

StmtStrategy is_loop(const std::string& name) {
  std::string text = "is_loop(" + name + ")";
  return StmtStrategy(text, StmtStrategy::ComposedFn([name, text](const Stmt& s, RewriteStats*) {
                        const auto* f = s.as<ForNode>();
                        if (f && f->var.name() == name) return RewriteResult<Stmt>::success(s);
                        return RewriteResult<Stmt>::not_applicable(text, "not loop " + name);
                      }));
}

StmtStrategy inline_unit_loop() {
  return StmtStrategy("inline_unit_loop", StmtStrategy::RuleFn([](const Stmt& s) {
                        const auto* f = s.as<ForNode>();
                        if (!f || f->extent != 1 || f->for_kind != ForKind::kSerial) {
                          return RewriteResult<Stmt>::not_applicable(
                              "inline_unit_loop", "not a serial loop of one iteration");
                        }
                        return RewriteResult<Stmt>::success(
                            simplify(substitute(f->body, {{f->var.get(), f->min}})));
                      }));
}

Strategy<Program> body(StmtStrategy s) {
  return Strategy<Program>(
      "body(" + s.text() + ")",
      Strategy<Program>::ComposedFn([s](const Program& p, RewriteStats* st) {
        RewriteResult<Stmt> r = s(p.body, st);
        if (r.kind() == RewriteResult<Stmt>::Kind::kInternalError) {
          return RewriteResult<Program>::internal_error(r.strategy(), r.reason());
        }
        if (!r) return RewriteResult<Program>::not_applicable(r.strategy(), r.reason());
        Program out = p;
        out.body = std::move(r).program();
        return RewriteResult<Program>::success(std::move(out));
      }));
}

}  // namespace tessera
