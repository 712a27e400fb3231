#include <fmt/format.h>

#include <algorithm>

#include "schedule/location.h"
#include "schedule/rules.h"
#include "schedule/stage_tools.h"
#include "te/expr_functor.h"
#include "tir/simplify.h"
#include "tir/stmt_functor.h"
#include "tir/structural_equal.h"

namespace tessera {

namespace {

// Reads of `from` become reads of `to` at `indices`; the loop nest `at` gets `prelude` before it,
// both inside the allocation of `to`.
class Redirect : public StmtMutator {
 public:
  Redirect(const Buffer& from, const Buffer& to, std::vector<Expr> indices, const ForNode* at,
           Stmt prelude)
      : from_(from), to_(to), indices_(std::move(indices)), at_(at), prelude_(std::move(prelude)) {}

 protected:
  Stmt visit_(const ForNode& n, const Stmt& self) override {
    Stmt s = StmtMutator::visit_(n, self);
    if (&n != at_) return s;
    return make_allocate(to_, make_seq({prelude_, s}));
  }
  Expr mutate_expr(const Expr& e) override {
    class Loads : public ExprMutator {
     public:
      explicit Loads(const Redirect& r) : r_(r) {}

     protected:
      using ExprMutator::visit_;
      Expr visit_(const LoadNode& n, const Expr& self) override {
        if (n.buffer == r_.from_) return make_load(r_.to_, r_.indices_);
        return ExprMutator::visit_(n, self);
      }

     private:
      const Redirect& r_;
    };
    Loads l(*this);
    return l.visit(e);
  }
  using StmtMutator::visit_;

 private:
  const Buffer& from_;
  const Buffer& to_;
  std::vector<Expr> indices_;
  const ForNode* at_;
  Stmt prelude_;
};

}  // namespace

// The read of `buffer` becomes a read of a new array indexed by the named loops, filled by a nest
// of its own before the loop nest that reads it. With a convolution's (rc, ry, rx, y, x) that
// array is im2col's matrix: fusing rc, ry, rx and y, x then leaves a plain matrix product.
ProgramStrategy gather(const std::string& buffer_name, const std::vector<std::string>& loop_refs) {
  std::string text = fmt::format("gather({}, {})", buffer_name, fmt::join(loop_refs, ", "));
  return ProgramStrategy(text, [=](const Program& p) {
    auto fail = [&](const std::string& why) {
      return RewriteResult<Program>::not_applicable(text, why);
    };
    Buffer buffer = find_buffer(p, buffer_name);
    if (!buffer) return fail("no buffer named " + buffer_name);
    std::vector<const ForNode*> loops;
    for (const std::string& ref : loop_refs) {
      Resolved r = resolve_loop(p, ref);
      if (!r.ok()) return fail(r.error);
      const ForNode* l = find_loop(p, r.name);
      if (!l) return fail("no loop named " + r.name);
      if (std::find(loops.begin(), loops.end(), l) != loops.end())
        return fail("loop " + r.name + " is named twice");
      loops.push_back(l);
    }

    BufferSites sites = buffer_sites(p.body, buffer);
    if (sites.loads.empty()) return fail("nothing reads " + buffer_name);
    const BufferSites::Load& first = sites.loads.front();
    for (const BufferSites::Load& s : sites.loads) {
      if (s.loops.empty() || s.loops.front() != first.loops.front())
        return fail(buffer_name + " is read by more than one loop nest");
      bool same = s.load->indices.size() == first.load->indices.size();
      for (size_t d = 0; same && d < s.load->indices.size(); ++d)
        same = structural_equal(s.load->indices[d], first.load->indices[d]);
      if (!same) return fail(buffer_name + " is read at different indices");
    }
    // At every read, the named loops are around it and the indices use no other loop.
    for (const BufferSites::Load& site : sites.loads) {
      for (const ForNode* l : loops) {
        if (std::find(site.loops.begin(), site.loops.end(), l) == site.loops.end())
          return fail(
              fmt::format("loop {} is not around the read of {}", l->var.name(), buffer_name));
        if (!as_const_int(l->min))
          return fail(fmt::format("loop {} has a variable start", l->var.name()));
      }
      for (const ForNode* l : site.loops) {
        if (std::find(loops.begin(), loops.end(), l) != loops.end()) continue;
        for (const Expr& index : site.load->indices) {
          if (uses_var(index, l->var.get()))
            return fail(fmt::format("the read of {} depends on loop {}, which is not gathered",
                                    buffer_name, l->var.name()));
        }
      }
    }
    // The nest holding the reads must not write the buffer: the copy is taken before it.
    Stmt nest = loop_statement(p.body, first.loops.front());
    if (!buffer_sites(nest, buffer).stores.empty())
      return fail(fmt::format("the nest reading {} also writes it", buffer_name));

    std::vector<int64_t> shape;
    std::vector<Var> vars;
    std::vector<std::pair<const VarNode*, Expr>> map;
    std::vector<Expr> new_indices;
    for (size_t d = 0; d < loops.size(); ++d) {
      shape.push_back(loops[d]->extent);
      vars.emplace_back(fmt::format("{}.gather.{}", buffer_name, d));
      map.emplace_back(loops[d]->var.get(), Expr(vars[d]) + loops[d]->min);
      new_indices.push_back(Expr(loops[d]->var) - loops[d]->min);
    }
    Buffer gathered = make_buffer(buffer_name + ".gathered", buffer->dtype, shape);
    std::vector<Expr> source;
    for (const Expr& index : first.load->indices) source.push_back(substitute(index, map));
    // The read may sit under a guard (a partial tile) that the copy does not have: outside the
    // buffer the copy holds 0, never read. The simplifier drops the test where ranges prove it.
    Expr zero = is_float(buffer->dtype) ? make_float(0, buffer->dtype) : make_int(0, buffer->dtype);
    Stmt fill = make_store(gathered, std::vector<Expr>(vars.begin(), vars.end()),
                           select(in_bounds(buffer, source), make_load(buffer, source), zero));
    for (size_t d = loops.size(); d-- > 0;)
      fill = make_for(vars[d], make_int(0), shape[d], ForKind::kSerial, fill);
    Redirect redirect(buffer, gathered, new_indices, first.loops.front(), fill);
    Program out = p;
    out.body = simplify(redirect.visit(p.body));
    return RewriteResult<Program>::success(std::move(out));
  });
}

}  // namespace tessera
