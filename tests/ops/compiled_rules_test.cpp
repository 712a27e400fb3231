// Rewritten programs compiled to C and run: every rule on every operator against the naive
// reference, so that code generation of each loop kind is checked on real rule output.
#include <gtest/gtest.h>

#include <random>

#include "ops/evaluate.h"
#include "schedule/loop_tools.h"
#include "schedule/strategy_parser.h"

namespace tessera {
namespace {

void expect_compiled_correct(const std::string& workload, const std::string& strategy) {
  SCOPED_TRACE(workload + " with " + strategy);
  OpInstance op = instantiate(parse_workload(workload));
  RewriteResult<Program> r = parse_strategy(strategy)(op.program);
  ASSERT_TRUE(r.ok()) << r.message();
  EvaluateParams params;
  params.time = false;
  params.threads = 2;
  Evaluation ev = evaluate(op, r.program(), params);
  EXPECT_TRUE(ev.checked);
  EXPECT_TRUE(ev.correct) << ev.mismatch << "\n" << ev.code;
}

TEST(CompiledRules, EveryRuleOnEveryOperator) {
  const std::pair<const char*, const char*> cases[] = {
      {"matmul:M=13,N=20,K=5", "id"},
      {"matmul:M=13,N=20,K=5",
       "split(i, 4) ; split(j, 16) ; reorder(i.outer, j.outer, k, i.inner, j.inner) ; "
       "vectorize(j.inner) ; parallel(i.outer)"},
      {"matmul:M=16,N=64,K=9",
       "split(i, 4) ; split(j, 32) ; split(j.inner, 16) ; split(k, 4) ; "
       "reorder(i.outer, j.outer, k.outer, k.inner, i.inner, j.inner.outer, j.inner.inner) ; "
       "vectorize(j.inner.inner) ; unroll(j.inner.outer) ; unroll(i.inner) ; unroll(k.inner) ; "
       "parallel(i.outer)"},
      {"matmul:M=6,N=7,K=3",
       "fuse(i, j) ; parallel(i.j.fused) ; fuse(i.init, j.init) ; vectorize(i.init.j.init.fused)"},
      {"matmul:M=1,N=1,K=1", "split(i, 4) ; vectorize(j.init) ; parallel(i.outer) ; unroll(k)"},
      {"conv2d:N=1,C=3,H=9,W=9,O=4,K=3,S=2,P=1",
       "split(x, 4) ; reorder(x.outer, rc, ry, rx, x.inner) ; vectorize(x.inner) ; parallel(o) ; "
       "vectorize(w)"},
      {"conv2d:N=2,C=3,H=6,W=5,O=4,K=3,S=1,P=0",
       "fuse(n, o) ; parallel(n.o.fused) ; unroll(rx) ; unroll(ry)"},
      {"conv2d:N=1,C=4,H=8,W=8,O=8,K=1,S=1,P=0",
       "split(o, 4) ; reorder(n, o.outer, y, rc, ry, rx, o.inner, x) ; unroll(o.inner) ; "
       "vectorize(x) ; parallel(o.outer)"},
      {"conv2d_bias_relu:N=1,C=3,H=6,W=6,O=4,K=3,S=1,P=1",
       "split(conv.x, 2) ; reorder(conv.x.outer, rc, ry, rx, conv.x.inner) ; "
       "vectorize(conv.x.inner) ; "
       "parallel(conv.o) ; fuse(i, j) ; parallel(i.j.fused) ; vectorize(l) ; "
       "vectorize(bias_add.x)"},
      {"add:M=5,N=33", "split(j, 16) ; vectorize(j.inner) ; parallel(i) ; unroll(j.outer)"},
      {"relu:M=8,N=24",
       "fuse(i, j) ; split(i.j.fused, 16) ; parallel(i.j.fused.outer) ; "
       "vectorize(i.j.fused.inner)"},
  };
  for (const auto& [w, s] : cases) expect_compiled_correct(w, s);
}

// Seeded random compositions, compiled: each applied sequence must still match the reference.
TEST(CompiledRules, RandomCompositions) {
  std::mt19937 rng(7);
  const char* workloads[] = {"matmul:M=9,N=16,K=5", "conv2d:N=1,C=2,H=6,W=6,O=3,K=3,S=2,P=1",
                             "add:M=3,N=17"};
  for (int trial = 0; trial < 12; ++trial) {
    std::string workload = workloads[trial % 3];
    OpInstance op = instantiate(parse_workload(workload));
    Program p = op.program;
    std::string applied = "id";
    for (int step = 0; step < 6; ++step) {
      std::vector<std::string> loops = loop_names(p);
      auto pick = [&] { return loops[rng() % loops.size()]; };
      ProgramStrategy s = id<Program>();
      switch (rng() % 5) {
        case 0:
          s = split(pick(), 2 + rng() % 7);
          break;
        case 1:
          s = reorder({pick(), pick()});
          break;
        case 2:
          s = vectorize(pick());
          break;
        case 3:
          s = unroll(pick());
          break;
        case 4:
          s = parallel(pick());
          break;
      }
      RewriteResult<Program> r = s(p);
      if (!r) continue;
      p = r.program();
      applied += " ; " + s.text();
    }
    expect_compiled_correct(workload, applied);
  }
}

}  // namespace
}  // namespace tessera
