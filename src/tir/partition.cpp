#include "tir/partition.h"

#include "tir/simplify.h"
#include "tir/stmt_functor.h"

namespace tessera {

namespace {

// Guards in `s` whose condition uses `var`, and whether `s` holds a loop.
struct GuardCount {
  int guards = 0;
  bool has_loop = false;
};

GuardCount count_guards(const Stmt& s, const VarNode* var) {
  class Walk : public StmtVisitor {
   public:
    explicit Walk(const VarNode* var) : var_(var) {}
    GuardCount count;

   protected:
    void visit_(const ForNode& n, const Stmt& self) override {
      count.has_loop = true;
      StmtVisitor::visit_(n, self);
    }
    void visit_(const IfThenElseNode& n, const Stmt& self) override {
      count.guards += uses_var(n.cond, var_);
      StmtVisitor::visit_(n, self);
    }
    using StmtVisitor::visit_;

   private:
    const VarNode* var_;
  };
  Walk w(var);
  w.visit(s);
  return w.count;
}

class TailPartitioner : public StmtMutator {
 protected:
  Stmt visit_(const ForNode& n, const Stmt& self) override {
    const Expr min = simplify(n.min, ranges_);
    const int64_t* start = as_const_int(min);
    std::optional<IntRange> min_range = bound_of(n.min, ranges_);
    if (!start || n.for_kind == ForKind::kVectorized || n.extent < 2) {
      return with_range(n, self,
                        min_range ? std::optional<IntRange>(
                                        IntRange{min_range->min, min_range->max + n.extent - 1})
                                  : std::nullopt);
    }
    const VarNode* v = n.var.get();
    const int64_t lo = *start, end = *start + n.extent;
    GuardCount all = count_guards(n.body, v);
    if (all.guards == 0) return with_range(n, self, IntRange{lo, end - 1});
    if (!all.has_loop) {
      if (std::optional<Stmt> shortened = shorten_to_guard(n, lo, end)) return *shortened;
      return with_range(n, self, IntRange{lo, end - 1});
    }
    // Guards left when l runs over [lo, t): a count that can only grow with t.
    auto left = [&](int64_t t) {
      RangeMap r = ranges_;
      r[v] = {lo, t - 1};
      return count_guards(simplify(n.body, r), v).guards;
    };
    const int at_first = left(lo + 1);
    if (at_first == all.guards) return with_range(n, self, IntRange{lo, end - 1});
    int64_t good = lo + 1, bad = end;  // left(good) == at_first; left(bad) > at_first
    if (left(end) == at_first) good = end;
    while (good < end && bad - good > 1) {
      int64_t mid = good + (bad - good) / 2;
      (left(mid) == at_first ? good : bad) = mid;
    }
    RangeMap head = ranges_, tail = ranges_;
    head[v] = {lo, good - 1};
    Stmt full = partition_under(simplify(n.body, head), head);
    if (good == end) return make_for(n.var, n.min, n.extent, n.for_kind, full);
    tail[v] = {good, end - 1};
    Stmt rest = partition_under(n.body, tail);
    return make_for(n.var, n.min, n.extent, n.for_kind,
                    make_if(Expr(n.var) < make_int(good), full, rest));
  }
  using StmtMutator::visit_;

 private:
  Stmt with_range(const ForNode& n, const Stmt& self, std::optional<IntRange> range) {
    RangeMap saved = ranges_;
    if (range) {
      ranges_[n.var.get()] = *range;
    } else {
      ranges_.erase(n.var.get());
    }
    Stmt body = visit(n.body);
    ranges_ = std::move(saved);
    if (body.same_as(n.body)) return self;
    return make_for(n.var, n.min, n.extent, n.for_kind, body);
  }

  // An innermost loop that is one guard holding on its first iterations and failing on the rest
  // (a tile's write-back past the end of a row): those first iterations, unguarded.
  std::optional<Stmt> shorten_to_guard(const ForNode& n, int64_t lo, int64_t end) {
    const auto* guard = n.body.as<IfThenElseNode>();
    if (!guard || guard->else_case.defined()) return std::nullopt;
    const VarNode* v = n.var.get();
    auto holds = [&](int64_t first, int64_t last, int64_t want) {
      RangeMap r = ranges_;
      r[v] = {first, last};
      const Expr cond = simplify(guard->cond, r);
      const int64_t* c = as_const_int(cond);
      return c && (*c != 0) == (want != 0);
    };
    if (!holds(lo, lo, 1)) return std::nullopt;
    int64_t good = lo + 1, bad = end + 1;  // holds on [lo, good); not on [lo, bad)
    while (bad - good > 1) {
      int64_t mid = good + (bad - good) / 2;
      (holds(lo, mid - 1, 1) ? good : bad) = mid;
    }
    if (good < end && !holds(good, end - 1, 0)) return std::nullopt;
    RangeMap head = ranges_;
    head[v] = {lo, good - 1};
    return make_for(n.var, n.min, good - lo, n.for_kind,
                    partition_under(simplify(guard->then_case, head), head));
  }

  Stmt partition_under(const Stmt& s, const RangeMap& ranges) {
    RangeMap saved = ranges_;
    ranges_ = ranges;
    Stmt out = visit(s);
    ranges_ = std::move(saved);
    return out;
  }

  RangeMap ranges_;
};

}  // namespace

Stmt partition_tail_guards(const Stmt& s) {
  TailPartitioner p;
  return p.visit(s);
}

}  // namespace tessera
