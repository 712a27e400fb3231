/// Dispatch over statement kinds (generated from stmt_nodes.def): functor, visitor, mutator.
#pragma once

#include "te/error.h"
#include "te/expr_functor.h"
#include "tir/stmt.h"

namespace tessera {

template <typename R>
class StmtFunctor {
 public:
  virtual ~StmtFunctor() = default;

  R visit(const Stmt& s) {
    switch (s.kind()) {
#define TESSERA_STMT_NODE(Name) \
  case StmtKind::k##Name:       \
    return visit_(*static_cast<const Name##Node*>(s.get()), s);
#include "tir/stmt_nodes.def"
    }
    throw_internal("unknown statement kind");
  }

 protected:
#define TESSERA_STMT_NODE(Name) virtual R visit_(const Name##Node& n, const Stmt& self) = 0;
#include "tir/stmt_nodes.def"
};

/// Visits every statement and, through visit_expr, every expression in it.
class StmtVisitor : public StmtFunctor<void> {
 protected:
  virtual void visit_expr(const Expr&) {}
  void visit_(const ForNode& n, const Stmt& self) override;
  void visit_(const StoreNode& n, const Stmt& self) override;
  void visit_(const AllocateNode& n, const Stmt& self) override;
  void visit_(const SeqNode& n, const Stmt& self) override;
  void visit_(const IfThenElseNode& n, const Stmt& self) override;
  void visit_(const PrefetchNode& n, const Stmt& self) override;
};

/// Rebuilds statements; untouched subtrees stay shared (the same node is returned).
class StmtMutator : public StmtFunctor<Stmt> {
 protected:
  virtual Expr mutate_expr(const Expr& e) { return e; }
  /// mutate_expr of each index; sets *changed if any came back different.
  std::vector<Expr> mutate_indices(const std::vector<Expr>& indices, bool* changed);
  Stmt visit_(const ForNode& n, const Stmt& self) override;
  Stmt visit_(const StoreNode& n, const Stmt& self) override;
  Stmt visit_(const AllocateNode& n, const Stmt& self) override;
  Stmt visit_(const SeqNode& n, const Stmt& self) override;
  Stmt visit_(const IfThenElseNode& n, const Stmt& self) override;
  Stmt visit_(const PrefetchNode& n, const Stmt& self) override;
};

/// Replaces variables everywhere in a statement.
Stmt substitute(const Stmt& s, const std::vector<std::pair<const VarNode*, Expr>>& map);
/// Replaces one buffer by another (same shape) in loads and stores.
Stmt replace_buffer(const Stmt& s, const Buffer& from, const Buffer& to);
/// True if `var` occurs anywhere in `s`.
bool uses_var(const Stmt& s, const VarNode* var);

}  // namespace tessera
