// compute_at, compute_inline, cache_write, cache_read, pack, locations and the derived strategies:
// shape of the result, numeric checks (interpreter and compiled), and refusals naming the rule.
#include <gtest/gtest.h>

#include <limits>
#include <set>

#include "ops/evaluate.h"
#include "schedule/library.h"
#include "schedule/location.h"
#include "schedule/rules.h"
#include "schedule/stage_tools.h"
#include "schedule/strategy_parser.h"
#include "test_util.h"
#include "tir/parser.h"
#include "tir/printer.h"
#include "tir/simplify.h"
#include "tir/stmt_functor.h"

namespace tessera {
namespace {

Program apply_ok(const OpInstance& op, const std::string& strategy) {
  RewriteResult<Program> r = parse_strategy(strategy)(op.program);
  EXPECT_TRUE(r.ok()) << r.message();
  return r ? r.program() : op.program;
}

void expect_correct_everywhere(const char* workload, const std::string& strategy) {
  SCOPED_TRACE(std::string(workload) + " with " + strategy);
  OpInstance op = instantiate(parse_workload(workload));
  Program p = apply_ok(op, strategy);
  EXPECT_TRUE(testing::interpreter_matches_reference(op, p, 3));
  EvaluateParams params;
  params.time = false;
  Evaluation ev = evaluate(op, p, params);
  EXPECT_TRUE(ev.correct) << ev.mismatch << "\n" << ev.code;
}

// The strategy does not apply to the program, and its message says `message`.
void expect_refused(const Program& program, const std::string& strategy,
                    const std::string& message) {
  RewriteResult<Program> r = parse_strategy(strategy)(program);
  ASSERT_FALSE(r.ok()) << strategy;
  EXPECT_NE(r.message().find(message), std::string::npos) << strategy << ": " << r.message();
}

TEST(StageRules, ComputeAtComputesOnlyTheRowsOneIterationReads) {
  OpInstance op = instantiate(parse_workload("conv2d:N=1,C=2,H=6,W=6,O=2,K=3,S=1,P=1"));
  std::string text = print_program(apply_ok(op, "compute_at(pad, y)"));
  EXPECT_NE(text.find("for h in (y)..+3"), std::string::npos) << text;
  // The pad nest now sits inside y, before x.
  EXPECT_LT(text.find("for y in 0..6"), text.find("for h in (y)..+3"));
  expect_correct_everywhere("conv2d:N=1,C=2,H=6,W=6,O=2,K=3,S=1,P=1", "compute_at(pad, y)");
  expect_correct_everywhere("conv2d:N=1,C=2,H=9,W=7,O=3,K=3,S=2,P=1",
                            "compute_at(pad, x) ; parallel(o)");
  expect_correct_everywhere("conv2d:N=2,C=2,H=5,W=5,O=2,K=3,S=1,P=2",
                            "split(y, 2) ; compute_at(pad, y.outer)");
}

// A reduction moves with its init: both nests over the box one iteration reads, the reduction
// loop whole inside. Consumers first, so each producer lands in front of its readers; a stage
// already computed at the loop (a loop inside with a variable start) is part of the box.
TEST(StageRules, ComputeAtMovesAReductionWithItsInit) {
  const char* w = "softmax:M=6,N=20";
  OpInstance op = instantiate(parse_workload(w));
  std::string text =
      print_program(apply_ok(op, "split(softmax.i, 2) ; compute_at(exp_sum, softmax.i.outer)"));
  size_t last = 0;
  for (const char* piece :
       {"for softmax.i.outer in 0..3 {", "alloc exp_sum: float32[2]",
        "for exp_sum.i.init in (softmax.i.outer*2)..+2 {",
        "exp_sum[exp_sum.i.init - softmax.i.outer*2] = 0.0f",
        "for exp_sum.i in (softmax.i.outer*2)..+2 {", "for exp_sum.k in 0..20"}) {
    size_t where = text.find(piece);
    ASSERT_NE(where, std::string::npos) << piece << " not in\n" << text;
    EXPECT_GT(where, last) << piece << " not after the previous piece in\n" << text;
    last = where;
  }
  const std::string chain =
      "split(softmax.i, 2) ; compute_at(exp_sum, softmax.i.outer) ; "
      "compute_at(row_exp, softmax.i.outer) ; compute_at(row_max, softmax.i.outer)";
  expect_correct_everywhere(w, chain);
  // rfactor then combines the partials inside the tile, where the stage is allocated.
  expect_correct_everywhere(w, chain +
                                   " ; split(exp_sum.k, 8) ; rfactor(exp_sum, exp_sum.k.inner) ; "
                                   "vectorize(exp_sum.k.inner) ; parallel(softmax.i.outer)");
  expect_correct_everywhere("conv2d_bias_relu:N=1,C=3,H=6,W=7,O=4,K=3,S=1,P=1",
                            "compute_at(conv, bias_add.o) ; compute_at(pad, bias_add.o)");
  // With pad computed at one of conv's own loops, conv's update is no longer loops over its
  // dimensions down to the reduction (pad's allocation sits between): refused, not mangled.
  expect_refused(
      instantiate(parse_workload("conv2d_bias_relu:N=1,C=3,H=6,W=7,O=4,K=3,S=1,P=1")).program,
      "compute_at(pad, conv.y) ; compute_at(conv, bias_add.o)",
      "the update of conv does not start with one loop per dimension of it");
  expect_refused(op.program, "compute_at(row_exp, softmax.i)",
                 "row_exp is also read outside softmax.i");
  // After rfactor the partials are written after the init nest: moving the init would read them
  // before they exist.
  expect_refused(op.program,
                 "split(exp_sum.k, 4) ; rfactor(exp_sum, exp_sum.k.inner) ; "
                 "compute_at(exp_sum, softmax.i)",
                 "stage exp_sum reads exp_sum.rf, which the program writes after exp_sum runs");
}

TEST(StageRules, ComputeInlineReplacesReadsByTheDefinition) {
  OpInstance op = instantiate(parse_workload("conv2d:N=1,C=2,H=6,W=6,O=2,K=3,S=1,P=1"));
  std::string text = print_program(apply_ok(op, "compute_inline(pad)"));
  EXPECT_EQ(text.find("alloc pad"), std::string::npos) << text;
  EXPECT_NE(text.find("select(y + ry >= 1"), std::string::npos) << text;
  expect_correct_everywhere("conv2d:N=1,C=2,H=6,W=6,O=2,K=3,S=2,P=1",
                            "compute_inline(pad) ; parallel(o)");
  expect_correct_everywhere("conv2d_bias_relu:N=1,C=2,H=5,W=5,O=3,K=3,S=1,P=1",
                            "compute_inline(pad) ; compute_inline(bias_add)");
}

TEST(StageRules, CacheWriteAccumulatesABlockLocally) {
  OpInstance op = instantiate(parse_workload("matmul:M=16,N=16,K=8"));
  std::string text = print_program(apply_ok(op, "tile(i, j, 8, 8) ; cache_write(C, j.outer)"));
  EXPECT_NE(text.find("alloc C.local: float32[8, 8]"), std::string::npos) << text;
  EXPECT_NE(text.find("C.local[i.inner, j.inner] = C.local[i.inner, j.inner] + "),
            std::string::npos)
      << text;
  EXPECT_NE(
      text.find("C[i.outer*8 + C.store.0, j.outer*8 + C.store.1] = C.local[C.store.0, C.store.1]"),
      std::string::npos)
      << text;
  expect_correct_everywhere("matmul:M=20,N=24,K=12",
                            "tile(i, j, 8, 8) ; reorder(i.inner, k, j.inner) ; cache_write(C, "
                            "j.outer) ; vectorize(j.inner) ; "
                            "parallel(i.outer)");
  expect_correct_everywhere("conv2d:N=1,C=2,H=6,W=6,O=4,K=3,S=1,P=1",
                            "split(o, 2) ; cache_write(conv, o.outer) ; parallel(o.outer)");
}

// A block that sees the whole reduction starts from the init value; one that sees only part of it
// (a reduction loop outside the cached loop) must start from what earlier blocks accumulated.
TEST(StageRules, CacheWriteStartsFromTheInitValueOnlyWhenNoEarlierBlockTouchedTheElements) {
  OpInstance op = instantiate(parse_workload("matmul:M=16,N=16,K=8"));
  std::string whole = print_program(apply_ok(op, "tile(i, j, 8, 8) ; cache_write(C, j.outer)"));
  EXPECT_NE(whole.find("C.local[C.load.0, C.load.1] = 0.0f"), std::string::npos) << whole;
  std::string partial = "split(k, 4) ; reorder(i, k.outer, j, k.inner) ; cache_write(C, j)";
  std::string text = print_program(apply_ok(op, partial));
  EXPECT_EQ(text.find("= 0.0f\n", text.find("alloc C.local")), std::string::npos) << text;
  EXPECT_NE(text.find("C.local[C.load.0, C.load.1] = C[i + C.load.0, j + C.load.1]"),
            std::string::npos)
      << text;
  expect_correct_everywhere("matmul:M=12,N=10,K=8", partial);
  expect_correct_everywhere("matmul:M=12,N=10,K=8",
                            "split(k, 4) ; reorder(k.outer, i, j, k.inner) ; "
                            "split(i, 4) ; cache_write(C, i.outer)");
  expect_correct_everywhere("conv2d_bias_relu:N=1,C=3,H=6,W=6,O=4,K=3,S=1,P=1",
                            "split(conv.o, 2) ; cache_write(conv, conv.o.outer)");
}

TEST(StageRules, CacheWriteLayoutPutsTheVectorDimensionInnermost) {
  const char* w = "conv2d:N=1,C=3,H=6,W=6,O=8,K=3,S=1,P=1";
  std::string strategy =
      "split(o, 4) ; split(x, 3) ; reorder(conv.n, o.outer, y, x.outer, rc, ry, rx, x.inner, "
      "o.inner) ; pack(weight, 0, 4) ; cache_write(conv, x.outer, 0, 2, 3, 1) ; "
      "vectorize(o.inner) ; unroll(x.inner)";
  OpInstance op = instantiate(parse_workload(w));
  std::string text = print_program(apply_ok(op, strategy));
  // The [n][o][y][x] block is held as [n][y][x][o]: o.inner walks it with unit stride.
  EXPECT_NE(text.find("alloc conv.local: float32[1, 1, 3, 4]"), std::string::npos) << text;
  EXPECT_NE(text.find("conv.local[0, 0, x.inner, o.inner] = conv.local[0, 0, x.inner, o.inner]"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("weight.packed[o.outer, rc, ry, rx, o.inner]"), std::string::npos) << text;
  expect_correct_everywhere(w, strategy);
  expect_correct_everywhere("matmul:M=12,N=10,K=5",
                            "split(i, 4) ; cache_write(C, i.outer, 1, 0) ; parallel(i.outer)");
  // The text form keeps the layout.
  EXPECT_EQ(parse_strategy("cache_write(conv, y, 0, 2, 3, 1)").text(),
            "cache_write(conv, y, 0, 2, 3, 1)");
  for (const char* bad : {"cache_write(conv, y, 0, 2, 3)", "cache_write(conv, y, 0, 2, 3, 3)",
                          "cache_write(conv, y, 0, 2, 3, 4)"}) {
    RewriteResult<Program> r = parse_strategy(bad)(op.program);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.message().find("the layout must be a permutation of the 4 dimensions of conv"),
              std::string::npos)
        << r.message();
  }
}

// An epilogue computed per output block: the relu nest follows each block's write-back, over
// that block only; it is refused where the block's values are not final yet.
TEST(StageRules, ReverseComputeAtRunsTheEpilogueOverEachFinishedBlock) {
  const char* w = "conv2d_bias_relu:N=1,C=3,H=6,W=7,O=6,K=3,S=1,P=1";
  std::string strategy =
      "split(conv.o, 4) ; split(conv.x, 3) ; reorder(conv.n, conv.o.outer, conv.y, conv.x.outer, "
      "rc, ry, rx, conv.x.inner, conv.o.inner) ; cache_write(conv, conv.x.outer) ; "
      "compute_inline(bias_add) ; reverse_compute_at(relu, conv.x.outer)";
  OpInstance op = instantiate(parse_workload(w));
  std::string text = print_program(apply_ok(op, strategy));
  // The relu nest sits after the write-back inside conv.x.outer, over the 4 x 1 x 3 block.
  size_t at = text.find("for conv.x.outer in");
  size_t write_back = text.find("conv.local[", text.find("conv[", at));
  size_t epilogue = text.find("relu[", at);
  ASSERT_NE(epilogue, std::string::npos) << text;
  EXPECT_LT(write_back, epilogue) << text;
  EXPECT_NE(text.find("relu[conv.n + i, conv.o.outer*4 + j, conv.y + k, conv.x.outer*3 + l]"),
            std::string::npos)
      << text;
  expect_correct_everywhere(w, strategy);
  expect_correct_everywhere(w, strategy + " ; parallel(conv.o.outer)");
  // Moved into a loop already on threads: its blocks are disjoint, so it stays parallel.
  expect_correct_everywhere(w,
                            "split(conv.o, 4) ; cache_write(conv, conv.o.outer) ; "
                            "parallel(conv.o.outer) ; compute_inline(bias_add) ; "
                            "reverse_compute_at(relu, conv.o.outer)");
  expect_correct_everywhere("conv2d_bias_relu:N=1,C=2,H=5,W=5,O=3,K=3,S=2,P=1",
                            "split(conv.o, 2) ; cache_write(conv, conv.o.outer) ; "
                            "reverse_compute_at(bias_add, conv.o.outer) ; "
                            "reverse_compute_at(relu, conv.o.outer)");

  // Without a write cache, and with part of the reduction outside the loop, each block is
  // recomputed after every partial update: wasteful, but the last computation sees final values.
  expect_correct_everywhere(w, "split(conv.o, 4) ; reverse_compute_at(bias_add, conv.o.outer)");
  expect_correct_everywhere(w,
                            "split(rc, 2) ; reorder(conv.n, rc.outer, conv.o, conv.y, conv.x, "
                            "rc.inner) ; reverse_compute_at(bias_add, conv.y)");

  const std::pair<std::string, std::string> refusals[] = {
      // The write-back of the block happens outside rc: nothing final inside it.
      {"cache_write(conv, conv.x) ; reverse_compute_at(bias_add, rc)",
       "stage bias_add reads conv, which is written outside rc"},
      {"split(conv.o, 2) ; cache_write(conv, conv.o.outer) ; reverse_compute_at(relu, "
       "conv.o.outer)",
       "stage relu reads bias_add, which is written outside conv.o.outer"},
      {"reverse_compute_at(relu, ry)", "stage relu reads bias_add, which is written outside ry"},
  };
  for (const auto& [bad, message] : refusals) expect_refused(op.program, bad, message);
}

// gather with a convolution's loops is im2col: the padded input copied into a [C*K*K] x [OH*OW]
// matrix, after which the fused loops read it as one.
TEST(StageRules, GatherMaterializesTheReadAsIm2col) {
  const char* w = "conv2d:N=1,C=2,H=6,W=7,O=3,K=3,S=2,P=1";
  std::string strategy = "gather(pad, conv.n, rc, ry, rx, y, x)";
  OpInstance op = instantiate(parse_workload(w));
  std::string text = print_program(apply_ok(op, strategy));
  EXPECT_NE(text.find("alloc pad.gathered: float32[1, 2, 3, 3, 3, 4]"), std::string::npos) << text;
  EXPECT_NE(text.find("pad.gathered[conv.n, rc, ry, rx, y, x]"), std::string::npos) << text;
  EXPECT_NE(text.find("= pad[pad.gather.0, pad.gather.1, pad.gather.4*2 + pad.gather.2, "
                      "pad.gather.5*2 + pad.gather.3]"),
            std::string::npos)
      << text;
  expect_correct_everywhere(w, strategy);
  expect_correct_everywhere(w, strategy +
                                   " ; fuse(y, x) ; fuse(rc, ry) ; fuse(rc.ry.fused, rx) ; "
                                   "split(y.x.fused, 4) ; reorder(conv.n, o, y.x.fused.outer, "
                                   "rc.ry.fused.rx.fused, y.x.fused.inner) ; "
                                   "vectorize(y.x.fused.inner) ; parallel(pad.gather.1)");
  expect_correct_everywhere("conv2d:N=1,C=3,H=5,W=6,O=2,K=1,S=2,P=0",
                            "gather(data, n, rc, ry, rx, y, x) ; parallel(o)");
  // Under the guard of a partial tile: the copy must not read past the input.
  expect_correct_everywhere("conv2d:N=1,C=2,H=7,W=7,O=3,K=3,S=1,P=0",
                            "split(x, 2) ; gather(data, n, rc, ry, rx, y, x.outer, x.inner)");

  const std::pair<std::string, std::string> refusals[] = {
      {"gather(pad, conv.n, rc, ry, rx, y)",
       "the read of pad depends on loop x, which is not gathered"},
      {"gather(pad, c)", "loop c is not around the read of pad"},
      {"gather(pad, rc, rc)", "loop rc is named twice"},
      {"gather(nothing, rc)", "no buffer named nothing"},
  };
  for (const auto& [bad, message] : refusals) expect_refused(op.program, bad, message);
}

// merge_dims keeps every element's address; a fused pixel loop's (p / W, p % W) folds back into
// p, so a block of pixels becomes a box that cache_write can accumulate.
TEST(StageRules, MergeDimsFoldsAFusedLoopsIndicesBackIntoOne) {
  const char* w = "conv2d:N=1,C=3,H=5,W=6,O=4,K=1,S=1,P=0";
  OpInstance op = instantiate(parse_workload(w));
  std::string text = print_program(apply_ok(op, "fuse(y, x) ; merge_dims(conv, 2)"));
  EXPECT_NE(text.find("-> (conv: float32[1, 4, 30])"), std::string::npos) << text;
  EXPECT_NE(text.find("conv[n, o, y.x.fused] = conv[n, o, y.x.fused] + "), std::string::npos)
      << text;
  EXPECT_NE(text.find("conv[n.init, o.init, y.init*6 + x.init] = 0.0f"), std::string::npos) << text;
  std::string blocked = "fuse(y, x) ; split(y.x.fused, 8) ; cache_write(conv, y.x.fused.outer)";
  EXPECT_FALSE(parse_strategy(blocked)(op.program)) << "(p / 6, p % 6) is not a box";
  std::string merged =
      "fuse(y, x) ; merge_dims(conv, 2) ; split(y.x.fused, 8) ; "
      "cache_write(conv, y.x.fused.outer) ; parallel(o)";
  expect_correct_everywhere(w, merged);
  expect_correct_everywhere(w, "merge_dims(data, 1) ; merge_dims(conv, 0)");
  // An allocated intermediate: the padded input.
  expect_correct_everywhere("conv2d:N=1,C=2,H=5,W=5,O=3,K=3,S=1,P=1",
                            "merge_dims(pad, 2) ; merge_dims(pad, 1)");

  const std::pair<std::string, std::string> refusals[] = {
      {"merge_dims(nope, 0)", "no buffer named nope"},
      {"merge_dims(conv, 3)", "conv has 4 dimensions: there is no pair 3, 4 to merge"},
      {"merge_dims(conv, -1)", "no pair -1, 0"},
  };
  for (const auto& [bad, message] : refusals) expect_refused(op.program, bad, message);
}

// A write cache started from the initial value writes every block back whole; the init pass
// before it is then dead, and drop_init removes it only where that is proved.
TEST(StageRules, DropInitRemovesAnInitPassThatIsOverwrittenEverywhere) {
  OpInstance op = instantiate(parse_workload("matmul:M=16,N=16,K=8"));
  std::string cached = "tile(i, j, 8, 8) ; cache_write(C, j.outer)";
  EXPECT_NE(print_program(apply_ok(op, cached)).find("C[i.init, j.init] = 0.0f"),
            std::string::npos);
  std::string text = print_program(apply_ok(op, cached + " ; drop_init(C)"));
  EXPECT_EQ(text.find("i.init"), std::string::npos) << text;
  expect_correct_everywhere("matmul:M=16,N=16,K=8", cached + " ; drop_init(C)");
  // Partial tiles: the only guards are C's bounds.
  expect_correct_everywhere("matmul:M=20,N=12,K=5",
                            "tile(i, j, 8, 8) ; cache_write(C, j.outer) ; parallel(i.outer) ; "
                            "drop_init(C)");
  expect_correct_everywhere("conv2d:N=1,C=3,H=5,W=6,O=4,K=1,S=1,P=0",
                            "fuse(y, x) ; merge_dims(conv, 2) ; split(y.x.fused, 8) ; "
                            "cache_write(conv, y.x.fused.outer) ; drop_init(conv)");
  expect_correct_everywhere("conv2d:N=1,C=3,H=6,W=7,O=20,K=3,S=1,P=1",
                            "split(o, 16) ; split(x, 4) ; reorder(conv.n, o.outer, y, x.outer, rc, "
                            "ry, rx, x.inner, o.inner) ; cache_write(conv, x.outer, 0, 2, 3, 1) ; "
                            "drop_init(conv)");
  // The init nest inside the packed weights' and the padding's allocations.
  expect_correct_everywhere("conv2d:N=1,C=3,H=6,W=7,O=20,K=3,S=1,P=1",
                            "split(o, 16) ; split(x, 4) ; reorder(conv.n, o.outer, y, x.outer, rc, "
                            "ry, rx, x.inner, o.inner) ; pack(weight, 0, 16) ; "
                            "cache_write(conv, x.outer, 0, 2, 3, 1) ; parallel(o.outer) ; "
                            "drop_init(conv)");

  const std::pair<std::string, std::string> refusals[] = {
      {"drop_init(nope)", "no buffer named nope"},
      {"drop_init(C)", "C is read, so its initial values could be seen"},
      // k blocked outside the cache: each block is read back in, so C is read.
      {"tile(i, j, 8, 8) ; split(k, 4) ; reorder(k.outer, i.outer, j.outer) ; "
       "cache_write(C, j.outer) ; drop_init(C)",
       "C is read"},
      // Block loops fused after the cache index the write-back through div/mod: not proved.
      {"tile(i, j, 8, 8) ; cache_write(C, j.outer) ; fuse(i.outer, j.outer) ; drop_init(C)",
       "no later store provably writes every element of C (index "},
  };
  for (const auto& [bad, message] : refusals) expect_refused(op.program, bad, message);
  OpInstance fused =
      instantiate(parse_workload("conv2d_bias_relu:N=1,C=2,H=4,W=4,O=2,K=3,S=1,P=1"));
  expect_refused(fused.program, "drop_init(relu)", "does more than set it to one constant");
}

// The epilogue computed at the cached loop reads each block from the write cache: the
// intermediate buffer, its init pass and the copy-back go, whole tiles, partial ones and a
// transposed cache alike; anything else still reading the buffer keeps it.
TEST(StageRules, FuseWriteBackFeedsTheEpilogueFromTheWriteCache) {
  const char* w = "conv2d_nchwc:N=1,C=16,H=4,W=8,O=32,K=1,S=1,P=0,CB=16,BIAS=1,ACT=1";
  const std::string cached =
      "split(oc, 2) ; split(x, 4) ; reorder(n, y, oc.outer, x.outer, ic, ry, rx, ib, x.inner, "
      "oc.inner, ob) ; vectorize(ob) ; cache_write(conv, x.outer) ; "
      "reverse_compute_at(epilogue, x.outer)";
  OpInstance op = instantiate(parse_workload(w));
  std::string text = print_program(apply_ok(op, cached + " ; fuse_write_back(conv)"));
  EXPECT_EQ(text.find("alloc conv:"), std::string::npos) << text;
  EXPECT_EQ(text.find("conv["), std::string::npos) << text;
  EXPECT_NE(text.find("max(conv.local[en, ec, ey, ex, eb] + bias["), std::string::npos) << text;
  expect_correct_everywhere(w, cached + " ; fuse_write_back(conv) ; parallel(y)");
  // A partial last tile of columns (7 = 4 + 3) and a residual.
  expect_correct_everywhere(
      "conv2d_nchwc:N=1,C=16,H=3,W=7,O=16,K=3,S=1,P=1,CB=16,BIAS=1,RES=1,ACT=2",
      "split(x, 4) ; reorder(conv.n, oc, y, x.outer, ic, ry, rx, ib, x.inner, ob) ; "
      "cache_write(conv, x.outer) ; reverse_compute_at(epilogue, x.outer) ; "
      "fuse_write_back(conv) ; vectorize(eb)");
  // Depthwise, its padding read in place.
  expect_correct_everywhere(
      "depthwise_conv2d_nchwc:N=1,C=32,H=6,W=6,K=3,S=2,P=1,CB=16,BIAS=1,ACT=2",
      "split(x, 3) ; reorder(dwconv.n, dwconv.c, y, x.outer, ry, rx, x.inner, dwconv.b) ; "
      "compute_inline(pad) ; cache_write(dwconv, x.outer) ; "
      "reverse_compute_at(epilogue, x.outer) ; fuse_write_back(dwconv)");

  const std::pair<std::string, std::string> refusals[] = {
      {"fuse_write_back(nope)", "no buffer named nope"},
      {"fuse_write_back(epilogue)", "epilogue is an argument"},
      {"fuse_write_back(conv)", "no write cache conv.local"},
      // The epilogue still runs as its own pass over the whole output.
      {"split(x, 4) ; cache_write(conv, x.outer) ; fuse_write_back(conv)",
       "no copy-back of the write cache is followed by a read of the buffer"},
  };
  for (const auto& [bad, message] : refusals) expect_refused(op.program, bad, message);
}

// rfactor turns a reduction loop into a dimension of partial results, which makes it
// vectorizable: a row sum along the contiguous row.
TEST(StageRules, RfactorSplitsAReductionIntoPartialResults) {
  const char* w = "softmax:M=3,N=37";
  std::string strategy =
      "split(exp_sum.k, 8) ; rfactor(exp_sum, exp_sum.k.inner) ; vectorize(exp_sum.k.inner)";
  OpInstance op = instantiate(parse_workload(w));
  EXPECT_FALSE(parse_strategy("split(exp_sum.k, 8) ; vectorize(exp_sum.k.inner)")(op.program));
  std::string text = print_program(apply_ok(op, strategy));
  EXPECT_NE(text.find("alloc exp_sum.rf: float32[3, 8]"), std::string::npos) << text;
  EXPECT_NE(text.find("exp_sum.rf[exp_sum.i, exp_sum.k.inner] = exp_sum.rf[exp_sum.i, "
                      "exp_sum.k.inner] + row_exp["),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("exp_sum[exp_sum.rf.0] = exp_sum[exp_sum.rf.0] + exp_sum.rf[exp_sum.rf.0, "
                      "exp_sum.rf.1]"),
            std::string::npos)
      << text;
  expect_correct_everywhere(w, strategy);
  expect_correct_everywhere(w,
                            "split(row_max.k, 16) ; rfactor(row_max, row_max.k.inner) ; "
                            "vectorize(row_max.k.inner) ; parallel(row_max.i) ; "
                            "parallel(row_max.rf.0)");
  expect_correct_everywhere("matmul:M=5,N=6,K=9", "split(k, 4) ; rfactor(C, k.outer)");
  expect_correct_everywhere("conv2d:N=1,C=2,H=5,W=5,O=3,K=3,S=1,P=1", "rfactor(conv, rx)");
  // A stage allocated inside loops (a write cache) is rfactored below its allocation.
  expect_correct_everywhere("matmul:M=4,N=4,K=6", "cache_write(C, j) ; rfactor(C.local, k)");
  // Where combining after the update's nest would be too late, or l is outside S's allocation.
  const std::tuple<const char*, std::string, std::string> elsewhere[] = {
      {"conv2d_bias_relu:N=1,C=3,H=6,W=7,O=6,K=3,S=1,P=1",
       "split(conv.x, 3) ; compute_inline(bias_add) ; reverse_compute_at(relu, conv.x.outer) ; "
       "rfactor(conv, rx)",
       "conv is read in its loop nest other than by its update"},
      {"softmax:M=4,N=6",
       "split(softmax.i, 2) ; compute_at(exp_sum, softmax.i.outer) ; "
       "rfactor(exp_sum, softmax.i.outer)",
       "loop softmax.i.outer is around the allocation of exp_sum"},
  };
  for (const auto& [workload, bad, message] : elsewhere)
    expect_refused(instantiate(parse_workload(workload)).program, bad, message);

  const std::pair<std::string, std::string> refusals[] = {
      {"rfactor(exp_sum, exp_sum.i)", "loop exp_sum.i indexes exp_sum: it is not a reduction loop"},
      {"rfactor(softmax, softmax.j)", "softmax is not a reduction (an init and an update)"},
      {"rfactor(exp_sum, row_max.k)", "loop row_max.k is not around the update of exp_sum"},
      {"rfactor(exp_sum, exp_sum.k) ; rfactor(exp_sum, exp_sum.k)",
       "a buffer named exp_sum.rf exists already"},
  };
  for (const auto& [bad, message] : refusals) expect_refused(op.program, bad, message);
}

TEST(StageRules, CacheReadCopiesTheBlockThatIsRead) {
  OpInstance op = instantiate(parse_workload("matmul:M=16,N=16,K=8"));
  std::string text = print_program(apply_ok(op, "split(i, 4) ; cache_read(A, i.outer)"));
  EXPECT_NE(text.find("alloc A.local: float32[4, 8]"), std::string::npos) << text;
  expect_correct_everywhere("matmul:M=18,N=16,K=8",
                            "split(i, 4) ; cache_read(A, i.outer) ; parallel(i.outer)");
}

TEST(StageRules, PackMovesTheBlockFirstAndTheLaneLastAndPadsPartialBlocks) {
  OpInstance op = instantiate(parse_workload("matmul:M=8,N=20,K=6"));
  std::string text = print_program(apply_ok(op, "split(j, 8) ; pack(B, 1, 8)"));
  EXPECT_NE(text.find("alloc B.packed: float32[3, 6, 8]"), std::string::npos) << text;
  EXPECT_NE(text.find("B.packed[j.outer, k, j.inner]"), std::string::npos) << text;
  EXPECT_NE(text.find("select(B.pack.0*8 + B.pack.2 < 20"), std::string::npos) << text;
  expect_correct_everywhere("matmul:M=8,N=20,K=6",
                            "split(j, 8) ; pack(B, 1, 8) ; parallel(B.pack.0)");
  expect_correct_everywhere("conv2d:N=1,C=4,H=5,W=5,O=6,K=3,S=1,P=0", "pack(weight, 0, 4)");
  OpInstance conv = instantiate(parse_workload("conv2d:N=1,C=4,H=5,W=5,O=6,K=3,S=1,P=0"));
  text = print_program(apply_ok(conv, "pack(weight, 0, 4)"));
  EXPECT_NE(text.find("alloc weight.packed: float32[2, 4, 3, 3, 4]"), std::string::npos) << text;
}

// Each iteration of the loop hints the lines the iteration `distance` later reads: one per
// value of an unrolled inner loop in the index (the register tile's output blocks), the vector
// loop at its first lane; the values stay the reference's, and the kernel issues the hints.
TEST(StageRules, PrefetchHintsTheLinesOfALaterIteration) {
  const char* w = "conv2d_nchwc:N=1,C=32,H=6,W=6,O=32,K=3,S=1,P=1";
  const std::string tiled =
      "split(oc, 2) ; reorder(conv.n, oc.outer, y, x, ic, ry, rx, ib, oc.inner, ob) ; "
      "vectorize(ob) ; "
      "unroll(oc.inner)";
  OpInstance op = instantiate(parse_workload(w));
  Program p = apply_ok(op, tiled + " ; prefetch(weight, ib, 8)");
  std::string text = print_program(p);
  EXPECT_NE(text.find("prefetch weight[oc.outer*2, ic, ry, rx, ib + 8, 0]"), std::string::npos)
      << text;
  EXPECT_NE(text.find("prefetch weight[oc.outer*2 + 1, ic, ry, rx, ib + 8, 0]"), std::string::npos)
      << text;
  // Both hints sit at the top of ib's body, before the tile's loops.
  EXPECT_LT(text.find("prefetch weight"), text.find("unrolled for oc.inner"));
  EXPECT_EQ(text.find("prefetch weight", text.find("unrolled for oc.inner")), std::string::npos);
  expect_correct_everywhere(w, tiled + " ; prefetch(weight, ib, 8) ; parallel(oc.outer)");
  EvaluateParams params;
  params.time = false;
  Evaluation ev = evaluate(op, p, params);
  EXPECT_NE(ev.code.find("__builtin_prefetch(&weight["), std::string::npos) << ev.code;
  // The printed program reads back as the same program.
  EXPECT_EQ(print_program(parse_program(text)), text);

  expect_refused(p, "prefetch(weight, ib, 8)", "weight is prefetched in loop ib already");
  expect_refused(op.program, "prefetch(weight, h, 8)", "loop h reads no buffer weight");
  Program vectorized = apply_ok(op, tiled);
  expect_refused(vectorized, "prefetch(weight, ob, 8)", "loop ob is vectorized");
  expect_refused(vectorized, "prefetch(data, ib, 8)", "loop ib reads no buffer data");
  expect_refused(vectorized, "prefetch(weight, ib, 0)", "the distance must be positive");
  expect_refused(vectorized, "prefetch(weight, nothing, 8)", "prefetch(weight, nothing, 8)");
}

// The elements each prefetch statement of `p` hints, in the order the loops `steps` (outermost
// first) run them, with `fixed` loops held at the given values.
std::vector<int64_t> hinted_elements(const Program& p, const std::vector<std::string>& steps,
                                     const std::vector<std::pair<std::string, int64_t>>& fixed) {
  class Finder : public StmtVisitor {
   public:
    std::vector<const PrefetchNode*> hints;

   protected:
    using StmtVisitor::visit_;
    void visit_(const PrefetchNode& n, const Stmt& self) override {
      hints.push_back(&n);
      StmtVisitor::visit_(n, self);
    }
  };
  Finder f;
  f.visit(p.body);
  std::vector<std::pair<const VarNode*, Expr>> at;
  for (const auto& [name, value] : fixed)
    at.emplace_back(find_loop(p, name)->var.get(), make_int(value));
  std::vector<const ForNode*> loops;
  for (const std::string& name : steps) loops.push_back(find_loop(p, name));
  std::vector<int64_t> out;
  std::vector<int64_t> i(loops.size(), 0);
  while (true) {
    auto values = at;
    for (size_t d = 0; d < loops.size(); ++d)
      values.emplace_back(loops[d]->var.get(), make_int(i[d]));
    for (const PrefetchNode* h : f.hints) {
      int64_t flat = 0;
      for (size_t d = 0; d < h->indices.size(); ++d) {
        const Expr index = simplify(substitute(h->indices[d], values));
        const int64_t* v = as_const_int(index);
        EXPECT_NE(v, nullptr);
        int64_t stride = 1;
        for (size_t e = d + 1; e < h->buffer->shape.size(); ++e) stride *= h->buffer->shape[e];
        flat += (v ? *v : 0) * stride;
      }
      out.push_back(flat);
    }
    size_t d = loops.size();
    while (d > 0 && ++i[d - 1] == loops[d - 1]->extent) i[--d] = 0;
    if (d == 0) break;
  }
  return out;
}

// While a column block runs, the next block's panel of weights is hinted a line per step of k
// across the row tiles: both column blocks of the panel in step, every line once, in the order
// the next block reads them; values stay the reference's.
TEST(StageRules, PrefetchNextHintsTheNextIterationsLinesSpreadOverAnInnerLoop) {
  const char* w = "dense:B=12,I=32,O=64,WB=16";
  const std::string tiled =
      "split(i, 6) ; split(j, 32) ; split(j.inner, 16) ; "
      "reorder(j.outer, i.outer, k, i.inner, j.inner.outer, j.inner.inner) ; "
      "vectorize(j.inner.inner) ; unroll(j.inner.outer) ; unroll(i.inner)";
  OpInstance op = instantiate(parse_workload(w));
  Program p = apply_ok(op, tiled + " ; prefetch_next(W, j.outer, k)");
  // W is [4][32][16]: the panel of j.outer = 1 is elements 1024..2047, two blocks of 512.
  std::vector<int64_t> hinted = hinted_elements(p, {"i.outer", "k"}, {{"j.outer", 0}});
  ASSERT_EQ(hinted.size(), 64u);  // 2 row tiles x 32 steps of k, one line each
  EXPECT_EQ(hinted[0], 1024);
  EXPECT_EQ(hinted[1], 1536);
  EXPECT_EQ(hinted[2], 1040);
  std::set<int64_t> lines;
  for (int64_t e : hinted) lines.insert(e / 16);
  EXPECT_EQ(lines.size(), 64u);
  EXPECT_EQ(*lines.begin(), 64);
  EXPECT_EQ(*lines.rbegin(), 127);
  expect_correct_everywhere(w, tiled + " ; parallel(j.outer) ; prefetch_next(W, j.outer, k)");
  EvaluateParams params;
  params.time = false;
  Evaluation ev = evaluate(op, p, params);
  EXPECT_TRUE(ev.correct) << ev.mismatch;
  EXPECT_NE(ev.code.find("__builtin_prefetch(&W["), std::string::npos) << ev.code;

  // Fewer steps than lines: the last ones repeat the last line.
  Program few = apply_ok(op, tiled + " ; split(k, 4) ; prefetch_next(W, j.outer, k.outer)");
  std::vector<int64_t> spread = hinted_elements(few, {"i.outer", "k.outer"}, {{"j.outer", 0}});
  ASSERT_EQ(spread.size(), 64u);  // 16 steps x 4 hints
  lines.clear();
  for (int64_t e : spread) lines.insert(e / 16);
  EXPECT_EQ(lines.size(), 64u);

  // What a hint shares its iteration with: a register tile of 6 x 2 vector stores and a hint per
  // step of k; four steps of k and four hints per step of k.outer.
  EXPECT_EQ(stores_per_hint(p), 12);
  EXPECT_EQ(stores_per_hint(few), 12);
  EXPECT_EQ(stores_per_hint(apply_ok(op, tiled)), std::numeric_limits<int64_t>::max());

  expect_refused(p, "prefetch_next(W, j.outer, k)", "W is prefetched in loop j.outer already");
  Program plain = apply_ok(op, tiled);
  expect_refused(plain, "prefetch_next(W, k, j.outer)", "loop j.outer is not inside k");
  expect_refused(plain, "prefetch_next(W, j.outer, j.inner.inner)", "is vectorized");
  expect_refused(plain, "prefetch_next(V, j.outer, k)", "there is no buffer V");
  expect_refused(plain, "prefetch_next(W, j.outer, i.outer)",
                 "64 lines of W over 2 iterations of i.outer: more than 8 hints per iteration");
}

TEST(StageRules, RefusalsNameTheRuleAndTheReason) {
  const std::pair<const char*, const char*> cases[] = {
      {"compute_at(conv, y)",
       "compute_at(conv, y): conv is an argument of the program, not an intermediate stage"},
      {"compute_at(pad, h)", "compute_at(pad, h): loop h belongs to stage pad"},
      {"compute_at(nothing, y)", "compute_at(nothing, y): no buffer named nothing"},
      {"compute_at(pad, o.init)", "compute_at(pad, o.init): the body of o.init does not read pad"},
      {"compute_inline(data)", "compute_inline(data): data is an argument of the program"},
      {"cache_write(data, y)", "cache_write(data, y): the body of y does not access data"},
      {"cache_read(conv, y)", "cache_read(conv, y): the body of y writes conv; use cache_write"},
      {"pack(conv, 0, 4)", "pack(conv, 0, 4): conv is not an input of the program"},
      {"pack(weight, 4, 4)", "pack(weight, 4, 4): weight has no dimension 4"},
      {"compute_at(pad, y) ; compute_at(pad, x)",
       "compute_at(pad, x): stage pad is not a single plain loop nest"},
      {"vectorize(@loop(9))", "vectorize(@loop(9)): @loop(9): the nest has 7 loops"},
      {"vectorize(@innermost(nothing))",
       "vectorize(@innermost(nothing)): no loop nest writes a buffer named nothing"},
  };
  OpInstance op = instantiate(parse_workload("conv2d:N=1,C=2,H=6,W=6,O=2,K=3,S=1,P=1"));
  for (const auto& [strategy, message] : cases) {
    RewriteResult<Program> r = parse_strategy(strategy)(op.program);
    ASSERT_FALSE(r.ok()) << strategy;
    EXPECT_EQ(r.message().substr(0, std::string(message).size()), message) << r.message();
  }
  OpInstance bias = instantiate(parse_workload("conv2d_bias_relu:N=1,C=2,H=5,W=5,O=2,K=3,S=1,P=1"));
  RewriteResult<Program> r = compute_inline("conv")(bias.program);
  EXPECT_EQ(r.message(),
            "compute_inline(conv): stage conv is written by more than one loop nest (a reduction "
            "is an init and an "
            "update nest)");
}

TEST(Locations, ResolveByPlaceInANest) {
  OpInstance mm = instantiate(parse_workload("matmul:M=4,N=4,K=4"));
  EXPECT_EQ(resolve_loop(mm.program, "@innermost").name, "k");
  EXPECT_EQ(resolve_loop(mm.program, "@outermost").name, "i");
  EXPECT_EQ(resolve_loop(mm.program, "@loop(1)").name, "j");
  EXPECT_EQ(resolve_loop(mm.program, "@loop(C, 2)").name, "k");
  EXPECT_EQ(resolve_loop(mm.program, "j.init").name, "j.init");
  OpInstance cbr = instantiate(parse_workload("conv2d_bias_relu:N=1,C=2,H=5,W=5,O=2,K=3,S=1,P=1"));
  EXPECT_EQ(resolve_loop(cbr.program, "@innermost").name, "l");
  EXPECT_EQ(resolve_loop(cbr.program, "@innermost(conv)").name, "rx");
  EXPECT_EQ(resolve_loop(cbr.program, "@outermost(pad)").name, "pad.n");
  EXPECT_FALSE(resolve_loop(cbr.program, "@loop(pad, 4)").ok());
  // Locations follow the program: after a split the innermost loop is the new inner one.
  Program split_k = apply_ok(mm, "split(k, 2) ; vectorize(@innermost(C)) <+ id");
  EXPECT_EQ(resolve_loop(split_k, "@innermost").name, "k.inner");
}

TEST(DerivedStrategies, TileAndTileNd) {
  OpInstance op = instantiate(parse_workload("matmul:M=10,N=12,K=6"));
  std::string text = print_program(apply_ok(op, "tile(i, j, 4, 8)"));
  EXPECT_NE(
      text.find("for i.outer in 0..3 {\n    for j.outer in 0..2 {\n      for i.inner in 0..4"),
      std::string::npos)
      << text;
  expect_correct_everywhere("matmul:M=10,N=12,K=6",
                            "tile(i, j, 4, 8) ; vectorize(@innermost(C)) <+ id");
  expect_correct_everywhere("matmul:M=10,N=12,K=6",
                            "tile_nd(i, j, k, 4, 4, 2) ; parallel(i.outer)");
  expect_correct_everywhere("conv2d:N=1,C=2,H=6,W=6,O=4,K=3,S=1,P=1", "tile_nd(o, y, x, 2, 3, 2)");
  expect_correct_everywhere("matmul:M=5,N=6,K=7", "reorder(@loop(2), @loop(0), @loop(1))");
}

TEST(DerivedStrategies, GemmVersionsAreCorrectPrintBackAndCountSteps) {
  int64_t expected_steps[] = {0, 5, 6, 7, 8, 10, 13};
  size_t v = 0;
  for (const NamedStrategy& version : gemm_versions(16, 4)) {
    SCOPED_TRACE(version.name);
    EXPECT_EQ(parse_strategy(version.strategy.text()).text(), version.strategy.text());
    OpInstance op =
        instantiate(parse_workload("matmul:M=40,N=36,K=20"));  // partial tiles everywhere
    RewriteStats stats;
    RewriteResult<Program> r = version.strategy(op.program, &stats);
    ASSERT_TRUE(r.ok()) << r.message();
    EXPECT_EQ(stats.steps, expected_steps[v++]);
    EXPECT_EQ(stats.attempts, stats.steps);
    EXPECT_TRUE(testing::interpreter_matches_reference(op, r.program(), 5));
    EvaluateParams params;
    params.time = false;
    Evaluation ev = evaluate(op, r.program(), params);
    EXPECT_TRUE(ev.correct) << ev.mismatch;
  }
}

}  // namespace
}  // namespace tessera
