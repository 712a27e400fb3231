#include "schedule/strategy_parser.h"

#include <gtest/gtest.h>

#include "ops/workload.h"
#include "te/error.h"

namespace tessera {
namespace {

TEST(StrategyText, PrintsBackAsItParses) {
  for (const char* text :
       {"split(i, 32)",
        "split(i, 32) ; split(j, 16) ; reorder(i.outer, j.outer, k, i.inner, j.inner)",
        "vectorize(j.inner) ; parallel(i.outer)", "id", "fail", "try(unroll(k))",
        "repeat(split(i, 2))", "vectorize(j) <+ parallel(i)",
        "(split(i, 2) ; vectorize(i.inner)) <+ id", "fuse(conv.n, o) ; unroll(rx)"}) {
    ProgramStrategy s = parse_strategy(text);
    EXPECT_EQ(s.text(), text);
    EXPECT_EQ(parse_strategy(s.text()).text(), s.text());
  }
}

TEST(StrategyText, CombinatorsBehave) {
  OpInstance op = instantiate(parse_workload("matmul:M=8,N=8,K=8"));
  EXPECT_TRUE(parse_strategy("id")(op.program).ok());
  EXPECT_FALSE(parse_strategy("fail")(op.program).ok());
  EXPECT_TRUE(parse_strategy("try(vectorize(k))")(op.program).ok());
  EXPECT_TRUE(parse_strategy("vectorize(k) <+ parallel(i)")(op.program).ok());
  EXPECT_FALSE(parse_strategy("vectorize(k) <+ fail")(op.program).ok());
  // repeat stops when split(i, 2) no longer applies: after one step i is gone.
  EXPECT_TRUE(parse_strategy("repeat(split(i, 2))")(op.program).ok());
  EXPECT_TRUE(parse_strategy("")(op.program).ok());
}

// Deep nesting is refused with a clear error instead of overflowing the parser's stack.
TEST(StrategyText, NestingDeeperThanTheLimitIsAnError) {
  for (int depth : {50, 50000}) {
    std::string text = std::string(depth, '(') + "id" + std::string(depth, ')');
    if (depth <= 200) {
      EXPECT_NO_THROW(parse_strategy(text));
      continue;
    }
    try {
      parse_strategy(text);
      FAIL() << "expected an error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("nested more than"), std::string::npos) << e.what();
    }
  }
}

// A long sequence is one flat step: 100,000 items parse and apply without a frame per item
// (25,000 took minutes when each `;` nested and copied the sequence before it), and the item
// that fails is the one named.
TEST(StrategyText, LongSequencesParseAndApplyFlat) {
  OpInstance op = instantiate(parse_workload("matmul:M=8,N=8,K=8"));
  std::string text;
  for (int i = 0; i < 100000; ++i) text += i ? " ; id" : "id";
  ProgramStrategy s = parse_strategy(text);
  EXPECT_EQ(s.text(), text);
  EXPECT_TRUE(s(op.program).ok());
  ProgramStrategy failing = parse_strategy(text + " ; split(q, 2) ; " + text);
  RewriteResult<Program> r = failing(op.program);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.strategy(), "split(q, 2)");
}

// Nested repeats multiply their limits (1000^4 applications of id); the budget of one top-level
// application ends them with an error that is not called internal, and the next application
// starts with a full budget.
TEST(StrategyText, RunawayRepeatsEndWithinTheBudget) {
  OpInstance op = instantiate(parse_workload("matmul:M=8,N=8,K=8"));
  RewriteResult<Program> r = parse_strategy("repeat(repeat(repeat(repeat(id))))")(op.program);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.out_of_budget());
  EXPECT_NE(r.message().find("ran past"), std::string::npos) << r.message();
  EXPECT_EQ(r.message().find("internal error"), std::string::npos) << r.message();
  EXPECT_TRUE(parse_strategy("split(i, 2) ; repeat(id)")(op.program).ok());
}

TEST(StrategyText, ErrorsPointAtTheColumn) {
  auto message = [](const char* text) {
    try {
      parse_strategy(text);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(message("split(i 32)"), "strategy: column 9: expected ',' but found '3'");
  EXPECT_EQ(message("tiles(i, j)"), "strategy: column 1: unknown strategy 'tiles'");
  EXPECT_EQ(message("tile(i, j)"),
            "strategy: column 1: tile needs one size per loop, got 2 loops and 0 sizes");
  EXPECT_EQ(message("tile_nd(i, 4, j)"), "strategy: column 15: loop names come before the sizes");
  EXPECT_EQ(message("vectorize(@loop(x))"), "strategy: column 18: expected ',' but found ')'");
  EXPECT_EQ(
      message("vectorize(@middle)"),
      "strategy: column 11: unknown location '@middle' (known: @innermost, @outermost, @loop(n))");
  EXPECT_EQ(message("split(i, 4) ;"), "strategy: column 14: expected a name at the end");
  EXPECT_EQ(message("split(i, x)"), "strategy: column 10: expected an integer");
  EXPECT_EQ(message("fuse(i)"), "strategy: column 1: fuse takes 2 loop names, got 1");
  EXPECT_EQ(message("vectorize(j))"), "strategy: column 13: unexpected ')'");
}

}  // namespace
}  // namespace tessera
