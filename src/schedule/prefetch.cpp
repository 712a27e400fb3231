// prefetch: TVM's prefetch(tensor, loop, offset). Each iteration of the loop hints the cache
// lines of `buffer` that the iteration `distance` later reads, so that a stream the hardware
// prefetcher follows too closely (a layer's weights on their way from DRAM) arrives in time.
#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "schedule/location.h"
#include "schedule/loop_tools.h"
#include "schedule/rules.h"
#include "schedule/stage_tools.h"
#include "te/expr_functor.h"
#include "tir/stmt_functor.h"
#include "tir/structural_equal.h"

namespace tessera {

namespace {

// Most prefetches one iteration issues: beyond that the hints cost more issue slots than the
// misses they hide.
constexpr size_t kMaxPrefetches = 16;
// Most hints prefetch_next puts in one iteration of its inner loop: more means the inner loop is
// too short to spread the next iteration's lines over.
constexpr int64_t kMaxSpreadHints = 8;

bool prefetches(const Stmt& s, const Buffer& buffer) {
  class Finder : public StmtVisitor {
   public:
    explicit Finder(const Buffer& b) : buffer_(b) {}
    bool found = false;

   protected:
    using StmtVisitor::visit_;
    void visit_(const PrefetchNode& n, const Stmt& self) override {
      found |= n.buffer == buffer_;
      StmtVisitor::visit_(n, self);
    }

   private:
    const Buffer& buffer_;
  };
  Finder f(buffer);
  f.visit(s);
  return f.found;
}

// The index lists one iteration reads: unrolled inner loops (a register tile's rows) at each of
// their values, every other inner loop at its first iteration (a vector is one line). Innermost
// loops first, so that a start naming an outer one is substituted in turn.
std::vector<std::vector<Expr>> iteration_reads(const BufferSites& sites) {
  std::vector<std::vector<Expr>> out;
  auto add = [&out](std::vector<Expr> idx) {
    for (const auto& seen : out) {
      bool same = true;
      for (size_t d = 0; d < idx.size() && same; ++d) same = structural_equal(seen[d], idx[d]);
      if (same) return;
    }
    out.push_back(std::move(idx));
  };
  for (const BufferSites::Load& read : sites.loads) {
    std::vector<std::vector<Expr>> variants{read.load->indices};
    for (auto it = read.loops.rbegin(); it != read.loops.rend(); ++it) {
      const ForNode* loop = *it;
      const VarNode* var = loop->var.get();
      bool used = false;
      for (const Expr& i : variants.front()) used |= uses_var(i, var);
      if (!used) continue;
      bool enumerate = loop->for_kind == ForKind::kUnrolled &&
                       variants.size() * static_cast<size_t>(loop->extent) <= kMaxPrefetches;
      std::vector<std::vector<Expr>> next;
      for (const auto& v : variants)
        for (int64_t k = 0; k < (enumerate ? loop->extent : 1); ++k) {
          Expr at = k == 0 ? loop->min : loop->min + make_int(k);
          std::vector<Expr> idx;
          for (const Expr& i : v) idx.push_back(substitute(i, {{var, at}}));
          next.push_back(std::move(idx));
        }
      variants = std::move(next);
    }
    for (auto& v : variants) add(std::move(v));
  }
  return out;
}

}  // namespace

ProgramStrategy prefetch(const std::string& buffer, const std::string& loop_ref, int64_t distance) {
  std::string text = fmt::format("prefetch({}, {}, {})", buffer, loop_ref, distance);
  return ProgramStrategy(text, [=](const Program& p) {
    if (distance <= 0)
      return RewriteResult<Program>::not_applicable(text, "the distance must be positive");
    Resolved ref = resolve_loop(p, loop_ref);
    if (!ref.ok()) return RewriteResult<Program>::not_applicable(text, ref.error);
    const std::string& loop = ref.name;
    return rewrite_loop(
        p, text, loop, [&](const LoopSite& site) -> std::variant<Stmt, std::string> {
          const ForNode& n = *site.loop;
          if (n.for_kind == ForKind::kVectorized)
            return fmt::format("loop {} is vectorized: its lanes read one line", loop);
          Buffer b = find_buffer(p, buffer);
          BufferSites sites = b ? buffer_sites(n.body, b) : BufferSites{};
          if (b && prefetches(n.body, b))
            return fmt::format("{} is prefetched in loop {} already", buffer, loop);
          if (sites.loads.empty()) return fmt::format("loop {} reads no buffer {}", loop, buffer);
          std::vector<std::vector<Expr>> reads = iteration_reads(sites);
          if (reads.size() > kMaxPrefetches)
            return fmt::format("an iteration of loop {} reads {} at {} places (at most {})", loop,
                               buffer, reads.size(), kMaxPrefetches);
          Expr ahead = n.var + make_int(distance);
          std::vector<Stmt> body;
          for (const auto& idx : reads) {
            std::vector<Expr> shifted;
            for (const Expr& i : idx) shifted.push_back(substitute(i, {{n.var.get(), ahead}}));
            body.push_back(make_prefetch(b, std::move(shifted)));
          }
          body.push_back(n.body);
          return make_for(n.var, n.min, n.extent, n.for_kind, make_seq(std::move(body)));
        });
  });
}

ProgramStrategy prefetch_next(const std::string& buffer, const std::string& outer_ref,
                              const std::string& inner_ref) {
  std::string text = fmt::format("prefetch_next({}, {}, {})", buffer, outer_ref, inner_ref);
  return ProgramStrategy(text, [=](const Program& p) {
    Resolved outer = resolve_loop(p, outer_ref);
    if (!outer.ok()) return RewriteResult<Program>::not_applicable(text, outer.error);
    Resolved inner = resolve_loop(p, inner_ref);
    if (!inner.ok()) return RewriteResult<Program>::not_applicable(text, inner.error);
    // Rewritten at the inner loop, whose enclosing loops give the outer one and the loops
    // between that count its steps.
    return rewrite_loop(
        p, text, inner.name, [&](const LoopSite& site) -> std::variant<Stmt, std::string> {
          const ForNode& inner_loop = *site.loop;
          Buffer b = find_buffer(p, buffer);
          if (!b) return fmt::format("there is no buffer {}", buffer);
          auto at_outer =
              std::find_if(site.enclosing.begin(), site.enclosing.end(),
                           [&](const ForNode* f) { return f->var.name() == outer.name; });
          if (at_outer == site.enclosing.end())
            return fmt::format("loop {} is not inside {}", inner.name, outer.name);
          const ForNode& n = **at_outer;
          std::vector<const ForNode*> path(at_outer + 1, site.enclosing.end());
          path.push_back(&inner_loop);
          if (inner_loop.for_kind == ForKind::kVectorized)
            return fmt::format("loop {} is vectorized: its lanes read one line", inner.name);
          if (prefetches(n.body, b))
            return fmt::format("{} is prefetched in loop {} already", buffer, outer.name);
          std::variant<AccessBox, std::string> found = access_box(n, b, true, false);
          if (const auto* why = std::get_if<std::string>(&found)) return *why;
          const AccessBox& box = std::get<AccessBox>(found);
          // The box as runs of consecutive elements: one per index of the dimensions up to the
          // first (from the inside) that it does not cover whole, the dimensions after it being
          // whole. Hints go across the runs first, in the order the next iteration reads them
          // (a register tile's column blocks in step).
          const size_t ndim = b->shape.size();
          std::vector<int64_t> stride(ndim, 1);
          for (size_t d = ndim - 1; d > 0; --d) stride[d - 1] = stride[d] * b->shape[d];
          size_t first_partial = ndim - 1;
          while (first_partial > 0 && box.lo[first_partial] == 0 &&
                 box.extent[first_partial] == b->shape[first_partial])
            --first_partial;
          // A partial innermost dimension is itself the run.
          const bool inner_partial = first_partial == ndim - 1;
          const size_t run_dims = inner_partial ? ndim - 1 : first_partial + 1;
          const int64_t run = inner_partial ? box.extent.back() : stride[first_partial];
          int64_t runs = 1;
          for (size_t d = 0; d < run_dims; ++d) runs *= box.extent[d];
          const int64_t per_line = std::max<int64_t>(1, 64 / dtype_bytes(b->dtype));
          const int64_t lines_per_run = (run + per_line - 1) / per_line;
          const int64_t lines = runs * lines_per_run;
          // Iterations of the inner loop in one iteration of the outer, counted across the
          // loops between them, and the hints each issues so that they cover the next
          // iteration's lines by the time it starts.
          int64_t steps = 1;
          Expr step = make_int(0);
          for (const ForNode* f : path) {
            steps *= f->extent;
            step = step * make_int(f->extent) + (f->var - f->min);
          }
          const int64_t per_step = (lines + steps - 1) / steps;
          if (per_step > kMaxSpreadHints)
            return fmt::format(
                "{} lines of {} over {} iterations of {}: more than {} hints per iteration", lines,
                buffer, steps, inner.name, kMaxSpreadHints);
          // The next iteration's first element, as a flat offset.
          Expr next_start = make_int(0);
          for (size_t d = 0; d < ndim; ++d) {
            Expr at =
                substitute(box.base[d], {{n.var.get(), n.var + make_int(1)}}) + make_int(box.lo[d]);
            next_start = next_start + at * make_int(stride[d]);
          }
          std::vector<Stmt> hints;
          for (int64_t u = 0; u < per_step; ++u) {
            // The last steps repeat the last line rather than test: a guard here would split
            // the loops around it into versions (codegen partitions on conditions).
            Expr line = make_binary(ExprKind::kMin, step * make_int(per_step) + make_int(u),
                                    make_int(lines - 1));
            // Across the runs first: the run's index over the dimensions before the run.
            Expr run_index = line % make_int(runs);
            Expr offset = (line / make_int(runs)) * make_int(per_line);
            for (size_t d = run_dims; d-- > 0;) {
              offset = offset + (run_index % make_int(box.extent[d])) * make_int(stride[d]);
              run_index = run_index / make_int(box.extent[d]);
            }
            // A flat index in the last dimension: codegen's address is the same element.
            std::vector<Expr> indices(ndim, make_int(0));
            indices.back() = next_start + offset;
            hints.push_back(make_prefetch(b, indices));
          }
          return make_for(inner_loop.var, inner_loop.min, inner_loop.extent, inner_loop.for_kind,
                          make_seq({make_seq(std::move(hints)), inner_loop.body}));
        });
  });
}

namespace {

// Stores one execution of `s` runs: nested loops multiply, a vectorized loop is one store.
int64_t stores_run(const Stmt& s) {
  if (const auto* f = s.as<ForNode>())
    return (f->for_kind == ForKind::kVectorized ? 1 : f->extent) * stores_run(f->body);
  if (s.as<StoreNode>()) return 1;
  if (const auto* a = s.as<AllocateNode>()) return stores_run(a->body);
  if (const auto* q = s.as<SeqNode>()) {
    int64_t n = 0;
    for (const Stmt& c : q->stmts) n += stores_run(c);
    return n;
  }
  if (const auto* i = s.as<IfThenElseNode>())
    return std::max(stores_run(i->then_case),
                    i->else_case.defined() ? stores_run(i->else_case) : int64_t{0});
  return 0;
}

void lower_stores_per_hint(const Stmt& s, int64_t& fewest) {
  if (const auto* f = s.as<ForNode>()) {
    int64_t hints = 0;
    if (const auto* q = f->body.as<SeqNode>())
      for (const Stmt& c : q->stmts) hints += c.as<PrefetchNode>() != nullptr;
    if (hints > 0) fewest = std::min(fewest, stores_run(f->body) / hints);
    return lower_stores_per_hint(f->body, fewest);
  }
  if (const auto* a = s.as<AllocateNode>()) return lower_stores_per_hint(a->body, fewest);
  if (const auto* q = s.as<SeqNode>())
    for (const Stmt& c : q->stmts) lower_stores_per_hint(c, fewest);
  if (const auto* i = s.as<IfThenElseNode>()) {
    lower_stores_per_hint(i->then_case, fewest);
    if (i->else_case.defined()) lower_stores_per_hint(i->else_case, fewest);
  }
}

}  // namespace

int64_t stores_per_hint(const Program& program) {
  int64_t fewest = std::numeric_limits<int64_t>::max();
  lower_stores_per_hint(program.body, fewest);
  return fewest;
}

}  // namespace tessera
