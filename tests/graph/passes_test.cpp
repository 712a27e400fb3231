// Each pass on hand-built graphs: what it rewrites, and that the reference path computes the same
// outputs before and after on random inputs.
#include "graph/passes.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "graph/executor.h"
#include "graph/op_attrs.h"
#include "graph/reference.h"
#include "graph_builder.h"
#include "pass_test_util.h"
#include "runtime/isa.h"

namespace tessera {
namespace {

using graph::Epilogue;
using graph::Graph;
using graph::HostTensor;
using testing::count_op;
using testing::GraphBuilder;
using testing::run;
using testing::run_compiled;

// conv -> bn -> relu, conv -> bn, + residual, relu: a ResNet basic block.
Graph residual_block(GraphBuilder& b, bool conv_bias) {
  std::string x = b.input({2, 4, 9, 9});
  std::string h = b.node("Relu", {b.batch_norm(b.conv(x, 4, 4, 3, 1, 1, 1, conv_bias), 4)});
  h = b.batch_norm(b.conv(h, 4, 4, 3, 1, 1, 1, conv_bias), 4);
  return b.finish(b.node("Relu", {b.node("Add", {h, x})}));
}

TEST(GraphPasses, BatchNormFoldsIntoTheConvWithTheSameOutputs) {
  for (bool bias : {true, false}) {
    GraphBuilder b(1);
    Graph g = residual_block(b, bias);
    HostTensor x = b.random_tensor({2, 4, 9, 9});
    HostTensor before = run(g, x);
    EXPECT_EQ(graph::fold_batch_norm(g), 2);
    EXPECT_EQ(count_op(g, "BatchNormalization"), 0);
    EXPECT_EQ(count_op(g, "Conv"), 2);
    for (const graph::Node& n : g.nodes) {
      if (n.op == "Conv") {
        EXPECT_EQ(n.inputs.size(), 3u) << "the folded conv gains a bias";
      }
    }
    EXPECT_LT(testing::max_relative_error(run(g, x), before), 1e-12) << graph::print_graph(g);
  }
}

// The Conv's output is read twice, so the batch norm cannot go into its weights: it becomes a
// Mul and an Add of per-channel constants, the Conv unchanged.
TEST(GraphPasses, BatchNormStaysWhenTheConvOutputHasAnotherReader) {
  GraphBuilder b(2);
  std::string x = b.input({1, 3, 6, 6});
  std::string c = b.conv(x, 3, 3, 3, 1, 1);
  Graph g = b.finish(b.node("Add", {b.batch_norm(c, 3), c}));
  HostTensor in = b.random_tensor({1, 3, 6, 6});
  HostTensor before = run(g, in);
  const std::string weights = g.nodes[0].inputs[1];
  EXPECT_EQ(graph::fold_batch_norm(g), 1);
  EXPECT_EQ(count_op(g, "BatchNormalization"), 0);
  EXPECT_EQ(count_op(g, "Mul"), 1);
  EXPECT_EQ(count_op(g, "Add"), 2);
  EXPECT_EQ(g.nodes[0].inputs[1], weights) << "the Conv's weights as they were";
  EXPECT_LT(testing::max_relative_error(run(g, in), before), 1e-12);
}

TEST(GraphPasses, EpiloguesFuseIntoTheProducerWithTheSameOutputs) {
  GraphBuilder b(3);
  Graph g = residual_block(b, true);
  HostTensor x = b.random_tensor({2, 4, 9, 9});
  HostTensor before = run(g, x);
  graph::fold_batch_norm(g);
  EXPECT_EQ(graph::fuse_epilogues(g), 3);  // relu; add + relu
  ASSERT_EQ(g.nodes.size(), 2u) << graph::print_graph(g);
  EXPECT_EQ(g.nodes[0].label(), "Conv+Relu");
  EXPECT_EQ(g.nodes[1].label(), "Conv+Add+Relu");
  EXPECT_EQ(g.nodes[1].inputs.back(), g.inputs[0]) << "the residual is the block's input";
  EXPECT_LT(testing::max_relative_error(run(g, x), before), 1e-12);
}

// EfficientNet's SiLU, Mul(y, Sigmoid(y)), and MobileNet-v3's HardSwish join the convolution as
// its activation, which the blocked kernel applies as it writes; a second activation after one,
// or a Sigmoid whose value something else reads too, stays a node of its own.
TEST(GraphPasses, SiluAndHardSwishFuseAsTheConvolutionsActivation) {
  GraphBuilder b(5);
  std::string x = b.input({1, 16, 9, 9});
  std::string y = b.conv(x, 16, 16, 3, 1, 1);
  std::string silu = b.node("Mul", {b.node("Sigmoid", {y}), y});
  std::string h = b.node("HardSwish", {b.conv(silu, 16, 16, 1, 1, 0)});
  std::string twice = b.node("Mul", {h, b.node("Sigmoid", {h})});
  std::string z = b.conv(twice, 16, 16, 1, 1, 0);
  std::string gate = b.node("Sigmoid", {z});
  std::string kept = b.node("Add", {b.node("Mul", {z, gate}), gate});
  Graph g = b.finish(kept);
  HostTensor in = b.random_tensor({1, 16, 9, 9}, -3, 3);
  HostTensor before = run(g, in);
  graph::run_default_passes(g);
  std::vector<std::string> labels;
  for (const graph::Node& n : g.nodes) labels.push_back(n.label());
  EXPECT_EQ(labels, (std::vector<std::string>{"Conv+Silu", "Conv+HardSwish", "Sigmoid", "Mul",
                                              "Conv", "Sigmoid", "Mul", "Add"}));
  for (size_t i : {0, 1}) EXPECT_GT(g.nodes[i].attr_int(graph::kBlockAttr, 0), 1) << i;
  EXPECT_LT(testing::max_relative_error(run(g, in), before), 1e-12);
  EXPECT_LT(testing::max_relative_error(run_compiled(g, in), before), 1e-5);
  // A matrix product's epilogue runs them too (the dense kernel applies it as it writes).
  GraphBuilder m(7);
  std::string rows = m.input({6, 20});
  std::string p = m.node("MatMul", {rows, m.random({20, 24})});
  std::string q = m.node("MatMul", {m.node("Mul", {p, m.node("Sigmoid", {p})}), m.random({24, 8})});
  Graph mg = m.finish(m.node("HardSwish", {q}));
  HostTensor m_in = m.random_tensor({6, 20}, -3, 3);
  HostTensor mbefore = run(mg, m_in);
  graph::run_default_passes(mg);
  ASSERT_EQ(mg.nodes.size(), 2u) << graph::print_graph(mg);
  EXPECT_EQ(mg.nodes[0].label(), "MatMul+Silu");
  EXPECT_EQ(mg.nodes[1].label(), "MatMul+HardSwish");
  EXPECT_LT(testing::max_relative_error(run_compiled(mg, m_in), mbefore), 1e-5);
}

// A generator's last Tanh joins its convolution (blocked, 16 channels) or its product as the
// activation; the fused value saturates to +-1 as tanh does (e^2x overflows past 44).
TEST(GraphPasses, TanhFusesAsTheProducersActivation) {
  GraphBuilder b(8);
  std::string x = b.input({1, 16, 7, 7});
  Graph g = b.finish(b.node("Tanh", {b.conv(x, 16, 16, 3, 1, 1)}));
  HostTensor in = b.random_tensor({1, 16, 7, 7}, -4, 4);
  in.data[0] = 400;  // the corner's outputs past the overflow
  HostTensor before = run(g, in);
  graph::run_default_passes(g);
  ASSERT_EQ(g.nodes.size(), 1u) << graph::print_graph(g);
  EXPECT_EQ(g.nodes[0].label(), "Conv+Tanh");
  EXPECT_GT(g.nodes[0].attr_int(graph::kBlockAttr, 0), 1);
  EXPECT_LT(testing::max_relative_error(run_compiled(g, in), before), 1e-5);
  GraphBuilder m(9);
  Graph mg = m.finish(m.node("Tanh", {m.node("MatMul", {m.input({6, 20}), m.random({20, 24})})}));
  HostTensor m_in = m.random_tensor({6, 20}, -3, 3);
  HostTensor mbefore = run(mg, m_in);
  graph::run_default_passes(mg);
  ASSERT_EQ(mg.nodes.size(), 1u) << graph::print_graph(mg);
  EXPECT_EQ(mg.nodes[0].label(), "MatMul+Tanh");
  EXPECT_LT(testing::max_relative_error(run_compiled(mg, m_in), mbefore), 1e-5);
}

// GELU as the exporters write it joins a matrix product as its activation: torch's nn.GELU
// (x / sqrt2, Erf, + 1, x times that, times 1/2), the other order of the halving with a Mul by
// 1/sqrt2, and ONNX's Gelu. The tanh approximation is another function and stays a node. With
// constant weights each product, its bias, a residual and the GELU are one dense kernel.
TEST(GraphPasses, GeluFusesIntoTheMatrixProductsKernel) {
  GraphBuilder b(8);
  auto scalar = [&](double v) { return b.constant({{}, {v}, false}); };
  std::string x = b.input({20, 16});
  std::string p = b.node("Add", {b.node("MatMul", {x, b.random({16, 32})}), b.random({32})});
  std::string erf = b.node("Erf", {b.node("Div", {p, scalar(std::sqrt(2.0))})});
  std::string g1 =
      b.node("Mul", {b.node("Mul", {p, b.node("Add", {erf, scalar(1.0)})}), scalar(0.5)});
  std::string q = b.node("Add", {b.random({24}), b.node("MatMul", {g1, b.random({32, 24})})});
  std::string half = b.node("Mul", {scalar(0.5), q});
  std::string gate =
      b.node("Add", {scalar(1.0), b.node("Erf", {b.node("Mul", {q, scalar(std::sqrt(0.5))})})});
  std::string g2 = b.node("Mul", {gate, half});
  std::string r = b.node("Add", {b.node("MatMul", {g2, b.random({24, 24})}), g2});
  std::string g3 = b.node("Gelu", {r});
  std::string s = b.node("MatMul", {g3, b.random({24, 24})});
  Graph g = b.finish(b.node("Gelu", {s}, {{"approximate", std::string("tanh")}}));
  HostTensor in = b.random_tensor({20, 16}, -3, 3);
  HostTensor before = run(g, in);
  graph::run_default_passes(g);
  std::vector<std::string> labels;
  for (const graph::Node& n : g.nodes) labels.push_back(n.label());
  EXPECT_EQ(labels, (std::vector<std::string>{"MatMul+Add+Gelu", "MatMul+Add+Gelu",
                                              "MatMul+Add+Gelu", "MatMul", "Gelu"}));
  EXPECT_LT(testing::max_relative_error(run(g, in), before), 1e-12);
  std::vector<std::string> kernels;
  EXPECT_LT(testing::max_relative_error(run_compiled(g, in, &kernels), before), 1e-5);
  const int64_t lanes = target_isa().f32_lanes;
  auto has = [&](const std::string& w) {
    return std::find(kernels.begin(), kernels.end(), w) != kernels.end();
  };
  EXPECT_TRUE(has(fmt::format("dense:B=20,I=16,O=32,WB={},BIAS=1,ACT=5", lanes)));
  EXPECT_TRUE(has(fmt::format("dense:B=20,I=24,O=24,WB={},RES=1,ACT=5", lanes)));
  EXPECT_TRUE(has(fmt::format("dense:B=20,I=24,O=24,WB={}", lanes))) << "the tanh GELU's product";
}

// A bias after the activation does not fit the kernel's order (bias, residual, activation): the
// product keeps its epilogue as a pass of its own, and computes the same.
TEST(GraphPasses, AnEpilogueOutOfTheDenseKernelsOrderStaysAPass) {
  GraphBuilder b(9);
  std::string x = b.input({20, 16});
  std::string y = b.node("Relu", {b.node("MatMul", {x, b.random({16, 32})})});
  Graph g = b.finish(b.node("Add", {y, b.random({32})}));
  HostTensor in = b.random_tensor({20, 16});
  HostTensor before = run(g, in);
  graph::run_default_passes(g);
  ASSERT_EQ(g.nodes.size(), 1u) << graph::print_graph(g);
  EXPECT_EQ(g.nodes[0].label(), "MatMul+Relu+Add");
  std::vector<std::string> kernels;
  EXPECT_LT(testing::max_relative_error(run_compiled(g, in, &kernels), before), 1e-5);
  EXPECT_EQ(kernels.at(0), fmt::format("dense:B=20,I=16,O=32,WB={}", target_isa().f32_lanes));
}

// Global pooling as the dynamo exporter writes it: ReduceMean over axes 2 and 3 (either sign,
// keepdims either way) becomes GlobalAveragePool, which reads channel blocks in place; other
// axes stay a reduction.
TEST(GraphPasses, SpatialReduceMeanBecomesGlobalAveragePool) {
  GraphBuilder b(6);
  std::string x = b.input({1, 16, 6, 7});
  std::string y = b.node("Relu", {b.conv(x, 16, 16, 3, 1, 1)});
  std::string kept = b.node("ReduceMean", {y, b.constant({{2}, {-1, 2}, true})});
  std::string flat =
      b.node("ReduceMean", {y, b.constant({{2}, {2, 3}, true})}, {{"keepdims", int64_t{0}}});
  // The same mean in two reductions of one axis each.
  std::string rows =
      b.node("ReduceMean", {y, b.constant({{1}, {3}, true})}, {{"keepdims", int64_t{0}}});
  std::string stepwise =
      b.node("ReduceMean", {rows, b.constant({{1}, {2}, true})}, {{"keepdims", int64_t{0}}});
  std::string joined = b.node("Add", {b.node("Add", {b.node("Flatten", {kept}), flat}), stepwise});
  Graph g = b.finish(joined);
  HostTensor in = b.random_tensor({1, 16, 6, 7});
  HostTensor before = run(g, in);
  EXPECT_EQ(graph::pool_reductions(g), 2);
  EXPECT_EQ(count_op(g, "GlobalAveragePool"), 2);
  EXPECT_EQ(count_op(g, "ReduceMean"), 2);
  EXPECT_EQ(g.shape(flat), (std::vector<int64_t>{1, 16}));
  EXPECT_LT(testing::max_relative_error(run(g, in), before), 1e-12);
  graph::run_default_passes(g);
  EXPECT_LT(testing::max_relative_error(run_compiled(g, in), before), 1e-5);
}

// The residual comes from a branch computed after the producer: the fused node moves down to
// the Add, where both operands exist.
TEST(GraphPasses, ResidualFromALaterBranchMovesTheFusedNodeDown) {
  GraphBuilder b(4);
  std::string x = b.input({1, 4, 6, 6});
  std::string main = b.conv(x, 4, 4, 3, 1, 1);
  std::string side = b.node("Relu", {b.conv(x, 4, 4, 1, 1, 0)});
  Graph g = b.finish(b.node("Clip", {b.node("Add", {main, side})}, {{"min", 0.0}, {"max", 6.0}}));
  HostTensor in = b.random_tensor({1, 4, 6, 6});
  HostTensor before = run(g, in);
  EXPECT_EQ(graph::fuse_epilogues(g), 3);
  ASSERT_EQ(g.nodes.size(), 2u) << graph::print_graph(g);
  EXPECT_EQ(g.nodes[0].label(), "Conv+Relu");
  EXPECT_EQ(g.nodes[1].label(), "Conv+Add+Clip(0,6)");
  EXPECT_NO_THROW(graph::sort_topologically(g));
  EXPECT_LT(testing::max_relative_error(run(g, in), before), 1e-12);
}

TEST(GraphPasses, GemmFusesBiasAddAndClipButNotAGraphOutputsReader) {
  GraphBuilder b(5);
  std::string x = b.input({3, 5});
  std::string y = b.node("Gemm", {x, b.random({5, 7})});
  std::string z = b.node("Add", {y, b.random({7})});
  Graph g =
      b.finish(b.node("Clip", {z, b.constant({{}, {0.0}, false}), b.constant({{}, {0.5}, false})}));
  HostTensor in = b.random_tensor({3, 5});
  HostTensor before = run(g, in);
  EXPECT_EQ(graph::fuse_epilogues(g), 2);
  ASSERT_EQ(g.nodes.size(), 1u);
  EXPECT_EQ(g.nodes[0].epilogue[0].kind, Epilogue::Kind::kAdd);
  EXPECT_EQ(g.nodes[0].epilogue[1].kind, Epilogue::Kind::kClip);
  EXPECT_EQ(g.nodes[0].epilogue[1].hi, 0.5);
  EXPECT_LT(testing::max_relative_error(run(g, in), before), 1e-12);

  GraphBuilder b2(6);
  std::string x2 = b2.input({3, 5});
  std::string y2 = b2.node("Gemm", {x2, b2.random({5, 7})});
  Graph g2 = b2.finish(b2.node("Relu", {y2}));
  g2.outputs.push_back(y2);
  EXPECT_EQ(graph::fuse_epilogues(g2), 0) << "the Gemm's own result is an output";
}

TEST(GraphPasses, AddThatWouldBroadcastTheResultIsNotFused) {
  GraphBuilder b(7);
  std::string x = b.input({1, 4, 5, 5});
  std::string big = b.input({2, 4, 5, 5});
  Graph g = b.finish(b.node("Add", {b.conv(x, 4, 4, 1, 1, 0), big}));
  EXPECT_EQ(graph::fuse_epilogues(g), 0);
}

TEST(GraphPasses, ConstantFoldingEvaluatesShapeAndWeightSubgraphs) {
  GraphBuilder b(8);
  std::string x = b.input({2, 3, 4});
  std::string shape = b.constant({{2}, {2, -1}, true});
  std::string weights = b.node("Transpose", {b.random({5, 12})});  // [12, 5]
  std::string scaled = b.node("Mul", {weights, b.random({1})});
  Graph g = b.finish(b.node("MatMul", {b.node("Reshape", {x, shape}), scaled}));
  HostTensor in = b.random_tensor({2, 3, 4});
  HostTensor before = run(g, in);
  EXPECT_EQ(graph::fold_constants(g), 2);
  EXPECT_EQ(count_op(g, "Transpose"), 0);
  EXPECT_EQ(count_op(g, "Reshape"), 1) << "its data input is not constant";
  ASSERT_EQ(g.nodes.back().op, "MatMul");
  EXPECT_TRUE(g.is_constant(g.nodes.back().inputs[1]));
  const HostTensor& folded = g.constants.at(g.nodes.back().inputs[1]);
  EXPECT_EQ(folded.shape, (std::vector<int64_t>{12, 5}));
  // Folded values are stored as a float32 runtime would hold them.
  for (double v : folded.data) EXPECT_EQ(v, static_cast<float>(v));
  EXPECT_LT(testing::max_relative_error(run(g, in), before), 1e-7);
}

TEST(GraphPasses, DeadNodesAndUnreadConstantsAreRemoved) {
  GraphBuilder b(9);
  std::string x = b.input({4, 4});
  std::string live = b.node("Relu", {x});
  b.node("Gemm", {x, b.random({4, 4})});  // read by nothing
  Graph g = b.finish(live);
  size_t constants = g.constants.size();
  EXPECT_EQ(graph::eliminate_dead_nodes(g), 1);
  ASSERT_EQ(g.nodes.size(), 1u);
  EXPECT_EQ(g.nodes[0].op, "Relu");
  EXPECT_EQ(g.constants.size(), constants - 1);
}

TEST(GraphPasses, DefaultPassesOnAMobileNetBlockKeepTheOutputs) {
  GraphBuilder b(10);
  std::string x = b.input({1, 8, 10, 10});
  auto clip = [&](const std::string& v) {
    return b.node("Clip", {v, b.constant({{}, {0.0}, false}), b.constant({{}, {6.0}, false})});
  };
  std::string h = clip(b.batch_norm(b.conv(x, 8, 16, 1, 1, 0, 1, false), 16));
  h = clip(b.batch_norm(b.conv(h, 16, 16, 3, 1, 1, 16, false), 16));
  h = b.batch_norm(b.conv(h, 16, 8, 1, 1, 0, 1, false), 8);
  Graph g = b.finish(b.node("Add", {h, x}));
  HostTensor in = b.random_tensor({1, 8, 10, 10});
  HostTensor before = run(g, in);
  std::vector<graph::PassLog> log = graph::run_default_passes(g);
  auto changed = [&](const std::string& pass) {
    for (const graph::PassLog& l : log)
      if (l.pass == pass) return l.changed;
    return -1;
  };
  EXPECT_EQ(changed("fold_batch_norm"), 3);
  EXPECT_EQ(changed("fuse_epilogues"), 3);  // two clips, one add
  ASSERT_EQ(g.nodes.size(), 3u) << graph::print_graph(g);
  EXPECT_EQ(g.nodes[1].label(), "Conv+Clip(0,6)");
  EXPECT_EQ(g.nodes[2].label(), "Conv+Add");
  EXPECT_LT(testing::max_relative_error(run(g, in), before), 1e-12);
}

// choose_layouts blocks the convolutions whose epilogue their kernel runs and what stays blocked
// after them, and leaves the rest NCHW; it never changes what the graph computes.
TEST(GraphPasses, LayoutChoiceBlocksConvolutionChainsAndLeavesTheRest) {
  GraphBuilder b(9);
  std::string x = b.input({1, 3, 12, 12});
  std::string a = b.node("Relu", {b.conv(x, 3, 16, 3, 1, 1)});  // image input: one block of 3
  std::string p = b.node(
      "MaxPool", {a},
      {{"kernel_shape", std::vector<int64_t>{2, 2}}, {"strides", std::vector<int64_t>{2, 2}}});
  // Clip(0, 3) is no activation the kernel runs; a residual along rows only is no residual.
  std::string c = b.node("Clip", {b.conv(p, 16, 16, 1, 1, 0)}, {{"min", 0.0}, {"max", 3.0}});
  std::string r = b.node("Add", {b.conv(c, 16, 16, 1, 1, 0), b.random({1, 1, 6, 6})});
  std::string s = b.node("Softmax", {b.node("Flatten", {b.node("GlobalAveragePool", {r})})});
  Graph g = b.finish(s);
  graph::run_default_passes(g, {.blocked_layout = false});
  HostTensor in = b.random_tensor({1, 3, 12, 12});
  HostTensor before = run(g, in);
  EXPECT_EQ(graph::channel_block(g, 16), 16);
  EXPECT_EQ(graph::channel_block(g, 8), 8);
  EXPECT_EQ(graph::choose_layouts(g, 8), 2) << graph::print_graph(g);
  std::map<std::string, int64_t> blocks;
  for (const graph::Node& n : g.nodes) blocks[n.label()] += n.attr_int(graph::kBlockAttr, 0);
  EXPECT_EQ(blocks["Conv+Relu"], 8);
  EXPECT_EQ(blocks["MaxPool"], 8);
  EXPECT_EQ(blocks["Conv+Clip(0,3)"], 0);
  EXPECT_EQ(blocks["Conv+Add"], 0);
  EXPECT_EQ(blocks["GlobalAveragePool"], 0) << "its input is NCHW";
  EXPECT_LT(testing::max_relative_error(run(g, in), before), 1e-12);
  // Channels that 16 does not divide make the whole graph use blocks of 8.
  GraphBuilder b2(10);
  std::string y = b2.conv(b2.input({1, 8, 4, 4}), 8, 24, 1, 1, 0);
  Graph g2 = b2.finish(y);
  EXPECT_EQ(graph::channel_block(g2, 16), 8);
  // Unless those convolutions do a small share of the work: a squeeze-excite pair on the pooled
  // [1, 32, 1, 1] (32 -> 8 -> 32) beside a 3 x 3 convolution of 32 channels at 16 x 16.
  GraphBuilder b3(11);
  std::string big = b3.node("Relu", {b3.conv(b3.input({1, 32, 16, 16}), 32, 32, 3, 1, 1)});
  std::string squeezed = b3.node("GlobalAveragePool", {big});
  std::string se = b3.conv(b3.node("Relu", {b3.conv(squeezed, 32, 8, 1, 1, 0)}), 8, 32, 1, 1, 0);
  Graph g3 = b3.finish(b3.node("Mul", {big, b3.node("Sigmoid", {se})}));
  EXPECT_EQ(graph::channel_block(g3, 16), 16);
  // Nor at 7.7% of it (a 1 x 1 to 24 channels beside that 3 x 3): under the tenth the rule allows,
  // where DeepLab-v3's 6% ran 1.32x slower in blocks of 8 (Zen 5).
  GraphBuilder b4(12);
  std::string wide = b4.node("Relu", {b4.conv(b4.input({1, 32, 16, 16}), 32, 32, 3, 1, 1)});
  Graph g4 = b4.finish(b4.conv(wide, 32, 24, 1, 1, 0));
  EXPECT_EQ(graph::channel_block(g4, 16), 16);
}

}  // namespace
// choose_conv_algorithms picks Winograd only for blocked 3x3 stride-1 convolutions with pads of
// 1, at least winograd_min_tiles() output tiles and 32 input channels (64 on AVX2).
TEST(GraphPasses, WinogradIsChosenForLarge3x3StrideOneConvolutionsOnly) {
  GraphBuilder b(12);
  std::string x = b.input({1, 64, 28, 28});
  std::string big = b.node("Relu", {b.conv(x, 64, 64, 3, 1, 1)});        // 7x7 tiles: yes
  std::string strided = b.node("Relu", {b.conv(big, 64, 64, 3, 2, 1)});  // stride 2: no
  std::string depthwise = b.conv(strided, 64, 64, 3, 1, 1, 64);          // groups: no
  std::string mid = b.conv(depthwise, 64, 64, 3, 1, 1);                  // 4x4 tiles: yes
  std::string small = b.node("Relu", {b.conv(mid, 64, 64, 3, 2, 1)});    // 7x7 -> stride 2: no
  std::string tiny = b.conv(small, 64, 64, 3, 1, 1);                     // 2x2 tiles: no
  std::string pointwise = b.conv(tiny, 64, 64, 1, 1, 0);                 // 1x1: no
  Graph g = b.finish(pointwise);
  std::vector<graph::PassLog> log = graph::run_default_passes(g);
  ASSERT_EQ(log.back().pass, "choose_conv_algorithms");
  const int64_t mid_runs_winograd = graph::winograd_min_tiles() <= 16 ? 1 : 0;
  EXPECT_EQ(log.back().changed, 1 + mid_runs_winograd) << graph::print_graph(g);
  std::vector<int64_t> winograd;
  for (const graph::Node& n : g.nodes)
    if (n.op == "Conv") winograd.push_back(n.attr_int(graph::kWinogradAttr, 0));
  EXPECT_EQ(winograd, (std::vector<int64_t>{1, 0, 0, mid_runs_winograd, 0, 0, 0}));
  // Without channel blocks, or with it turned off, nothing runs as Winograd.
  Graph nchw = b.finish(pointwise);
  EXPECT_EQ(graph::run_default_passes(nchw, {.blocked_layout = false}).back().pass,
            "eliminate_dead_nodes");
  Graph off = b.finish(pointwise);
  log = graph::run_default_passes(off, {.winograd = false});
  EXPECT_EQ(log.back().pass, "fold_channel_scales");
  for (const graph::Node& n : off.nodes) EXPECT_EQ(n.attr_int(graph::kWinogradAttr, 0), 0);
  // 16 input channels: a reduction too short for the product to pay; 32 pay on AVX-512 only.
  GraphBuilder few(13);
  Graph narrow = few.finish(few.conv(few.input({1, 16, 28, 28}), 16, 16, 3, 1, 1));
  graph::run_default_passes(narrow);
  EXPECT_EQ(narrow.nodes.front().attr_int(graph::kWinogradAttr, 0), 0);
  GraphBuilder more(14);
  Graph two_blocks = more.finish(more.conv(more.input({1, 32, 28, 28}), 32, 32, 3, 1, 1));
  graph::run_default_passes(two_blocks);
  const bool avx512 = target_isa().vector_registers >= 32;
  EXPECT_EQ(two_blocks.nodes.front().attr_int(graph::kWinogradAttr, 0), avx512 ? 1 : 0);
}

// Taps that read only padding leave the kernel: DeepLab's 3 x 3 at dilation 24 on a 14 x 14 map
// is a 1 x 1; a dilation (2, 6) on 14 x 3 keeps its rows and loses its outer columns; dilation 12
// reaches the image from every tap and stays. Outputs unchanged, through the reference and the
// compiled kernels.
TEST(GraphPasses, TapsThatReadOnlyPaddingAreTrimmed) {
  struct Case {
    std::vector<int64_t> input, dilations, pads, kernel_after, dilations_after, pads_after;
  };
  const std::vector<Case> cases{
      {{1, 16, 14, 14}, {24, 24}, {24, 24, 24, 24}, {1, 1}, {1, 1}, {0, 0, 0, 0}},
      {{1, 8, 14, 3}, {2, 6}, {2, 6, 2, 6}, {3, 1}, {2, 1}, {2, 0, 2, 0}},
      {{1, 8, 14, 14}, {12, 12}, {12, 12, 12, 12}, {3, 3}, {12, 12}, {12, 12, 12, 12}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(fmt::format("dilations {}", fmt::join(c.dilations, "x")));
    GraphBuilder b(61);
    const int64_t channels = c.input[1];
    std::string y = b.node(
        "Conv", {b.input(c.input), b.random({16, channels, 3, 3}, -0.5, 0.5), b.random({16})},
        {{"dilations", c.dilations}, {"pads", c.pads}});
    Graph g = b.finish(b.node("Relu", {y}));
    HostTensor in = b.random_tensor(c.input);
    HostTensor before = run(g, in);
    const bool trims = c.kernel_after != std::vector<int64_t>{3, 3};
    EXPECT_EQ(graph::trim_padding_taps(g), trims ? 1 : 0);
    const graph::Node& conv = g.nodes[0];
    EXPECT_EQ(conv.attr_ints("kernel_shape", {3, 3}), c.kernel_after);
    EXPECT_EQ(conv.attr_ints("dilations", {}), c.dilations_after);
    EXPECT_EQ(conv.attr_ints("pads", {}), c.pads_after);
    EXPECT_LT(testing::max_relative_error(run(g, in), before), 1e-12);
    graph::run_default_passes(g);
    EXPECT_LT(testing::max_relative_error(run_compiled(g, in), before), 1e-5);
  }
}

// DeepLab's 3 x 3 at dilation 12 on a 14 x 14 map: the outer taps reach the image only for the
// two outermost rows and columns, so the output is cut into 3 x 3 pieces: the centre a 1 x 1
// convolution, the rest 2 x 2 (square, as the blocked kernels take them), 27% of the products;
// bias and Relu go to every piece.
// At dilation 2 every tap reads the image almost everywhere: unchanged.
TEST(GraphPasses, ConvolutionsSplitWhereTheLiveTapsChange) {
  for (int64_t dilation : {12, 2}) {
    SCOPED_TRACE(dilation);
    GraphBuilder b(62);
    std::string y = b.node(
        "Conv", {b.input({1, 16, 14, 14}), b.random({16, 16, 3, 3}, -0.5, 0.5), b.random({16})},
        {{"dilations", std::vector<int64_t>{dilation, dilation}},
         {"pads", std::vector<int64_t>{dilation, dilation, dilation, dilation}}});
    Graph g = b.finish(b.node("Relu", {y}));
    HostTensor in = b.random_tensor({1, 16, 14, 14});
    HostTensor before = run(g, in);
    EXPECT_EQ(graph::fuse_epilogues(g), 1);
    EXPECT_EQ(graph::split_by_live_taps(g), dilation == 12 ? 1 : 0);
    int convs = 0;
    double products = 0;
    for (const graph::Node& n : g.nodes) {
      if (n.op != "Conv") continue;
      ++convs;
      EXPECT_EQ(n.epilogue.size(), 1u);
      const std::vector<int64_t>& out = g.shape(n.outputs[0]);
      const std::vector<int64_t> k = n.attr_ints("kernel_shape", {3, 3});
      products += double(out[2] * out[3] * k[0] * k[1]);
    }
    EXPECT_EQ(convs, dilation == 12 ? 9 : 1);
    // Four corners and four edges with 2 x 2 taps, the centre with one.
    if (dilation == 12) {
      EXPECT_EQ(products, 4 * (2 * 2 * 4) + 4 * (2 * 10 * 4) + 10 * 10);
    }
    EXPECT_LT(testing::max_relative_error(run(g, in), before), 1e-12);
    graph::run_default_passes(g);
    EXPECT_LT(testing::max_relative_error(run_compiled(g, in), before), 1e-5);
  }
}

}  // namespace tessera
