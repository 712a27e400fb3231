#include "schedule/stage_tools.h"

#include <fmt/format.h>

#include "te/expr_functor.h"
#include "tir/simplify.h"
#include "tir/stmt_functor.h"

namespace tessera {

namespace {

class BufferFinder : public StmtVisitor {
 public:
  explicit BufferFinder(const std::string& n) : name(n) {}
  const std::string& name;
  Buffer found;

 protected:
  void visit_(const AllocateNode& n, const Stmt& self) override {
    if (n.buffer->name == name && !found) found = n.buffer;
    StmtVisitor::visit_(n, self);
  }
  using StmtVisitor::visit_;
};

class LoopFinder : public StmtVisitor {
 public:
  explicit LoopFinder(const std::string& n) : name(n) {}
  const std::string& name;
  const ForNode* found = nullptr;

 protected:
  void visit_(const ForNode& n, const Stmt& self) override {
    if (found) return;
    if (n.var.name() == name) {
      found = &n;
      return;
    }
    StmtVisitor::visit_(n, self);
  }
  using StmtVisitor::visit_;
};

struct Access {
  std::vector<Expr> indices;
  std::vector<const ForNode*> inner;
};

class LoadsOf : public ExprVisitor {
 public:
  LoadsOf(const Buffer& b, std::vector<Access>& out, const std::vector<const ForNode*>& inner)
      : buffer_(b), out_(out), inner_(inner) {}

 protected:
  using ExprVisitor::visit_;
  void visit_(const LoadNode& n, const Expr& self) override {
    if (n.buffer == buffer_) out_.push_back({n.indices, inner_});
    ExprVisitor::visit_(n, self);
  }

 private:
  const Buffer& buffer_;
  std::vector<Access>& out_;
  const std::vector<const ForNode*>& inner_;
};

class AccessCollector : public StmtVisitor {
 public:
  AccessCollector(const Buffer& b, bool loads, bool stores)
      : buffer_(b), loads_(loads), stores_(stores) {}
  std::vector<Access> accesses;
  int loads = 0, stores = 0;

 protected:
  void visit_(const ForNode& n, const Stmt& self) override {
    inner_.push_back(&n);
    StmtVisitor::visit_(n, self);
    inner_.pop_back();
  }
  void visit_(const StoreNode& n, const Stmt& self) override {
    if (n.buffer == buffer_) {
      ++stores;
      if (stores_) accesses.push_back({n.indices, inner_});
    }
    StmtVisitor::visit_(n, self);
  }
  void visit_expr(const Expr& e) override {
    std::vector<Access> found;
    LoadsOf l(buffer_, found, inner_);
    l.visit(e);
    loads += static_cast<int>(found.size());
    if (loads_) accesses.insert(accesses.end(), found.begin(), found.end());
  }
  using StmtVisitor::visit_;

 private:
  const Buffer& buffer_;
  bool loads_, stores_;
  std::vector<const ForNode*> inner_;
};

class StoreCounter : public StmtVisitor {
 public:
  explicit StoreCounter(const Buffer& b) : buffer_(b) {}
  int stores = 0;

 protected:
  void visit_(const StoreNode& n, const Stmt& self) override {
    stores += n.buffer == buffer_;
    StmtVisitor::visit_(n, self);
  }
  using StmtVisitor::visit_;

 private:
  const Buffer& buffer_;
};

// Candidate stage nests: For statements directly in a Seq or at the top of an Allocate/program.
class NestCandidates : public StmtVisitor {
 public:
  std::vector<Stmt> nests;

 protected:
  void visit_(const ForNode&, const Stmt& self) override { nests.push_back(self); }
  using StmtVisitor::visit_;
};

class StatementRemover : public StmtMutator {
 public:
  explicit StatementRemover(const Stmt& t) : target_(t) {}

 protected:
  Stmt visit_(const SeqNode& n, const Stmt& self) override {
    std::vector<Stmt> kept;
    bool changed = false;
    for (const Stmt& s : n.stmts) {
      if (s.same_as(target_)) {
        changed = true;
        continue;
      }
      Stmt m = visit(s);
      changed |= !m.same_as(s);
      kept.push_back(m);
    }
    if (!changed) return self;
    return make_seq(std::move(kept));
  }
  using StmtMutator::visit_;

 private:
  const Stmt& target_;
};

// Loads and stores of `from` become accesses of `to` at indices computed from the old ones.
class Reindex : public StmtMutator {
 public:
  Reindex(const Buffer& from, const Buffer& to, const IndexMap& map)
      : from_(from), to_(to), map_(map) {}

 protected:
  class Loads : public ExprMutator {
   public:
    explicit Loads(const Reindex& r) : r_(r) {}

   protected:
    using ExprMutator::visit_;
    Expr visit_(const LoadNode& n, const Expr& self) override {
      Expr e = ExprMutator::visit_(n, self);
      const auto* load = e.as<LoadNode>();
      return load->buffer == r_.from_ ? make_load(r_.to_, r_.map_(load->indices)) : e;
    }

   private:
    const Reindex& r_;
  };
  Expr mutate_expr(const Expr& e) override {
    Loads l(*this);
    return l.visit(e);
  }
  Stmt visit_(const StoreNode& n, const Stmt& self) override {
    Stmt s = StmtMutator::visit_(n, self);
    const auto* store = s.as<StoreNode>();
    return store->buffer == from_ ? make_store(to_, map_(store->indices), store->value) : s;
  }
  Stmt visit_(const AllocateNode& n, const Stmt& self) override {
    Stmt s = StmtMutator::visit_(n, self);
    const auto* alloc = s.as<AllocateNode>();
    return alloc->buffer == from_ ? make_allocate(to_, alloc->body) : s;
  }
  using StmtMutator::visit_;

 private:
  const Buffer& from_;
  const Buffer& to_;
  const IndexMap& map_;
};

}  // namespace

bool is_constant(const Expr& e) {
  return e.as<IntImmNode>() || e.as<FloatImmNode>();
}

Buffer find_buffer(const Program& p, const std::string& name) {
  for (const Buffer& b : p.args()) {
    if (b->name == name) return b;
  }
  BufferFinder f(name);
  f.visit(p.body);
  return f.found;
}

bool is_argument(const Program& p, const Buffer& b) {
  for (const Buffer& a : p.args()) {
    if (a == b) return true;
  }
  return false;
}

const ForNode* find_loop(const Program& p, const std::string& name) {
  LoopFinder f(name);
  f.visit(p.body);
  return f.found;
}

std::variant<AccessBox, std::string> access_box(const ForNode& loop, const Buffer& buffer,
                                                bool loads, bool stores) {
  AccessCollector c(buffer, loads, stores);
  c.visit(loop.body);
  AccessBox box;
  box.loads = c.loads;
  box.stores = c.stores;
  if (c.accesses.empty())
    return fmt::format("the body of {} does not access {}", loop.var.name(), buffer->name);
  size_t ndim = buffer->shape.size();
  std::vector<int64_t> hi(ndim);
  for (size_t a = 0; a < c.accesses.size(); ++a) {
    const Access& acc = c.accesses[a];
    RangeMap inner_ranges;
    std::vector<std::pair<const VarNode*, Expr>> inner_zero;
    // A loop inside that starts at a value of the loops outside (a stage already computed at
    // this loop) counts from 0 in a fresh variable; its start joins the base.
    std::vector<Var> counters;
    std::vector<std::pair<const VarNode*, Expr>> from_zero;
    for (const ForNode* f : acc.inner) {
      Expr start = simplify(f->min);
      if (const int64_t* mn = as_const_int(start)) {
        inner_ranges[f->var.get()] = {*mn, *mn + f->extent - 1};
        inner_zero.emplace_back(f->var.get(), make_int(0));
        continue;
      }
      for (const ForNode* g : acc.inner) {
        if (uses_var(start, g->var.get()))
          return fmt::format("loop {} inside {} starts at a value of loop {} inside it",
                             f->var.name(), loop.var.name(), g->var.name());
      }
      counters.emplace_back(f->var.name());
      from_zero.emplace_back(f->var.get(), start + counters.back());
      inner_ranges[counters.back().get()] = {0, f->extent - 1};
      inner_zero.emplace_back(counters.back().get(), make_int(0));
    }
    for (size_t d = 0; d < ndim; ++d) {
      Expr index = simplify(substitute(acc.indices[d], from_zero));
      Expr base = simplify(substitute(index, inner_zero));
      std::optional<IntRange> span = bound_of(simplify(index - base), inner_ranges);
      if (!span) {
        return fmt::format("index {} of {} does not separate into parts outside and inside {}", d,
                           buffer->name, loop.var.name());
      }
      if (a == 0) {
        box.base.push_back(base);
        box.lo.push_back(span->min);
        hi[d] = span->max;
        continue;
      }
      const Expr difference = simplify(base - box.base[d]);
      const int64_t* delta = as_const_int(difference);
      if (!delta) {
        return fmt::format("accesses to {} in {} are not a constant distance apart", buffer->name,
                           loop.var.name());
      }
      box.lo[d] = std::min(box.lo[d], span->min + *delta);
      hi[d] = std::max(hi[d], span->max + *delta);
    }
  }
  for (size_t d = 0; d < ndim; ++d) box.extent.push_back(hi[d] - box.lo[d] + 1);
  return box;
}

std::variant<StageNest, std::string> find_stage_nest(const Program& p, const Buffer& buffer) {
  StoreCounter all(buffer);
  all.visit(p.body);
  if (all.stores == 0) return "nothing writes " + buffer->name;
  NestCandidates candidates;
  candidates.visit(p.body);
  for (const Stmt& nest : candidates.nests) {
    StoreCounter here(buffer);
    here.visit(nest);
    if (here.stores == 0) continue;
    if (here.stores != all.stores) break;
    StageNest s;
    s.stmt = nest;
    Stmt cur = nest;
    while (const auto* f = cur.as<ForNode>()) {
      s.loops.push_back(f);
      cur = f->body;
    }
    s.store = cur.as<StoreNode>();
    bool plain = s.store && s.loops.size() == buffer->shape.size();
    for (size_t d = 0; plain && d < s.loops.size(); ++d) {
      plain = s.store->indices[d].as<VarNode>() == s.loops[d]->var.get();
    }
    if (!plain)
      return "stage " + buffer->name + " is not a single plain loop nest storing " + buffer->name +
             "[loop variables]";
    return s;
  }
  return "stage " + buffer->name +
         " is written by more than one loop nest (a reduction is an init and an update nest)";
}

std::variant<ReductionNests, std::string> find_reduction_nests(const Program& p,
                                                               const Buffer& buffer) {
  StoreCounter all(buffer);
  all.visit(p.body);
  if (all.stores == 0) return "nothing writes " + buffer->name;
  NestCandidates candidates;
  candidates.visit(p.body);
  std::vector<Stmt> writers;
  int stores = 0;
  for (const Stmt& nest : candidates.nests) {
    StoreCounter here(buffer);
    here.visit(nest);
    if (here.stores == 0) continue;
    writers.push_back(nest);
    stores += here.stores;
  }
  if (writers.size() != 2 || stores != all.stores)
    return "stage " + buffer->name + " is not one init nest and one update nest";
  ReductionNests r;
  r.init.stmt = writers[0];
  Stmt cur = writers[0];
  while (const auto* f = cur.as<ForNode>()) {
    r.init.loops.push_back(f);
    cur = f->body;
  }
  r.init.store = cur.as<StoreNode>();
  const size_t ndim = buffer->shape.size();
  bool plain = r.init.store && r.init.loops.size() == ndim && is_constant(r.init.store->value);
  for (size_t d = 0; plain && d < ndim; ++d)
    plain = r.init.store->indices[d].as<VarNode>() == r.init.loops[d]->var.get();
  if (!plain)
    return "the first nest writing " + buffer->name +
           " is not a plain nest storing a constant (a reduction's init)";
  r.update = writers[1];
  cur = writers[1];
  while (r.update_loops.size() < ndim) {
    const auto* f = cur.as<ForNode>();
    if (!f) break;
    r.update_loops.push_back(f);
    cur = f->body;
  }
  r.reduction_body = cur;
  bool outer_plain = r.update_loops.size() == ndim;
  BufferSites sites = buffer_sites(cur, buffer);
  for (const auto& st : sites.stores) {
    for (size_t d = 0; outer_plain && d < ndim; ++d)
      outer_plain = st.store->indices[d].as<VarNode>() == r.update_loops[d]->var.get();
  }
  for (const auto& ld : sites.loads) {
    for (size_t d = 0; outer_plain && d < ndim; ++d)
      outer_plain = ld.load->indices[d].as<VarNode>() == r.update_loops[d]->var.get();
  }
  if (!outer_plain)
    return "the update of " + buffer->name +
           " does not start with one loop per dimension of it, accessing it at those loops";
  return r;
}

BufferSites buffer_sites(const Stmt& s, const Buffer& buffer) {
  class Walk : public StmtVisitor {
   public:
    explicit Walk(const Buffer& b) : buffer_(b) {}
    BufferSites sites;

   protected:
    void visit_(const ForNode& n, const Stmt& self) override {
      stack_.push_back(&n);
      StmtVisitor::visit_(n, self);
      stack_.pop_back();
    }
    void visit_(const StoreNode& n, const Stmt& self) override {
      if (n.buffer == buffer_) sites.stores.push_back({&n, stack_, guards_});
      StmtVisitor::visit_(n, self);
    }
    void visit_(const IfThenElseNode& n, const Stmt&) override {
      visit_expr(n.cond);
      guards_.push_back(n.cond);
      visit(n.then_case);
      guards_.back() = !n.cond;
      if (n.else_case.defined()) visit(n.else_case);
      guards_.pop_back();
    }
    void visit_expr(const Expr& e) override {
      class Loads : public ExprVisitor {
       public:
        explicit Loads(Walk& w) : w_(w) {}

       protected:
        using ExprVisitor::visit_;
        void visit_(const LoadNode& l, const Expr& self) override {
          if (l.buffer == w_.buffer_) w_.sites.loads.push_back({&l, w_.stack_});
          ExprVisitor::visit_(l, self);
        }

       private:
        Walk& w_;
      };
      Loads l(*this);
      l.visit(e);
    }
    using StmtVisitor::visit_;

   private:
    const Buffer& buffer_;
    std::vector<const ForNode*> stack_;
    std::vector<Expr> guards_;
  };
  Walk w(buffer);
  w.visit(s);
  return std::move(w.sites);
}

int count_stores(const Stmt& s) {
  class Counter : public StmtVisitor {
   public:
    int stores = 0;

   protected:
    void visit_(const StoreNode& n, const Stmt& self) override {
      ++stores;
      StmtVisitor::visit_(n, self);
    }
    using StmtVisitor::visit_;
  } counter;
  counter.visit(s);
  return counter.stores;
}

Stmt loop_statement(const Stmt& root, const ForNode* loop) {
  class Find : public StmtVisitor {
   public:
    explicit Find(const ForNode* target) : target_(target) {}
    Stmt found;

   protected:
    void visit_(const ForNode& n, const Stmt& self) override {
      if (&n == target_) found = self;
      if (!found.defined()) StmtVisitor::visit_(n, self);
    }
    using StmtVisitor::visit_;

   private:
    const ForNode* target_;
  };
  Find f(loop);
  f.visit(root);
  return f.found;
}

Stmt remove_statement(const Stmt& root, const Stmt& target) {
  StatementRemover r(target);
  return r.visit(root);
}

bool allocated_inside(const Stmt& s, const Buffer& buffer) {
  class Finder : public StmtVisitor {
   public:
    explicit Finder(const Buffer& b) : buffer_(b) {}
    bool found = false;

   protected:
    void visit_(const AllocateNode& n, const Stmt& self) override {
      found |= n.buffer == buffer_;
      StmtVisitor::visit_(n, self);
    }
    using StmtVisitor::visit_;

   private:
    const Buffer& buffer_;
  } finder(buffer);
  finder.visit(s);
  return finder.found;
}

Stmt reindex_buffer(const Stmt& s, const Buffer& from, const Buffer& to, const IndexMap& map) {
  Reindex r(from, to, map);
  return r.visit(s);
}

Stmt redirect_buffer(const Stmt& s, const Buffer& from, const Buffer& to,
                     const std::vector<Expr>& offset, const std::vector<size_t>& order) {
  return reindex_buffer(s, from, to, [&](const std::vector<Expr>& idx) {
    std::vector<Expr> out;
    for (size_t d = 0; d < idx.size(); ++d) {
      size_t src = order.empty() ? d : order[d];
      out.push_back(simplify(idx[src] - offset[src]));
    }
    return out;
  });
}

Stmt remove_allocation(const Stmt& s, const Buffer& buffer) {
  class Remover : public StmtMutator {
   public:
    explicit Remover(const Buffer& b) : buffer_(b) {}

   protected:
    Stmt visit_(const AllocateNode& n, const Stmt& self) override {
      return n.buffer == buffer_ ? visit(n.body) : StmtMutator::visit_(n, self);
    }
    using StmtMutator::visit_;

   private:
    const Buffer& buffer_;
  } remover(buffer);
  return remover.visit(s);
}

Expr in_bounds(const Buffer& b, const std::vector<Expr>& indices) {
  Expr cond;
  for (size_t d = 0; d < indices.size(); ++d) {
    Expr c = indices[d] >= make_int(0) && indices[d] < make_int(b->shape[d]);
    cond = cond.defined() ? (cond && c) : c;
  }
  return cond.defined() ? cond : make_int(1, DType::kBool);
}

}  // namespace tessera
