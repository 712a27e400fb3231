// Vectorized loops as GCC vector extensions.
//
// A loop `for v in [m, m + L) vectorized` whose body is straight-line stores becomes one block
// that computes all L lanes at once:
//   - a sub-expression that does not use v stays scalar; gcc broadcasts it when it meets a vector;
//   - a load whose flat index is affine in v with coefficient 1 is one unaligned vector move
//     (`__builtin_memcpy` into a vector variable, which gcc turns into vmovups);
//   - any other load that uses v is gathered lane by lane, a store is scattered lane by lane;
//   - + - * and float / act on whole vectors, so `c + a * b` contracts to an FMA;
//   - v itself, used as a value, is the vector {m, m + 1, ..., m + L - 1};
//   - float32 exp is computed on the whole vector (Cephes' expf: round x·log2(e) to n, a degree-6
//     polynomial for e^r on the remainder by Estrin's scheme, then 2^n: vscalefps where AVX-512 is
//     there, else built in the exponent bits as two factors so that every n from -150 to 128 stays
//     normal; max relative error about 2e-7, inf above 88.72, NaN kept);
//   - float32 sigmoid is 1 / (1 + e^-x) with that exp, which on AVX2 need not keep e^-x exact
//     outside the normal floats (one factor for 2^n); the other intrinsic calls
//     (log, sqrt, tanh, float64 exp and sigmoid) compute their argument as a vector, then call the
//     scalar libm function lane by lane: there are no vector versions of them without -ffast-math
//     (glibc's libmvec needs it), and the kernels are not compiled with it. The rest of the body
//     stays vectorized.
//   - float32 and int32 min and max select through the comparison's lane mask;
//   - a select whose condition does not use v (inlined zero padding read along channel lanes) is
//     a scalar branch between two vectors, each computed only on its side, so that a load the
//     condition guards is never made;
//   - a select whose condition varies across lanes (LeakyRelu's test of the loaded value, erf's
//     two ranges, zero padding read along a row) computes both sides and blends them through the
//     condition's lane mask; a side that loads what the condition does not is a masked block of
//     the lanes that take it, so that no lane loads what the scalar loop would not.
// A body that is one guard around such stores (the tail of a split whose factor does not divide
// the extent) runs as whole vectors where every lane passes and as a masked block elsewhere: see
// codegen_c_vector_memory.cpp.
// GNU C (unlike C++) has no `?:` on vectors, so bodies with other varying comparisons, selects,
// bool values or integer division take the `#pragma omp simd` path in codegen_c.cpp instead.

#include <fmt/format.h>

#include <algorithm>

#include "codegen/codegen_c_vector_loop.h"
#include "te/error.h"
#include "te/expr_functor.h"
#include "tir/printer.h"
#include "tir/simplify.h"
#include "tir/stmt_functor.h"
#include "tir/structural_equal.h"

namespace tessera::codegen_c_detail {

namespace {

bool is_power_of_two(int64_t x) {
  return x > 0 && (x & (x - 1)) == 0;
}

}  // namespace

bool VectorLoop::supported() const {
  return lanes_ >= 2 && lanes_ <= 64 && is_power_of_two(lanes_) && supported_stmt(loop_.body);
}

void VectorLoop::emit(const Expr& lane_guard) {
  base_ = em_.var_name(v_);
  em_.line(fmt::format("// {}: vectorized, {} lanes (GCC vector extensions){}", base_, lanes_,
                       lane_guard.defined() ? ", masked to the lanes that pass the guard" : ""));
  CExpr mn = em_.print(loop_.min);
  em_.open("");
  // Inside the block the loop var names lane 0; contiguous accesses start there.
  em_.line(fmt::format("const int32_t {} = {};", base_, mn.text));
  non_negative_ = em_.is_non_negative(loop_.min);
  if (lane_guard.defined()) em_.open(fmt::format("if ({})", declare_mask(lane_guard)));
  auto previous = em_.bind_var(v_, {CExpr{base_}, non_negative_});
  emit_stmt(loop_.body);
  em_.restore_var(v_, std::move(previous));
  if (lane_guard.defined()) em_.close();
  em_.close();
  // The names below were declared inside this block.
  lane_ids_.clear();
  mask_.clear();
  avx512_mask_.clear();
  avx2_mask_.clear();
}

bool VectorLoop::supported_stmt(const Stmt& s) const {
  if (const auto* seq = s.as<SeqNode>()) {
    for (const Stmt& c : seq->stmts) {
      if (!supported_stmt(c)) return false;
    }
    return true;
  }
  const auto* st = s.as<StoreNode>();
  if (!st || st->buffer->dtype == DType::kBool) return false;
  // A store to one address from every lane is a reduction, not a vector store.
  bool varying_index = false;
  for (const Expr& i : st->indices) varying_index |= uses_var(i, v_);
  return varying_index && supported_value(st->value);
}

bool VectorLoop::supported_value(const Expr& e) const {
  if (!uses_var(e, v_)) return true;
  switch (e.kind()) {
    case ExprKind::kVar:
      return true;
    case ExprKind::kLoad:
      return e.dtype() != DType::kBool;
    case ExprKind::kAdd:
      return both_supported(e.as<AddNode>());
    case ExprKind::kSub:
      return both_supported(e.as<SubNode>());
    case ExprKind::kMul:
      return both_supported(e.as<MulNode>());
    case ExprKind::kDiv:
      return is_float(e.dtype()) && both_supported(e.as<DivNode>());
    case ExprKind::kMin:
      return lane_mask_fits(e.dtype()) && both_supported(e.as<MinNode>());
    case ExprKind::kMax:
      return lane_mask_fits(e.dtype()) && both_supported(e.as<MaxNode>());
    case ExprKind::kCast: {
      const auto* n = e.as<CastNode>();
      return n->dtype != DType::kBool && n->value.dtype() != DType::kBool &&
             supported_value(n->value);
    }
    case ExprKind::kCall: {
      for (const Expr& a : e.as<CallNode>()->args) {
        if (!supported_value(a)) return false;
      }
      return true;
    }
    case ExprKind::kSelect: {
      const auto* n = e.as<SelectNode>();
      if (uses_var(n->cond, v_)) return blendable(*n);
      return e.dtype() != DType::kBool && supported_value(n->true_value) &&
             supported_value(n->false_value);
    }
    default:
      return false;
  }
}

std::pair<Expr, Expr> VectorLoop::operands_of(const Expr& c) {
  switch (c.kind()) {
#define TESSERA_CASE(Kind)              \
  case ExprKind::k##Kind: {             \
    const auto* n = c.as<Kind##Node>(); \
    return {n->a, n->b};                \
  }
    TESSERA_CASE(EQ)
    TESSERA_CASE(NE)
    TESSERA_CASE(LT)
    TESSERA_CASE(LE)
    TESSERA_CASE(GT)
    TESSERA_CASE(GE)
    TESSERA_CASE(And)
    TESSERA_CASE(Or)
#undef TESSERA_CASE
    default:
      return {};
  }
}

bool VectorLoop::supported_condition(const Expr& c) const {
  if (!uses_var(c, v_)) return c.dtype() == DType::kBool;
  if (c.kind() == ExprKind::kNot) return supported_condition(c.as<NotNode>()->a);
  auto [a, b] = operands_of(c);
  if (!a.defined()) return false;
  if (c.kind() == ExprKind::kAnd || c.kind() == ExprKind::kOr)
    return supported_condition(a) && supported_condition(b);
  return lane_mask_fits(a.dtype()) && a.dtype() == b.dtype() && supported_value(a) &&
         supported_value(b);
}

std::vector<Expr> VectorLoop::loads_in(const Expr& e) {
  struct Collect : ExprVisitor {
    std::vector<Expr> loads;
    void visit_(const LoadNode& n, const Expr& self) override {
      loads.push_back(self);
      ExprVisitor::visit_(n, self);
    }
  } collect;
  collect.visit(e);
  return collect.loads;
}

std::vector<Expr> VectorLoop::loads_beyond_condition(const Expr& side, const Expr& cond) {
  const std::vector<Expr> made = loads_in(cond);
  std::vector<Expr> beyond;
  for (const Expr& load : loads_in(side)) {
    if (std::none_of(made.begin(), made.end(),
                     [&](const Expr& m) { return structural_equal(m, load); })) {
      beyond.push_back(load);
    }
  }
  return beyond;
}

bool VectorLoop::blendable(const SelectNode& n) const {
  if (!lane_mask_fits(n.dtype) || !supported_condition(n.cond)) return false;
  for (const Expr& side : {n.true_value, n.false_value}) {
    for (const Expr& load : loads_beyond_condition(side, n.cond)) {
      if (!uses_var(load, v_)) return false;
    }
  }
  return supported_value(n.true_value) && supported_value(n.false_value);
}

bool VectorLoop::lane_mask_fits(DType t) {
  return t == DType::kFloat32 || t == DType::kInt32;
}

template <typename Node>
bool VectorLoop::both_supported(const Node* n) const {
  return supported_value(n->a) && supported_value(n->b);
}

void VectorLoop::emit_stmt(const Stmt& s) {
  if (const auto* seq = s.as<SeqNode>()) {
    for (const Stmt& c : seq->stmts) emit_stmt(c);
  } else {
    emit_store(*s.as<StoreNode>());
  }
}

void VectorLoop::declare_vector(const std::string& type, const std::string& name, const VExpr& v) {
  em_.line(v.varying
               ? fmt::format("const {} {} = {};", type, name, v.c.text)
               : fmt::format("const {0} {1} = {2} - ({0}){{0}};", type, name, v.c.wrap(kPrecAdd)));
}

std::string VectorLoop::emit_uniform_select(const SelectNode& n) {
  const std::string type = em_.vector_type(n.dtype, lanes_);
  const std::string result = em_.fresh_name("select_vec");
  em_.line(fmt::format("{} {};", type, result));
  auto assign = [&](const Expr& side) {
    VExpr v = value(side);
    em_.line(v.varying ? fmt::format("{} = {};", result, v.c.text)
                       : fmt::format("{0} = {1} - ({2}){{0}};", result, v.c.wrap(kPrecAdd), type));
  };
  // Names declared inside a branch end with it; the lane ids must then be declared again.
  const std::string lane_ids_before = lane_ids_;
  em_.open(fmt::format("if ({})", em_.print(n.cond).text));
  assign(n.true_value);
  em_.close();
  lane_ids_ = lane_ids_before;
  em_.open("else");
  assign(n.false_value);
  em_.close();
  lane_ids_ = lane_ids_before;
  return result;
}

std::string VectorLoop::emit_call(const CallNode& n) {
  const std::string type = em_.vector_type(n.dtype, lanes_);
  std::vector<std::string> args;
  for (const Expr& a : n.args) {
    VExpr v = value(a);
    args.push_back(em_.fresh_name(std::string(intrinsic_name(n.op)) + "_arg"));
    declare_vector(type, args.back(), v);
  }
  if (n.op == Intrinsic::kExp && n.dtype == DType::kFloat32) return emit_expf(args[0], type);
  if (n.op == Intrinsic::kSigmoid && n.dtype == DType::kFloat32) {
    const std::string minus_x = em_.fresh_name("sigmoid_minus_x");
    em_.line(fmt::format("const {} {} = -{};", type, minus_x, args[0]));
    const std::string e = emit_expf(minus_x, type, /*saturating=*/true);
    const std::string result = em_.fresh_name("sigmoid_vec");
    em_.line(fmt::format("const {} {} = 1.0f / (1.0f + {});", type, result, e));
    return result;
  }
  const std::string fn = em_.math_function(n.op, n.dtype);  // declares its helper, if any
  const std::string result = em_.fresh_name(std::string(intrinsic_name(n.op)) + "_vec");
  em_.line(fmt::format("{} {};", type, result));
  const std::string lane = em_.fresh_name(base_ + "_lane");
  em_.open(fmt::format("for (int32_t {0} = 0; {0} < {1}; ++{0})", lane, lanes_));
  std::string call_args;
  for (size_t i = 0; i < args.size(); ++i) {
    call_args += fmt::format("{}{}[{}]", i ? ", " : "", args[i], lane);
  }
  // Lanes a mask turns off are not passed to libm (errno, floating-point flags, wasted calls).
  em_.line(mask_.empty() ? fmt::format("{}[{}] = {}({});", result, lane, fn, call_args)
                         : fmt::format("{}[{}] = {}[{}] ? {}({}) : 0;", result, lane, mask_, lane,
                                       fn, call_args));
  em_.close();
  return result;
}

std::string VectorLoop::emit_expf(const std::string& x, const std::string& type, bool saturating) {
  const std::string itype = em_.vector_type(DType::kInt32, lanes_);
  auto name = [&](const char* what) { return em_.fresh_name(std::string("exp_") + what); };
  auto splat = [&](const char* c) { return fmt::format("(({}){{0}} + {})", type, c); };
  const std::string hi = name("hi"), lo = name("lo"), xc = name("x"), n = name("n"), r = name("r"),
                    p = name("p"), ni = name("ni"), n1 = name("n1"), result = name("vec");
  const char* kMax = "88.72283935546875f";  // above it e^x overflows to inf
  const char* kMin = "-104.0f";             // below it e^x rounds to 0
  // e^x = 2^n e^r with n = round(x log2 e) and r = x - n ln 2 in two parts; e^r by a degree-6
  // polynomial. Round to nearest through 1.5 * 2^23, where the float spacing is 1.
  // The polynomial by Estrin's scheme (pairs of coefficients, then r^2 and r^4) rather than
  // Horner's: four dependent steps instead of seven, so that the exps of neighbouring vectors
  // overlap. SiLU over a vector of 8 took 23.6 cycles by Horner, 18.6 so with the clamp below
  // (AMD EPYC, Zen 2, AVX2), with the same maximum error (8e-8 relative).
  auto reduce_and_poly = [&](const std::string& clamped) {
    const std::string r2 = name("r2"), r4 = name("r4"), c01 = name("c01"), c23 = name("c23"),
                      c45 = name("c45");
    em_.line(
        fmt::format("const {0} {1} = ({2} * 1.44269504088896341f + 12582912.0f) - 12582912.0f;",
                    type, n, clamped));
    em_.line(fmt::format("{0} {1} = {2} - {3} * 0.693359375f;", type, r, clamped, n));
    em_.line(fmt::format("{0} = {0} + {1} * 2.12194440e-4f;", r, n));
    em_.line(fmt::format("const {0} {1} = {2} * {2};", type, r2, r));
    em_.line(
        fmt::format("const {0} {1} = {2} * 1.6666665459e-1f + 5.0000001201e-1f;", type, c01, r));
    em_.line(
        fmt::format("const {0} {1} = {2} * 8.3334519073e-3f + 4.1665795894e-2f;", type, c23, r));
    em_.line(
        fmt::format("const {0} {1} = {2} * 1.9875691500e-4f + 1.3981999507e-3f;", type, c45, r));
    em_.line(fmt::format("const {0} {1} = {2} * {2};", type, r4, r2));
    em_.line(fmt::format("const {0} {1} = (({2} + {3} * {4}) + {5} * {6}) * {3} + {7} + 1.0f;",
                         type, p, c01, r2, c23, r4, c45, r));
  };
  // 2^n as two factors, so that every n from -150 to 128 stays a normal float.
  auto scale_by_2n = [&] {
    em_.line(fmt::format("const {} {} = __builtin_convertvector({}, {});", itype, ni, n, itype));
    em_.line(fmt::format("const {} {} = {} >> 1;", itype, n1, ni));
    em_.line(fmt::format("{0} = {1} * ({2})(({3} + 127) << 23) * ({2})(({4} - {3} + 127) << 23);",
                         result, p, type, n1, ni));
  };
  em_.line(fmt::format("{} {};", type, result));
  // With AVX-512, vscalefps computes p * 2^n with overflow to inf and gradual underflow, so
  // only a clamp (which keeps NaN: maxps returns its second operand then) remains: half the
  // instructions of the portable version below.
  const char* prefix = lanes_ == 16 ? "_mm512" : lanes_ == 8 ? "_mm256" : lanes_ == 4 ? "_mm" : "";
  if (*prefix) {
    em_.line(lanes_ == 16 ? "#if defined(__AVX512F__)"
                          : "#if defined(__AVX512F__) && defined(__AVX512VL__)");
    em_.helper("tsr_immintrin");
    em_.open("");
    // 89 rather than 88.72...: 2^128 times e^r > 1 overflows to inf in vscalefps itself.
    em_.line(fmt::format("const {0} {1} = {2}_min_ps({3}, {2}_max_ps({4}, {5}));", type, xc, prefix,
                         splat("89.0f"), splat(kMin), x));
    reduce_and_poly(xc);
    em_.line(fmt::format("{} = {}_scalef_ps({}, {});", result, prefix, p, n));
    em_.close();
    em_.line("#else");
  }
  em_.open("");
  // The clamp as min and max where the ISA has them (minps and maxps return their second
  // operand when either is NaN, so NaN stays NaN), else through comparison masks: on AVX2 the
  // masks were 5 of the exp's 28 vector instructions, and a SiLU-bound 16 -> 96 1x1
  // convolution at 112x112 ran 41 -> 44 GFLOP/s without them (AMD EPYC, Zen 2, 2 threads).
  // Clamped at 89, the product of the two factors overflows to inf by itself where e^x does
  // (from 88.72: n = 128, e^r >= 1), so no mask for the overflow either.
  const bool min_max = lanes_ == 8 || lanes_ == 4;
  if (min_max) {
    em_.helper("tsr_immintrin");  // which includes immintrin.h for AVX2 and up
    em_.line("#if defined(__AVX2__)");
    // Saturating, n stays within [-126, 128]: 2^n is one factor, a normal float or, at 128,
    // the bits of inf. SiLU over a vector of 8: 18.6 -> 15.7 cycles (AMD EPYC, Zen 2).
    em_.line(fmt::format("const {0} {1} = ({0}){2}_min_ps({3}, {2}_max_ps({4}, {5}));", type, xc,
                         prefix, splat("89.0f"), splat(saturating ? "-87.0f" : kMin), x));
    reduce_and_poly(xc);
    if (saturating) {
      em_.line(fmt::format("{0} = {1} * ({2})((__builtin_convertvector({3}, {4}) + 127) << 23);",
                           result, p, type, n, itype));
    } else {
      scale_by_2n();
    }
    em_.line("#else");
  }
  em_.line(fmt::format("const {} {} = {} > {};", itype, hi, x, splat(kMax)));
  em_.line(fmt::format("const {} {} = {} < {};", itype, lo, x, splat(kMin)));
  em_.line(
      fmt::format("const {0} {1} = ({0})((({2}){3} & ~{4} & ~{5}) | (({2}){6} & {4}) | "
                  "(({2}){7} & {5}));",
                  type, xc, itype, x, hi, lo, splat(kMax), splat(kMin)));
  reduce_and_poly(xc);
  scale_by_2n();
  em_.line(fmt::format("{0} = ({1})((({2}){0} & ~{3}) | (({2}){4} & {3}));", result, type, itype,
                       hi, splat("__builtin_inff()")));
  if (min_max) em_.line("#endif");
  em_.close();
  if (*prefix) em_.line("#endif");
  return result;
}

const std::string& VectorLoop::lane_ids() {
  if (lane_ids_.empty()) {
    lane_ids_ = em_.fresh_name(base_ + "_lanes");
    const std::string type = em_.vector_type(DType::kInt32, lanes_);
    std::string init;
    for (int64_t l = 0; l < lanes_; ++l) init += (l ? ", " : "") + std::to_string(l);
    em_.line(fmt::format("const {0} {1} = {2} + ({0}){{{3}}};", type, lane_ids_, base_, init));
  }
  return lane_ids_;
}

template <typename Node>
VectorLoop::VExpr VectorLoop::arith(const Node* n, const char* op, int prec, int right_min) {
  VExpr a = value(n->a);
  VExpr b = value(n->b);
  return {{fmt::format("{} {} {}", a.c.wrap(prec), op, b.c.wrap(right_min)), prec}, true};
}

std::string VectorLoop::condition_mask(const Expr& c) {
  const std::string itype = em_.vector_type(DType::kInt32, lanes_);
  const std::string mask = em_.fresh_name("cond_mask");
  if (!uses_var(c, v_)) {
    em_.line(fmt::format("const {0} {1} = ({0}){{0}} - (int32_t)({2});", itype, mask,
                         em_.print(c).text));
  } else if (c.kind() == ExprKind::kNot) {
    const std::string a = condition_mask(c.as<NotNode>()->a);
    em_.line(fmt::format("const {} {} = ~{};", itype, mask, a));
  } else if (c.kind() == ExprKind::kAnd || c.kind() == ExprKind::kOr) {
    auto [a, b] = operands_of(c);
    const std::string ma = condition_mask(a), mb = condition_mask(b);
    em_.line(fmt::format("const {} {} = {} {} {};", itype, mask, ma,
                         c.kind() == ExprKind::kAnd ? "&" : "|", mb));
  } else {
    auto [a, b] = operands_of(c);
    const std::string type = em_.vector_type(a.dtype(), lanes_);
    const std::string va = em_.fresh_name("cmp_arg"), vb = em_.fresh_name("cmp_arg");
    declare_vector(type, va, value(a));
    declare_vector(type, vb, value(b));
    em_.line(
        fmt::format("const {} {} = {} {} {};", itype, mask, va, expr_infix_symbol(c.kind()), vb));
  }
  return mask;
}

std::string VectorLoop::emit_blend(const SelectNode& n) {
  const std::string type = em_.vector_type(n.dtype, lanes_);
  const std::string itype = em_.vector_type(DType::kInt32, lanes_);
  const std::string mask = condition_mask(n.cond);
  auto side = [&](const Expr& e, const char* name, bool taken_when_true) {
    const std::string result = em_.fresh_name(name);
    if (loads_beyond_condition(e, n.cond).empty()) {
      declare_vector(type, result, value(e));
      return result;
    }
    // The lanes that take this side, within those of an enclosing masked block.
    const std::string outer_mask = mask_, outer_avx512 = avx512_mask_, outer_avx2 = avx2_mask_;
    mask_ = em_.fresh_name("side_mask");
    em_.line(fmt::format("const {} {} = {}{}{};", itype, mask_, taken_when_true ? "" : "~", mask,
                         outer_mask.empty() ? "" : " & " + outer_mask));
    declare_mask_registers();
    declare_vector(type, result, value(e));
    mask_ = outer_mask;
    avx512_mask_ = outer_avx512;
    avx2_mask_ = outer_avx2;
    return result;
  };
  const std::string t = side(n.true_value, "blend_true", true);
  const std::string f = side(n.false_value, "blend_false", false);
  const std::string result = em_.fresh_name("blend_vec");
  em_.line(fmt::format("const {0} {1} = ({0})((({2}){3} & {4}) | (({2}){5} & ~{4}));", type, result,
                       itype, t, mask, f));
  return result;
}

template <typename Node>
VectorLoop::VExpr VectorLoop::select_by_comparison(const Node* n, const char* cmp) {
  const std::string type = em_.vector_type(n->dtype, lanes_);
  const std::string itype = em_.vector_type(DType::kInt32, lanes_);
  auto as_vector = [&](const Expr& operand) {
    VExpr v = value(operand);
    const std::string name = em_.fresh_name("sel_arg");
    declare_vector(type, name, v);
    return name;
  };
  const std::string a = as_vector(n->a), b = as_vector(n->b);
  const std::string mask = em_.fresh_name("sel_mask"), result = em_.fresh_name("sel_vec");
  em_.line(fmt::format("const {} {} = {} {} {};", itype, mask, a, cmp, b));
  em_.line(fmt::format("const {0} {1} = ({0})((({2}){3} & {4}) | (({2}){5} & ~{4}));", type, result,
                       itype, a, mask, b));
  return {CExpr{result}, true};
}

VectorLoop::VExpr VectorLoop::value(const Expr& e) {
  if (!uses_var(e, v_)) return {em_.print(e), false};
  switch (e.kind()) {
    case ExprKind::kVar:
      return {CExpr{lane_ids()}, true};
    case ExprKind::kLoad:
      return {CExpr{emit_load(*e.as<LoadNode>())}, true};
    case ExprKind::kAdd:
      return arith(e.as<AddNode>(), "+", kPrecAdd, is_float(e.dtype()) ? kPrecMul : kPrecAdd);
    case ExprKind::kSub:
      return arith(e.as<SubNode>(), "-", kPrecAdd, kPrecMul);
    case ExprKind::kMul:
      return arith(e.as<MulNode>(), "*", kPrecMul, kPrecUnary);
    case ExprKind::kDiv:
      return arith(e.as<DivNode>(), "/", kPrecMul, kPrecUnary);
    case ExprKind::kMin:
      return select_by_comparison(e.as<MinNode>(), "<");
    case ExprKind::kMax:
      return select_by_comparison(e.as<MaxNode>(), ">");
    case ExprKind::kCast: {
      const auto* n = e.as<CastNode>();
      VExpr src = value(n->value);
      return {CExpr{fmt::format("__builtin_convertvector({}, {})", src.c.text,
                                em_.vector_type(n->dtype, lanes_))},
              true};
    }
    case ExprKind::kCall:
      return {CExpr{emit_call(*e.as<CallNode>())}, true};
    case ExprKind::kSelect: {
      const auto* n = e.as<SelectNode>();
      if (uses_var(n->cond, v_)) return {CExpr{emit_blend(*n)}, true};
      return {CExpr{emit_uniform_select(*n)}, true};
    }
    default:
      throw_internal("vector codegen: unsupported {}", expr_kind_name(e.kind()));
  }
}

// The widest vector of 32-bit lanes that AVX2 holds in one register.
constexpr int64_t kAvx2Lanes = 8;

bool emit_vector_loop(CEmitter& em, const ForNode& loop) {
  VectorLoop vl(em, loop);
  if (!vl.supported()) return false;
  if (loop.extent <= kAvx2Lanes) {
    vl.emit();
    return true;
  }
  // Wider than one AVX2 register: gcc lowers such vectors well only where AVX-512 is there
  // (measured on Zen 3: a 16-lane accumulator tile ran 10x slower than two 8-lane ones, its
  // vectors round-tripping through the stack). Elsewhere the loop is unrolled chunks of 8 lanes.
  em.line("#if defined(__AVX512F__)");
  vl.emit();
  em.line("#else");
  Var chunk(loop.var.name() + "_chunk"), lane(loop.var.name() + "_lane");
  Stmt body =
      substitute(loop.body, {{loop.var.get(), loop.min + chunk * make_int(kAvx2Lanes) + lane}});
  Stmt chunks = make_for(chunk, make_int(0), loop.extent / kAvx2Lanes, ForKind::kUnrolled,
                         make_for(lane, make_int(0), kAvx2Lanes, ForKind::kVectorized, body));
  em.emit(chunks);
  em.line("#endif");
  return true;
}

}  // namespace tessera::codegen_c_detail
