#include <fmt/format.h>

#include "schedule/rules.h"
#include "schedule/stage_tools.h"
#include "te/expr_functor.h"
#include "tir/simplify.h"
#include "tir/stmt_functor.h"

namespace tessera {

namespace {

// Replaces reads of the stage by its defining expression at the read's indices.
class Inliner : public StmtMutator {
 public:
  Inliner(const StageNest& nest, const Buffer& buffer) : nest_(nest), buffer_(buffer) {}

 protected:
  class ExprInliner : public ExprMutator {
   public:
    ExprInliner(const StageNest& nest, const Buffer& buffer) : nest_(nest), buffer_(buffer) {}

   protected:
    using ExprMutator::visit_;
    Expr visit_(const LoadNode& n, const Expr& self) override {
      Expr e = ExprMutator::visit_(n, self);
      const auto* load = e.as<LoadNode>();
      if (load->buffer != buffer_) return e;
      std::vector<std::pair<const VarNode*, Expr>> map;
      for (size_t d = 0; d < nest_.loops.size(); ++d)
        map.emplace_back(nest_.loops[d]->var.get(), load->indices[d]);
      return substitute(nest_.store->value, map);
    }

   private:
    const StageNest& nest_;
    const Buffer& buffer_;
  };

  Expr mutate_expr(const Expr& e) override {
    ExprInliner in(nest_, buffer_);
    return in.visit(e);
  }
  Stmt visit_(const AllocateNode& n, const Stmt& self) override {
    if (n.buffer == buffer_) return visit(n.body);
    return StmtMutator::visit_(n, self);
  }
  using StmtMutator::visit_;

 private:
  const StageNest& nest_;
  const Buffer& buffer_;
};

}  // namespace

ProgramStrategy compute_inline(const std::string& stage) {
  std::string text = fmt::format("compute_inline({})", stage);
  return ProgramStrategy(text, [=](const Program& p) {
    auto fail = [&](const std::string& why) {
      return RewriteResult<Program>::not_applicable(text, why);
    };
    Buffer buffer = find_buffer(p, stage);
    if (!buffer) return fail("no buffer named " + stage);
    if (is_argument(p, buffer))
      return fail(stage + " is an argument of the program, not an intermediate stage");
    auto nest_or = find_stage_nest(p, buffer);
    if (auto* why = std::get_if<std::string>(&nest_or)) return fail(*why);
    const StageNest& nest = std::get<StageNest>(nest_or);
    // The stage computes only part of its buffer; an inlined read outside it would differ.
    for (const ForNode* l : nest.loops) {
      const int64_t* mn = as_const_int(l->min);
      if (!mn) return fail("stage " + stage + " has a loop with a variable start");
    }
    Inliner inliner(nest, buffer);
    Stmt body = inliner.visit(remove_statement(p.body, nest.stmt));
    Program out = p;
    out.body = simplify(body);
    return RewriteResult<Program>::success(std::move(out));
  });
}

}  // namespace tessera
