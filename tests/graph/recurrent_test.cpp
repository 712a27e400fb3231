// Recurrent layers and integer inputs: one LSTM and GRU step against the ONNX formulas written
// out by hand, longer sequences against the reference, embedding lookups of runtime ids, and
// transposes that move only dimensions of one kept as views. (tests/graph/compare_onnxruntime.py
// checks a bidirectional LSTM, both GRU variants and int64 ids against onnxruntime.)
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "graph/executor.h"
#include "graph/op_table.h"
#include "graph/passes.h"
#include "graph/reference.h"
#include "graph_builder.h"
#include "runtime/isa.h"

namespace tessera {
namespace {

using graph::Graph;
using graph::HostTensor;
using testing::GraphBuilder;

double sigmoid(double x) {
  return 1 / (1 + std::exp(-x));
}

graph::Executor compile_on_two_threads(Graph g) {
  graph::run_default_passes(g);
  graph::ExecutorParams params;
  params.threads = 2;
  return graph::Executor::compile(g, params);
}

HostTensor run_compiled(Graph g, const HostTensor& x, std::vector<std::string>* kernels = nullptr) {
  graph::Executor ex = compile_on_two_threads(std::move(g));
  ex.set_input(0, x);
  ex.run();
  if (kernels)
    for (const graph::KernelInfo& k : ex.kernels()) kernels->push_back(k.workload);
  return ex.output(0);
}

HostTensor vec(std::vector<int64_t> shape, std::vector<double> v) {
  return {std::move(shape), std::move(v), false};
}

// One step, one unit, one input feature: every weight distinct so a gate read from the wrong
// block shows.
TEST(Recurrent, OneLstmStepIsTheOnnxFormula) {
  const double x = 0.7, h0 = 0.5, c0 = -0.25;
  const double w[4] = {0.3, -0.6, 0.9, 0.2}, r[4] = {-0.4, 0.8, 0.1, -0.7};  // i, o, f, c
  const double bw[4] = {0.05, -0.1, 0.15, 0.2}, br[4] = {0.3, 0.02, -0.2, 0.1};
  for (int output = 0; output < 3; ++output) {
    GraphBuilder b(1);
    std::string in = b.input({1, 1, 1});
    std::string y =
        b.node("LSTM",
               {in, b.constant(vec({1, 4, 1}, {w[0], w[1], w[2], w[3]})),
                b.constant(vec({1, 4, 1}, {r[0], r[1], r[2], r[3]})),
                b.constant(vec({1, 8}, {bw[0], bw[1], bw[2], bw[3], br[0], br[1], br[2], br[3]})),
                "", b.constant(vec({1, 1, 1}, {h0})), b.constant(vec({1, 1, 1}, {c0}))},
               {{"hidden_size", int64_t{1}}, {"tessera.output", int64_t{output}}});
    Graph g = b.finish(y);
    auto gate = [&](int k) { return w[k] * x + r[k] * h0 + bw[k] + br[k]; };
    const double c = sigmoid(gate(2)) * c0 + sigmoid(gate(0)) * std::tanh(gate(3));
    const double h = sigmoid(gate(1)) * std::tanh(c);
    const double expected = output == 2 ? c : h;
    HostTensor in_x = vec({1, 1, 1}, {x});
    EXPECT_NEAR(graph::run_reference(g, {{in, in_x}}).at(0).data.at(0), expected, 1e-12);
    EXPECT_NEAR(run_compiled(g, in_x).data.at(0), expected, 1e-6) << "output " << output;
  }
}

TEST(Recurrent, OneGruStepIsTheOnnxFormulaWithAndWithoutLinearBeforeReset) {
  const double x = -0.8, h0 = 0.6;
  const double w[3] = {0.5, -0.3, 0.7}, r[3] = {0.2, 0.9, -0.6};  // z, r, h
  const double bw[3] = {0.1, -0.05, 0.2}, br[3] = {-0.15, 0.25, 0.3};
  for (int64_t lbr : {0, 1}) {
    GraphBuilder b(2);
    std::string in = b.input({1, 1, 1});
    std::string y = b.node("GRU",
                           {in, b.constant(vec({1, 3, 1}, {w[0], w[1], w[2]})),
                            b.constant(vec({1, 3, 1}, {r[0], r[1], r[2]})),
                            b.constant(vec({1, 6}, {bw[0], bw[1], bw[2], br[0], br[1], br[2]})), "",
                            b.constant(vec({1, 1, 1}, {h0}))},
                           {{"hidden_size", int64_t{1}}, {"linear_before_reset", lbr}});
    Graph g = b.finish(y);
    const double z = sigmoid(w[0] * x + r[0] * h0 + bw[0] + br[0]);
    const double rg = sigmoid(w[1] * x + r[1] * h0 + bw[1] + br[1]);
    const double state = lbr ? rg * (r[2] * h0 + br[2]) : r[2] * (rg * h0) + br[2];
    const double expected = (1 - z) * std::tanh(w[2] * x + bw[2] + state) + z * h0;
    HostTensor in_x = vec({1, 1, 1}, {x});
    EXPECT_NEAR(graph::run_reference(g, {{in, in_x}}).at(0).data.at(0), expected, 1e-12);
    EXPECT_NEAR(run_compiled(g, in_x).data.at(0), expected, 1e-6) << "lbr " << lbr;
  }
}

// Many steps, a batch of 3, both directions: every step's state and cell run through parts of
// the output and two alternating cell buffers.
TEST(Recurrent, LongSequencesInBothDirectionsMatchTheReference) {
  for (const char* op : {"LSTM", "GRU"}) {
    SCOPED_TRACE(op);
    const int64_t gates = std::string(op) == "LSTM" ? 4 : 3, hidden = 7, input = 5;
    for (int output = 0; output < (gates == 4 ? 3 : 2); ++output) {
      GraphBuilder b(3);
      std::string in = b.input({9, 3, input});
      std::string y = b.node(
          op,
          {in, b.random({2, gates * hidden, input}, -0.6, 0.6),
           b.random({2, gates * hidden, hidden}, -0.6, 0.6),
           b.random({2, 2 * gates * hidden}, -0.3, 0.3), "", b.random({2, 3, hidden})},
          {{"direction", std::string("bidirectional")}, {"tessera.output", int64_t{output}}});
      Graph g = b.finish(y);
      HostTensor x = b.random_tensor({9, 3, input});
      HostTensor expected = graph::run_reference(g, {{in, x}}).at(0);
      std::vector<std::string> kernels;
      HostTensor got = run_compiled(g, x, &kernels);
      EXPECT_EQ(got.shape, expected.shape);
      EXPECT_LT(testing::max_relative_error(got, expected), 1e-5) << "output " << output;
      // The input projection of all 27 rows packs its weights in blocks of the vector's lanes,
      // which do not divide the 28 or 21 gate rows: the last block is zero-padded.
      const std::string projection =
          fmt::format("dense:B=27,I={},O={},WB={}", input, gates * hidden, target_isa().f32_lanes);
      EXPECT_NE(std::find(kernels.begin(), kernels.end(), projection), kernels.end());
    }
  }
}

// Every other step runs the recurrent product's rows backwards (a second kernel of the same
// workload), over as many steps as forwards, and the sequence still matches the reference.
TEST(Recurrent, EveryOtherStepReadsTheRecurrentWeightsBackwards) {
  const int64_t hidden = 40, input = 6;
  GraphBuilder b(5);
  std::string in = b.input({8, 1, input});
  std::string y =
      b.node("LSTM",
             {in, b.random({1, 4 * hidden, input}, -0.4, 0.4),
              b.random({1, 4 * hidden, hidden}, -0.4, 0.4), b.random({1, 8 * hidden}, -0.3, 0.3)},
             {{"hidden_size", hidden}});
  Graph g = b.finish(y);
  HostTensor x = b.random_tensor({8, 1, input});
  HostTensor expected = graph::run_reference(g, {{in, x}}).at(0);
  graph::Executor ex = compile_on_two_threads(g);
  ex.set_input(0, x);
  ex.run();
  EXPECT_LT(testing::max_relative_error(ex.output(0), expected), 1e-5);
  const std::string step = fmt::format("dense:B=1,I={},O={}", hidden, 4 * hidden);
  int forwards = 0, backwards = 0;
  for (const graph::KernelInfo& k : ex.kernels()) {
    if (k.workload != step) continue;
    if (k.in_model.find("reverse(j.outer") != std::string::npos) {
      backwards += k.uses;
    } else {
      forwards += k.uses;
    }
  }
  EXPECT_EQ(forwards, 4);
  EXPECT_EQ(backwards, 4);
}

TEST(Recurrent, EmbeddingLookupOfRuntimeIdsClampsLikeTheReference) {
  GraphBuilder b(4);
  std::string ids = b.input({2, 3});
  std::string e = b.node("Gather", {b.random({10, 4}), ids});
  Graph g = b.finish(e);
  g.int_inputs.insert(ids);
  EXPECT_EQ(graph::id_bound(g, ids), 10);
  // In range, negative (from the end), and past both ends (read as the nearest row).
  HostTensor x{{2, 3}, {0, 9, -1, -10, 12, -40}, true};
  HostTensor expected = graph::run_reference(g, {{ids, x}}).at(0);
  const HostTensor& table = g.constants.begin()->second;
  for (int64_t k = 0; k < 4; ++k) {
    EXPECT_EQ(expected.data[2 * 4 + k], table.data[9 * 4 + k]);  // -1 is row 9
    EXPECT_EQ(expected.data[4 * 4 + k], table.data[9 * 4 + k]);  // 12 clamps to row 9
    EXPECT_EQ(expected.data[5 * 4 + k], table.data[k]);          // -40 clamps to row 0
  }
  graph::Executor ex = graph::Executor::compile(g);
  ASSERT_TRUE(ex.input_is_int(0));
  EXPECT_THROW(ex.set_input(0, HostTensor{{2, 3}, std::vector<double>(6, 1.0), false}), Error);
  ex.set_input(0, x);
  ex.run();
  EXPECT_EQ(testing::max_relative_error(ex.output(0), expected), 0.0);
}

// [1, 35, 650] -> [35, 1, 650] moves a dimension of one: the same bytes, no kernel.
TEST(Recurrent, TransposeOfDimensionsOfOneIsAView) {
  GraphBuilder b(5);
  std::string x = b.input({1, 6, 4});
  std::string t = b.node("Transpose", {x}, {{"perm", std::vector<int64_t>{1, 0, 2}}});
  std::string y = b.node("Relu", {t});
  Graph g = b.finish(y);
  graph::Executor ex = graph::Executor::compile(g);
  EXPECT_EQ(ex.steps(), 1);
  HostTensor in = b.random_tensor({1, 6, 4});
  ex.set_input(0, in);
  ex.run();
  EXPECT_EQ(testing::max_relative_error(ex.output(0), graph::run_reference(g, {{x, in}}).at(0)),
            0.0);
}

}  // namespace
}  // namespace tessera
