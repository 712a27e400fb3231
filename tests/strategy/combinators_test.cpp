// The laws of Elevate's combinators, checked on several expressions and loop nests, and the
// rewrite statistics of composed strategies.
#include <gtest/gtest.h>

#include <vector>

#include "strategy/expr_traversal.h"
#include "strategy/predicates.h"
#include "strategy/stmt_traversal.h"
#include "strategy/strategy.h"
#include "strategy/traversal.h"
#include "tir/parser.h"
#include "tir/printer.h"
#include "tir/structural_equal.h"

namespace tessera {
namespace {

const Var x("x"), y("y");

std::vector<Expr> expr_programs() {
  std::vector<Expr> out;
  for (const char* t : {"x", "x + 0", "(2 + 3) + 0", "x*(y + (2 + 3))", "(x + y)*(y + x)",
                        "select(x < 3, y*1, 2 + 2)", "float32(x*1) + 0.5f"}) {
    out.push_back(parse_expr(t, {x, y}));
  }
  return out;
}

std::vector<ExprStrategy> expr_strategies() {
  ExprStrategy fold = fold_constants();
  return {fold,         commute_add(),   top_down(fold), bottom_up(commute_add()),
          some(fold),   normalize(fold), id<Expr>(),     fail<Expr>(),
          try_all(fold)};
}

std::vector<Stmt> stmt_programs() {
  Buffer a = make_buffer("A", DType::kFloat32, {4, 8});
  std::vector<Stmt> out;
  for (const char* t : {"A[0, 0] = 1.0f", "for i in 0..4 {\n  A[i, 0] = 1.0f\n}",
                        "for i in 0..4 {\n  for j in 0..8 {\n    A[i, j] = 0.0f\n  }\n  "
                        "unrolled for k in 0..2 {\n    A[i, k] = 1.0f\n  }\n}"}) {
    out.push_back(parse_stmt(t, {}, {a}));
  }
  return out;
}

std::vector<StmtStrategy> stmt_strategies() {
  return {unroll_loop_here(),
          top_down(vectorize_loop_here()),
          bottom_up(unroll_loop_here()),
          try_all(unroll_loop_here()),
          is_loop("j"),
          id<Stmt>(),
          fail<Stmt>()};
}

// Same outcome: both succeed with structurally equal programs, or both fail.
template <typename P>
::testing::AssertionResult same(const RewriteResult<P>& a, const RewriteResult<P>& b) {
  if (a.ok() != b.ok()) {
    return ::testing::AssertionFailure() << a.message() << " vs " << b.message();
  }
  if (a.ok() && !structural_equal(a.program(), b.program())) {
    return ::testing::AssertionFailure() << "different programs";
  }
  return ::testing::AssertionSuccess();
}

template <typename P>
void check_laws(const std::vector<P>& programs, const std::vector<Strategy<P>>& strategies) {
  for (const Strategy<P>& s : strategies) {
    for (const P& p : programs) {
      SCOPED_TRACE(s.text());
      RewriteResult<P> r = s(p);
      EXPECT_TRUE(same(seq(id<P>(), s)(p), r)) << "id ; s == s";
      EXPECT_TRUE(same(seq(s, id<P>())(p), r)) << "s ; id == s";
      EXPECT_TRUE(same(lchoice(fail<P>(), s)(p), r)) << "fail <+ s == s";
      EXPECT_TRUE(same(lchoice(s, fail<P>())(p), r)) << "s <+ fail == s";
      EXPECT_FALSE(seq(fail<P>(), s)(p).ok()) << "fail ; s == fail";
      EXPECT_TRUE(lchoice(id<P>(), s)(p).ok()) << "id <+ s == id";
      EXPECT_TRUE(try_(s)(p).ok()) << "try never fails";
      EXPECT_NE(not_(s)(p).ok(), r.ok()) << "not inverts";
      if (!r.ok()) {
        EXPECT_TRUE(structural_equal(try_(s)(p).program(), p)) << "try(fail) == id";
        EXPECT_TRUE(not_(s)(p).program().same_as(p)) << "not keeps its input";
      }
      EXPECT_TRUE(same(not_(not_(s))(p), r.ok() ? RewriteResult<P>::success(p) : r))
          << "not(not(s)) is s as a predicate";
    }
  }
}

TEST(Combinators, LawsOnExpressions) {
  check_laws(expr_programs(), expr_strategies());
}

TEST(Combinators, LawsOnStatements) {
  check_laws(stmt_programs(), stmt_strategies());
}

TEST(Combinators, RepeatStopsAtAFixpoint) {
  ExprStrategy step = top_down(fold_constants());
  for (const Expr& p : expr_programs()) {
    RewriteResult<Expr> r = repeat(step)(p);
    ASSERT_TRUE(r.ok());
    EXPECT_FALSE(step(r.program()).ok()) << print_expr(r.program());
    // normalize is repeat(top_down): nothing applicable anywhere afterwards.
    RewriteResult<Expr> n = normalize(fold_constants())(p);
    ASSERT_TRUE(n.ok());
    EXPECT_TRUE(structural_equal(n.program(), r.program()));
    EXPECT_FALSE(top_down(fold_constants())(n.program()).ok());
    EXPECT_TRUE(same(normalize(fold_constants())(n.program()), n)) << "normalize is idempotent";
  }
  for (const Stmt& p : stmt_programs()) {
    RewriteResult<Stmt> n = normalize(unroll_loop_here())(p);
    ASSERT_TRUE(n.ok());
    EXPECT_FALSE(top_down(unroll_loop_here())(n.program()).ok());
  }
  // A strategy that always applies runs into the limit and still returns.
  RewriteStats st;
  EXPECT_TRUE(repeat(commute_add(), 7)(parse_expr("x + y", {x, y}), &st).ok());
  EXPECT_EQ(st.steps, 7);
}

TEST(Combinators, RepeatNCounts) {
  Expr p = parse_expr("((x + 0) + 0) + 0", {x});
  ExprStrategy step = top_down(fold_constants());
  for (int n = 0; n <= 3; ++n) {
    RewriteStats st;
    RewriteResult<Expr> r = repeat_n(step, n)(p, &st);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(st.steps, n);
    std::string expected = "x";
    for (int i = n; i < 3; ++i) expected += " + 0";
    EXPECT_EQ(print_expr(r.program()), expected);
  }
  EXPECT_FALSE(repeat_n(step, 4)(p).ok());
  EXPECT_EQ(repeat_n(step, 4).text(), "repeat_n(top_down(fold_constants), 4)");
}

TEST(Combinators, StatsCountRuleSteps) {
  Expr p = parse_expr("(x + 0) + y*1", {x, y});
  RewriteStats st;
  RewriteResult<Expr> r = top_down(fold_constants())(p, &st);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(st.attempts, 2);  // the root, then x + 0
  EXPECT_EQ(st.steps, 1);

  // normalize: round 1 as above; round 2 tries the root, x, then y*1; round 3 all 3 nodes fail.
  st = {};
  r = normalize(fold_constants())(p, &st);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(print_expr(r.program()), "x + y");
  EXPECT_EQ(st.attempts, 2 + 3 + 3);
  EXPECT_EQ(st.steps, 2);
  EXPECT_GE(st.seconds, 0.0);

  // Combinators and predicates are not rules: id, seq, lchoice, not, traversals add nothing.
  st = {};
  ExprStrategy composed = seq(try_(commute_add()), lchoice(fail<Expr>(), not_(fold_constants())));
  r = composed(p, &st);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(print_expr(r.program()), "y*1 + (x + 0)");
  EXPECT_EQ(st.attempts, 2);
  EXPECT_EQ(st.steps, 1);
  EXPECT_EQ(composed.text(), "try(commute_add) ; fail <+ not(fold_constants)");

  // Statistics accumulate over runs; no stats pointer counts nothing.
  r = composed(p, &st);
  EXPECT_EQ(st.attempts, 4);
  r = composed(p);
  EXPECT_EQ(st.attempts, 4);
}

TEST(Combinators, NeverThrow) {
  ExprStrategy throws("throws", ExprStrategy::RuleFn([](const Expr& e) -> RewriteResult<Expr> {
                        if (e.as<VarNode>()) throw std::runtime_error("boom");
                        return RewriteResult<Expr>::not_applicable("throws", "not a var");
                      }));
  Expr p = parse_expr("(x + 0) + 2", {x});
  for (const ExprStrategy& s :
       {top_down(throws), bottom_up(throws), try_all(throws), normalize(throws),
        position(0, throws), not_(top_down(throws)), all_bottom_up(throws)}) {
    RewriteResult<Expr> r = s(p);
    EXPECT_EQ(r.kind(), RewriteResult<Expr>::Kind::kInternalError) << s.text();
    EXPECT_NE(r.message().find("boom"), std::string::npos) << r.message();
  }
  // `<+` does not hide an internal error behind its alternative.
  EXPECT_FALSE(lchoice(top_down(throws), id<Expr>())(p).ok());
}

}  // namespace
}  // namespace tessera
