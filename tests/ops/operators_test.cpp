// The operator library: every operator against its naive reference, plain and under random
// configurations of its search space (interpreted and compiled), workload keys and bad shapes.
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <regex>
#include <set>

#include "ops/evaluate.h"
#include "ops/templates.h"
#include "runtime/isa.h"
#include "schedule/strategy_parser.h"
#include "te/error.h"
#include "test_util.h"
#include "tir/printer.h"

namespace tessera {
namespace {

// Small shapes with partial tiles, strides, padding, dilation and groups.
const char* const kWorkloads[] = {
    "matmul:M=13,N=20,K=7",
    "dense:B=3,I=10,O=21",
    "dense:B=1,I=40,O=13",
    "batch_matmul:B=2,M=5,N=18,K=7",
    "conv2d:N=1,C=4,H=9,W=9,O=8,K=3,S=1,P=1",
    "conv2d:N=1,C=6,H=7,W=8,O=18,K=1,S=2,P=0",
    "conv2d:N=1,C=5,H=6,W=7,O=20,K=1,S=1,P=0",
    "conv2d:N=1,C=4,H=9,W=9,O=6,K=3,S=2,P=1,D=2,G=2",
    "conv2d_bias_relu:N=1,C=3,H=7,W=7,O=20,K=3,S=1,P=1",
    "conv2d:N=1,C=3,H=8,W=9,O=24,K=3,S=1,P=1,WB=8",
    "conv2d_nchwc:N=1,C=32,H=7,W=9,O=32,K=3,S=1,P=1",
    "conv2d_nchwc:N=1,C=3,H=8,W=9,O=16,K=3,S=2,P=1,CB=8",
    "conv2d_nchwc:N=1,C=16,H=6,W=7,O=24,K=1,S=2,P=0,CB=8",
    "conv2d_nchwc:N=1,C=16,H=7,W=9,O=16,K=3,S=1,P=1,CB=8,BIAS=1,RES=1,ACT=1",
    "conv2d_nchwc:N=1,C=3,H=8,W=9,O=16,K=3,S=2,P=1,CB=8,BIAS=1,ACT=2",
    "conv2d_nchwc:N=1,C=3,H=8,W=9,O=16,K=3,S=2,P=1,CB=8,IB=1,BIAS=1,ACT=2",
    "conv2d_nchwc:N=1,C=16,H=6,W=7,O=16,K=1,S=1,P=0,CB=8,BIAS=1,RES=1,ACT=3",
    "conv2d_nchwc:N=1,C=16,H=6,W=7,O=16,K=3,S=1,P=1,CB=8,BIAS=1,ACT=4",
    "conv2d_nchwc:N=1,C=16,H=6,W=7,O=16,K=2,S=1,P=1,CB=8,BIAS=1,ACT=6",
    // Rectangular windows (Inception's 1x7 and 7x1), one strided.
    "conv2d_nchwc:N=1,C=16,H=9,W=8,O=16,K=1,S=1,P=0,CB=8,KW=5,PW=2,BIAS=1,ACT=1",
    "conv2d_nchwc:N=1,C=16,H=9,W=8,O=24,K=5,S=2,P=2,CB=8,KW=1,PW=0",
    // Grouped in whole blocks: one block a group (RegNet's 8 channels a group), and two input
    // blocks to four output blocks a group.
    "conv2d_nchwc:N=1,C=32,H=9,W=9,O=32,K=3,S=1,P=1,G=4,CB=8,BIAS=1,RES=1,ACT=1",
    "conv2d_nchwc:N=1,C=32,H=9,W=10,O=64,K=3,S=2,P=1,G=2,CB=8,BIAS=1,ACT=1",
    "conv2d:N=1,C=3,H=8,W=9,O=5,K=3,S=2,P=1,IM2COL=1",
    "conv2d_bias_relu:N=1,C=2,H=5,W=6,O=8,K=3,S=2,P=1,WB=4",
    "dense:B=3,I=10,O=32,WB=16",
    "dense:B=5,I=10,O=21,WB=8",  // the last weight block zero-padded
    "dense:B=20,I=10,O=40,WB=16,BIAS=1,ACT=5",
    "dense:B=5,I=10,O=21,WB=8,BIAS=1,RES=1,ACT=4",
    "dense:B=3,I=10,O=21,RES=1,ACT=2",
    "dense:B=1,I=40,O=13,BIAS=1,ACT=5",
    "dense:B=40,I=12,O=24,BIAS=1,RES=1",
    "depthwise_conv2d:N=1,C=5,H=9,W=18,K=3,S=1,P=1",
    "depthwise_conv2d:N=1,C=3,H=9,W=8,K=3,S=2,P=1",
    "depthwise_conv2d:N=1,C=32,H=7,W=9,K=3,S=2,P=1",
    "depthwise_conv2d:N=1,C=24,H=6,W=5,K=3,S=1,P=0",
    "depthwise_conv2d_nchwc:N=1,C=32,H=9,W=10,K=3,S=1,P=1",
    "depthwise_conv2d_nchwc:N=1,C=24,H=8,W=9,K=3,S=2,P=1,CB=8",
    "depthwise_conv2d_nchwc:N=1,C=16,H=9,W=10,K=3,S=2,P=1,CB=8,BIAS=1,ACT=2",
    "depthwise_conv2d_nchwc:N=1,C=16,H=6,W=7,K=3,S=1,P=1,CB=8,RES=1",
    "depthwise_conv2d_nchwc:N=1,C=16,H=6,W=7,K=3,S=1,P=1,CB=8,BIAS=1,ACT=4",
    // Dilated (MobileNet-v3's last stage in DeepLab-v3 and LR-ASPP, output stride 16).
    "depthwise_conv2d_nchwc:N=1,C=16,H=9,W=8,K=5,S=1,P=4,D=2,CB=8,BIAS=1,ACT=3",
    "depthwise_conv2d_nchwc:N=1,C=16,H=9,W=10,K=3,S=2,P=2,D=3,CB=8",
    "max_pool2d:N=1,C=3,H=9,W=9,K=3,S=2,P=1",
    "avg_pool2d:N=1,C=3,H=8,W=20,K=2,S=2,P=0",
    "bias_add:M=4,N=37",
    "softmax:M=6,N=35",
    "add:M=3,N=20",
    "relu:M=5,N=17",
};

// Compiles and runs `program` once, untimed, on random inputs from `seed`, checked against the
// reference; threads 0 is OpenMP's default.
Evaluation run_untimed(const OpInstance& op, const Program& program, int threads = 0,
                       uint64_t seed = 42) {
  EvaluateParams params;
  params.time = false;
  params.threads = threads;
  params.seed = seed;
  return evaluate(op, program, params);
}

TEST(Operators, PlainProgramsMatchTheirReferences) {
  for (const char* w : kWorkloads) {
    SCOPED_TRACE(w);
    OpInstance op = instantiate(parse_workload(w));
    EXPECT_TRUE(testing::interpreter_matches_reference(op, op.program, 5));
    Evaluation ev = run_untimed(op, op.program);
    EXPECT_TRUE(ev.correct) << ev.mismatch;
  }
}

// A sample of each space: every configuration prints and parses back; those that apply compute
// the operator (interpreter), and a few of them also compiled with two threads.
TEST(Operators, RandomConfigurationsOfEverySpaceAreCorrect) {
  for (const char* w : kWorkloads) {
    SCOPED_TRACE(w);
    Workload workload = parse_workload(w);
    OpInstance op = instantiate(workload);
    ConfigSpace space = space_for(workload);
    std::mt19937_64 rng(7);
    int applied = 0, compiled = 0;
    for (int i = 0; i < 12; ++i) {
      Config c = space.sample(rng);
      ProgramStrategy s = space.instantiate(c);
      ASSERT_EQ(parse_strategy(s.text()).text(), s.text());
      RewriteResult<Program> r = s(op.program);
      if (!r) continue;
      ++applied;
      EXPECT_TRUE(testing::interpreter_matches_reference(op, r.program(), i)) << s.text();
      if (compiled < 2) {
        ++compiled;
        Evaluation ev = run_untimed(op, r.program(), 2, i);
        EXPECT_TRUE(ev.correct) << s.text() << "\n" << ev.mismatch;
      }
    }
    EXPECT_GE(applied, 6) << "most configurations of a space should apply";
  }
}

// Large products get row blocks (tile_mc): the j blocks run over a block of row tiles at a time.
// Rows that do not divide into blocks leave a partial block, which must still be right.
TEST(Operators, RowBlocksOfLargeProductsAreCorrect) {
  const char* w = "matmul:M=520,N=512,K=8";
  OpInstance op = instantiate(parse_workload(w));
  ConfigSpace space = space_for(parse_workload(w));
  std::mt19937_64 rng(11);
  std::set<std::string> orders;
  for (int i = 0; i < 200 && orders.size() < 2; ++i) {
    Config c = space.sample(rng);
    if (space.value0(c, "tile_mc") == 0 || orders.count(space.label(c, "order"))) continue;
    ProgramStrategy s = space.instantiate(c);
    ASSERT_NE(s.text().find("split(i.outer, "), std::string::npos) << s.text();
    RewriteResult<Program> r = s(op.program);
    ASSERT_TRUE(r.ok()) << s.text() << ": " << r.message();
    Evaluation ev = run_untimed(op, r.program(), 2, i);
    EXPECT_TRUE(ev.correct) << s.text() << "\n" << ev.mismatch;
    orders.insert(space.label(c, "order"));
  }
  EXPECT_EQ(orders.size(), 2u);
  // Small products keep the space they had.
  ConfigSpace small = space_for(parse_workload("matmul:M=256,N=256,K=256"));
  for (const Knob& k : small.knobs()) EXPECT_NE(k.name, "tile_mc");
}

// The configurations kernels run before any tuning apply to every space, serial and on threads,
// and compute the operator; on the models' shapes they are the intended register tiles and
// parallel loops, not the knobs' first values.
TEST(Operators, DefaultConfigurationsApplyAndAreCorrect) {
  for (const char* w : kWorkloads) {
    SCOPED_TRACE(w);
    Workload workload = parse_workload(w);
    OpInstance op = instantiate(workload);
    ConfigSpace space = space_for(workload);
    for (int threads : {1, 2}) {
      ProgramStrategy s = space.instantiate(default_config(space, workload, threads));
      RewriteResult<Program> r = s(op.program);
      ASSERT_TRUE(r) << s.text() << ": " << r.message();
      EXPECT_TRUE(testing::interpreter_matches_reference(op, r.program(), 3)) << s.text();
      Evaluation ev = run_untimed(op, r.program(), threads);
      EXPECT_TRUE(ev.correct) << s.text() << "\n" << ev.mismatch;
    }
  }
  // AVX-512: two vectors of 16 channels by 8 (or 7) columns; AVX2: two of 8 by 7 (14
  // accumulators, weights as FMA memory operands). Depthwise channel blocks are the ISA's vector.
  const bool wide = target_isa().vector_registers >= 32;
  const std::pair<const char*, std::vector<const char*>> models[] = {
      {"conv2d:N=1,C=64,H=56,W=56,O=64,K=3,S=1,P=1",
       {wide ? "split(o, 32)" : "split(o, 16)", wide ? "split(o.inner, 16)" : "split(o.inner, 8)",
        wide ? "split(x, 8)" : "split(x, 7)", "split(rc, 16)", "parallel(o.outer.y.fused)"}},
      // Two blocks of 32 channels are too few for the threads (they take rows); four of 16 do.
      {"conv2d_bias_relu:N=1,C=64,H=56,W=56,O=64,K=3,S=1,P=1",
       {"reverse_compute_at(relu, conv.x.outer)",
        wide ? "parallel(conv.y)" : "parallel(conv.o.outer)"}},
      {"conv2d_bias_relu:N=1,C=512,H=7,W=7,O=512,K=3,S=1,P=1",
       {"split(conv.x, 7)", "parallel(conv.o.outer)"}},
      {"depthwise_conv2d:N=1,C=144,H=56,W=56,K=3,S=2,P=1",
       {wide ? "pack(data, 1, 16)" : "pack(data, 1, 8)", "unroll(ry)"}},
      {"depthwise_conv2d:N=1,C=32,H=112,W=112,K=3,S=1,P=1", {"vectorize(x.inner.inner)"}},
      // Blocked depthwise: AVX2's 16 registers take four columns of a long row, AVX-512's 32
      // eight; a 14-wide row seven, except under SiLU on AVX2 (four, with a tail).
      {"depthwise_conv2d_nchwc:N=1,C=32,H=112,W=112,K=3,S=1,P=1,CB=8,BIAS=1,ACT=4",
       {wide ? "split(x, 8)" : "split(x, 4)", "parallel(y.outer)"}},
      {"depthwise_conv2d_nchwc:N=1,C=480,H=14,W=14,K=3,S=1,P=1,CB=8,BIAS=1,ACT=4",
       {wide ? "split(x, 7)" : "split(x, 4)", "parallel(dwconv.c.outer)"}},
      {"depthwise_conv2d_nchwc:N=1,C=480,H=14,W=14,K=3,S=1,P=1,CB=8,BIAS=1,ACT=1", {"split(x, 7)"}},
      {"dense:B=1,I=512,O=1000", {"rfactor(dense.local, k.inner)", "parallel(j.outer)"}},
      {"max_pool2d:N=1,C=64,H=112,W=112,K=3,S=2,P=1",
       {"cache_write(pool", "parallel(pool.c.outer)"}},
      {"matmul:M=128,N=128,K=128", {"cache_write(C", "parallel(i.outer)"}},
      // Blocked: two blocks by as many columns as the registers hold besides their weights and
      // the broadcast (AVX2: 6, a tail of 2; AVX-512: 14, an even width that splits the row),
      // the epilogue per block, rows to the threads where there are more rows than channel tiles;
      // on AVX2 a thread that takes rows pads the input rows it reads, else the whole input is
      // padded first.
      {"conv2d_nchwc:N=1,C=64,H=56,W=56,O=64,K=3,S=1,P=1,CB=8,BIAS=1,RES=1,ACT=1",
       {"split(oc, 2)", wide ? "split(x, 14)" : "split(x, 6)",
        "reverse_compute_at(epilogue, x.outer)", "parallel(y.outer)",
        wide ? "parallel(c)" : "compute_at(pad, y.outer)"}},
      // Grouped, 16 channels per group: on AVX-512 the threads take (row, block) pairs and pad
      // the rows of that block as they go; a padded pixel is copied as one vector.
      {"conv2d_nchwc:N=1,C=208,H=14,W=14,O=208,K=3,S=1,P=1,G=13,BIAS=1,ACT=1",
       {wide ? "compute_at(pad, y.outer.oc.outer.fused)" : "compute_at(pad, y.outer)",
        "try(vectorize(b))"}},
      // A 7-wide row: AVX-512 takes two rows of it into the tile (28 accumulators).
      {"conv2d_nchwc:N=1,C=512,H=7,W=7,O=512,K=3,S=1,P=1,CB=8,BIAS=1,ACT=1",
       {"split(x, 7)", wide ? "split(y, 2)" : "split(y, 1)", "parallel(oc.outer)", "parallel(c)"}},
      // An image's three channels: on AVX2 each input value feeds four blocks of 2 columns, the
      // window unrolled; on AVX-512 two blocks of 2 columns x 4 rows, the window rolled.
      {"conv2d_nchwc:N=1,C=3,H=224,W=224,O=64,K=7,S=2,P=3,CB=8,BIAS=1,ACT=1",
       {wide ? "split(oc, 2)" : "split(oc, 4)", "split(x, 2)", wide ? "split(y, 4)" : "split(y, 1)",
        wide ? "unroll(y.inner) ; cache_write" : "unroll(rx)", "parallel(c)"}},
      // A 3x3 one pads its rows as the threads go; on AVX-512 one block of 8 columns x 2 rows.
      // Blocked by one channel (the model's NCHW input), the padded copy is vectorized along
      // the row.
      {"conv2d_nchwc:N=1,C=3,H=224,W=224,O=32,K=3,S=2,P=1,BIAS=1,ACT=2",
       {wide ? "split(oc, 1) ; split(x, 8) ; split(y, 2)" : "split(y, 1)",
        "compute_at(pad, y.outer) ; try(vectorize(b))"}},
      {"conv2d_nchwc:N=1,C=3,H=224,W=224,O=32,K=3,S=2,P=1,IB=1,BIAS=1,ACT=2",
       {"compute_at(pad, y.outer) ; split(w, 16) ; reorder(b, w.inner) ; vectorize(w.inner)"}},
      // A 4-wide row: AVX-512 takes two rows of it into the tile; AVX2's registers hold two
      // columns of two blocks.
      {"conv2d_nchwc:N=1,C=512,H=5,W=5,O=256,K=2,S=1,P=0,BIAS=1,ACT=1",
       {wide ? "split(x, 4)" : "split(x, 2)", wide ? "split(y, 2)" : "split(y, 1)"}},
      // A 9-wide row: AVX-512 splits it evenly (3 x 3); AVX2 as 5 + 4, since 2 x 3 leaves six
      // accumulators.
      {"conv2d_nchwc:N=1,C=32,H=20,W=20,O=64,K=4,S=2,P=0,CB=8",
       {"split(oc, 2)", wide ? "split(x, 3)" : "split(x, 5)"}},
      // A 1x1 window splits a 14-wide row evenly with one column more (AVX2: 7 for 6); a 3x3
      // one keeps the registers' count; AVX-512 takes the whole row in either; a 13-wide row
      // (odd) takes 7 + 6 rather than 8 + 5 on AVX-512 or 6 + 6 + 1 on AVX2, and a 17-wide one
      // 9 + 8 on AVX-512 (AVX2 keeps its own rules there).
      {"conv2d_nchwc:N=1,C=1024,H=14,W=14,O=256,K=1,S=1,P=0,CB=8,BIAS=1,ACT=1",
       {wide ? "split(x, 14)" : "split(x, 7)"}},
      {"conv2d_nchwc:N=1,C=256,H=14,W=14,O=256,K=3,S=1,P=1,CB=8,BIAS=1,ACT=1",
       {wide ? "split(x, 14)" : "split(x, 6)"}},
      {"conv2d_nchwc:N=1,C=64,H=13,W=13,O=256,K=3,S=1,P=1,CB=8,BIAS=1,ACT=1", {"split(x, 7)"}},
      {"conv2d_nchwc:N=1,C=768,H=17,W=17,O=192,K=1,S=1,P=0,BIAS=1,ACT=1",
       {wide ? "split(x, 9)" : "split(oc, 2)"}},
      // An odd count of many blocks (125): AVX2 still takes two at a time, the last tile half
      // empty; AVX-512 one.
      {"conv2d_nchwc:N=1,C=512,H=13,W=13,O=1000,K=1,S=1,P=0,CB=8,BIAS=1,ACT=1",
       {wide ? "split(oc, 1)" : "split(oc, 2)", "split(x, 7)"}},
      // Softmax: each tile of rows in one pass, the row statistics as vectors along the row.
      {"softmax:M=1536,N=128",
       {"compute_at(exp_sum, softmax.i.outer)", "rfactor(row_max, row_max.k.inner)",
        "split(softmax.j, 16)", "parallel(softmax.i.outer)"}},
      // ViT's 197 tokens: no vector width divides the row, which still runs as vectors of 16
      // with the last one masked.
      {"softmax:M=2364,N=197",
       {"rfactor(exp_sum, exp_sum.k.inner)", "split(softmax.j, 16)", "vectorize(softmax.j.inner)"}},
  };
  for (const auto& [w, wanted] : models) {
    SCOPED_TRACE(w);
    Workload workload = parse_workload(w);
    ConfigSpace space = space_for(workload);
    ProgramStrategy s = space.instantiate(default_config(space, workload, 2));
    RewriteResult<Program> r = s(instantiate(workload).program);
    ASSERT_TRUE(r) << s.text() << ": " << r.message();
    for (const char* step : wanted) EXPECT_NE(s.text().find(step), std::string::npos) << s.text();
  }
}

// Untuned kernels below about 1 MFLOP of work and a quarter of a MiB of data run on one thread;
// an exp-based activation counts as work per output element, so the same small depthwise layer
// takes the threads with SiLU and not with ReLU.
TEST(Operators, DefaultThreadsCountTheActivation) {
  auto threads_for = [](const char* text) {
    Workload w = parse_workload(text);
    return default_threads(w, instantiate(w), 2);
  };
  EXPECT_EQ(threads_for("depthwise_conv2d_nchwc:N=1,C=480,H=7,W=7,K=3,S=1,P=1,CB=8,BIAS=1,ACT=1"),
            1);
  EXPECT_EQ(threads_for("depthwise_conv2d_nchwc:N=1,C=480,H=7,W=7,K=3,S=1,P=1,CB=8,BIAS=1,ACT=4"),
            2);
  EXPECT_EQ(threads_for("depthwise_conv2d_nchwc:N=1,C=1152,H=7,W=7,K=3,S=1,P=1,CB=8,BIAS=1,ACT=1"),
            2);
  // A squeeze-excite 1x1 on a 1x1 image: 0.1 MFLOP and 0.2 MB.
  EXPECT_EQ(threads_for("conv2d_nchwc:N=1,C=1152,H=1,W=1,O=48,K=1,S=1,P=0,CB=8,BIAS=1,ACT=4"), 1);
  // 0.3 MB of weights, or a 0.8 MB input: too little work for two threads, but bound by the reads.
  EXPECT_EQ(threads_for("conv2d_nchwc:N=1,C=576,H=1,W=1,O=144,K=1,S=1,P=0,CB=8,BIAS=1,ACT=1"), 2);
  EXPECT_EQ(
      threads_for("depthwise_conv2d_nchwc:N=1,C=16,H=112,W=112,K=3,S=2,P=1,CB=8,BIAS=1,ACT=1"), 2);
  // A batch-1 dense layer streams its 1.6 MB of weights.
  EXPECT_EQ(threads_for("dense:B=1,I=784,O=512"), 2);
}

// Dense's dot form: vectors along the reduction of X[B][I] and W[O][I] (rfactor), partial sums
// combined per output tile; every configuration applies, including tails in B, O and I.
TEST(Operators, DenseDotFormVectorizesTheReduction) {
  const char* w = "dense:B=3,I=40,O=13";
  OpInstance op = instantiate(parse_workload(w));
  ConfigSpace space = space_for(parse_workload(w));
  ASSERT_EQ(space.knobs()[0].name, "form");
  EXPECT_EQ(space.knobs()[0].labels, (std::vector<std::string>{"outer", "dot"}));
  // Every choice of the dot form's knobs (the outer form's knobs stay at their first values).
  std::vector<Config> configs{space.from_index(0)};
  configs[0].choice[0] = 1;
  for (size_t k = 0; k < space.knobs().size(); ++k) {
    if (space.knobs()[k].name.rfind("dot.", 0) != 0) continue;
    std::vector<Config> more;
    for (const Config& base : configs) {
      for (size_t v = 0; v < space.knobs()[k].values.size(); ++v) {
        more.push_back(base);
        more.back().choice[k] = static_cast<int>(v);
      }
    }
    configs = std::move(more);
  }
  int dot = 0, compiled = 0;
  for (const Config& c : configs) {
    ProgramStrategy strategy = space.instantiate(c);
    RewriteResult<Program> r = strategy(op.program);
    ASSERT_TRUE(r.ok()) << strategy.text() << ": " << r.message();
    if (dot++ % 5 != 0) continue;
    EXPECT_TRUE(testing::interpreter_matches_reference(op, r.program(), dot)) << strategy.text();
    if (space.value0(c, "dot.parallel") != 1 || compiled >= 3) continue;
    ++compiled;
    Evaluation ev = run_untimed(op, r.program(), 2);
    EXPECT_TRUE(ev.correct) << strategy.text() << "\n" << ev.mismatch;
    EXPECT_NE(ev.code.find("__builtin_memcpy(&W_vec"), std::string::npos) << ev.code;
    EXPECT_NE(ev.code.find("#pragma omp parallel for"), std::string::npos) << ev.code;
  }
  EXPECT_EQ(dot, 2 * 6 * 2 * 2);  // tiles larger than B=3 and O=13 are left out
  EXPECT_EQ(compiled, 3);
}

// Fusing y and x indexes the planes as (p / W, p % W); the generated code must still see that
// consecutive pixels are consecutive floats and move them as one vector.
TEST(Operators, PointwiseConvolutionAsAMatmulReadsPixelsAsVectors) {
  OpInstance op = instantiate(parse_workload("conv2d:N=1,C=5,H=6,W=8,O=3,K=1,S=1,P=0"));
  RewriteResult<Program> r = parse_strategy(
      "fuse(y, x) ; split(y.x.fused, 16) ; reorder(n, o, y.x.fused.outer, rc, ry, rx, "
      "y.x.fused.inner) ; vectorize(y.x.fused.inner)")(op.program);
  ASSERT_TRUE(r.ok()) << r.message();
  Evaluation ev = run_untimed(op, r.program());
  EXPECT_TRUE(ev.correct) << ev.mismatch;
  EXPECT_NE(ev.code.find("__builtin_memcpy(&data_vec, &data[n * 240 + rc * 48 + "),
            std::string::npos)
      << ev.code;
  EXPECT_EQ(ev.code.find("data_vec[y_x_fused_inner_lane"), std::string::npos) << ev.code;
  ConfigSpace space = space_for(parse_workload("conv2d:N=1,C=5,H=6,W=8,O=3,K=1,S=1,P=0"));
  EXPECT_EQ(space.knobs()[0].name, "form");
  EXPECT_EQ(space.knobs()[0].labels, (std::vector<std::string>{"nchwc", "gemm"}));
  // With the output's y and x merged, the gemm form's pixel blocks are boxes: its write cache and
  // its parallel loops apply in either loop order.
  std::mt19937_64 rng(5);
  int cached = 0;
  for (int i = 0; i < 400 && cached < 3; ++i) {
    Config c = space.sample(rng);
    if (space.value0(c, "form") != 1 || space.value0(c, "gemm.cache") != 1 ||
        space.value0(c, "gemm.parallel") != 1 || space.value0(c, "gemm.order") != cached % 2) {
      continue;
    }
    ProgramStrategy strategy = space.instantiate(c);
    RewriteResult<Program> applied = strategy(op.program);
    ASSERT_TRUE(applied.ok()) << strategy.text() << ": " << applied.message();
    Evaluation cev = run_untimed(op, applied.program());
    EXPECT_TRUE(cev.correct) << strategy.text() << ": " << cev.mismatch;
    EXPECT_NE(cev.code.find("conv_local"), std::string::npos) << cev.code;
    EXPECT_NE(cev.code.find("omp parallel"), std::string::npos) << cev.code;
    ++cached;
  }
  EXPECT_EQ(cached, 3);
}

// The "panel" choice copies the K x block_j panel of B inside the j.outer iteration that reads
// it, so with j.outer on threads each thread packs its own panels; tails in N and K included.
TEST(Operators, PanelPackingCopiesBInsideTheParallelLoop) {
  for (const char* w : {"matmul:M=13,N=20,K=7", "batch_matmul:B=2,M=5,N=18,K=7"}) {
    SCOPED_TRACE(w);
    OpInstance op = instantiate(parse_workload(w));
    ConfigSpace space = space_for(parse_workload(w));
    std::mt19937_64 rng(11);
    int checked = 0;
    for (int i = 0; i < 500 && checked < 3; ++i) {
      Config c = space.sample(rng);
      if (space.value0(c, "pack") != 2 || space.value0(c, "order") != 1) continue;
      ProgramStrategy s = space.instantiate(c);
      ASSERT_NE(s.text().find("cache_read(B, j.outer)"), std::string::npos) << s.text();
      RewriteResult<Program> r = s(op.program);
      ASSERT_TRUE(r.ok()) << s.text() << ": " << r.message();
      Evaluation ev = run_untimed(op, r.program(), 2, i);
      EXPECT_TRUE(ev.correct) << s.text() << "\n" << ev.mismatch;
      EXPECT_NE(ev.code.find("B_local"), std::string::npos) << ev.code;
      ++checked;
    }
    EXPECT_EQ(checked, 3);
  }
}

// Weights pre-packed ahead of time ([O/WB][C][K][K][WB]): the kernel packs nothing and one
// contiguous vector load per (rc, ry, rx) feeds the register tile.
TEST(Operators, PrepackedWeightsAreReadAsVectorsWithoutPacking) {
  Workload w = parse_workload("conv2d:N=1,C=3,H=8,W=9,O=32,K=3,S=1,P=1,WB=16");
  OpInstance op = instantiate(w);
  EXPECT_EQ(op.args[1]->shape, (std::vector<int64_t>{2, 3, 3, 3, 16}));
  ConfigSpace space = space_for(w);
  std::mt19937_64 rng(3);
  int checked = 0;
  for (int i = 0; i < 16 && checked < 2; ++i) {
    ProgramStrategy s = space.instantiate(space.sample(rng));
    EXPECT_EQ(s.text().find("pack("), std::string::npos) << s.text();
    RewriteResult<Program> r = s(op.program);
    if (!r) continue;
    ++checked;
    Evaluation ev = run_untimed(op, r.program());
    EXPECT_TRUE(ev.correct) << ev.mismatch;
    EXPECT_EQ(ev.code.find("weight_packed"), std::string::npos) << ev.code;
    // The lane of the vector is the block's last index: contiguous reads.
    std::string text = print_program(r.program());
    EXPECT_TRUE(std::regex_search(text, std::regex(R"(weight\[[^\]]* o\.inner\.inner\])"))) << text;
  }
  EXPECT_EQ(checked, 2);
}

// conv2d_nchwc in its own layout: nothing packed or transposed, weights read as whole vectors,
// and every parallel choice applies (the fused (oc.outer, y) loop writes disjoint blocks).
TEST(Operators, BlockedConvolutionReadsBlocksInPlace) {
  Workload w = parse_workload("conv2d_nchwc:N=1,C=32,H=6,W=7,O=48,K=3,S=1,P=1");
  OpInstance op = instantiate(w);
  EXPECT_EQ(op.args[0]->shape, (std::vector<int64_t>{1, 2, 6, 7, 16}));
  EXPECT_EQ(op.args[1]->shape, (std::vector<int64_t>{3, 2, 3, 3, 16, 16}));
  EXPECT_EQ(op.args[2]->shape, (std::vector<int64_t>{1, 3, 6, 7, 16}));
  ConfigSpace space = space_for(w);
  std::mt19937_64 rng(9);
  int checked[3] = {0, 0, 0};
  for (int i = 0; i < 200; ++i) {
    Config c = space.sample(rng);
    int64_t mode = space.value0(c, "parallel");
    if (checked[mode] >= 1) continue;
    ProgramStrategy s = space.instantiate(c);
    RewriteResult<Program> r = s(op.program);
    ASSERT_TRUE(r.ok()) << s.text() << ": " << r.message();
    Evaluation ev = run_untimed(op, r.program(), 2);
    EXPECT_TRUE(ev.correct) << s.text() << "\n" << ev.mismatch;
    EXPECT_EQ(ev.code.find("packed"), std::string::npos) << ev.code;
    EXPECT_NE(ev.code.find("__builtin_memcpy(&weight_vec"), std::string::npos) << ev.code;
    if (mode != 0) {
      EXPECT_NE(ev.code.find("omp parallel"), std::string::npos) << ev.code;
    }
    ++checked[mode];
  }
  EXPECT_EQ(checked[0] + checked[1] + checked[2], 3);
}

// depthwise_conv2d_nchwc: every padding choice is correct at stride 2, reads the weights as whole
// vectors of a block's channels, and "inline" leaves no padded copy.
TEST(Operators, BlockedDepthwiseIsCorrectWithEveryPadding) {
  Workload w = parse_workload("depthwise_conv2d_nchwc:N=1,C=32,H=9,W=11,K=3,S=2,P=1");
  OpInstance op = instantiate(w);
  EXPECT_EQ(op.args[0]->shape, (std::vector<int64_t>{1, 2, 9, 11, 16}));
  EXPECT_EQ(op.args[1]->shape, (std::vector<int64_t>{2, 3, 3, 16}));
  EXPECT_EQ(op.args[2]->shape, (std::vector<int64_t>{1, 2, 5, 6, 16}));
  ConfigSpace space = space_for(w);
  std::mt19937_64 rng(5);
  std::map<std::string, int> checked;
  for (int i = 0; i < 200 && checked.size() < 3; ++i) {
    Config c = space.sample(rng);
    const std::string& pad = space.label(c, "pad");
    if (checked.count(pad)) continue;
    ProgramStrategy s = space.instantiate(c);
    RewriteResult<Program> r = s(op.program);
    ASSERT_TRUE(r.ok()) << s.text() << ": " << r.message();
    Evaluation ev = run_untimed(op, r.program(), 2);
    EXPECT_TRUE(ev.correct) << s.text() << "\n" << ev.mismatch;
    EXPECT_NE(ev.code.find("__builtin_memcpy(&weight_vec"), std::string::npos) << ev.code;
    bool has_pad_buffer = ev.code.find("pad[") != std::string::npos;
    EXPECT_EQ(has_pad_buffer, pad != "inline") << s.text() << "\n" << ev.code;
    ++checked[pad];
  }
  EXPECT_EQ(checked.size(), 3u);
}

// IM2COL=1 tunes the im2col template: the padded input gathered into a [C*K*K] x [OH*OW] matrix
// and the matmul space over it, read as vectors along the output pixels.
TEST(Operators, Im2colTemplateIsAMatmulOverTheGatheredMatrix) {
  Workload w = parse_workload("conv2d:N=1,C=3,H=8,W=8,O=5,K=3,S=1,P=1,IM2COL=1");
  ConfigSpace space = space_for(w);
  EXPECT_EQ(space.knobs()[0].name, "tile");
  OpInstance op = instantiate(w);
  std::mt19937_64 rng(5);
  int checked = 0;
  for (int i = 0; i < 16 && checked < 3; ++i) {
    ProgramStrategy s = space.instantiate(space.sample(rng));
    ASSERT_NE(s.text().find("gather(pad, conv.n, rc, ry, rx, y, x)"), std::string::npos);
    RewriteResult<Program> r = s(op.program);
    if (!r) continue;
    ++checked;
    EXPECT_TRUE(testing::interpreter_matches_reference(op, r.program(), i)) << s.text();
    Evaluation ev = run_untimed(op, r.program(), 2);
    EXPECT_TRUE(ev.correct) << s.text() << "\n" << ev.mismatch;
    // Consecutive pixels are consecutive floats of the gathered matrix (a vector move, or an
    // `omp simd` loop over a contiguous index when a partial tile needs guards).
    EXPECT_TRUE(ev.code.find("__builtin_memcpy(&pad_gathered_vec") != std::string::npos ||
                std::regex_search(
                    ev.code, std::regex(R"(pad_gathered\[[^\]]* \+ y_x_fused_inner_inner[ \]])")))
        << s.text() << "\n"
        << ev.code;
  }
  EXPECT_EQ(checked, 3);
  // The default conv2d space is NCHWc alone for a KxK kernel.
  EXPECT_EQ(space_for(parse_workload("conv2d:N=1,C=3,H=8,W=8,O=5,K=3,S=1,P=1")).knobs()[0].name,
            "tile_oc");
}

TEST(Operators, OptionalKeysAtTheirDefaultsNameTheSameWorkload) {
  EXPECT_EQ(parse_workload("conv2d:N=1,C=4,H=8,W=8,O=4,K=3,S=1,P=1,D=1,G=1").text(),
            "conv2d:N=1,C=4,H=8,W=8,O=4,K=3,S=1,P=1");
  EXPECT_EQ(parse_workload("conv2d:N=1,C=4,H=8,W=8,O=4,K=3,S=1,P=1,WB=0").text(),
            "conv2d:N=1,C=4,H=8,W=8,O=4,K=3,S=1,P=1");
  EXPECT_EQ(parse_workload("conv2d:N=1,C=4,H=8,W=8,O=4,K=3,S=1,P=1,G=2").text(),
            "conv2d:N=1,C=4,H=8,W=8,O=4,K=3,S=1,P=1,G=2");
  OpInstance grouped = instantiate(parse_workload("conv2d:N=1,C=4,H=8,W=8,O=6,K=3,S=1,P=1,G=2"));
  EXPECT_DOUBLE_EQ(grouped.flops, 2.0 * 6 * 8 * 8 * 2 * 9);
}

TEST(Operators, BadShapesAreRefusedWithTheReason) {
  const std::pair<const char*, const char*> cases[] = {
      {"conv2d:N=1,C=4,H=8,W=8,O=6,K=3,S=1,P=1,G=3", "conv2d: G=3 must divide C=4 and O=6"},
      {"conv2d:N=1,C=4,H=4,W=4,O=6,K=3,S=1,P=0,D=2", "conv2d: kernel 5 is larger than"},
      {"max_pool2d:N=1,C=2,H=8,W=8,K=2,S=2,P=2", "max_pool2d: P=2 must be smaller than K=2"},
      {"depthwise_conv2d:N=1,C=2,H=2,W=2,K=5,S=1,P=0", "depthwise_conv2d: window 5 is larger"},
      {"dense:B=1,I=4", "dense needs key O"},
      {"conv2d:N=1,C=4,H=8,W=8,O=6,K=3,S=1,P=1,WB=4",
       "conv2d: WB=4 (pre-packed weight block) must divide O=6"},
      {"dense:B=1,I=4,O=8,WB=-3", "dense: WB=-3 (pre-packed weight block) is negative"},
      {"conv2d_nchwc:N=1,C=16,H=4,W=4,O=20,K=1,S=1,P=0",
       "conv2d_nchwc: CB=16 (channel block) must divide O=20"},
      {"conv2d_nchwc:N=1,C=3,H=8,W=8,O=16,K=3,S=1,P=1,IB=2",
       "conv2d_nchwc: IB=2 (input channel block) must divide C=3"},
      {"depthwise_conv2d_nchwc:N=1,C=24,H=4,W=4,K=3,S=1,P=1",
       "depthwise_conv2d_nchwc: CB=16 (channel block) must divide C=24"},
      {"conv2d_nchwc:N=1,C=16,H=4,W=4,O=16,K=1,S=1,P=0,ACT=7",
       "conv2d_nchwc: ACT must be 0 (none), 1 (relu), 2 (relu6), 3 (hardswish), 4 (silu), 5 "
       "(gelu) or 6 (tanh), got 7"},
      {"dense:B=2,I=4,O=8,BIAS=2", "dense: BIAS must be 0 or 1, got 2"},
      {"depthwise_conv2d_nchwc:N=1,C=16,H=4,W=4,K=3,S=1,P=1,RES=2",
       "depthwise_conv2d_nchwc: RES must be 0 or 1, got 2"},
      {"conv2d:N=1,C=4,H=8,W=8,O=6,K=3,S=1,P=1,IM2COL=2", "conv2d: IM2COL must be 0 or 1, got 2"},
      {"conv2d:N=1,C=4,H=8,W=8,O=6,K=3,S=1,P=1,G=2,IM2COL=1", "conv2d: IM2COL=1 needs G=1"},
      {"conv2d:N=1,C=4,H=8,W=8,O=6,K=3,S=1,P=1,Q=1", "conv2d has no key Q"},
  };
  for (const auto& [w, message] : cases) {
    try {
      instantiate(parse_workload(w));
      ADD_FAILURE() << w << " was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace tessera
