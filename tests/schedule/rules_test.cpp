#include "schedule/rules.h"

#include <gtest/gtest.h>

#include <map>
#include <random>

#include "schedule/loop_tools.h"
#include "schedule/random_rules.h"
#include "schedule/strategy_parser.h"
#include "test_util.h"
#include "tir/printer.h"

namespace tessera {
namespace {

struct Case {
  const char* workload;
  const char* strategy;
};

// Applies the strategy and checks the result against the interpreter on the original program
// and against the operator's hand-written reference.
void expect_correct(const Case& c) {
  SCOPED_TRACE(std::string(c.workload) + " with " + c.strategy);
  OpInstance op = instantiate(parse_workload(c.workload));
  RewriteResult<Program> r = parse_strategy(c.strategy)(op.program);
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_TRUE(testing::interpreter_matches_reference(op, r.program(), 11));
  auto before = testing::random_args(op.program, 5);
  auto after = before;
  interpret(op.program, before);
  interpret(r.program(), after);
  EXPECT_TRUE(testing::outputs_close(after, before, op.program.outputs.size(), 1e-5));
}

TEST(Rules, EveryRuleOnEveryOperator) {
  const Case cases[] = {
      {"matmul:M=12,N=16,K=5", "split(i, 4)"},
      {"matmul:M=13,N=16,K=5", "split(i, 4)"},  // non-dividing
      {"matmul:M=13,N=16,K=5", "split(i, 1)"},
      {"matmul:M=13,N=16,K=5", "split(i, 13)"},
      {"matmul:M=5,N=16,K=5", "split(i, 8)"},  // factor above the extent
      {"matmul:M=13,N=16,K=5", "reorder(k, j, i)"},
      {"matmul:M=13,N=17,K=5",
       "split(i, 4) ; split(j, 8) ; reorder(i.outer, j.outer, k, i.inner, j.inner)"},
      {"matmul:M=6,N=7,K=3", "fuse(i, j)"},
      {"matmul:M=6,N=7,K=3", "fuse(i.init, j.init) ; split(i.init.j.init.fused, 5)"},
      {"matmul:M=6,N=16,K=3", "vectorize(j.init)"},
      {"matmul:M=6,N=16,K=3", "reorder(i, k, j) ; vectorize(j)"},
      {"matmul:M=6,N=7,K=3", "unroll(k) ; unroll(j.init)"},
      {"matmul:M=6,N=7,K=3", "parallel(i) ; parallel(i.init)"},
      {"matmul:M=6,N=7,K=3", "fuse(i, j) ; parallel(i.j.fused)"},
      {"matmul:M=1,N=1,K=1",
       "split(i, 4) ; split(k, 2) ; reorder(i.outer, i.inner, k.outer, k.inner, j) ; vectorize(j) "
       "; parallel(i.outer)"},
      {"matmul:M=1,N=9,K=1",
       "split(j, 4) ; reorder(j.outer, i, k, j.inner) ; vectorize(j.inner) ; parallel(j.outer)"},
      {"matmul:M=20,N=24,K=9",
       "split(i, 8) ; split(j, 8) ; split(k, 4) ; reorder(i.outer, j.outer, k.outer, k.inner, "
       "i.inner, j.inner) ; "
       "vectorize(j.inner) ; unroll(i.inner) ; parallel(i.outer)"},
      {"conv2d:N=1,C=3,H=7,W=7,O=4,K=3,S=1,P=1",
       "split(o, 2) ; reorder(o.outer, y, x, rc, ry, rx, o.inner)"},
      {"conv2d:N=1,C=3,H=7,W=7,O=4,K=3,S=2,P=1",
       "split(x, 3) ; reorder(x.outer, rc, ry, rx, x.inner) ; vectorize(x.inner) ; parallel(o)"},
      {"conv2d:N=2,C=3,H=6,W=5,O=4,K=3,S=1,P=0", "fuse(n, o) ; parallel(n.o.fused) ; unroll(rx)"},
      {"conv2d:N=1,C=3,H=7,W=7,O=4,K=3,S=1,P=1", "fuse(c, h) ; parallel(c.h.fused) ; vectorize(w)"},
      {"conv2d_bias_relu:N=1,C=3,H=6,W=6,O=4,K=3,S=1,P=1",
       "split(conv.x, 4) ; reorder(conv.x.outer, rc, ry, rx, conv.x.inner) ; "
       "vectorize(conv.x.inner) ; parallel(conv.o) ; fuse(i, j) ; "
       "parallel(i.j.fused) ; vectorize(bias_add.x)"},
      // A fused loop over a split dimension and another: (f / 3) * 2 + oc.inner and f % 3
      // index different dimensions, so iterations write disjoint blocks.
      {"conv2d_nchwc:N=1,C=8,H=3,W=5,O=16,K=3,S=1,P=1,CB=4",
       "split(oc, 2) ; reorder(oc.outer, y, oc.inner) ; fuse(oc.outer, y) ; "
       "parallel(oc.outer.y.fused) ; parallel(c)"},
      {"add:M=5,N=33", "split(j, 16) ; vectorize(j.inner) ; parallel(i) ; unroll(j.outer)"},
      {"add:M=1,N=1", "fuse(i, j) ; vectorize(i.j.fused)"},
      {"relu:M=8,N=8",
       "fuse(i, j) ; split(i.j.fused, 16) ; parallel(i.j.fused.outer) ; "
       "vectorize(i.j.fused.inner)"},
  };
  for (const Case& c : cases) expect_correct(c);
}

struct Refusal {
  const char* workload;
  const char* strategy;
  const char* message;
};

TEST(Rules, InapplicableRulesSayWhichRuleAndWhy) {
  const Refusal refusals[] = {
      {"matmul:M=8,N=8,K=8", "split(q, 4)", "split(q, 4): no loop named q"},
      {"matmul:M=8,N=8,K=8", "split(i, 0)", "split(i, 0): factor 0 is not positive"},
      {"matmul:M=8,N=8,K=8", "split(i, 2) ; split(i.outer, 2) ; split(i, 2)",
       "split(i, 2): no loop named i"},
      {"matmul:M=8,N=8,K=8", "vectorize(k)",
       "vectorize(k): every iteration of k writes the same elements of C (a loop-carried "
       "dependence)"},
      {"matmul:M=8,N=8,K=8", "vectorize(i)", "vectorize(i): loop i is not innermost"},
      {"matmul:M=8,N=8,K=8", "parallel(k)",
       "parallel(k): every iteration of k writes the same elements of C (a loop-carried "
       "dependence)"},
      {"matmul:M=8,N=8,K=8", "parallel(i) ; parallel(j)",
       "parallel(j): loop j is inside parallel loop i"},
      {"matmul:M=8,N=8,K=8", "parallel(j) ; parallel(i)",
       "parallel(i): loop i contains parallel loop j"},
      {"matmul:M=8,N=8,K=8", "reorder(i, i.init)",
       "reorder(i, i.init): loops i, i.init are not in one perfect nest"},
      {"matmul:M=8,N=8,K=8", "reorder(i, i)", "reorder(i, i): a loop is named twice"},
      {"matmul:M=8,N=8,K=8", "fuse(i, k)",
       "fuse(i, k): loop k is not the only statement in the body of i"},
      // i and k fused: values of k share their element of C, whatever i is.
      {"matmul:M=8,N=8,K=8", "reorder(i, k, j) ; fuse(i, k) ; parallel(i.k.fused)",
       "parallel(i.k.fused): cannot prove that iterations of i.k.fused write distinct elements of "
       "C"},
      {"matmul:M=8,N=8,K=8", "vectorize(j.init) ; split(j.init, 4)",
       "split(j.init, 4): loop j.init is vectorized; split before annotating"},
      {"matmul:M=8,N=8,K=8", "unroll(j) ; unroll(j)", "unroll(j): loop j is already unrolled"},
      {"matmul:M=8,N=8,K=8", "reverse(k)",
       "reverse(k): every iteration of k writes the same elements of C"},
      {"matmul:M=8,N=8,K=8", "parallel(i) ; reverse(i)", "reverse(i): loop i is parallel"},
      {"matmul:M=8,N=8,K=8", "reverse(q)", "reverse(q): "},
      {"conv2d:N=1,C=2,H=5,W=5,O=2,K=3,S=1,P=1", "split(n, 2)", "split(n, 2): no loop named n"},
      {"conv2d:N=1,C=2,H=5,W=5,O=2,K=3,S=1,P=1", "reorder(h, y)",
       "reorder(h, y): loops h, y are not in one perfect nest"},
  };
  for (const Refusal& r : refusals) {
    SCOPED_TRACE(r.strategy);
    OpInstance op = instantiate(parse_workload(r.workload));
    RewriteResult<Program> res = parse_strategy(r.strategy)(op.program);
    ASSERT_FALSE(res.ok());
    EXPECT_EQ(res.kind(), RewriteResult<Program>::Kind::kNotApplicable);
    EXPECT_EQ(res.message().substr(0, std::string(r.message).size()), r.message) << res.message();
  }
}

TEST(Rules, NonDividingSplitGuardsAndDividingSplitDoesNot) {
  OpInstance op = instantiate(parse_workload("add:M=1,N=10"));
  std::string guarded = print_program(split("j", 4)(op.program).program());
  EXPECT_NE(guarded.find("if (j.outer*4 + j.inner < 10)"), std::string::npos) << guarded;
  EXPECT_NE(guarded.find("for j.outer in 0..3"), std::string::npos);
  std::string exact = print_program(split("j", 5)(op.program).program());
  EXPECT_EQ(exact.find("if"), std::string::npos) << exact;
}

// reverse mirrors the loop's variable; a parallel loop splits into a parallel outer part and a
// serial inner one, which reverse can then run backwards within each thread's block.
TEST(Rules, ReverseRunsBackwardsAndAParallelLoopSplitsKeepingItsOuterPartParallel) {
  OpInstance op = instantiate(parse_workload("add:M=2,N=10"));
  std::string text = print_program(parse_strategy("reverse(j)")(op.program).program());
  EXPECT_NE(text.find("C[i, 9 - j]"), std::string::npos) << text;
  text = print_program(parse_strategy("parallel(j) ; split(j, 4)")(op.program).program());
  EXPECT_NE(text.find("parallel for j.outer in 0..3"), std::string::npos) << text;
  EXPECT_NE(text.find("  for j.inner in 0..4"), std::string::npos) << text;
  expect_correct({"add:M=2,N=10", "reverse(j)"});
  expect_correct({"add:M=2,N=10", "parallel(j) ; split(j, 4) ; reverse(j.inner)"});
  expect_correct({"matmul:M=8,N=12,K=5", "parallel(i) ; split(i, 3) ; reverse(i.inner)"});
  expect_correct({"matmul:M=8,N=12,K=5", "split(j, 5) ; reverse(j.outer) ; reverse(j.inner)"});
}

TEST(Rules, SplitThenFuseIndicesStayClean) {
  OpInstance op = instantiate(parse_workload("add:M=4,N=8"));
  Program p = parse_strategy("fuse(i, j) ; split(i.j.fused, 8)")(op.program).program();
  // fused = outer*8 + inner over an 8-wide row: i = outer, j = inner.
  EXPECT_NE(print_program(p).find("C[i.j.fused.outer, i.j.fused.inner]"), std::string::npos)
      << print_program(p);
}

// A few hundred random compositions of all rules on random loops and buffers: each step either
// refuses or keeps the operator's result (checked with the interpreter against the reference).
TEST(Rules, RandomCompositionsPreserveSemantics) {
  std::mt19937 rng(2024);
  const char* workloads[] = {"matmul:M=7,N=12,K=5", "conv2d:N=1,C=2,H=6,W=6,O=3,K=3,S=2,P=1",
                             "add:M=3,N=10", "conv2d_bias_relu:N=1,C=2,H=4,W=5,O=2,K=3,S=1,P=1",
                             "matmul:M=1,N=9,K=4"};
  int applied = 0, refused = 0;
  std::map<std::string, int> applied_by_rule;
  for (int trial = 0; trial < 300; ++trial) {
    OpInstance op = instantiate(parse_workload(workloads[trial % 5]));
    Program p = op.program;
    std::string history = "id";
    for (int step = 0; step < 6; ++step) {
      ProgramStrategy s = random_rule(p, rng);
      RewriteResult<Program> r = s(p);
      ASSERT_NE(r.kind(), RewriteResult<Program>::Kind::kInternalError)
          << history << " ; " << r.message();
      if (!r) {
        ++refused;
        continue;
      }
      history += " ; " + s.text();
      p = r.program();
      ++applied;
      ++applied_by_rule[s.text().substr(0, s.text().find('('))];
    }
    ASSERT_TRUE(testing::interpreter_matches_reference(op, p, trial))
        << workloads[trial % 5] << ": " << history;
  }
  EXPECT_GT(applied, 500);
  EXPECT_GT(refused, 100);
  for (const char* rule : {"split", "reorder", "vectorize", "unroll", "parallel", "cache_write",
                           "cache_read", "pack", "gather", "prefetch"})
    EXPECT_GT(applied_by_rule[rule], 0) << rule << " never applied";
}

}  // namespace
}  // namespace tessera
