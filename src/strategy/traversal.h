/// Elevate's traversals: a program type supplies only `all`, `one`, `some` (Traversable<P>); the
/// whole-tree strategies `top_down`, `bottom_up`, `try_all`, `normalize`, ... follow generically.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "strategy/strategy.h"

namespace tessera {

/// Specialise for a program type P with three static functions that apply a strategy to the
/// immediate sub-terms of a node and rebuild it (the node itself when nothing changed):
///
///   static RewriteResult<P> all(const Strategy<P>& s, const P& p, RewriteStats* st);
///     s on every child; fails if s fails on any. A leaf succeeds unchanged.
///   static RewriteResult<P> one(const Strategy<P>& s, const P& p, RewriteStats* st);
///     s on the first child (in order) where it applies; fails if it applies to none.
///   static RewriteResult<P> some(const Strategy<P>& s, const P& p, RewriteStats* st);
///     s on every child where it applies; fails if it applies to none.
///
/// An internal error from s stops the traversal and is returned as is. Optionally also
/// `static bool equal(const P&, const P&)` and `static std::string print(const P&)`, used by
/// `is_equal_to` (strategy/predicates.h). `traverse_children` below implements all three from a
/// list of children and a rebuild function.
template <typename P>
struct Traversable;

enum class TraversalMode { kAll, kOne, kSome };

/// The shared implementation of all/one/some over `children`: applies s as `mode` says, then
/// `rebuild(new_children)` if any child changed (compared with `same`), else returns `p`.
template <typename P, typename Same, typename Rebuild>
RewriteResult<P> traverse_children(TraversalMode mode, const Strategy<P>& s, const P& p,
                                   const std::vector<P>& children, RewriteStats* st, Same same,
                                   Rebuild rebuild) {
  static const char* kNames[] = {"all", "one", "some"};
  const char* name = kNames[static_cast<int>(mode)];
  std::vector<P> out = children;
  bool any_applied = false, changed = false;
  for (size_t i = 0; i < children.size(); ++i) {
    RewriteResult<P> r = s(children[i], st);
    if (r.kind() == RewriteResult<P>::Kind::kInternalError) return r;
    if (!r) {
      if (mode == TraversalMode::kAll) {
        // The child's own message says why; the prefix says where.
        return RewriteResult<P>::not_applicable(name,
                                                "child " + std::to_string(i) + ": " + r.message());
      }
      continue;
    }
    any_applied = true;
    if (!same(r.program(), children[i])) {
      out[i] = std::move(r).program();
      changed = true;
    }
    if (mode == TraversalMode::kOne) break;
  }
  if (!any_applied && mode != TraversalMode::kAll) {
    return RewriteResult<P>::not_applicable(name, "applies to no immediate sub-term");
  }
  if (!changed) return RewriteResult<P>::success(p);
  return RewriteResult<P>::success(rebuild(std::move(out)));
}

/// `all(s)`: s on every immediate sub-term.
template <typename P>
Strategy<P> all(Strategy<P> s) {
  return Strategy<P>("all(" + s.text() + ")",
                     typename Strategy<P>::ComposedFn([s](const P& p, RewriteStats* st) {
                       return Traversable<P>::all(s, p, st);
                     }));
}

/// `one(s)`: s on the first immediate sub-term where it applies.
template <typename P>
Strategy<P> one(Strategy<P> s) {
  return Strategy<P>("one(" + s.text() + ")",
                     typename Strategy<P>::ComposedFn([s](const P& p, RewriteStats* st) {
                       return Traversable<P>::one(s, p, st);
                     }));
}

/// `some(s)`: s on every immediate sub-term where it applies, at least one.
template <typename P>
Strategy<P> some(Strategy<P> s) {
  return Strategy<P>("some(" + s.text() + ")",
                     typename Strategy<P>::ComposedFn([s](const P& p, RewriteStats* st) {
                       return Traversable<P>::some(s, p, st);
                     }));
}

/// Stratego's `rec x(body)`: a recursive strategy. `body(self, p, stats)` runs one level and may
/// apply `self` (usually through a traversal) to recurse. `self` is rebuilt on every top-level
/// call and refers to that call's frame, so no std::function owns itself (no cycle, no leak);
/// body must not keep `self` beyond the call.
template <typename P, typename Body>
Strategy<P> rec(std::string text, Body body) {
  using Fn = typename Strategy<P>::ComposedFn;
  return Strategy<P>(text, Fn([text, body](const P& p, RewriteStats* st) {
                       const Strategy<P>* self_ptr = nullptr;
                       Strategy<P> self(text, Fn([&self_ptr, &body](const P& q, RewriteStats* s2) {
                                          return body(*self_ptr, q, s2);
                                        }));
                       self_ptr = &self;
                       return body(self, p, st);
                     }));
}

namespace detail {
template <typename P>
bool is_internal(const RewriteResult<P>& r) {
  return r.kind() == RewriteResult<P>::Kind::kInternalError;
}
// Recursive traversals fail at every node of the tree; the top level replaces those cheap inner
// messages by one that names the traversal.
template <typename P>
Strategy<P> renamed_failure(Strategy<P> inner, std::string text, std::string reason) {
  return Strategy<P>(
      text, typename Strategy<P>::ComposedFn([inner, text, reason](const P& p, RewriteStats* st) {
        RewriteResult<P> r = inner(p, st);
        if (r || is_internal(r)) return r;
        return RewriteResult<P>::not_applicable(text, reason);
      }));
}
}  // namespace detail

/// `top_down(s) = s <+ one(top_down(s))`: s at the first place in pre-order where it applies.
template <typename P>
Strategy<P> top_down(Strategy<P> s) {
  std::string text = "top_down(" + s.text() + ")";
  Strategy<P> r = rec<P>(text, [s](const Strategy<P>& self, const P& p, RewriteStats* st) {
    RewriteResult<P> here = s(p, st);
    if (here || detail::is_internal(here)) return here;
    return Traversable<P>::one(self, p, st);
  });
  return detail::renamed_failure(r, text, s.text() + " applies nowhere");
}

/// `bottom_up(s) = one(bottom_up(s)) <+ s`: s at the first place in post-order where it applies.
template <typename P>
Strategy<P> bottom_up(Strategy<P> s) {
  std::string text = "bottom_up(" + s.text() + ")";
  Strategy<P> r = rec<P>(text, [s](const Strategy<P>& self, const P& p, RewriteStats* st) {
    RewriteResult<P> below = Traversable<P>::one(self, p, st);
    if (below || detail::is_internal(below)) return below;
    return s(p, st);
  });
  return detail::renamed_failure(r, text, s.text() + " applies nowhere");
}

/// `all_top_down(s) = s ; all(all_top_down(s))`: s at every node, parents first; fails if s fails
/// anywhere (including at a leaf).
template <typename P>
Strategy<P> all_top_down(Strategy<P> s) {
  return rec<P>("all_top_down(" + s.text() + ")",
                [s](const Strategy<P>& self, const P& p, RewriteStats* st) {
                  RewriteResult<P> here = s(p, st);
                  if (!here) return here;
                  return Traversable<P>::all(self, here.program(), st);
                });
}

/// `all_bottom_up(s) = all(all_bottom_up(s)) ; s`: s at every node, children first.
template <typename P>
Strategy<P> all_bottom_up(Strategy<P> s) {
  return rec<P>("all_bottom_up(" + s.text() + ")",
                [s](const Strategy<P>& self, const P& p, RewriteStats* st) {
                  RewriteResult<P> below = Traversable<P>::all(self, p, st);
                  if (!below) return below;
                  return s(below.program(), st);
                });
}

/// `try_all(s) = all(try_all(s)) ; try(s)`: s wherever it applies, children first. Never fails
/// (except on an internal error).
template <typename P>
Strategy<P> try_all(Strategy<P> s) {
  return rec<P>("try_all(" + s.text() + ")",
                [s](const Strategy<P>& self, const P& p, RewriteStats* st) {
                  RewriteResult<P> below = Traversable<P>::all(self, p, st);
                  if (!below) return below;
                  RewriteResult<P> here = s(below.program(), st);
                  if (here || detail::is_internal(here)) return here;
                  return below;
                });
}

/// `normalize(s) = repeat(top_down(s))`: rewrites with s anywhere until s applies nowhere. Does
/// not terminate (stops at repeat's limit) if s always applies somewhere, e.g. `id`.
template <typename P>
Strategy<P> normalize(Strategy<P> s, int limit = 1000) {
  Strategy<P> r = repeat(top_down(s), limit);
  return Strategy<P>(
      "normalize(" + s.text() + ")",
      typename Strategy<P>::ComposedFn([r](const P& p, RewriteStats* st) { return r(p, st); }));
}

/// `position(n, s)`: s at its n-th place (0-based), counting in pre-order only the places where s
/// applies; fails if s applies at n places or fewer. (Elevate's `position` counts tree depth
/// instead; counting applicable places is what "the second loop that s can vectorize" needs.)
/// Places before the n-th are probed with s and their results dropped: those probes count as
/// attempts in the statistics, not as steps.
template <typename P>
Strategy<P> position(int n, Strategy<P> s) {
  std::string text = "position(" + std::to_string(n) + ", " + s.text() + ")";
  return Strategy<P>(
      text, typename Strategy<P>::ComposedFn([n, s, text](const P& p, RewriteStats* st) {
        int seen = 0;
        Strategy<P> counted(s.text(),
                            typename Strategy<P>::ComposedFn([&](const P& q, RewriteStats* st2) {
                              if (seen > n) {
                                return RewriteResult<P>::not_applicable(s.text(), "already done");
                              }
                              if (seen == n) {
                                RewriteResult<P> r = s(q, st2);
                                if (r) ++seen;
                                return r;
                              }
                              RewriteStats probe;
                              RewriteResult<P> r = s(q, st2 ? &probe : nullptr);
                              if (st2) {
                                st2->attempts += probe.attempts;
                                st2->seconds += probe.seconds;
                              }
                              if (detail::is_internal(r)) return r;
                              if (r) ++seen;
                              return RewriteResult<P>::not_applicable(s.text(), "not this place");
                            }));
        RewriteResult<P> r = top_down(counted)(p, st);
        if (r || detail::is_internal(r)) return r;
        return RewriteResult<P>::not_applicable(
            text, s.text() + " applies at " + std::to_string(seen) + " place(s) only");
      }));
}

}  // namespace tessera
