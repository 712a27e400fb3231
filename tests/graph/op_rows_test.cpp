// The rows transformer, audio and style-transfer exports brought: each kernel against its
// reference on random inputs, Einsum's contractions lowered to MatMul, folding in float32.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "graph/executor.h"
#include "graph/op_attrs.h"
#include "graph/passes.h"
#include "graph/reference.h"
#include "graph_builder.h"
#include "te/error.h"

namespace tessera {
namespace {

using graph::Graph;
using graph::HostTensor;
using testing::executor_error;
using testing::GraphBuilder;

int count_op(const Graph& g, const std::string& op) {
  int n = 0;
  for (const graph::Node& node : g.nodes) n += node.op == op;
  return n;
}

// The error finishing the graph at `out` raises, or "" where it raises none.
std::string error_of(GraphBuilder& b, const std::string& out) {
  try {
    b.finish(out);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

HostTensor ints(std::vector<int64_t> shape, std::vector<double> values) {
  return {std::move(shape), std::move(values), true};
}

// Rows of 40 (the plain kernel) and of 64 (the vectorized one), and GroupNorm's single
// normalization over a group of channels.
TEST(OpRows, InstanceNormalizationMatchesTheReference) {
  for (std::vector<int64_t> shape : {std::vector<int64_t>{2, 3, 40}, {1, 4, 8, 8}, {1, 2, 256}}) {
    SCOPED_TRACE(::testing::PrintToString(shape));
    GraphBuilder b(31);
    std::string x = b.input(shape);
    std::string y =
        b.node("InstanceNormalization", {x, b.random({shape[1]}, 0.5, 1.5), b.random({shape[1]})},
               {{"epsilon", 1e-5}});
    EXPECT_LT(executor_error(b.finish(b.node("Relu", {y})), b, -2, 2), 1e-5);
  }
}

TEST(OpRows, ReductionsL1L2AndSumSquareMatchTheReference) {
  for (const char* op : {"ReduceL2", "ReduceL1", "ReduceSumSquare"}) {
    for (int64_t keep : {0, 1}) {
      SCOPED_TRACE(fmt::format("{} keepdims {}", op, keep));
      GraphBuilder b(32);
      std::string x = b.input({2, 3, 20});
      std::string r = b.node(op, {x}, {{"axes", std::vector<int64_t>{1, 2}}, {"keepdims", keep}});
      EXPECT_LT(executor_error(b.finish(b.node("Relu", {r})), b, -2, 2), 1e-5);
    }
  }
}

// Batched contractions in any letter order become one MatMul; a diagonal, a letter summed
// within one operand and three operands run as the Einsum kernel.
TEST(OpRows, EinsumMatchesTheReferenceLoweredOrNot) {
  struct Case {
    std::string equation;
    std::vector<int64_t> input, other;  // other empty: one operand
    bool lowered;
  };
  const std::vector<Case> cases = {
      {"bhid,bhjd->bhij", {2, 3, 5, 8}, {2, 3, 7, 8}, true},
      {"bhij,bhjd->bihd", {2, 3, 5, 7}, {2, 3, 7, 4}, true},
      {"ij,jk", {6, 5}, {5, 3}, true},
      {"bi,bj->bij", {3, 4}, {3, 5}, true},
      {"bii->bi", {2, 5, 5}, {}, false},
      {"bij,jk->bk", {2, 3, 4}, {4, 5}, false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.equation);
    GraphBuilder b(33);
    std::vector<std::string> in{b.input(c.input)};
    if (!c.other.empty()) in.push_back(b.random(c.other));
    std::string e = b.node("Einsum", in, {{"equation", c.equation}});
    Graph g = b.finish(b.node("Relu", {e}));
    EXPECT_LT(executor_error(g, b, -2, 2, nullptr,
                             [&](const Graph& passed) {
                               EXPECT_EQ(count_op(passed, "Einsum"), c.lowered ? 0 : 1);
                             }),
              1e-5);
  }
  GraphBuilder b(34);
  std::string e =
      error_of(b, b.node("Einsum", {b.input({2, 3})}, {{"equation", std::string("...i->i")}}));
  EXPECT_NE(e.find("an ellipsis in equation '...i->i' is not supported"), std::string::npos) << e;
}

TEST(OpRows, CumSumInEveryModeMatchesTheReference) {
  for (int64_t axis : {1, -2}) {
    for (int64_t exclusive : {0, 1}) {
      for (int64_t reverse : {0, 1}) {
        SCOPED_TRACE(fmt::format("axis {} exclusive {} reverse {}", axis, exclusive, reverse));
        GraphBuilder b(35);
        std::string x = b.input({3, 7, 4});
        std::string c = b.node("CumSum", {x, b.constant(ints({}, {double(axis)}))},
                               {{"exclusive", exclusive}, {"reverse", reverse}});
        EXPECT_LT(executor_error(b.finish(b.node("Relu", {c})), b, -2, 2), 1e-5);
      }
    }
  }
}

// Indices from the end and past it (clamped, as Gather's runtime ids are).
TEST(OpRows, GatherElementsMatchesTheReference) {
  GraphBuilder b(36);
  std::string x = b.input({3, 6});
  std::string i = b.constant(ints({3, 4}, {0, 5, -1, 2, 3, 3, -6, 1, 4, 0, 2, 9}));
  std::string y = b.node("GatherElements", {x, i}, {{"axis", int64_t{1}}});
  EXPECT_LT(executor_error(b.finish(b.node("Relu", {y})), b, -2, 2), 1e-6);
}

// GatherND on constants is folded at import (with batch dimensions); on a runtime value it is
// one clear error.
TEST(OpRows, GatherNdFoldsOnConstantsOnly) {
  GraphBuilder b(37);
  std::string x = b.input({2, 4});
  HostTensor data{{2, 3, 4}, {}, false};
  for (int i = 0; i < 24; ++i) data.data.push_back(i);
  std::string picked = b.node("GatherND", {b.constant(data), b.constant(ints({2, 1}, {2, 1}))},
                              {{"batch_dims", int64_t{1}}});
  Graph g = b.finish(b.node("Add", {x, picked}));
  ASSERT_TRUE(g.is_constant(picked));
  EXPECT_EQ(g.constants.at(picked).shape, (std::vector<int64_t>{2, 4}));
  EXPECT_EQ(g.constants.at(picked).data, (std::vector<double>{8, 9, 10, 11, 16, 17, 18, 19}));
  GraphBuilder r(38);
  std::string y = r.input({3, 4});
  std::string e = error_of(r, r.node("GatherND", {y, r.constant(ints({1, 1}, {1}))}));
  EXPECT_NE(e.find("input '" + y + "' is known only at run time"), std::string::npos) << e;
}

// ScatterElements on constants is folded at import: set, or combined where indices repeat.
TEST(OpRows, ScatterElementsFoldsWithEveryReduction) {
  GraphBuilder b(41);
  std::string x = b.input({3, 4});
  HostTensor data{{3, 4}, std::vector<double>(12, 1.0), false};
  std::string indices = b.constant(ints({2, 2}, {2, -1, 2, 0}));
  std::string updates = b.constant({{2, 2}, {5, 6, 7, 8}, false});
  std::string set =
      b.node("ScatterElements", {b.constant(data), indices, updates}, {{"axis", int64_t{1}}});
  std::string added = b.node("ScatterElements", {b.constant(data), indices, updates},
                             {{"axis", int64_t{1}}, {"reduction", std::string("add")}});
  Graph g = b.finish(b.node("Add", {x, b.node("Add", {set, added})}));
  ASSERT_TRUE(g.is_constant(set));
  EXPECT_EQ(g.constants.at(set).data, (std::vector<double>{1, 1, 5, 6, 8, 1, 7, 1, 1, 1, 1, 1}));
  EXPECT_EQ(g.constants.at(added).data, (std::vector<double>{1, 1, 6, 7, 9, 1, 8, 1, 1, 1, 1, 1}));
}

// Floor and Ceil hold past int32 (1e18: squared, still finite); the L1/L2/SumSquare reductions
// transform their elements even with nothing reduced; scalars are refused where an axis is read.
TEST(OpRows, RoundingReductionsAndScalarsAtTheirEdges) {
  GraphBuilder b(42);
  std::string x = b.input({2, 8});
  HostTensor big{{8}, {3e9, -3e9, 1e18, -1e18, 2.5, -2.5, 8388609.0, -0.5}, false};
  std::string c = b.constant(big);
  std::string y = b.node(
      "Add", {b.node("Floor", {b.node("Add", {x, c})}), b.node("Ceil", {b.node("Sub", {c, x})})});
  std::string sq = b.node("ReduceSumSquare", {y, b.constant(ints({0}, {}))},
                          {{"noop_with_empty_axes", int64_t{1}}});
  Graph g = b.finish(b.node("Add", {sq, b.node("ReduceL1", {x}, {{"keepdims", int64_t{1}}})}));
  EXPECT_LT(executor_error(g, b, -2, 2), 1e-6);
  GraphBuilder r(43);
  std::string scalar = r.input({});
  std::string e = error_of(r, r.node("CumSum", {scalar, r.constant(ints({}, {0}))}));
  EXPECT_NE(e.find("needs rank 1 or more"), std::string::npos) << e;
}

// A Div of integers truncates towards zero, in the kernel as in the reference.
TEST(OpRows, IntegerDivisionTruncates) {
  GraphBuilder b(39);
  std::string x = b.input({4, 16});
  std::string d =
      b.node("Div", {x, b.constant({{}, {0.375}, false})}, {{"tessera.integer", int64_t{1}}});
  Graph g = b.finish(b.node("Add", {d, b.constant({{}, {0.5}, false})}));
  HostTensor in = b.random_tensor({4, 16}, -2, 2);
  HostTensor ref = graph::run_reference(g, {{g.inputs[0], in}}).at(0);
  for (size_t i = 0; i < in.data.size(); ++i)
    EXPECT_EQ(ref.data[i], std::trunc(in.data[i] / 0.375) + 0.5);
  EXPECT_LT(executor_error(g, b, -2, 2), 1e-6);
}

// Constants folded at import are float32 values: T5's position buckets divide a Log by a float32
// constant and truncate, and 8 * log(2) / log(16) is 2 only in float32.
TEST(OpRows, FoldingComputesInFloat32) {
  GraphBuilder b(40);
  std::string x = b.input({1});
  std::string ratio = b.node("Div", {b.node("Log", {b.constant({{1}, {2.0}, false})}),
                                     b.constant({{1}, {double(std::log(16.0f))}, false})});
  std::string bucket = b.node("Cast", {b.node("Mul", {ratio, b.constant({{1}, {8.0}, false})})},
                              {{"to", int64_t{7}}});
  Graph g = b.finish(b.node("Add", {x, b.node("Cast", {bucket}, {{"to", int64_t{1}}})}));
  ASSERT_TRUE(g.is_constant(bucket));
  EXPECT_EQ(g.constants.at(bucket).data, (std::vector<double>{2}));
}

// Self-attention over two heads of 1024 positions (2M scores, past kFusedAttentionScores): the
// scores (with a bias for every head, or one shared by both, after a scale or not), their Softmax
// along the keys and the product with V become one tessera.Attention node, which computes what the
// three did; a Softmax along the queries, probabilities read twice, a mask over the keys alone or
// scores that stay in cache anyway (20 positions) leave the three nodes as they are.
TEST(OpRows, AttentionIsFusedWhereTheScoresAreLargeAndReadOnce) {
  enum class Form {
    kFused,
    kBias,
    kSharedBias,
    kScaledBias,
    kScaleFirst,
    kQueryAxis,
    kReadTwice,
    kKeyMask,
    kSmall
  };
  for (Form form :
       {Form::kFused, Form::kBias, Form::kSharedBias, Form::kScaledBias, Form::kScaleFirst,
        Form::kQueryAxis, Form::kReadTwice, Form::kKeyMask, Form::kSmall}) {
    SCOPED_TRACE(static_cast<int>(form));
    const int64_t n = form == Form::kSmall ? 20 : 1024;
    GraphBuilder b(41);
    std::string x = b.input({2, n, 8});
    std::string q = b.node("MatMul", {x, b.random({8, 8})});
    std::string kt = b.node("Transpose", {b.node("MatMul", {x, b.random({8, 8})})},
                            {{"perm", std::vector<int64_t>{0, 2, 1}}});
    std::string v = b.node("MatMul", {x, b.random({8, 12})});
    std::string scores = b.node("MatMul", {q, kt});
    if (form == Form::kBias) scores = b.node("Add", {scores, b.random({2, n, n}, -3, 3)});
    if (form == Form::kSharedBias) scores = b.node("Add", {b.random({1, n, n}, -3, 3), scores});
    if (form == Form::kScaledBias) {
      scores = b.node("Div", {scores, b.constant({{}, {2.5}, false})});
      scores = b.node("Add", {scores, b.random({1, n, n}, -3, 3)});
    }
    if (form == Form::kScaleFirst) scores = b.node("Mul", {b.constant({{}, {0.4}, false}), scores});
    if (form == Form::kKeyMask) scores = b.node("Add", {scores, b.random({1, 1, n}, -3, 3)});
    std::string p =
        b.node("Softmax", {scores}, {{"axis", int64_t{form == Form::kQueryAxis ? 1 : -1}}});
    std::string out = b.node("MatMul", {p, v});
    if (form == Form::kReadTwice)
      out = b.node("Add", {out, b.node("ReduceMax", {p}, {{"axes", std::vector<int64_t>{2}}})});
    Graph g = b.finish(b.node("Relu", {out}));
    const int expected = form == Form::kFused || form == Form::kBias || form == Form::kSharedBias ||
                                 form == Form::kScaledBias || form == Form::kScaleFirst
                             ? 1
                             : 0;
    // The fused node's own reference (what `run-model --check` runs) computes the same.
    Graph after = g;
    graph::run_default_passes(after);
    HostTensor in = b.random_tensor(g.shape(g.inputs[0]), -2, 2);
    EXPECT_LT(testing::max_relative_error(graph::run_reference(after, {{g.inputs[0], in}}).at(0),
                                          graph::run_reference(g, {{g.inputs[0], in}}).at(0)),
              1e-9);
    EXPECT_LT(executor_error(g, b, -2, 2, nullptr,
                             [&](const Graph& passed) {
                               EXPECT_EQ(count_op(passed, graph::kAttention), expected);
                               EXPECT_EQ(count_op(passed, "Softmax"), 1 - expected);
                             }),
              1e-5);
  }
}

}  // namespace
}  // namespace tessera
