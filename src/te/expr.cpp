#include "te/expr.h"

#include <cmath>
#include <limits>

#include "te/error.h"
#include "te/expr_functor.h"
#include "te/tensor.h"

namespace tessera {

const char* expr_kind_name(ExprKind kind) {
  switch (kind) {
#define TESSERA_EXPR_NODE(Name) \
  case ExprKind::k##Name:       \
    return #Name;
#include "te/expr_nodes.def"
  }
  return "?";
}

const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return "sum";
    case ReduceOp::kMax:
      return "max";
    case ReduceOp::kMin:
      return "min";
  }
  return "?";
}

const char* intrinsic_name(Intrinsic f) {
  switch (f) {
    case Intrinsic::kExp:
      return "exp";
    case Intrinsic::kLog:
      return "log";
    case Intrinsic::kSqrt:
      return "sqrt";
    case Intrinsic::kTanh:
      return "tanh";
    case Intrinsic::kSigmoid:
      return "sigmoid";
    case Intrinsic::kErf:
      return "erf";
  }
  return "?";
}

std::optional<Intrinsic> intrinsic_from_name(std::string_view name) {
  for (Intrinsic f : {Intrinsic::kExp, Intrinsic::kLog, Intrinsic::kSqrt, Intrinsic::kTanh,
                      Intrinsic::kSigmoid, Intrinsic::kErf}) {
    if (name == intrinsic_name(f)) return f;
  }
  return std::nullopt;
}

size_t intrinsic_arity(Intrinsic) {
  return 1;
}

double eval_intrinsic(Intrinsic f, double x) {
  switch (f) {
    case Intrinsic::kExp:
      return std::exp(x);
    case Intrinsic::kLog:
      return std::log(x);
    case Intrinsic::kSqrt:
      return std::sqrt(x);
    case Intrinsic::kTanh:
      return std::tanh(x);
    case Intrinsic::kSigmoid:
      return 1.0 / (1.0 + std::exp(-x));
    case Intrinsic::kErf:
      return std::erf(x);
  }
  throw_internal("unknown intrinsic");
}

Expr::Expr(int value) : Expr(make_int(value)) {}
Expr::Expr(double value) : Expr(make_float(value, DType::kFloat64)) {}

Var::Var(std::string name, DType t) : Expr(std::make_shared<VarNode>(std::move(name), t)) {}
Var::Var(const Expr& e) : Expr(e) {
  if (!e.as<VarNode>()) throw_internal("Var wraps a non-variable {}", expr_kind_name(e.kind()));
}

int64_t BufferNode::num_elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

Buffer make_buffer(std::string name, DType dtype, std::vector<int64_t> shape) {
  if (name.empty()) throw_error("a buffer needs a name");
  for (int64_t d : shape) {
    if (d <= 0) throw_error("buffer {} has non-positive extent {}", name, d);
  }
  return std::make_shared<BufferNode>(std::move(name), dtype, std::move(shape));
}

Expr make_int(int64_t value, DType t) {
  if (is_float(t)) return make_float(static_cast<double>(value), t);
  return Expr(std::make_shared<IntImmNode>(value, t));
}

Expr make_float(double value, DType t) {
  if (!is_float(t)) throw_error("float literal {} cannot have type {}", value, dtype_name(t));
  if (t == DType::kFloat32) value = static_cast<float>(value);
  return Expr(std::make_shared<FloatImmNode>(value, t));
}

namespace {

bool is_literal(const Expr& e) {
  return e.as<IntImmNode>() || e.as<FloatImmNode>();
}

// A literal operand adopts the type of the other side, as a Python number does in TVM.
Expr convert_literal(const Expr& lit, DType target) {
  if (const auto* i = lit.as<IntImmNode>()) return make_int(i->value, target);
  const auto* f = lit.as<FloatImmNode>();
  if (!is_float(target)) {
    throw_error("float literal {} used where {} is expected", f->value, dtype_name(target));
  }
  return make_float(f->value, target);
}

void unify_types(Expr& a, Expr& b, const char* op) {
  if (!a.defined() || !b.defined()) throw_error("operator {} on an undefined expression", op);
  if (a.dtype() == b.dtype()) return;
  if (is_literal(b)) {
    b = convert_literal(b, a.dtype());
  } else if (is_literal(a)) {
    a = convert_literal(a, b.dtype());
  } else {
    throw_error("operator {} on mismatched types {} and {}; insert a cast", op,
                dtype_name(a.dtype()), dtype_name(b.dtype()));
  }
}

template <ExprKind K>
Expr binary(DType t, Expr a, Expr b) {
  return Expr(std::make_shared<BinaryNode<K>>(t, std::move(a), std::move(b)));
}

}  // namespace

Expr make_binary(ExprKind kind, Expr a, Expr b) {
  const char* op = expr_kind_name(kind);
  unify_types(a, b, op);
  DType t = a.dtype();
  switch (kind) {
#define TESSERA_ARITH(Name)                                                 \
  case ExprKind::k##Name:                                                   \
    if (t == DType::kBool) throw_error("operator {} on bool operands", op); \
    return binary<ExprKind::k##Name>(t, std::move(a), std::move(b));
    TESSERA_ARITH(Add)
    TESSERA_ARITH(Sub)
    TESSERA_ARITH(Mul)
    TESSERA_ARITH(Div)
    TESSERA_ARITH(Min)
    TESSERA_ARITH(Max)
#undef TESSERA_ARITH
    case ExprKind::kMod:
      if (t != DType::kInt32)
        throw_error("operator Mod needs int32 operands, not {}", dtype_name(t));
      return binary<ExprKind::kMod>(t, std::move(a), std::move(b));
#define TESSERA_CMP(Name) \
  case ExprKind::k##Name: \
    return binary<ExprKind::k##Name>(DType::kBool, std::move(a), std::move(b));
      TESSERA_CMP(EQ)
      TESSERA_CMP(NE)
      TESSERA_CMP(LT)
      TESSERA_CMP(LE)
      TESSERA_CMP(GT)
      TESSERA_CMP(GE)
#undef TESSERA_CMP
    case ExprKind::kAnd:
    case ExprKind::kOr:
      if (t != DType::kBool)
        throw_error("operator {} needs bool operands, not {}", op, dtype_name(t));
      return kind == ExprKind::kAnd ? binary<ExprKind::kAnd>(t, std::move(a), std::move(b))
                                    : binary<ExprKind::kOr>(t, std::move(a), std::move(b));
    default:
      throw_internal("make_binary on non-binary kind {}", op);
  }
}

Expr make_not(Expr a) {
  if (!a.defined() || a.dtype() != DType::kBool) throw_error("operator ! needs a bool operand");
  return Expr(std::make_shared<NotNode>(std::move(a)));
}

Expr make_select(Expr cond, Expr t, Expr f) {
  if (!cond.defined() || cond.dtype() != DType::kBool) {
    throw_error("select needs a bool condition");
  }
  unify_types(t, f, "select");
  return Expr(std::make_shared<SelectNode>(std::move(cond), std::move(t), std::move(f)));
}

Expr make_cast(DType t, Expr value) {
  if (!value.defined()) throw_error("cast of an undefined expression");
  if (value.dtype() == t) return value;
  return Expr(std::make_shared<CastNode>(t, std::move(value)));
}

Expr make_call(Intrinsic f, std::vector<Expr> args) {
  const char* name = intrinsic_name(f);
  if (args.size() != intrinsic_arity(f)) {
    throw_error("{} takes {} argument{}, not {}", name, intrinsic_arity(f),
                intrinsic_arity(f) > 1 ? "s" : "", args.size());
  }
  for (const Expr& a : args) {
    if (!a.defined()) throw_error("{} of an undefined expression", name);
  }
  // A literal adopts the type of the first non-literal argument; float literals alone keep
  // their type and integer literals alone become float64.
  DType t = is_float(args[0].dtype()) ? args[0].dtype() : DType::kFloat64;
  for (const Expr& a : args) {
    if (!is_literal(a)) {
      t = a.dtype();
      break;
    }
  }
  if (!is_float(t)) {
    throw_error("{} needs a float32 or float64 argument, not {}; insert a cast", name,
                dtype_name(t));
  }
  for (Expr& a : args) {
    if (a.dtype() == t) continue;
    if (!is_literal(a)) {
      throw_error("{} on mismatched types {} and {}; insert a cast", name, dtype_name(t),
                  dtype_name(a.dtype()));
    }
    a = convert_literal(a, t);
  }
  return Expr(std::make_shared<CallNode>(t, f, std::move(args)));
}

Expr make_load(Buffer buffer, std::vector<Expr> indices) {
  if (!buffer) throw_internal("load from a null buffer");
  if (indices.size() != buffer->shape.size()) {
    throw_error("buffer {} has {} dimensions but is indexed with {}", buffer->name,
                buffer->shape.size(), indices.size());
  }
  for (const Expr& i : indices) {
    if (!i.defined() || i.dtype() != DType::kInt32) {
      throw_error("index into {} must be int32", buffer->name);
    }
  }
  return Expr(std::make_shared<LoadNode>(std::move(buffer), std::move(indices)));
}

Expr make_reduce(ReduceOp op, Expr source, std::vector<IterVar> axes) {
  if (!source.defined()) throw_error("{} of an undefined expression", reduce_op_name(op));
  if (axes.empty()) throw_error("{} needs at least one reduce axis", reduce_op_name(op));
  for (const IterVar& iv : axes) {
    if (iv.extent <= 0)
      throw_error("reduce axis {} has non-positive extent {}", iv.var.name(), iv.extent);
  }
  return Expr(std::make_shared<ReduceNode>(op, std::move(source), std::move(axes)));
}

Expr reduce_identity(ReduceOp op, DType t) {
  switch (op) {
    case ReduceOp::kSum:
      return make_int(0, t);
    case ReduceOp::kMax:
      return is_float(t) ? make_float(-std::numeric_limits<double>::infinity(), t)
                         : make_int(std::numeric_limits<int32_t>::min(), t);
    case ReduceOp::kMin:
      return is_float(t) ? make_float(std::numeric_limits<double>::infinity(), t)
                         : make_int(std::numeric_limits<int32_t>::max(), t);
  }
  throw_internal("unknown reduce op");
}

Expr operator+(Expr a, Expr b) {
  return make_binary(ExprKind::kAdd, std::move(a), std::move(b));
}
Expr operator-(Expr a, Expr b) {
  return make_binary(ExprKind::kSub, std::move(a), std::move(b));
}
Expr operator*(Expr a, Expr b) {
  return make_binary(ExprKind::kMul, std::move(a), std::move(b));
}
Expr operator/(Expr a, Expr b) {
  return make_binary(ExprKind::kDiv, std::move(a), std::move(b));
}
Expr operator%(Expr a, Expr b) {
  return make_binary(ExprKind::kMod, std::move(a), std::move(b));
}
Expr operator-(Expr a) {
  DType t = a.dtype();
  return make_binary(ExprKind::kSub, make_int(0, t), std::move(a));
}
Expr operator<(Expr a, Expr b) {
  return make_binary(ExprKind::kLT, std::move(a), std::move(b));
}
Expr operator<=(Expr a, Expr b) {
  return make_binary(ExprKind::kLE, std::move(a), std::move(b));
}
Expr operator>(Expr a, Expr b) {
  return make_binary(ExprKind::kGT, std::move(a), std::move(b));
}
Expr operator>=(Expr a, Expr b) {
  return make_binary(ExprKind::kGE, std::move(a), std::move(b));
}
Expr operator&&(Expr a, Expr b) {
  return make_binary(ExprKind::kAnd, std::move(a), std::move(b));
}
Expr operator||(Expr a, Expr b) {
  return make_binary(ExprKind::kOr, std::move(a), std::move(b));
}
Expr operator!(Expr a) {
  return make_not(std::move(a));
}
Expr eq(Expr a, Expr b) {
  return make_binary(ExprKind::kEQ, std::move(a), std::move(b));
}
Expr ne(Expr a, Expr b) {
  return make_binary(ExprKind::kNE, std::move(a), std::move(b));
}
Expr min(Expr a, Expr b) {
  return make_binary(ExprKind::kMin, std::move(a), std::move(b));
}
Expr max(Expr a, Expr b) {
  return make_binary(ExprKind::kMax, std::move(a), std::move(b));
}
Expr select(Expr cond, Expr t, Expr f) {
  return make_select(std::move(cond), std::move(t), std::move(f));
}
Expr cast(DType t, Expr value) {
  return make_cast(t, std::move(value));
}
Expr exp(Expr x) {
  return make_call(Intrinsic::kExp, {std::move(x)});
}
Expr log(Expr x) {
  return make_call(Intrinsic::kLog, {std::move(x)});
}
Expr sqrt(Expr x) {
  return make_call(Intrinsic::kSqrt, {std::move(x)});
}
Expr tanh(Expr x) {
  return make_call(Intrinsic::kTanh, {std::move(x)});
}
Expr sigmoid(Expr x) {
  return make_call(Intrinsic::kSigmoid, {std::move(x)});
}

Expr erf(Expr x) {
  return make_call(Intrinsic::kErf, {std::move(x)});
}

// ---- visitor and mutator defaults ----

#define TESSERA_BINARY_NODE(Name)                              \
  void ExprVisitor::visit_(const Name##Node& n, const Expr&) { \
    visit(n.a);                                                \
    visit(n.b);                                                \
  }
#define TESSERA_EXPR_NODE(Name)
#include "te/expr_nodes.def"
void ExprVisitor::visit_(const NotNode& n, const Expr&) {
  visit(n.a);
}
void ExprVisitor::visit_(const SelectNode& n, const Expr&) {
  visit(n.cond);
  visit(n.true_value);
  visit(n.false_value);
}
void ExprVisitor::visit_(const CastNode& n, const Expr&) {
  visit(n.value);
}
void ExprVisitor::visit_(const CallNode& n, const Expr&) {
  for (const Expr& a : n.args) visit(a);
}
void ExprVisitor::visit_(const LoadNode& n, const Expr&) {
  for (const Expr& i : n.indices) visit(i);
}
void ExprVisitor::visit_(const TensorReadNode& n, const Expr&) {
  for (const Expr& i : n.indices) visit(i);
}
void ExprVisitor::visit_(const ReduceNode& n, const Expr&) {
  visit(n.source);
}

bool ExprMutator::mutate_all(const std::vector<Expr>& in, std::vector<Expr>* out) {
  bool changed = false;
  out->clear();
  out->reserve(in.size());
  for (const Expr& e : in) {
    out->push_back(visit(e));
    changed |= !out->back().same_as(e);
  }
  return changed;
}

#define TESSERA_BINARY_NODE(Name)                                      \
  Expr ExprMutator::visit_(const Name##Node& n, const Expr& self) {    \
    Expr a = visit(n.a), b = visit(n.b);                               \
    if (a.same_as(n.a) && b.same_as(n.b)) return self;                 \
    return make_binary(ExprKind::k##Name, std::move(a), std::move(b)); \
  }
#define TESSERA_EXPR_NODE(Name)
#include "te/expr_nodes.def"

Expr ExprMutator::visit_(const NotNode& n, const Expr& self) {
  Expr a = visit(n.a);
  return a.same_as(n.a) ? self : make_not(a);
}
Expr ExprMutator::visit_(const SelectNode& n, const Expr& self) {
  Expr c = visit(n.cond), t = visit(n.true_value), f = visit(n.false_value);
  if (c.same_as(n.cond) && t.same_as(n.true_value) && f.same_as(n.false_value)) return self;
  return make_select(c, t, f);
}
Expr ExprMutator::visit_(const CastNode& n, const Expr& self) {
  Expr v = visit(n.value);
  return v.same_as(n.value) ? self : make_cast(n.dtype, v);
}
Expr ExprMutator::visit_(const CallNode& n, const Expr& self) {
  std::vector<Expr> args;
  return mutate_all(n.args, &args) ? make_call(n.op, std::move(args)) : self;
}
Expr ExprMutator::visit_(const LoadNode& n, const Expr& self) {
  std::vector<Expr> idx;
  return mutate_all(n.indices, &idx) ? make_load(n.buffer, std::move(idx)) : self;
}
Expr ExprMutator::visit_(const TensorReadNode& n, const Expr& self) {
  std::vector<Expr> idx;
  if (!mutate_all(n.indices, &idx)) return self;
  return Expr(std::make_shared<TensorReadNode>(n.dtype, n.tensor, std::move(idx)));
}
Expr ExprMutator::visit_(const ReduceNode& n, const Expr& self) {
  Expr s = visit(n.source);
  return s.same_as(n.source) ? self : make_reduce(n.op, s, n.axes);
}

namespace {

class Substituter : public ExprMutator {
 public:
  explicit Substituter(const std::vector<std::pair<const VarNode*, Expr>>& map) : map_(map) {}

 protected:
  using ExprMutator::visit_;
  Expr visit_(const VarNode& n, const Expr& self) override {
    for (const auto& [var, value] : map_) {
      if (var == &n) return value;
    }
    return self;
  }

 private:
  const std::vector<std::pair<const VarNode*, Expr>>& map_;
};

class VarFinder : public ExprVisitor {
 public:
  explicit VarFinder(const VarNode* v) : var_(v) {}
  bool found = false;

 protected:
  using ExprVisitor::visit_;
  void visit_(const VarNode& n, const Expr&) override { found |= (&n == var_); }

 private:
  const VarNode* var_;
};

}  // namespace

Expr substitute(const Expr& e, const std::vector<std::pair<const VarNode*, Expr>>& map) {
  if (map.empty()) return e;
  Substituter s(map);
  return s.visit(e);
}

bool uses_var(const Expr& e, const VarNode* var) {
  VarFinder f(var);
  f.visit(e);
  return f.found;
}

}  // namespace tessera
