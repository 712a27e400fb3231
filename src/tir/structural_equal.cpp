#include "tir/structural_equal.h"

#include <cmath>
#include <cstring>
#include <string_view>
#include <utility>
#include <vector>

#include "te/error.h"
#include "te/tensor.h"

namespace tessera {

namespace {

// Loop variables in scope, outermost first; a pair binds a left-hand var to a right-hand var.
// Looking up from the back honours shadowing when the same var is bound twice.
class Bindings {
 public:
  void push(const VarNode* a, const VarNode* b) { stack_.emplace_back(a, b); }
  void pop(size_t n = 1) { stack_.resize(stack_.size() - n); }
  bool empty() const { return stack_.empty(); }

  /// Depth of the innermost binding of v on side `side` (0 left, 1 right), or -1 if free.
  int depth(const VarNode* v, int side) const {
    for (size_t i = stack_.size(); i-- > 0;) {
      if ((side == 0 ? stack_[i].first : stack_[i].second) == v) return static_cast<int>(i);
    }
    return -1;
  }

 private:
  std::vector<std::pair<const VarNode*, const VarNode*>> stack_;
};

bool float_equal(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return std::memcmp(&a, &b, sizeof a) == 0;
}

bool buffer_equal(const Buffer& a, const Buffer& b) {
  if (a == b) return true;
  if (!a || !b) return false;
  return a->name == b->name && a->dtype == b->dtype && a->shape == b->shape;
}

class Comparer {
 public:
  bool expr(const Expr& a, const Expr& b) {
    if (!a.defined() || !b.defined()) return a.defined() == b.defined();
    // With nothing bound every variable is free and compared by identity, so sharing is equality.
    if (a.same_as(b) && bound_.empty()) return true;
    if (a.kind() != b.kind() || a.dtype() != b.dtype()) return false;
    switch (a.kind()) {
#define TESSERA_EXPR_NODE(Name)                             \
  case ExprKind::k##Name:                                   \
    return equal_(static_cast<const Name##Node&>(*a.get()), \
                  static_cast<const Name##Node&>(*b.get()));
#include "te/expr_nodes.def"
    }
    throw_internal("unknown expression kind");
  }

  bool stmt(const Stmt& a, const Stmt& b) {
    if (!a.defined() || !b.defined()) return a.defined() == b.defined();
    if (a.kind() != b.kind()) return false;
    switch (a.kind()) {
#define TESSERA_STMT_NODE(Name)                             \
  case StmtKind::k##Name:                                   \
    return equal_(static_cast<const Name##Node&>(*a.get()), \
                  static_cast<const Name##Node&>(*b.get()));
#include "tir/stmt_nodes.def"
    }
    throw_internal("unknown statement kind");
  }

 private:
  bool exprs(const std::vector<Expr>& a, const std::vector<Expr>& b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i) {
      if (!expr(a[i], b[i])) return false;
    }
    return true;
  }

  bool equal_(const IntImmNode& a, const IntImmNode& b) {
    return a.value == b.value;
  }
  bool equal_(const FloatImmNode& a, const FloatImmNode& b) {
    return float_equal(a.value, b.value);
  }
  bool equal_(const VarNode& a, const VarNode& b) {
    int da = bound_.depth(&a, 0), db = bound_.depth(&b, 1);
    return da == db && (da >= 0 || &a == &b);
  }
  template <ExprKind K>
  bool equal_(const BinaryNode<K>& a, const BinaryNode<K>& b) {
    return expr(a.a, b.a) && expr(a.b, b.b);
  }
  bool equal_(const NotNode& a, const NotNode& b) {
    return expr(a.a, b.a);
  }
  bool equal_(const SelectNode& a, const SelectNode& b) {
    return expr(a.cond, b.cond) && expr(a.true_value, b.true_value) &&
           expr(a.false_value, b.false_value);
  }
  bool equal_(const CastNode& a, const CastNode& b) {
    return expr(a.value, b.value);
  }
  bool equal_(const CallNode& a, const CallNode& b) {
    return a.op == b.op && exprs(a.args, b.args);
  }
  bool equal_(const LoadNode& a, const LoadNode& b) {
    return buffer_equal(a.buffer, b.buffer) && exprs(a.indices, b.indices);
  }
  bool equal_(const TensorReadNode& a, const TensorReadNode& b) {
    const TensorNode &ta = *a.tensor, &tb = *b.tensor;
    bool same = &ta == &tb || (ta.name == tb.name && ta.dtype == tb.dtype && ta.shape == tb.shape);
    return same && exprs(a.indices, b.indices);
  }
  bool equal_(const ReduceNode& a, const ReduceNode& b) {
    if (a.op != b.op || a.axes.size() != b.axes.size()) return false;
    for (size_t i = 0; i < a.axes.size(); ++i) {
      if (a.axes[i].extent != b.axes[i].extent) return false;
      if (a.axes[i].var.dtype() != b.axes[i].var.dtype()) return false;
    }
    for (size_t i = 0; i < a.axes.size(); ++i)
      bound_.push(a.axes[i].var.get(), b.axes[i].var.get());
    bool eq = expr(a.source, b.source);
    bound_.pop(a.axes.size());
    return eq;
  }

  bool equal_(const ForNode& a, const ForNode& b) {
    if (a.for_kind != b.for_kind || a.extent != b.extent) return false;
    if (a.var.dtype() != b.var.dtype() || !expr(a.min, b.min)) return false;
    bound_.push(a.var.get(), b.var.get());
    bool eq = stmt(a.body, b.body);
    bound_.pop();
    return eq;
  }
  bool equal_(const StoreNode& a, const StoreNode& b) {
    return buffer_equal(a.buffer, b.buffer) && exprs(a.indices, b.indices) &&
           expr(a.value, b.value);
  }
  bool equal_(const PrefetchNode& a, const PrefetchNode& b) {
    return buffer_equal(a.buffer, b.buffer) && exprs(a.indices, b.indices);
  }
  bool equal_(const AllocateNode& a, const AllocateNode& b) {
    return buffer_equal(a.buffer, b.buffer) && stmt(a.body, b.body);
  }
  bool equal_(const SeqNode& a, const SeqNode& b) {
    if (a.stmts.size() != b.stmts.size()) return false;
    for (size_t i = 0; i < a.stmts.size(); ++i) {
      if (!stmt(a.stmts[i], b.stmts[i])) return false;
    }
    return true;
  }
  bool equal_(const IfThenElseNode& a, const IfThenElseNode& b) {
    return expr(a.cond, b.cond) && stmt(a.then_case, b.then_case) && stmt(a.else_case, b.else_case);
  }

  Bindings bound_;
};

// ---- hashing ----

uint64_t mix(uint64_t x) {  // splitmix64 finaliser
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

uint64_t hash_string(std::string_view s) {  // FNV-1a: stable across runs and standard libraries
  uint64_t h = 0xcbf29ce484222325ULL;
  for (char c : s) h = (h ^ static_cast<unsigned char>(c)) * 0x100000001b3ULL;
  return h;
}

class Hasher {
 public:
  uint64_t value() const { return h_; }

  void expr(const Expr& e) {
    if (!e.defined()) return add(0x6e756c6cULL);
    add(1000 + static_cast<uint64_t>(e.kind()));
    add(static_cast<uint64_t>(e.dtype()));
    switch (e.kind()) {
#define TESSERA_EXPR_NODE(Name) \
  case ExprKind::k##Name:       \
    return hash_(static_cast<const Name##Node&>(*e.get()));
#include "te/expr_nodes.def"
    }
  }

  void stmt(const Stmt& s) {
    if (!s.defined()) return add(0x6e756c6cULL);
    add(2000 + static_cast<uint64_t>(s.kind()));
    switch (s.kind()) {
#define TESSERA_STMT_NODE(Name) \
  case StmtKind::k##Name:       \
    return hash_(static_cast<const Name##Node&>(*s.get()));
#include "tir/stmt_nodes.def"
    }
  }

  void buffer(const Buffer& b) {
    if (!b) return add(0x6e756c6cULL);
    add(hash_string(b->name));
    add(static_cast<uint64_t>(b->dtype));
    add(b->shape.size());
    for (int64_t d : b->shape) add(static_cast<uint64_t>(d));
  }

  void add(uint64_t v) {
    h_ = mix(h_ ^ mix(v));
  }

 private:
  void exprs(const std::vector<Expr>& es) {
    add(es.size());
    for (const Expr& e : es) expr(e);
  }

  void hash_(const IntImmNode& n) {
    add(static_cast<uint64_t>(n.value));
  }
  void hash_(const FloatImmNode& n) {
    uint64_t bits = 0x7ff8000000000000ULL;  // every NaN hashes alike, as they compare equal
    if (!std::isnan(n.value)) std::memcpy(&bits, &n.value, sizeof bits);
    add(bits);
  }
  void hash_(const VarNode& n) {
    for (size_t i = bound_.size(); i-- > 0;) {
      if (bound_[i] == &n) return add(3000 + i);
    }
    add(hash_string(n.name));
  }
  template <ExprKind K>
  void hash_(const BinaryNode<K>& n) {
    expr(n.a);
    expr(n.b);
  }
  void hash_(const NotNode& n) {
    expr(n.a);
  }
  void hash_(const SelectNode& n) {
    expr(n.cond);
    expr(n.true_value);
    expr(n.false_value);
  }
  void hash_(const CastNode& n) {
    expr(n.value);
  }
  void hash_(const CallNode& n) {
    add(static_cast<uint64_t>(n.op));
    exprs(n.args);
  }
  void hash_(const LoadNode& n) {
    buffer(n.buffer);
    exprs(n.indices);
  }
  void hash_(const TensorReadNode& n) {
    add(hash_string(n.tensor->name));
    exprs(n.indices);
  }
  void hash_(const ReduceNode& n) {
    add(static_cast<uint64_t>(n.op));
    add(n.axes.size());
    for (const IterVar& iv : n.axes) {
      add(static_cast<uint64_t>(iv.extent));
      bound_.push_back(iv.var.get());
    }
    expr(n.source);
    bound_.resize(bound_.size() - n.axes.size());
  }

  void hash_(const ForNode& n) {
    add(static_cast<uint64_t>(n.for_kind));
    add(static_cast<uint64_t>(n.extent));
    expr(n.min);
    bound_.push_back(n.var.get());
    stmt(n.body);
    bound_.pop_back();
  }
  void hash_(const StoreNode& n) {
    buffer(n.buffer);
    exprs(n.indices);
    expr(n.value);
  }
  void hash_(const PrefetchNode& n) {
    buffer(n.buffer);
    exprs(n.indices);
  }
  void hash_(const AllocateNode& n) {
    buffer(n.buffer);
    stmt(n.body);
  }
  void hash_(const SeqNode& n) {
    add(n.stmts.size());
    for (const Stmt& s : n.stmts) stmt(s);
  }
  void hash_(const IfThenElseNode& n) {
    expr(n.cond);
    stmt(n.then_case);
    stmt(n.else_case);
  }

  uint64_t h_ = 0;
  std::vector<const VarNode*> bound_;
};

bool buffers_equal(const std::vector<Buffer>& a, const std::vector<Buffer>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!buffer_equal(a[i], b[i])) return false;
  }
  return true;
}

}  // namespace

bool structural_equal(const Expr& a, const Expr& b) {
  return Comparer().expr(a, b);
}
bool structural_equal(const Stmt& a, const Stmt& b) {
  return Comparer().stmt(a, b);
}
bool structural_equal(const Program& a, const Program& b) {
  return a.name == b.name && buffers_equal(a.inputs, b.inputs) &&
         buffers_equal(a.outputs, b.outputs) && Comparer().stmt(a.body, b.body);
}

size_t structural_hash(const Expr& e) {
  Hasher h;
  h.expr(e);
  return h.value();
}
size_t structural_hash(const Stmt& s) {
  Hasher h;
  h.stmt(s);
  return h.value();
}
size_t structural_hash(const Program& p) {
  Hasher h;
  h.add(hash_string(p.name));
  for (const auto* list : {&p.inputs, &p.outputs}) {
    h.add(list->size());
    for (const Buffer& b : *list) h.buffer(b);
  }
  h.stmt(p.body);
  return h.value();
}

}  // namespace tessera
