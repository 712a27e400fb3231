#include "tir/simplify.h"

#include <algorithm>
#include <cmath>
#include <functional>

#include "te/error.h"
#include "te/expr_functor.h"
#include "tir/stmt_functor.h"

namespace tessera {

namespace {

int64_t floor_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}
int64_t floor_mod(int64_t a, int64_t b) {
  return a - floor_div(a, b) * b;
}

// An int expression as sum(coeff * atom) + constant; atoms keep first-appearance order so that
// rebuilt expressions read like the input (`i.outer*32 + i.inner`).
struct Linear {
  struct Term {
    Expr atom;
    int64_t coeff;
  };
  std::vector<Term> terms;
  int64_t constant = 0;

  void add_term(const Expr& atom, int64_t coeff) {
    if (coeff == 0) return;
    if (const int64_t* c = as_const_int(atom)) {
      constant += coeff * *c;
      return;
    }
    for (auto it = terms.begin(); it != terms.end(); ++it) {
      if (same_expr(it->atom, atom)) {
        it->coeff += coeff;
        if (it->coeff == 0) terms.erase(it);
        return;
      }
    }
    terms.push_back({atom, coeff});
  }
  void add(const Linear& o, int64_t scale) {
    for (const Term& t : o.terms) add_term(t.atom, t.coeff * scale);
    constant += o.constant * scale;
  }
  bool is_const() const { return terms.empty(); }
};

// (x / c)*c*k + (x % c)*k folds back into x*k: what split after fuse, or flattening a fused
// index, produces.
bool fold_div_mod_pairs(Linear& l) {
  for (size_t m = 0; m < l.terms.size(); ++m) {
    const auto* mod = l.terms[m].atom.as<ModNode>();
    const int64_t* c = mod ? as_const_int(mod->b) : nullptr;
    if (!c) continue;
    int64_t k = l.terms[m].coeff;
    for (size_t d = 0; d < l.terms.size(); ++d) {
      const auto* div = l.terms[d].atom.as<DivNode>();
      if (!div || l.terms[d].coeff != k * *c || !same_expr(div->b, mod->b) ||
          !same_expr(div->a, mod->a)) {
        continue;
      }
      Expr x = mod->a;
      l.terms.erase(l.terms.begin() + static_cast<long>(std::max(m, d)));
      l.terms.erase(l.terms.begin() + static_cast<long>(std::min(m, d)));
      // x may itself be a sum; the caller re-linearizes the result.
      l.terms.push_back({x, k});
      return true;
    }
  }
  return false;
}

Expr from_linear(const Linear& l) {
  Expr pos;
  auto term_expr = [](const Linear::Term& t, int64_t mag) {
    return mag == 1 ? t.atom : make_binary(ExprKind::kMul, t.atom, make_int(mag));
  };
  for (const Linear::Term& t : l.terms) {
    if (t.coeff > 0) {
      Expr e = term_expr(t, t.coeff);
      pos = pos.defined() ? make_binary(ExprKind::kAdd, pos, e) : e;
    }
  }
  Expr result = pos;
  if (!result.defined()) result = make_int(l.constant);
  for (const Linear::Term& t : l.terms) {
    if (t.coeff < 0) result = make_binary(ExprKind::kSub, result, term_expr(t, -t.coeff));
  }
  if (pos.defined() && l.constant > 0)
    result = make_binary(ExprKind::kAdd, result, make_int(l.constant));
  if (pos.defined() && l.constant < 0)
    result = make_binary(ExprKind::kSub, result, make_int(-l.constant));
  return result;
}

class Simplifier {
 public:
  explicit Simplifier(const RangeMap& ranges) : ranges_(ranges) {}

  // An expression that comes back unchanged is returned as itself, so that simplifying a
  // simplified program shares its nodes instead of rebuilding (and freeing) every statement.
  Expr simplify(const Expr& e) {
    if (e.kind() == ExprKind::kIntImm || e.kind() == ExprKind::kVar) return e;
    Expr out = e.dtype() == DType::kInt32 ? from_linear(canonical(e)) : simplify_other(e);
    return same_expr(out, e) ? e : out;
  }

  std::optional<IntRange> bound(const Linear& l) {
    IntRange r{l.constant, l.constant};
    for (const Linear::Term& t : l.terms) {
      std::optional<IntRange> b = atom_bound(t.atom);
      if (!b) return std::nullopt;
      int64_t lo = t.coeff * b->min, hi = t.coeff * b->max;
      r.min += std::min(lo, hi);
      r.max += std::max(lo, hi);
    }
    return r;
  }

  Linear canonical(const Expr& e) {
    Linear l = linear(e);
    while (fold_div_mod_pairs(l)) l = linear(from_linear(l));
    return l;
  }

  Linear linear(const Expr& e) {
    Linear l;
    switch (e.kind()) {
      case ExprKind::kIntImm:
        l.constant = e.as<IntImmNode>()->value;
        return l;
      case ExprKind::kAdd: {
        const auto* n = e.as<AddNode>();
        l = linear(n->a);
        l.add(linear(n->b), 1);
        return l;
      }
      case ExprKind::kSub: {
        const auto* n = e.as<SubNode>();
        l = linear(n->a);
        l.add(linear(n->b), -1);
        return l;
      }
      case ExprKind::kMul: {
        const auto* n = e.as<MulNode>();
        Linear a = linear(n->a), b = linear(n->b);
        if (b.is_const()) {
          l.add(a, b.constant);
          return l;
        }
        if (a.is_const()) {
          l.add(b, a.constant);
          return l;
        }
        l.add_term(make_binary(ExprKind::kMul, from_linear(a), from_linear(b)), 1);
        return l;
      }
      case ExprKind::kDiv:
        return div_mod(e.as<DivNode>()->a, e.as<DivNode>()->b, true);
      case ExprKind::kMod:
        return div_mod(e.as<ModNode>()->a, e.as<ModNode>()->b, false);
      default:
        l.add_term(simplify_other(e), 1);
        return l;
    }
  }

 private:
  // floor((c*q + R) / c) = q + floor(R / c) and (c*q + R) mod c = R mod c, for integer q.
  Linear div_mod(const Expr& a_expr, const Expr& b_expr, bool is_div) {
    Linear a = linear(a_expr), b = linear(b_expr), out;
    if (!b.is_const() || b.constant <= 0) {
      Expr node =
          make_binary(is_div ? ExprKind::kDiv : ExprKind::kMod, from_linear(a), from_linear(b));
      if (a.is_const() && b.is_const() && b.constant != 0) {
        out.constant =
            is_div ? floor_div(a.constant, b.constant) : floor_mod(a.constant, b.constant);
      } else {
        out.add_term(node, 1);
      }
      return out;
    }
    int64_t c = b.constant;
    Linear q, rest;
    for (const Linear::Term& t : a.terms) {
      if (t.coeff % c == 0) {
        q.add_term(t.atom, t.coeff / c);
      } else {
        rest.add_term(t.atom, t.coeff);
      }
    }
    q.constant = floor_div(a.constant, c);
    rest.constant = floor_mod(a.constant, c);
    std::optional<IntRange> rb = bound(rest);
    if (is_div) {
      out = q;
      if (rb && floor_div(rb->min, c) == floor_div(rb->max, c)) {
        out.constant += floor_div(rb->min, c);
      } else if (c == 1) {
        out.add(rest, 1);
      } else {
        out.add_term(make_binary(ExprKind::kDiv, from_linear(rest), make_int(c)), 1);
      }
      return out;
    }
    if (c == 1) return out;
    if (rb && floor_div(rb->min, c) == floor_div(rb->max, c)) {
      out = rest;
      out.constant -= floor_div(rb->min, c) * c;
      return out;
    }
    out.add_term(make_binary(ExprKind::kMod, from_linear(rest), make_int(c)), 1);
    return out;
  }

  std::optional<IntRange> atom_bound(const Expr& e) {
    switch (e.kind()) {
      case ExprKind::kIntImm: {
        int64_t v = e.as<IntImmNode>()->value;
        return IntRange{v, v};
      }
      case ExprKind::kVar: {
        auto it = ranges_.find(e.as<VarNode>());
        if (it == ranges_.end()) return std::nullopt;
        return it->second;
      }
      case ExprKind::kDiv: {
        const auto* n = e.as<DivNode>();
        auto a = bound(linear(n->a));
        const int64_t* c = as_const_int(n->b);
        if (!a || !c || *c <= 0) return std::nullopt;
        return IntRange{floor_div(a->min, *c), floor_div(a->max, *c)};
      }
      case ExprKind::kMod: {
        const auto* n = e.as<ModNode>();
        const int64_t* c = as_const_int(n->b);
        if (!c || *c <= 0) return std::nullopt;
        auto a = bound(linear(n->a));
        if (a && floor_div(a->min, *c) == floor_div(a->max, *c)) {
          return IntRange{floor_mod(a->min, *c), floor_mod(a->max, *c)};
        }
        return IntRange{0, *c - 1};
      }
      case ExprKind::kMin:
      case ExprKind::kMax: {
        bool is_min = e.kind() == ExprKind::kMin;
        const Expr& x = is_min ? e.as<MinNode>()->a : e.as<MaxNode>()->a;
        const Expr& y = is_min ? e.as<MinNode>()->b : e.as<MaxNode>()->b;
        auto a = bound(linear(x)), b = bound(linear(y));
        if (!a || !b) return std::nullopt;
        if (is_min) return IntRange{std::min(a->min, b->min), std::min(a->max, b->max)};
        return IntRange{std::max(a->min, b->min), std::max(a->max, b->max)};
      }
      case ExprKind::kMul: {
        const auto* n = e.as<MulNode>();
        auto a = bound(linear(n->a)), b = bound(linear(n->b));
        if (!a || !b) return std::nullopt;
        int64_t p[] = {a->min * b->min, a->min * b->max, a->max * b->min, a->max * b->max};
        return IntRange{*std::min_element(p, p + 4), *std::max_element(p, p + 4)};
      }
      case ExprKind::kSelect: {
        const auto* n = e.as<SelectNode>();
        auto a = bound(linear(n->true_value)), b = bound(linear(n->false_value));
        if (!a || !b) return std::nullopt;
        return IntRange{std::min(a->min, b->min), std::max(a->max, b->max)};
      }
      default:
        return std::nullopt;
    }
  }

  static Expr bool_imm(bool v) { return make_int(v ? 1 : 0, DType::kBool); }
  static const int64_t* const_bool(const Expr& e) {
    return e.dtype() == DType::kBool ? as_const_int(e) : nullptr;
  }

  Expr compare(ExprKind kind, const Expr& a, const Expr& b) {
    if (a.dtype() == DType::kInt32) {
      Linear d = linear(a);
      d.add(linear(b), -1);
      if (std::optional<IntRange> r = bound(d)) {
        std::optional<bool> v;
        switch (kind) {
          case ExprKind::kLT:
            if (r->max < 0)
              v = true;
            else if (r->min >= 0)
              v = false;
            break;
          case ExprKind::kLE:
            if (r->max <= 0)
              v = true;
            else if (r->min > 0)
              v = false;
            break;
          case ExprKind::kGT:
            if (r->min > 0)
              v = true;
            else if (r->max <= 0)
              v = false;
            break;
          case ExprKind::kGE:
            if (r->min >= 0)
              v = true;
            else if (r->max < 0)
              v = false;
            break;
          case ExprKind::kEQ:
            if (r->min == 0 && r->max == 0)
              v = true;
            else if (r->min > 0 || r->max < 0)
              v = false;
            break;
          case ExprKind::kNE:
            if (r->min == 0 && r->max == 0)
              v = false;
            else if (r->min > 0 || r->max < 0)
              v = true;
            break;
          default:
            break;
        }
        if (v) return bool_imm(*v);
      }
      return make_binary(kind, simplify(a), simplify(b));
    }
    Expr x = simplify(a), y = simplify(b);
    const auto* fx = x.as<FloatImmNode>();
    const auto* fy = y.as<FloatImmNode>();
    if (fx && fy) {
      double p = fx->value, q = fy->value;
      switch (kind) {
        case ExprKind::kLT:
          return bool_imm(p < q);
        case ExprKind::kLE:
          return bool_imm(p <= q);
        case ExprKind::kGT:
          return bool_imm(p > q);
        case ExprKind::kGE:
          return bool_imm(p >= q);
        case ExprKind::kEQ:
          return bool_imm(p == q);
        case ExprKind::kNE:
          return bool_imm(p != q);
        default:
          break;
      }
    }
    return make_binary(kind, x, y);
  }

  Expr fold_float(ExprKind kind, const Expr& x, const Expr& y) {
    const auto* fx = x.as<FloatImmNode>();
    const auto* fy = y.as<FloatImmNode>();
    if (!fx || !fy) return make_binary(kind, x, y);
    double p = fx->value, q = fy->value, r;
    switch (kind) {
      case ExprKind::kAdd:
        r = p + q;
        break;
      case ExprKind::kSub:
        r = p - q;
        break;
      case ExprKind::kMul:
        r = p * q;
        break;
      case ExprKind::kDiv:
        r = p / q;
        break;
      case ExprKind::kMin:
        r = p < q ? p : q;
        break;
      case ExprKind::kMax:
        r = p > q ? p : q;
        break;
      default:
        return make_binary(kind, x, y);
    }
    return make_float(r, x.dtype());
  }

  Expr simplify_other(const Expr& e) {
    switch (e.kind()) {
      case ExprKind::kIntImm:
      case ExprKind::kFloatImm:
      case ExprKind::kVar:
        return e;
      case ExprKind::kAdd:
      case ExprKind::kSub:
      case ExprKind::kMul:
      case ExprKind::kDiv: {
        // Only reached for float types; ints go through linear().
        const Expr* ab = binary_operands(e);
        if (e.dtype() == DType::kInt32) return simplify(e);
        return fold_float(e.kind(), simplify(ab[0]), simplify(ab[1]));
      }
      case ExprKind::kMod:
        return simplify(e);
      case ExprKind::kMin:
      case ExprKind::kMax: {
        const Expr* ab = binary_operands(e);
        Expr x = simplify(ab[0]), y = simplify(ab[1]);
        if (same_expr(x, y)) return x;
        if (e.dtype() == DType::kInt32) {
          Linear d = linear(x);
          d.add(linear(y), -1);
          if (auto r = bound(d)) {
            bool is_min = e.kind() == ExprKind::kMin;
            if (r->max <= 0) return is_min ? x : y;
            if (r->min >= 0) return is_min ? y : x;
          }
          return make_binary(e.kind(), x, y);
        }
        return fold_float(e.kind(), x, y);
      }
      case ExprKind::kEQ:
      case ExprKind::kNE:
      case ExprKind::kLT:
      case ExprKind::kLE:
      case ExprKind::kGT:
      case ExprKind::kGE: {
        const Expr* ab = binary_operands(e);
        return compare(e.kind(), ab[0], ab[1]);
      }
      case ExprKind::kAnd:
      case ExprKind::kOr: {
        const Expr* ab = binary_operands(e);
        Expr x = simplify(ab[0]), y = simplify(ab[1]);
        bool is_and = e.kind() == ExprKind::kAnd;
        for (int side = 0; side < 2; ++side) {
          const Expr& c = side == 0 ? x : y;
          const Expr& other = side == 0 ? y : x;
          if (const int64_t* v = const_bool(c)) {
            if (is_and) return *v ? other : bool_imm(false);
            return *v ? bool_imm(true) : other;
          }
        }
        return make_binary(e.kind(), x, y);
      }
      case ExprKind::kNot: {
        Expr x = simplify(e.as<NotNode>()->a);
        if (const int64_t* v = const_bool(x)) return bool_imm(!*v);
        return make_not(x);
      }
      case ExprKind::kSelect: {
        const auto* n = e.as<SelectNode>();
        Expr c = simplify(n->cond);
        if (const int64_t* v = const_bool(c)) return simplify(*v ? n->true_value : n->false_value);
        return make_select(c, simplify(n->true_value), simplify(n->false_value));
      }
      case ExprKind::kCast: {
        const auto* n = e.as<CastNode>();
        Expr v = simplify(n->value);
        if (const auto* i = v.as<IntImmNode>()) {
          if (is_float(n->dtype)) return make_float(static_cast<double>(i->value), n->dtype);
          if (n->dtype == DType::kInt32) return make_int(i->value);
        }
        if (const auto* f = v.as<FloatImmNode>();
            f && is_float(n->dtype) && std::isfinite(f->value)) {
          return make_float(f->value, n->dtype);
        }
        return make_cast(n->dtype, v);
      }
      case ExprKind::kCall: {
        // Opaque: only the arguments simplify. No constant folding, so a program computes what
        // the compiled kernel computes (libm in the kernel's precision).
        const auto* n = e.as<CallNode>();
        std::vector<Expr> args;
        bool changed = false;
        for (const Expr& a : n->args) {
          args.push_back(simplify(a));
          changed |= !args.back().same_as(a);
        }
        return changed ? make_call(n->op, std::move(args)) : e;
      }
      case ExprKind::kLoad: {
        const auto* n = e.as<LoadNode>();
        std::vector<Expr> idx;
        bool changed = false;
        for (const Expr& i : n->indices) {
          idx.push_back(simplify(i));
          changed |= !idx.back().same_as(i);
        }
        return changed ? make_load(n->buffer, std::move(idx)) : e;
      }
      case ExprKind::kTensorRead:
      case ExprKind::kReduce:
        return e;
    }
    throw_internal("simplify: unknown expression kind");
  }

  static const Expr* binary_operands(const Expr& e) {
    switch (e.kind()) {
#define TESSERA_BINARY_NODE(Name) \
  case ExprKind::k##Name:         \
    return &static_cast<const Name##Node*>(e.get())->a;
#define TESSERA_EXPR_NODE(Name)
#include "te/expr_nodes.def"
      default:
        throw_internal("binary_operands on {}", expr_kind_name(e.kind()));
    }
  }

  const RangeMap& ranges_;
};

// Binds a loop's variable to the values it takes, from its (simplified) start under the ranges
// outside it; unbounded when the start is. The one rule for a loop's range, whether the
// simplifier meets the loop or starts inside it.
void bind_loop_range(RangeMap& ranges, const VarNode* var, const Expr& min, int64_t extent) {
  if (std::optional<IntRange> b = bound_of(min, ranges)) {
    ranges[var] = IntRange{b->min, b->max + extent - 1};
  } else {
    ranges.erase(var);
  }
}

class StmtSimplifier : public StmtMutator {
 public:
  explicit StmtSimplifier(RangeMap ranges) : ranges_(std::move(ranges)) {}

 protected:
  Expr mutate_expr(const Expr& e) override { return Simplifier(ranges_).simplify(e); }

  Stmt visit_(const ForNode& n, const Stmt& self) override {
    Expr mn = mutate_expr(n.min);
    // Only this loop's variable changes: restore its old range, not a copy of the whole map.
    const VarNode* var = n.var.get();
    std::optional<IntRange> outer;
    if (auto it = ranges_.find(var); it != ranges_.end()) outer = it->second;
    bind_loop_range(ranges_, var, mn, n.extent);
    Stmt body = visit(n.body);
    if (outer) {
      ranges_[var] = *outer;
    } else {
      ranges_.erase(var);
    }
    if (mn.same_as(n.min) && body.same_as(n.body)) return self;
    return make_for(n.var, mn, n.extent, n.for_kind, body);
  }

  Stmt visit_(const IfThenElseNode& n, const Stmt& self) override {
    Expr c = mutate_expr(n.cond);
    if (const int64_t* v = as_const_int(c)) {
      if (*v) return visit(n.then_case);
      if (n.else_case.defined()) return visit(n.else_case);
    }
    Stmt t = visit(n.then_case);
    Stmt e = n.else_case.defined() ? visit(n.else_case) : Stmt();
    if (c.same_as(n.cond) && t.same_as(n.then_case) && e.same_as(n.else_case)) return self;
    return make_if(c, t, e);
  }
  using StmtMutator::visit_;

 private:
  RangeMap ranges_;
};

}  // namespace

Expr simplify(const Expr& e, const RangeMap& ranges) {
  return Simplifier(ranges).simplify(e);
}

Stmt simplify(const Stmt& s, const RangeMap& ranges) {
  StmtSimplifier simplifier(ranges);
  return simplifier.visit(s);
}

Stmt simplify_in_loops(const Stmt& s, const std::vector<const ForNode*>& enclosing) {
  RangeMap ranges;
  for (const ForNode* loop : enclosing)
    bind_loop_range(ranges, loop->var.get(), loop->min, loop->extent);
  return simplify(s, ranges);
}

std::optional<IntRange> bound_of(const Expr& e, const RangeMap& ranges) {
  if (e.dtype() != DType::kInt32) return std::nullopt;
  Simplifier s(ranges);
  return s.bound(s.canonical(e));
}

std::optional<std::pair<Expr, Expr>> split_linear(
    const Expr& e, const std::function<bool(const Expr&)>& in_first) {
  if (e.dtype() != DType::kInt32) return std::nullopt;
  const RangeMap no_ranges;
  Linear whole = Simplifier(no_ranges).canonical(e), first, second;
  for (const Linear::Term& t : whole.terms) (in_first(t.atom) ? first : second).terms.push_back(t);
  if (first.is_const() || second.is_const()) return std::nullopt;
  second.constant = whole.constant;
  return std::pair{from_linear(first), from_linear(second)};
}

bool same_expr(const Expr& a, const Expr& b) {
  if (a.same_as(b)) return true;
  if (!a.defined() || !b.defined()) return false;
  if (a.kind() != b.kind() || a.dtype() != b.dtype()) return false;
  auto same_list = [](const std::vector<Expr>& x, const std::vector<Expr>& y) {
    if (x.size() != y.size()) return false;
    for (size_t i = 0; i < x.size(); ++i) {
      if (!same_expr(x[i], y[i])) return false;
    }
    return true;
  };
  switch (a.kind()) {
    case ExprKind::kIntImm:
      return a.as<IntImmNode>()->value == b.as<IntImmNode>()->value;
    case ExprKind::kFloatImm: {
      double x = a.as<FloatImmNode>()->value, y = b.as<FloatImmNode>()->value;
      return x == y || (std::isnan(x) && std::isnan(y));
    }
    case ExprKind::kVar:
      return false;  // distinct nodes are distinct variables
#define TESSERA_BINARY_NODE(Name)                          \
  case ExprKind::k##Name: {                                \
    const auto* x = a.as<Name##Node>();                    \
    const auto* y = b.as<Name##Node>();                    \
    return same_expr(x->a, y->a) && same_expr(x->b, y->b); \
  }
#define TESSERA_EXPR_NODE(Name)
#include "te/expr_nodes.def"
    case ExprKind::kNot:
      return same_expr(a.as<NotNode>()->a, b.as<NotNode>()->a);
    case ExprKind::kSelect: {
      const auto* x = a.as<SelectNode>();
      const auto* y = b.as<SelectNode>();
      return same_expr(x->cond, y->cond) && same_expr(x->true_value, y->true_value) &&
             same_expr(x->false_value, y->false_value);
    }
    case ExprKind::kCast:
      return same_expr(a.as<CastNode>()->value, b.as<CastNode>()->value);
    case ExprKind::kCall: {
      const auto* x = a.as<CallNode>();
      const auto* y = b.as<CallNode>();
      return x->op == y->op && same_list(x->args, y->args);
    }
    case ExprKind::kLoad: {
      const auto* x = a.as<LoadNode>();
      const auto* y = b.as<LoadNode>();
      return x->buffer == y->buffer && same_list(x->indices, y->indices);
    }
    case ExprKind::kTensorRead: {
      const auto* x = a.as<TensorReadNode>();
      const auto* y = b.as<TensorReadNode>();
      return x->tensor == y->tensor && same_list(x->indices, y->indices);
    }
    case ExprKind::kReduce:
      return false;
  }
  return false;
}

std::optional<int64_t> affine_coefficient(const Expr& e, const VarNode* var) {
  RangeMap none;
  Simplifier s(none);
  Linear l = s.canonical(e);
  int64_t coeff = 0;
  for (const Linear::Term& t : l.terms) {
    if (t.atom.as<VarNode>() == var) {
      coeff = t.coeff;
    } else if (uses_var(t.atom, var)) {
      return std::nullopt;
    }
  }
  return coeff;
}

}  // namespace tessera
