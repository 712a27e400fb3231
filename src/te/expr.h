/// Scalar index expressions shared by `te` (tensor reads, reductions) and `tir` (buffer loads).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "te/dtype.h"

namespace tessera {

enum class ExprKind : uint8_t {
#define TESSERA_EXPR_NODE(Name) k##Name,
#include "te/expr_nodes.def"
};

const char* expr_kind_name(ExprKind kind);

struct ExprNode {
  ExprNode(ExprKind k, DType t) : kind(k), dtype(t) {}
  virtual ~ExprNode() = default;
  const ExprKind kind;
  const DType dtype;
};

/// A refcounted handle to an immutable expression node.
class Expr {
 public:
  Expr() = default;
  Expr(int value);     // NOLINT: int32 literal, as in `i + 1`
  Expr(double value);  // NOLINT: float literal; takes the other operand's float type
  explicit Expr(std::shared_ptr<const ExprNode> node) : node_(std::move(node)) {}

  bool defined() const { return node_ != nullptr; }
  const ExprNode* get() const { return node_.get(); }
  const ExprNode* operator->() const { return node_.get(); }
  ExprKind kind() const { return node_->kind; }
  DType dtype() const { return node_->dtype; }
  bool same_as(const Expr& other) const { return node_ == other.node_; }

  template <typename T>
  const T* as() const {
    return node_ && node_->kind == T::kKind ? static_cast<const T*>(node_.get()) : nullptr;
  }

 private:
  std::shared_ptr<const ExprNode> node_;
};

struct IntImmNode : ExprNode {
  static constexpr ExprKind kKind = ExprKind::kIntImm;
  IntImmNode(int64_t v, DType t) : ExprNode(kKind, t), value(v) {}
  int64_t value;
};

struct FloatImmNode : ExprNode {
  static constexpr ExprKind kKind = ExprKind::kFloatImm;
  FloatImmNode(double v, DType t) : ExprNode(kKind, t), value(v) {}
  double value;
};

/// A variable; identity is the node, the name is for printing and for finding loops.
struct VarNode : ExprNode {
  static constexpr ExprKind kKind = ExprKind::kVar;
  VarNode(std::string n, DType t) : ExprNode(kKind, t), name(std::move(n)) {}
  std::string name;
};

class Var : public Expr {
 public:
  Var() = default;
  explicit Var(std::string name, DType t = DType::kInt32);
  /// Wraps an expression that must be a VarNode.
  explicit Var(const Expr& e);
  const VarNode* get() const { return static_cast<const VarNode*>(Expr::get()); }
  const std::string& name() const { return get()->name; }
};

template <ExprKind K>
struct BinaryNode : ExprNode {
  static constexpr ExprKind kKind = K;
  BinaryNode(DType t, Expr x, Expr y) : ExprNode(K, t), a(std::move(x)), b(std::move(y)) {}
  Expr a, b;
};

using AddNode = BinaryNode<ExprKind::kAdd>;
using SubNode = BinaryNode<ExprKind::kSub>;
using MulNode = BinaryNode<ExprKind::kMul>;
/// Floor division on integers, true division on floats.
using DivNode = BinaryNode<ExprKind::kDiv>;
/// Floor modulo; integers only.
using ModNode = BinaryNode<ExprKind::kMod>;
using MinNode = BinaryNode<ExprKind::kMin>;
using MaxNode = BinaryNode<ExprKind::kMax>;
using EQNode = BinaryNode<ExprKind::kEQ>;
using NENode = BinaryNode<ExprKind::kNE>;
using LTNode = BinaryNode<ExprKind::kLT>;
using LENode = BinaryNode<ExprKind::kLE>;
using GTNode = BinaryNode<ExprKind::kGT>;
using GENode = BinaryNode<ExprKind::kGE>;
using AndNode = BinaryNode<ExprKind::kAnd>;
using OrNode = BinaryNode<ExprKind::kOr>;

struct NotNode : ExprNode {
  static constexpr ExprKind kKind = ExprKind::kNot;
  explicit NotNode(Expr x) : ExprNode(kKind, DType::kBool), a(std::move(x)) {}
  Expr a;
};

struct SelectNode : ExprNode {
  static constexpr ExprKind kKind = ExprKind::kSelect;
  SelectNode(Expr c, Expr t, Expr f)
      : ExprNode(kKind, t.dtype()),
        cond(std::move(c)),
        true_value(std::move(t)),
        false_value(std::move(f)) {}
  Expr cond, true_value, false_value;
};

struct CastNode : ExprNode {
  static constexpr ExprKind kKind = ExprKind::kCast;
  CastNode(DType t, Expr v) : ExprNode(kKind, t), value(std::move(v)) {}
  Expr value;
};

/// A math intrinsic: a pure elementwise function of float arguments, result in their type.
/// `sigmoid(x)` is 1 / (1 + exp(-x)).
enum class Intrinsic : uint8_t { kExp, kLog, kSqrt, kTanh, kSigmoid, kErf };
/// The name an intrinsic prints and parses as (`exp`, `log`, `sqrt`, `tanh`, `sigmoid`, `erf`).
const char* intrinsic_name(Intrinsic f);
/// The intrinsic printed as `name`, if any.
std::optional<Intrinsic> intrinsic_from_name(std::string_view name);
/// Number of arguments the intrinsic takes.
size_t intrinsic_arity(Intrinsic f);
/// Its value in double precision (what the interpreter and the references compute).
double eval_intrinsic(Intrinsic f, double x);

/// A call of a math intrinsic; opaque to the simplifier and the rewrite rules.
struct CallNode : ExprNode {
  static constexpr ExprKind kKind = ExprKind::kCall;
  CallNode(DType t, Intrinsic f, std::vector<Expr> a)
      : ExprNode(kKind, t), op(f), args(std::move(a)) {}
  Intrinsic op;
  std::vector<Expr> args;
};

/// Storage of a tensor in a loop program: a dense row-major array with a static shape.
struct BufferNode {
  BufferNode(std::string n, DType t, std::vector<int64_t> s)
      : name(std::move(n)), dtype(t), shape(std::move(s)) {}
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  int64_t num_elements() const;
};
using Buffer = std::shared_ptr<const BufferNode>;
Buffer make_buffer(std::string name, DType dtype, std::vector<int64_t> shape);

/// tir: one element of a buffer.
struct LoadNode : ExprNode {
  static constexpr ExprKind kKind = ExprKind::kLoad;
  LoadNode(Buffer b, std::vector<Expr> idx)
      : ExprNode(kKind, b->dtype), buffer(std::move(b)), indices(std::move(idx)) {}
  Buffer buffer;
  std::vector<Expr> indices;
};

struct TensorNode;
using TensorRef = std::shared_ptr<const TensorNode>;

/// te: one element of a tensor; lowering turns it into a Load of the tensor's buffer.
struct TensorReadNode : ExprNode {
  static constexpr ExprKind kKind = ExprKind::kTensorRead;
  TensorReadNode(DType t, TensorRef tensor_, std::vector<Expr> idx)
      : ExprNode(kKind, t), tensor(std::move(tensor_)), indices(std::move(idx)) {}
  TensorRef tensor;
  std::vector<Expr> indices;
};

/// An iteration axis of a compute or a reduction: var ranges over [0, extent).
struct IterVar {
  Var var;
  int64_t extent = 0;
};

enum class ReduceOp : uint8_t { kSum, kMax, kMin };
const char* reduce_op_name(ReduceOp op);

/// te: a reduction over `axes`; only valid as the whole body of a compute.
struct ReduceNode : ExprNode {
  static constexpr ExprKind kKind = ExprKind::kReduce;
  ReduceNode(ReduceOp o, Expr s, std::vector<IterVar> ax)
      : ExprNode(kKind, s.dtype()), op(o), source(std::move(s)), axes(std::move(ax)) {}
  ReduceOp op;
  Expr source;
  std::vector<IterVar> axes;
};

// Validating constructors. They throw tessera::Error on ill-typed input.
Expr make_int(int64_t value, DType t = DType::kInt32);
Expr make_float(double value, DType t);
Expr make_binary(ExprKind kind, Expr a, Expr b);
Expr make_not(Expr a);
Expr make_select(Expr cond, Expr t, Expr f);
Expr make_cast(DType t, Expr value);
/// Arguments must be float32 or float64 and of one type (literals adopt it).
Expr make_call(Intrinsic f, std::vector<Expr> args);
Expr make_load(Buffer buffer, std::vector<Expr> indices);
Expr make_reduce(ReduceOp op, Expr source, std::vector<IterVar> axes);
/// The identity element of a reduction (0, -inf, +inf) in type t.
Expr reduce_identity(ReduceOp op, DType t);

Expr operator+(Expr a, Expr b);
Expr operator-(Expr a, Expr b);
Expr operator*(Expr a, Expr b);
Expr operator/(Expr a, Expr b);
Expr operator%(Expr a, Expr b);
Expr operator-(Expr a);
Expr operator<(Expr a, Expr b);
Expr operator<=(Expr a, Expr b);
Expr operator>(Expr a, Expr b);
Expr operator>=(Expr a, Expr b);
Expr operator&&(Expr a, Expr b);
Expr operator||(Expr a, Expr b);
Expr operator!(Expr a);
// `==` stays structural-free on handles; equality nodes are built by name.
Expr eq(Expr a, Expr b);
Expr ne(Expr a, Expr b);
Expr min(Expr a, Expr b);
Expr max(Expr a, Expr b);
Expr select(Expr cond, Expr t, Expr f);
Expr cast(DType t, Expr value);
Expr exp(Expr x);
Expr log(Expr x);
Expr sqrt(Expr x);
Expr tanh(Expr x);
Expr sigmoid(Expr x);
Expr erf(Expr x);
// Inside namespace tessera an unqualified `exp(d)` on a double would otherwise find the Expr
// overload above (hiding ::exp) and build an expression; use std::exp for numbers.
double exp(double) = delete;
double log(double) = delete;
double sqrt(double) = delete;
double tanh(double) = delete;
double erf(double) = delete;

/// Constant value of an integer immediate, if it is one.
inline const int64_t* as_const_int(const Expr& e) {
  const auto* n = e.as<IntImmNode>();
  return n ? &n->value : nullptr;
}
/// The pointer points into the node, which a temporary Expr would free at the end of the
/// statement: bind the expression to a name first.
const int64_t* as_const_int(Expr&& e) = delete;

}  // namespace tessera
