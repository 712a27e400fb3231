// Loop partitioning of split tails: which loops split where, and that values stay the same.
#include "tir/partition.h"

#include <gtest/gtest.h>

#include "test_util.h"
#include "tir/parser.h"
#include "tir/printer.h"

namespace tessera {
namespace {

Program with_body(const Program& p, Stmt body) {
  Program out = p;
  out.body = std::move(body);
  return out;
}

// The partitioned program computes what the original does, on random inputs.
void expect_same_values(const Program& before, const Program& after) {
  auto a = testing::random_args(before, 7);
  auto b = a;
  interpret(before, a);
  interpret(after, b);
  EXPECT_TRUE(testing::outputs_close(b, a, before.outputs.size(), 0)) << print_program(after);
}

int count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(PartitionTailGuards, FullTilesLoseTheGuardAndTheParallelLoopStaysOne) {
  Program p = parse_program(
      "program f(A: float32[10, 6]) -> (B: float32[10, 6]) {\n"
      "  parallel for io in 0..3 {\n"
      "    for k in 0..6 {\n"
      "      for ii in 0..4 {\n"
      "        if (io*4 + ii < 10) {\n"
      "          B[io*4 + ii, k] = A[io*4 + ii, k]*2.0f\n"
      "        }\n"
      "      }\n"
      "    }\n"
      "  }\n"
      "}\n");
  Program q = with_body(p, partition_tail_guards(p.body));
  std::string text = print_program(q);
  EXPECT_EQ(count(text, "parallel for io in 0..3"), 1) << text;
  EXPECT_NE(text.find("if (io < 2) {"), std::string::npos) << text;
  // One copy of the update for io 0 and 1, one for io 2, whose innermost loop stops at row 10
  // instead of testing the guard.
  EXPECT_EQ(count(text, "B[io*4 + ii, k] = "), 2) << text;
  EXPECT_EQ(count(text, "for ii in 0..2 {"), 1) << text;
  EXPECT_EQ(count(text, "io*4 + ii < 10"), 0) << text;
  expect_same_values(p, q);
}

TEST(PartitionTailGuards, TwoTailsNestAndGuardsThatHoldNowhereFirstStay) {
  // Both dimensions split with tails: the tail iteration of io partitions jo again inside.
  Program p = parse_program(
      "program f(A: float32[7, 9]) -> (B: float32[7, 9]) {\n"
      "  for io in 0..2 {\n"
      "    for jo in 0..3 {\n"
      "      for ii in 0..4 {\n"
      "        for ji in 0..4 {\n"
      "          if (io*4 + ii < 7 && jo*4 + ji < 9) {\n"
      "            B[io*4 + ii, jo*4 + ji] = A[io*4 + ii, jo*4 + ji] + 1.0f\n"
      "          }\n"
      "        }\n"
      "      }\n"
      "    }\n"
      "  }\n"
      "}\n");
  Program q = with_body(p, partition_tail_guards(p.body));
  std::string text = print_program(q);
  EXPECT_NE(text.find("if (io < 1) {"), std::string::npos) << text;
  EXPECT_NE(text.find("if (jo < 2) {"), std::string::npos) << text;
  expect_same_values(p, q);

  // A padding guard fails at the first iteration: nothing to gain, the loop is left alone. So is
  // a guard with no loop under it that holds again after it fails.
  for (const char* text_in : {"program f(A: float32[10]) -> (B: float32[12]) {\n"
                              "  for o in 0..3 {\n"
                              "    for i in 0..4 {\n"
                              "      if (o*4 + i >= 1 && o*4 + i < 11) {\n"
                              "        B[o*4 + i] = A[o*4 + i - 1]\n"
                              "      }\n"
                              "    }\n"
                              "  }\n"
                              "}\n",
                              "program f(A: float32[10]) -> (B: float32[10]) {\n"
                              "  for o in 0..6 {\n"
                              "    if (o < 2 || o > 3) {\n"
                              "      B[o] = A[o]\n"
                              "    }\n"
                              "  }\n"
                              "}\n"}) {
    Program r = parse_program(text_in);
    EXPECT_TRUE(partition_tail_guards(r.body).same_as(r.body)) << text_in;
  }
}

// The tail tile's write-back: in the last column block the innermost loop holds its guard on the
// first 5 columns and fails it on the rest, so it runs those 5 and tests nothing.
TEST(PartitionTailGuards, AnInnermostLoopStopsWhereItsGuardStartsFailing) {
  Program p = parse_program(
      "program f(A: float32[3, 21]) -> (B: float32[3, 21]) {\n"
      "  for i in 0..3 {\n"
      "    for jo in 0..3 {\n"
      "      for ji in 0..8 {\n"
      "        if (jo*8 + ji < 21) {\n"
      "          B[i, jo*8 + ji] = A[i, jo*8 + ji]*2.0f\n"
      "        }\n"
      "      }\n"
      "    }\n"
      "  }\n"
      "}\n");
  Program q = with_body(p, partition_tail_guards(p.body));
  std::string text = print_program(q);
  EXPECT_NE(text.find("if (jo < 2) {"), std::string::npos) << text;
  EXPECT_NE(text.find("for ji in 0..5 {"), std::string::npos) << text;
  EXPECT_EQ(count(text, "< 21"), 0) << text;
  expect_same_values(p, q);
}

}  // namespace
}  // namespace tessera
