// The executor's compiled kernels against the reference path, on hand-built graphs after the
// default passes (so fused nodes run too).
#include "graph/executor.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>

#include "db/record_db.h"
#include "graph/kernels.h"
#include "graph/npy.h"
#include "graph/passes.h"
#include "graph/reference.h"
#include "graph_builder.h"
#include "measure/target.h"
#include "ops/templates.h"
#include "ops/workload.h"
#include "runtime/isa.h"
#include "tir/printer.h"

namespace tessera {
namespace {

using graph::Graph;
using graph::HostTensor;
using testing::GraphBuilder;

// Runs g with the executor and with the reference path on one random input; returns the error.
double executor_error(Graph g, GraphBuilder& b, graph::Executor* out = nullptr,
                      const graph::PassOptions& options = {}) {
  HostTensor x = b.random_tensor(g.shape(g.inputs[0]));
  graph::run_default_passes(g, options);
  graph::ExecutorParams params;
  params.threads = 2;
  graph::Executor ex = graph::Executor::compile(g, params);
  ex.input(0).from_doubles(x.data);
  ex.run();
  HostTensor expected = graph::run_reference(g, {{g.inputs[0], x}}).at(0);
  HostTensor got = ex.output(0);
  EXPECT_EQ(got.shape, expected.shape);
  if (out) *out = std::move(ex);
  return testing::max_relative_error(got, expected);
}

TEST(GraphExecutor, ResidualConvNetMatchesTheReference) {
  GraphBuilder b(11);
  std::string x = b.input({1, 3, 12, 12});
  std::string h = b.node("Relu", {b.batch_norm(b.conv(x, 3, 8, 3, 1, 1), 8)});
  h = b.node(
      "MaxPool", {h},
      {{"kernel_shape", std::vector<int64_t>{2, 2}}, {"strides", std::vector<int64_t>{2, 2}}});
  std::string r = b.batch_norm(b.conv(h, 8, 8, 3, 1, 1, 1, false), 8);
  h = b.node("Relu", {b.node("Add", {r, h})});
  h = b.node("Flatten", {b.node("GlobalAveragePool", {h})});
  Graph g = b.finish(b.node("Softmax", {b.node("Gemm", {h, b.random({10, 8}), b.random({10})},
                                               {{"transB", int64_t{1}}})}));
  graph::Executor ex;
  // The model's own layout: its 8 channels are no blocks on AVX-512 anyway.
  EXPECT_LT(executor_error(g, b, &ex, {.blocked_layout = false}), 1e-4);
  // conv2d_bias_relu, conv2d + its epilogue, max pool, global pool, dense + bias, softmax.
  std::vector<std::string> kernels;
  for (const graph::KernelInfo& k : ex.kernels()) kernels.push_back(k.workload);
  // Its constant weights arrive packed in blocks of the ISA's lanes where those divide O.
  const int lanes = target_isa().f32_lanes;
  EXPECT_EQ(kernels.at(0), std::string("conv2d_bias_relu:N=1,C=3,H=12,W=12,O=8,K=3,S=1,P=1") +
                               (8 % lanes == 0 ? ",WB=8" : ""));
  EXPECT_EQ(ex.kernels().at(0).schedule, "default");
  EXPECT_EQ(kernels.at(1), "max_pool2d:N=1,C=8,H=12,W=12,K=2,S=2,P=0");
}

TEST(GraphExecutor, DepthwiseConvWithClipAndGroupedConvMatchTheReference) {
  GraphBuilder b(12);
  std::string x = b.input({1, 8, 9, 9});
  std::string h = b.node("Clip", {b.conv(x, 8, 8, 3, 2, 1, 8)}, {{"min", 0.0}, {"max", 6.0}});
  h = b.conv(h, 8, 4, 3, 1, 1, 2);  // two groups
  graph::Executor ex;
  EXPECT_LT(executor_error(b.finish(h), b, &ex, {.blocked_layout = false}), 1e-4);
  EXPECT_EQ(ex.kernels().at(0).workload, "depthwise_conv2d:N=1,C=8,H=9,W=9,K=3,S=2,P=1");
  // Blocked, the grouped convolution reads NCHW again.
  EXPECT_LT(executor_error(b.finish(h), b), 1e-4);
}

std::vector<std::string> workloads(const graph::Executor& ex) {
  std::vector<std::string> out;
  for (const graph::KernelInfo& k : ex.kernels()) out.push_back(k.workload);
  return out;
}

int count_prefix(const std::vector<std::string>& v, const std::string& prefix) {
  return static_cast<int>(std::count_if(
      v.begin(), v.end(), [&](const std::string& s) { return s.starts_with(prefix); }));
}

// A ResNet block and a MobileNet block in channel blocks: the first convolution reads the
// image's three channels as NCHW (blocks of one, IB=1: no conversion at the input), every
// epilogue (bias, residual, relu, relu6) inside its convolution, the pools reading blocks.
TEST(GraphExecutor, BlockedLayoutKeepsConvolutionChainsInChannelBlocks) {
  GraphBuilder b(17);
  std::string x = b.input({1, 3, 20, 20});
  std::string h = b.node("Relu", {b.batch_norm(b.conv(x, 3, 32, 3, 1, 1), 32)});
  h = b.node("MaxPool", {h},
             {{"kernel_shape", std::vector<int64_t>{3, 3}},
              {"strides", std::vector<int64_t>{2, 2}},
              {"pads", std::vector<int64_t>{1, 1, 1, 1}}});
  std::string r = b.batch_norm(b.conv(h, 32, 32, 3, 1, 1, 1, false), 32);
  h = b.node("Relu", {b.node("Add", {r, h})});
  std::string d = b.node("Clip", {b.batch_norm(b.conv(h, 32, 32, 3, 2, 1, 32, false), 32)},
                         {{"min", 0.0}, {"max", 6.0}});
  d = b.node("Relu", {b.node("Mul", {d, b.random({1, 32, 1, 1})})});
  h = b.node("Flatten", {b.node("GlobalAveragePool", {d})});
  Graph g = b.finish(b.node("Gemm", {h, b.random({10, 32})}, {{"transB", int64_t{1}}}));
  graph::Executor ex;
  EXPECT_LT(executor_error(g, b, &ex), 1e-4);
  std::vector<std::string> k = workloads(ex);
  EXPECT_EQ(count_prefix(k, "graph:to_blocked"), 0);
  EXPECT_EQ(count_prefix(k, "conv2d_nchwc:N=1,C=3,H=20,W=20,O=32,K=3,S=1,P=1,"), 1);
  EXPECT_EQ(std::count_if(k.begin(), k.end(),
                          [](const std::string& s) {
                            return s.starts_with("conv2d_nchwc:N=1,C=3,") &&
                                   s.find(",IB=1,") != std::string::npos;
                          }),
            1);
  EXPECT_EQ(count_prefix(k, "graph:from_blocked"), 0) << "the global pool reads blocks";
  EXPECT_EQ(count_prefix(k, "graph:max_pool_blocked"), 1);
  EXPECT_EQ(count_prefix(k, "conv2d:"), 0);
  EXPECT_EQ(count_prefix(k, "conv2d_nchwc:"), 2);
  // The key names CB only where it is not the default 16 (AVX2's 8).
  const std::string res = "conv2d_nchwc:N=1,C=32,H=10,W=10,O=32,K=3,S=1,P=1,";
  EXPECT_EQ(std::count_if(k.begin(), k.end(),
                          [&](const std::string& s) {
                            return s.starts_with(res) && s.ends_with(",BIAS=1,RES=1,ACT=1");
                          }),
            1);
  EXPECT_EQ(std::count_if(k.begin(), k.end(),
                          [](const std::string& s) {
                            return s.starts_with("depthwise_conv2d_nchwc:") &&
                                   s.ends_with(",BIAS=1,ACT=2");
                          }),
            1);
}

// Max pools with ceil_mode's overhang (GoogLeNet's) and with pads of their own on each side
// read channel blocks: no conversion between the convolutions around them.
TEST(GraphExecutor, CeilModeAndAsymmetricMaxPoolsReadChannelBlocks) {
  GraphBuilder b(29);
  std::string x = b.input({1, 16, 20, 20});
  std::string h = b.node("Relu", {b.conv(x, 16, 32, 3, 1, 1)});
  h = b.node("MaxPool", {h},
             {{"kernel_shape", std::vector<int64_t>{3, 3}},
              {"strides", std::vector<int64_t>{2, 2}},
              {"ceil_mode", int64_t{1}}});
  h = b.node("Relu", {b.conv(h, 32, 32, 1, 1, 0)});
  h = b.node("MaxPool", {h},
             {{"kernel_shape", std::vector<int64_t>{2, 2}},
              {"strides", std::vector<int64_t>{1, 1}},
              {"pads", std::vector<int64_t>{0, 0, 1, 1}}});
  Graph g = b.finish(b.conv(h, 32, 16, 1, 1, 0));
  EXPECT_EQ(g.shape(h), (std::vector<int64_t>{1, 32, 10, 10}));
  graph::Executor ex;
  EXPECT_LT(executor_error(g, b, &ex), 1e-5);
  std::vector<std::string> k = workloads(ex);
  EXPECT_EQ(count_prefix(k, "graph:max_pool_blocked"), 2);
  EXPECT_EQ(count_prefix(k, "graph:from_blocked"), 1) << "at the output only";
}

// Grouped convolutions whose groups are whole blocks (RegNet's 8 channels a group) run blocked,
// each output block reading its group's input blocks; groups of fewer channels merge into groups
// of one block (pad_channels).
TEST(GraphExecutor, GroupedConvolutionsOfWholeBlocksRunBlocked) {
  GraphBuilder b(23);
  std::string x = b.input({1, 16, 20, 20});
  std::string h = b.node("Relu", {b.batch_norm(b.conv(x, 16, 32, 1, 1, 0), 32)});
  h = b.node("Relu", {b.batch_norm(b.conv(h, 32, 32, 3, 2, 1, 4, false), 32)});
  std::string r = b.batch_norm(b.conv(h, 32, 32, 3, 1, 1, 2, false), 32);
  h = b.node("Relu", {b.node("Add", {r, h})});
  h = b.node("Relu", {b.batch_norm(b.conv(h, 32, 32, 3, 1, 1, 8, false), 32)});
  Graph g = b.finish(b.conv(h, 32, 16, 1, 1, 0));
  graph::Executor ex;
  EXPECT_LT(executor_error(g, b, &ex), 1e-4);
  std::vector<std::string> k = workloads(ex);
  // With vectors of 16 the groups of 8 merge two at a time (pad_channels), and blocks of 16 are
  // the keys' default.
  const bool wide = target_isa().f32_lanes == 16;
  EXPECT_EQ(count_prefix(k, wide ? "conv2d_nchwc:N=1,C=32,H=20,W=20,O=32,K=3,S=2,P=1,G=2,BIAS"
                                 : "conv2d_nchwc:N=1,C=32,H=20,W=20,O=32,K=3,S=2,P=1,G=4,CB=8,"),
            1);
  const std::string residual = wide ? "conv2d_nchwc:N=1,C=32,H=10,W=10,O=32,K=3,S=1,P=1,G=2,BIAS"
                                    : "conv2d_nchwc:N=1,C=32,H=10,W=10,O=32,K=3,S=1,P=1,G=2,CB=8,";
  EXPECT_EQ(std::count_if(k.begin(), k.end(),
                          [&](const std::string& s) {
                            return s.starts_with(residual) && s.ends_with(",BIAS=1,RES=1,ACT=1");
                          }),
            1);
  // The groups of 4 channels merge too, into groups of one block: nothing left unblocked.
  EXPECT_EQ(count_prefix(k, wide ? "conv2d_nchwc:N=1,C=32,H=10,W=10,O=32,K=3,S=1,P=1,G=2,BIAS"
                                 : "conv2d_nchwc:N=1,C=32,H=10,W=10,O=32,K=3,S=1,P=1,G=4,CB=8,"),
            wide ? 2 : 1);
  EXPECT_EQ(count_prefix(k, "conv2d_nchwc:"), 5);
  EXPECT_EQ(count_prefix(k, "graph:from_blocked"), 1) << "at the output only";
}

// Blocked 3x3 stride-1 convolutions with enough tiles run as Winograd F(4x4, 3x3): whole tiles
// (28x28) with bias, residual and Relu in the output transform, and a partial last tile (30x30)
// through the padded output and the crop kernel with Relu6; the same graph with
// `winograd = false` runs the direct kernel.
TEST(GraphExecutor, WinogradConvolutionsMatchTheReference) {
  for (int64_t size : {28, 30}) {
    GraphBuilder b(19);
    std::string x = b.input({1, 64, size, size});
    std::string h = b.node("Clip", {b.batch_norm(b.conv(x, 64, 64, 3, 1, 1), 64)},
                           {{"min", 0.0}, {"max", 6.0}});
    std::string r = b.batch_norm(b.conv(h, 64, 64, 3, 1, 1, 1, false), 64);
    Graph g = b.finish(b.node("Relu", {b.node("Add", {r, h})}));
    graph::Executor ex;
    EXPECT_LT(executor_error(g, b, &ex), 1e-4) << size;
    std::vector<std::string> k = workloads(ex);
    EXPECT_EQ(count_prefix(k, "conv2d_nchwc:"), 0) << size;
    EXPECT_EQ(count_prefix(k, "graph:winograd_input"), 1) << size;
    const int64_t rows = size == 28 ? 54 : 66;  // 49 and 64 tiles, in multiples of 6
    EXPECT_EQ(count_prefix(k, fmt::format("batch_matmul:B=36,M={},N=64,K=64", rows)), 1) << size;
    EXPECT_EQ(count_prefix(k, "graph:winograd_crop"), size == 28 ? 0 : 2) << size;

    graph::Executor direct;
    EXPECT_LT(executor_error(g, b, &direct, {.winograd = false}), 1e-4) << size;
    k = workloads(direct);
    EXPECT_EQ(count_prefix(k, "conv2d_nchwc:"), 2) << size;
    EXPECT_EQ(count_prefix(k, "graph:winograd"), 0) << size;
  }
}

// Squeeze-excite as torchvision exports it, `scale * x`: the blocked operand second and the
// scale NCHW (its convolution's 20 channels fill no block). The product stays in blocks: the
// only conversion out of them is the model's output.
TEST(GraphExecutor, ABlockedOperandSecondKeepsTheProductInBlocks) {
  GraphBuilder b(41);
  std::string x = b.input({1, 16, 8, 8});
  std::string h = b.node("Relu", {b.conv(x, 16, 16, 3, 1, 1)});
  std::string s = b.node("Relu", {b.conv(b.node("GlobalAveragePool", {h}), 16, 20, 1, 1, 0)});
  s = b.node("Sigmoid", {b.conv(s, 20, 16, 1, 1, 0)});
  std::string y = b.conv(b.node("Mul", {s, h}), 16, 16, 1, 1, 0);
  Graph g = b.finish(y);
  graph::Executor ex;
  EXPECT_LT(executor_error(g, b, &ex), 1e-4);
  int full_size_conversions = 0;
  for (const graph::KernelInfo& k : ex.kernels())
    if (k.workload.starts_with("graph:from_blocked(") &&
        k.workload.find(", 8, 8, ") != std::string::npos)
      full_size_conversions += k.uses;
  EXPECT_EQ(full_size_conversions, 1) << fmt::format("{}", fmt::join(workloads(ex), "\n"));
}

// Squeeze-excite's `s * x` before a convolution becomes the convolution of x with its weights
// scaled along their input channels where that touches fewer values (O*K*K < H*W: at 16x16, not
// at 4x4), also with input channels in no whole block (read as blocks of one).
TEST(GraphExecutor, SqueezeExciteScalesTheNextConvolutionsWeights) {
  struct Case {
    int64_t channels, size;
    bool folds;
  };
  for (Case c : {Case{16, 16, true}, Case{16, 4, false}, Case{4, 16, true}}) {
    GraphBuilder b(47);
    std::string x = b.input({1, c.channels, c.size, c.size});
    std::string h = c.channels == 4 ? x : b.node("Relu", {b.conv(x, 16, 16, 3, 1, 1)});
    std::string s =
        b.node("Relu", {b.conv(b.node("GlobalAveragePool", {h}), c.channels, 8, 1, 1, 0)});
    s = b.node("Sigmoid", {b.conv(s, 8, c.channels, 1, 1, 0)});
    Graph g = b.finish(b.conv(b.node("Mul", {s, h}), c.channels, 16, 3, 1, 1));
    Graph passed = g;
    graph::run_default_passes(passed);
    int scaled = 0;
    for (const graph::Node& n : passed.nodes) scaled += n.attr_int(graph::kScaledWeightsAttr, 0);
    EXPECT_EQ(scaled, c.folds ? 1 : 0) << graph::print_graph(passed);
    HostTensor in = b.random_tensor(g.shape(g.inputs[0]));
    EXPECT_LT(testing::max_relative_error(graph::run_reference(passed, {{g.inputs[0], in}}).at(0),
                                          graph::run_reference(g, {{g.inputs[0], in}}).at(0)),
              1e-12);
    EXPECT_LT(executor_error(g, b), 1e-4) << c.channels << " " << c.size;
  }
}

// On AVX2 a 1x1 stride-1 convolution with at least as many tiles of two channel blocks as rows
// runs as one row of H*W positions (the same memory); one with fewer keeps its rows.
TEST(GraphExecutor, PointwiseConvolutionsRunAsOneRowOnAvx2) {
  GraphBuilder b(43);
  std::string x = b.input({1, 24, 4, 4});
  std::string wide = b.node("Relu", {b.conv(x, 24, 72, 1, 1, 0)});  // 72 / 16 = 4 tiles, 4 rows
  std::string narrow = b.conv(wide, 72, 24, 1, 1, 0);               // 1 tile, 4 rows
  graph::Executor ex;
  EXPECT_LT(executor_error(b.finish(narrow), b, &ex), 1e-4);
  const bool avx2 = target_isa().vector_registers < 32;
  std::vector<std::string> k = workloads(ex);
  EXPECT_EQ(count_prefix(k, "conv2d_nchwc:N=1,C=24,H=1,W=16,O=72,K=1,S=1,P=0,CB=8"), avx2 ? 1 : 0)
      << fmt::format("{}", fmt::join(k, "\n"));
  EXPECT_EQ(count_prefix(k, "conv2d_nchwc:N=1,C=24,H=4,W=4,O=72,K=1,S=1,P=0,CB=8"), avx2 ? 0 : 1)
      << fmt::format("{}", fmt::join(k, "\n"));
  EXPECT_EQ(count_prefix(k, "conv2d_nchwc:N=1,C=72,H=4,W=4,O=24,K=1,S=1,P=0,CB=8"), 1);
}

// A strided 1x1 convolution over blocks narrower than a cache line reads its rows and columns
// out first and runs at stride 1. 24 channels take blocks of 8 on every ISA; odd sizes check
// the last row and column.
TEST(GraphExecutor, StridedPointwiseConvolutionsSubsampleNarrowBlocksFirst) {
  for (int64_t size : {14, 15}) {
    GraphBuilder b(23);
    std::string x = b.input({1, 24, size, size});
    std::string h = b.node("Relu", {b.batch_norm(b.conv(x, 24, 24, 3, 1, 1), 24)});
    std::string down = b.batch_norm(b.conv(h, 24, 48, 1, 2, 0, 1, false), 48);
    std::string main = b.batch_norm(b.conv(h, 24, 48, 3, 2, 1, 1, false), 48);
    Graph g = b.finish(b.node("Relu", {b.node("Add", {main, down})}));
    graph::Executor ex;
    EXPECT_LT(executor_error(g, b, &ex), 1e-4) << size;
    std::vector<std::string> k = workloads(ex);
    const int64_t half = (size - 1) / 2 + 1;
    EXPECT_EQ(count_prefix(k, fmt::format("graph:subsample_blocked([1, 3, {0}, {0}, 8], [1, 3, "
                                          "{1}, {1}, 8])",
                                          size, half)),
              1)
        << fmt::format("{}", fmt::join(k, "\n"));
    EXPECT_EQ(count_prefix(
                  k, fmt::format("conv2d_nchwc:N=1,C=24,H={0},W={0},O=48,K=1,S=1,P=0,CB=8", half)),
              1)
        << size;
    EXPECT_EQ(count_prefix(k, "conv2d_nchwc:N=1,C=24,H=14,W=14,O=48,K=1,S=2"), 0) << size;
  }
}

// Values whose lifetimes do not overlap share memory, and what one run leaves there (the
// Winograd path's padded tiles, a residual's old sum) never reaches the next run's outputs.
TEST(GraphExecutor, ASecondRunOverValuesSharingMemorySeesNothingOfTheFirst) {
  GraphBuilder b(23);
  std::string x = b.input({1, 16, 30, 30});
  std::string h = b.node("Relu", {b.batch_norm(b.conv(x, 16, 16, 3, 1, 1), 16)});
  for (int i = 0; i < 3; ++i)
    h = b.node("Relu",
               {b.node("Add", {b.batch_norm(b.conv(h, 16, 16, 3, 1, 1, 1, false), 16), h})});
  Graph g = b.finish(b.node("GlobalAveragePool", {h}));
  graph::run_default_passes(g);
  graph::ExecutorParams params;
  params.threads = 2;
  graph::Executor ex = graph::Executor::compile(g, params);
  graph::Executor::MemoryPlan memory = ex.plan_memory();
  EXPECT_LT(memory.arena_bytes * 2, memory.separate_bytes);
  for (uint64_t seed : {1, 2}) {
    GraphBuilder inputs(seed);
    HostTensor in = inputs.random_tensor(g.shape(g.inputs[0]));
    ex.input(0).from_doubles(in.data);
    ex.run();
    HostTensor expected = graph::run_reference(g, {{g.inputs[0], in}}).at(0);
    EXPECT_LT(testing::max_relative_error(ex.output(0), expected), 1e-4) << seed;
  }
}

// In a model a blocked convolution with a megabyte or more of weights prefetches them ahead on
// AVX-512 (they come from DRAM there, not from the cache they sit in when tuned); a small one
// does not. On AVX2 a hint beside the register tile's few stores costs more than it hides.
TEST(GraphExecutor, LargeConvolutionWeightsArePrefetchedInTheModel) {
  GraphBuilder b(29);
  std::string x = b.input({1, 16, 4, 4});
  std::string h = b.node("Relu", {b.batch_norm(b.conv(x, 16, 256, 3, 1, 1), 256)});
  h = b.node("Relu", {b.batch_norm(b.conv(h, 256, 256, 3, 1, 1), 256)});
  Graph g = b.finish(h);
  graph::Executor ex;
  EXPECT_LT(executor_error(g, b, &ex), 1e-4);
  int prefetched = 0, small = 0;
  for (const graph::KernelInfo& k : ex.kernels()) {
    if (!k.workload.starts_with("conv2d_nchwc:")) continue;
    bool hinted = k.in_model.starts_with("prefetch(weight, ib, ");
    EXPECT_EQ(k.strategy.find("prefetch"), std::string::npos) << k.strategy;
    if (k.workload.find("C=256,") != std::string::npos) {
      prefetched += hinted;
    } else {
      small += hinted;
    }
  }
  EXPECT_EQ(prefetched, target_isa().name == "avx512" ? 1 : 0);
  EXPECT_EQ(small, 0);
}

// A pre-packed dense with a megabyte or more of weights hints the next column block's panel
// across the current one in the model; a small one does not, and both stay correct.
TEST(GraphExecutor, LargeDenseWeightsHintTheNextPanelInTheModel) {
  GraphBuilder b(31);
  std::string x = b.input({64, 512});
  std::string h = b.node("Relu", {b.node("MatMul", {x, b.random({512, 1024})})});
  h = b.node("MatMul", {h, b.random({1024, 16})});
  Graph g = b.finish(h);
  graph::Executor ex;
  EXPECT_LT(executor_error(g, b, &ex), 1e-4);
  int hinted_large = 0, hinted_small = 0, dense = 0;
  for (const graph::KernelInfo& k : ex.kernels()) {
    if (!k.workload.starts_with("dense:")) continue;
    ++dense;
    bool hinted = k.in_model.starts_with("prefetch_next(W, j.outer, ");
    EXPECT_EQ(k.strategy.find("prefetch"), std::string::npos) << k.strategy;
    if (k.workload.find("O=1024,") != std::string::npos) {
      hinted_large += hinted;
    } else {
      hinted_small += hinted;
    }
  }
  EXPECT_EQ(dense, 2);
  EXPECT_EQ(hinted_large, 1);
  EXPECT_EQ(hinted_small, 0);
}

// A batched product with a megabyte or more of right operand (Winograd's transformed weights)
// hints the next column panel across the current one; a small one does not. With one row tile
// the panel's lines crowd the few steps of k: on AVX2 12 stores a hint, too few to pay
// (ops/in_model.cpp); on AVX-512, whose default panels are 64 wide, 32 lines a step of k, more
// than prefetch_next takes.
TEST(GraphExecutor, LargeBatchedProductsHintTheNextPanelInTheModel) {
  GraphBuilder b(37);
  std::string x = b.input({16, 54, 128});
  std::string h = b.node("MatMul", {x, b.random({16, 128, 128})});
  h = b.node("MatMul", {h, b.random({16, 128, 8})});
  Graph g = b.finish(h);
  GraphBuilder one(38);
  Graph one_tile =
      one.finish(one.node("MatMul", {one.input({16, 6, 128}), one.random({16, 128, 128})}));
  std::map<std::string, std::string> in_model, strategies;
  for (auto [model, builder] : {std::pair{&g, &b}, std::pair{&one_tile, &one}}) {
    graph::Executor ex;
    EXPECT_LT(executor_error(*model, *builder, &ex), 1e-4);
    for (const graph::KernelInfo& k : ex.kernels()) {
      in_model[k.workload] = k.in_model;
      strategies[k.workload] = k.strategy;
    }
  }
  const std::string hint = "prefetch_next(B, j.outer, k.outer)";
  ASSERT_EQ(in_model.count("batch_matmul:B=16,M=54,N=128,K=128"), 1u);
  EXPECT_EQ(in_model["batch_matmul:B=16,M=54,N=128,K=128"], hint);
  ASSERT_EQ(in_model.count("batch_matmul:B=16,M=54,N=8,K=128"), 1u);
  EXPECT_EQ(in_model["batch_matmul:B=16,M=54,N=8,K=128"], "");
  ASSERT_EQ(in_model.count("batch_matmul:B=16,M=6,N=128,K=128"), 1u);
  EXPECT_EQ(in_model["batch_matmul:B=16,M=6,N=128,K=128"], "")
      << strategies["batch_matmul:B=16,M=6,N=128,K=128"];
}

// A strategy given for a workload (the compile command's in-model choice among re-timed
// candidates) is what its kernel runs, and the model still matches the reference.
TEST(GraphExecutor, GivenStrategiesReplaceTheConfigurationAndStayCorrect) {
  GraphBuilder b(21);
  std::string x = b.input({1, 16, 8, 8});
  Graph g = b.finish(b.node("Relu", {b.conv(x, 16, 16, 3, 1, 1)}));
  HostTensor input = b.random_tensor(g.shape(g.inputs[0]));
  graph::run_default_passes(g, {.winograd = false});
  std::vector<graph::PlannedWorkload> planned = graph::Executor::library_workloads(g);
  ASSERT_EQ(planned.size(), 1u);
  const std::string& workload = planned[0].workload;
  graph::ExecutorParams params;
  params.threads = 2;
  const std::string default_strategy = graph::Executor::compile(g, params).kernels()[0].strategy;
  Workload w = parse_workload(workload);
  ConfigSpace space = space_for(w);
  std::string other;
  for (uint64_t i = 0; i < space.size() && other.empty(); i += 7) {
    ProgramStrategy s = space.instantiate(space.from_index(i));
    if (s.text() != default_strategy && s(instantiate(w).program)) other = s.text();
  }
  ASSERT_FALSE(other.empty());
  params.strategies[workload] = other;
  graph::Executor ex = graph::Executor::compile(g, params);
  const graph::KernelInfo* kernel = nullptr;
  for (const graph::KernelInfo& k : ex.kernels())
    if (k.workload == workload) kernel = &k;
  ASSERT_NE(kernel, nullptr);
  EXPECT_EQ(kernel->strategy, other);
  EXPECT_EQ(kernel->schedule, "db");
  ex.input(0).from_doubles(input.data);
  ex.run();
  HostTensor expected = graph::run_reference(g, {{g.inputs[0], input}}).at(0);
  EXPECT_LT(testing::max_relative_error(ex.output(0), expected), 1e-4);
}

// A model runs the records timed as in a model (compile's tuning) where a workload has any, even
// when records timed alone read faster: the two kinds of time are not compared.
TEST(GraphExecutor, RecordsTimedInAModelComeFirst) {
  GraphBuilder b(22);
  std::string x = b.input({1, 16, 8, 8});
  Graph g = b.finish(b.node("Relu", {b.conv(x, 16, 16, 3, 1, 1)}));
  graph::run_default_passes(g, {.winograd = false});
  std::vector<graph::PlannedWorkload> planned = graph::Executor::library_workloads(g);
  ASSERT_EQ(planned.size(), 1u);
  const std::string& workload = planned[0].workload;
  Workload w = parse_workload(workload);
  ConfigSpace space = space_for(w);
  std::vector<std::string> strategies;
  for (uint64_t i = 0; i < space.size() && strategies.size() < 2; i += 5) {
    ProgramStrategy s = space.instantiate(space.from_index(i));
    if (s(instantiate(w).program)) strategies.push_back(s.text());
  }
  ASSERT_EQ(strategies.size(), 2u);
  const std::string path = ::testing::TempDir() + "/records_in_model_first.db";
  std::filesystem::remove(path);
  auto record = [&](const std::string& strategy, double seconds) {
    MeasureResult r;
    r.workload = workload;
    r.strategy = strategy;
    r.dtype = "float32";
    r.flops = 1e6;
    r.timing = summarize_repeats({seconds, seconds, seconds}, 1);
    return r;
  };
  graph::ExecutorParams params;
  params.threads = 2;
  params.db = path;
  auto strategy_run = [&] {
    graph::Executor ex = graph::Executor::compile(g, params);
    for (const graph::KernelInfo& k : ex.kernels())
      if (k.workload == workload) return k.strategy;
    return std::string("(no kernel)");
  };
  {
    RecordDb db = RecordDb::open(path, RecordDb::Mode::kReadWrite);
    db.append(detect_target(), {record(strategies[0], 1e-6)});
  }
  EXPECT_EQ(strategy_run(), strategies[0]);
  {
    RecordDb db = RecordDb::open(path, RecordDb::Mode::kReadWrite);
    db.append(detect_target().in_model(), {record(strategies[1], 1e-3)});
  }
  EXPECT_EQ(strategy_run(), strategies[1]);
  std::filesystem::remove(path);
}

// Where a blocked value meets an operator that reads NCHW (Concat, Transpose), it is converted
// back once, however many read it; a graph output is always NCHW.
TEST(GraphExecutor, BlockedValuesAreConvertedBackOnceAtTheEdges) {
  GraphBuilder b(18);
  std::string x = b.input({1, 16, 6, 6});
  std::string h = b.node("Relu", {b.conv(x, 16, 16, 3, 1, 1)});
  std::string c = b.node("Concat", {h, x, h}, {{"axis", int64_t{1}}});
  std::string t = b.node("Transpose", {h}, {{"perm", std::vector<int64_t>{0, 2, 3, 1}}});
  std::string f = b.node("Reshape", {t, b.constant({{4}, {1, 16, 6, 6}, true})});
  Graph g = b.finish(b.node("Add", {c, b.node("Concat", {f, f, f}, {{"axis", int64_t{1}}})}));
  graph::Executor ex;
  EXPECT_LT(executor_error(g, b, &ex), 1e-4);
  std::vector<std::string> k = workloads(ex);
  EXPECT_EQ(count_prefix(k, "graph:from_blocked"), 1);
  EXPECT_EQ(count_prefix(k, "conv2d_nchwc:"), 1);
}

TEST(GraphExecutor, ConcatTransposeMatMulAndLoneBatchNormMatchTheReference) {
  GraphBuilder b(13);
  std::string x = b.input({2, 3, 4, 4});
  std::string a = b.node(
      "AveragePool", {x},
      {{"kernel_shape", std::vector<int64_t>{2, 2}}, {"strides", std::vector<int64_t>{2, 2}}});
  std::string m = b.batch_norm(b.node("Mul", {a, b.random({1, 3, 1, 1})}), 3);
  std::string c = b.node("Concat", {a, m, a}, {{"axis", int64_t{1}}});  // [2, 9, 2, 2]
  std::string t = b.node("Transpose", {c}, {{"perm", std::vector<int64_t>{0, 2, 3, 1}}});
  std::string r = b.node("Reshape", {t, b.constant({{2}, {8, 9}, true})});
  Graph g = b.finish(b.node("Relu", {b.node("MatMul", {r, b.random({9, 5})})}));
  EXPECT_LT(executor_error(g, b), 1e-4);
}

TEST(GraphExecutor, IdenticalWorkloadsCompileOnce) {
  GraphBuilder b(14);
  std::string x = b.input({1, 4, 8, 8});
  std::string h = x;
  for (int i = 0; i < 3; ++i) h = b.node("Relu", {b.conv(h, 4, 4, 3, 1, 1)});
  graph::Executor ex;
  EXPECT_LT(executor_error(b.finish(h), b, &ex), 1e-4);
  ASSERT_EQ(ex.kernels().size(), 1u);
  EXPECT_EQ(ex.kernels()[0].uses, 3);
  EXPECT_EQ(ex.steps(), 3);
}

// What `tessera compile` tunes is what compile() builds: one entry per library step, in order.
TEST(GraphExecutor, LibraryWorkloadsAreTheLibraryKernelsCompileBuilds) {
  GraphBuilder b(16);
  std::string x = b.input({1, 4, 8, 8});
  std::string h = x;
  for (int i = 0; i < 3; ++i) h = b.node("Relu", {b.conv(h, 4, 4, 3, 1, 1)});
  h = b.node("Flatten", {b.node("GlobalAveragePool", {h})});
  Graph g = b.finish(b.node("Gemm", {h, b.random({5, 4})}, {{"transB", int64_t{1}}}));
  graph::run_default_passes(g);
  std::vector<graph::PlannedWorkload> planned = graph::Executor::library_workloads(g);
  ASSERT_EQ(planned.size(), 4u);
  const std::string conv = "conv2d_bias_relu:N=1,C=4,H=8,W=8,O=4,K=3,S=1,P=1";
  for (int i = 0; i < 3; ++i) EXPECT_EQ(planned[i].workload, conv);
  EXPECT_EQ(planned[3].workload, "dense:B=1,I=4,O=5");
  EXPECT_EQ(planned[0].node, g.nodes[0].name);
  EXPECT_NE(planned[1].node, planned[0].node);

  graph::Executor ex = graph::Executor::compile(g);
  std::map<std::string, int> uses;
  for (const graph::PlannedWorkload& w : planned) ++uses[w.workload];
  std::map<std::string, int> built;
  for (const graph::KernelInfo& k : ex.kernels())
    if (!k.workload.starts_with("graph:")) built[k.workload] = k.uses;
  EXPECT_EQ(built, uses);
}

// Windows the library's convolutions do not take (asymmetric pads, 1x7 and 7x1 kernels, unequal
// strides) run as the generic te convolution, fused epilogue and all.
TEST(GraphExecutor, AnyConvolutionWindowMatchesTheReference) {
  const std::vector<std::map<std::string, graph::AttrValue>> windows = {
      {{"pads", std::vector<int64_t>{0, 0, 1, 1}}},
      {{"kernel_shape", std::vector<int64_t>{1, 3}}, {"pads", std::vector<int64_t>{0, 1, 0, 1}}},
      {{"kernel_shape", std::vector<int64_t>{3, 1}}, {"strides", std::vector<int64_t>{2, 1}}},
  };
  for (size_t i = 0; i < windows.size(); ++i) {
    SCOPED_TRACE(i);
    GraphBuilder b(15);
    std::string x = b.input({1, 4, 7, 6});
    auto kernel = windows[i].count("kernel_shape")
                      ? std::get<std::vector<int64_t>>(windows[i].at("kernel_shape"))
                      : std::vector<int64_t>{3, 3};
    std::map<std::string, graph::AttrValue> attrs = windows[i];
    attrs["group"] = int64_t{2};
    std::string conv =
        b.node("Conv", {x, b.random({8, 2, kernel[0], kernel[1]}), b.random({8})}, attrs);
    Graph g = b.finish(b.node("Relu", {conv}));
    EXPECT_LT(executor_error(g, b), 1e-5);
  }
}

// Inception's 1x7 and 7x1 windows run as the blocked kernel (KW and PW where they differ from K
// and P), as does a 1x3 whose pads differ by side (padded in blocks first).
TEST(GraphExecutor, RectangularWindowsRunBlocked) {
  using V = std::vector<int64_t>;
  GraphBuilder b(17);
  std::string x = b.input({1, 16, 9, 8});
  std::string y = b.node("Conv", {x, b.random({16, 16, 1, 7}, -0.3, 0.3), b.random({16})},
                         {{"kernel_shape", V{1, 7}}, {"pads", V{0, 3, 0, 3}}});
  y = b.node("Relu", {y});
  y = b.node("Conv", {y, b.random({32, 16, 7, 1}, -0.3, 0.3)},
             {{"kernel_shape", V{7, 1}}, {"pads", V{3, 0, 3, 0}}});
  y = b.node("Conv", {y, b.random({16, 32, 1, 3}, -0.3, 0.3)},
             {{"kernel_shape", V{1, 3}}, {"pads", V{0, 0, 0, 2}}});
  Graph g = b.finish(b.node("Relu", {y}));
  EXPECT_EQ(g.shape(g.outputs[0]), (V{1, 16, 9, 8}));
  graph::Executor ex;
  EXPECT_LT(executor_error(g, b, &ex), 1e-5);
  std::vector<std::string> rectangular;
  for (const graph::KernelInfo& k : ex.kernels()) {
    EXPECT_FALSE(k.workload.starts_with("graph:conv2d_any")) << k.workload;
    if (k.workload.find(",KW=") != std::string::npos) rectangular.push_back(k.workload);
  }
  ASSERT_EQ(rectangular.size(), 3u);
  EXPECT_NE(rectangular[0].find("K=1,S=1,P=0,"), std::string::npos) << rectangular[0];
  EXPECT_NE(rectangular[0].find(",KW=7,PW=3"), std::string::npos) << rectangular[0];
  EXPECT_NE(rectangular[1].find("K=7,S=1,P=3,"), std::string::npos) << rectangular[1];
  EXPECT_NE(rectangular[1].find(",KW=1,PW=0"), std::string::npos) << rectangular[1];
  EXPECT_NE(rectangular[2].find("W=10,O=16,K=1,S=1,P=0,"), std::string::npos) << rectangular[2];
}

// A square window with pads that differ by side (the phases of a strided ConvTranspose) runs
// blocked: its input padded in blocks first, then the unpadded kernel. An image's three channels
// are blocks of one; the 64-channel 3x3 with 16 output tiles would be Winograd were its pads equal.
TEST(GraphExecutor, UnequalPadsKeepTheConvolutionBlocked) {
  using V = std::vector<int64_t>;
  GraphBuilder b(16);
  std::string x = b.input({1, 3, 16, 16});
  std::string y = b.node("Conv", {x, b.random({16, 3, 2, 2}, -0.5, 0.5), b.random({16})},
                         {{"pads", V{1, 0, 0, 1}}});
  y = b.node("Relu", {y});
  y = b.node("Conv", {y, b.random({64, 16, 2, 2}, -0.5, 0.5)}, {{"pads", V{0, 1, 1, 0}}});
  y = b.node("Conv", {y, b.random({64, 64, 3, 3}, -0.2, 0.2), b.random({64})},
             {{"pads", V{1, 1, 1, 0}}});
  Graph g = b.finish(y);
  EXPECT_EQ(g.shape(g.outputs[0]), (V{1, 64, 16, 15}));
  graph::Executor ex;
  EXPECT_LT(executor_error(g, b, &ex), 1e-5);
  int pads = 0;
  for (const graph::KernelInfo& k : ex.kernels()) {
    pads += k.workload.starts_with("graph:pad_blocked(");
    EXPECT_FALSE(k.workload.starts_with("batch_matmul")) << "Winograd: " << k.workload;
    EXPECT_FALSE(k.workload.starts_with("conv2d:") || k.workload.starts_with("graph:conv2d_any"))
        << "the generic convolution: " << k.workload;
  }
  EXPECT_EQ(pads, 3);
}

// A global pool's threads count by what it reads: a large image to few channels takes them, a
// small one stays on one thread.
TEST(GraphExecutor, GlobalPoolsThreadByWhatTheyRead) {
  auto parallel = [](const std::vector<int64_t>& in_shape) {
    graph::TeKernel k = graph::global_avg_pool_kernel(in_shape);
    return print_program(k.program).find("parallel for") != std::string::npos;
  };
  EXPECT_TRUE(parallel({1, 4, 112, 112, 8}));  // 32 outputs of 12544 values each
  EXPECT_TRUE(parallel({1, 32, 112, 112}));
  EXPECT_FALSE(parallel({1, 4, 7, 7, 8}));
}

TEST(GraphNpy, RoundTripsShapeAndValues) {
  std::string path = ::testing::TempDir() + "/graph_npy_test.npy";
  for (std::vector<int64_t> shape : {std::vector<int64_t>{5}, {2, 3, 4}}) {
    HostTensor t{shape, {}, false};
    for (int64_t i = 0; i < graph::num_elements(shape); ++i) t.data.push_back(0.25 * i - 1);
    graph::write_npy(path, t);
    HostTensor back = graph::read_npy(path);
    EXPECT_EQ(back.shape, shape);
    EXPECT_EQ(back.data, t.data);
  }
}

TEST(GraphNpy, BadFilesAreOneLineErrors) {
  std::string path = ::testing::TempDir() + "/graph_npy_bad.npy";
  FILE* f = fopen(path.c_str(), "wb");
  fputs("not numpy", f);
  fclose(f);
  EXPECT_THROW(graph::read_npy(path), Error);
  EXPECT_THROW(graph::read_npy(path + ".missing"), Error);

  // Header shapes past int64, or whose product is absurd, are errors before any allocation.
  for (const std::string shape : {"(99999999999999999999999,)", "(4000000, 4000000, 4000000)"}) {
    std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': " + shape + ", }";
    header.append(63 - (10 + header.size()) % 64, ' ');
    header += '\n';
    f = fopen(path.c_str(), "wb");
    fwrite("\x93NUMPY\x01\x00", 1, 8, f);
    fputc(static_cast<int>(header.size() & 0xff), f);
    fputc(static_cast<int>(header.size() >> 8), f);
    fputs(header.c_str(), f);
    fclose(f);
    try {
      graph::read_npy(path);
      ADD_FAILURE() << shape;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("too large"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace tessera
