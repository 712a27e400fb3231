#include "ops/separate_filter.h"

#include <fmt/format.h>

#include <cmath>
#include <optional>

#include "strategy/expr_traversal.h"
#include "tir/printer.h"

namespace tessera {

namespace {

struct Term {
  TensorRef tensor;
  int64_t dy = 0, dx = 0;
  double weight = 1;
};

// `v` or `v + c` or `c + v` with v the given axis: the constant offset.
std::optional<int64_t> offset_of(const Expr& e, const Var& axis) {
  if (e.same_as(axis)) return 0;
  if (const auto* add = e.as<AddNode>()) {
    if (add->a.same_as(axis) && as_const_int(add->b)) return *as_const_int(add->b);
    if (add->b.same_as(axis) && as_const_int(add->a)) return *as_const_int(add->a);
  }
  return std::nullopt;
}

// `in[y + dy, x + dx]`, optionally times a float literal on either side.
std::optional<Term> match_term(const Expr& e, const Var& y, const Var& x) {
  Expr read = e;
  double weight = 1;
  if (const auto* mul = e.as<MulNode>()) {
    if (const auto* c = mul->b.as<FloatImmNode>()) {
      read = mul->a, weight = c->value;
    } else if (const auto* c2 = mul->a.as<FloatImmNode>()) {
      read = mul->b, weight = c2->value;
    }
  }
  const auto* r = read.as<TensorReadNode>();
  if (!r || r->indices.size() != 2) return std::nullopt;
  std::optional<int64_t> dy = offset_of(r->indices[0], y), dx = offset_of(r->indices[1], x);
  if (!dy || !dx) return std::nullopt;
  return Term{r->tensor, *dy, *dx, weight};
}

std::string weights_text(const Weights1D& w) {
  return fmt::format("[{}, {}, {}]", w[0], w[1], w[2]);
}

RewriteResult<TensorProgram> separate(const TensorProgram& p, const std::string& text,
                                      const std::string& stage, const Weights1D& v,
                                      const Weights1D& h, const std::string& vert_name) {
  auto fail = [&](const std::string& why) {
    return RewriteResult<TensorProgram>::not_applicable(text, why);
  };
  Tensor out = find_stage(p, stage);
  if (!out.defined()) return fail("no stage named " + stage);
  if (out.ndim() != 2 || out->body.as<ReduceNode>()) {
    return fail(stage + " is not a 2-D stage with a plain sum as body");
  }
  for (const Tensor& t : topo_order(p.args)) {
    if (t->name == vert_name) return fail("a tensor named " + vert_name + " exists");
  }
  const Var& y = out->axes[0].var;
  const Var& x = out->axes[1].var;

  // The sum's leaves, collected by a recursive strategy: a term, or an addition all of whose
  // operands are (sums of) terms. It fails at the first leaf that is neither.
  std::vector<Term> terms;
  std::string bad_leaf;
  ExprStrategy collect =
      rec<Expr>("stencil_terms", [&](const ExprStrategy& self, const Expr& e, RewriteStats* st) {
        if (std::optional<Term> t = match_term(e, y, x)) {
          terms.push_back(*t);
          return RewriteResult<Expr>::success(e);
        }
        if (e.as<AddNode>()) return Traversable<Expr>::all(self, e, st);
        bad_leaf = print_expr(e);
        return RewriteResult<Expr>::not_applicable("stencil_terms", "not a weighted read");
      });
  if (!collect(out->body)) {
    return fail(fmt::format("{} is not a 3x3 stencil: {} is not a term in[{} + dy, {} + dx]*w",
                            stage, bad_leaf, y.name(), x.name()));
  }
  if (terms.size() != 9) {
    return fail(fmt::format("{} is not a 3x3 stencil: it has {} terms", stage, terms.size()));
  }
  // Exactly one term per offset in 0..2 x 0..2, all reading the same 2-D tensor.
  std::optional<double> c[3][3];
  for (const Term& t : terms) {
    if (t.tensor != terms[0].tensor) {
      return fail(fmt::format("{} is not a 3x3 stencil: it reads {} and {}", stage,
                              terms[0].tensor->name, t.tensor->name));
    }
    if (t.dy < 0 || t.dy > 2 || t.dx < 0 || t.dx > 2 || c[t.dy][t.dx]) {
      return fail(
          fmt::format("{} is not a 3x3 stencil: offset ({}, {}) is outside 0..2 or "
                      "repeated",
                      stage, t.dy, t.dx));
    }
    c[t.dy][t.dx] = t.weight;
  }
  for (int dy = 0; dy < 3; ++dy) {
    for (int dx = 0; dx < 3; ++dx) {
      double want = *c[dy][dx], got = v[dy] * h[dx];
      if (std::abs(got - want) > std::ldexp(std::abs(want), -23)) {
        return fail(fmt::format("weight [{}][{}] = {} is not v[{}]*h[{}] = {}*{} = {}", dy, dx,
                                want, dy, dx, v[dy], h[dx], got));
      }
    }
  }
  Tensor in(terms[0].tensor);
  int64_t rows = out->shape[0], cols = out->shape[1];
  if (in->shape[0] < rows + 2 || in->shape[1] < cols + 2) {
    return fail(fmt::format("{} reads outside {}", stage, in->name));
  }
  DType t = in->dtype;
  if (!is_float(t)) return fail(fmt::format("{} is not a float tensor", in->name));
  Tensor vert = compute({rows, cols + 2},
                        [&](Var vy, Var vx) {
                          return in(vy, vx) * make_float(v[0], t) +
                                 in(vy + 1, vx) * make_float(v[1], t) +
                                 in(vy + 2, vx) * make_float(v[2], t);
                        },
                        vert_name, {"vy", "vx"});
  Tensor horiz = compute({rows, cols},
                         [&](Var yy, Var xx) {
                           return vert(yy, xx) * make_float(h[0], t) +
                                  vert(yy, xx + 1) * make_float(h[1], t) +
                                  vert(yy, xx + 2) * make_float(h[2], t);
                         },
                         stage, {y.name(), x.name()});
  return RewriteResult<TensorProgram>::success(replace_stage(p, out, horiz));
}

}  // namespace

TensorStrategy separate_filter(const std::string& stage, const Weights1D& v, const Weights1D& h,
                               const std::string& vert_name) {
  std::string text =
      fmt::format("separate_filter({}, {}, {})", stage, weights_text(v), weights_text(h));
  return TensorStrategy(text, TensorStrategy::RuleFn([=](const TensorProgram& p) {
                          return separate(p, text, stage, v, h, vert_name);
                        }));
}

}  // namespace tessera
