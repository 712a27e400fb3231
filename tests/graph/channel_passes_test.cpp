// The passes that shape channels for the blocked kernels, on hand-built graphs: padding ragged
// channels (through depthwise convolutions, squeeze-excite, bridges, merged groups), channel
// shuffles as gathers, chains of copies as one strided copy; each checked against the reference
// path and the executor's blocked kernels on random inputs.
#include <gtest/gtest.h>

#include "graph/op_attrs.h"
#include "graph/passes.h"
#include "graph_builder.h"
#include "pass_test_util.h"

namespace tessera {
namespace {

using graph::Graph;
using graph::HostTensor;
using testing::count_op;
using testing::GraphBuilder;
using testing::run;
using testing::run_compiled;

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
}  // namespace tessera
