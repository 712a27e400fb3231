#include "space/config_space.h"

#include <gtest/gtest.h>

#include <set>

#include "ops/templates.h"
#include "schedule/strategy_parser.h"
#include "test_util.h"
#include "tir/simplify.h"
#include "tir/structural_equal.h"

namespace tessera {
namespace {

TEST(ConfigSpace, SplitKnobs) {
  Knob all = split_knob("t", 12, 2, SplitPolicy::kAllFactors, 100);
  EXPECT_EQ(all.values.size(), 6u);  // inner factor 1, 2, 3, 4, 6, 12
  for (const auto& v : all.values) EXPECT_EQ(v[0] * v[1], 12);
  Knob three = split_knob("t", 8, 3, SplitPolicy::kAllFactors, 100);
  for (const auto& v : three.values) EXPECT_EQ(v[0] * v[1] * v[2], 8);
  EXPECT_EQ(three.values.size(), 10u);
  Knob pow2 = split_knob("t", 100, 2, SplitPolicy::kPowersOfTwo, 16);
  std::set<int64_t> inner;
  for (const auto& v : pow2.values) {
    inner.insert(v[1]);
    EXPECT_GE(v[0] * v[1], 100);
  }
  EXPECT_EQ(inner, (std::set<int64_t>{1, 2, 4, 8, 16}));
  Knob from = split_knob_from("t", 10, {{4}, {16}});
  ASSERT_EQ(from.values.size(), 1u);  // 16 does not fit in 10
  EXPECT_EQ(from.values[0], (std::vector<int64_t>{3, 4}));
}

TEST(ConfigSpace, IndexRoundTripAndNeighbours) {
  ConfigSpace space = matmul_space(64, 64, 64);
  ASSERT_GT(space.size(), 1000u);
  std::mt19937_64 rng(3);
  for (int i = 0; i < 200; ++i) {
    uint64_t index = rng() % space.size();
    EXPECT_EQ(space.to_index(space.from_index(index)), index);
  }
  Config c = space.sample(rng);
  std::vector<Config> ns = space.neighbours(c);
  size_t expected = 0;
  for (const Knob& k : space.knobs()) expected += k.values.size() - 1;
  EXPECT_EQ(ns.size(), expected);
  for (const Config& n : ns) {
    int differ = 0;
    for (size_t k = 0; k < c.choice.size(); ++k) differ += n.choice[k] != c.choice[k];
    EXPECT_EQ(differ, 1);
  }
  for (int i = 0; i < 50; ++i) {
    Config n = space.random_neighbour(c, rng);
    int differ = 0;
    for (size_t k = 0; k < c.choice.size(); ++k) differ += n.choice[k] != c.choice[k];
    EXPECT_EQ(differ, 1);
  }
}

TEST(ConfigSpace, AChoiceOfSpacesInstantiatesTheChosenAlternativeWithItsOwnKnobs) {
  auto space_of = [](const std::string& loop) {
    return ConfigSpace("s", {int_knob("factor", {2, 4, 8}), choice_knob("vec", {"off", "on"})},
                       [loop](const ConfigSpace& s, const Config& c) {
                         ProgramStrategy st = split(loop, s.value0(c, "factor"));
                         return s.value0(c, "vec") == 1 ? seq(st, vectorize(loop + ".inner")) : st;
                       });
  };
  ConfigSpace both =
      choice_of_spaces("both", "which", {{"on_i", space_of("i")}, {"on_j", space_of("j")}});
  ASSERT_EQ(both.knobs().size(), 5u);
  EXPECT_EQ(both.knobs()[0].name, "which");
  EXPECT_EQ(both.knobs()[3].name, "on_j.factor");
  EXPECT_EQ(both.size(), 2u * 6u * 6u);
  EXPECT_EQ(both.instantiate(Config{{0, 1, 1, 2, 0}}).text(), "split(i, 4) ; vectorize(i.inner)");
  EXPECT_EQ(both.instantiate(Config{{1, 1, 1, 2, 0}}).text(), "split(j, 8)");
}

TEST(ConfigSpace, ChoiceKnobsNameTheirPick) {
  ConfigSpace s("s", {int_knob("factor", {2, 4}), choice_knob("vec", {"off", "on"})},
                [](const ConfigSpace&, const Config&) { return split("i", 2); });
  EXPECT_EQ(s.label(Config{{0, 1}}, "vec"), "on");
  EXPECT_EQ(s.label(Config{{1, 0}}, "vec"), "off");
  EXPECT_THROW(s.label(Config{{0, 0}}, "factor"), InternalError);
}

// Every configuration of a template prints as strategy text that parses back, and a sample of
// them computes the operator's result.
TEST(Templates, ConfigurationsPrintParseAndCompute) {
  for (const char* w : {"matmul:M=24,N=40,K=12", "conv2d:N=1,C=4,H=9,W=9,O=8,K=3,S=1,P=1",
                        "conv2d:N=1,C=3,H=8,W=8,O=4,K=1,S=2,P=0"}) {
    SCOPED_TRACE(w);
    Workload workload = parse_workload(w);
    OpInstance op = instantiate(workload);
    ConfigSpace space = space_for(workload);
    std::mt19937_64 rng(11);
    int applied = 0;
    for (int i = 0; i < 40; ++i) {
      Config c = space.sample(rng);
      ProgramStrategy s = space.instantiate(c);
      EXPECT_EQ(parse_strategy(s.text()).text(), s.text());
      RewriteResult<Program> r = s(op.program);
      if (!r) continue;
      ++applied;
      EXPECT_TRUE(testing::interpreter_matches_reference(op, r.program(), i))
          << space.describe(c) << "\n"
          << s.text();
    }
    EXPECT_GT(applied, 20);
  }
  EXPECT_THROW(space_for(parse_workload("blur2d:H=8,W=8,separate=0")), Error);
}

// Rules simplify only the loop nest they rewrote. That equals simplifying the whole program
// after each step only if every step leaves a program the simplifier would not change, so the
// programs of random configurations of every kind of space must be fixpoints.
TEST(Templates, RewrittenProgramsAreAlreadySimplified) {
  for (const char* w : {"matmul:M=64,N=48,K=40", "conv2d:N=1,C=8,H=12,W=12,O=16,K=3,S=1,P=1",
                        "conv2d_bias_relu:N=1,C=3,H=10,W=10,O=8,K=3,S=2,P=1",
                        "conv2d_nchwc:N=1,C=32,H=10,W=10,O=32,K=3,S=1,P=0,CB=16",
                        "conv2d_nchwc:N=1,C=16,H=7,W=7,O=48,K=1,S=1,P=0,CB=16",
                        "depthwise_conv2d_nchwc:N=1,C=32,H=12,W=12,K=3,S=2,P=1,CB=16",
                        "batch_matmul:B=3,M=16,N=24,K=8", "softmax:M=8,N=40",
                        "max_pool2d:N=1,C=4,H=12,W=12,K=3,S=2,P=1"}) {
    SCOPED_TRACE(w);
    Workload workload = parse_workload(w);
    OpInstance op = instantiate(workload);
    ConfigSpace space = space_for(workload);
    std::mt19937_64 rng(5);
    int applied = 0;
    for (int i = 0; i < 30; ++i) {
      Config c = space.sample(rng);
      RewriteResult<Program> r = space.instantiate(c)(op.program);
      if (!r) continue;
      ++applied;
      EXPECT_TRUE(structural_equal(simplify(r.program().body), r.program().body))
          << space.describe(c);
    }
    EXPECT_GT(applied, 10);
  }
}

}  // namespace
}  // namespace tessera
