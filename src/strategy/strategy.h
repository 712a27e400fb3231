/// Strategies (Elevate): printable values `P -> RewriteResult<P>` and the basic combinators.
#pragma once

#include <fmt/format.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "strategy/rewrite_result.h"

namespace tessera {

/// Counts of rule applications during one or more strategy runs; passed explicitly, never global.
struct RewriteStats {
  int64_t attempts = 0;  // rule (leaf strategy) invocations
  int64_t steps = 0;     // rule invocations that rewrote the program
  double seconds = 0;    // time spent inside rules
};

namespace detail {
// Applications of strategies (rules and combinators) one top-level application may make: nested
// repeats multiply their limits (repeat^4 of id ran 10^12 steps), and a budget ends them in a
// second or so with an error instead of never.
inline constexpr int64_t kStrategyBudget = 10'000'000;
struct Budget {
  int depth = 0;
  int64_t left = 0;
};
inline thread_local Budget budget;
}  // namespace detail

/// A strategy value is immutable and shares its function and text: copies (every combinator
/// captures its operands) cost a pointer, not the whole tree below it.
template <typename P>
class Strategy {
 public:
  /// A rule: one rewrite step, counted in RewriteStats.
  using RuleFn = std::function<RewriteResult<P>(const P&)>;
  /// A combinator: forwards the statistics to the strategies it runs.
  using ComposedFn = std::function<RewriteResult<P>(const P&, RewriteStats*)>;

  Strategy(std::string text, RuleFn fn)
      : impl_(std::make_shared<const Impl>(Impl{std::move(text), std::move(fn), {}})) {}
  Strategy(std::string text, ComposedFn fn)
      : impl_(std::make_shared<const Impl>(Impl{std::move(text), {}, std::move(fn)})) {}

  /// Applies the strategy. Exceptions thrown by a rule become internal-error results, so a
  /// strategy never throws past this layer; one that runs past detail::kStrategyBudget steps
  /// ends with an out-of-budget result.
  RewriteResult<P> operator()(const P& p, RewriteStats* stats = nullptr) const {
    detail::Budget& budget = detail::budget;
    if (budget.depth == 0) budget.left = detail::kStrategyBudget;
    if (--budget.left < 0) {
      const std::string& t = impl_->text;
      return RewriteResult<P>::out_of_budget(
          t.size() > 80 ? t.substr(0, 77) + "..." : t,
          fmt::format("ran past {} steps (a repeat that never stops applying?)",
                      detail::kStrategyBudget));
    }
    ++budget.depth;
    struct Leave {
      ~Leave() { --detail::budget.depth; }
    } leave;
    try {
      if (impl_->composed) return impl_->composed(p, stats);
      if (!stats) return impl_->rule(p);
      auto start = std::chrono::steady_clock::now();
      RewriteResult<P> r = impl_->rule(p);
      stats->seconds +=
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      ++stats->attempts;
      if (r) ++stats->steps;
      return r;
    } catch (const std::exception& e) {
      return RewriteResult<P>::internal_error(impl_->text, e.what());
    }
  }
  /// The strategy as an expression in the strategy language, e.g. `split(i, 32) ;
  /// parallel(i.outer)`.
  const std::string& text() const { return impl_->text; }

 private:
  struct Impl {
    std::string text;
    RuleFn rule;
    ComposedFn composed;
  };
  std::shared_ptr<const Impl> impl_;
};

/// Succeeds with its input.
template <typename P>
Strategy<P> id() {
  return Strategy<P>("id", typename Strategy<P>::ComposedFn([](const P& p, RewriteStats*) {
                       return RewriteResult<P>::success(p);
                     }));
}

/// Never applies.
template <typename P>
Strategy<P> fail() {
  return Strategy<P>("fail", typename Strategy<P>::ComposedFn([](const P&, RewriteStats*) {
                       return RewriteResult<P>::not_applicable("fail", "always fails");
                     }));
}

/// `a ; b`: a, then b on a's result; fails if either fails.
template <typename P>
Strategy<P> seq(Strategy<P> a, Strategy<P> b) {
  std::string text = a.text() + " ; " + b.text();
  return Strategy<P>(text, typename Strategy<P>::ComposedFn([a, b](const P& p, RewriteStats* st) {
                       RewriteResult<P> r = a(p, st);
                       if (!r) return r;
                       return b(r.program(), st);
                     }));
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
  return Strategy<P>(text, typename Strategy<P>::ComposedFn([a, b](const P& p, RewriteStats* st) {
                       RewriteResult<P> r = a(p, st);
                       if (r || r.kind() == RewriteResult<P>::Kind::kInternalError) return r;
                       return b(p, st);
                     }));
}

template <typename P>
Strategy<P> operator<<=(Strategy<P> a, Strategy<P> b) {
  return lchoice(std::move(a), std::move(b));
}

/// `try(s)`: s if it applies, otherwise the unchanged input. Never fails.
template <typename P>
Strategy<P> try_(Strategy<P> s) {
  Strategy<P> t = lchoice(s, id<P>());
  return Strategy<P>(
      "try(" + s.text() + ")",
      typename Strategy<P>::ComposedFn([t](const P& p, RewriteStats* st) { return t(p, st); }));
}

/// `repeat(s)`: applies s until it no longer applies (at most `limit` times). Never fails.
template <typename P>
Strategy<P> repeat(Strategy<P> s, int limit = 1000) {
  return Strategy<P>("repeat(" + s.text() + ")",
                     typename Strategy<P>::ComposedFn([s, limit](const P& p, RewriteStats* st) {
                       P cur = p;
                       for (int i = 0; i < limit; ++i) {
                         RewriteResult<P> r = s(cur, st);
                         if (r.kind() == RewriteResult<P>::Kind::kInternalError) return r;
                         if (!r) break;
                         cur = std::move(r).program();
                       }
                       return RewriteResult<P>::success(std::move(cur));
                     }));
}

/// `repeat_n(s, n)`: s exactly n times; fails if any application fails.
template <typename P>
Strategy<P> repeat_n(Strategy<P> s, int n) {
  return Strategy<P>("repeat_n(" + s.text() + ", " + std::to_string(n) + ")",
                     typename Strategy<P>::ComposedFn([s, n](const P& p, RewriteStats* st) {
                       RewriteResult<P> r = RewriteResult<P>::success(p);
                       for (int i = 0; i < n && r; ++i) r = s(r.program(), st);
                       return r;
                     }));
}

/// Sequences a list (`a ; b ; c`), the empty list is `id`: one flat step that runs them in a
/// loop, so a sequence of 25,000 is neither 25,000 frames deep nor built in quadratic time.
template <typename P>
Strategy<P> seq_all(std::vector<Strategy<P>> steps) {
  if (steps.empty()) return id<P>();
  if (steps.size() == 1) return steps[0];
  std::string text;
  for (size_t i = 0; i < steps.size(); ++i) text += (i ? " ; " : "") + steps[i].text();
  return Strategy<P>(std::move(text), typename Strategy<P>::ComposedFn(
                                          [steps = std::move(steps)](const P& p, RewriteStats* st) {
                                            RewriteResult<P> r = steps[0](p, st);
                                            for (size_t i = 1; i < steps.size() && r; ++i)
                                              r = steps[i](r.program(), st);
                                            return r;
                                          }));
}

}  // namespace tessera
