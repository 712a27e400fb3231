#include "schedule/focus.h"

#include "schedule/location.h"
#include "tir/simplify.h"
#include "tir/stmt_functor.h"

namespace tessera {

namespace {

Strategy<Program> focus(const std::string& text, const std::string& loop_ref, const StmtStrategy& s,
                        bool body_only) {
  return Strategy<Program>(
      text, Strategy<Program>::ComposedFn([=](const Program& p, RewriteStats* stats) {
        Resolved ref = resolve_loop(p, loop_ref);
        if (!ref.ok()) return RewriteResult<Program>::not_applicable(text, ref.error);
        class Apply : public StmtMutator {
         public:
          Apply(const std::string& name, const StmtStrategy& s, bool body_only, RewriteStats* stats)
              : name_(name), s_(s), body_only_(body_only), stats_(stats) {}
          std::optional<RewriteResult<Stmt>> result;

         protected:
          Stmt visit_(const ForNode& n, const Stmt& self) override {
            if (n.var.name() != name_ || result) return StmtMutator::visit_(n, self);
            result = s_(body_only_ ? n.body : self, stats_);
            if (!*result) return self;
            if (!body_only_) return result->program();
            return make_for(n.var, n.min, n.extent, n.for_kind, result->program());
          }
          using StmtMutator::visit_;

         private:
          const std::string& name_;
          const StmtStrategy& s_;
          bool body_only_;
          RewriteStats* stats_;
        } apply(ref.name, s, body_only, stats);
        Stmt body = apply.visit(p.body);
        if (!apply.result)
          return RewriteResult<Program>::not_applicable(text, "no loop named " + ref.name);
        const RewriteResult<Stmt>& r = *apply.result;
        if (r.kind() == RewriteResult<Stmt>::Kind::kInternalError) {
          return RewriteResult<Program>::internal_error(r.strategy(), r.reason());
        }
        if (!r) return RewriteResult<Program>::not_applicable(r.strategy(), r.reason());
        Program out = p;
        out.body = simplify(body);
        return RewriteResult<Program>::success(std::move(out));
      }));
}

}  // namespace

Strategy<Program> on_loop(const std::string& loop, const StmtStrategy& s) {
  return focus("on_loop(" + loop + ", " + s.text() + ")", loop, s, false);
}

Strategy<Program> on_body(const std::string& loop, const StmtStrategy& s) {
  return focus("on_body(" + loop + ", " + s.text() + ")", loop, s, true);
}

StmtStrategy sink_guard() {
  return StmtStrategy(
      "sink_guard", StmtStrategy::RuleFn([](const Stmt& s) {
        const auto* g = s.as<IfThenElseNode>();
        const ForNode* f = g && !g->else_case.defined() ? g->then_case.as<ForNode>() : nullptr;
        if (!f)
          return RewriteResult<Stmt>::not_applicable("sink_guard", "not a guard around a loop");
        return RewriteResult<Stmt>::success(
            make_for(f->var, f->min, f->extent, f->for_kind, make_if(g->cond, f->body)));
      }));
}

Strategy<Program> loop_normal_form() {
  return body(normalize(sink_guard()));
}

}  // namespace tessera
