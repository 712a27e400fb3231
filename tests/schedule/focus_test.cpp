#include "schedule/focus.h"

#include <gtest/gtest.h>

#include "schedule/strategy_parser.h"
#include "test_util.h"
#include "tir/printer.h"

namespace tessera {
namespace {

TEST(LoopNormalForm, GuardsSinkToTheStatementTheyProtect) {
  OpInstance op = instantiate(parse_workload("matmul:M=7,N=4,K=3"));
  Program split_i = parse_strategy("split(i, 3)")(op.program).program();
  std::string before = print_program(split_i);
  ASSERT_NE(before.find("if (i.outer*3 + i.inner < 7) {\n        for j in 0..4"), std::string::npos)
      << before;
  RewriteResult<Program> r = loop_normal_form()(split_i);
  ASSERT_TRUE(r.ok()) << r.message();
  std::string after = print_program(r.program());
  EXPECT_NE(
      after.find(
          "for k in 0..3 {\n          if (i.outer*3 + i.inner < 7) {\n            C[i.outer*3"),
      std::string::npos)
      << after;
  EXPECT_TRUE(testing::interpreter_matches_reference(op, r.program()));
  // Already normal: unchanged, and still a success.
  RewriteResult<Program> again = loop_normal_form()(r.program());
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(print_program(again.program()), after);
}

TEST(Focus, StatementStrategiesAtALoopOrItsBody) {
  OpInstance op = instantiate(parse_workload("matmul:M=4,N=4,K=4"));
  RewriteResult<Program> r = on_loop("@innermost", unroll_loop_here())(op.program);
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_NE(print_program(r.program()).find("unrolled for k in 0..4"), std::string::npos);
  RewriteResult<Program> b = on_body("j", vectorize_loop_here())(op.program);
  ASSERT_TRUE(b.ok());
  EXPECT_NE(print_program(b.program()).find("vectorized for k in 0..4"), std::string::npos);
  RewriteResult<Program> bad = on_body("k", vectorize_loop_here())(op.program);
  EXPECT_FALSE(bad.ok());
  RewriteResult<Program> missing = on_loop("q", unroll_loop_here())(op.program);
  EXPECT_EQ(missing.message(), "on_loop(q, unroll_loop_here): no loop named q");
}

}  // namespace
}  // namespace tessera
