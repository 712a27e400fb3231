#include "tir/stmt_functor.h"

namespace tessera {

void StmtVisitor::visit_(const ForNode& n, const Stmt&) {
  visit_expr(n.min);
  visit(n.body);
}
void StmtVisitor::visit_(const StoreNode& n, const Stmt&) {
  for (const Expr& i : n.indices) visit_expr(i);
  visit_expr(n.value);
}
void StmtVisitor::visit_(const AllocateNode& n, const Stmt&) {
  visit(n.body);
}
void StmtVisitor::visit_(const SeqNode& n, const Stmt&) {
  for (const Stmt& s : n.stmts) visit(s);
}
void StmtVisitor::visit_(const IfThenElseNode& n, const Stmt&) {
  visit_expr(n.cond);
  visit(n.then_case);
  if (n.else_case.defined()) visit(n.else_case);
}
void StmtVisitor::visit_(const PrefetchNode& n, const Stmt&) {
  for (const Expr& i : n.indices) visit_expr(i);
}

Stmt StmtMutator::visit_(const ForNode& n, const Stmt& self) {
  Expr mn = mutate_expr(n.min);
  Stmt body = visit(n.body);
  if (mn.same_as(n.min) && body.same_as(n.body)) return self;
  return make_for(n.var, mn, n.extent, n.for_kind, body);
}
std::vector<Expr> StmtMutator::mutate_indices(const std::vector<Expr>& indices, bool* changed) {
  std::vector<Expr> idx;
  for (const Expr& i : indices) {
    idx.push_back(mutate_expr(i));
    *changed |= !idx.back().same_as(i);
  }
  return idx;
}
Stmt StmtMutator::visit_(const StoreNode& n, const Stmt& self) {
  bool changed = false;
  std::vector<Expr> idx = mutate_indices(n.indices, &changed);
  Expr v = mutate_expr(n.value);
  if (!changed && v.same_as(n.value)) return self;
  return make_store(n.buffer, std::move(idx), v);
}
Stmt StmtMutator::visit_(const AllocateNode& n, const Stmt& self) {
  Stmt body = visit(n.body);
  return body.same_as(n.body) ? self : make_allocate(n.buffer, body);
}
Stmt StmtMutator::visit_(const SeqNode& n, const Stmt& self) {
  bool changed = false;
  std::vector<Stmt> out;
  for (const Stmt& s : n.stmts) {
    out.push_back(visit(s));
    changed |= !out.back().same_as(s);
  }
  return changed ? make_seq(std::move(out)) : self;
}
Stmt StmtMutator::visit_(const IfThenElseNode& n, const Stmt& self) {
  Expr c = mutate_expr(n.cond);
  Stmt t = visit(n.then_case);
  Stmt e = n.else_case.defined() ? visit(n.else_case) : Stmt();
  if (c.same_as(n.cond) && t.same_as(n.then_case) && e.same_as(n.else_case)) return self;
  return make_if(c, t, e);
}
Stmt StmtMutator::visit_(const PrefetchNode& n, const Stmt& self) {
  bool changed = false;
  std::vector<Expr> idx = mutate_indices(n.indices, &changed);
  return changed ? make_prefetch(n.buffer, std::move(idx)) : self;
}

namespace {

class StmtSubstituter : public StmtMutator {
 public:
  explicit StmtSubstituter(const std::vector<std::pair<const VarNode*, Expr>>& map) : map_(map) {}

 protected:
  Expr mutate_expr(const Expr& e) override { return substitute(e, map_); }

 private:
  const std::vector<std::pair<const VarNode*, Expr>>& map_;
};

class BufferReplacer : public StmtMutator {
 public:
  BufferReplacer(const Buffer& from, const Buffer& to) : from_(from), to_(to) {}

 protected:
  class LoadReplacer : public ExprMutator {
   public:
    LoadReplacer(const Buffer& from, const Buffer& to) : from_(from), to_(to) {}

   protected:
    using ExprMutator::visit_;
    Expr visit_(const LoadNode& n, const Expr& self) override {
      Expr e = ExprMutator::visit_(n, self);
      const auto* load = e.as<LoadNode>();
      return load->buffer == from_ ? make_load(to_, load->indices) : e;
    }

   private:
    const Buffer& from_;
    const Buffer& to_;
  };

  Expr mutate_expr(const Expr& e) override {
    LoadReplacer r(from_, to_);
    return r.visit(e);
  }
  Stmt visit_(const StoreNode& n, const Stmt& self) override {
    Stmt s = StmtMutator::visit_(n, self);
    const auto* store = s.as<StoreNode>();
    return store->buffer == from_ ? make_store(to_, store->indices, store->value) : s;
  }
  Stmt visit_(const PrefetchNode& n, const Stmt& self) override {
    Stmt s = StmtMutator::visit_(n, self);
    const auto* p = s.as<PrefetchNode>();
    return p->buffer == from_ ? make_prefetch(to_, p->indices) : s;
  }
  using StmtMutator::visit_;

 private:
  const Buffer& from_;
  const Buffer& to_;
};

class StmtVarFinder : public StmtVisitor {
 public:
  explicit StmtVarFinder(const VarNode* v) : var_(v) {}
  bool found = false;

 protected:
  void visit_expr(const Expr& e) override { found = found || uses_var(e, var_); }

 private:
  const VarNode* var_;
};

}  // namespace

Stmt substitute(const Stmt& s, const std::vector<std::pair<const VarNode*, Expr>>& map) {
  if (map.empty()) return s;
  StmtSubstituter sub(map);
  return sub.visit(s);
}

Stmt replace_buffer(const Stmt& s, const Buffer& from, const Buffer& to) {
  BufferReplacer r(from, to);
  return r.visit(s);
}

bool uses_var(const Stmt& s, const VarNode* var) {
  StmtVarFinder f(var);
  f.visit(s);
  return f.found;
}

}  // namespace tessera
