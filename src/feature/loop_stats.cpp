#include "feature/loop_stats.h"

#include <algorithm>
#include <cstdlib>
#include <utility>

#include "te/error.h"

namespace tessera {
namespace {

// One load or store of a statement, with its index decomposed once against the loops around it:
// coeff[d * P + p] is the coefficient of loop p's variable in dimension d, nonaffine[d * P + p]
// says the variable occurs there in a non-affine way (floor division, modulo, products of
// variables). P is the depth of the store.
struct Access {
  const BufferNode* buffer = nullptr;
  bool write = false;
  std::vector<int64_t> coeff;
  std::vector<uint8_t> nonaffine;
};

struct StoreRec {
  std::vector<int> path;       // loop indices, outermost first
  std::vector<double> suffix;  // suffix[p]: product of the extents of path[p..]; suffix[P] = 1
  OpCounts ops;                // per execution
  std::vector<Access> accesses;
  bool guarded = false;
};

bool binary_operands(const Expr& e, const Expr** a, const Expr** b) {
  switch (e.kind()) {
#define TESSERA_BINARY_NODE(Name)                            \
  case ExprKind::k##Name: {                                  \
    const auto* n = static_cast<const Name##Node*>(e.get()); \
    *a = &n->a;                                              \
    *b = &n->b;                                              \
    return true;                                             \
  }
#define TESSERA_EXPR_NODE(Name)
#include "te/expr_nodes.def"
    default:
      return false;
  }
}

template <typename F>
void for_each_child(const Expr& e, F&& f) {
  const Expr* a = nullptr;
  const Expr* b = nullptr;
  if (binary_operands(e, &a, &b)) {
    f(*a);
    f(*b);
    return;
  }
  if (const auto* n = e.as<NotNode>()) {
    f(n->a);
  } else if (const auto* s = e.as<SelectNode>()) {
    f(s->cond);
    f(s->true_value);
    f(s->false_value);
  } else if (const auto* c = e.as<CastNode>()) {
    f(c->value);
  } else if (const auto* call = e.as<CallNode>()) {
    for (const Expr& a : call->args) f(a);
  } else if (const auto* l = e.as<LoadNode>()) {
    for (const Expr& i : l->indices) f(i);
  }
}

bool is_float_mul(const Expr& e) {
  return e.kind() == ExprKind::kMul && is_float(e.dtype());
}

class Walker {
 public:
  ProgramStats stats;
  std::vector<StoreRec> stores;
  std::vector<std::pair<size_t, size_t>> store_range;  // per loop: [begin, end) into stores

  void stmt(const Stmt& s) {
    switch (s.kind()) {
      case StmtKind::kFor:
        loop(*s.as<ForNode>());
        return;
      case StmtKind::kStore:
        store(*s.as<StoreNode>());
        return;
      case StmtKind::kAllocate: {
        const auto* a = s.as<AllocateNode>();
        ++stats.num_allocations;
        stats.allocated_bytes +=
            static_cast<double>(a->buffer->num_elements()) * dtype_bytes(a->buffer->dtype);
        stmt(a->body);
        return;
      }
      case StmtKind::kSeq:
        for (const Stmt& c : s.as<SeqNode>()->stmts) stmt(c);
        return;
      case StmtKind::kPrefetch:  // no arithmetic and no data the kernel uses
        return;
      case StmtKind::kIfThenElse: {
        const auto* n = s.as<IfThenElseNode>();
        // The guard is evaluated once per execution of the statements it encloses (guards sit
        // innermost in the loop normal form), so its integer work is charged to them.
        OpCounts cond_ops;
        count_ops(n->cond, &cond_ops, nullptr);
        guard_int_ops_.push_back(cond_ops.int_ops + cond_ops.float_other + 1);
        stmt(n->then_case);
        if (n->else_case.defined()) stmt(n->else_case);
        guard_int_ops_.pop_back();
        return;
      }
    }
  }

 private:
  std::vector<int> stack_;
  std::vector<const VarNode*> stack_vars_;
  std::vector<double> guard_int_ops_;

  void loop(const ForNode& f) {
    int index = static_cast<int>(stats.loops.size());
    LoopStats l;
    l.name = f.var.name();
    l.parent = stack_.empty() ? -1 : stack_.back();
    l.depth = static_cast<int>(stack_.size());
    l.extent = std::max<int64_t>(f.extent, 1);
    l.kind = f.for_kind;
    if (l.parent >= 0) {
      LoopStats& parent = stats.loops[l.parent];
      parent.innermost = false;
      l.outer_product = parent.outer_product * static_cast<double>(parent.extent);
    } else {
      ++stats.num_nests;
    }
    stats.loops.push_back(std::move(l));
    store_range.emplace_back(stores.size(), stores.size());
    stack_.push_back(index);
    stack_vars_.push_back(f.var.get());
    stmt(f.body);
    stack_.pop_back();
    stack_vars_.pop_back();
    store_range[index].second = stores.size();
  }

  int var_position(const VarNode* v) const {
    for (size_t p = 0; p < stack_vars_.size(); ++p) {
      if (stack_vars_[p] == v) return static_cast<int>(p);
    }
    return -1;
  }

  void mark_nonaffine(const Expr& e, uint8_t* nonaffine) const {
    if (const auto* v = e.as<VarNode>()) {
      int p = var_position(v);
      if (p >= 0) nonaffine[p] = 1;
      return;
    }
    for_each_child(e, [&](const Expr& c) { mark_nonaffine(c, nonaffine); });
  }

  // Adds scale * e to the coefficients of one dimension.
  void linearize(const Expr& e, int64_t scale, int64_t* coeff, uint8_t* nonaffine) const {
    switch (e.kind()) {
      case ExprKind::kIntImm:
        return;
      case ExprKind::kVar: {
        int p = var_position(e.as<VarNode>());
        if (p >= 0) coeff[p] += scale;
        return;
      }
      case ExprKind::kAdd: {
        const auto* n = e.as<AddNode>();
        linearize(n->a, scale, coeff, nonaffine);
        linearize(n->b, scale, coeff, nonaffine);
        return;
      }
      case ExprKind::kSub: {
        const auto* n = e.as<SubNode>();
        linearize(n->a, scale, coeff, nonaffine);
        linearize(n->b, -scale, coeff, nonaffine);
        return;
      }
      case ExprKind::kMul: {
        const auto* n = e.as<MulNode>();
        if (const int64_t* c = as_const_int(n->a)) {
          linearize(n->b, scale * *c, coeff, nonaffine);
          return;
        }
        if (const int64_t* c = as_const_int(n->b)) {
          linearize(n->a, scale * *c, coeff, nonaffine);
          return;
        }
        break;
      }
      default:
        break;
    }
    mark_nonaffine(e, nonaffine);
  }

  void add_access(const Buffer& buffer, const std::vector<Expr>& indices, bool write,
                  StoreRec* rec) const {
    Access a;
    a.buffer = buffer.get();
    a.write = write;
    size_t depth = stack_.size();
    a.coeff.assign(indices.size() * depth, 0);
    a.nonaffine.assign(indices.size() * depth, 0);
    for (size_t d = 0; d < indices.size(); ++d) {
      linearize(indices[d], 1, a.coeff.data() + d * depth, a.nonaffine.data() + d * depth);
    }
    rec->accesses.push_back(std::move(a));
  }

  // Counts the operations of e into ops; records its loads in rec (when given).
  void count_ops(const Expr& e, OpCounts* ops, StoreRec* rec) const {
    const Expr* a = nullptr;
    const Expr* b = nullptr;
    if (binary_operands(e, &a, &b)) {
      bool fl = is_float(a->dtype());
      switch (e.kind()) {
        case ExprKind::kAdd:
        case ExprKind::kSub:
          if (fl) {
            ops->float_add += 1;
            if (is_float_mul(*a) || is_float_mul(*b)) ops->fma += 1;
          } else {
            ops->int_ops += 1;
          }
          break;
        case ExprKind::kMul:
          (fl ? ops->float_mul : ops->int_ops) += 1;
          break;
        default:
          (fl ? ops->float_other : ops->int_ops) += 1;
          break;
      }
      count_ops(*a, ops, rec);
      count_ops(*b, ops, rec);
      return;
    }
    switch (e.kind()) {
      case ExprKind::kNot:
        ops->int_ops += 1;
        break;
      case ExprKind::kSelect:
      case ExprKind::kCast:
        (is_float(e.dtype()) ? ops->float_other : ops->int_ops) += 1;
        break;
      case ExprKind::kCall:  // intrinsics take float arguments only
        ops->float_other += 1;
        break;
      case ExprKind::kLoad:
        if (rec) {
          const auto* l = e.as<LoadNode>();
          add_access(l->buffer, l->indices, false, rec);
        }
        break;
      default:
        break;
    }
    for_each_child(e, [&](const Expr& c) { count_ops(c, ops, rec); });
  }

  void store(const StoreNode& s) {
    StoreRec rec;
    rec.path = stack_;
    rec.suffix.assign(stack_.size() + 1, 1.0);
    for (size_t p = stack_.size(); p-- > 0;) {
      rec.suffix[p] = rec.suffix[p + 1] * static_cast<double>(stats.loops[stack_[p]].extent);
    }
    rec.guarded = !guard_int_ops_.empty();
    for (double g : guard_int_ops_) rec.ops.int_ops += g;
    add_access(s.buffer, s.indices, true, &rec);
    for (const Expr& i : s.indices) count_ops(i, &rec.ops, nullptr);
    count_ops(s.value, &rec.ops, &rec);
    stores.push_back(std::move(rec));
  }
};

OpCounts scaled(const OpCounts& o, double f) {
  return {o.float_add * f, o.float_mul * f, o.fma * f, o.float_other * f, o.int_ops * f};
}

void accumulate(OpCounts* into, const OpCounts& o) {
  into->float_add += o.float_add;
  into->float_mul += o.float_mul;
  into->fma += o.fma;
  into->float_other += o.float_other;
  into->int_ops += o.int_ops;
}

// Distinct elements one full execution of the loop at path position `pos` touches through `a`:
// the box spanned by the index over that loop and the loops inside it, clipped to the shape.
double touched_elements(const Access& a, const StoreRec& s, const ProgramStats& stats, size_t pos) {
  size_t depth = s.path.size();
  const std::vector<int64_t>& shape = a.buffer->shape;
  double elements = 1;
  for (size_t d = 0; d < shape.size(); ++d) {
    const int64_t* c = a.coeff.data() + d * depth;
    const uint8_t* na = a.nonaffine.data() + d * depth;
    bool affine = true;
    for (size_t p = pos; p < depth; ++p) affine = affine && !na[p];
    double span = 1;
    for (size_t p = pos; p < depth; ++p) {
      double ext = static_cast<double>(stats.loops[s.path[p]].extent);
      if (affine) {
        span += static_cast<double>(std::llabs(c[p])) * (ext - 1);
      } else if (c[p] != 0 || na[p]) {
        span *= ext;
      }
    }
    elements *= std::min(span, static_cast<double>(shape[d]));
  }
  return elements;
}

double access_stride(const Access& a, const StoreRec& s, size_t pos) {
  size_t depth = s.path.size();
  const std::vector<int64_t>& shape = a.buffer->shape;
  int64_t stride = 0;
  int64_t row = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    if (a.nonaffine[d * depth + pos]) return static_cast<double>(a.buffer->num_elements());
    stride += a.coeff[d * depth + pos] * row;
    row *= shape[d];
  }
  return static_cast<double>(std::llabs(stride));
}

void merge_touch(LoopStats* l, const Access& a, double count, double elements, double stride) {
  BufferTouch* t = nullptr;
  for (BufferTouch& x : l->touches) {
    if (x.buffer == a.buffer) t = &x;
  }
  if (!t) {
    l->touches.push_back(BufferTouch{});
    t = &l->touches.back();
    t->buffer = a.buffer;
  }
  t->count += count;
  t->elements = std::max(t->elements, elements);
  t->bytes = t->elements * dtype_bytes(a.buffer->dtype);
  t->stride = std::max(t->stride, stride);
  (a.write ? t->write : t->read) = true;
}

}  // namespace

ProgramStats analyze_loops(const Program& p) {
  Walker w;
  if (p.body.defined()) w.stmt(p.body);
  ProgramStats& stats = w.stats;

  // Per loop: everything the stores inside it do in one full execution of the loop.
  for (size_t li = 0; li < stats.loops.size(); ++li) {
    LoopStats& l = stats.loops[li];
    size_t pos = static_cast<size_t>(l.depth);
    for (size_t si = w.store_range[li].first; si < w.store_range[li].second; ++si) {
      const StoreRec& s = w.stores[si];
      double iters = s.suffix[pos];
      l.inner_product += iters;
      accumulate(&l.ops, scaled(s.ops, iters));
      for (const Access& a : s.accesses) {
        merge_touch(&l, a, iters, touched_elements(a, s, stats, pos), access_stride(a, s, pos));
      }
    }
    std::sort(l.touches.begin(), l.touches.end(), [](const BufferTouch& a, const BufferTouch& b) {
      if (a.count != b.count) return a.count > b.count;
      if (a.bytes != b.bytes) return a.bytes > b.bytes;
      return a.buffer->name < b.buffer->name;
    });
    if (l.kind == ForKind::kParallel) {
      stats.max_parallel_extent = std::max(stats.max_parallel_extent, double(l.extent));
    }
    if (l.kind == ForKind::kVectorized) {
      stats.max_vector_extent = std::max(stats.max_vector_extent, double(l.extent));
    }
  }

  // Program totals and the main store.
  // The main store does the most float work (ties: most executions, then the first); stores
  // without float work (copies, inits) only win when there is no float work at all.
  int main_store = -1;
  std::pair<double, double> main_key{-1, -1};
  for (size_t si = 0; si < w.stores.size(); ++si) {
    const StoreRec& s = w.stores[si];
    double execs = s.suffix[0];
    OpCounts total = scaled(s.ops, execs);
    accumulate(&stats.total_ops, total);
    stats.store_executions += execs;
    if (s.guarded) stats.guarded_store_executions += execs;
    for (const Access& a : s.accesses) stats.bytes_accessed += execs * dtype_bytes(a.buffer->dtype);
    bool parallel = false, vectorized = false;
    double unrolled = 1;
    for (int li : s.path) {
      const LoopStats& l = stats.loops[li];
      parallel = parallel || l.kind == ForKind::kParallel;
      vectorized = vectorized || l.kind == ForKind::kVectorized;
      if (l.kind == ForKind::kUnrolled) unrolled *= static_cast<double>(l.extent);
    }
    if (unrolled > 1) stats.max_unrolled_product = std::max(stats.max_unrolled_product, unrolled);
    if (parallel) stats.float_ops_parallel += total.float_ops();
    if (vectorized) stats.float_ops_vectorized += total.float_ops();
    std::pair<double, double> key{total.float_ops(), execs};
    if (key > main_key) {
      main_key = key;
      main_store = static_cast<int>(si);
    }
  }
  if (main_store >= 0) {
    const StoreRec& s = w.stores[main_store];
    stats.main_path = s.path;
    stats.main_float_ops = s.ops.float_ops() * s.suffix[0];
  }
  return stats;
}

}  // namespace tessera
