// The separable blur: separate_filter on te programs, its refusals, and the two-pass program
// against the naive reference through the interpreter and compiled.
#include <gtest/gtest.h>

#include "lower/lower.h"
#include "ops/blur_schedules.h"
#include "ops/evaluate.h"
#include "ops/nn.h"
#include "ops/separate_filter.h"
#include "schedule/strategy_parser.h"
#include "strategy/stmt_traversal.h"
#include "test_util.h"
#include "tir/printer.h"

namespace tessera {
namespace {

TensorProgram blur_program(int64_t h, int64_t w, const Weights3x3& k) {
  Tensor in = placeholder({h, w}, DType::kFloat32, "in");
  return TensorProgram{"blur2d", {in, blur2d(in, k, "out")}};
}

std::string failure(const RewriteResult<TensorProgram>& r) {
  EXPECT_FALSE(r.ok());
  return r.ok() ? "" : r.message();
}

TEST(SeparateFilter, SplitsTheBinomialFilter) {
  Weights1D v = binomial_weights_1d();
  TensorStrategy s = separate_filter("out", v, v);
  EXPECT_EQ(s.text(), "separate_filter(out, [0.25, 0.5, 0.25], [0.25, 0.5, 0.25])");
  TensorProgram p = blur_program(7, 9, binomial_weights());
  EXPECT_EQ(print_tensor_program(p),
            "out[y, x] = in[y, x]*0.0625f + in[y, x + 1]*0.125f + in[y, x + 2]*0.0625f + "
            "in[y + 1, x]*0.125f + in[y + 1, x + 1]*0.25f + in[y + 1, x + 2]*0.125f + "
            "in[y + 2, x]*0.0625f + in[y + 2, x + 1]*0.125f + in[y + 2, x + 2]*0.0625f\n");
  RewriteStats st;
  RewriteResult<TensorProgram> r = s(p, &st);
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(st.steps, 1);
  EXPECT_EQ(print_tensor_program(r.program()),
            "vert[vy, vx] = in[vy, vx]*0.25f + in[vy + 1, vx]*0.5f + in[vy + 2, vx]*0.25f\n"
            "out[y, x] = vert[y, x]*0.25f + vert[y, x + 1]*0.5f + vert[y, x + 2]*0.25f\n");
  // vert covers the rows of out and the columns it reads.
  Program lowered = lower("blur2d", r.program().args);
  EXPECT_NE(print_program(lowered).find("alloc vert: float32[5, 9]"), std::string::npos)
      << print_program(lowered);
}

TEST(SeparateFilter, TwoPassesMatchTheReference) {
  for (auto [h, w] : {std::pair<int64_t, int64_t>{7, 9}, {3, 3}, {4, 20}, {11, 5}}) {
    for (int separate : {0, 1}) {
      std::string wl = fmt::format("blur2d:H={},W={},separate={}", h, w, separate);
      SCOPED_TRACE(wl);
      OpInstance op = instantiate(parse_workload(wl));
      for (uint64_t seed : {1, 2, 3}) {
        EXPECT_TRUE(testing::interpreter_matches_reference(op, op.program, seed));
      }
    }
  }
}

TEST(SeparateFilter, CompiledTwoPassesMatchTheReference) {
  for (int separate : {0, 1}) {
    OpInstance op =
        instantiate(parse_workload(fmt::format("blur2d:H=7,W=9,separate={}", separate)));
    EvaluateParams params;
    params.time = false;
    params.threads = 2;
    Evaluation ev = evaluate(op, op.program, params);
    EXPECT_TRUE(ev.checked);
    EXPECT_TRUE(ev.correct) << ev.mismatch << "\n" << ev.code;
  }
}

TEST(SeparateFilter, RefusesNonSeparableWeights) {
  Weights1D v = binomial_weights_1d();
  Weights3x3 laplacian{{{0, 1, 0}, {1, -4, 1}, {0, 1, 0}}};
  EXPECT_EQ(failure(separate_filter("out", v, v)(blur_program(7, 9, laplacian))),
            "separate_filter(out, [0.25, 0.5, 0.25], [0.25, 0.5, 0.25]): weight [0][0] = 0 is "
            "not v[0]*h[0] = 0.25*0.25 = 0.0625");
  // Right except one weight: that weight is named.
  Weights3x3 k = binomial_weights();
  k[2][1] = 0.126;
  std::string msg = failure(separate_filter("out", v, v)(blur_program(7, 9, k)));
  EXPECT_NE(msg.find("weight [2][1] = 0.12600000202655792 is not v[2]*h[1]"), std::string::npos)
      << msg;
  // Separable, but not with the weights given.
  msg = failure(separate_filter("out", {1, 2, 1}, {1, 2, 1})(blur_program(7, 9, k)));
  EXPECT_NE(msg.find("separate_filter(out, [1, 2, 1], [1, 2, 1]): weight [0][0]"),
            std::string::npos)
      << msg;
}

TEST(SeparateFilter, ToleratesFloat32RoundingOnly) {
  Weights3x3 box;
  for (auto& row : box) row = {1.0 / 9, 1.0 / 9, 1.0 / 9};  // stored as float32 literals
  Weights1D third{1.0 / 3, 1.0 / 3, 1.0 / 3};
  EXPECT_TRUE(separate_filter("out", third, third)(blur_program(5, 5, box)).ok());
  Weights1D near{0.3334, 0.3334, 0.3334};
  EXPECT_FALSE(separate_filter("out", near, third)(blur_program(5, 5, box)).ok());
}

TEST(SeparateFilter, RefusesBodiesThatAreNotA3x3Stencil) {
  Weights1D v = binomial_weights_1d();
  TensorStrategy s = separate_filter("out", v, v);
  std::string name = "separate_filter(out, [0.25, 0.5, 0.25], [0.25, 0.5, 0.25]): ";
  Tensor in = placeholder({6, 6}, DType::kFloat32, "in");
  Tensor in2 = placeholder({6, 6}, DType::kFloat32, "in2");
  auto program = [&](const std::function<Expr(Var, Var)>& f) {
    return TensorProgram{"t", {in, in2, compute({4, 4}, f, "out", {"y", "x"})}};
  };
  EXPECT_EQ(failure(s(program([&](Var y, Var x) { return in(y, x) * 2.0 + in(y + 1, x); }))),
            name + "out is not a 3x3 stencil: it has 2 terms");
  EXPECT_EQ(failure(s(program([&](Var y, Var x) { return max(in(y, x), in(y, x + 1)); }))),
            name +
                "out is not a 3x3 stencil: max(in[y, x], in[y, x + 1]) is not a term in[y + "
                "dy, x + dx]*w");
  EXPECT_EQ(
      failure(s(program([&](Var y, Var x) { return in(y, x) * in(y, x); }))),
      name + "out is not a 3x3 stencil: in[y, x]*in[y, x] is not a term in[y + dy, x + dx]*w");
  // Nine terms, but one reads another tensor, or two read the same offset.
  auto nine = [&](const Tensor& last, int last_dx) {
    return program([&, last_dx](Var y, Var x) {
      Expr acc = in(y, x);
      for (int i = 1; i < 8; ++i) acc = acc + in(y + i / 3, x + i % 3);
      return acc + last(y + 2, x + last_dx);
    });
  };
  // All weights 1: a box filter, separable as [1 1 1] x [1 1 1], not as the binomial.
  EXPECT_TRUE(separate_filter("out", {1, 1, 1}, {1, 1, 1})(nine(in, 2)).ok());
  EXPECT_EQ(failure(s(nine(in2, 2))), name + "out is not a 3x3 stencil: it reads in and in2");
  EXPECT_EQ(failure(s(nine(in, 1))),
            name + "out is not a 3x3 stencil: offset (2, 1) is outside 0..2 or repeated");
  TensorProgram mm{"mm", {in, in2, matmul(in, in2, "out")}};
  EXPECT_EQ(failure(s(mm)), name + "out is not a 2-D stage with a plain sum as body");
  EXPECT_EQ(failure(separate_filter("blur", v, v)(mm)),
            "separate_filter(blur, [0.25, 0.5, 0.25], [0.25, 0.5, 0.25]): no stage named blur");
}

TEST(SeparateFilter, RebuildsConsumers) {
  Tensor in = placeholder({6, 8}, DType::kFloat32, "in");
  Tensor out = relu(blur2d(in, binomial_weights(), "blur"), "out");
  TensorProgram p{"blur_relu", {in, out}};
  Weights1D v = binomial_weights_1d();
  RewriteResult<TensorProgram> r = separate_filter("blur", v, v, "blur_v")(p);
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(print_tensor_program(r.program()),
            "blur_v[vy, vx] = in[vy, vx]*0.25f + in[vy + 1, vx]*0.5f + in[vy + 2, vx]*0.25f\n"
            "blur[y, x] = blur_v[y, x]*0.25f + blur_v[y, x + 1]*0.5f + blur_v[y, x + 2]*0.25f\n"
            "out[i, j] = max(blur[i, j], 0.0f)\n");
  // The old stage is gone from the new program, and the original is untouched.
  EXPECT_EQ(print_tensor_program(p).find("blur_v"), std::string::npos);
  Program before = lower("b", p.args), after = lower("b", r.program().args);
  auto a = testing::random_args(before, 7), b = a;
  interpret(before, a);
  interpret(after, b);
  EXPECT_TRUE(testing::outputs_close(b, a, 1, 1e-6));
  // The name of the new stage must be free.
  EXPECT_NE(failure(separate_filter("blur", v, v, "in")(p)).find("a tensor named in exists"),
            std::string::npos);
}

RewriteResult<Program> scheduled(const OpInstance& op, const char* strategy) {
  return parse_strategy(strategy)(op.program);
}

TEST(BlurSchedules, MatchTheReference) {
  struct Case {
    int separate;
    const char* strategy;
  };
  for (const Case& c : {Case{0, kBlur2dSchedule}, Case{1, kBlurTwoPassSchedule},
                        Case{1, kBlurScanlineSchedule}, Case{1, "compute_at(vert, y)"}}) {
    for (auto [h, w] : {std::pair<int64_t, int64_t>{7, 9}, {3, 3}, {9, 20}}) {
      std::string wl = fmt::format("blur2d:H={},W={},separate={}", h, w, c.separate);
      SCOPED_TRACE(wl + " with " + c.strategy);
      OpInstance op = instantiate(parse_workload(wl));
      RewriteResult<Program> r = scheduled(op, c.strategy);
      ASSERT_TRUE(r.ok()) << r.message();
      EXPECT_TRUE(testing::interpreter_matches_reference(op, r.program(), 4));
      EvaluateParams params;
      params.time = false;
      params.threads = 2;
      Evaluation ev = evaluate(op, r.program(), params);
      EXPECT_TRUE(ev.correct) << ev.mismatch << "\n" << ev.code;
    }
  }
}

TEST(BlurSchedules, ScanlineKeepsOneRowPerThread) {
  OpInstance op = instantiate(parse_workload("blur2d:H=7,W=9,separate=1"));
  RewriteResult<Program> r = scheduled(op, kBlurScanlineSchedule);
  ASSERT_TRUE(r.ok()) << r.message();
  std::string text = print_program(r.program());
  EXPECT_NE(text.find("  parallel for y in 0..5 {\n    alloc vert: float32[1, 9] {"),
            std::string::npos)
      << text;
  // The extent-1 loop compute_at leaves can be inlined by a Stmt traversal on the body.
  RewriteResult<Program> inlined = body(normalize(inline_unit_loop()))(r.program());
  ASSERT_TRUE(inlined.ok());
  EXPECT_EQ(print_program(inlined.program()).find("for vy"), std::string::npos);
  EXPECT_TRUE(testing::interpreter_matches_reference(op, inlined.program(), 5));
}

}  // namespace
}  // namespace tessera
