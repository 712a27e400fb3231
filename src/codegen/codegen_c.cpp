#include "codegen/codegen_c.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>

#include "codegen/codegen_c_emitter.h"
#include "te/error.h"
#include "te/expr_functor.h"
#include "te/tensor.h"
#include "tir/partition.h"
#include "tir/simplify.h"

namespace tessera {
namespace codegen_c_detail {
namespace {

// Identifiers a generated name must never take: C keywords, names the kernel itself uses and
// object-like macros from the headers it includes.
const char* const kReservedNames[] = {
    "auto",    "break",   "case",     "char",     "const",    "continue", "default",
    "do",      "double",  "else",     "enum",     "extern",   "float",    "for",
    "goto",    "if",      "inline",   "int",      "long",     "register", "restrict",
    "return",  "short",   "signed",   "sizeof",   "static",   "struct",   "switch",
    "typedef", "union",   "unsigned", "void",     "volatile", "while",    "bool",
    "true",    "false",   "asm",      "typeof",   "args",     "free",     "aligned_alloc",
    "main",    "NULL",    "NAN",      "INFINITY", "HUGE_VAL", "RAND_MAX", "int32_t",
    "int64_t", "uint8_t", "uint32_t", "uint64_t", "size_t",   "errno",    "exp",
    "expf",    "log",     "logf",     "sqrt",     "sqrtf",    "tanh",     "tanhf",
    "erf",     "erff",
};

// Static helpers the generated code may call; only the used ones are emitted.
const std::vector<std::pair<std::string, std::string>>& helper_definitions() {
  static const auto defs = [] {
    std::vector<std::pair<std::string, std::string>> d{
        {"tsr_floordiv",
         "/* Floor division (rounds toward negative infinity), as the interpreter does. */\n"
         "static inline int32_t tsr_floordiv(int32_t a, int32_t b) {\n"
         "  int32_t q = a / b;\n"
         "  return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;\n"
         "}\n"},
        {"tsr_immintrin",
         "/* AVX-512 and AVX2 intrinsics, where the compiler targets them (the vector exp's\n"
         "   vscalefps, masked moves). */\n"
         "#if defined(__AVX512F__) || defined(__AVX2__)\n"
         "#include <immintrin.h>\n"
         "#endif\n"},
        {"tsr_floormod",
         "/* Floor modulo: the result has the sign of the divisor. */\n"
         "static inline int32_t tsr_floormod(int32_t a, int32_t b) {\n"
         "  int32_t r = a % b;\n"
         "  return (r != 0 && (r < 0) != (b < 0)) ? r + b : r;\n"
         "}\n"},
    };
    for (DType t : {DType::kInt32, DType::kFloat32, DType::kFloat64}) {
      const char* sfx = t == DType::kInt32 ? "i32" : t == DType::kFloat32 ? "f32" : "f64";
      const char* ct = dtype_c_type(t);
      d.emplace_back(fmt::format("tsr_min_{}", sfx),
                     fmt::format("static inline {0} tsr_min_{1}({0} a, {0} b) {{ return a < b ? a "
                                 ": b; }}\n",
                                 ct, sfx));
      d.emplace_back(fmt::format("tsr_max_{}", sfx),
                     fmt::format("static inline {0} tsr_max_{1}({0} a, {0} b) {{ return a > b ? a "
                                 ": b; }}\n",
                                 ct, sfx));
    }
    d.emplace_back("tsr_sigmoid_f32",
                   "static inline float tsr_sigmoid_f32(float x) { return 1.0f / (1.0f + "
                   "expf(-x)); }\n");
    d.emplace_back("tsr_sigmoid_f64",
                   "static inline double tsr_sigmoid_f64(double x) { return 1.0 / (1.0 + exp(-x)); "
                   "}\n");
    return d;
  }();
  return defs;
}

const char* type_suffix(DType t) {
  switch (t) {
    case DType::kInt32:
      return "i32";
    case DType::kFloat32:
      return "f32";
    case DType::kFloat64:
      return "f64";
    case DType::kBool:
      break;
  }
  throw_internal("bool has no C helper or vector type");
}

// Float literals print exactly: 9 significant digits round-trip a float, 17 a double.
CExpr float_literal(double v, DType t) {
  const bool f32 = t == DType::kFloat32;
  if (std::isnan(v)) return {f32 ? "NAN" : "(double)NAN", f32 ? kPrecPrimary : kPrecUnary};
  if (std::isinf(v)) {
    std::string s = f32 ? "INFINITY" : "(double)INFINITY";
    if (v < 0) return {"-" + s, kPrecUnary};
    return {s, f32 ? kPrecPrimary : kPrecUnary};
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, f32 ? "%.9g" : "%.17g", v);
  std::string s = buf;
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  if (f32) s += "f";
  return {s, std::signbit(v) ? kPrecUnary : kPrecPrimary};
}

std::string shape_string(const Buffer& b) {
  return fmt::format("{}[{}]", dtype_name(b->dtype), fmt::join(b->shape, ", "));
}

bool has_invariant_store(const Stmt& s, const VarNode* v) {
  switch (s.kind()) {
    case StmtKind::kFor:
      return has_invariant_store(s.as<ForNode>()->body, v);
    case StmtKind::kStore: {
      const auto& idx = s.as<StoreNode>()->indices;
      return std::none_of(idx.begin(), idx.end(), [&](const Expr& e) { return uses_var(e, v); });
    }
    case StmtKind::kAllocate:
      return has_invariant_store(s.as<AllocateNode>()->body, v);
    case StmtKind::kPrefetch:
      return false;
    case StmtKind::kSeq:
      for (const Stmt& c : s.as<SeqNode>()->stmts) {
        if (has_invariant_store(c, v)) return true;
      }
      return false;
    case StmtKind::kIfThenElse: {
      const auto* n = s.as<IfThenElseNode>();
      return has_invariant_store(n->then_case, v) ||
             (n->else_case.defined() && has_invariant_store(n->else_case, v));
    }
  }
  return true;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Names, bindings, output

std::string CEmitter::fresh_name(const std::string& hint) {
  std::string base;
  for (char c : hint) base += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  if (base.empty() || std::isdigit(static_cast<unsigned char>(base[0])) || base[0] == '_') {
    base = "v" + base;
  }
  if (base.rfind("tsr_", 0) == 0) base = "u_" + base;
  // All-caps names with an underscore look like macros from the C headers (INT32_MAX, M_PI).
  if (base.find('_') != std::string::npos &&
      std::none_of(base.begin(), base.end(), [](char c) { return std::islower(c); })) {
    base += "_v";
  }
  std::string name = base;
  for (int k = 1; used_names_.count(name); ++k) name = fmt::format("{}_{}", base, k);
  used_names_.insert(name);
  return name;
}

const std::string& CEmitter::var_name(const VarNode* v) {
  auto it = var_names_.find(v);
  if (it == var_names_.end()) it = var_names_.emplace(v, fresh_name(v->name)).first;
  return it->second;
}

const std::string& CEmitter::buffer_name(const Buffer& b, bool for_store) {
  auto it = buffer_names_.find(b.get());
  if (it == buffer_names_.end()) {
    throw_error("codegen: buffer '{}' is neither an argument of program '{}' nor allocated",
                b->name, program_.name);
  }
  used_buffers_.insert(b.get());
  if (for_store) stored_buffers_.insert(b.get());
  return it->second;
}

std::optional<VarBinding> CEmitter::bind_var(const VarNode* v, VarBinding b) {
  std::optional<VarBinding> previous;
  if (auto it = bound_vars_.find(v); it != bound_vars_.end()) previous = it->second;
  bound_vars_[v] = std::move(b);
  return previous;
}

void CEmitter::restore_var(const VarNode* v, std::optional<VarBinding> previous) {
  if (previous) {
    bound_vars_[v] = std::move(*previous);
  } else {
    bound_vars_.erase(v);
  }
}

bool CEmitter::is_non_negative(const Expr& e) const {
  auto both = [&](const auto* n) { return is_non_negative(n->a) && is_non_negative(n->b); };
  switch (e.kind()) {
    case ExprKind::kIntImm:
      return e.as<IntImmNode>()->value >= 0;
    case ExprKind::kVar: {
      auto it = bound_vars_.find(e.as<VarNode>());
      return it != bound_vars_.end() && it->second.non_negative;
    }
    case ExprKind::kAdd:
      return both(e.as<AddNode>());
    case ExprKind::kMul:
      return both(e.as<MulNode>());
    case ExprKind::kDiv:
      return both(e.as<DivNode>());
    case ExprKind::kMod:
      return both(e.as<ModNode>());
    case ExprKind::kMin:
      return both(e.as<MinNode>());
    case ExprKind::kMax:
      return both(e.as<MaxNode>());
    default:
      return false;
  }
}

bool CEmitter::in_private_buffer(const Buffer& b, const Expr& index) const {
  auto it = private_buffers_.find(b.get());
  if (it == private_buffers_.end() || it->second != parallel_depth_) return false;
  std::optional<IntRange> r = bound_of(index, loop_ranges_);
  return r && r->min >= 0 && r->max < b->num_elements();
}

std::string CEmitter::vector_type(DType t, int64_t lanes) {
  std::string name = fmt::format("tsr_{}x{}", type_suffix(t), lanes);
  typedefs_.emplace(name, fmt::format("typedef {} {} __attribute__((vector_size({})));",
                                      dtype_c_type(t), name, lanes * dtype_bytes(t)));
  return name;
}

std::string CEmitter::helper(const std::string& name) {
  helpers_.insert(name);
  return name;
}

void CEmitter::line(const std::string& text) {
  body_.append(2 * indent_, ' ');
  body_ += text;
  body_ += '\n';
}

void CEmitter::open(const std::string& text) {
  line(text.empty() ? "{" : text + " {");
  ++indent_;
}

void CEmitter::close() {
  --indent_;
  line("}");
}

namespace {

bool has_div_or_mod(const std::vector<Expr>& indices) {
  class Finder : public ExprVisitor {
   public:
    bool found = false;

   protected:
    void visit_(const DivNode& n, const Expr& self) override {
      found = true;
      ExprVisitor::visit_(n, self);
    }
    void visit_(const ModNode& n, const Expr& self) override {
      found = true;
      ExprVisitor::visit_(n, self);
    }
    using ExprVisitor::visit_;
  } finder;
  for (const Expr& e : indices) finder.visit(e);
  return finder.found;
}

}  // namespace

Expr CEmitter::flat_index(const Buffer& b, const std::vector<Expr>& indices) {
  // A fused loop indexes its dimensions as p / W and p % W: only the flat form, where
  // (p / W) * W + p % W folds back to p, shows that consecutive p are consecutive elements (a
  // vector move instead of a gather).
  if (has_div_or_mod(indices)) return simplify(plain_flat_index(b, indices));
  return plain_flat_index(b, indices);
}

Expr CEmitter::plain_flat_index(const Buffer& b, const std::vector<Expr>& indices) {
  std::vector<Expr> terms;
  int64_t stride = 1;
  for (size_t d = indices.size(); d-- > 0;) {
    const Expr& idx = indices[d];
    if (const int64_t* c = as_const_int(idx)) {
      if (*c != 0) terms.push_back(make_int(*c * stride));
    } else {
      terms.push_back(stride == 1 ? idx : make_binary(ExprKind::kMul, idx, make_int(stride)));
    }
    stride *= b->shape[d];
  }
  if (terms.empty()) return make_int(0);
  // Outer dimensions first, as a reader writes it: i*32 + k.
  Expr flat = terms.back();
  for (size_t t = terms.size() - 1; t-- > 0;) flat = make_binary(ExprKind::kAdd, flat, terms[t]);
  return flat;
}

// ---------------------------------------------------------------------------------------------
// Statements

void CEmitter::emit(const Stmt& s) {
  switch (s.kind()) {
    case StmtKind::kFor:
      return emit_for(*s.as<ForNode>());
    case StmtKind::kStore:
      return emit_store(*s.as<StoreNode>());
    case StmtKind::kAllocate:
      return emit_allocate(*s.as<AllocateNode>());
    case StmtKind::kSeq:
      for (const Stmt& c : s.as<SeqNode>()->stmts) emit(c);
      return;
    case StmtKind::kIfThenElse:
      return emit_if(*s.as<IfThenElseNode>());
    case StmtKind::kPrefetch:
      return emit_prefetch(*s.as<PrefetchNode>());
  }
}

constexpr int64_t kMaxIndex = (int64_t{1} << 31) - 1;

void CEmitter::emit_for(const ForNode& n) {
  CExpr mn = print(n.min);
  const std::string name = var_name(n.var.get());
  const int64_t* cmin = as_const_int(n.min);
  // Loop counters and indices are 32-bit: a loop that would run past them is refused here rather
  // than wrapping (and never ending) in the kernel.
  if (n.extent > kMaxIndex || (cmin && *cmin + n.extent > kMaxIndex))
    throw_error("codegen: loop {} of {} iterations runs past 32-bit indices", name, n.extent);
  std::string end =
      cmin ? std::to_string(*cmin + n.extent) : fmt::format("{} + {}", mn.wrap(kPrecAdd), n.extent);
  // The loop's range, for the bounds of the indices inside it (in_private_buffer).
  std::optional<IntRange> saved_range;
  if (auto it = loop_ranges_.find(n.var.get()); it != loop_ranges_.end()) saved_range = it->second;
  if (std::optional<IntRange> r = bound_of(n.min, loop_ranges_)) {
    loop_ranges_[n.var.get()] = {r->min, r->max + n.extent - 1};
  } else {
    loop_ranges_.erase(n.var.get());
  }
  auto restore_range = [&] {
    if (saved_range) {
      loop_ranges_[n.var.get()] = *saved_range;
    } else {
      loop_ranges_.erase(n.var.get());
    }
  };
  bool enters_parallel = false;
  bool enters_simd = false;
  switch (n.for_kind) {
    case ForKind::kSerial:
      break;
    case ForKind::kParallel:
      // OpenMP forbids parallel regions in simd loops; nested parallelism only oversubscribes.
      if (parallel_depth_ > 0 || in_simd_) {
        line(fmt::format("// {}: parallel loop inside a parallel or simd loop, emitted serial",
                         name));
      } else {
        line("#pragma omp parallel for schedule(static)");
        enters_parallel = true;
      }
      break;
    case ForKind::kUnrolled:
      if (unroll_depth_ == 0) hoist_invariant_addresses(n);
      line(fmt::format("#pragma GCC unroll {}", std::min<int64_t>(n.extent, 65534)));
      break;
    case ForKind::kVectorized:
      if (in_simd_) {
        line(fmt::format("// {}: vectorized loop inside a simd loop, emitted serial", name));
        break;
      }
      if (emit_vector_loop(*this, n) || emit_guarded_vector_loop(*this, n)) {
        restore_range();
        return;
      }
      // A store whose address ignores the loop var is a reduction; `omp simd` would race on it.
      if (has_invariant_store(n.body, n.var.get())) {
        line(fmt::format("// {}: vectorized loop stores to a fixed address, kept scalar", name));
      } else {
        line("#pragma omp simd");
        enters_simd = true;
      }
      break;
  }
  open(fmt::format("for (int32_t {0} = {1}; {0} < {2}; ++{0})", name, mn.text, end));
  auto previous = bind_var(n.var.get(), {CExpr{name}, is_non_negative(n.min)});
  parallel_depth_ += enters_parallel;
  const bool was_simd = in_simd_;
  in_simd_ = in_simd_ || enters_simd;
  unroll_depth_ += n.for_kind == ForKind::kUnrolled;
  emit(n.body);
  unroll_depth_ -= n.for_kind == ForKind::kUnrolled;
  if (n.for_kind == ForKind::kUnrolled && unroll_depth_ == 0) {
    hoisted_.clear();
    hoist_outer_vars_.clear();
  }
  in_simd_ = was_simd;
  parallel_depth_ -= enters_parallel;
  restore_var(n.var.get(), std::move(previous));
  restore_range();
  close();
}

void CEmitter::emit_store(const StoreNode& n) {
  ElementRef at = element(n.buffer, flat_index(n.buffer, n.indices), /*for_store=*/true);
  line(fmt::format("{} = {};", at.text(), print(n.value).text));
}

// Into L2 (locality 2: prefetcht1): the rule prefetches ahead by many iterations, further than
// L1 holds.
void CEmitter::emit_prefetch(const PrefetchNode& n) {
  line(fmt::format("__builtin_prefetch(&{}, 0, 2);",
                   element(n.buffer, flat_index(n.buffer, n.indices)).text()));
}

constexpr int64_t kMaxStackAllocationBytes = 16 * 1024;

void CEmitter::emit_allocate(const AllocateNode& n) {
  const Buffer& b = n.buffer;
  const std::string name = fresh_name(b->name);
  std::optional<std::string> previous;
  if (auto it = buffer_names_.find(b.get()); it != buffer_names_.end()) previous = it->second;
  buffer_names_[b.get()] = name;
  std::optional<int> previous_depth;
  if (auto it = private_buffers_.find(b.get()); it != private_buffers_.end())
    previous_depth = it->second;
  private_buffers_[b.get()] = parallel_depth_;
  // Small buffers (caches and accumulators of a tile, allocated inside loops) live on the stack,
  // where the compiler can keep them in registers; large ones on the heap.
  if (b->num_elements() > kMaxIndex)
    throw_error("codegen: buffer {} of {} elements is past 32-bit indices", b->name,
                b->num_elements());
  const int64_t bytes = b->num_elements() * dtype_bytes(b->dtype);
  const bool on_stack = bytes <= kMaxStackAllocationBytes;
  if (on_stack) {
    line(fmt::format("{0} {1}[{2}] __attribute__((aligned(64)));", dtype_c_type(b->dtype), name,
                     b->num_elements()));
  } else {
    // aligned_alloc wants a size that is a multiple of the alignment.
    line(fmt::format("{0}* restrict {1} = ({0}*)aligned_alloc(64, {2});", dtype_c_type(b->dtype),
                     name, (bytes + 63) / 64 * 64));
  }
  emit(n.body);
  if (previous_depth) {
    private_buffers_[b.get()] = *previous_depth;
  } else {
    private_buffers_.erase(b.get());
  }
  if (!on_stack) line(fmt::format("free({});", name));
  if (previous) {
    buffer_names_[b.get()] = *previous;
  } else {
    buffer_names_.erase(b.get());
  }
}

void CEmitter::emit_if(const IfThenElseNode& n) {
  open(fmt::format("if ({})", print(n.cond).text));
  emit(n.then_case);
  const IfThenElseNode* cur = &n;
  while (cur->else_case.defined()) {
    --indent_;
    if (const auto* elif = cur->else_case.as<IfThenElseNode>()) {
      line(fmt::format("}} else if ({}) {{", print(elif->cond).text));
      ++indent_;
      emit(elif->then_case);
      cur = elif;
    } else {
      line("} else {");
      ++indent_;
      emit(cur->else_case);
      break;
    }
  }
  close();
}

// ---------------------------------------------------------------------------------------------
// Scalar expressions

CExpr CEmitter::binary(const Expr& a, const Expr& b, const char* op, int prec, int left_min,
                       int right_min) {
  return {fmt::format("{} {} {}", print(a).wrap(left_min), op, print(b).wrap(right_min)), prec};
}

CExpr CEmitter::call(const std::string& fn, const Expr& a, const Expr& b) {
  return {fmt::format("{}({}, {})", helper(fn), print(a).text, print(b).text)};
}

CExpr CEmitter::visit_(const IntImmNode& n, const Expr&) {
  if (n.dtype == DType::kBool) return {n.value ? "1" : "0"};
  if (n.value == INT32_MIN) return {"INT32_MIN"};
  return {std::to_string(n.value), n.value < 0 ? kPrecUnary : kPrecPrimary};
}

CExpr CEmitter::visit_(const FloatImmNode& n, const Expr&) {
  return float_literal(n.value, n.dtype);
}

CExpr CEmitter::visit_(const VarNode& n, const Expr&) {
  auto it = bound_vars_.find(&n);
  if (it == bound_vars_.end()) {
    throw_error("codegen: variable '{}' is used outside a loop that defines it (program '{}')",
                n.name, program_.name);
  }
  return it->second.text;
}

// Integer + is associative (indices never overflow), so `i * 64 + (j * 16 + k)` drops its
// parentheses; float + is not.
CExpr CEmitter::visit_(const AddNode& n, const Expr&) {
  return binary(n.a, n.b, "+", kPrecAdd, kPrecAdd, is_float(n.dtype) ? kPrecMul : kPrecAdd);
}
CExpr CEmitter::visit_(const SubNode& n, const Expr&) {
  return binary(n.a, n.b, "-", kPrecAdd, kPrecAdd, kPrecMul);
}
CExpr CEmitter::visit_(const MulNode& n, const Expr&) {
  return binary(n.a, n.b, "*", kPrecMul, kPrecMul, kPrecUnary);
}

// Integer division and modulo floor; C's `/` and `%` truncate, which agrees only when both
// operands are non-negative.
CExpr CEmitter::visit_(const DivNode& n, const Expr&) {
  if (is_float(n.dtype) || (is_non_negative(n.a) && is_non_negative(n.b))) {
    return binary(n.a, n.b, "/", kPrecMul, kPrecMul, kPrecUnary);
  }
  return call("tsr_floordiv", n.a, n.b);
}
CExpr CEmitter::visit_(const ModNode& n, const Expr&) {
  if (is_non_negative(n.a) && is_non_negative(n.b)) {
    return binary(n.a, n.b, "%", kPrecMul, kPrecMul, kPrecUnary);
  }
  return call("tsr_floormod", n.a, n.b);
}

// Helpers rather than an inline `a < b ? a : b`: nested min/max would duplicate text.
CExpr CEmitter::visit_(const MinNode& n, const Expr&) {
  return call(fmt::format("tsr_min_{}", type_suffix(n.dtype)), n.a, n.b);
}
CExpr CEmitter::visit_(const MaxNode& n, const Expr&) {
  return call(fmt::format("tsr_max_{}", type_suffix(n.dtype)), n.a, n.b);
}

// Comparison operands are parenthesized unless arithmetic, which also keeps gcc's
// -Wparentheses quiet about `a < b == c`.
CExpr CEmitter::visit_(const EQNode& n, const Expr&) {
  return binary(n.a, n.b, "==", kPrecEq, kPrecAdd, kPrecAdd);
}
CExpr CEmitter::visit_(const NENode& n, const Expr&) {
  return binary(n.a, n.b, "!=", kPrecEq, kPrecAdd, kPrecAdd);
}
CExpr CEmitter::visit_(const LTNode& n, const Expr&) {
  return binary(n.a, n.b, "<", kPrecRel, kPrecAdd, kPrecAdd);
}
CExpr CEmitter::visit_(const LENode& n, const Expr&) {
  return binary(n.a, n.b, "<=", kPrecRel, kPrecAdd, kPrecAdd);
}
CExpr CEmitter::visit_(const GTNode& n, const Expr&) {
  return binary(n.a, n.b, ">", kPrecRel, kPrecAdd, kPrecAdd);
}
CExpr CEmitter::visit_(const GENode& n, const Expr&) {
  return binary(n.a, n.b, ">=", kPrecRel, kPrecAdd, kPrecAdd);
}
CExpr CEmitter::visit_(const AndNode& n, const Expr&) {
  return binary(n.a, n.b, "&&", kPrecAnd, kPrecAnd, kPrecAnd);
}
CExpr CEmitter::visit_(const OrNode& n, const Expr&) {
  // `&&` inside `||` gets parentheses: correct without them, but gcc warns.
  auto side = [&](const Expr& e) {
    CExpr c = print(e);
    return c.prec == kPrecOr ? c.text : c.wrap(kPrecEq);
  };
  return {fmt::format("{} || {}", side(n.a), side(n.b)), kPrecOr};
}
CExpr CEmitter::visit_(const NotNode& n, const Expr&) {
  return {"!" + print(n.a).wrap(kPrecUnary), kPrecUnary};
}

// The C conditional operator evaluates only the chosen branch, so guarded loads stay safe.
CExpr CEmitter::visit_(const SelectNode& n, const Expr&) {
  return {fmt::format("{} ? {} : {}", print(n.cond).wrap(kPrecOr),
                      print(n.true_value).wrap(kPrecOr), print(n.false_value).wrap(kPrecOr)),
          kPrecTernary};
}

CExpr CEmitter::visit_(const CastNode& n, const Expr&) {
  return {fmt::format("({}){}", dtype_c_type(n.dtype), print(n.value).wrap(kPrecUnary)),
          kPrecUnary};
}

std::string CEmitter::math_function(Intrinsic f, DType t) {
  const bool f32 = t == DType::kFloat32;
  if (!is_float(t)) throw_internal("codegen: {} on {}", intrinsic_name(f), dtype_name(t));
  switch (f) {
    case Intrinsic::kExp:
      return f32 ? "expf" : "exp";
    case Intrinsic::kLog:
      return f32 ? "logf" : "log";
    case Intrinsic::kSqrt:
      return f32 ? "sqrtf" : "sqrt";
    case Intrinsic::kTanh:
      return f32 ? "tanhf" : "tanh";
    case Intrinsic::kSigmoid:
      return helper(f32 ? "tsr_sigmoid_f32" : "tsr_sigmoid_f64");
    case Intrinsic::kErf:
      return f32 ? "erff" : "erf";
  }
  throw_internal("codegen: unknown intrinsic");
}

// float32 calls use the float functions of <math.h> (expf), float64 the double ones (exp).
CExpr CEmitter::visit_(const CallNode& n, const Expr&) {
  std::vector<std::string> args;
  for (const Expr& a : n.args) args.push_back(print(a).text);
  return {fmt::format("{}({})", math_function(n.op, n.dtype), fmt::join(args, ", "))};
}

CExpr CEmitter::visit_(const LoadNode& n, const Expr&) {
  return {element(n.buffer, flat_index(n.buffer, n.indices)).text()};
}

CExpr CEmitter::visit_(const TensorReadNode& n, const Expr&) {
  throw_error("codegen: tensor read of '{}' in program '{}'; lower the program first",
              n.tensor->name, program_.name);
}

CExpr CEmitter::visit_(const ReduceNode&, const Expr&) {
  throw_error("codegen: reduction in program '{}'; lower the program first", program_.name);
}

// ---------------------------------------------------------------------------------------------
// The translation unit

std::string CEmitter::generate(const CodegenOptions& opts) {
  used_names_.insert(std::begin(kReservedNames), std::end(kReservedNames));
  used_names_.insert(opts.entry);
  const std::vector<Buffer> args = program_.args();
  std::vector<std::string> arg_names;
  for (const Buffer& b : args) {
    if (buffer_names_.count(b.get())) {
      throw_error("codegen: buffer '{}' is passed twice to program '{}'", b->name, program_.name);
    }
    arg_names.push_back(fresh_name(b->name));
    buffer_names_[b.get()] = arg_names.back();
  }
  if (!program_.body.defined()) throw_error("codegen: program '{}' has no body", program_.name);
  emit(program_.body);

  std::string name = program_.name;
  std::replace(name.begin(), name.end(), '\n', ' ');
  std::string out = fmt::format("// tessera kernel: {}\n", name);
  for (size_t i = 0; i < args.size(); ++i) {
    out += fmt::format("// args[{}]: {} {} ({})\n", i, arg_names[i], shape_string(args[i]),
                       i < program_.inputs.size() ? "input" : "output");
  }
  out += "#include <math.h>\n#include <stdint.h>\n#include <stdlib.h>\n";
  for (const auto& [helper_name, text] : helper_definitions()) {
    if (helpers_.count(helper_name)) out += "\n" + text;
  }
  if (!typedefs_.empty()) out += "\n";
  for (const auto& [type_name, text] : typedefs_) out += text + "\n";
  out += fmt::format("\nvoid {}(void* const* args) {{\n", opts.entry);
  bool any_used = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const BufferNode* b = args[i].get();
    if (!used_buffers_.count(b)) continue;
    any_used = true;
    // Inputs are read-only; `restrict` tells gcc the arrays do not overlap.
    const char* cv = stored_buffers_.count(b) ? "" : "const ";
    out += fmt::format("  {0}{1}* restrict {2} = ({0}{1}*)args[{3}];\n", cv, dtype_c_type(b->dtype),
                       arg_names[i], i);
  }
  if (!any_used) out += "  (void)args;\n";
  out += body_;
  out += "}\n";
  return out;
}

}  // namespace codegen_c_detail

std::string codegen_c(const Program& p, const CodegenOptions& opts) {
  Program partitioned = p;
  if (p.body.defined()) partitioned.body = partition_tail_guards(p.body);
  return codegen_c_detail::CEmitter(partitioned).generate(opts);
}

}  // namespace tessera
