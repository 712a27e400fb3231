// prefetch: TVM's prefetch(tensor, loop, offset). Each iteration of the loop hints the cache
// lines of `buffer` that the iteration `distance` later reads, so that a stream the hardware
// prefetcher follows too closely (a layer's weights on their way from DRAM) arrives in time.
#include <fmt/format.h>

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

}  // namespace tessera
