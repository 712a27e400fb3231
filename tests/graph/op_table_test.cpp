// The operator table: every elementwise row's kernel against its reference, the layouts
// elementwise rows keep, windows the library's pooling does not take, shape arithmetic folded at
// import.
#include "graph/op_table.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "graph/executor.h"
#include "graph/op_attrs.h"
#include "graph/passes.h"
#include "graph/reference.h"
#include "graph_builder.h"
#include "runtime/isa.h"

namespace tessera {
namespace {

using graph::Graph;
using graph::HostTensor;
using testing::executor_error;
using testing::GraphBuilder;

// Transposes over merged dimensions: ones dropped, neighbours that keep their order merged, rows
// that stay innermost copied as vectors, a few outer rows sharing the threads with the next. Each
// against the reference, with an Add after it so that the output is not a view of a model input.
TEST(OpTable, TransposesOfEveryFormMatchTheReference) {
  const std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> cases = {
      {{1, 128, 1, 3, 96}, {3, 1, 2, 0, 4}},  // attention's q/k/v split: rows of 96 whole
      {{1, 6, 40, 16}, {0, 1, 3, 2}},         // key transposed: a true 2-D transpose per head
      {{40, 6, 16}, {1, 0, 2}},               // heads first: rows of 16
      {{2, 3, 4, 5}, {3, 2, 1, 0}},           // reversed, nothing merges
      {{2, 3, 4, 8}, {2, 3, 0, 1}},           // two merged pairs swapped
      {{4, 1, 5, 1}, {2, 1, 3, 0}},           // ones among them
      {{3, 7, 96}, {1, 0, 2}},                // rows of 96, 7 x 3 rows: below the threads' size
      {{3, 96, 64}, {0, 2, 1}},               // 3 outer rows, 2 threads: fused with the next
  };
  for (const auto& [shape, perm] : cases) {
    SCOPED_TRACE(::testing::PrintToString(shape) + " " + ::testing::PrintToString(perm));
    GraphBuilder b(23);
    std::string x = b.input(shape);
    std::string t = b.node("Transpose", {x}, {{"perm", perm}});
    Graph g = b.finish(b.node("Add", {t, t}));
    EXPECT_LT(executor_error(g, b, -2, 2), 1e-6);
  }
}

// Each elementwise row as the one node of a graph: the runtime input first, further operands
// constants that broadcast ([3, 1] and a scalar), on inputs in the row's domain.
TEST(OpTable, EveryElementwiseRowMatchesItsReference) {
  int rows = 0;
  // Rows of 5: scalar loops; rows of 16: whole vectors of either ISA.
  for (int64_t last : {5, 16})
    for (const graph::OpDef& op : graph::op_table()) {
      if (op.lowering != graph::Lowering::kElementwise) continue;
      SCOPED_TRACE(op.name);
      ++rows;
      const bool positive =
          op.name == "Log" || op.name == "Sqrt" || op.name == "Pow" || op.name == "Reciprocal";
      const double lo = positive ? 0.1 : -4, hi = 4;
      GraphBuilder b(21);
      std::string x = b.input({2, 3, last});
      std::vector<std::string> inputs{x};
      int operands = op.max_inputs < 0 ? 3 : op.max_inputs;
      for (int i = 1; i < operands; ++i) {
        if (op.name == "Where" && i == 2) {
          inputs.push_back(b.constant({{}, {0.5}, false}));
          continue;
        }
        inputs.push_back(i == 1 ? b.random({3, 1}, positive ? 0.5 : -2, 2)
                                : b.constant({{}, {1.5}, false}));
      }
      std::map<std::string, graph::AttrValue> attrs;
      if (op.name == "Cast") attrs["to"] = int64_t{7};  // INT64: truncates
      if (op.name == "Gelu") attrs["approximate"] = std::string("tanh");
      Graph g = b.finish(b.node(op.name, inputs, attrs));
      graph::Executor ex;
      EXPECT_LT(executor_error(g, b, lo, hi, &ex), 1e-5);
      EXPECT_EQ(ex.kernels().size(), 1u) << "one kernel, no library operator";
    }
  EXPECT_GE(rows, 60);
}

// MobileNet-v3's squeeze-excite between blocked convolutions: HardSwish (fused into the first
// convolution), SiLU (x * Sigmoid(x), after that activation not fused), the per-image scale
// multiplied in, all in channel blocks with no conversion in between.
TEST(OpTable, SqueezeExciteStaysInChannelBlocks) {
  GraphBuilder b(22);
  std::string x = b.input({1, 16, 10, 10});
  std::string h = b.node("HardSwish", {b.conv(x, 16, 16, 3, 1, 1)});
  h = b.node("Mul", {h, b.node("Sigmoid", {h})});
  std::string s = b.node("GlobalAveragePool", {h});
  s = b.node("Relu", {b.conv(s, 16, 8, 1, 1, 0)});
  s = b.node("HardSigmoid", {b.conv(s, 8, 16, 1, 1, 0)}, {{"alpha", 1.0 / 6}, {"beta", 0.5}});
  h = b.conv(b.node("Mul", {h, s}), 16, 16, 3, 1, 1);
  Graph g = b.finish(h);
  Graph passed = g;
  graph::run_default_passes(passed);
  const int64_t block = graph::channel_block(passed, target_isa().f32_lanes);
  ASSERT_GT(block, 1);
  int elementwise = 0;
  for (const graph::Node& n : passed.nodes) {
    if (n.op != "HardSwish" && n.op != "Sigmoid" && n.op != "Mul") continue;
    ++elementwise;
    EXPECT_EQ(n.attr_int(graph::kBlockAttr, 0), block) << n.name;
  }
  EXPECT_EQ(elementwise, 3);
  graph::Executor ex;
  EXPECT_LT(executor_error(g, b, -2, 2, &ex), 1e-5);
  int conversions = 0;
  for (const graph::KernelInfo& k : ex.kernels())
    conversions += k.workload.find("from_blocked") != std::string::npos ? k.uses : 0;
  EXPECT_LE(conversions, 2) << "the output, and at most the tiny [1, 16, 1, 1] scale";
}

// DenseNet's pattern: convolutions joined along the channels stay in channel blocks, with no
// conversion to NCHW around the Concat.
TEST(OpTable, ConcatOfBlockedConvolutionsStaysBlocked) {
  GraphBuilder b(30);
  std::string x = b.input({1, 16, 8, 8});
  std::string a = b.node("Relu", {b.conv(x, 16, 16, 3, 1, 1)});
  std::string c = b.node("Relu", {b.conv(a, 16, 32, 1, 1, 0)});
  std::string joined = b.node("Concat", {a, c}, {{"axis", int64_t{1}}});
  Graph g = b.finish(b.conv(joined, 48, 16, 3, 1, 1));
  Graph passed = g;
  graph::run_default_passes(passed);
  for (const graph::Node& n : passed.nodes)
    if (n.op == "Concat") {
      EXPECT_GT(n.attr_int(graph::kBlockAttr, 0), 0);
    }
  graph::Executor ex;
  EXPECT_LT(executor_error(g, b, -1, 1, &ex), 1e-5);
  int from_blocked = 0;
  for (const graph::KernelInfo& k : ex.kernels())
    from_blocked += k.workload.find("from_blocked") != std::string::npos ? k.uses : 0;
  EXPECT_EQ(from_blocked, 1) << "only the model's output";
}

// tessera.GatherChannels with every kind of run: two inputs interleaved, one read backwards,
// one channel repeated, channels scattered. Blocked where both inputs are blocked convolutions'
// outputs, NCHW where one is the model's input; against the reference either way.
TEST(OpTable, GatherChannelsMatchesTheReferenceInEitherLayout) {
  std::vector<int64_t> sources, channels;
  auto pick = [&](int64_t source, int64_t channel) {
    sources.push_back(source);
    channels.push_back(channel);
  };
  for (int64_t j = 0; j < 4; ++j) pick(0, j), pick(1, j);
  for (int64_t j = 0; j < 8; ++j) pick(1, 31 - j);
  for (int64_t j = 0; j < 4; ++j) pick(0, 5);
  for (int64_t j = 0; j < 12; ++j) pick(j % 3 == 0 ? 1 : 0, 7 * j % 16);
  for (bool blocked : {true, false}) {
    SCOPED_TRACE(blocked ? "blocked" : "NCHW");
    GraphBuilder b(31);
    std::string x = b.input({1, 16, 6, 6});
    std::string a = blocked ? b.node("Relu", {b.conv(x, 16, 16, 3, 1, 1)}) : x;
    std::string c = b.node("Relu", {b.conv(x, 16, 32, 1, 1, 0)});
    std::string picked =
        b.node(graph::kGatherChannels, {a, c}, {{"sources", sources}, {"channels", channels}});
    Graph g = b.finish(b.conv(picked, 32, 16, 3, 1, 1));
    Graph passed = g;
    graph::run_default_passes(passed);
    for (const graph::Node& n : passed.nodes) {
      if (n.op != graph::kGatherChannels) continue;
      EXPECT_EQ(n.attr_int(graph::kBlockAttr, 0) > 0, blocked);
    }
    EXPECT_LT(executor_error(g, b, -1, 1), 1e-5);
  }
}

// Bad tables are refused with the channel they name.
TEST(OpTable, GatherChannelsRefusesChannelsItsInputsLack) {
  GraphBuilder b(32);
  std::string x = b.input({1, 4, 3, 3});
  EXPECT_THROW(
      {
        try {
          b.finish(b.node(
              graph::kGatherChannels, {x},
              {{"sources", std::vector<int64_t>{0, 0}}, {"channels", std::vector<int64_t>{1, 4}}}));
        } catch (const Error& e) {
          EXPECT_NE(std::string(e.what()).find("output channel 1 reads channel 4 of input 0"),
                    std::string::npos)
              << e.what();
          throw;
        }
      },
      Error);
}

// tessera.StridedCopy reading backwards (negative strides from the last element) and scaled, as
// a row of vectors and as a row read lane by lane; one that would read past its input is refused.
TEST(OpTable, StridedCopyMatchesTheReferenceAndStaysInsideItsInput) {
  for (int64_t columns : {4, 32}) {
    SCOPED_TRACE(columns);
    GraphBuilder b(33);
    std::string x = b.input({3, columns});
    std::string reversed = b.node(graph::kStridedCopy, {b.node("Relu", {x})},
                                  {{"shape", std::vector<int64_t>{3, columns}},
                                   {"offset", 3 * columns - 1},
                                   {"strides", std::vector<int64_t>{-columns, -1}},
                                   {"scale", 2.0}});
    std::string across = b.node(graph::kStridedCopy, {x},
                                {{"shape", std::vector<int64_t>{columns, 3}},
                                 {"offset", int64_t{0}},
                                 {"strides", std::vector<int64_t>{1, columns}}});
    Graph g = b.finish(b.node(
        "Add", {reversed, b.node("Transpose", {across}, {{"perm", std::vector<int64_t>{1, 0}}})}));
    EXPECT_LT(executor_error(g, b, -1, 1), 1e-6);
  }
  GraphBuilder b(34);
  std::string x = b.input({2, 3});
  try {
    b.finish(b.node(graph::kStridedCopy, {x},
                    {{"shape", std::vector<int64_t>{2, 3}},
                     {"offset", int64_t{1}},
                     {"strides", std::vector<int64_t>{3, 1}}}));
    ADD_FAILURE() << "a copy past its input was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("reads elements 1 to 6 of an input of 6"),
              std::string::npos)
        << e.what();
  }
}

// A dense block as torch exports DenseNet: each layer joins the block's input and every feature
// before it (one Concat per layer, one input longer each time), then a batch norm no Conv
// absorbs, Relu, a Conv; a transition averages 2x2. Every feature is written in its place in
// one array, so no Concat copies; the batch norms and the pooling stay in channel blocks.
TEST(OpTable, DenseBlockConcatsCopyNothing) {
  GraphBuilder b(40);
  auto batch_norm = [&](const std::string& x, int64_t c) {
    return b.node("BatchNormalization",
                  {x, b.random({c}, 0.5, 2), b.random({c}), b.random({c}), b.random({c}, 0.2, 3)});
  };
  std::vector<std::string> features{b.conv(b.input({1, 16, 8, 8}), 16, 16, 3, 1, 1)};
  for (int layer = 0; layer < 3; ++layer) {
    std::string joined =
        features.size() == 1 ? features[0] : b.node("Concat", features, {{"axis", int64_t{1}}});
    const int64_t c = 16 * static_cast<int64_t>(features.size());
    features.push_back(b.conv(b.node("Relu", {batch_norm(joined, c)}), c, 16, 3, 1, 1));
  }
  std::string block = b.node("Concat", features, {{"axis", int64_t{1}}});
  std::string pooled = b.node(
      "AveragePool", {b.node("Relu", {batch_norm(block, 64)})},
      {{"kernel_shape", std::vector<int64_t>{2, 2}}, {"strides", std::vector<int64_t>{2, 2}}});
  Graph g = b.finish(b.conv(pooled, 64, 16, 1, 1, 0));
  graph::Executor ex;
  EXPECT_LT(executor_error(g, b, -1, 1, &ex), 1e-5);
  int concats = 0, conversions = 0;
  for (const graph::KernelInfo& k : ex.kernels()) {
    concats += k.workload.find("concat") != std::string::npos ? k.uses : 0;
    const bool conversion =
        k.workload.starts_with("graph:to_blocked") || k.workload.starts_with("graph:from_blocked");
    // A single pixel's conversion (the first layer's phases, which AVX-512 computes in blocks)
    // moves 256 floats.
    const bool one_pixel = k.workload.find(", 1, 1, 16], [1, 256, 1, 1])") != std::string::npos;
    conversions += conversion && !one_pixel ? k.uses : 0;
    if (k.workload.find("pool") != std::string::npos) {
      EXPECT_NE(k.workload.find("avg_pool_blocked"), std::string::npos) << k.workload;
    }
  }
  EXPECT_EQ(concats, 0);
  EXPECT_EQ(conversions, 2) << "the input into blocks, the output out of them";
}

TEST(OpTable, CeilModeChangesTheShapeOnlyWhereAWindowStartsInside) {
  GraphBuilder b(23);
  std::string x = b.input({1, 2, 8, 8});
  auto pool = [&](int64_t k, int64_t s, int64_t pad) {
    return b.node("MaxPool", {x},
                  {{"kernel_shape", std::vector<int64_t>{k, k}},
                   {"strides", std::vector<int64_t>{s, s}},
                   {"pads", std::vector<int64_t>{pad, pad, pad, pad}},
                   {"ceil_mode", int64_t{1}}});
  };
  std::string grows = pool(3, 2, 0);    // floor 3, ceil 4: the last window starts at 6
  std::string same = pool(2, 2, 0);     // 8 / 2: nothing changes
  std::string clipped = pool(2, 2, 1);  // ceil 6, but a window at 10 starts in the trailing pad
  Graph g = b.finish(grows);
  EXPECT_EQ(g.shape(grows), (std::vector<int64_t>{1, 2, 4, 4}));
  EXPECT_EQ(g.shape(same), (std::vector<int64_t>{1, 2, 4, 4}));
  EXPECT_EQ(g.shape(clipped), (std::vector<int64_t>{1, 2, 5, 5}));
}

// Windows the library's pooling does not take run as the generic te kernel.
TEST(OpTable, RectangularAndCeilModePoolingMatchTheReference) {
  const std::vector<std::map<std::string, graph::AttrValue>> windows = {
      {{"kernel_shape", std::vector<int64_t>{3, 3}},
       {"strides", std::vector<int64_t>{2, 2}},
       {"ceil_mode", int64_t{1}}},
      {{"kernel_shape", std::vector<int64_t>{1, 3}},
       {"strides", std::vector<int64_t>{1, 2}},
       {"pads", std::vector<int64_t>{0, 1, 0, 0}}},
      {{"kernel_shape", std::vector<int64_t>{3, 3}},
       {"strides", std::vector<int64_t>{2, 2}},
       {"pads", std::vector<int64_t>{1, 1, 1, 1}},
       {"ceil_mode", int64_t{1}},
       {"count_include_pad", int64_t{1}}},
  };
  for (const std::string op : {"MaxPool", "AveragePool"})
    for (size_t i = 0; i < windows.size(); ++i) {
      SCOPED_TRACE(op + " window " + std::to_string(i));
      GraphBuilder b(24);
      Graph g = b.finish(b.node(op, {b.input({1, 3, 9, 8})}, windows[i]));
      EXPECT_LT(executor_error(g, b, -1, 1), 1e-5);
    }
}

// Shape, Gather, Unsqueeze and Concat computing a Reshape's target are constants by the end of
// import: no kernel runs them.
TEST(OpTable, ShapeArithmeticIsFoldedAtImport) {
  GraphBuilder b(25);
  std::string x = b.input({2, 12});
  std::string shape = b.node("Shape", {x});
  std::string batch = b.node("Unsqueeze", {b.node("Gather", {shape, b.constant({{}, {0}, true})}),
                                           b.constant({{1}, {0}, true})});
  std::string target =
      b.node("Concat", {batch, b.constant({{2}, {3, -1}, true})}, {{"axis", int64_t{0}}});
  std::string y = b.node("Reshape", {x, target});
  Graph g = b.finish(b.node("Sigmoid", {y}));
  EXPECT_EQ(g.shape(y), (std::vector<int64_t>{2, 3, 4}));
  EXPECT_TRUE(g.is_constant(target));
  graph::Executor ex;
  EXPECT_LT(executor_error(g, b, -1, 1, &ex), 1e-6);
  EXPECT_EQ(ex.kernels().size(), 1u) << "only the Sigmoid";
}

// The DCGAN generator's upsampling: ConvTranspose with stride, padding, output_padding, groups and
// a bias, against the reference's scatter loops.
TEST(OpTable, ConvTransposeMatchesTheReference) {
  const std::vector<std::map<std::string, graph::AttrValue>> windows = {
      {{"strides", std::vector<int64_t>{2, 2}}, {"pads", std::vector<int64_t>{1, 1, 1, 1}}},
      {{"strides", std::vector<int64_t>{2, 3}},
       {"output_padding", std::vector<int64_t>{1, 0}},
       {"group", int64_t{2}}},
      {{"dilations", std::vector<int64_t>{2, 1}}, {"pads", std::vector<int64_t>{0, 1, 2, 0}}},
  };
  for (size_t i = 0; i < windows.size(); ++i) {
    SCOPED_TRACE(i);
    GraphBuilder b(27);
    std::string x = b.input({1, 4, 5, 6});
    int64_t group = windows[i].count("group") ? 2 : 1;
    Graph g = b.finish(
        b.node("ConvTranspose", {x, b.random({4, 6 / group, 4, 3}), b.random({6})}, windows[i]));
    EXPECT_LT(executor_error(g, b, -1, 1), 1e-5);
  }
  GraphBuilder b(28);
  Graph g = b.finish(b.node(
      "ConvTranspose", {b.input({1, 2, 4, 4}), b.random({2, 3, 4, 4})},
      {{"strides", std::vector<int64_t>{2, 2}}, {"output_shape", std::vector<int64_t>{8, 8}}}));
  EXPECT_EQ(g.shape(g.outputs[0]), (std::vector<int64_t>{1, 3, 8, 8}));
  EXPECT_LT(executor_error(g, b, -1, 1), 1e-5);
}

// Tanh through exp: saturated ends (e^2x past float's range) and the middle, on whole vectors.
TEST(OpTable, TanhHoldsAtBothEnds) {
  for (double range : {0.01, 4.0, 60.0}) {
    SCOPED_TRACE(range);
    GraphBuilder b(35);
    Graph g = b.finish(b.node("Tanh", {b.input({4, 64})}));
    EXPECT_LT(executor_error(g, b, -range, range), 3e-7 / std::min(range, 1.0));
  }
}

// erf as a rational function of the clamped input: relative accuracy where erf is tiny,
// saturated tails, infinities and NaN as erff gives them.
TEST(OpTable, ErfHoldsFromZeroToItsTails) {
  for (double range : {1e-3, 0.7, 1.5, 6.0}) {
    SCOPED_TRACE(range);
    GraphBuilder b(36);
    Graph g = b.finish(b.node("Erf", {b.input({4, 64})}));
    EXPECT_LT(executor_error(g, b, -range, range), 4e-7);
  }
  const double inf = std::numeric_limits<double>::infinity();
  const std::vector<double> ends = {-inf, -1e30, -9.0,         -4.0, -3.9, 3.9,   4.0,    9.0,
                                    1e30, inf,   std::nan(""), 0.0,  -0.0, 1e-30, -1e-30, 2.0};
  for (int64_t last : {16, 5}) {  // whole vectors, and the scalar loop of a row of 5
    SCOPED_TRACE(last);
    GraphBuilder b(36);
    Graph g = b.finish(b.node("Erf", {b.input({static_cast<int64_t>(ends.size()) / last, last})}));
    graph::run_default_passes(g);
    graph::ExecutorParams params;
    params.threads = 1;
    graph::Executor ex = graph::Executor::compile(g, params);
    const std::vector<double> in(ends.begin(), ends.begin() + ends.size() / last * last);
    ex.input(0).from_doubles(in);
    ex.run();
    HostTensor got = ex.output(0);
    for (size_t i = 0; i < in.size(); ++i) {
      if (std::isnan(in[i])) {
        EXPECT_TRUE(std::isnan(got.data[i])) << got.data[i];
      } else {
        EXPECT_NEAR(got.data[i], std::erf(in[i]), 3.5e-7 * std::abs(std::erf(in[i]))) << in[i];
      }
    }
  }
}

// Elementwise nodes in a row run as one kernel: GELU as the legacy exporter writes it (Div, Erf,
// Add, Mul by the chain's own input, Mul) and a Sub whose chain value is its second operand.
// The bias Add before it has two readers, so it stays a kernel of its own.
TEST(OpTable, ElementwiseChainsRunAsOneKernel) {
  GraphBuilder b(37);
  std::string h = b.node("Add", {b.input({4, 64}), b.random({64})});
  std::string e = b.node("Erf", {b.node("Div", {h, b.constant({{}, {M_SQRT2}, false})})});
  std::string gelu =
      b.node("Mul", {b.node("Mul", {h, b.node("Add", {e, b.constant({{}, {1.0}, false})})}),
                     b.constant({{}, {0.5}, false})});
  Graph g = b.finish(b.node("Sub", {b.random({1, 64}), gelu}));
  graph::Executor ex;
  EXPECT_LT(executor_error(g, b, -3, 3, &ex), 1e-6);
  EXPECT_EQ(ex.steps(), 2) << "the bias Add, then one kernel for the six nodes after it";

  // A chain stops where the next node reads a value computed after the chain's first node, or
  // reads the chain's value twice.
  GraphBuilder c(38);
  std::string x = c.input({2, 32});
  std::string s = c.node("Sigmoid", {x});
  std::string n = c.node("Neg", {x});
  Graph later = c.finish(c.node("Mul", {s, n}));
  EXPECT_LT(executor_error(later, c, -3, 3, &ex), 1e-6);
  EXPECT_EQ(ex.steps(), 2) << "Sigmoid; then Neg and the Mul, which reads the Sigmoid before it";
  GraphBuilder d(39);
  std::string v = d.node("Exp", {d.input({2, 32})});
  Graph twice = d.finish(d.node("Mul", {v, v}));
  EXPECT_LT(executor_error(twice, d, -3, 3, &ex), 1e-6);
  EXPECT_EQ(ex.steps(), 2);
}

// Strided ConvTranspose by phases (the DCGAN generator's chain: a 1x1 input, stride 2 with pads 1,
// batch norms with real statistics, Relu, a Tanh at the end; then rectangular strides, asymmetric
// pads, output_padding and groups), its batch norm folded, the activations before the pixel
// shuffle, and no zero insertion. Where one Conv's grid of strides would overhang the output
// (4x4 -> 8x8 computes 5x5 steps), each of the four output phases is a Conv of its own with its
// own pads, joined in channel blocks and shuffled in them: no conversion out of blocks between.
TEST(OpTable, StridedConvTransposeRunsByPhases) {
  using V = std::vector<int64_t>;
  GraphBuilder b(31);
  auto batch_norm = [&](const std::string& x, int64_t c) {
    return b.node("BatchNormalization",
                  {x, b.random({c}, 0.5, 2), b.random({c}), b.random({c}), b.random({c}, 0.2, 3)});
  };
  auto up = [&](const std::string& x, int64_t c, int64_t o, int64_t stride, int64_t pad) {
    return b.node("ConvTranspose", {x, b.random({c, o, 4, 4})},
                  {{"strides", V{stride, stride}}, {"pads", V{pad, pad, pad, pad}}});
  };
  std::string h = b.node("Relu", {batch_norm(up(b.input({1, 12, 1, 1}), 12, 16, 1, 0), 16)});
  h = b.node("Relu", {batch_norm(up(h, 16, 16, 2, 1), 16)});
  Graph g = b.finish(b.node("Tanh", {up(h, 16, 3, 2, 1)}));
  EXPECT_EQ(g.shape(g.outputs[0]), (V{1, 3, 16, 16}));
  Graph lowered = g;
  EXPECT_EQ(graph::lower_conv_transpose(lowered), 3);
  std::vector<std::string> ops;
  for (const graph::Node& n : lowered.nodes) ops.push_back(n.op);
  EXPECT_EQ(ops, (std::vector<std::string>{
                     "Conv", "Relu", "tessera.PixelShuffle",                                    //
                     "Conv", "Relu", "Conv", "Relu", "Conv", "Relu", "Conv", "Relu", "Concat",  //
                     "tessera.PixelShuffle", "Conv", "Tanh", "tessera.PixelShuffle"}));
  EXPECT_EQ(lowered.shape(lowered.nodes[0].inputs[1]), (V{16 * 16, 12, 1, 1}))
      << "a 1x1 input: one phase per tap";
  EXPECT_EQ(lowered.shape(lowered.nodes[3].inputs[1]), (V{16, 16, 2, 2}));
  EXPECT_EQ(lowered.shape(lowered.nodes[3].outputs[0]), (V{1, 16, 4, 4})) << "exactly its phase";
  EXPECT_EQ(lowered.shape(lowered.nodes[13].inputs[1]), (V{3 * 4, 16, 2, 2}))
      << "3 channels fill no block: one Conv for the four phases";
  graph::Executor ex;
  EXPECT_LT(executor_error(g, b, -1, 1, &ex), 1e-5);
  int shuffles_in_blocks = 0, conversions = 0;
  std::string kernels;
  for (const graph::KernelInfo& k : ex.kernels()) {
    kernels += k.workload + "\n";
    shuffles_in_blocks += k.workload.starts_with("graph:depth_to_space_blocked") ? k.uses : 0;
    const bool conversion =
        k.workload.starts_with("graph:to_blocked") || k.workload.starts_with("graph:from_blocked");
    // A single pixel's conversion (the first layer's phases, which AVX-512 computes in blocks)
    // moves 256 floats.
    const bool one_pixel = k.workload.find(", 1, 1, 16], [1, 256, 1, 1])") != std::string::npos;
    conversions += conversion && !one_pixel ? k.uses : 0;
  }
  EXPECT_EQ(shuffles_in_blocks, 1) << kernels;
  EXPECT_EQ(conversions, 2) << "into blocks after the first shuffle, out of them at the end\n"
                            << kernels;

  const std::vector<std::map<std::string, graph::AttrValue>> windows = {
      {{"strides", V{3, 2}}, {"pads", V{2, 0, 1, 1}}, {"output_padding", V{1, 1}}},
      {{"strides", V{2, 2}}, {"pads", V{3, 1, 0, 2}}, {"group", int64_t{2}}},
      {{"strides", V{4, 1}}, {"pads", V{0, 1, 0, 1}}},
  };
  for (size_t i = 0; i < windows.size(); ++i) {
    SCOPED_TRACE(i);
    GraphBuilder wb(32);
    int64_t group = windows[i].count("group") ? 2 : 1;
    Graph wg = wb.finish(wb.node(
        "ConvTranspose", {wb.input({1, 4, 5, 6}), wb.random({4, 6 / group, 5, 3}), wb.random({6})},
        windows[i]));
    Graph phased = wg;
    EXPECT_EQ(graph::lower_conv_transpose(phased), 1);
    EXPECT_EQ(phased.nodes.back().op, "tessera.PixelShuffle");
    EXPECT_LT(executor_error(wg, wb, -1, 1), 1e-5);
  }
}

// DepthToSpace in both channel orders.
TEST(OpTable, DepthToSpaceMatchesTheReference) {
  for (const char* mode : {"DCR", "CRD"}) {
    SCOPED_TRACE(mode);
    GraphBuilder b(33);
    Graph g = b.finish(b.node("DepthToSpace", {b.input({1, 18, 3, 4})},
                              {{"blocksize", int64_t{3}}, {"mode", std::string(mode)}}));
    EXPECT_EQ(g.shape(g.outputs[0]), (std::vector<int64_t>{1, 2, 9, 12}));
    EXPECT_LT(executor_error(g, b, -1, 1), 1e-6);
  }
  // Between convolutions: DCR moves whole channel blocks and stays in them; CRD interleaves
  // inside a block and runs in NCHW.
  for (const char* mode : {"DCR", "CRD"}) {
    SCOPED_TRACE(mode);
    GraphBuilder b(35);
    std::string y = b.node("DepthToSpace", {b.conv(b.input({1, 16, 5, 6}), 16, 64, 3, 1, 1)},
                           {{"blocksize", int64_t{2}}, {"mode", std::string(mode)}});
    Graph g = b.finish(b.conv(y, 16, 16, 3, 1, 1));
    graph::Executor ex;
    EXPECT_LT(executor_error(g, b, -1, 1, &ex), 1e-5);
    int in_blocks = 0;
    for (const graph::KernelInfo& k : ex.kernels())
      in_blocks += k.workload.starts_with("graph:depth_to_space_blocked") ? k.uses : 0;
    EXPECT_EQ(in_blocks, std::string(mode) == "DCR" ? 1 : 0);
  }
  // The reference itself: channel (block, c) in DCR lands at pixel block of channel c.
  GraphBuilder b(34);
  Graph g = b.finish(b.node("DepthToSpace", {b.input({1, 8, 1, 1})},
                            {{"blocksize", int64_t{2}}, {"mode", std::string("DCR")}}));
  HostTensor x{{1, 8, 1, 1}, {0, 1, 2, 3, 4, 5, 6, 7}, false};
  HostTensor y = graph::run_reference(g, {{g.inputs[0], x}}).at(0);
  EXPECT_EQ(y.data, (std::vector<double>{0, 2, 4, 6, 1, 3, 5, 7}));
}

// Constant indices from a runtime tensor: a strided run (an affine index), a scattered list read
// from the kernel's index argument, negative indices counted from the end.
TEST(OpTable, GatherWithConstantIndicesMatchesTheReference) {
  const std::vector<HostTensor> lists = {
      {{3}, {0, 2, 4}, true},
      {{2, 3}, {5, -1, 0, 3, 3, -6}, true},
      {{}, {-2}, true},
  };
  for (int64_t axis : {0, 1}) {
    for (size_t i = 0; i < lists.size(); ++i) {
      SCOPED_TRACE(fmt::format("axis {} list {}", axis, i));
      GraphBuilder b(29);
      std::string x = b.input({6, 6, 2});
      Graph g = b.finish(b.node("Gather", {x, b.constant(lists[i])}, {{"axis", axis}}));
      EXPECT_LT(executor_error(g, b, -1, 1), 1e-6);
    }
  }
}

// A Gather of consecutive constant indices along a leading axis (attention's query, key and value
// taken from one projection) reads one contiguous run: a view, no kernel. Along an inner axis, or
// of a model input, it stays a copy.
TEST(OpTable, LeadingGathersOfConsecutiveIndicesAreViews) {
  auto gathers = [](const graph::Executor& ex) {
    int n = 0;
    for (const graph::KernelInfo& k : ex.kernels())
      n += k.workload.find("graph:gather") != std::string::npos;
    return n;
  };
  GraphBuilder b(42);
  std::string x = b.input({4, 6});
  std::string h = b.node("Reshape", {b.node("Relu", {x}), b.constant({{2}, {3, 8}, true})});
  std::string one = b.node("Gather", {h, b.constant({{}, {1}, true})});
  std::string last_two = b.node("Gather", {h, b.constant({{2}, {1, 2}, true})});
  std::string first = b.node("Gather", {h, b.constant({{}, {-3}, true})});
  Graph g = b.finish(b.node("Add", {last_two, b.node("Mul", {one, first})}));
  graph::Executor ex;
  EXPECT_LT(executor_error(g, b, -1, 1, &ex), 1e-6);
  EXPECT_EQ(gathers(ex), 0);

  GraphBuilder c(43);
  std::string y = c.input({3, 3});
  std::string inner =
      c.node("Gather", {c.node("Relu", {y}), c.constant({{}, {2}, true})}, {{"axis", int64_t{1}}});
  std::string of_input = c.node("Gather", {y, c.constant({{}, {1}, true})});
  Graph copies = c.finish(c.node("Add", {inner, c.node("Neg", {of_input})}));
  EXPECT_LT(executor_error(copies, c, -1, 1, &ex), 1e-6);
  EXPECT_EQ(gathers(ex), 2);
}

// Resize in every supported mode against the reference (nearest picks bit-exact, linear within
// float rounding), between blocked convolutions too; the reference on hand-checked values; the
// modes it does not take are one clear error each.
TEST(OpTable, ResizeMatchesTheReferenceInEveryMode) {
  const HostTensor empty{{0}, {}, false};
  struct Case {
    std::string mode, coordinates, rounding;
  };
  std::vector<Case> cases;
  for (const char* c :
       {"half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric", "tf_half_pixel_for_nn"})
    for (const char* r : {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"})
      cases.push_back({"nearest", c, r});
  for (const char* c : {"half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric"})
    cases.push_back({"linear", c, ""});
  for (const Case& c : cases) {
    for (const std::vector<double>& scales :
         std::vector<std::vector<double>>{{1, 1, 2, 2}, {1, 1, 1.5, 0.5}, {1, 1, 0.6, 2.5}}) {
      SCOPED_TRACE(fmt::format("{} {} {} scales {}", c.mode, c.coordinates, c.rounding,
                               fmt::join(scales, "x")));
      GraphBuilder b(51);
      std::map<std::string, graph::AttrValue> attrs{
          {"mode", c.mode}, {"coordinate_transformation_mode", c.coordinates}};
      if (!c.rounding.empty()) attrs["nearest_mode"] = c.rounding;
      std::string y = b.node(
          "Resize", {b.input({1, 3, 7, 9}), b.constant(empty), b.constant({{4}, scales, false})},
          attrs);
      Graph g = b.finish(y);
      EXPECT_LE(executor_error(g, b, -1, 1), c.mode == "nearest" ? 0.0 : 1e-6);
    }
  }
  // Sizes, between blocked convolutions (the resize runs on NCHW between them).
  {
    GraphBuilder b(52);
    std::string h = b.conv(b.input({1, 16, 6, 5}), 16, 16, 3, 1, 1);
    h = b.node("Resize",
               {h, b.constant(empty), b.constant(empty), b.constant({{4}, {1, 16, 13, 9}, true})},
               {{"mode", std::string("linear")}});
    Graph g = b.finish(b.conv(h, 16, 16, 3, 1, 1));
    EXPECT_EQ(g.shape(g.outputs[0]), (std::vector<int64_t>{1, 16, 13, 9}));
    EXPECT_LT(executor_error(g, b, -1, 1), 1e-5);
  }
  // A segmentation head's upsampling, large enough that the first pass (along the rows) runs on
  // the threads too, reading its taps from the tables as the last pass does.
  for (const char* mode : {"linear", "nearest"}) {
    SCOPED_TRACE(mode);
    GraphBuilder b(55);
    std::string y = b.node("Resize",
                           {b.input({1, 21, 14, 14}), b.constant(empty), b.constant(empty),
                            b.constant({{4}, {1, 21, 112, 112}, true})},
                           {{"mode", std::string(mode)}});
    Graph g = b.finish(y);
    EXPECT_LE(executor_error(g, b, -1, 1), std::string(mode) == "nearest" ? 0.0 : 1e-6);
  }
  // The reference: ties of asymmetric nearest round to the floor; align_corners keeps the ends.
  {
    GraphBuilder b(53);
    Graph g = b.finish(
        b.node("Resize", {b.input({1, 3}), b.constant(empty), b.constant({{2}, {1, 2}, false})},
               {{"coordinate_transformation_mode", std::string("asymmetric")}}));
    HostTensor x{{1, 3}, {10, 20, 30}, false};
    EXPECT_EQ(graph::run_reference(g, {{g.inputs[0], x}}).at(0).data,
              (std::vector<double>{10, 10, 20, 20, 30, 30}));
  }
  {
    GraphBuilder b(54);
    Graph g = b.finish(b.node(
        "Resize",
        {b.input({1, 2}), b.constant(empty), b.constant(empty), b.constant({{2}, {1, 4}, true})},
        {{"mode", std::string("linear")},
         {"coordinate_transformation_mode", std::string("align_corners")}}));
    HostTensor x{{1, 2}, {0, 3}, false};
    std::vector<double> y = graph::run_reference(g, {{g.inputs[0], x}}).at(0).data;
    ASSERT_EQ(y.size(), 4u);
    for (int i = 0; i < 4; ++i) EXPECT_NEAR(y[i], i, 1e-6);
  }
  // Upsample (opset 7's scales attribute): nearest, the floor of y / scale.
  {
    GraphBuilder b(55);
    std::string y =
        b.node("Upsample", {b.input({1, 2, 3, 4})}, {{"scales", std::vector<double>{1, 1, 2, 3}}});
    Graph g = b.finish(y);
    EXPECT_EQ(g.shape(g.outputs[0]), (std::vector<int64_t>{1, 2, 6, 12}));
    EXPECT_EQ(executor_error(g, b, -1, 1), 0.0);
  }
  for (const auto& [attr, value] : std::vector<std::pair<std::string, graph::AttrValue>>{
           {"mode", std::string("cubic")},
           {"coordinate_transformation_mode", std::string("tf_crop_and_resize")},
           {"antialias", int64_t{1}}}) {
    SCOPED_TRACE(attr);
    GraphBuilder b(56);
    std::string y =
        b.node("Resize",
               {b.input({1, 1, 4, 4}), b.constant(empty), b.constant({{4}, {1, 1, 2, 2}, false})},
               {{attr, value}});
    try {
      b.finish(y);
      FAIL() << "expected an error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("(Resize): " + attr), std::string::npos) << e.what();
    }
  }
}

TEST(OpTable, DynamicShapeArithmeticIsOneClearError) {
  GraphBuilder b(26);
  std::string x = b.input({2, 12});
  // Range's limit read from the runtime tensor: nothing static about it.
  std::string r = b.node(
      "Range", {b.constant({{}, {0}, true}), b.node("ReduceMax", {x}, {{"keepdims", int64_t{0}}}),
                b.constant({{}, {1}, true})});
  try {
    b.finish(r);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("(Range)"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("dynamic shapes are not supported"), std::string::npos)
        << e.what();
  }
}

// Trilu on run-time values: the kernel keeps the diagonals the reference keeps, above or below
// a k of either sign, over a batch of matrices.
TEST(OpTable, TriluMatchesTheReference) {
  for (int64_t upper : {0, 1}) {
    for (int64_t k : {-2, 0, 3}) {
      SCOPED_TRACE(fmt::format("upper {} k {}", upper, k));
      GraphBuilder b(27);
      std::string x = b.input({3, 5, 7});
      std::string t = b.node("Trilu", {x, b.constant({{}, {double(k)}, true})}, {{"upper", upper}});
      Graph g = b.finish(b.node("Add", {t, b.constant({{}, {0.25}, false})}));
      EXPECT_LT(executor_error(g, b, -1, 1), 1e-6);
    }
  }
}

// ScatterND is evaluated at import: on a value known only at run time it is one clear error that
// names the input, not a wrong answer.
TEST(OpTable, ScatterIntoARuntimeValueIsOneClearError) {
  GraphBuilder b(28);
  std::string x = b.input({4, 3});
  std::string s = b.node(
      "ScatterND", {x, b.constant({{1, 1}, {2}, true}), b.constant({{1, 3}, {1, 2, 3}, false})});
  try {
    b.finish(s);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("(ScatterND)"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("input '" + x + "' is known only at run time"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace tessera
