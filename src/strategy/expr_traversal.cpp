#include "strategy/expr_traversal.h"

#include <cmath>
#include <memory>

#include "tir/printer.h"
#include "tir/structural_equal.h"

namespace tessera {

namespace {

std::vector<Expr> children(const Expr& e) {
  switch (e.kind()) {
#define TESSERA_BINARY_NODE(Name) \
  case ExprKind::k##Name:         \
    return {e.as<Name##Node>()->a, e.as<Name##Node>()->b};
#define TESSERA_EXPR_NODE(Name)
#include "te/expr_nodes.def"
    case ExprKind::kNot:
      return {e.as<NotNode>()->a};
    case ExprKind::kSelect: {
      const auto* n = e.as<SelectNode>();
      return {n->cond, n->true_value, n->false_value};
    }
    case ExprKind::kCast:
      return {e.as<CastNode>()->value};
    case ExprKind::kCall:
      return e.as<CallNode>()->args;
    case ExprKind::kLoad:
      return e.as<LoadNode>()->indices;
    case ExprKind::kTensorRead:
      return e.as<TensorReadNode>()->indices;
    case ExprKind::kReduce:
      return {e.as<ReduceNode>()->source};
    case ExprKind::kIntImm:
    case ExprKind::kFloatImm:
    case ExprKind::kVar:
      return {};
  }
  return {};
}

Expr rebuild(const Expr& e, std::vector<Expr> c) {
  switch (e.kind()) {
    case ExprKind::kNot:
      return make_not(c[0]);
    case ExprKind::kSelect:
      return make_select(c[0], c[1], c[2]);
    case ExprKind::kCast:
      return make_cast(e.dtype(), c[0]);
    case ExprKind::kCall:
      return make_call(e.as<CallNode>()->op, std::move(c));
    case ExprKind::kLoad:
      return make_load(e.as<LoadNode>()->buffer, std::move(c));
    case ExprKind::kTensorRead: {
      const auto* n = e.as<TensorReadNode>();
      return Expr(std::make_shared<TensorReadNode>(n->dtype, n->tensor, std::move(c)));
    }
    case ExprKind::kReduce: {
      const auto* n = e.as<ReduceNode>();
      return make_reduce(n->op, c[0], n->axes);
    }
    default:
      return make_binary(e.kind(), c[0], c[1]);  // only binary kinds have two children left
  }
}

RewriteResult<Expr> traverse(TraversalMode mode, const ExprStrategy& s, const Expr& e,
                             RewriteStats* st) {
  return traverse_children<Expr>(
      mode, s, e, children(e), st, [](const Expr& a, const Expr& b) { return a.same_as(b); },
      [&e](std::vector<Expr> c) { return rebuild(e, std::move(c)); });
}

bool is_binary_arith(ExprKind k) {
  return k == ExprKind::kAdd || k == ExprKind::kSub || k == ExprKind::kMul || k == ExprKind::kDiv ||
         k == ExprKind::kMod || k == ExprKind::kMin || k == ExprKind::kMax;
}

bool is_const(const Expr& e, double v) {
  if (const auto* i = e.as<IntImmNode>()) return static_cast<double>(i->value) == v;
  if (const auto* f = e.as<FloatImmNode>()) return f->value == v;
  return false;
}

int64_t floor_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

}  // namespace

RewriteResult<Expr> Traversable<Expr>::all(const ExprStrategy& s, const Expr& e, RewriteStats* st) {
  return traverse(TraversalMode::kAll, s, e, st);
}
RewriteResult<Expr> Traversable<Expr>::one(const ExprStrategy& s, const Expr& e, RewriteStats* st) {
  return traverse(TraversalMode::kOne, s, e, st);
}
RewriteResult<Expr> Traversable<Expr>::some(const ExprStrategy& s, const Expr& e,
                                            RewriteStats* st) {
  return traverse(TraversalMode::kSome, s, e, st);
}
bool Traversable<Expr>::equal(const Expr& a, const Expr& b) {
  return structural_equal(a, b);
}
std::string Traversable<Expr>::print(const Expr& e) {
  return print_expr(e);
}

ExprStrategy fold_constants() {
  return ExprStrategy("fold_constants", ExprStrategy::RuleFn([](const Expr& e) {
                        auto fail = [] {
                          return RewriteResult<Expr>::not_applicable(
                              "fold_constants", "not constant arithmetic or an identity");
                        };
                        if (!is_binary_arith(e.kind())) return fail();
                        std::vector<Expr> c = children(e);
                        const Expr &a = c[0], &b = c[1];
                        ExprKind k = e.kind();
                        const auto *ia = a.as<IntImmNode>(), *ib = b.as<IntImmNode>();
                        const auto *fa = a.as<FloatImmNode>(), *fb = b.as<FloatImmNode>();
                        if (ia && ib) {
                          int64_t x = ia->value, y = ib->value, r = 0;
                          if ((k == ExprKind::kDiv || k == ExprKind::kMod) && y == 0) return fail();
                          switch (k) {
                            case ExprKind::kAdd:
                              r = x + y;
                              break;
                            case ExprKind::kSub:
                              r = x - y;
                              break;
                            case ExprKind::kMul:
                              r = x * y;
                              break;
                            case ExprKind::kDiv:
                              r = floor_div(x, y);
                              break;
                            case ExprKind::kMod:
                              r = x - floor_div(x, y) * y;
                              break;
                            case ExprKind::kMin:
                              r = std::min(x, y);
                              break;
                            default:
                              r = std::max(x, y);
                              break;
                          }
                          return RewriteResult<Expr>::success(make_int(r, e.dtype()));
                        }
                        if (fa && fb && k != ExprKind::kMod) {
                          double x = fa->value, y = fb->value, r = 0;
                          switch (k) {
                            case ExprKind::kAdd:
                              r = x + y;
                              break;
                            case ExprKind::kSub:
                              r = x - y;
                              break;
                            case ExprKind::kMul:
                              r = x * y;
                              break;
                            case ExprKind::kDiv:
                              r = x / y;
                              break;
                            case ExprKind::kMin:
                              r = std::min(x, y);
                              break;
                            default:
                              r = std::max(x, y);
                              break;
                          }
                          return RewriteResult<Expr>::success(make_float(r, e.dtype()));
                        }
                        if ((k == ExprKind::kAdd || k == ExprKind::kSub) && is_const(b, 0)) {
                          return RewriteResult<Expr>::success(a);
                        }
                        if (k == ExprKind::kAdd && is_const(a, 0)) {
                          return RewriteResult<Expr>::success(b);
                        }
                        if ((k == ExprKind::kMul || k == ExprKind::kDiv) && is_const(b, 1)) {
                          return RewriteResult<Expr>::success(a);
                        }
                        if (k == ExprKind::kMul && is_const(a, 1)) {
                          return RewriteResult<Expr>::success(b);
                        }
                        return fail();
                      }));
}

ExprStrategy commute_add() {
  return ExprStrategy(
      "commute_add", ExprStrategy::RuleFn([](const Expr& e) {
        const auto* add = e.as<AddNode>();
        if (!add) {
          return RewriteResult<Expr>::not_applicable("commute_add", "not an addition");
        }
        return RewriteResult<Expr>::success(make_binary(ExprKind::kAdd, add->b, add->a));
      }));
}

}  // namespace tessera
