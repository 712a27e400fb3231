// Loads and stores of a vectorized loop (codegen_c_vector.cpp has the values and the whole path).
//
// A body that is one guard around stores (the tail of a split whose factor does not divide
// the extent) is tested on its first and last lane: where both pass, every lane does (see
// emit_guarded_vector_loop) and the plain vector block runs; elsewhere a masked copy of it runs
// when some lane passes, whose lane-varying loads and stores touch only the lanes that pass
// (AVX-512 masked moves where there are 16 lanes of 32 bits, lane by lane otherwise) while the
// arithmetic, exp included, stays on whole vectors. An accumulation into a buffer of this
// thread's own (allocated in the kernel inside its innermost parallel loop, every lane's index
// within it) loads and stores whole vectors and merges the failing lanes back as they were: a
// masked store does not forward to the next load, which kept a product's tail tile out of
// registers (ViT's 197-wide Q K^T ran 195 GFLOP/s in the model, 324 so; Zen 5).

#include <fmt/format.h>

#include <optional>
#include <string>

#include "codegen/codegen_c_vector_loop.h"
#include "te/expr_functor.h"
#include "tir/simplify.h"
#include "tir/stmt_functor.h"
#include "tir/structural_equal.h"

namespace tessera::codegen_c_detail {

std::string VectorLoop::declare_mask(const Expr& lane_guard) {
  mask_ = em_.fresh_name(base_ + "_mask");
  const std::string any = em_.fresh_name(base_ + "_any");
  em_.line(fmt::format("{} {};", em_.vector_type(DType::kInt32, lanes_), mask_));
  em_.line(fmt::format("int32_t {} = 0;", any));
  per_lane([&](const std::string& lane) {
    em_.line(fmt::format("{}[{}] = ({}) ? -1 : 0;", mask_, lane, em_.print(lane_guard).text));
    em_.line(fmt::format("{} |= {}[{}];", any, mask_, lane));
  });
  declare_mask_registers();
  return any;
}

void VectorLoop::declare_mask_registers() {
  avx512_mask_.clear();
  avx2_mask_.clear();
  if (lanes_ == 16) {
    avx512_mask_ = em_.fresh_name(base_ + "_k");
    em_.helper("tsr_immintrin");
    em_.line("#if defined(__AVX512F__)");
    em_.line(
        fmt::format("const __mmask16 {0} = _mm512_test_epi32_mask((__m512i){1}, (__m512i){1});",
                    avx512_mask_, mask_));
    em_.line(
        fmt::format("(void){};  // unused when every access is a gather or scatter", avx512_mask_));
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
}

std::string VectorLoop::avx2_masked_move(bool store, DType t, const std::string& buf,
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

bool VectorLoop::whole_vector_in_private_buffer(const Buffer& b, const Expr& flat,
                                                const std::optional<int64_t>& coef) const {
  return coef && *coef == 1 && dtype_bytes(b->dtype) == 4 && em_.in_private_buffer(b, flat);
}

const char* VectorLoop::avx512_suffix(DType t) {
  if (t == DType::kFloat32) return "ps";
  if (t == DType::kInt32) return "epi32";
  return nullptr;
}

template <typename Avx512Move, typename Avx2Move, typename LaneMove>
void VectorLoop::emit_masked_move(bool contiguous, DType t, Avx512Move avx512_move,
                                  Avx2Move avx2_move, LaneMove lane_move) {
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

void VectorLoop::emit_store(const StoreNode& n) {
  Expr flat = CEmitter::flat_index(n.buffer, n.indices);
  auto coef = affine_coefficient(flat, v_);
  const std::string buf = em_.buffer_name(n.buffer, /*for_store=*/true);
  const std::string type = em_.vector_type(n.buffer->dtype, lanes_);
  if (!mask_.empty() && reads_what_it_stores(n, flat) &&
      whole_vector_in_private_buffer(n.buffer, flat, coef)) {
    emit_private_masked_store(n, flat, buf, type);
    return;
  }
  const ElementRef at = em_.element(n.buffer, flat, /*for_store=*/true);
  VExpr val = value(n.value);
  const std::string tmp = em_.fresh_name(buf + "_new");
  declare_vector(type, tmp, val);
  if (!mask_.empty()) {
    emit_masked_move(
        coef && *coef == 1, n.buffer->dtype,
        [&](const char* suffix) {
          return fmt::format("_mm512_mask_storeu_{}(&{}, {}, ({}){});", suffix, at.text(),
                             avx512_mask_,
                             n.buffer->dtype == DType::kFloat32 ? "__m512" : "__m512i", tmp);
        },
        [&] { return avx2_masked_move(true, n.buffer->dtype, at.base, at.index, tmp); },
        [&](const std::string& lane) {
          return fmt::format("if ({}[{}]) {} = {}[{}];", mask_, lane,
                             em_.element(n.buffer, flat, /*for_store=*/true).text(), tmp, lane);
        });
  } else if (coef && *coef == 1) {
    em_.line(fmt::format("__builtin_memcpy(&{}, &{}, sizeof({}));", at.text(), tmp, tmp));
  } else {
    per_lane([&](const std::string& lane) {
      em_.line(fmt::format("{} = {}[{}];", em_.element(n.buffer, flat, /*for_store=*/true).text(),
                           tmp, lane));
    });
  }
}

bool VectorLoop::reads_what_it_stores(const StoreNode& n, const Expr& flat) const {
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

const MulNode* VectorLoop::accumulated_product(const StoreNode& n, const Expr& flat) const {
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

void VectorLoop::emit_private_masked_store(const StoreNode& n, const Expr& flat,
                                           const std::string& buf, const std::string& type) {
  const std::string at = "&" + em_.element(n.buffer, flat, /*for_store=*/true).text();
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
                           f32 ? "ps" : "epi32", f32 ? "__m512" : "__m512i", avx512_mask_, merged));
      em_.line("#else");
    }
    blend(merged);
    if (!avx512_mask_.empty()) em_.line("#endif");
  }
  em_.line(fmt::format("__builtin_memcpy({}, &{}, sizeof({}));", at, old, old));
}

std::string VectorLoop::emit_load(const LoadNode& n) {
  Expr flat = CEmitter::flat_index(n.buffer, n.indices);
  auto coef = affine_coefficient(flat, v_);
  const std::string buf = em_.buffer_name(n.buffer);
  const ElementRef at = em_.element(n.buffer, flat);
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
          return fmt::format("{} = ({})_mm512_maskz_loadu_{}({}, &{});", tmp, type, suffix,
                             avx512_mask_, at.text());
        },
        [&] { return avx2_masked_move(false, n.buffer->dtype, at.base, at.index, tmp); },
        [&](const std::string& lane) {
          return fmt::format("{}[{}] = {}[{}] ? {} : 0;", tmp, lane, mask_, lane,
                             em_.element(n.buffer, flat).text());
        });
  } else if (coef && *coef == 1) {
    em_.line(fmt::format("__builtin_memcpy(&{}, &{}, sizeof({}));", tmp, at.text(), tmp));
  } else {
    per_lane([&](const std::string& lane) {
      em_.line(fmt::format("{}[{}] = {};", tmp, lane, em_.element(n.buffer, flat).text()));
    });
  }
  return tmp;
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
