// Base pointers hoisted out of unrolled loop nests.
//
// A register tile is a nest of unrolled loops whose accesses differ by constants once unrolled:
// pad[(y + ry) * 256 + (x + xi + rx) * 16 + ib] for 14 values of xi. gcc computes each copy's
// 32-bit index on its own and keeps one register per copy, then spills them (a grouped 3x3
// convolution's tile of 14 columns). Taking the part of the index that no loop of the nest
// changes into a pointer before the nest leaves constant displacements from one base: the same
// C with such a pointer ran that kernel 0.092 -> 0.074 ms on one thread (Emerald Rapids).

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "codegen/codegen_c_emitter.h"
#include "tir/stmt_functor.h"

namespace tessera::codegen_c_detail {
namespace {

// Whether every variable of e is one of `vars` and e reads no memory (a loaded index may change
// inside the nest).
bool only_uses(const Expr& e, const std::set<const VarNode*>& vars) {
  class Check : public ExprVisitor {
   public:
    explicit Check(const std::set<const VarNode*>& vars) : vars_(vars) {}
    bool ok = true;

   protected:
    void visit_(const VarNode& n, const Expr&) override { ok &= vars_.count(&n) > 0; }
    void visit_(const LoadNode&, const Expr&) override { ok = false; }
    using ExprVisitor::visit_;

   private:
    const std::set<const VarNode*>& vars_;
  };
  Check check(vars);
  check.visit(e);
  return check.ok;
}

struct Access {
  Buffer buffer;
  Expr flat;
  bool store;
};

// Every load, store and prefetch in a statement, with its flat index.
class CollectAccesses : public StmtVisitor {
 public:
  std::vector<Access> accesses;

 protected:
  void visit_expr(const Expr& e) override {
    class Loads : public ExprVisitor {
     public:
      explicit Loads(std::vector<Access>& out) : out_(out) {}

     protected:
      void visit_(const LoadNode& n, const Expr& self) override {
        out_.push_back({n.buffer, CEmitter::flat_index(n.buffer, n.indices), false});
        ExprVisitor::visit_(n, self);
      }
      using ExprVisitor::visit_;

     private:
      std::vector<Access>& out_;
    };
    Loads loads(accesses);
    loads.visit(e);
  }
  void visit_(const StoreNode& n, const Stmt& self) override {
    accesses.push_back({n.buffer, CEmitter::flat_index(n.buffer, n.indices), true});
    StmtVisitor::visit_(n, self);
  }
  void visit_(const PrefetchNode& n, const Stmt& self) override {
    accesses.push_back({n.buffer, CEmitter::flat_index(n.buffer, n.indices), false});
    StmtVisitor::visit_(n, self);
  }
  using StmtVisitor::visit_;
};

}  // namespace

std::optional<IndexSplit> split_index(const Expr& flat, const std::set<const VarNode*>& outer) {
  auto parts = split_linear(flat, [&](const Expr& atom) { return only_uses(atom, outer); });
  if (!parts) return std::nullopt;
  return IndexSplit{parts->first, parts->second};
}

void CEmitter::hoist_invariant_addresses(const ForNode& nest) {
  CollectAccesses collect;
  collect.visit(nest.body);
  std::set<const VarNode*> outer;
  for (const auto& [v, binding] : bound_vars_) outer.insert(v);
  outer.erase(nest.var.get());

  struct Group {
    Buffer buffer;
    Expr invariant;
  };
  std::vector<Group> groups;
  // A buffer the nest stores to keeps its direct indexing unless every access to it goes through
  // one base: gcc cannot tell two bases of one buffer apart, and would order their loads behind
  // every store.
  std::map<const BufferNode*, bool> stored, mixed;
  for (const Access& a : collect.accesses) {
    const BufferNode* b = a.buffer.get();
    stored[b] |= a.store;
    // A buffer allocated inside the nest has no name out here. (A register tile, a stack array
    // the nest indexes by its own variables alone, has no invariant part below.)
    if (!buffer_names_.count(b)) {
      mixed[b] = true;
      continue;
    }
    std::optional<IndexSplit> split = split_index(a.flat, outer);
    if (!split) {
      mixed[b] = true;
      continue;
    }
    auto same = [&](const Group& g) {
      return g.buffer.get() == b && same_expr(g.invariant, split->invariant);
    };
    if (std::none_of(groups.begin(), groups.end(), same)) {
      if (std::any_of(groups.begin(), groups.end(),
                      [&](const Group& g) { return g.buffer.get() == b; })) {
        mixed[b] = true;
      }
      groups.push_back({a.buffer, split->invariant});
    }
  }
  for (const Group& g : groups) {
    const BufferNode* b = g.buffer.get();
    // Loads of a buffer the nest does not store may take any number of bases.
    if (stored[b] && mixed[b]) continue;
    const std::string& buf = buffer_name(g.buffer, stored[b]);
    const std::string name = fresh_name(buf + "_base");
    line(fmt::format("{}{}* {} = &{}[{}];", stored[b] ? "" : "const ", dtype_c_type(b->dtype), name,
                     buf, print(g.invariant).text));
    hoisted_.push_back({b, g.invariant, name});
  }
  hoist_outer_vars_ = std::move(outer);
}

ElementRef CEmitter::element(const Buffer& b, const Expr& flat, bool for_store) {
  const std::string& name = buffer_name(b, for_store);
  if (!hoisted_.empty()) {
    if (std::optional<IndexSplit> split = split_index(flat, hoist_outer_vars_)) {
      for (const HoistedBase& h : hoisted_) {
        if (h.buffer == b.get() && same_expr(h.invariant, split->invariant)) {
          return {h.name, print(split->varying).text};
        }
      }
    }
  }
  return {name, print(flat).text};
}

}  // namespace tessera::codegen_c_detail
