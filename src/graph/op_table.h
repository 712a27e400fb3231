/// The graph operators, one row each: the ONNX name, the attributes it understands, its static
/// shape rule, its reference (naive doubles: the tests' ground truth and constant folding) and how
/// the executor lowers it. Import, shape inference, the reference path, constant folding, layout
/// choice and planning all read this table; an operator absent from it is refused at import,
/// with every other unsupported node and attribute of the model in the same message.
///
/// An elementwise operator is one row of scalar functions (`elementwise()`): its shape rule
/// (numpy broadcasting), reference and kernel follow from them, it runs in channel blocks beside
/// blocked convolutions.
#pragma once

#include <functional>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "graph/graph.h"
#include "graph/kernels.h"
#include "graph/op_attrs.h"
#include "te/expr.h"

namespace tessera::graph {

enum class Lowering {
  /// The executor's own planning (Planner, graph/planner.h): library operators with tuned
  /// schedules (Conv, Gemm, MatMul, pooling, Softmax, Relu, Add) and the layout-aware te kernels
  /// (Concat, Transpose, BatchNormalization, GlobalAveragePool).
  kPlanner,
  /// One te kernel of scalar functions over broadcast inputs.
  kElementwise,
  /// No kernel: the output is the first input's storage under another shape.
  kView,
  /// One te kernel of the row's own (`kernel`), reading the node's inputs in order.
  kKernel,
  /// Computed at import from static shapes and constants (Shape, Range, ...); a node of it left
  /// with a runtime input is an error.
  kFolded,
};

using InferFn = std::function<std::vector<int64_t>(const Node&, const Graph&)>;
using ReferenceFn =
    std::function<HostTensor(const Node&, const Graph&, const std::vector<const HostTensor*>&)>;
/// The values an elementwise function reads from the node's attributes (HardSigmoid's alpha
/// and beta), read once at planning.
using ParamsFn = std::function<std::vector<double>(const Node&, const Graph&)>;
using ScalarEvalFn =
    std::function<double(const std::vector<double>& params, const std::vector<double>& x)>;
using ScalarBuildFn =
    std::function<Expr(const std::vector<double>& params, const std::vector<Expr>& x)>;
/// The te kernel of a kKernel row; its arguments are the node's non-empty inputs that are not
/// folded into it (`kernel_inputs`), then the output, in the output's memory order.
using KernelFn = std::function<TeKernel(const Node&, const Graph&)>;

struct OpDef {
  std::string name;
  std::vector<std::string> attributes;
  Lowering lowering = Lowering::kPlanner;
  InferFn infer;
  ReferenceFn reference;
  // kElementwise: inputs taken (max_inputs -1: any number from min_inputs)
  int min_inputs = 1, max_inputs = 1;
  ParamsFn params;
  ScalarEvalFn eval;
  ScalarBuildFn build;
  // kKernel
  KernelFn kernel;
  /// Which inputs the kernel reads (others are constants it folds in: Slice's starts); empty:
  /// every non-empty input.
  std::vector<int> kernel_inputs;
  /// kFolded rows that need no constant input (Shape, Size): the value from static shapes.
  std::function<HostTensor(const Node&, const Graph&)> fold;
};

const std::vector<OpDef>& op_table();
/// The row of an ONNX op type, or nullptr.
const OpDef* find_op(std::string_view name);

/// One elementwise step of a kernel chain: the row's function applied to the value so far and
/// further inputs of the kernel.
struct ScalarCall {
  const OpDef* op = nullptr;
  std::vector<double> params;
};
/// The node's function with its attribute values.
ScalarCall scalar_call(const Node& n, const Graph& g);

/// Every node of `g` whose op has no row, and every attribute a row does not understand, in one
/// line (`unsupported: LayerNormalization x2 (node 'ln1', node 'ln2'), Erf (node 'e')`), or
/// nothing when all are supported.
std::optional<std::string> unsupported_nodes(const Graph& g);

/// Shapes of the builtin (kPlanner and view) rows and their references, defined beside the
/// executor's planning of them (shape_inference.cpp, reference.cpp).
std::vector<int64_t> infer_builtin(const Node& n, const Graph& g);
HostTensor reference_builtin(const Node& n, const Graph& g,
                             const std::vector<const HostTensor*>& in);

/// The elementwise step of a kElementwise node whose further operands are kernel inputs
/// `inputs` (the node's inputs 1.. in the order the kernel takes them).
ElementwiseStep scalar_step(const Node& n, const Graph& g, std::vector<int> inputs);

/// The reference of Softmax and LogSoftmax along `axis` (before opset 13, `coerce_2d`: over
/// every dimension from `axis` on).
HostTensor softmax_reference(const HostTensor& x, int64_t axis, bool coerce_2d, bool log_softmax);

/// Softmax (or LogSoftmax) along any axis of `shape`: the lowering where the library's
/// row-wise softmax does not fit.
TeKernel softmax_kernel(const std::vector<int64_t>& shape, int64_t axis, bool log_softmax);
/// Max or average pooling over any window of NCHW (rectangular, asymmetric pads, ceil_mode,
/// pads counted in the mean or not): the lowering where the library's pooling does not fit.
TeKernel pool2d_kernel(const Window2d& w, bool is_max);

/// A convolution over any window of NCHW (rectangular kernels and strides, asymmetric pads,
/// dilations, groups), with the bias as a third argument when `bias`: the lowering where the
/// library's convolutions do not fit.
TeKernel conv2d_kernel(const Window2d& w, bool bias);

/// An LSTM or GRU node, checked: what the executor plans and the reference computes.
struct RecurrentSpec {
  bool gru = false;
  int64_t gates = 4;  // LSTM: i, o, f, c; GRU: z, r, h (ONNX's order)
  int64_t seq = 0, batch = 0, input = 0, hidden = 0, directions = 1;
  bool reverse_first = false;        // direction=reverse (bidirectional: the second runs backwards)
  bool linear_before_reset = false;  // GRU
  int output = 0;  // tessera.output: 0 the sequence Y, 1 the last state Y_h, 2 the last cell Y_c
};
RecurrentSpec recurrent_spec(const Node& n, const Graph& g);

/// One time step's cell, over the step's input projection `xw` [batch][gates*hidden], the
/// state's `hr`, and the biases of both (`bias_x`, `bias_h`, [gates*hidden]):
/// LSTM: (xw, hr, bias_x, bias_h, c) -> next c; (xw, hr, bias_x, bias_h, next c) -> h.
TeKernel lstm_cell_kernel(int64_t batch, int64_t hidden);
TeKernel lstm_hidden_kernel(int64_t batch, int64_t hidden);
/// GRU: (xw, hr, bias_x, bias_h, [reset_term,] h) -> next h; with linear_before_reset `hr`
/// holds all three gates, without it z and r only, and `reset_term` is (r * h) R_h, from
/// gru_reset_kernel's (xw, hr, bias_x, bias_h, h) -> r * h.
TeKernel gru_cell_kernel(int64_t batch, int64_t hidden, bool linear_before_reset);
TeKernel gru_reset_kernel(int64_t batch, int64_t hidden);

/// The integer inputs and the views of them (a Reshape of the token ids: GPT-2's
/// `input_ids.view(-1, n)`), which only Gathers may read as indices.
std::set<std::string> id_values(const Graph& g, const std::set<std::string>& inputs);
/// The size of the smallest table the Gathers reading integer input `input` (or a view of it)
/// index: ids are read in [0, bound).
int64_t id_bound(const Graph& g, const std::string& input);

/// Whether an ONNX element type (a Cast's `to`) is a floating-point one.
bool is_float_type(int64_t onnx_type);

/// A constant's element as an integer: saturated at int64's ends (exporters write INT64_MAX for
/// "to the end", which a double rounds to 2^63, past the largest int64).
int64_t saturated_int(double d);

/// Flat index into `from` (broadcast numpy-style to `to`) of flat index `i` of `to`.
int64_t broadcast_index(int64_t i, const std::vector<int64_t>& to,
                        const std::vector<int64_t>& from);

}  // namespace tessera::graph
