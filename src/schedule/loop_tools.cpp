#include "schedule/loop_tools.h"

#include <algorithm>
#include <map>

#include "schedule/stage_tools.h"
#include "te/expr_functor.h"
#include "tir/simplify.h"
#include "tir/stmt_functor.h"

namespace tessera {

namespace {

class LoopReplacer : public StmtMutator {
 public:
  LoopReplacer(const std::string& name, const LoopRewrite& rewrite, Resimplify resimplify)
      : name_(name), rewrite_(rewrite), resimplify_(resimplify) {}
  bool found = false;
  std::string failure;

 protected:
  using StmtMutator::visit_;
  Stmt visit_(const ForNode& n, const Stmt& self) override {
    if (n.var.name() == name_ && !found) {
      found = true;
      auto result = rewrite_(LoopSite{&n, self, enclosing_});
      if (auto* reason = std::get_if<std::string>(&result)) {
        failure = *reason;
        return self;
      }
      const Stmt& replacement = std::get<Stmt>(result);
      if (resimplify_ == Resimplify::kNo) return replacement;
      return simplify_in_loops(replacement, enclosing_);
    }
    enclosing_.push_back(&n);
    Stmt out = StmtMutator::visit_(n, self);
    enclosing_.pop_back();
    return out;
  }

 private:
  const std::string& name_;
  const LoopRewrite& rewrite_;
  Resimplify resimplify_;
  std::vector<const ForNode*> enclosing_;
};

class LoopNameCollector : public StmtVisitor {
 public:
  std::vector<std::string> names;

 protected:
  void visit_(const ForNode& n, const Stmt& self) override {
    names.push_back(n.var.name());
    StmtVisitor::visit_(n, self);
  }
  using StmtVisitor::visit_;
};

struct StoreSite {
  const StoreNode* store;
  std::vector<const ForNode*> inner;  // loops between the checked loop and the store
};

class StoreCollector : public StmtVisitor {
 public:
  std::vector<StoreSite> stores;

 protected:
  void visit_(const ForNode& n, const Stmt& self) override {
    loops_.push_back(&n);
    StmtVisitor::visit_(n, self);
    loops_.pop_back();
  }
  void visit_(const StoreNode& n, const Stmt& self) override {
    stores.push_back({&n, loops_});
    StmtVisitor::visit_(n, self);
  }
  using StmtVisitor::visit_;

 private:
  std::vector<const ForNode*> loops_;
};

class LoadCollector : public ExprVisitor {
 public:
  std::vector<const LoadNode*> loads;

 protected:
  using ExprVisitor::visit_;
  void visit_(const LoadNode& n, const Expr& self) override {
    loads.push_back(&n);
    ExprVisitor::visit_(n, self);
  }
};

class StmtLoadCollector : public StmtVisitor {
 public:
  LoadCollector loads;

 protected:
  void visit_expr(const Expr& e) override { loads.visit(e); }
};

Expr flat_index(const Buffer& b, const std::vector<Expr>& indices) {
  Expr flat = make_int(0);
  for (size_t d = 0; d < indices.size(); ++d) {
    flat = flat * make_int(b->shape[d]) + indices[d];
  }
  return simplify(flat);
}

bool same_indices(const std::vector<Expr>& a, const std::vector<Expr>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!same_expr(a[i], b[i]) && !same_expr(simplify(a[i]), simplify(b[i]))) return false;
  }
  return true;
}

// True if the store's elements for different values of `v` are disjoint: the flattened index is
// c*v + f(outer vars) + g(inner vars) with the span of g smaller than |c|.
bool index_is_disjoint(const Expr& index, const StoreSite& site, const VarNode* v) {
  if (!uses_var(index, v)) return false;  // its coefficient is 0: no simplifying needed to say so
  Expr flat = simplify(index);
  std::optional<int64_t> c = affine_coefficient(flat, v);
  if (!c || *c == 0) return false;
  Expr rest = simplify(substitute(flat, {{v, make_int(0)}}));
  RangeMap inner_ranges;
  std::vector<std::pair<const VarNode*, Expr>> inner_zero;
  for (const ForNode* loop : site.inner) {
    const Expr min = simplify(loop->min);
    const int64_t* mn = as_const_int(min);
    if (!mn) return false;  // an inner loop whose range moves with the outer ones
    inner_ranges[loop->var.get()] = {*mn, *mn + loop->extent - 1};
    inner_zero.emplace_back(loop->var.get(), make_int(0));
  }
  // rest = f(outer) + g(inner) holds if rest - rest|inner=0 no longer mentions outer variables.
  Expr inner_part = simplify(rest - substitute(rest, inner_zero));
  std::optional<IntRange> span = bound_of(inner_part, inner_ranges);
  if (!span) return false;
  int64_t mag = *c < 0 ? -*c : *c;
  return span->max - span->min < mag;
}

// The constant divisor E of the first `v / E` or `v % E` in an expression.
class FusedDivisor : public ExprVisitor {
 public:
  explicit FusedDivisor(const VarNode* v) : v_(v) {}
  std::optional<int64_t> divisor;

 protected:
  using ExprVisitor::visit_;
  void visit_(const DivNode& n, const Expr& self) override {
    note(n.a, n.b);
    ExprVisitor::visit_(n, self);
  }
  void visit_(const ModNode& n, const Expr& self) override {
    note(n.a, n.b);
    ExprVisitor::visit_(n, self);
  }

 private:
  void note(const Expr& a, const Expr& b) {
    const int64_t* e = as_const_int(b);
    if (!divisor && e && *e > 1 && a.get() == v_) divisor = *e;
  }
  const VarNode* v_;
};

// A fused loop v over (a, b) indexes one dimension by v / E and another by v % E. Writing
// v = a*E + b: iterations with different a are disjoint if some dimension separates values of a
// without mentioning b; with the same a, if some dimension separates values of b.
bool fused_store_is_disjoint(const StoreSite& site, const ForNode& loop) {
  const VarNode* v = loop.var.get();
  FusedDivisor finder(v);
  for (const Expr& index : site.store->indices) finder.visit(index);
  if (!finder.divisor || loop.extent % *finder.divisor != 0) return false;
  int64_t e = *finder.divisor;
  Var a(v->name + ".hi"), b(v->name + ".lo");
  RangeMap ranges{{a.get(), {0, loop.extent / e - 1}}, {b.get(), {0, e - 1}}};
  std::vector<Expr> split_indices;
  for (const Expr& index : site.store->indices) {
    split_indices.push_back(simplify(substitute(index, {{v, a * make_int(e) + b}}), ranges));
  }
  bool a_separated = false, b_separated = false;
  for (const Expr& index : split_indices) {
    if (!uses_var(index, b.get())) a_separated |= index_is_disjoint(index, site, a.get());
    b_separated |= index_is_disjoint(index, site, b.get());
  }
  return a_separated && b_separated;
}

// Disjoint in one dimension (the common case, and robust to guarded tails), in the flattened
// index, or dimension by dimension over the two halves of a fused loop.
bool store_is_disjoint(const StoreSite& site, const ForNode& loop) {
  const VarNode* v = loop.var.get();
  for (const Expr& index : site.store->indices) {
    if (index_is_disjoint(index, site, v)) return true;
  }
  if (index_is_disjoint(flat_index(site.store->buffer, site.store->indices), site, v)) return true;
  return fused_store_is_disjoint(site, loop);
}

bool reads_stay_in_own_box(const ForNode& loop, const Buffer& buffer) {
  auto stores = access_box(loop, buffer, false, true);
  if (!std::holds_alternative<AccessBox>(stores)) return false;
  if (std::get<AccessBox>(stores).loads == 0) return true;
  auto loads = access_box(loop, buffer, true, false);
  if (!std::holds_alternative<AccessBox>(loads)) return false;
  const AccessBox& s = std::get<AccessBox>(stores);
  const AccessBox& l = std::get<AccessBox>(loads);
  bool disjoint = false;
  for (size_t d = 0; d < s.base.size(); ++d) {
    const Expr difference = simplify(l.base[d] - s.base[d]);
    const int64_t* delta = as_const_int(difference);
    if (!delta) return false;
    int64_t lo = l.lo[d] + *delta;
    if (lo < s.lo[d] || lo + l.extent[d] > s.lo[d] + s.extent[d]) return false;
    std::optional<int64_t> c = affine_coefficient(s.base[d], loop.var.get());
    disjoint |= c && (*c >= s.extent[d] || -*c >= s.extent[d]);
  }
  return disjoint;
}

}  // namespace

RewriteResult<Program> rewrite_loop(const Program& p, const std::string& rule,
                                    const std::string& loop, const LoopRewrite& rewrite,
                                    Resimplify resimplify) {
  LoopReplacer replacer(loop, rewrite, resimplify);
  Stmt body = replacer.visit(p.body);
  if (!replacer.found) return RewriteResult<Program>::not_applicable(rule, "no loop named " + loop);
  if (!replacer.failure.empty())
    return RewriteResult<Program>::not_applicable(rule, replacer.failure);
  Program out = p;
  out.body = body;
  return RewriteResult<Program>::success(std::move(out));
}

std::vector<std::string> loop_names(const Program& p) {
  LoopNameCollector c;
  c.visit(p.body);
  return c.names;
}

bool has_loop(const Program& p, const std::string& name) {
  return find_loop(p, name) != nullptr;
}

// Buffers allocated inside a statement are private to each execution of it.
class AllocCollector : public StmtVisitor {
 public:
  std::vector<const BufferNode*> buffers;
  bool has(const Buffer& b) const {
    return std::find(buffers.begin(), buffers.end(), b.get()) != buffers.end();
  }

 protected:
  void visit_(const AllocateNode& n, const Stmt& self) override {
    buffers.push_back(n.buffer.get());
    StmtVisitor::visit_(n, self);
  }
  using StmtVisitor::visit_;
};

std::optional<std::string> cross_element_dependence(const Stmt& s) {
  StoreCollector stores;
  stores.visit(s);
  StmtLoadCollector loads;
  loads.visit(s);
  AllocCollector local;
  local.visit(s);
  for (const StoreSite& st : stores.stores) {
    if (local.has(st.store->buffer)) continue;
    for (const LoadNode* load : loads.loads.loads) {
      if (load->buffer != st.store->buffer) continue;
      if (!same_indices(load->indices, st.store->indices)) {
        return "buffer " + st.store->buffer->name + " is read at other elements than it is written";
      }
    }
  }
  return std::nullopt;
}

std::optional<std::string> iteration_conflict(const ForNode& loop) {
  StoreCollector stores;
  stores.visit(loop.body);
  AllocCollector local;
  local.visit(loop.body);
  for (const StoreSite& st : stores.stores) {
    if (local.has(st.store->buffer)) continue;
    if (!uses_var(make_load(st.store->buffer, st.store->indices), loop.var.get())) {
      return "every iteration of " + loop.var.name() + " writes the same elements of " +
             st.store->buffer->name + " (a loop-carried dependence)";
    }
    if (!store_is_disjoint(st, loop)) {
      return "cannot prove that iterations of " + loop.var.name() + " write distinct elements of " +
             st.store->buffer->name;
    }
  }
  std::optional<std::string> dependence = cross_element_dependence(loop.body);
  if (!dependence) return std::nullopt;
  // Reads at other elements are still safe when every read of a buffer falls in the box this
  // iteration writes, and the boxes of different iterations are disjoint (caches copied in and
  // out).
  for (const StoreSite& st : stores.stores) {
    if (local.has(st.store->buffer)) continue;
    if (!reads_stay_in_own_box(loop, st.store->buffer)) return dependence;
  }
  return std::nullopt;
}

}  // namespace tessera
