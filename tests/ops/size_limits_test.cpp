// Sizes past what 32-bit kernel indices reach are refused where they enter, with one clear
// error, instead of wrapping: workload keys whose product overflows, graph values, a split
// factor past the loop, a pack padded to a huge factor, and (as a last guard) codegen.
#include <gtest/gtest.h>

#include "codegen/codegen_c.h"
#include "graph/graph.h"
#include "ops/workload.h"
#include "schedule/strategy_parser.h"
#include "te/error.h"

namespace tessera {
namespace {

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// Every key is at most 2^20, but 16 x 2^20 x 2^20 x 2^20 wraps int64: a small allocation, then a
// heap write past it (SIGSEGV).
TEST(SizeLimits, WorkloadWhoseTensorsOverflowIsRefused) {
  std::string e = error_of([] {
    instantiate(parse_workload("conv2d:N=16,C=1048576,H=1048576,W=1048576,O=1,K=1,S=1048576,P=0"));
  });
  EXPECT_NE(e.find("more than 2147483647 elements"), std::string::npos) << e;
  EXPECT_NE(e.find("conv2d"), std::string::npos) << e;
  EXPECT_NO_THROW(instantiate(parse_workload("matmul:M=4096,N=4096,K=4096")));
}

// Found by fuzz/workload_fuzzer.cpp: a key the operator does not bound itself (a padding) past
// 2^62 overflowed the shape arithmetic.
TEST(SizeLimits, EveryWorkloadKeyIsBounded) {
  std::string e = error_of([] {
    instantiate(
        parse_workload("conv2d_bias_relu:N=4,C=3,H=5,W=5,O=1,K=6,S=1,P=6666665583332333333"));
  });
  EXPECT_NE(e.find("P=6666665583332333333 is too large"), std::string::npos) << e;
  EXPECT_NE(error_of([] {
              instantiate(parse_workload("conv2d:N=1,C=2,H=5,W=5,O=2,K=3,S=1,P=-2000000"));
            }).find("P=-2000000 is too large"),
            std::string::npos);
}

// Found by fuzz/workload_fuzzer.cpp: small arguments, but a padded input of 2^34 elements inside.
TEST(SizeLimits, IntermediateBuffersCountToo) {
  std::string e = error_of(
      [] { instantiate(parse_workload("conv2d:N=1,C=2,H=5,W=2,O=2,K=1,S=55125,P=55551,G=2")); });
  EXPECT_NE(e.find("tensor pad of shape [1, 2, 111107, 111104] has more than"), std::string::npos)
      << e;
}

TEST(SizeLimits, GraphValueOfTooManyElementsIsRefusedAtShapeInference) {
  graph::Graph g;
  g.inputs = {"x"};
  g.shapes["x"] = {1, 1};
  g.constants["shape"] = {{2}, {1048576.0, 1048576.0}, true};  // [2^20, 2^20]: 2^40 elements
  graph::Node n;
  n.name = "r";
  n.op = "Expand";
  n.inputs = {"x", "shape"};
  n.outputs = {"y"};
  g.nodes = {n};
  g.outputs = {"y"};
  std::string e = error_of([&] { graph::infer_shapes(g); });
  EXPECT_NE(e.find("more than 2^31 - 1 elements"), std::string::npos) << e;
  g.shapes.clear();
  g.shapes["x"] = {65536, 65536};  // an input of 2^32 elements
  g.nodes.clear();
  g.outputs = {"x"};
  e = error_of([&] { graph::infer_shapes(g); });
  EXPECT_NE(e.find("input 'x'"), std::string::npos) << e;
}

// split(i, 2^31) made a guarded inner loop of 2^31 iterations on 32-bit counters: a kernel that
// never ended. A factor past the extent now splits off nothing.
TEST(SizeLimits, SplitFactorPastTheExtentRunsTheExtent) {
  OpInstance op = instantiate(parse_workload("matmul:M=128,N=128,K=128"));
  RewriteResult<Program> r = parse_strategy("split(i, 2147483648)")(op.program);
  ASSERT_TRUE(r.ok()) << r.message();
  std::string c = codegen_c(r.program());
  EXPECT_EQ(c.find("2147483648"), std::string::npos) << c;
  EXPECT_NE(c.find("i_inner < 128"), std::string::npos) << c;
}

TEST(SizeLimits, PackToAHugeFactorIsNotApplicable) {
  OpInstance op = instantiate(parse_workload("matmul:M=128,N=128,K=128"));
  RewriteResult<Program> r = parse_strategy("pack(B, 1, 1073741824)")(op.program);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("2^31 - 1 elements"), std::string::npos) << r.message();
}

TEST(SizeLimits, CodegenRefusesLoopsPastThirtyTwoBitIndices) {
  Buffer b = make_buffer("B", DType::kFloat32, {1});
  Var i("i");
  Stmt loop = make_for(i, 0, int64_t{1} << 32, ForKind::kSerial,
                       make_store(b, {make_int(0)}, make_float(1.0, DType::kFloat32)));
  Program p;
  p.name = "big";
  p.outputs = {b};
  p.body = loop;
  std::string e = error_of([&] { codegen_c(p); });
  EXPECT_NE(e.find("past 32-bit indices"), std::string::npos) << e;
}

}  // namespace
}  // namespace tessera
