/// Strategies (Elevate): printable values `P -> RewriteResult<P>` and the basic combinators.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "strategy/rewrite_result.h"

namespace tessera {

template <typename P>
class Strategy {
 public:
  using Fn = std::function<RewriteResult<P>(const P&)>;

  Strategy(std::string text, Fn fn) : text_(std::move(text)), fn_(std::move(fn)) {}

  /// Applies the strategy. Exceptions thrown by a rule become internal-error results, so a
  /// strategy never throws past this layer.
  RewriteResult<P> operator()(const P& p) const {
    try {
      return fn_(p);
    } catch (const std::exception& e) {
      return RewriteResult<P>::internal_error(text_, e.what());
    }
  }
  /// The strategy as an expression in the strategy language, e.g. `split(i, 32) ;
  /// parallel(i.outer)`.
  const std::string& text() const { return text_; }

 private:
  std::string text_;
  Fn fn_;
};

/// Succeeds with its input.
template <typename P>
Strategy<P> id() {
  return Strategy<P>("id", [](const P& p) { return RewriteResult<P>::success(p); });
}

/// Never applies.
template <typename P>
Strategy<P> fail() {
  return Strategy<P>(
      "fail", [](const P&) { return RewriteResult<P>::not_applicable("fail", "always fails"); });
}

/// `a ; b`: a, then b on a's result; fails if either fails.
template <typename P>
Strategy<P> seq(Strategy<P> a, Strategy<P> b) {
  std::string text = a.text() + " ; " + b.text();
  return Strategy<P>(text, [a, b](const P& p) {
    RewriteResult<P> r = a(p);
    if (!r) return r;
    return b(r.program());
  });
}

template <typename P>
Strategy<P> operator>>(Strategy<P> a, Strategy<P> b) {
  return seq(std::move(a), std::move(b));
}

namespace detail {
// Operands of a tighter operator that contain `;` need parentheses to print back correctly.
inline std::string group(const std::string& text) {
  return text.find(" ; ") != std::string::npos ? "(" + text + ")" : text;
}
}  // namespace detail

/// `a <+ b`: a if it applies, otherwise b.
template <typename P>
Strategy<P> lchoice(Strategy<P> a, Strategy<P> b) {
  std::string text = detail::group(a.text()) + " <+ " + detail::group(b.text());
  return Strategy<P>(text, [a, b](const P& p) {
    RewriteResult<P> r = a(p);
    if (r || r.kind() == RewriteResult<P>::Kind::kInternalError) return r;
    return b(p);
  });
}

template <typename P>
Strategy<P> operator<<=(Strategy<P> a, Strategy<P> b) {
  return lchoice(std::move(a), std::move(b));
}

/// `try(s)`: s if it applies, otherwise the unchanged input. Never fails.
template <typename P>
Strategy<P> try_(Strategy<P> s) {
  Strategy<P> t = lchoice(s, id<P>());
  return Strategy<P>("try(" + s.text() + ")", [t](const P& p) { return t(p); });
}

/// `repeat(s)`: applies s until it no longer applies (at most `limit` times). Never fails.
template <typename P>
Strategy<P> repeat(Strategy<P> s, int limit = 1000) {
  return Strategy<P>("repeat(" + s.text() + ")", [s, limit](const P& p) {
    P cur = p;
    for (int i = 0; i < limit; ++i) {
      RewriteResult<P> r = s(cur);
      if (r.kind() == RewriteResult<P>::Kind::kInternalError) return r;
      if (!r) break;
      cur = std::move(r).program();
    }
    return RewriteResult<P>::success(std::move(cur));
  });
}

/// Sequences a list; the empty list is `id`.
template <typename P>
Strategy<P> seq_all(const std::vector<Strategy<P>>& steps) {
  if (steps.empty()) return id<P>();
  Strategy<P> s = steps[0];
  for (size_t i = 1; i < steps.size(); ++i) s = seq(s, steps[i]);
  return s;
}

}  // namespace tessera
