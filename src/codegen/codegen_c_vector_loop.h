/// Internal to codegen: one vectorized loop emitted as GCC vector extensions. The values and
/// the plain path are in codegen_c_vector.cpp, the loads, stores and masked blocks in
/// codegen_c_vector_memory.cpp.
#pragma once

#include <fmt/format.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "codegen/codegen_c_emitter.h"

namespace tessera::codegen_c_detail {

class VectorLoop {
 public:
  VectorLoop(CEmitter& em, const ForNode& loop)
      : em_(em), loop_(loop), v_(loop.var.get()), lanes_(loop.extent) {}

  /// Whether the loop's body is straight-line stores this path can emit as vectors.
  bool supported() const;
  /// With `lane_guard` defined, only the lanes where it holds read and write memory (the partial
  /// vector of a split's tail, or lanes a reordered or computed-at guard cuts off); the others
  /// load zeros, and the block is skipped when no lane passes, so that loads that do not depend on
  /// the lane stay behind the guard as in the scalar loop.
  void emit(const Expr& lane_guard = Expr());

 private:
  struct VExpr {
    CExpr c;
    bool varying;
  };

  // What the path vectorizes, and the helpers both files use (codegen_c_vector.cpp but per_lane).

  bool supported_stmt(const Stmt& s) const;
  bool supported_value(const Expr& e) const;
  /// The two operands of a comparison, And or Or; nullptr-free only for those kinds.
  static std::pair<Expr, Expr> operands_of(const Expr& c);
  /// A condition that becomes an int32 lane mask: comparisons of float32 or int32 values, joined
  /// by And, Or and Not; parts that are the same on every lane are broadcast.
  bool supported_condition(const Expr& c) const;
  static std::vector<Expr> loads_in(const Expr& e);
  /// A select whose condition varies across lanes computes both sides on every lane, then blends
  /// them by the condition's mask. A side may load only what the scalar code would: loads the
  /// condition makes too (a test of the loaded values, as LeakyRelu's or erf's) as they are,
  /// others (behind a guard of indices: zero padding read along the row) under the side's mask,
  /// and only where they vary across lanes, since a load the same on every lane has no lanes to
  /// mask off.
  bool blendable(const SelectNode& n) const;
  /// The loads of a select's side that its condition does not make (see blendable).
  static std::vector<Expr> loads_beyond_condition(const Expr& side, const Expr& cond);
  /// min and max select through an int32 lane mask, which matches float32 and int32 lanes.
  static bool lane_mask_fits(DType t);
  template <typename Node>
  bool both_supported(const Node* n) const;
  void emit_stmt(const Stmt& s);
  /// Runs `body` once per lane with the loop var bound to `base + lane`.
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
  /// `const type name = v;`, broadcasting v when it is a scalar (`x - 0` is exact for every x,
  /// including -0.0).
  void declare_vector(const std::string& type, const std::string& name, const VExpr& v);

  // Loads, stores and the masks of masked blocks (codegen_c_vector_memory.cpp).

  /// An int32 vector, all ones on the lanes where `lane_guard` holds, and for 16 lanes the same as
  /// an AVX-512 mask register, which makes masked loads and stores single instructions (gcc
  /// does not turn the lane-by-lane versions into them). Returns the name of an int that is
  /// nonzero when some lane passes.
  std::string declare_mask(const Expr& lane_guard);
  /// The AVX-512 and AVX2 forms of mask_, for the masked moves.
  void declare_mask_registers();
  /// The AVX2 form of a masked move of lanes_ (a multiple of 8) contiguous 32-bit lanes of type t
  /// at &buf[index] to or from vector `tmp`, one 8-lane move per half.
  std::string avx2_masked_move(bool store, DType t, const std::string& buf,
                               const std::string& index, const std::string& tmp) const;
  /// Whether a masked block may move all lanes of a contiguous access: memory of this thread's
  /// own that every lane's index stays inside. The lanes outside the guard then read values that
  /// only flow into their own lanes, and stores write those lanes back unchanged.
  bool whole_vector_in_private_buffer(const Buffer& b, const Expr& flat,
                                      const std::optional<int64_t>& coef) const;
  /// The AVX-512 names of a masked move of 16 lanes of type t, or nullptr.
  static const char* avx512_suffix(DType t);
  /// A move of the lanes the mask lets through: one AVX-512 instruction where it can be (16
  /// contiguous lanes of 32 bits), lane by lane otherwise. `avx512_move(suffix)` and
  /// `lane_move(lane)` give the statement of each form.
  template <typename Avx512Move, typename Avx2Move, typename LaneMove>
  void emit_masked_move(bool contiguous, DType t, Avx512Move avx512_move, Avx2Move avx2_move,
                        LaneMove lane_move);
  void emit_store(const StoreNode& n);
  /// Whether the stored value reads the element it overwrites (an accumulation), which has been
  /// written before; a first write keeps its masked store.
  bool reads_what_it_stores(const StoreNode& n, const Expr& flat) const;
  /// `old + a * b` where old is what the store overwrites: the accumulation of a product's tile.
  const MulNode* accumulated_product(const StoreNode& n, const Expr& flat) const;
  /// A masked block's store to this thread's own memory: every lane is loaded, the lanes outside
  /// the guard keep what they held, and the whole vector is stored, so that an accumulator tile
  /// stays in registers (a masked store does not forward to the next load). An accumulation of a
  /// product is one FMA under the AVX-512 mask, which leaves those lanes as they were.
  void emit_private_masked_store(const StoreNode& n, const Expr& flat, const std::string& buf,
                                 const std::string& type);
  std::string emit_load(const LoadNode& n);

  // Values (codegen_c_vector.cpp).

  /// A select on a condition that is the same for every lane: each side is emitted inside its own
  /// branch, so the loads of the side not taken are not made (they may be out of bounds).
  std::string emit_uniform_select(const SelectNode& n);
  /// Arguments as named vectors, then one scalar call per lane.
  std::string emit_call(const CallNode& n);
  /// e^x on all lanes of float vector `x` (see the comment atop codegen_c_vector.cpp); returns the
  /// result's name. `saturating` where the caller needs e^x only to saturate (sigmoid's 1 / (1 +
  /// e^-x)): below e^-87 it may return e^-87 rather than a denormal or zero, and from 88.4 inf,
  /// which leaves the sigmoid unchanged in float32 and lets AVX2 build 2^n as one factor.
  std::string emit_expf(const std::string& x, const std::string& type, bool saturating = false);
  /// The vector {base, base + 1, ...}, declared at its first use.
  const std::string& lane_ids();
  template <typename Node>
  VExpr arith(const Node* n, const char* op, int prec, int right_min);
  /// The int32 lane mask of a condition (supported_condition): all ones where it holds.
  std::string condition_mask(const Expr& c);
  /// Both sides on every lane, blended by the condition's mask (see blendable); a side that loads
  /// beyond the condition is computed as a masked block of the lanes that take it.
  std::string emit_blend(const SelectNode& n);
  /// min(a, b) = a < b ? a : b and max(a, b) = a > b ? a : b, as the scalar helpers (so a NaN
  /// operand gives b in both), lane by lane through the comparison's all-ones mask; gcc turns the
  /// masked blend into vminps/vmaxps or a blend.
  template <typename Node>
  VExpr select_by_comparison(const Node* n, const char* cmp);
  VExpr value(const Expr& e);

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

}  // namespace tessera::codegen_c_detail
