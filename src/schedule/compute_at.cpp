#include <fmt/format.h>

#include "schedule/location.h"
#include "schedule/loop_tools.h"
#include "schedule/rules.h"
#include "schedule/stage_tools.h"
#include "te/expr_functor.h"
#include "tir/simplify.h"
#include "tir/stmt_functor.h"

namespace tessera {

namespace {

class LoadCounter : public StmtVisitor {
 public:
  explicit LoadCounter(const Buffer& b) : buffer_(b) {}
  int loads = 0;

 protected:
  class Loads : public ExprVisitor {
   public:
    Loads(const Buffer& b, int& n) : buffer_(b), n_(n) {}

   protected:
    using ExprVisitor::visit_;
    void visit_(const LoadNode& l, const Expr& self) override {
      n_ += l.buffer == buffer_;
      ExprVisitor::visit_(l, self);
    }

   private:
    const Buffer& buffer_;
    int& n_;
  };
  void visit_expr(const Expr& e) override {
    Loads l(buffer_, loads);
    l.visit(e);
  }

 private:
  const Buffer& buffer_;
};

class BuffersStored : public StmtVisitor {
 public:
  std::vector<Buffer> buffers;

 protected:
  void visit_(const StoreNode& n, const Stmt& self) override {
    buffers.push_back(n.buffer);
    StmtVisitor::visit_(n, self);
  }
  using StmtVisitor::visit_;
};

class BuffersLoaded : public StmtVisitor {
 public:
  std::vector<Buffer> buffers;

 protected:
  class Loads : public ExprVisitor {
   public:
    explicit Loads(std::vector<Buffer>& out) : out_(out) {}

   protected:
    using ExprVisitor::visit_;
    void visit_(const LoadNode& l, const Expr& self) override {
      out_.push_back(l.buffer);
      ExprVisitor::visit_(l, self);
    }

   private:
    std::vector<Buffer>& out_;
  };
  void visit_expr(const Expr& e) override {
    Loads l(buffers);
    l.visit(e);
  }
};

// Prepends `nest` to the body of the loop named `name`, and gives the stage storage of its own
// inside the loop: just the box one iteration uses, at indices shifted by `offset`. Each
// iteration then owns its copy (so the loop can still run in parallel) and it stays in cache.
class PrependToLoop : public StmtMutator {
 public:
  PrependToLoop(const std::string& name, Stmt nest, const Buffer& global, Buffer local,
                std::vector<Expr> offset)
      : name_(name),
        nest_(std::move(nest)),
        global_(global),
        local_(std::move(local)),
        offset_(std::move(offset)) {}
  bool done = false;

 protected:
  Stmt visit_(const ForNode& n, const Stmt& self) override {
    if (n.var.name() != name_) return StmtMutator::visit_(n, self);
    done = true;
    Stmt body = redirect_buffer(make_seq({nest_, n.body}), global_, local_, offset_);
    return make_for(n.var, n.min, n.extent, n.for_kind, make_allocate(local_, body));
  }
  using StmtMutator::visit_;

 private:
  const std::string& name_;
  Stmt nest_;
  const Buffer& global_;
  Buffer local_;
  std::vector<Expr> offset_;
};

}  // namespace

ProgramStrategy compute_at(const std::string& stage, const std::string& loop_ref) {
  std::string text = fmt::format("compute_at({}, {})", stage, loop_ref);
  return ProgramStrategy(text, [=](const Program& p) {
    auto fail = [&](const std::string& why) {
      return RewriteResult<Program>::not_applicable(text, why);
    };
    Resolved ref = resolve_loop(p, loop_ref);
    if (!ref.ok()) return fail(ref.error);
    Buffer buffer = find_buffer(p, stage);
    if (!buffer) return fail("no buffer named " + stage);
    if (is_argument(p, buffer))
      return fail(stage + " is an argument of the program, not an intermediate stage");
    auto nest_or = find_stage_nest(p, buffer);
    if (auto* why = std::get_if<std::string>(&nest_or)) return fail(*why);
    const StageNest& nest = std::get<StageNest>(nest_or);
    const ForNode* at = find_loop(p, ref.name);
    if (!at) return fail("no loop named " + ref.name);
    for (const ForNode* l : nest.loops) {
      if (l == at) return fail("loop " + ref.name + " belongs to stage " + stage);
    }

    // Every read of the stage must happen inside the loop, where it will be computed.
    LoadCounter inside(buffer), everywhere(buffer);
    inside.visit(at->body);
    everywhere.visit(p.body);
    if (inside.loads == 0)
      return fail(fmt::format("the body of {} does not read {}", ref.name, stage));
    if (inside.loads != everywhere.loads)
      return fail(fmt::format("{} is also read outside {}", stage, ref.name));

    if (allocated_inside(at->body, buffer))
      return fail(fmt::format("{} is allocated inside {}", stage, ref.name));
    auto box_or = access_box(*at, buffer, true, false);
    if (auto* why = std::get_if<std::string>(&box_or)) return fail(*why);
    const AccessBox& box = std::get<AccessBox>(box_or);

    // The producer runs later than before: what it reads must not be written in between, which
    // holds when nothing but the producer writes it.
    BuffersLoaded reads;
    reads.visit(nest.stmt);
    BuffersStored writes;
    writes.visit(p.body);
    for (const Buffer& r : reads.buffers) {
      for (const Buffer& w : writes.buffers) {
        if (r == w && r != buffer)
          return fail(fmt::format("stage {} reads {}, which the program writes", stage, r->name));
      }
    }

    // The producer nest over the box, guarded to the region it computed before.
    Stmt body = make_store(buffer, nest.store->indices, nest.store->value);
    std::vector<Expr> vars;
    Expr guard;
    for (size_t d = 0; d < nest.loops.size(); ++d) {
      const ForNode* l = nest.loops[d];
      Expr c = Expr(l->var) >= l->min && Expr(l->var) < l->min + make_int(l->extent);
      guard = guard.defined() ? (guard && c) : c;
    }
    body = make_if(guard, body);
    for (size_t d = nest.loops.size(); d-- > 0;) {
      const ForNode* l = nest.loops[d];
      body = make_for(l->var, box.base[d] + make_int(box.lo[d]), box.extent[d], l->for_kind, body);
    }
    Stmt without = remove_allocation(remove_statement(p.body, nest.stmt), buffer);
    std::vector<Expr> offset;
    for (size_t d = 0; d < box.base.size(); ++d)
      offset.push_back(simplify(box.base[d] + make_int(box.lo[d])));
    PrependToLoop insert(ref.name, body, buffer, make_buffer(stage, buffer->dtype, box.extent),
                         offset);
    Stmt result = insert.visit(without);
    if (!insert.done) return fail("loop " + ref.name + " is inside stage " + stage);
    Program out = p;
    out.body = simplify(result);
    return RewriteResult<Program>::success(std::move(out));
  });
}

}  // namespace tessera
