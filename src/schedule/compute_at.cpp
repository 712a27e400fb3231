#include <fmt/format.h>

#include <algorithm>

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

// Appends `nest` to the body of the loop named `name`.
class AppendToLoop : public StmtMutator {
 public:
  AppendToLoop(const std::string& name, Stmt nest) : name_(name), nest_(std::move(nest)) {}
  bool done = false;

 protected:
  Stmt visit_(const ForNode& n, const Stmt& self) override {
    if (n.var.name() != name_) return StmtMutator::visit_(n, self);
    done = true;
    return make_for(n.var, n.min, n.extent, n.for_kind, make_seq({n.body, nest_}));
  }
  using StmtMutator::visit_;

 private:
  const std::string& name_;
  Stmt nest_;
};

// Whether every load of `buffer` in `e` reads it at the nest's loop variables, in order.
bool reads_elementwise(const Expr& e, const Buffer& buffer,
                       const std::vector<const ForNode*>& loops) {
  class Check : public ExprVisitor {
   public:
    Check(const Buffer& b, const std::vector<const ForNode*>& loops) : buffer_(b), loops_(loops) {}
    bool ok = true;

   protected:
    using ExprVisitor::visit_;
    void visit_(const LoadNode& l, const Expr& self) override {
      if (l.buffer == buffer_) {
        ok = ok && l.indices.size() == loops_.size();
        for (size_t d = 0; ok && d < loops_.size(); ++d)
          ok = l.indices[d].as<VarNode>() == loops_[d]->var.get();
      }
      ExprVisitor::visit_(l, self);
    }

   private:
    const Buffer& buffer_;
    const std::vector<const ForNode*>& loops_;
  };
  Check c(buffer, loops);
  c.visit(e);
  return c.ok;
}

// Whether every store to `b` outside loop `at` writes a constant and runs before `at`: a
// reduction's init nest, which only sets the start of the values that `at` then updates.
bool only_constants_before(const Stmt& root, const ForNode* at, const Buffer& b) {
  class Walk : public StmtVisitor {
   public:
    Walk(const ForNode* at, const Buffer& b) : at_(at), b_(b) {}
    bool ok = true;

   protected:
    void visit_(const ForNode& n, const Stmt& self) override {
      if (&n == at_) {
        passed_ = true;
        return;
      }
      StmtVisitor::visit_(n, self);
    }
    void visit_(const StoreNode& n, const Stmt& self) override {
      if (n.buffer == b_) {
        bool constant = n.value.as<IntImmNode>() || n.value.as<FloatImmNode>();
        ok = ok && constant && !passed_;
      }
      StmtVisitor::visit_(n, self);
    }
    using StmtVisitor::visit_;

   private:
    const ForNode* at_;
    const Buffer& b_;
    bool passed_ = false;
  };
  Walk w(at, b);
  w.visit(root);
  return w.ok;
}

// The loops around `at`, outermost first, and whether `later` runs after `at` in program order.
struct Placement {
  std::vector<const ForNode*> around;
  bool later_after_at = false;
};
Placement placement(const Stmt& root, const ForNode* at, const Stmt& later) {
  class Walk : public StmtVisitor {
   public:
    Walk(const ForNode* at, const StmtNode* later) : at_(at), later_(later) {}
    Placement result;

   protected:
    void visit_(const ForNode& n, const Stmt& self) override {
      if (&n == at_) {
        result.around = stack_;
        seen_at_ = true;
        return;
      }
      if (self.get() == later_) {
        result.later_after_at = seen_at_;
        return;
      }
      stack_.push_back(&n);
      StmtVisitor::visit_(n, self);
      stack_.pop_back();
    }
    using StmtVisitor::visit_;

   private:
    const ForNode* at_;
    const StmtNode* later_;
    std::vector<const ForNode*> stack_;
    bool seen_at_ = false;
  };
  Walk w(at, later.get());
  w.visit(root);
  return w.result;
}

// Whether every store to `b` comes before `first` in program order (inside a loop around both,
// before it in the loop's body): values `first` reads from b are then final when it runs, and
// stay so at any later point.
bool written_only_before(const Stmt& root, const Buffer& b, const Stmt& first) {
  class Walk : public StmtVisitor {
   public:
    Walk(const Buffer& b, const Stmt& first) : b_(b), first_(first) {}
    bool ok = true;

   protected:
    void visit_(const ForNode& n, const Stmt& self) override {
      if (self.same_as(first_)) passed_ = true;
      StmtVisitor::visit_(n, self);
    }
    void visit_(const StoreNode& n, const Stmt& self) override {
      if (n.buffer == b_ && passed_) ok = false;
      StmtVisitor::visit_(n, self);
    }
    using StmtVisitor::visit_;

   private:
    const Buffer& b_;
    const Stmt& first_;
    bool passed_ = false;
  };
  Walk w(b, first);
  w.visit(root);
  return w.ok;
}

// Whether buffer `b` exists at loop `at`: an argument, or allocated around it.
bool exists_at(const Stmt& root, const Buffer& b, const ForNode* at) {
  class Walk : public StmtVisitor {
   public:
    Walk(const Buffer& b, const ForNode* at) : b_(b), at_(at) {}
    bool ok = true;

   protected:
    void visit_(const AllocateNode& n, const Stmt& self) override {
      if (n.buffer == b_ && !loop_statement(n.body, at_).defined()) ok = false;
      StmtVisitor::visit_(n, self);
    }
    using StmtVisitor::visit_;

   private:
    const Buffer& b_;
    const ForNode* at_;
  };
  Walk w(b, at);
  w.visit(root);
  return w.ok;
}

int count_stores(const Stmt& s, const Buffer& b) {
  BuffersStored w;
  w.visit(s);
  return static_cast<int>(std::count(w.buffers.begin(), w.buffers.end(), b));
}

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
    // The stage's nests: one plain nest, or a reduction's init and update nests, which move
    // together (the update keeps its whole reduction loop inside the box of one iteration).
    std::vector<Stmt> nests;
    std::vector<std::vector<const ForNode*>> nest_loops;  // the loops over the stage's dims
    std::vector<Stmt> inner;                              // what runs inside them
    auto nest_or = find_stage_nest(p, buffer);
    if (const auto* plain = std::get_if<StageNest>(&nest_or)) {
      nests.push_back(plain->stmt);
      nest_loops.push_back(plain->loops);
      inner.push_back(make_store(buffer, plain->store->indices, plain->store->value));
    } else {
      auto red_or = find_reduction_nests(p, buffer);
      if (auto* why = std::get_if<std::string>(&red_or))
        return fail(std::get<std::string>(nest_or) + "; as a reduction: " + *why);
      const ReductionNests& red = std::get<ReductionNests>(red_or);
      nests = {red.init.stmt, red.update};
      nest_loops = {red.init.loops, red.update_loops};
      inner = {make_store(buffer, red.init.store->indices, red.init.store->value),
               red.reduction_body};
    }
    const ForNode* at = find_loop(p, ref.name);
    if (!at) return fail("no loop named " + ref.name);
    for (const auto& loops : nest_loops) {
      for (const ForNode* l : loops) {
        if (l == at) return fail("loop " + ref.name + " belongs to stage " + stage);
      }
    }
    Stmt without = p.body;
    for (const Stmt& n : nests) without = remove_statement(without, n);

    // Every read of the stage must happen inside the loop, where it will be computed (a
    // reduction's update reads the stage itself: those reads move with it).
    Program rest = p;
    rest.body = without;
    const ForNode* at_in_rest = find_loop(rest, ref.name);
    if (!at_in_rest) return fail("loop " + ref.name + " is inside stage " + stage);
    LoadCounter inside(buffer), everywhere(buffer);
    inside.visit(at_in_rest->body);
    everywhere.visit(without);
    if (inside.loads == 0)
      return fail(fmt::format("the body of {} does not read {}", ref.name, stage));
    if (inside.loads != everywhere.loads)
      return fail(fmt::format("{} is also read outside {}", stage, ref.name));

    if (allocated_inside(at->body, buffer))
      return fail(fmt::format("{} is allocated inside {}", stage, ref.name));
    auto box_or = access_box(*at_in_rest, buffer, true, false);
    if (auto* why = std::get_if<std::string>(&box_or)) return fail(*why);
    const AccessBox& box = std::get<AccessBox>(box_or);

    // The producer runs later than before: what it reads must not be written in between, which
    // holds when every write of it comes before the producer's first nest (an earlier stage).
    for (const Stmt& n : nests) {
      BuffersLoaded reads;
      reads.visit(n);
      for (const Buffer& r : reads.buffers) {
        if (r != buffer && !written_only_before(p.body, r, nests.front()))
          return fail(fmt::format("stage {} reads {}, which the program writes after {} runs",
                                  stage, r->name, stage));
        if (r != buffer && !allocated_inside(n, r) && !exists_at(p.body, r, at))
          return fail(fmt::format("stage {} reads {}, which is allocated where {} is not", stage,
                                  r->name, ref.name));
      }
    }

    // Each nest over the box, guarded to the region it computed before.
    std::vector<Stmt> moved;
    for (size_t n = 0; n < nests.size(); ++n) {
      const std::vector<const ForNode*>& loops = nest_loops[n];
      Expr guard;
      for (const ForNode* l : loops) {
        Expr c = Expr(l->var) >= l->min && Expr(l->var) < l->min + make_int(l->extent);
        guard = guard.defined() ? (guard && c) : c;
      }
      Stmt body = make_if(guard, inner[n]);
      for (size_t d = loops.size(); d-- > 0;) {
        const ForNode* l = loops[d];
        body =
            make_for(l->var, box.base[d] + make_int(box.lo[d]), box.extent[d], l->for_kind, body);
      }
      moved.push_back(body);
    }
    without = remove_allocation(without, buffer);
    std::vector<Expr> offset;
    for (size_t d = 0; d < box.base.size(); ++d)
      offset.push_back(simplify(box.base[d] + make_int(box.lo[d])));
    PrependToLoop insert(ref.name, make_seq(moved), buffer,
                         make_buffer(stage, buffer->dtype, box.extent), offset);
    Stmt result = insert.visit(without);
    if (!insert.done) return fail("loop " + ref.name + " is inside stage " + stage);
    Program out = p;
    out.body = simplify(result);
    return RewriteResult<Program>::success(std::move(out));
  });
}

// The consumer moves into the producer's loop: each iteration finishes a block of the producer and
// then computes the consumer over just that block, while it is still in cache (TVM's
// reverse_compute_at; an epilogue such as bias + relu at a convolution's output tile). Every
// element of the producer is written in some iteration of the loop (a stage covers its domain and
// every store but the init constants is in the loop); its value is final once the last iteration
// writing it has run, and that iteration recomputes the consumer over it last. So blocks that
// overlap, or a reduction loop around the loop, cost time but not correctness.
ProgramStrategy reverse_compute_at(const std::string& stage, const std::string& loop_ref) {
  std::string text = fmt::format("reverse_compute_at({}, {})", stage, loop_ref);
  return ProgramStrategy(text, [=](const Program& p) {
    auto fail = [&](const std::string& why) {
      return RewriteResult<Program>::not_applicable(text, why);
    };
    Resolved ref = resolve_loop(p, loop_ref);
    if (!ref.ok()) return fail(ref.error);
    Buffer consumer = find_buffer(p, stage);
    if (!consumer) return fail("no buffer named " + stage);
    auto nest_or = find_stage_nest(p, consumer);
    if (auto* why = std::get_if<std::string>(&nest_or)) return fail(*why);
    const StageNest& nest = std::get<StageNest>(nest_or);
    const ForNode* at = find_loop(p, ref.name);
    if (!at) return fail("no loop named " + ref.name);
    for (const ForNode* l : nest.loops) {
      if (l == at) return fail("loop " + ref.name + " belongs to stage " + stage);
    }
    if (count_stores(at->body, consumer) > 0)
      return fail(fmt::format("stage {} is inside {} already", stage, ref.name));
    LoadCounter consumer_reads(consumer);
    consumer_reads.visit(at->body);
    if (consumer_reads.loads > 0) return fail(fmt::format("{} reads {}", ref.name, stage));
    Placement place = placement(p.body, at, nest.stmt);
    if (!place.later_after_at) return fail(fmt::format("stage {} runs before {}", stage, ref.name));

    // The producer: the one buffer the stage reads that the loop writes, all of it in the loop.
    BuffersLoaded reads;
    reads.visit(nest.stmt);
    Buffer producer;
    for (const Buffer& r : reads.buffers) {
      if (r == consumer || r == producer) continue;
      int inside = count_stores(at->body, r), all = count_stores(p.body, r);
      if (inside == 0 && all == 0) continue;  // an input: the same wherever it is read
      if (inside == 0)
        return fail(fmt::format("stage {} reads {}, which is written outside {}", stage, r->name,
                                ref.name));
      if (producer)
        return fail(fmt::format("{} writes both {} and {}, which {} reads", ref.name,
                                producer->name, r->name, stage));
      if (inside != all && !only_constants_before(p.body, at, r))
        return fail(
            fmt::format("{} is also written outside {}, after it or not by an init "
                        "constant, so its values are not final there",
                        r->name, ref.name));
      producer = r;
    }
    if (!producer) return fail(fmt::format("{} writes nothing that {} reads", ref.name, stage));
    if (producer->shape != consumer->shape ||
        !reads_elementwise(nest.store->value, producer, nest.loops))
      return fail(fmt::format("{} does not read {} element by element", stage, producer->name));

    auto box_or = access_box(*at, producer, false, true);
    if (auto* why = std::get_if<std::string>(&box_or)) return fail(*why);
    const AccessBox& box = std::get<AccessBox>(box_or);

    // The consumer's nest over the block, guarded to its old region. Its loops count from 0 and
    // the block's start goes into the indices, which keeps them affine in the loops around (so a
    // parallel loop there can still prove its iterations write disjoint elements).
    Expr guard;
    std::vector<Var> offsets;
    std::vector<std::pair<const VarNode*, Expr>> shift;
    for (size_t d = 0; d < nest.loops.size(); ++d) {
      const ForNode* l = nest.loops[d];
      offsets.emplace_back(l->var.name());
      shift.emplace_back(l->var.get(), box.base[d] + make_int(box.lo[d]) + offsets.back());
      Expr c = Expr(l->var) >= l->min && Expr(l->var) < l->min + make_int(l->extent);
      guard = guard.defined() ? (guard && c) : c;
    }
    Stmt body = substitute(
        make_if(guard, make_store(consumer, nest.store->indices, nest.store->value)), shift);
    for (size_t d = nest.loops.size(); d-- > 0;) {
      const ForNode* l = nest.loops[d];
      body = make_for(offsets[d], make_int(0), box.extent[d], l->for_kind, body);
    }
    AppendToLoop append(ref.name, body);
    Stmt result = append.visit(remove_statement(p.body, nest.stmt));
    if (!append.done) return fail("loop " + ref.name + " is inside stage " + stage);
    Program out = p;
    out.body = simplify(result);
    // "The last iteration writing an element recomputes it last" holds in serial order only: a
    // loop on threads, here or around, must still prove its iterations independent.
    place.around.push_back(at);
    for (const ForNode* l : place.around) {
      if (l->for_kind != ForKind::kParallel) continue;
      const ForNode* moved = find_loop(out, l->var.name());
      if (!moved) continue;
      if (auto why = iteration_conflict(*moved))
        return fail(
            fmt::format("{} runs on threads and the stage would make its iterations "
                        "interfere: {}",
                        l->var.name(), *why));
    }
    return RewriteResult<Program>::success(std::move(out));
  });
}

}  // namespace tessera
