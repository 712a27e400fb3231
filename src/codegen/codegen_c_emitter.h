/// Internal to codegen: the C emitter shared by codegen_c.cpp and the vector path
/// (codegen_c_vector*.cpp).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>

#include "codegen/codegen_c.h"
#include "te/expr_functor.h"
#include "tir/program.h"
#include "tir/simplify.h"

namespace tessera::codegen_c_detail {

/// C operator precedence; a higher level binds tighter.
enum Prec : int {
  kPrecTernary = 3,
  kPrecOr = 4,
  kPrecAnd = 5,
  kPrecEq = 9,
  kPrecRel = 10,
  kPrecAdd = 12,
  kPrecMul = 13,
  kPrecUnary = 15,
  kPrecPrimary = 16,
};

/// A piece of C expression text and the precedence of its outermost operator.
struct CExpr {
  std::string text;
  int prec = kPrecPrimary;
  /// The text, parenthesized unless it binds at least as tightly as min_prec.
  std::string wrap(int min_prec) const { return prec >= min_prec ? text : "(" + text + ")"; }
};

/// How a variable prints and whether it is known to be non-negative.
struct VarBinding {
  CExpr text;
  bool non_negative = false;
};

/// A buffer element as C text: `base[index]`, base the buffer or a pointer into it.
struct ElementRef {
  std::string base;
  std::string index;
  std::string text() const { return base + "[" + index + "]"; }
};

/// A flat index as a part only the variables of `outer` change plus the rest.
struct IndexSplit {
  Expr invariant;
  Expr varying;
};
/// Splits `flat` by its linear form (tir/simplify.h's split_linear); nullopt unless both parts
/// have a variable term.
std::optional<IndexSplit> split_index(const Expr& flat, const std::set<const VarNode*>& outer);

/// Emits C for one program. Every name it declares is unique in the function, so C scoping never
/// shadows anything.
class CEmitter : private ExprFunctor<CExpr> {
 public:
  explicit CEmitter(const Program& program) : program_(program) {}
  std::string generate(const CodegenOptions& opts);

  // --- used by the vector path ---
  /// Scalar C text of an expression under the current variable bindings.
  CExpr print(const Expr& e) { return visit(e); }
  /// The row-major flat index of `indices` into `b`, as an int32 expression.
  static Expr flat_index(const Buffer& b, const std::vector<Expr>& indices);
  static Expr plain_flat_index(const Buffer& b, const std::vector<Expr>& indices);
  /// The C name of a buffer in scope; records that the buffer is used (and stored to).
  const std::string& buffer_name(const Buffer& b, bool for_store = false);
  /// The element of `b` at `flat`, through a base pointer hoisted before the enclosing unrolled
  /// nest where one covers it (codegen_c_hoist.cpp); records the use as buffer_name does.
  ElementRef element(const Buffer& b, const Expr& flat, bool for_store = false);
  /// A fresh identifier derived from `hint`.
  std::string fresh_name(const std::string& hint);
  /// The C name of a loop variable (assigned on first use, then stable).
  const std::string& var_name(const VarNode* v);
  /// Binds `v` to `b`; returns the previous binding to pass to restore_var.
  std::optional<VarBinding> bind_var(const VarNode* v, VarBinding b);
  void restore_var(const VarNode* v, std::optional<VarBinding> previous);
  /// True if `e` is provably >= 0 (literals, non-negative loop vars, + * / % min max of those).
  bool is_non_negative(const Expr& e) const;
  /// True where every value `index` takes over the enclosing loops' ranges lies in a buffer
  /// allocated in this kernel, inside the innermost parallel loop around here (or with no parallel
  /// loop at all): memory only this thread touches, which a whole vector may read and write back.
  bool in_private_buffer(const Buffer& b, const Expr& index) const;
  /// The name of a GCC vector type of `lanes` elements of `t`; emits its typedef.
  std::string vector_type(DType t, int64_t lanes);
  /// The C function computing intrinsic f on type t (`expf`, `exp`, or a tsr_ helper).
  std::string math_function(Intrinsic f, DType t);
  /// Records that the kernel uses helper `name` (a definition or include before the function).
  std::string helper(const std::string& name);
  /// Appends one indented line.
  void line(const std::string& text);
  /// Appends `text {` (or `{` when text is empty) and indents.
  void open(const std::string& text);
  void close();
  void emit(const Stmt& s);

 private:
  void emit_for(const ForNode& n);
  void emit_store(const StoreNode& n);
  void emit_allocate(const AllocateNode& n);
  void emit_if(const IfThenElseNode& n);
  void emit_prefetch(const PrefetchNode& n);
  /// Before the outermost unrolled loop of a nest: one pointer per buffer and loop-invariant part
  /// of its indices, which element() then indexes by the part the nest's loops change.
  void hoist_invariant_addresses(const ForNode& nest);
  CExpr binary(const Expr& a, const Expr& b, const char* op, int prec, int left_min, int right_min);
  CExpr call(const std::string& fn, const Expr& a, const Expr& b);

  CExpr visit_(const IntImmNode& n, const Expr&) override;
  CExpr visit_(const FloatImmNode& n, const Expr&) override;
  CExpr visit_(const VarNode& n, const Expr&) override;
  CExpr visit_(const AddNode& n, const Expr&) override;
  CExpr visit_(const SubNode& n, const Expr&) override;
  CExpr visit_(const MulNode& n, const Expr&) override;
  CExpr visit_(const DivNode& n, const Expr&) override;
  CExpr visit_(const ModNode& n, const Expr&) override;
  CExpr visit_(const MinNode& n, const Expr&) override;
  CExpr visit_(const MaxNode& n, const Expr&) override;
  CExpr visit_(const EQNode& n, const Expr&) override;
  CExpr visit_(const NENode& n, const Expr&) override;
  CExpr visit_(const LTNode& n, const Expr&) override;
  CExpr visit_(const LENode& n, const Expr&) override;
  CExpr visit_(const GTNode& n, const Expr&) override;
  CExpr visit_(const GENode& n, const Expr&) override;
  CExpr visit_(const AndNode& n, const Expr&) override;
  CExpr visit_(const OrNode& n, const Expr&) override;
  CExpr visit_(const NotNode& n, const Expr&) override;
  CExpr visit_(const SelectNode& n, const Expr&) override;
  CExpr visit_(const CastNode& n, const Expr&) override;
  CExpr visit_(const CallNode& n, const Expr&) override;
  CExpr visit_(const LoadNode& n, const Expr&) override;
  CExpr visit_(const TensorReadNode& n, const Expr&) override;
  CExpr visit_(const ReduceNode& n, const Expr&) override;

  const Program& program_;
  std::string body_;
  int indent_ = 1;
  int parallel_depth_ = 0;
  bool in_simd_ = false;
  std::set<std::string> used_names_;
  std::unordered_map<const VarNode*, std::string> var_names_;
  std::unordered_map<const VarNode*, VarBinding> bound_vars_;
  RangeMap loop_ranges_;
  std::unordered_map<const BufferNode*, int> private_buffers_;  // -> parallel depth at allocation
  std::unordered_map<const BufferNode*, std::string> buffer_names_;
  std::set<const BufferNode*> used_buffers_;
  std::set<const BufferNode*> stored_buffers_;
  std::set<std::string> helpers_;
  struct HoistedBase {
    const BufferNode* buffer;
    Expr invariant;
    std::string name;
  };
  std::vector<HoistedBase> hoisted_;
  std::set<const VarNode*> hoist_outer_vars_;
  int unroll_depth_ = 0;
  std::map<std::string, std::string> typedefs_;
};

/// Emits a vectorized loop with GCC vector extensions when its body allows it (straight-line
/// stores of arithmetic); returns false and emits nothing otherwise.
bool emit_vector_loop(CEmitter& em, const ForNode& loop);

/// For a vectorized loop whose body is one guard (a split's tail) around a body emit_vector_loop
/// accepts: emits `if (every lane passes) { the vector block } else { the block masked to the
/// lanes that pass }` and returns true. Returns false and emits nothing when the guard or the
/// body does not allow it.
bool emit_guarded_vector_loop(CEmitter& em, const ForNode& loop);

}  // namespace tessera::codegen_c_detail
