#include "tir/simplify.h"

#include <gtest/gtest.h>

#include "tir/printer.h"

namespace tessera {
namespace {

TEST(Simplify, FoldsSplitIndexBack) {
  Var o("i.outer"), in("i.inner");
  RangeMap r{{o.get(), {0, 3}}, {in.get(), {0, 31}}};
  Expr idx = o * 32 + in;
  EXPECT_EQ(print_expr(simplify(idx / 32, r)), "i.outer");
  EXPECT_EQ(print_expr(simplify(idx % 32, r)), "i.inner");
  EXPECT_EQ(print_expr(simplify((idx + 64) / 32, r)), "i.outer + 2");
}

TEST(Simplify, IntrinsicCallsAreOpaque) {
  Var o("i.outer"), in("i.inner");
  RangeMap r{{o.get(), {0, 3}}, {in.get(), {0, 31}}};
  Buffer a = make_buffer("A", DType::kFloat32, {128});
  Expr e = exp(make_load(a, {(o * 32 + in) / 32}) * 1.0f) + sqrt(make_float(4, DType::kFloat32));
  // Arguments simplify; calls, even of constants, are not folded.
  EXPECT_EQ(print_expr(simplify(e, r)), "exp(A[i.outer]*1.0f) + sqrt(4.0f)");
  Expr same = exp(make_load(a, {o}));
  EXPECT_TRUE(simplify(same, r).same_as(same));
  EXPECT_TRUE(same_expr(exp(make_load(a, {o})), same));
  EXPECT_FALSE(same_expr(log(make_load(a, {o})), same));
}

TEST(Simplify, CanonicalLinearForm) {
  Var i("i"), j("j");
  EXPECT_EQ(print_expr(simplify(i * 2 + j - i + 3 - 3)), "i + j");
  EXPECT_EQ(print_expr(simplify((i + 1) * 4 - 4)), "i*4");
  EXPECT_EQ(print_expr(simplify(i - i)), "0");
  EXPECT_EQ(print_expr(simplify(0 - j + 5)), "5 - j");
}

TEST(Simplify, FusedIndexFlattensBack) {
  Var f("f");
  RangeMap r{{f.get(), {0, 64 * 48 - 1}}};
  EXPECT_EQ(print_expr(simplify((f / 48) * 48 + f % 48, r)), "f");
}

TEST(Simplify, GuardsDecidedByRanges) {
  Var i("i");
  RangeMap r{{i.get(), {0, 9}}};
  EXPECT_EQ(print_expr(simplify(i < 10, r)), "true");
  EXPECT_EQ(print_expr(simplify(i >= 10, r)), "false");
  EXPECT_EQ(print_expr(simplify(i < 5, r)), "i < 5");
  EXPECT_EQ(print_expr(simplify(min(i, 20), r)), "i");
  EXPECT_EQ(print_expr(simplify(max(i, 20), r)), "20");
}

TEST(Simplify, DivisionOfUnboundedStaysFloorDivision) {
  Var i("i");
  EXPECT_EQ(print_expr(simplify((i * 4 + 2) / 4)), "i");
  EXPECT_EQ(print_expr(simplify((i * 4 + 6) % 4)), "2");
  EXPECT_EQ(print_expr(simplify((i + 1) / 4)), "(i + 1)/4");
}

TEST(Simplify, BoundOf) {
  Var i("i"), j("j");
  RangeMap r{{i.get(), {0, 7}}, {j.get(), {-2, 2}}};
  auto b = bound_of(i * 3 - j, r);
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(b->min, -2);
  EXPECT_EQ(b->max, 23);
  EXPECT_FALSE(bound_of(i + Var("free"), r).has_value());
}

TEST(Simplify, AffineCoefficient) {
  Var i("i"), j("j");
  EXPECT_EQ(affine_coefficient(i * 16 + j * 3, j.get()), 3);
  EXPECT_EQ(affine_coefficient(i * 16 + 5, j.get()), 0);
  EXPECT_FALSE(affine_coefficient(j / 2, j.get()).has_value());
}

}  // namespace
}  // namespace tessera
