// Each traversal on small hand-built expressions and loop nests, with the printed results.
#include "strategy/traversal.h"

#include <gtest/gtest.h>

#include "strategy/expr_traversal.h"
#include "strategy/predicates.h"
#include "strategy/stmt_traversal.h"
#include "tir/parser.h"
#include "tir/printer.h"

namespace tessera {
namespace {

const Var x("x"), y("y"), z("z");

Expr expr(const char* text) {
  return parse_expr(text, {x, y, z});
}

// The printed result of s on e, or "fail: <message>".
std::string apply(const ExprStrategy& s, const char* e, RewriteStats* st = nullptr) {
  RewriteResult<Expr> r = s(expr(e), st);
  return r ? print_expr(r.program()) : "fail: " + r.message();
}

TEST(ExprTraversal, OneLevel) {
  ExprStrategy fold = fold_constants();
  EXPECT_EQ(apply(fold, "x + 0"), "x");
  EXPECT_EQ(apply(fold, "2*3 - 1"), "fail: fold_constants: not constant arithmetic or an identity");
  EXPECT_EQ(apply(all(fold), "(x + 0) + y*1"), "x + y");
  EXPECT_EQ(apply(all(fold), "(x + 0) + y"),
            "fail: all: child 1: fold_constants: not constant arithmetic or an identity");
  EXPECT_EQ(apply(all(fold), "x"), "x");  // a leaf has no children to fail on
  EXPECT_EQ(apply(one(fold), "(x + 0) + y*1"), "x + y*1");
  EXPECT_EQ(apply(one(fold), "y + (x + 0)"), "y + x");
  EXPECT_EQ(apply(one(fold), "x"), "fail: one: applies to no immediate sub-term");
  EXPECT_EQ(apply(some(fold), "(x + 0) + y*1"), "x + y");
  EXPECT_EQ(apply(some(fold), "(x + 0) + y"), "x + y");
  EXPECT_EQ(apply(some(fold), "x + y"), "fail: some: applies to no immediate sub-term");
  EXPECT_EQ(apply(one(one(fold)), "z*((x + 0) + y)"), "z*(x + y)");
  EXPECT_EQ(apply(one(fold), "select(x < 3, y*1, 2 + 2)"), "select(x < 3, y, 2 + 2)");
  EXPECT_EQ(apply(some(fold), "select(x < 3, y*1, 2 + 2)"), "select(x < 3, y, 4)");
}

TEST(ExprTraversal, WholeTree) {
  ExprStrategy fold = fold_constants();
  // Pre-order finds the root first, post-order the inner sum.
  EXPECT_EQ(apply(top_down(fold), "(2 + 3) + 0"), "2 + 3");
  EXPECT_EQ(apply(bottom_up(fold), "(2 + 3) + 0"), "5 + 0");
  EXPECT_EQ(apply(top_down(fold), "x*(y + (2 + 3))"), "x*(y + 5)");
  EXPECT_EQ(apply(top_down(fold), "x*y"),
            "fail: top_down(fold_constants): fold_constants applies nowhere");
  EXPECT_EQ(apply(bottom_up(fold), "x*y"),
            "fail: bottom_up(fold_constants): fold_constants applies nowhere");
  // all_* insist on every node, leaves included; with try they rewrite where they can, in their
  // order: parents first leaves `2 + 3`, children first folds it away.
  EXPECT_EQ(apply(all_top_down(try_(fold)), "(2 + 3) + 0"), "2 + 3");
  EXPECT_EQ(apply(all_bottom_up(try_(fold)), "(2 + 3) + 0"), "5");
  EXPECT_EQ(apply(all_top_down(fold), "x*y"),
            "fail: fold_constants: not constant arithmetic or an identity");
  EXPECT_EQ(apply(all_top_down(fold), "(x + 0)*1"),
            "fail: all: child 0: fold_constants: not constant arithmetic or an identity");
  EXPECT_EQ(apply(all_bottom_up(fold), "x + 0"),
            "fail: all: child 0: fold_constants: not constant arithmetic or an identity");
  EXPECT_EQ(apply(all_top_down(try_(commute_add())), "(x + y) + z"), "z + (y + x)");
  EXPECT_EQ(apply(try_all(fold), "(x + 0)*((1 + 2)*(3 - 3))"), "x*0");
  EXPECT_EQ(apply(try_all(fold), "x*y"), "x*y");
  EXPECT_EQ(apply(normalize(fold), "((x + 0) + 2*3)*1"), "x + 6");
  EXPECT_EQ(apply(normalize(fold), "x"), "x");
  // A cast is traversed into its operand.
  EXPECT_EQ(apply(top_down(fold), "float32(x*1)"), "float32(x)");
}

TEST(ExprTraversal, Position) {
  ExprStrategy fold = fold_constants();
  // fold applies at `x + 0` (place 0) and `y*1` (place 1); the root is not a place.
  EXPECT_EQ(apply(position(0, fold), "(x + 0) + y*1"), "x + y*1");
  EXPECT_EQ(apply(position(1, fold), "(x + 0) + y*1"), "x + 0 + y");
  EXPECT_EQ(apply(position(2, fold), "(x + 0) + y*1"),
            "fail: position(2, fold_constants): fold_constants applies at 2 place(s) only");
  // Pre-order: the outer `(x + 0) + 0` comes before the inner `x + 0`.
  EXPECT_EQ(apply(position(0, fold), "((x + 0) + 0)*2"), "(x + 0)*2");
  EXPECT_EQ(apply(position(1, fold), "((x + 0) + 0)*2"), "(x + 0)*2");
  EXPECT_EQ(position(1, fold).text(), "position(1, fold_constants)");
  // Probes of earlier places are attempts but not steps.
  RewriteStats st;
  EXPECT_EQ(apply(position(1, fold), "(x + 0) + y*1", &st), "x + 0 + y");
  EXPECT_EQ(st.steps, 1);
  EXPECT_EQ(st.attempts, 5);  // root, x + 0, x, 0, y*1
}

TEST(ExprTraversal, Predicates) {
  EXPECT_EQ(apply(contains(expr("y*1")), "x + (y*1)"), "x + y*1");
  EXPECT_EQ(apply(contains(expr("x + y*1")), "x + y*1"), "x + y*1");
  EXPECT_EQ(apply(contains(expr("z")), "x + y"), "fail: contains(z): no such sub-term");
  EXPECT_EQ(apply(is_equal_to(expr("x + 1")), "x + 1"), "x + 1");
  EXPECT_EQ(apply(is_equal_to(expr("x + 1")), "1 + x"), "fail: is_equal_to(x + 1): not equal");
  EXPECT_EQ(apply(not_(is_equal_to(expr("x + 1"))), "1 + x"), "1 + x");
  EXPECT_EQ(apply(not_(contains(expr("x"))), "x + y"),
            "fail: not(contains(x)): contains(x) applies");
  // Predicates guard rules: fold only additions that contain y.
  ExprStrategy guarded = seq(contains(expr("y")), fold_constants());
  EXPECT_EQ(apply(top_down(guarded), "(x + 0) + (y + 0)"), "x + 0 + y");
}

TEST(ExprTraversal, Texts) {
  ExprStrategy fold = fold_constants();
  EXPECT_EQ(top_down(fold).text(), "top_down(fold_constants)");
  EXPECT_EQ(bottom_up(fold).text(), "bottom_up(fold_constants)");
  EXPECT_EQ(all_top_down(fold).text(), "all_top_down(fold_constants)");
  EXPECT_EQ(all_bottom_up(fold).text(), "all_bottom_up(fold_constants)");
  EXPECT_EQ(try_all(fold).text(), "try_all(fold_constants)");
  EXPECT_EQ(normalize(fold).text(), "normalize(fold_constants)");
  EXPECT_EQ(all(one(some(fold))).text(), "all(one(some(fold_constants)))");
  EXPECT_EQ(not_(top_down(seq(commute_add(), fold))).text(),
            "not(top_down(commute_add ; fold_constants))");
}

TEST(ExprTraversal, IllTypedRewriteIsAnInternalError) {
  // Replacing an int operand by a float makes `x + ...` ill-typed; the traversal reports it.
  ExprStrategy to_float("to_float", ExprStrategy::RuleFn([](const Expr& e) {
                          if (!e.as<VarNode>() || e.as<VarNode>()->name != "y") {
                            return RewriteResult<Expr>::not_applicable("to_float", "not y");
                          }
                          return RewriteResult<Expr>::success(make_float(1.5, DType::kFloat32));
                        }));
  RewriteResult<Expr> r = top_down(to_float)(expr("x + y"));
  EXPECT_EQ(r.kind(), RewriteResult<Expr>::Kind::kInternalError);
  EXPECT_NE(r.message().find("top_down(to_float)"), std::string::npos) << r.message();
}

const char* const kNest = R"(for i in 0..4 {
  for j in 0..8 {
    A[i, j] = 0.0f
  }
  for k in 0..2 {
    if (k < 1) {
      A[i, k] = 1.0f
    }
  }
}
)";

Buffer buffer_a() {
  static Buffer a = make_buffer("A", DType::kFloat32, {4, 8});
  return a;
}

std::string apply(const StmtStrategy& s, const char* text = kNest) {
  RewriteResult<Stmt> r = s(parse_stmt(text, {}, {buffer_a()}));
  return r ? print_stmt(r.program()) : "fail: " + r.message();
}

TEST(StmtTraversal, MarksLoops) {
  EXPECT_EQ(apply(top_down(unroll_loop_here())), R"(unrolled for i in 0..4 {
  for j in 0..8 {
    A[i, j] = 0.0f
  }
  for k in 0..2 {
    if (k < 1) {
      A[i, k] = 1.0f
    }
  }
}
)");
  EXPECT_EQ(apply(bottom_up(vectorize_loop_here())), R"(for i in 0..4 {
  vectorized for j in 0..8 {
    A[i, j] = 0.0f
  }
  for k in 0..2 {
    if (k < 1) {
      A[i, k] = 1.0f
    }
  }
}
)");
  // The loops of the sequence inside i: `one` marks the first, `some` both.
  EXPECT_EQ(apply(one(some(unroll_loop_here()))), R"(for i in 0..4 {
  unrolled for j in 0..8 {
    A[i, j] = 0.0f
  }
  unrolled for k in 0..2 {
    if (k < 1) {
      A[i, k] = 1.0f
    }
  }
}
)");
  EXPECT_EQ(apply(try_all(vectorize_loop_here())), R"(vectorized for i in 0..4 {
  vectorized for j in 0..8 {
    A[i, j] = 0.0f
  }
  vectorized for k in 0..2 {
    if (k < 1) {
      A[i, k] = 1.0f
    }
  }
}
)");
  EXPECT_EQ(apply(position(2, unroll_loop_here())), R"(for i in 0..4 {
  for j in 0..8 {
    A[i, j] = 0.0f
  }
  unrolled for k in 0..2 {
    if (k < 1) {
      A[i, k] = 1.0f
    }
  }
}
)");
  // A loop named k, found wherever it is, then unrolled.
  EXPECT_EQ(apply(top_down(seq(is_loop("k"), unroll_loop_here()))),
            apply(position(2, unroll_loop_here())));
  EXPECT_EQ(apply(all_top_down(unroll_loop_here())),
            "fail: all: child 0: unroll_loop_here: not a loop");  // the sequence inside i
  // normalize marks every serial loop, as try_all does in one pass.
  EXPECT_EQ(apply(normalize(unroll_loop_here())), apply(try_all(unroll_loop_here())));
}

TEST(StmtTraversal, UntouchedChildrenStayShared) {
  Stmt nest = parse_stmt(kNest, {}, {buffer_a()});
  RewriteResult<Stmt> r = top_down(seq(is_loop("k"), unroll_loop_here()))(nest);
  ASSERT_TRUE(r.ok());
  const auto* before = nest.as<ForNode>()->body.as<SeqNode>();
  const auto* after = r.program().as<ForNode>()->body.as<SeqNode>();
  EXPECT_TRUE(after->stmts[0].same_as(before->stmts[0]));
  EXPECT_FALSE(after->stmts[1].same_as(before->stmts[1]));
  // A strategy that changes nothing returns the very same tree.
  RewriteResult<Stmt> same = try_all(is_loop("nope"))(nest);
  ASSERT_TRUE(same.ok());
  EXPECT_TRUE(same.program().same_as(nest));
}

TEST(StmtTraversal, Predicates) {
  Stmt inner = parse_stmt("A[i, j] = 0.0f", {Var("i"), Var("j")}, {buffer_a()});
  // Free loop variables compare by identity, so contains looks for a fresh i, j and fails...
  EXPECT_EQ(apply(contains(inner)).substr(0, 14), "fail: contains");
  // ...while a statement cut from the tree itself is found.
  Stmt nest = parse_stmt(kNest, {}, {buffer_a()});
  Stmt j_loop = nest.as<ForNode>()->body.as<SeqNode>()->stmts[0];
  EXPECT_TRUE(contains(j_loop)(nest).ok());
  EXPECT_TRUE(not_(contains(j_loop))(j_loop.as<ForNode>()->body).ok());
}

TEST(StmtTraversal, InlineUnitLoopInProgramBody) {
  Program p = parse_program(R"(program p(A: float32[4, 8]) -> (B: float32[4, 8]) {
  for y in 0..4 {
    for vy in (y)..+1 {
      B[vy, 0] = A[vy, 0]
    }
    for x in 0..1 {
      B[y, x + 1] = A[y, x]
    }
  }
}
)");
  Strategy<Program> s = body(normalize(inline_unit_loop()));
  EXPECT_EQ(s.text(), "body(normalize(inline_unit_loop))");
  RewriteResult<Program> r = s(p);
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(print_program(r.program()), R"(program p(A: float32[4, 8]) -> (B: float32[4, 8]) {
  for y in 0..4 {
    B[y, 0] = A[y, 0]
    B[y, 1] = A[y, 0]
  }
}
)");
  RewriteResult<Program> none = body(top_down(inline_unit_loop()))(r.program());
  EXPECT_EQ(none.message(), "top_down(inline_unit_loop): inline_unit_loop applies nowhere");
}

}  // namespace
}  // namespace tessera
