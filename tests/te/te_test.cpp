#include <gtest/gtest.h>

#include "te/error.h"
#include "te/expr_functor.h"
#include "te/tensor.h"
#include "tir/printer.h"

namespace tessera {
namespace {

TEST(TeExpr, LiteralsAdoptTheOtherOperandsType) {
  Var i("i");
  Tensor a = placeholder({4}, DType::kFloat32, "A");
  Expr e = a(i) * 0.5 + 1;
  EXPECT_EQ(e.dtype(), DType::kFloat32);
  EXPECT_EQ((i + 1).dtype(), DType::kInt32);
  EXPECT_EQ((i < 3).dtype(), DType::kBool);
}

TEST(TeExpr, MismatchedTypesNeedACast) {
  Tensor a = placeholder({4}, DType::kFloat32, "A");
  Tensor b = placeholder({4}, DType::kFloat64, "B");
  Var i("i");
  EXPECT_THROW(a(i) + b(i), Error);
  EXPECT_EQ((cast(DType::kFloat64, a(i)) + b(i)).dtype(), DType::kFloat64);
  EXPECT_THROW(a(i) % b(i), Error);
  EXPECT_THROW(select(i, a(i), a(i)), Error);
}

TEST(TeExpr, IntrinsicsTakeFloatsOnly) {
  Tensor a = placeholder({4}, DType::kFloat32, "A");
  Tensor b = placeholder({4}, DType::kFloat64, "B");
  Tensor n = placeholder({4}, DType::kInt32, "N");
  Var i("i");
  EXPECT_EQ(exp(a(i) - 1.0).dtype(), DType::kFloat32);
  EXPECT_EQ(print_expr(exp(a(i) - 1.0)), "exp(A[i] - 1.0f)");
  EXPECT_EQ(print_expr(sqrt(log(b(i))) / tanh(b(i))), "sqrt(log(B[i]))/tanh(B[i])");
  EXPECT_EQ(print_expr(sigmoid(a(i))), "sigmoid(A[i])");
  EXPECT_EQ(log(Expr(2)).dtype(), DType::kFloat64);  // a lone integer literal becomes float64
  EXPECT_EQ(exp(make_float(1, DType::kFloat32)).dtype(), DType::kFloat32);
  try {
    exp(n(i));
    ADD_FAILURE() << "exp of int32 accepted";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "exp needs a float32 or float64 argument, not int32; insert a cast");
  }
  EXPECT_THROW(sqrt(i < 2), Error);
  EXPECT_THROW(tanh(Expr()), Error);
  EXPECT_THROW(make_call(Intrinsic::kLog, {}), Error);
  EXPECT_THROW(make_call(Intrinsic::kLog, {a(i), a(i)}), Error);
  EXPECT_EQ(exp(cast(DType::kFloat32, n(i))).dtype(), DType::kFloat32);
  EXPECT_EQ(intrinsic_from_name("tanh"), Intrinsic::kTanh);
  EXPECT_FALSE(intrinsic_from_name("expf").has_value());
  // Substitution rebuilds through calls.
  Var j("j");
  EXPECT_EQ(print_expr(substitute(exp(a(i)), {{i.get(), j + 1}})), "exp(A[j + 1])");
}

TEST(TeTensor, IndexCountAndTypesAreChecked) {
  Tensor a = placeholder({4, 5}, DType::kInt32, "A");
  Var i("i");
  EXPECT_THROW(a(i), Error);
  EXPECT_THROW(a(i, cast(DType::kFloat32, i)), Error);
  EXPECT_EQ(a(i, i + 1).dtype(), DType::kInt32);
}

TEST(TeTensor, InvalidShapesAreRejected) {
  EXPECT_THROW(placeholder({4, 0}, DType::kFloat32, "A"), Error);
  EXPECT_THROW(placeholder({-1}, DType::kFloat32, "A"), Error);
  EXPECT_THROW(reduce_axis(0, "k"), Error);
  EXPECT_THROW(compute(
                   {3}, [](Var i) { return i; }, ""),
               Error);
}

TEST(TeTensor, ReductionMustBeTheWholeBody) {
  Tensor a = placeholder({4, 4}, DType::kFloat32, "A");
  IterVar k = reduce_axis(4, "k");
  EXPECT_NO_THROW(compute(
      {4}, [&](Var i) { return sum(a(i, k.var), {k}); }, "S"));
  EXPECT_THROW(compute(
                   {4}, [&](Var i) { return sum(a(i, k.var), {k}) * 2; }, "S"),
               Error);
}

TEST(TeTensor, MultiStageTopologicalOrder) {
  Tensor a = placeholder({8}, DType::kFloat32, "A");
  Tensor b = compute(
      {8}, [&](Var i) { return a(i) * 2; }, "B");
  Tensor c = compute(
      {8}, [&](Var i) { return b(i) + a(i); }, "C");
  std::vector<Tensor> order = topo_order({c});
  ASSERT_EQ(order.size(), 3u);
  EXPECT_EQ(order[0]->name, "A");
  EXPECT_EQ(order[1]->name, "B");
  EXPECT_EQ(order[2]->name, "C");
}

TEST(TeTensor, ReductionsAndDtypes) {
  for (DType t : {DType::kFloat32, DType::kFloat64, DType::kInt32}) {
    Tensor a = placeholder({3, 4}, t, "A");
    IterVar k = reduce_axis(4, "k");
    Tensor mx = compute(
        {3}, [&](Var i) { return max(a(i, k.var), {k}); }, "M");
    EXPECT_EQ(mx->dtype, t);
    EXPECT_TRUE(mx->body.as<ReduceNode>() != nullptr);
    EXPECT_EQ(mx->body.as<ReduceNode>()->op, ReduceOp::kMax);
  }
}

}  // namespace
}  // namespace tessera
