#include <fmt/format.h>

#include <optional>
#include <variant>

#include "schedule/rules.h"
#include "schedule/stage_tools.h"
#include "tir/printer.h"
#include "tir/simplify.h"
#include "tir/stmt_functor.h"

namespace tessera {

namespace {

// The copy-back nest cache_write emits: perfect loops over the cache, one store (possibly under
// the bounds guard) `buffer[offset + v permuted] = local[v]`. Gives, per dimension of the cache,
// the buffer dimension it lays out, and the buffer's offset per dimension.
struct CopyBack {
  std::vector<size_t> layout;  // cache dimension d holds buffer dimension layout[d]
  std::vector<Expr> offset;    // per buffer dimension
};

std::optional<CopyBack> read_copy_back(const Stmt& s, const Buffer& buffer, const Buffer& local) {
  std::vector<const ForNode*> loops;
  Stmt at = s;
  while (const auto* f = at.as<ForNode>()) {
    loops.push_back(f);
    at = f->body;
  }
  if (const auto* guard = at.as<IfThenElseNode>()) {
    if (guard->else_case.defined()) return std::nullopt;
    at = guard->then_case;
  }
  const auto* store = at.as<StoreNode>();
  if (!store || store->buffer != buffer) return std::nullopt;
  const auto* load = store->value.as<LoadNode>();
  if (!load || load->buffer != local || loops.size() != local->shape.size()) return std::nullopt;
  CopyBack out{std::vector<size_t>(loops.size()), std::vector<Expr>(store->indices.size())};
  std::vector<bool> claimed(store->indices.size(), false);
  for (size_t d = 0; d < loops.size(); ++d) {
    const auto* v = load->indices[d].as<VarNode>();
    const int64_t* min = as_const_int(loops[d]->min);
    if (v != loops[d]->var.get() || !min || *min != 0) return std::nullopt;
    std::optional<size_t> dim;
    for (size_t g = 0; g < store->indices.size(); ++g) {
      std::optional<int64_t> c = affine_coefficient(store->indices[g], v);
      if (!c) return std::nullopt;
      if (*c == 0) continue;
      if (*c != 1 || dim || claimed[g]) return std::nullopt;
      dim = g;
    }
    if (!dim) return std::nullopt;
    claimed[*dim] = true;
    out.layout[d] = *dim;
    out.offset[*dim] = simplify(substitute(store->indices[*dim], {{v, make_int(0)}}));
  }
  for (bool c : claimed)
    if (!c) return std::nullopt;
  return out;
}

// True if every store in `s` (at least one) sets `buffer` to a constant: an init nest.
bool only_sets_constants(const Stmt& s, const Buffer& buffer) {
  BufferSites sites = buffer_sites(s, buffer);
  if (sites.stores.empty() || count_stores(s) != static_cast<int>(sites.stores.size()))
    return false;
  for (const BufferSites::Store& st : sites.stores)
    if (!is_constant(st.store->value)) return false;
  return true;
}

// Rewrites the one sequence holding the copy-back of `local` into `buffer`, with the epilogue
// statements after it, so that they read the cache: the copy-back goes and the statements move
// inside the cache's allocation. Everything the rule checks about the program as a whole
// (nothing else reads the buffer) is checked by the caller.
class ForwardCache : public StmtMutator {
 public:
  ForwardCache(const Buffer& buffer, const Buffer& local) : buffer_(buffer), local_(local) {}
  int forwarded = 0;
  int loads_forwarded = 0;
  std::string why_not = "no copy-back of the write cache is followed by a read of the buffer";

 protected:
  Stmt visit_(const SeqNode& n, const Stmt& self) override {
    for (size_t i = 0; i < n.stmts.size(); ++i) {
      const auto* alloc = n.stmts[i].as<AllocateNode>();
      if (!alloc || alloc->buffer != local_ || i + 1 == n.stmts.size()) continue;
      const auto* inner = alloc->body.as<SeqNode>();
      if (!inner || inner->stmts.empty()) continue;
      std::optional<CopyBack> copy = read_copy_back(inner->stmts.back(), buffer_, local_);
      if (!copy) continue;
      std::vector<Stmt> after(n.stmts.begin() + static_cast<long>(i) + 1, n.stmts.end());
      std::optional<Stmt> reading = redirect(make_seq(after), *copy);
      if (!reading) return self;
      std::vector<Stmt> body(inner->stmts.begin(), inner->stmts.end() - 1);
      body.push_back(*reading);
      std::vector<Stmt> out(n.stmts.begin(), n.stmts.begin() + static_cast<long>(i));
      out.push_back(make_allocate(local_, make_seq(body)));
      ++forwarded;
      return make_seq(out);
    }
    return StmtMutator::visit_(n, self);
  }
  using StmtMutator::visit_;

 private:
  // `s` reading the cache where it read the buffer, when every read falls inside the block the
  // cache holds (so reads the value this iteration just computed) and `s` writes neither.
  std::optional<Stmt> redirect(const Stmt& s, const CopyBack& copy) {
    BufferSites sites = buffer_sites(s, buffer_);
    if (!sites.stores.empty() || !buffer_sites(s, local_).stores.empty()) {
      why_not = "the statements after the copy-back write the buffer or its cache";
      return std::nullopt;
    }
    auto to_local = [&](const std::vector<Expr>& idx) {
      std::vector<Expr> out;
      for (size_t d = 0; d < copy.layout.size(); ++d)
        out.push_back(simplify(idx[copy.layout[d]] - copy.offset[copy.layout[d]]));
      return out;
    };
    for (const BufferSites::Load& site : sites.loads) {
      RangeMap ranges;
      for (const ForNode* loop : site.loops) {
        const int64_t* min = as_const_int(loop->min);
        if (!min) {
          why_not = fmt::format("loop {} does not start at a constant", loop->var.name());
          return std::nullopt;
        }
        ranges[loop->var.get()] = {*min, *min + loop->extent - 1};
      }
      std::vector<Expr> idx = to_local(site.load->indices);
      for (size_t d = 0; d < idx.size(); ++d) {
        std::optional<IntRange> r = bound_of(idx[d], ranges);
        if (!r || r->min < 0 || r->max >= local_->shape[d]) {
          why_not = fmt::format("the read at {} may leave the cached block", print_expr(idx[d]));
          return std::nullopt;
        }
      }
    }
    loads_forwarded += static_cast<int>(sites.loads.size());
    return reindex_buffer(s, buffer_, local_, to_local);
  }

  const Buffer& buffer_;
  const Buffer& local_;
};

// Removes the nests that only set `buffer` to constants (its init), wherever they sit in a
// sequence.
class DropInits : public StmtMutator {
 public:
  explicit DropInits(const Buffer& buffer) : buffer_(buffer) {}

 protected:
  Stmt visit_(const SeqNode& n, const Stmt& self) override {
    std::vector<Stmt> kept;
    bool changed = false;
    for (const Stmt& s : n.stmts) {
      if (only_sets_constants(s, buffer_)) {
        changed = true;
        continue;
      }
      Stmt v = visit(s);
      changed = changed || !v.same_as(s);
      kept.push_back(v);
    }
    return changed ? make_seq(kept) : self;
  }
  using StmtMutator::visit_;

 private:
  const Buffer& buffer_;
};

RewriteResult<Program> fuse_stage_write_back(const Program& p, const std::string& text,
                                             const std::string& name) {
  auto fail = [&](const std::string& why) {
    return RewriteResult<Program>::not_applicable(text, why);
  };
  Buffer buffer = find_buffer(p, name);
  if (!buffer) return fail("no buffer named " + name);
  if (is_argument(p, buffer)) return fail(name + " is an argument: its writes must stay");
  Buffer local = find_buffer(p, name + ".local");
  if (!local) return fail("no write cache " + name + ".local (cache_write first)");
  BufferSites before = buffer_sites(p.body, buffer);
  if (before.loads.empty()) return fail("nothing reads " + name);

  ForwardCache forward(buffer, local);
  Stmt body = forward.visit(p.body);
  if (forward.forwarded != 1) {
    return fail(forward.forwarded == 0 ? forward.why_not
                                       : "more than one copy-back of " + name + " is read");
  }
  if (forward.loads_forwarded != static_cast<int>(before.loads.size()))
    return fail(name + " is read outside the statements after its copy-back");
  // What stays of the buffer are its init nests; with them goes the buffer.
  body = DropInits(buffer).visit(body);
  BufferSites left = buffer_sites(body, buffer);
  if (!left.loads.empty() || !left.stores.empty())
    return fail(name + " is written other than by its init and the copy-back");
  Program out = p;
  out.body = simplify(remove_allocation(body, buffer));
  return RewriteResult<Program>::success(std::move(out));
}

}  // namespace

ProgramStrategy fuse_write_back(const std::string& stage) {
  std::string text = fmt::format("fuse_write_back({})", stage);
  return ProgramStrategy(text,
                         [=](const Program& p) { return fuse_stage_write_back(p, text, stage); });
}

}  // namespace tessera
