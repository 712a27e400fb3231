// prefetch: TVM's prefetch(tensor, loop, offset). Each iteration of the loop hints the cache
// lines of `buffer` that the iteration `distance` later reads, so that a stream the hardware
// prefetcher follows too closely (a layer's weights on their way from DRAM) arrives in time.
#include <fmt/format.h>

#include <map>

#include "schedule/location.h"
#include "schedule/loop_tools.h"
#include "schedule/rules.h"
#include "te/expr_functor.h"
#include "tir/stmt_functor.h"
#include "tir/structural_equal.h"

namespace tessera {

namespace {

// Most prefetches one iteration issues: beyond that the hints cost more issue slots than the
// misses they hide.
constexpr size_t kMaxPrefetches = 16;

// The loops inside the target loop and every read of the buffer below them.
class ReadFinder : public StmtVisitor {
 public:
  explicit ReadFinder(const std::string& buffer) : buffer_(buffer) {}
  std::map<const VarNode*, const ForNode*> loops;
  std::vector<const LoadNode*> reads;
  bool prefetched = false;

 protected:
  class Loads : public ExprVisitor {
   public:
    explicit Loads(ReadFinder& f) : f_(f) {}

   protected:
    using ExprVisitor::visit_;
    void visit_(const LoadNode& n, const Expr& self) override {
      if (n.buffer->name == f_.buffer_) f_.reads.push_back(&n);
      ExprVisitor::visit_(n, self);
    }

   private:
    ReadFinder& f_;
  };

  void visit_expr(const Expr& e) override {
    Loads l(*this);
    l.visit(e);
  }
  void visit_(const ForNode& n, const Stmt& self) override {
    loops[n.var.get()] = &n;
    StmtVisitor::visit_(n, self);
  }
  void visit_(const PrefetchNode& n, const Stmt& self) override {
    prefetched |= n.buffer->name == buffer_;
    StmtVisitor::visit_(n, self);
  }
  using StmtVisitor::visit_;

 private:
  std::string buffer_;
};

// The index lists one iteration reads: unrolled inner loops (a register tile's rows) at each of
// their values, every other inner loop at its first iteration (a vector is one line).
std::vector<std::vector<Expr>> iteration_reads(const ReadFinder& f) {
  std::vector<std::vector<Expr>> out;
  auto add = [&out](std::vector<Expr> idx) {
    for (const auto& seen : out) {
      bool same = true;
      for (size_t d = 0; d < idx.size() && same; ++d) same = structural_equal(seen[d], idx[d]);
      if (same) return;
    }
    out.push_back(std::move(idx));
  };
  for (const LoadNode* read : f.reads) {
    std::vector<std::vector<Expr>> variants{read->indices};
    for (const auto& [var, loop] : f.loops) {
      bool used = false;
      for (const Expr& i : read->indices) used |= uses_var(i, var);
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
    // A loop's start may name an enclosing inner loop, which a later round then resolves.
    for (size_t round = 0; round < f.loops.size(); ++round)
      for (auto& v : variants)
        for (Expr& i : v)
          for (const auto& [var, loop] : f.loops)
            if (uses_var(i, var)) i = substitute(i, {{var, loop->min}});
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
          ReadFinder f(buffer);
          f.visit(n.body);
          if (f.prefetched) return fmt::format("{} is prefetched in loop {} already", buffer, loop);
          if (f.reads.empty()) return fmt::format("loop {} reads no buffer {}", loop, buffer);
          std::vector<std::vector<Expr>> reads = iteration_reads(f);
          if (reads.size() > kMaxPrefetches)
            return fmt::format("an iteration of loop {} reads {} at {} places (at most {})", loop,
                               buffer, reads.size(), kMaxPrefetches);
          Expr ahead = n.var + make_int(distance);
          std::vector<Stmt> body;
          for (const auto& idx : reads) {
            std::vector<Expr> shifted;
            for (const Expr& i : idx) shifted.push_back(substitute(i, {{n.var.get(), ahead}}));
            body.push_back(make_prefetch(f.reads.front()->buffer, std::move(shifted)));
          }
          body.push_back(n.body);
          return make_for(n.var, n.min, n.extent, n.for_kind, make_seq(std::move(body)));
        });
  });
}

}  // namespace tessera
