// The attention operator: its reference against a softmax written out, its search space (every
// configuration applies and computes the operator, ragged tiles included), and the default
// configuration, which keeps only one tile of rows' scores.
#include "ops/attention.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "ops/evaluate.h"
#include "ops/templates.h"
#include "schedule/strategy_parser.h"
#include "te/error.h"
#include "test_util.h"
#include "tir/printer.h"

namespace tessera {
namespace {

Evaluation run_compiled(const OpInstance& op, const Program& p, uint64_t seed) {
  EvaluateParams params;
  params.time = false;
  params.threads = 2;
  params.seed = seed;
  return evaluate(op, p, params);
}

// One head of two queries over three keys, by hand: scores 0 and ln 2 against V's rows.
TEST(Attention, ReferenceIsSoftmaxOfTheScoresTimesV) {
  OpInstance op = build_attention(parse_workload("attention:B=1,M=2,N=3,D=1,DV=2"));
  std::vector<std::vector<double>> a{{0.0, 1.0},                         // Q
                                     {0.0, 0.0, std::log(2.0)},          // Kt
                                     {1.0, 10.0, 2.0, 20.0, 3.0, 30.0},  // V
                                     std::vector<double>(4)};
  op.reference(a);
  // Row 0: equal weights; row 1: weights 1, 1, 2 over 4.
  EXPECT_NEAR(a[3][0], 2.0, 1e-12);
  EXPECT_NEAR(a[3][1], 20.0, 1e-12);
  EXPECT_NEAR(a[3][2], (1.0 + 2.0 + 2 * 3.0) / 4, 1e-12);
  EXPECT_NEAR(a[3][3], (10.0 + 20.0 + 2 * 30.0) / 4, 1e-12);
  EXPECT_THROW(build_attention(parse_workload("attention:B=1,M=2,N=3,D=1")), Error);
  EXPECT_THROW(build_attention(parse_workload("attention:B=1,M=0,N=3,D=1,DV=2")), Error);
  EXPECT_THROW(build_attention(parse_workload("attention:B=4,M=2,N=3,D=1,DV=2,BB=3")), Error);
}

// Tiles that divide no extent (M=10 rows, N=35 keys, DV=20 values) and ones that do, and a bias
// shared by pairs of heads: every configuration must apply and compute the operator; some
// compiled on two threads.
TEST(Attention, EveryConfigurationComputesTheOperator) {
  for (const char* text : {"attention:B=3,M=10,N=35,D=8,DV=20", "attention:B=2,M=16,N=32,D=4,DV=16",
                           "attention:B=4,M=10,N=35,D=8,DV=20,BB=2"}) {
    SCOPED_TRACE(text);
    Workload w = parse_workload(text);
    OpInstance op = build_attention(w);
    ConfigSpace space = attention_space(w);
    EXPECT_EQ(space.name(), text);
    std::mt19937_64 rng(23);
    int compiled = 0;
    for (int i = 0; i < 24; ++i) {
      Config c = space.sample(rng);
      ProgramStrategy s = space.instantiate(c);
      EXPECT_EQ(parse_strategy(s.text()).text(), s.text());
      RewriteResult<Program> r = s(op.program);
      if (!r) {
        ADD_FAILURE() << "does not apply: " << space.describe(c) << "\n" << r.message();
        continue;
      }
      EXPECT_TRUE(testing::interpreter_matches_reference(op, r.program(), i)) << space.describe(c);
      if (i % 6 == 0) {
        ++compiled;
        Evaluation ev = run_compiled(op, r.program(), i);
        EXPECT_TRUE(ev.correct) << space.describe(c) << "\n" << ev.mismatch;
      }
    }
    EXPECT_GE(compiled, 4);
  }
}

// Untuned, Whisper-tiny's encoder attention (six heads, 1500 positions) keeps the scores of 12
// query rows at a time, never all 6 x 1500 x 1500 of them; a small one computes the operator.
TEST(Attention, DefaultConfigurationKeepsOneTileOfScores) {
  Workload whisper = parse_workload("attention:B=6,M=1500,N=1500,D=64,DV=64");
  ConfigSpace space = attention_space(whisper);
  ProgramStrategy s = space.instantiate(default_config(space, whisper, 2));
  RewriteResult<Program> r = s(build_attention(whisper).program);
  ASSERT_TRUE(r) << s.text() << ": " << r.message();
  const std::string text = print_program(r.program());
  EXPECT_NE(text.find("alloc score: float32[1, 12, 1500]"), std::string::npos) << text;
  EXPECT_NE(text.find("parallel for attention.b"), std::string::npos) << text;
  EXPECT_EQ(text.find("float32[6, 1500, 1500]"), std::string::npos) << text;

  Workload small = parse_workload("attention:B=3,M=20,N=37,D=8,DV=24");
  OpInstance op = build_attention(small);
  ConfigSpace small_space = attention_space(small);
  RewriteResult<Program> d =
      small_space.instantiate(default_config(small_space, small, 2))(op.program);
  ASSERT_TRUE(d) << d.message();
  Evaluation ev = run_compiled(op, d.program(), 5);
  EXPECT_TRUE(ev.correct) << ev.mismatch;
}

}  // namespace
}  // namespace tessera
