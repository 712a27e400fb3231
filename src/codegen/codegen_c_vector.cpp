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
// A body that is one guard around such stores (the tail of a split whose factor does not divide
// the extent) is tested on its first and last lane: where both pass, every lane does (see
// emit_guarded_vector_loop) and the plain vector block runs; elsewhere a masked copy of it runs
// when some lane passes, whose lane-varying loads and stores touch only the lanes that pass
// (AVX-512 masked moves where there are 16 lanes of 32 bits, lane by lane otherwise) while the
// arithmetic, exp included, stays on whole vectors. An accumulation into a buffer of this
// thread's own (allocated in the kernel inside its innermost parallel loop, every lane's index
// within it) loads and stores whole vectors and merges the failing lanes back as they were: a
// masked store does not forward to the next load, which kept a product's tail tile out of
// registers (ViT's 197-wide Q K^T ran 195 GFLOP/s in the model, 324 so; Zen 5).
//   - float32 and int32 min and max select through the comparison's lane mask;
//   - a select whose condition does not use v (inlined zero padding read along channel lanes) is
//     a scalar branch between two vectors, each computed only on its side, so that a load the
//     condition guards is never made;
//   - a select whose condition tests loaded values (LeakyRelu, erf's two ranges) computes both
//     sides and blends them through the condition's lane mask, where the sides load nothing the
//     condition does not.
// GNU C (unlike C++) has no `?:` on vectors, so bodies with other varying comparisons, selects,
// bool values or integer division take the `#pragma omp simd` path in codegen_c.cpp instead.

#include <fmt/format.h>

#include <algorithm>

#include "codegen/codegen_c_emitter.h"
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

class VectorLoop {
 public:
  VectorLoop(CEmitter& em, const ForNode& loop)
      : em_(em), loop_(loop), v_(loop.var.get()), lanes_(loop.extent) {}

  bool supported() const {
    return lanes_ >= 2 && lanes_ <= 64 && is_power_of_two(lanes_) && supported_stmt(loop_.body);
  }

  // With `lane_guard` defined, only the lanes where it holds read and write memory (the partial
  // vector of a split's tail, or lanes a reordered or computed-at guard cuts off); the others
  // load zeros, and the block is skipped when no lane passes, so that loads that do not depend on
  // the lane stay behind the guard as in the scalar loop.
  void emit(const Expr& lane_guard = Expr()) {
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

 private:
  struct VExpr {
    CExpr c;
    bool varying;
  };

  bool supported_stmt(const Stmt& s) const {
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

  bool supported_value(const Expr& e) const {
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

  // The two operands of a comparison, And or Or; nullptr-free only for those kinds.
  static std::pair<Expr, Expr> operands_of(const Expr& c) {
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

  // A condition that becomes an int32 lane mask: comparisons of float32 or int32 values, joined
  // by And, Or and Not; parts that are the same on every lane are broadcast.
  bool supported_condition(const Expr& c) const {
    if (!uses_var(c, v_)) return c.dtype() == DType::kBool;
    if (c.kind() == ExprKind::kNot) return supported_condition(c.as<NotNode>()->a);
    auto [a, b] = operands_of(c);
    if (!a.defined()) return false;
    if (c.kind() == ExprKind::kAnd || c.kind() == ExprKind::kOr)
      return supported_condition(a) && supported_condition(b);
    return lane_mask_fits(a.dtype()) && a.dtype() == b.dtype() && supported_value(a) &&
           supported_value(b);
  }

  static std::vector<Expr> loads_in(const Expr& e) {
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

  // A select whose condition varies across lanes computes both sides on every lane, then blends
  // them by the condition's mask. That is safe only where no side loads what the scalar code
  // would not: each load of a side must be one the condition makes too (a test of the loaded
  // values, as LeakyRelu's or erf's), never behind a guard of indices (zero padding, which stays
  // on the `#pragma omp simd` path).
  bool blendable(const SelectNode& n) const {
    if (!lane_mask_fits(n.dtype) || !supported_condition(n.cond)) return false;
    const std::vector<Expr> made = loads_in(n.cond);
    for (const Expr& side : {n.true_value, n.false_value}) {
      for (const Expr& load : loads_in(side)) {
        bool in_condition = std::any_of(made.begin(), made.end(),
                                        [&](const Expr& m) { return structural_equal(m, load); });
        if (!in_condition) return false;
      }
    }
    return supported_value(n.true_value) && supported_value(n.false_value);
  }

  // min and max select through an int32 lane mask, which matches float32 and int32 lanes.
  static bool lane_mask_fits(DType t) {
    return t == DType::kFloat32 || t == DType::kInt32;
  }

  template <typename Node>
  bool both_supported(const Node* n) const {
    return supported_value(n->a) && supported_value(n->b);
  }

  void emit_stmt(const Stmt& s) {
    if (const auto* seq = s.as<SeqNode>()) {
      for (const Stmt& c : seq->stmts) emit_stmt(c);
    } else {
      emit_store(*s.as<StoreNode>());
    }
  }

  // Runs `body` once per lane with the loop var bound to `base + lane`.
  template <typename F>
  void per_lane(F body) {
    std::string lane = em_.fresh_name(base_ + "_lane");
    em_.open(fmt::format("for (int32_t {0} = 0; {0} < {1}; ++{0})", lane, lanes_));
    auto previous =
        em_.bind_var(v_, {CExpr{fmt::format("{} + {}", base_, lane), kPrecAdd}, non_negative_});
    body(lane);
    em_.restore_var(v_, std::move(previous));
    em_.close();
  }

  // `const type name = v;`, broadcasting v when it is a scalar (`x - 0` is exact for every x,
  // including -0.0).
  void declare_vector(const std::string& type, const std::string& name, const VExpr& v) {
    em_.line(v.varying ? fmt::format("const {} {} = {};", type, name, v.c.text)
                       : fmt::format("const {0} {1} = {2} - ({0}){{0}};", type, name,
                                     v.c.wrap(kPrecAdd)));
  }

  // An int32 vector, all ones on the lanes where `lane_guard` holds, and for 16 lanes the same as
  // an AVX-512 mask register, which makes masked loads and stores single instructions (gcc
  // does not turn the lane-by-lane versions into them). Returns the name of an int that is
  // nonzero when some lane passes.
  std::string declare_mask(const Expr& lane_guard) {
    mask_ = em_.fresh_name(base_ + "_mask");
    const std::string any = em_.fresh_name(base_ + "_any");
    em_.line(fmt::format("{} {};", em_.vector_type(DType::kInt32, lanes_), mask_));
    em_.line(fmt::format("int32_t {} = 0;", any));
    per_lane([&](const std::string& lane) {
      em_.line(fmt::format("{}[{}] = ({}) ? -1 : 0;", mask_, lane, em_.print(lane_guard).text));
      em_.line(fmt::format("{} |= {}[{}];", any, mask_, lane));
    });
    if (lanes_ == 16) {
      avx512_mask_ = em_.fresh_name(base_ + "_k");
      em_.helper("tsr_immintrin");
      em_.line("#if defined(__AVX512F__)");
      em_.line(
          fmt::format("const __mmask16 {0} = _mm512_test_epi32_mask((__m512i){1}, (__m512i){1});",
                      avx512_mask_, mask_));
      em_.line(fmt::format("(void){};  // unused when every access is a gather or scatter",
                           avx512_mask_));
      em_.line("#endif");
    }
    // AVX2 has masked moves of 8 lanes of 32 bits (vmaskmov, vpmaskmov) under a vector mask:
    // a wider vector moves as 8-lane halves, each with its slice of the mask.
    if (lanes_ % 8 == 0) {
      avx2_mask_ = em_.fresh_name(base_ + "_k8");
      em_.helper("tsr_immintrin");
      em_.line("#if defined(__AVX2__)");
      em_.line(fmt::format("__m256i {}[{}];", avx2_mask_, lanes_ / 8));
      em_.line(fmt::format("__builtin_memcpy({}, &{}, sizeof({}));", avx2_mask_, mask_, mask_));
      em_.line(fmt::format("(void){};", avx2_mask_));
      em_.line("#endif");
    }
    return any;
  }

  // The AVX2 form of a masked move of lanes_ (a multiple of 8) contiguous 32-bit lanes of type t
  // at &buf[index] to or from vector `tmp`, one 8-lane move per half.
  std::string avx2_masked_move(bool store, DType t, const std::string& buf,
                               const std::string& index, const std::string& tmp) const {
    const bool f32 = t == DType::kFloat32;
    const std::string half_type = f32 ? "__m256" : "__m256i";
    const std::string suffix = f32 ? "ps" : "epi32";
    // A fresh name: a fixed one would hide a buffer of that name (a tensor called `h`).
    const std::string half = em_.fresh_name("half");
    std::string code = "{ " + half_type + " " + half + "; ";
    for (int64_t h = 0; h < lanes_ / 8; ++h) {
      const std::string at = fmt::format("&{}[({}) + {}]", buf, index, 8 * h);
      const std::string cast = f32 ? "" : "(int*)";
      if (store) {
        code += fmt::format(
            "__builtin_memcpy(&{}, (const char*)&{} + {}, 32); _mm256_maskstore_{}({}{}, {}[{}], "
            "{}); ",
            half, tmp, 32 * h, suffix, cast, at, avx2_mask_, h, half);
      } else {
        code += fmt::format(
            "{} = _mm256_maskload_{}({}{}, {}[{}]); __builtin_memcpy((char*)&{} + {}, &{}, 32); ",
            half, suffix, f32 ? "" : "(const int*)", at, avx2_mask_, h, tmp, 32 * h, half);
      }
    }
    return code + "}";
  }

  // Whether a masked block may move all lanes of a contiguous access: memory of this thread's
  // own that every lane's index stays inside. The lanes outside the guard then read values that
  // only flow into their own lanes, and stores write those lanes back unchanged.
  bool whole_vector_in_private_buffer(const Buffer& b, const Expr& flat,
                                      const std::optional<int64_t>& coef) const {
    return coef && *coef == 1 && dtype_bytes(b->dtype) == 4 && em_.in_private_buffer(b, flat);
  }

  // The AVX-512 names of a masked move of 16 lanes of type t, or nullptr.
  static const char* avx512_suffix(DType t) {
    if (t == DType::kFloat32) return "ps";
    if (t == DType::kInt32) return "epi32";
    return nullptr;
  }

  // A move of the lanes the mask lets through: one AVX-512 instruction where it can be (16
  // contiguous lanes of 32 bits), lane by lane otherwise. `avx512_move(suffix)` and
  // `lane_move(lane)` give the statement of each form.
  template <typename Avx512Move, typename Avx2Move, typename LaneMove>
  void emit_masked_move(bool contiguous, DType t, Avx512Move avx512_move, Avx2Move avx2_move,
                        LaneMove lane_move) {
    const char* suffix = avx512_suffix(t);
    bool avx512 = contiguous && suffix && !avx512_mask_.empty();
    bool avx2 = contiguous && suffix && !avx2_mask_.empty();
    if (avx512) {
      em_.line("#if defined(__AVX512F__)");
      em_.line(avx512_move(suffix));
    }
    if (avx2) {
      em_.line(avx512 ? "#elif defined(__AVX2__)" : "#if defined(__AVX2__)");
      em_.line(avx2_move());
    }
    if (avx512 || avx2) em_.line("#else");
    per_lane([&](const std::string& lane) { em_.line(lane_move(lane)); });
    if (avx512 || avx2) em_.line("#endif");
  }

  void emit_store(const StoreNode& n) {
    Expr flat = CEmitter::flat_index(n.buffer, n.indices);
    auto coef = affine_coefficient(flat, v_);
    const std::string buf = em_.buffer_name(n.buffer, /*for_store=*/true);
    const std::string type = em_.vector_type(n.buffer->dtype, lanes_);
    if (!mask_.empty() && reads_what_it_stores(n, flat) &&
        whole_vector_in_private_buffer(n.buffer, flat, coef)) {
      emit_private_masked_store(n, flat, buf, type);
      return;
    }
    VExpr val = value(n.value);
    const std::string tmp = em_.fresh_name(buf + "_new");
    declare_vector(type, tmp, val);
    if (!mask_.empty()) {
      emit_masked_move(
          coef && *coef == 1, n.buffer->dtype,
          [&](const char* suffix) {
            return fmt::format("_mm512_mask_storeu_{}(&{}[{}], {}, ({}){});", suffix, buf,
                               em_.print(flat).text, avx512_mask_,
                               n.buffer->dtype == DType::kFloat32 ? "__m512" : "__m512i", tmp);
          },
          [&] { return avx2_masked_move(true, n.buffer->dtype, buf, em_.print(flat).text, tmp); },
          [&](const std::string& lane) {
            return fmt::format("if ({}[{}]) {}[{}] = {}[{}];", mask_, lane, buf,
                               em_.print(flat).text, tmp, lane);
          });
    } else if (coef && *coef == 1) {
      em_.line(fmt::format("__builtin_memcpy(&{}[{}], &{}, sizeof({}));", buf, em_.print(flat).text,
                           tmp, tmp));
    } else {
      per_lane([&](const std::string& lane) {
        em_.line(fmt::format("{}[{}] = {}[{}];", buf, em_.print(flat).text, tmp, lane));
      });
    }
  }

  // Whether the stored value reads the element it overwrites (an accumulation), which has been
  // written before; a first write keeps its masked store.
  bool reads_what_it_stores(const StoreNode& n, const Expr& flat) const {
    class Reads : public ExprVisitor {
     public:
      Reads(const StoreNode& store, const Expr& flat) : store_(store), flat_(flat) {}
      bool found = false;

     protected:
      void visit_(const LoadNode& load, const Expr& self) override {
        found |= load.buffer.get() == store_.buffer.get() &&
                 same_expr(CEmitter::flat_index(load.buffer, load.indices), flat_);
        ExprVisitor::visit_(load, self);
      }
      using ExprVisitor::visit_;

     private:
      const StoreNode& store_;
      const Expr& flat_;
    };
    Reads reads(n, flat);
    reads.visit(n.value);
    return reads.found;
  }

  // `old + a * b` where old is what the store overwrites: the accumulation of a product's tile.
  const MulNode* accumulated_product(const StoreNode& n, const Expr& flat) const {
    const auto* add = n.value.as<AddNode>();
    if (!add) return nullptr;
    for (const auto& [acc, rest] : {std::pair{add->a, add->b}, std::pair{add->b, add->a}}) {
      const auto* load = acc.as<LoadNode>();
      const auto* mul = rest.as<MulNode>();
      if (load && mul && load->buffer.get() == n.buffer.get() &&
          same_expr(CEmitter::flat_index(load->buffer, load->indices), flat)) {
        return mul;
      }
    }
    return nullptr;
  }

  // A masked block's store to this thread's own memory: every lane is loaded, the lanes outside
  // the guard keep what they held, and the whole vector is stored, so that an accumulator tile
  // stays in registers (a masked store does not forward to the next load). An accumulation of a
  // product is one FMA under the AVX-512 mask, which leaves those lanes as they were.
  void emit_private_masked_store(const StoreNode& n, const Expr& flat, const std::string& buf,
                                 const std::string& type) {
    const std::string at = fmt::format("&{}[{}]", buf, em_.print(flat).text);
    const std::string old = em_.fresh_name(buf + "_old");
    em_.line(fmt::format("{} {};", type, old));
    em_.line(fmt::format("__builtin_memcpy(&{}, {}, sizeof({}));", old, at, old));
    const bool f32 = n.buffer->dtype == DType::kFloat32;
    const std::string bits = em_.vector_type(DType::kInt32, lanes_);
    auto blend = [&](const std::string& merged) {
      em_.line(fmt::format("{0} = ({1})((({2}){3} & {4}) | (({2}){0} & ~{4}));", old, type, bits,
                           merged, mask_));
    };
    const MulNode* product = f32 && !avx512_mask_.empty() ? accumulated_product(n, flat) : nullptr;
    if (product) {
      const std::string a = em_.fresh_name(buf + "_a"), b = em_.fresh_name(buf + "_b");
      declare_vector(type, a, value(product->a));
      declare_vector(type, b, value(product->b));
      em_.line("#if defined(__AVX512F__)");
      em_.line(
          fmt::format("{0} = ({1})_mm512_mask3_fmadd_ps((__m512){2}, (__m512){3}, (__m512){0}, "
                      "{4});",
                      old, type, a, b, avx512_mask_));
      em_.line("#else");
      blend(fmt::format("({} + {} * {})", old, a, b));
      em_.line("#endif");
    } else {
      const std::string merged = em_.fresh_name(buf + "_new");
      declare_vector(type, merged, value(n.value));
      if (!avx512_mask_.empty()) {
        em_.line("#if defined(__AVX512F__)");
        em_.line(fmt::format("{0} = ({1})_mm512_mask_mov_{2}(({3}){0}, {4}, ({3}){5});", old, type,
                             f32 ? "ps" : "epi32", f32 ? "__m512" : "__m512i", avx512_mask_,
                             merged));
        em_.line("#else");
      }
      blend(merged);
      if (!avx512_mask_.empty()) em_.line("#endif");
    }
    em_.line(fmt::format("__builtin_memcpy({}, &{}, sizeof({}));", at, old, old));
  }

  std::string emit_load(const LoadNode& n) {
    Expr flat = CEmitter::flat_index(n.buffer, n.indices);
    auto coef = affine_coefficient(flat, v_);
    const std::string buf = em_.buffer_name(n.buffer);
    const std::string type = em_.vector_type(n.buffer->dtype, lanes_);
    const std::string tmp = em_.fresh_name(buf + "_vec");
    em_.line(fmt::format("{} {};", type, tmp));
    // In this thread's own buffers the lanes that fail the guard read what is there, which only
    // reaches their own lanes.
    if (!mask_.empty() && !whole_vector_in_private_buffer(n.buffer, flat, coef)) {
      // Lanes that fail the guard read nothing (their addresses may be out of bounds) and hold 0.
      emit_masked_move(
          coef && *coef == 1, n.buffer->dtype,
          [&](const char* suffix) {
            return fmt::format("{} = ({})_mm512_maskz_loadu_{}({}, &{}[{}]);", tmp, type, suffix,
                               avx512_mask_, buf, em_.print(flat).text);
          },
          [&] { return avx2_masked_move(false, n.buffer->dtype, buf, em_.print(flat).text, tmp); },
          [&](const std::string& lane) {
            return fmt::format("{}[{}] = {}[{}] ? {}[{}] : 0;", tmp, lane, mask_, lane, buf,
                               em_.print(flat).text);
          });
    } else if (coef && *coef == 1) {
      em_.line(fmt::format("__builtin_memcpy(&{}, &{}[{}], sizeof({}));", tmp, buf,
                           em_.print(flat).text, tmp));
    } else {
      per_lane([&](const std::string& lane) {
        em_.line(fmt::format("{}[{}] = {}[{}];", tmp, lane, buf, em_.print(flat).text));
      });
    }
    return tmp;
  }

  // A select on a condition that is the same for every lane: each side is emitted inside its own
  // branch, so the loads of the side not taken are not made (they may be out of bounds).
  std::string emit_uniform_select(const SelectNode& n) {
    const std::string type = em_.vector_type(n.dtype, lanes_);
    const std::string result = em_.fresh_name("select_vec");
    em_.line(fmt::format("{} {};", type, result));
    auto assign = [&](const Expr& side) {
      VExpr v = value(side);
      em_.line(v.varying
                   ? fmt::format("{} = {};", result, v.c.text)
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

  // Arguments as named vectors, then one scalar call per lane.
  std::string emit_call(const CallNode& n) {
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

  // e^x on all lanes of float vector `x` (see the header comment); returns the result's name.
  // `saturating` where the caller needs e^x only to saturate (sigmoid's 1 / (1 + e^-x)): below
  // e^-87 it may return e^-87 rather than a denormal or zero, and from 88.4 inf, which leaves
  // the sigmoid unchanged in float32 and lets AVX2 build 2^n as one factor.
  std::string emit_expf(const std::string& x, const std::string& type, bool saturating = false) {
    const std::string itype = em_.vector_type(DType::kInt32, lanes_);
    auto name = [&](const char* what) { return em_.fresh_name(std::string("exp_") + what); };
    auto splat = [&](const char* c) { return fmt::format("(({}){{0}} + {})", type, c); };
    const std::string hi = name("hi"), lo = name("lo"), xc = name("x"), n = name("n"),
                      r = name("r"), p = name("p"), ni = name("ni"), n1 = name("n1"),
                      result = name("vec");
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
    const char* prefix = lanes_ == 16  ? "_mm512"
                         : lanes_ == 8 ? "_mm256"
                         : lanes_ == 4 ? "_mm"
                                       : "";
    if (*prefix) {
      em_.line(lanes_ == 16 ? "#if defined(__AVX512F__)"
                            : "#if defined(__AVX512F__) && defined(__AVX512VL__)");
      em_.helper("tsr_immintrin");
      em_.open("");
      // 89 rather than 88.72...: 2^128 times e^r > 1 overflows to inf in vscalefps itself.
      em_.line(fmt::format("const {0} {1} = {2}_min_ps({3}, {2}_max_ps({4}, {5}));", type, xc,
                           prefix, splat("89.0f"), splat(kMin), x));
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

  // The vector {base, base + 1, ...}, declared at its first use.
  const std::string& lane_ids() {
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
  VExpr arith(const Node* n, const char* op, int prec, int right_min) {
    VExpr a = value(n->a);
    VExpr b = value(n->b);
    return {{fmt::format("{} {} {}", a.c.wrap(prec), op, b.c.wrap(right_min)), prec}, true};
  }

  // The int32 lane mask of a condition (supported_condition): all ones where it holds.
  std::string condition_mask(const Expr& c) {
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

  // Both sides on every lane, blended by the condition's mask (see blendable).
  std::string emit_blend(const SelectNode& n) {
    const std::string type = em_.vector_type(n.dtype, lanes_);
    const std::string itype = em_.vector_type(DType::kInt32, lanes_);
    const std::string mask = condition_mask(n.cond);
    const std::string t = em_.fresh_name("blend_true"), f = em_.fresh_name("blend_false");
    declare_vector(type, t, value(n.true_value));
    declare_vector(type, f, value(n.false_value));
    const std::string result = em_.fresh_name("blend_vec");
    em_.line(fmt::format("const {0} {1} = ({0})((({2}){3} & {4}) | (({2}){5} & ~{4}));", type,
                         result, itype, t, mask, f));
    return result;
  }

  // min(a, b) = a < b ? a : b and max(a, b) = a > b ? a : b, as the scalar helpers (so a NaN
  // operand gives b in both), lane by lane through the comparison's all-ones mask; gcc turns the
  // masked blend into vminps/vmaxps or a blend.
  template <typename Node>
  VExpr select_by_comparison(const Node* n, const char* cmp) {
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
    em_.line(fmt::format("const {0} {1} = ({0})((({2}){3} & {4}) | (({2}){5} & ~{4}));", type,
                         result, itype, a, mask, b));
    return {CExpr{result}, true};
  }

  VExpr value(const Expr& e) {
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

  CEmitter& em_;
  const ForNode& loop_;
  const VarNode* v_;
  const int64_t lanes_;
  std::string base_;
  std::string lane_ids_;
  std::string mask_;         // int32 lane mask of a masked block, else empty
  std::string avx512_mask_;  // the same as a __mmask16, with 16 lanes
  std::string avx2_mask_;    // the same as __m256i halves, with a multiple of 8 lanes
  bool non_negative_ = false;
};

}  // namespace

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

namespace {

// Each comparison affine in v holds on an interval of v (possibly empty or everything), and so
// does a conjunction of them: it holds on every lane exactly when it holds on the first and the
// last. A `!=`, an `||` or a comparison v reaches through a load or a division has no such shape.
bool holds_on_an_interval(const Expr& cond, const VarNode* v) {
  if (!uses_var(cond, v)) return true;
  auto affine_sides = [&](const auto* n) {
    return affine_coefficient(n->a, v).has_value() && affine_coefficient(n->b, v).has_value();
  };
  switch (cond.kind()) {
    case ExprKind::kAnd: {
      const auto* n = cond.as<AndNode>();
      return holds_on_an_interval(n->a, v) && holds_on_an_interval(n->b, v);
    }
    case ExprKind::kLT:
      return affine_sides(cond.as<LTNode>());
    case ExprKind::kLE:
      return affine_sides(cond.as<LENode>());
    case ExprKind::kGT:
      return affine_sides(cond.as<GTNode>());
    case ExprKind::kGE:
      return affine_sides(cond.as<GENode>());
    case ExprKind::kEQ:
      return affine_sides(cond.as<EQNode>());
    default:
      return false;
  }
}

}  // namespace

bool emit_guarded_vector_loop(CEmitter& em, const ForNode& loop) {
  const auto* guard = loop.body.as<IfThenElseNode>();
  if (!guard || guard->else_case.defined() || !holds_on_an_interval(guard->cond, loop.var.get())) {
    return false;
  }
  Stmt unguarded = make_for(loop.var, loop.min, loop.extent, loop.for_kind, guard->then_case);
  VectorLoop vl(em, *unguarded.as<ForNode>());
  if (!vl.supported()) return false;
  const VarNode* v = loop.var.get();
  Expr first = simplify(substitute(guard->cond, {{v, loop.min}}));
  Expr last =
      simplify(substitute(guard->cond, {{v, loop.min + static_cast<int>(loop.extent - 1)}}));
  em.line(fmt::format("// {}: guarded; whole vectors where every lane passes the guard",
                      em.var_name(v)));
  em.open(fmt::format("if ({})", em.print(first && last).text));
  vl.emit();
  em.close();
  em.open("else");
  vl.emit(guard->cond);
  em.close();
  return true;
}

}  // namespace tessera::codegen_c_detail
