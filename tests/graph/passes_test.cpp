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
#include "runtime/isa.h"

namespace tessera {
namespace {

using graph::Epilogue;
using graph::Graph;
using graph::HostTensor;
using testing::GraphBuilder;

HostTensor run(const Graph& g, const HostTensor& x) {
  return graph::run_reference(g, {{g.inputs[0], x}}).at(0);
}

// The graph as the executor compiles it (after the passes already run on it), two threads; with
// `kernels`, the workloads of its kernels too.
HostTensor run_compiled(const Graph& g, const HostTensor& x,
                        std::vector<std::string>* kernels = nullptr) {
  graph::ExecutorParams params;
  params.threads = 2;
  graph::Executor ex = graph::Executor::compile(g, params);
  ex.input(0).from_doubles(x.data);
  ex.run();
  if (kernels)
    for (const graph::KernelInfo& k : ex.kernels()) kernels->push_back(k.workload);
  return ex.output(0);
}

int count_op(const Graph& g, const std::string& op) {
  int n = 0;
  for (const graph::Node& node : g.nodes) n += node.op == op;
  return n;
}

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
  EXPECT_EQ(g.constants.at(g.nodes.back().inputs[1]).shape, (std::vector<int64_t>{12, 5}));
  EXPECT_LT(testing::max_relative_error(run(g, in), before), 1e-12);
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

// MobileNet-v2's 24 channels on AVX-512: values flowing only between group-1 convolutions
// (residuals included) get zero channels up to 32, so the graph keeps blocks of 16; the outputs
// stay the same, through the reference path and through the executor's blocked kernels.
TEST(GraphPasses, RaggedChannelsArePaddedBetweenConvolutionsOnly) {
  GraphBuilder b(13);
  std::string x = b.input({1, 16, 8, 8});
  std::string y1 = b.batch_norm(b.conv(x, 16, 24, 1, 1, 0, 1, false), 24);
  std::string e = b.node("Relu", {b.conv(y1, 24, 48, 1, 1, 0)});
  std::string y2 = b.node("Add", {b.conv(e, 48, 24, 1, 1, 0), y1});
  std::string out = b.node("Add", {b.conv(y2, 24, 16, 3, 1, 1), b.random({1, 16, 1, 1})});
  Graph g = b.finish(out);
  graph::run_default_passes(g, {.blocked_layout = false});
  HostTensor in = b.random_tensor({1, 16, 8, 8});
  HostTensor before = run(g, in);
  EXPECT_EQ(graph::channel_block(g, 16), 8);
  EXPECT_EQ(graph::pad_channels(g, 8), 0) << "24 fills vectors of 8";
  EXPECT_EQ(graph::pad_channels(g, 16), 4) << graph::print_graph(g);
  EXPECT_EQ(g.shape(y1), (std::vector<int64_t>{1, 32, 8, 8}));
  EXPECT_EQ(g.shape(g.outputs[0]), (std::vector<int64_t>{1, 16, 8, 8}));
  EXPECT_EQ(graph::channel_block(g, 16), 16);
  EXPECT_LT(testing::max_relative_error(run(g, in), before), 1e-12);
  EXPECT_EQ(graph::choose_layouts(g, 16), 4);
  EXPECT_LT(testing::max_relative_error(run_compiled(g, in), before), 1e-4);

  // A max pool passes padded channels through (a window of finite values stays finite).
  GraphBuilder b2(14);
  std::string z = b2.conv(b2.input({1, 16, 8, 8}), 16, 24, 1, 1, 0);
  std::string windows = b2.node(
      "MaxPool", {z},
      {{"kernel_shape", std::vector<int64_t>{2, 2}}, {"strides", std::vector<int64_t>{2, 2}}});
  Graph pool = b2.finish(b2.conv(windows, 24, 16, 1, 1, 0));
  graph::run_default_passes(pool, {.blocked_layout = false});
  HostTensor x2 = b2.random_tensor({1, 16, 8, 8});
  HostTensor pooled_before = run(pool, x2);
  EXPECT_EQ(graph::pad_channels(pool, 16), 2) << graph::print_graph(pool);
  EXPECT_EQ(count_op(pool, "Slice"), 0);
  EXPECT_EQ(count_op(pool, "Pad"), 0);
  EXPECT_EQ(pool.shape(windows)[1], 32);
  EXPECT_EQ(graph::channel_block(pool, 16), 16);
  EXPECT_LT(testing::max_relative_error(run(pool, x2), pooled_before), 1e-12);
  // Global pooling takes the padded channels and a Slice crops its result (SqueezeNet's 1000
  // classes): the producer and the Slice change.
  std::string pooled = b2.node("GlobalAveragePool", {z});
  Graph global = b2.finish(b2.node("Flatten", {b2.node("Relu", {pooled})}));
  graph::run_default_passes(global, {.blocked_layout = false});
  HostTensor unpadded = run(global, x2);
  EXPECT_EQ(graph::pad_channels(global, 16), 2) << graph::print_graph(global);
  EXPECT_EQ(count_op(global, "Slice"), 1);
  EXPECT_EQ(global.shape(z)[1], 32);
  EXPECT_EQ(global.shape(pooled)[1], 24);
  EXPECT_LT(testing::max_relative_error(run(global, x2), unpadded), 1e-12);
  EXPECT_EQ(graph::channel_block(global, 16), 16);
  Graph leaving = b2.finish(b2.conv(z, 24, 32, 1, 1, 0));
  graph::run_default_passes(leaving, {.blocked_layout = false});
  EXPECT_EQ(graph::pad_channels(leaving, 16), 2) << "z, read by a conv only, still pads";
  EXPECT_EQ(leaving.shape(z)[1], 32);
  // Where another convolution holds the graph to blocks of 8 (24 channels leave it), padding
  // would only add work.
  Graph held = b2.finish(b2.conv(z, 24, 24, 1, 1, 0));
  graph::run_default_passes(held, {.blocked_layout = false});
  EXPECT_EQ(graph::pad_channels(held, 16), 0) << graph::print_graph(held);
  EXPECT_EQ(held.shape(z)[1], 24);

  // A convolution to 12 channels that no convolution reads (the DCGAN generator's last phases,
  // read by DepthToSpace) computes whole vectors of them and a Slice keeps 12 under the old name,
  // where it has 64 positions or more: 16 with vectors of 8 (AVX2) or of 16 (AVX-512).
  GraphBuilder b3(15);
  std::string twelve = b3.conv(b3.input({1, 16, 8, 8}), 16, 12, 3, 1, 1);
  Graph phases = b3.finish(b3.node("Tanh", {twelve}));
  graph::run_default_passes(phases, {.blocked_layout = false});
  HostTensor x3 = b3.random_tensor({1, 16, 8, 8});
  HostTensor uncropped = run(phases, x3);
  Graph wide_vectors = phases;
  EXPECT_EQ(graph::pad_channels(wide_vectors, 16), 1) << graph::print_graph(wide_vectors);
  EXPECT_EQ(wide_vectors.shape(wide_vectors.nodes.front().outputs[0])[1], 16);
  EXPECT_LT(testing::max_relative_error(run(wide_vectors, x3), uncropped), 1e-12);
  EXPECT_EQ(graph::pad_channels(phases, 8), 1) << graph::print_graph(phases);
  EXPECT_EQ(count_op(phases, "Slice"), 1);
  EXPECT_EQ(phases.shape(twelve)[1], 12);
  EXPECT_EQ(phases.shape(phases.nodes.front().outputs[0])[1], 16);
  EXPECT_LT(testing::max_relative_error(run(phases, x3), uncropped), 1e-12);
  GraphBuilder b4(16);
  Graph few_positions =
      b4.finish(b4.node("Tanh", {b4.conv(b4.input({1, 16, 7, 7}), 16, 12, 3, 1, 1)}));
  graph::run_default_passes(few_positions, {.blocked_layout = false});
  EXPECT_EQ(graph::pad_channels(few_positions, 8), 0) << "49 positions";
}

// MnasNet's and MobileNet-v3's blocks on AVX-512: the ragged values pass through depthwise
// convolutions (zero filters in groups of their own), activations, squeeze-excite's scaling and
// residual adds, so every convolution takes blocks of 16; the pooled squeeze is cropped back.
TEST(GraphPasses, RaggedChannelsArePaddedThroughDepthwiseAndSqueezeExcite) {
  GraphBuilder b(17);
  std::string x = b.input({1, 16, 10, 10});
  std::string y = b.conv(x, 16, 24, 1, 1, 0);
  std::string e = b.node("Relu", {b.conv(y, 24, 72, 1, 1, 0)});
  std::string d = b.node("HardSwish", {b.conv(e, 72, 72, 3, 1, 1, 72)});
  std::string s = b.node("GlobalAveragePool", {d});
  s = b.node("HardSigmoid", {b.conv(b.node("Relu", {b.conv(s, 72, 18, 1, 1, 0)}), 18, 72, 1, 1, 0)},
             {{"alpha", 1.0 / 6}, {"beta", 0.5}});
  std::string scaled = b.node("Mul", {d, s});
  std::string z = b.node("Add", {b.conv(scaled, 72, 24, 1, 1, 0), y});
  std::string out = b.node("Add", {b.conv(z, 24, 16, 1, 1, 0), b.random({1, 16, 1, 1})});
  Graph g = b.finish(out);
  graph::run_default_passes(g, {.blocked_layout = false});
  HostTensor in = b.random_tensor({1, 16, 10, 10});
  HostTensor before = run(g, in);
  EXPECT_EQ(graph::channel_block(g, 16), 8);
  EXPECT_GT(graph::pad_channels(g, 16), 0) << graph::print_graph(g);
  EXPECT_EQ(g.shape(y)[1], 32);
  EXPECT_EQ(g.shape(d)[1], 80);
  EXPECT_EQ(g.shape(scaled)[1], 80);
  EXPECT_EQ(count_op(g, "Slice"), 1) << "the pooled squeeze";
  EXPECT_EQ(g.shape(g.outputs[0]), (std::vector<int64_t>{1, 16, 10, 10}));
  EXPECT_EQ(graph::channel_block(g, 16), 16);
  EXPECT_LT(testing::max_relative_error(run(g, in), before), 1e-12);
  graph::choose_layouts(g, 16);
  EXPECT_LT(testing::max_relative_error(run_compiled(g, in), before), 1e-4);

  // A ragged value some other node reads (here a Concat) pads with its whole class, the depthwise
  // convolution's input and output together, and a Slice crops it for the Concat.
  GraphBuilder b2(18);
  std::string x2 = b2.input({1, 16, 8, 8});
  std::string e2 = b2.conv(x2, 16, 40, 1, 1, 0);
  std::string d2 = b2.conv(e2, 40, 40, 3, 1, 1, 40);
  Graph held = b2.finish(b2.node("Concat", {d2, x2}, {{"axis", int64_t{1}}}));
  graph::run_default_passes(held, {.blocked_layout = false});
  HostTensor x3 = b2.random_tensor({1, 16, 8, 8});
  HostTensor joined = run(held, x3);
  EXPECT_GT(graph::pad_channels(held, 16), 0) << graph::print_graph(held);
  EXPECT_EQ(held.shape(e2)[1], 48);
  EXPECT_EQ(held.shape(d2)[1], 40) << "the name the Concat reads, cropped";
  EXPECT_EQ(count_op(held, "Slice"), 1);
  EXPECT_LT(testing::max_relative_error(run(held, x3), joined), 1e-12);
}

// Ragged channels made and read by what cannot pad them: Concats. With vectors of 16 a Pad
// bridges the 40 channels one Concat makes; Slices crop the 20-channel values the Concats read;
// the convolutions between run blocked, their 20 channels padded to 32 with vectors of 16 and to
// 24 with vectors of 8.
TEST(GraphPasses, UnalignedChannelsArePaddedAcrossBridges) {
  for (int64_t lanes : {8, 16}) {
    GraphBuilder b(21);
    std::string x = b.input({1, 16, 10, 10});
    std::string p = b.node("Relu", {b.conv(x, 16, 20, 1, 1, 0)});
    std::string q = b.node("Relu", {b.conv(x, 16, 20, 1, 1, 0)});
    std::string s = b.node("Concat", {p, q}, {{"axis", int64_t{1}}});
    std::string d = b.conv(b.node("Relu", {b.conv(s, 40, 20, 1, 1, 0)}), 20, 20, 3, 1, 1, 20);
    std::string e = b.node("Relu", {b.conv(d, 20, 20, 1, 1, 0)});
    Graph g = b.finish(b.node("Concat", {e, x}, {{"axis", int64_t{1}}}));
    graph::run_default_passes(g, {.blocked_layout = false});
    HostTensor in = b.random_tensor({1, 16, 10, 10});
    HostTensor before = run(g, in);
    const int slices = count_op(g, "Slice");
    EXPECT_GT(graph::pad_channels(g, lanes), 0) << graph::print_graph(g);
    EXPECT_EQ(count_op(g, "Pad"), lanes == 16 ? 1 : 0) << "after the first Concat";
    EXPECT_EQ(count_op(g, "Slice"), slices + 3) << "before the Concats";
    EXPECT_EQ(g.shape(d)[1], lanes == 16 ? 32 : 24);
    EXPECT_EQ(g.shape(e)[1], 20);
    EXPECT_EQ(graph::channel_block(g, lanes), lanes);
    EXPECT_LT(testing::max_relative_error(run(g, in), before), 1e-12);
    graph::choose_layouts(g, lanes);
    std::vector<std::string> kernels;
    EXPECT_LT(testing::max_relative_error(run_compiled(g, in, &kernels), before), 1e-4);
    int unblocked = 0;
    for (const std::string& k : kernels)
      unblocked += k.starts_with("conv2d:") || k.starts_with("conv2d_bias_relu:") ||
                   k.starts_with("depthwise_conv2d:");
    EXPECT_EQ(unblocked, 0);
  }
}

// ShuffleNet-v2's units: each joins its untouched half and its branch, shuffles the channels
// (Reshape, Transpose, Reshape) and halves them again with Slices. The shuffles and halves become
// gathers that read the branches themselves, one a unit, the Concats and shuffles go, the
// branches' 20 channels pad to whole vectors through the gathers (no Pad or Slice bridges them),
// and everything runs blocked.
TEST(GraphPasses, ChannelShufflesBecomeGathersOfTheBranches) {
  for (int64_t lanes : {8, 16}) {
    GraphBuilder b(23);
    std::string x = b.input({1, 16, 10, 10});
    std::string a = b.node("Relu", {b.conv(x, 16, 40, 1, 1, 0)});
    std::string first = b.node("Slice", {a},
                               {{"starts", std::vector<int64_t>{0}},
                                {"ends", std::vector<int64_t>{20}},
                                {"axes", std::vector<int64_t>{1}}});
    std::string second = b.node("Slice", {a},
                                {{"starts", std::vector<int64_t>{20}},
                                 {"ends", std::vector<int64_t>{40}},
                                 {"axes", std::vector<int64_t>{1}}});
    for (int unit = 0; unit < 3; ++unit) {
      std::string d =
          b.conv(b.node("Relu", {b.conv(second, 20, 20, 1, 1, 0)}), 20, 20, 3, 1, 1, 20);
      std::string branch = b.node("Relu", {b.conv(d, 20, 20, 1, 1, 0)});
      std::string joined = b.node("Concat", {first, branch}, {{"axis", int64_t{1}}});
      std::string grouped =
          b.node("Reshape", {joined, b.constant({{5}, {1, 2, 20, 10, 10}, true})});
      std::string swapped =
          b.node("Transpose", {grouped}, {{"perm", std::vector<int64_t>{0, 2, 1, 3, 4}}});
      std::string shuffled = b.node("Reshape", {swapped, b.constant({{4}, {1, 40, 10, 10}, true})});
      if (unit == 2) {
        a = shuffled;
        break;
      }
      auto half = [&](int64_t start) {
        return b.node("Slice", {shuffled},
                      {{"starts", std::vector<int64_t>{start}},
                       {"ends", std::vector<int64_t>{start + 20}},
                       {"axes", std::vector<int64_t>{1}}});
      };
      first = half(0);
      second = half(20);
    }
    Graph g = b.finish(b.conv(a, 40, 16, 1, 1, 0));
    HostTensor in = b.random_tensor({1, 16, 10, 10});
    HostTensor before = run(g, in);
    graph::run_default_passes(g, {.blocked_layout = false});
    EXPECT_EQ(count_op(g, "Concat"), 0) << graph::print_graph(g);
    EXPECT_EQ(count_op(g, "Transpose"), 0);
    EXPECT_EQ(count_op(g, "Reshape"), 0);
    EXPECT_EQ(count_op(g, "Slice"), 0);
    EXPECT_EQ(count_op(g, graph::kGatherChannels), 4)
        << "the first unit's second half, the next two units' and the last shuffle";
    EXPECT_LT(testing::max_relative_error(run(g, in), before), 1e-12);
    EXPECT_GT(graph::pad_channels(g, lanes), 0) << graph::print_graph(g);
    EXPECT_EQ(count_op(g, "Pad"), 0);
    EXPECT_EQ(graph::channel_block(g, lanes), lanes);
    EXPECT_LT(testing::max_relative_error(run(g, in), before), 1e-12);
    graph::choose_layouts(g, lanes);
    for (const graph::Node& n : g.nodes) {
      if (n.op != graph::kGatherChannels) continue;
      EXPECT_EQ(n.attr_int(graph::kBlockAttr, 0), lanes);
    }
    std::vector<std::string> kernels;
    EXPECT_LT(testing::max_relative_error(run_compiled(g, in, &kernels), before), 1e-4);
    int conversions = 0;
    for (const std::string& k : kernels) {
      conversions += k.starts_with("graph:from_blocked") || k.starts_with("graph:to_blocked");
      EXPECT_FALSE(k.starts_with("conv2d:") || k.starts_with("depthwise_conv2d:")) << k;
    }
    EXPECT_EQ(conversions, 2) << "the model's input and output only";
  }
}

// Attention's 12 heads are the second dimension of [1, 12, S, 64] values that a scale multiplies,
// as a convolution's channels would be, but no convolution reads or writes them: padding them
// would only add copies.
TEST(GraphPasses, AttentionHeadsAreNotPaddedAsChannels) {
  GraphBuilder b(24);
  std::string x = b.input({1, 12, 10, 16});
  std::string q = b.node("MatMul", {x, b.random({16, 16})});
  std::string scaled = b.node("Mul", {q, b.constant({{}, {0.25}, false})});
  std::string k = b.node("Transpose", {q}, {{"perm", std::vector<int64_t>{0, 1, 3, 2}}});
  Graph g = b.finish(b.node("MatMul", {scaled, k}));
  for (int64_t lanes : {8, 16}) {
    Graph padded = g;
    EXPECT_EQ(graph::pad_channels(padded, lanes), 0) << graph::print_graph(padded);
    EXPECT_EQ(padded.shape(scaled), g.shape(scaled));
  }
}

// Attention's query, key and value from one projection [S, 3E]: split (Reshape, Transpose,
// Gather), into heads (Reshape, Transpose), the key transposed again, query and key scaled. Each
// becomes one strided copy of the projection, the scales multiplied in; a chain that copies once
// stays, and so does one whose elements are not at affine offsets (a Gather of scattered rows).
TEST(GraphPasses, ChainsOfCopiesBecomeOneStridedCopy) {
  GraphBuilder b(25);
  const int64_t s = 6, heads = 2, d = 4, e = heads * d;
  std::string x = b.input({s, e});
  std::string projection = b.node("MatMul", {x, b.random({e, 3 * e})});
  std::string split = b.node("Reshape", {projection, b.constant({{3}, {s, 3, e}, true})});
  std::string parts = b.node("Transpose", {split}, {{"perm", std::vector<int64_t>{1, 0, 2}}});
  auto part = [&](int64_t which) {
    std::string p =
        b.node("Gather", {parts, b.constant({{}, {double(which)}, true})}, {{"axis", int64_t{0}}});
    std::string h = b.node("Reshape", {p, b.constant({{3}, {s, heads, d}, true})});
    return b.node("Transpose", {h}, {{"perm", std::vector<int64_t>{1, 0, 2}}});
  };
  std::string scale = b.constant({{}, {0.5}, false});
  std::string q = b.node("Mul", {part(0), scale});
  std::string k = b.node(
      "Mul", {b.node("Transpose", {part(1)}, {{"perm", std::vector<int64_t>{0, 2, 1}}}), scale});
  std::string scores = b.node("Softmax", {b.node("MatMul", {q, k})}, {{"axis", int64_t{-1}}});
  std::string v = part(2);
  std::string once = b.node("Transpose", {x}, {{"perm", std::vector<int64_t>{1, 0}}});
  std::string scattered =
      b.node("Transpose",
             {b.node("Gather", {x, b.constant({{3}, {4, 0, 5}, true})}, {{"axis", int64_t{0}}})},
             {{"perm", std::vector<int64_t>{1, 0}}});
  auto row = [&](const std::string& v, int64_t n) {
    return b.node("Reshape", {v, b.constant({{2}, {1, double(n)}, true})});
  };
  std::string attended = b.node("MatMul", {scores, v});  // [heads, s, d]
  Graph g = b.finish(b.node("Concat",
                            {row(attended, heads * s * d), row(b.node("MatMul", {once, x}), e * e),
                             row(scattered, e * 3)},
                            {{"axis", int64_t{1}}}));
  HostTensor in = b.random_tensor({s, e});
  HostTensor before = run(g, in);
  EXPECT_EQ(graph::fold_copies(g), 3) << graph::print_graph(g);
  EXPECT_EQ(count_op(g, graph::kStridedCopy), 3);
  EXPECT_EQ(count_op(g, "Mul"), 0);
  EXPECT_EQ(count_op(g, "Transpose"), 2) << "the single copy and the scattered rows";
  for (const graph::Node& n : g.nodes) {
    if (n.op != graph::kStridedCopy) continue;
    EXPECT_EQ(n.inputs[0], projection);
    const graph::StridedCopy c = graph::read_strided_copy(n, g);
    if (c.scale != 1.0) continue;
    EXPECT_EQ(c.strides, (std::vector<int64_t>{d, 3 * e, 1})) << "the value's";
  }
  EXPECT_LT(testing::max_relative_error(run(g, in), before), 1e-12);
  EXPECT_LT(testing::max_relative_error(run_compiled(g, in), before), 1e-5);
}

// RegNet's groups of 8 channels on AVX-512: padded by whole groups (40 -> 48 channels, 5 -> 6
// groups), then merged two at a time into groups of 16 with zero filters across the pair, so the
// grouped convolution runs in blocks of 16 with the rest; a width that needs no padding (32, 4
// groups) merges too.
TEST(GraphPasses, GroupsOfEightChannelsPadAndMergeIntoVectorsOf16) {
  GraphBuilder b(19);
  std::string x = b.input({1, 16, 9, 9});
  std::string e = b.node("Relu", {b.conv(x, 16, 40, 1, 1, 0)});
  std::string grouped = b.node("Relu", {b.conv(e, 40, 40, 3, 1, 1, 5)});
  std::string y = b.conv(grouped, 40, 32, 1, 1, 0);
  std::string z = b.node("Relu", {b.conv(y, 32, 32, 3, 2, 1, 4)});
  Graph g = b.finish(b.conv(z, 32, 16, 1, 1, 0));
  graph::run_default_passes(g, {.blocked_layout = false});
  HostTensor in = b.random_tensor({1, 16, 9, 9});
  HostTensor before = run(g, in);
  EXPECT_EQ(graph::channel_block(g, 16), 8);
  EXPECT_GT(graph::pad_channels(g, 16), 0) << graph::print_graph(g);
  EXPECT_EQ(g.shape(grouped)[1], 48);
  std::vector<int64_t> groups;
  for (const graph::Node& n : g.nodes)
    if (n.op == "Conv" && n.attr_int("group", 1) > 1) groups.push_back(n.attr_int("group", 1));
  EXPECT_EQ(groups, (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(graph::channel_block(g, 16), 16);
  EXPECT_LT(testing::max_relative_error(run(g, in), before), 1e-12);
  graph::choose_layouts(g, 16);
  std::vector<std::string> kernels;
  EXPECT_LT(testing::max_relative_error(run_compiled(g, in, &kernels), before), 1e-4);
  int grouped_blocked = 0, unblocked = 0;
  for (const std::string& k : kernels) {
    grouped_blocked += k.starts_with("conv2d_nchwc:N=1,C=48,H=9,W=9,O=48,K=3,S=1,P=1,G=3,");
    unblocked += k.starts_with("conv2d:") || k.starts_with("conv2d_bias_relu:");
  }
  EXPECT_EQ(grouped_blocked, 1);
  EXPECT_EQ(unblocked, 0);
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
