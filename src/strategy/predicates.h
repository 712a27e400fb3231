/// Strategy predicates: strategies that succeed with their input unchanged or fail (not_,
/// is_equal_to, contains).
#pragma once

#include <concepts>
#include <functional>
#include <string>
#include <utility>

#include "strategy/strategy.h"
#include "strategy/traversal.h"

namespace tessera {

/// `not(s)`: succeeds with the input iff s does not apply (s's result is dropped). An internal
/// error in s is passed on, not inverted.
template <typename P>
Strategy<P> not_(Strategy<P> s) {
  std::string text = "not(" + s.text() + ")";
  return Strategy<P>(text,
                     typename Strategy<P>::ComposedFn([s, text](const P& p, RewriteStats* st) {
                       RewriteResult<P> r = s(p, st);
                       if (r.kind() == RewriteResult<P>::Kind::kNotApplicable) {
                         return RewriteResult<P>::success(p);
                       }
                       if (!r) return r;
                       return RewriteResult<P>::not_applicable(text, s.text() + " applies");
                     }));
}

/// `is_equal_to(x)` with an explicit equality and the text that names x.
template <typename P>
Strategy<P> is_equal_to(P x, std::function<bool(const P&, const P&)> equal, std::string x_text) {
  std::string text = "is_equal_to(" + x_text + ")";
  return Strategy<P>(text, typename Strategy<P>::ComposedFn(
                               [x = std::move(x), equal, text](const P& p, RewriteStats*) {
                                 if (equal(p, x)) return RewriteResult<P>::success(p);
                                 return RewriteResult<P>::not_applicable(text, "not equal");
                               }));
}

/// `is_equal_to(x)`: succeeds with the input iff it equals x, by `Traversable<P>::equal` when the
/// program type has one (structural equality for Expr and Stmt), else by `==`. Prints x with
/// `Traversable<P>::print` when there is one.
template <typename P>
Strategy<P> is_equal_to(P x) {
  std::function<bool(const P&, const P&)> equal;
  if constexpr (requires(const P& a) {
                  { Traversable<P>::equal(a, a) } -> std::convertible_to<bool>;
                }) {
    equal = [](const P& a, const P& b) { return Traversable<P>::equal(a, b); };
  } else {
    equal = [](const P& a, const P& b) { return a == b; };
  }
  std::string x_text = "<value>";
  if constexpr (requires(const P& a) {
                  { Traversable<P>::print(a) } -> std::convertible_to<std::string>;
                }) {
    x_text = Traversable<P>::print(x);
  }
  return is_equal_to(std::move(x), std::move(equal), std::move(x_text));
}

/// `contains(x)`: succeeds with the input iff x occurs in it as a sub-term (the input itself
/// included), found with `top_down(is_equal_to(x))`.
template <typename P>
Strategy<P> contains(P x) {
  Strategy<P> eq = is_equal_to(std::move(x));
  Strategy<P> find = top_down(eq);
  std::string text = "contains(" + eq.text().substr(12);  // reuse the printed x
  return Strategy<P>(text,
                     typename Strategy<P>::ComposedFn([find, text](const P& p, RewriteStats* st) {
                       RewriteResult<P> r = find(p, st);
                       if (r) return RewriteResult<P>::success(p);
                       if (r.kind() == RewriteResult<P>::Kind::kInternalError) return r;
                       return RewriteResult<P>::not_applicable(text, "no such sub-term");
                     }));
}

}  // namespace tessera
