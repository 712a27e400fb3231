#include "lower/lower.h"

#include <gtest/gtest.h>

#include "ops/nn.h"
#include "te/error.h"
#include "test_util.h"
#include "tir/printer.h"

namespace tessera {
namespace {

TEST(Lower, MatmulIsAnInitNestAndAPerfectUpdateNest) {
  Tensor a = placeholder({4, 3}, DType::kFloat32, "A");
  Tensor b = placeholder({3, 5}, DType::kFloat32, "B");
  Tensor c = matmul(a, b, "C");
  EXPECT_EQ(print_program(lower("mm", {a, b, c})),
            "program mm(A: float32[4, 3], B: float32[3, 5]) -> (C: float32[4, 5]) {\n"
            "  for i.init in 0..4 {\n"
            "    for j.init in 0..5 {\n"
            "      C[i.init, j.init] = 0.0f\n"
            "    }\n"
            "  }\n"
            "  for i in 0..4 {\n"
            "    for j in 0..5 {\n"
            "      for k in 0..3 {\n"
            "        C[i, j] = C[i, j] + A[i, k]*B[k, j]\n"
            "      }\n"
            "    }\n"
            "  }\n"
            "}\n");
}

TEST(Lower, BoundsInferenceShrinksProducerToWhatIsRead) {
  Tensor a = placeholder({16}, DType::kFloat32, "A");
  Tensor b = compute(
      {16}, [&](Var i) { return a(i) * 2; }, "B");
  Tensor c = compute({6}, [&](Var i) { return b(i + 2) + b(i * 2); }, "C", {"x"});
  Program p = lower("shrink", {a, c});
  // C reads B at [2, 7] and [0, 10]: B's loop covers [0, 11).
  EXPECT_NE(print_program(p).find("for i in 0..11"), std::string::npos) << print_program(p);
  EXPECT_NE(print_program(p).find("alloc B: float32[16]"), std::string::npos);

  Tensor d = compute({4}, [&](Var i) { return b(i + 5); }, "D", {"x"});
  Program q = lower("offset", {a, d});
  EXPECT_NE(print_program(q).find("for i in 5..9"), std::string::npos) << print_program(q);
  auto args = testing::random_args(q, 3);
  interpret(q, args);
  for (int i = 0; i < 4; ++i) EXPECT_FLOAT_EQ(args[1][i], static_cast<float>(args[0][i + 5] * 2));
}

TEST(Lower, StridedPaddedConvComputesOnlyTheReadPartOfThePad) {
  OpInstance op = instantiate(parse_workload("conv2d:N=1,C=3,H=8,W=8,O=4,K=3,S=2,P=1"));
  std::string text = print_program(op.program);
  EXPECT_NE(text.find("alloc pad: float32[1, 3, 10, 10]"), std::string::npos);
  EXPECT_NE(text.find("for h in 0..9"), std::string::npos) << text;
  EXPECT_TRUE(testing::interpreter_matches_reference(op, op.program));
}

TEST(Lower, EveryOperatorMatchesItsReference) {
  for (const char* w :
       {"matmul:M=7,N=5,K=3", "matmul:M=1,N=1,K=1", "conv2d:N=2,C=3,H=7,W=6,O=4,K=3,S=1,P=1",
        "conv2d:N=1,C=2,H=9,W=9,O=3,K=1,S=2,P=0", "conv2d:N=1,C=2,H=5,W=5,O=2,K=5,S=1,P=2",
        "conv2d_bias_relu:N=1,C=3,H=6,W=6,O=4,K=3,S=1,P=1", "add:M=5,N=7", "relu:M=4,N=9"}) {
    OpInstance op = instantiate(parse_workload(w));
    EXPECT_TRUE(testing::interpreter_matches_reference(op, op.program)) << w;
  }
}

TEST(Lower, MultiStageDtypesReductionsSelectAndCasts) {
  Tensor a = placeholder({3, 4}, DType::kInt32, "A");
  IterVar k = reduce_axis(4, "k");
  Tensor mx = compute(
      {3}, [&](Var i) { return max(a(i, k.var), {k}); }, "Mx");
  IterVar k2 = reduce_axis(4, "k2");
  Tensor mn = compute({3}, [&](Var i) { return min(a(i, k2.var), {k2}); }, "Mn", {"i2"});
  Tensor out = compute({3},
                       [&](Var i) {
                         Expr spread = cast(DType::kFloat64, mx(i) - mn(i));
                         return select(spread > 2.0, spread / 2.0, cast(DType::kFloat64, mn(i)));
                       },
                       "Out", {"i3"});
  Program p = lower("spread", {a, out});
  auto args = testing::random_args(p, 7);
  interpret(p, args);
  for (int i = 0; i < 3; ++i) {
    double hi = -1e9, lo = 1e9;
    for (int j = 0; j < 4; ++j) {
      hi = std::max(hi, args[0][i * 4 + j]);
      lo = std::min(lo, args[0][i * 4 + j]);
    }
    double expect = hi - lo > 2 ? (hi - lo) / 2 : lo;
    EXPECT_DOUBLE_EQ(args[1][i], expect);
  }
}

TEST(Lower, SharedAxisNamesAreQualifiedByStage) {
  OpInstance op = instantiate(parse_workload("conv2d_bias_relu:N=1,C=2,H=4,W=4,O=2,K=3,S=1,P=1"));
  std::string text = print_program(op.program);
  EXPECT_NE(text.find("for conv.n in"), std::string::npos) << text;
  EXPECT_NE(text.find("for bias_add.n in"), std::string::npos) << text;
  EXPECT_NE(text.find("for pad.n in"), std::string::npos) << text;
}

TEST(Lower, BadArgumentsAreErrors) {
  Tensor a = placeholder({4}, DType::kFloat32, "A");
  Tensor b = compute(
      {4}, [&](Var i) { return a(i) + 1; }, "B");
  EXPECT_THROW(lower("missing_input", {b}), Error);
  EXPECT_THROW(lower("no_output", {a}), Error);
  EXPECT_THROW(lower("twice", {a, b, b}), Error);
}

}  // namespace
}  // namespace tessera
