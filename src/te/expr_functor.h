/// Dispatch over expression kinds (generated from expr_nodes.def): functor, visitor, mutator.
#pragma once

#include "te/error.h"
#include "te/expr.h"

namespace tessera {

template <typename R>
class ExprFunctor {
 public:
  virtual ~ExprFunctor() = default;

  R visit(const Expr& e) {
    switch (e.kind()) {
#define TESSERA_EXPR_NODE(Name) \
  case ExprKind::k##Name:       \
    return visit_(*static_cast<const Name##Node*>(e.get()), e);
#include "te/expr_nodes.def"
    }
    throw_internal("unknown expression kind");
  }

 protected:
  virtual R visit_default(const Expr& e) {
    throw_internal("{} has no case for {}", typeid(*this).name(), expr_kind_name(e.kind()));
  }
#define TESSERA_EXPR_NODE(Name)                           \
  virtual R visit_(const Name##Node&, const Expr& self) { \
    return visit_default(self);                           \
  }
#include "te/expr_nodes.def"
};

/// Visits every sub-expression in pre-order; override a case and call the base to recurse.
class ExprVisitor : public ExprFunctor<void> {
 protected:
  void visit_default(const Expr&) override {}
#define TESSERA_BINARY_NODE(Name) void visit_(const Name##Node& n, const Expr&) override;
#define TESSERA_EXPR_NODE(Name)
#include "te/expr_nodes.def"
  void visit_(const NotNode& n, const Expr&) override;
  void visit_(const SelectNode& n, const Expr&) override;
  void visit_(const CastNode& n, const Expr&) override;
  void visit_(const CallNode& n, const Expr&) override;
  void visit_(const LoadNode& n, const Expr&) override;
  void visit_(const TensorReadNode& n, const Expr&) override;
  void visit_(const ReduceNode& n, const Expr&) override;
};

/// Rebuilds expressions bottom-up; returns the same node when no child changed.
class ExprMutator : public ExprFunctor<Expr> {
 protected:
  Expr visit_default(const Expr& e) override { return e; }
#define TESSERA_BINARY_NODE(Name) Expr visit_(const Name##Node& n, const Expr& self) override;
#define TESSERA_EXPR_NODE(Name)
#include "te/expr_nodes.def"
  Expr visit_(const NotNode& n, const Expr& self) override;
  Expr visit_(const SelectNode& n, const Expr& self) override;
  Expr visit_(const CastNode& n, const Expr& self) override;
  Expr visit_(const CallNode& n, const Expr& self) override;
  Expr visit_(const LoadNode& n, const Expr& self) override;
  Expr visit_(const TensorReadNode& n, const Expr& self) override;
  Expr visit_(const ReduceNode& n, const Expr& self) override;

  /// Mutates each element; true if any changed.
  bool mutate_all(const std::vector<Expr>& in, std::vector<Expr>* out);
};

/// Replaces variables by expressions.
Expr substitute(const Expr& e, const std::vector<std::pair<const VarNode*, Expr>>& map);

/// True if `var` occurs in `e`.
bool uses_var(const Expr& e, const VarNode* var);

}  // namespace tessera
