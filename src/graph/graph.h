/// The graph IR of a whole model: values with static shapes, constant initializers, and nodes
/// (an operator type, attributes, and for fused nodes an epilogue list) in topological order.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <variant>
#include <vector>

namespace tessera {
enum class Activation;  // ops/nn.h: the blocked kernels' fused activations
}  // namespace tessera

namespace tessera::graph {

/// A dense row-major tensor on the host. Doubles hold float32 weights and int64 shape operands
/// exactly, so one type serves constants, constant folding and the reference path.
struct HostTensor {
  std::vector<int64_t> shape;
  std::vector<double> data;
  bool is_int = false;  // came from an integer tensor (a Reshape shape, a Clip bound)

  int64_t num_elements() const;
};

/// The product of the dimensions; throws tessera::Error for a negative one or past 64 bits.
int64_t num_elements(const std::vector<int64_t>& shape);
std::string shape_text(const std::vector<int64_t>& shape);

using AttrValue =
    std::variant<int64_t, double, std::vector<int64_t>, std::vector<double>, std::string>;

/// One step applied to a fused node's result, element by element, in order.
struct Epilogue {
  // kHardSwish: x clamp(x / 6 + 1/2, 0, 1); kSilu: x sigmoid(x), ONNX's Mul(x, Sigmoid(x));
  // kGelu: x/2 (1 + erf(x / sqrt 2)), ONNX's Gelu or the Erf chain exporters write for it.
  enum class Kind { kAdd, kRelu, kClip, kHardSwish, kSilu, kGelu, kTanh };
  Kind kind = Kind::kRelu;
  int input = -1;         // kAdd: the node input added (broadcast to the result's shape)
  double lo = 0, hi = 0;  // kClip
};

/// The kernels' activation for an epilogue's kRelu, kHardSwish, kSilu, kGelu or kTanh.
Activation fused_activation(Epilogue::Kind kind);

struct Node {
  std::string name;
  std::string op;                   // the ONNX operator type, e.g. "Conv"
  std::vector<std::string> inputs;  // "" for an omitted optional input
  std::vector<std::string> outputs;
  std::map<std::string, AttrValue> attrs;
  std::vector<Epilogue> epilogue;  // non-empty only on fused Conv, Gemm and MatMul nodes

  int64_t attr_int(const std::string& key, int64_t fallback) const;
  double attr_float(const std::string& key, double fallback) const;
  std::vector<int64_t> attr_ints(const std::string& key, std::vector<int64_t> fallback) const;
  std::vector<double> attr_floats(const std::string& key, std::vector<double> fallback) const;
  std::string attr_string(const std::string& key, const std::string& fallback) const;
  /// `Conv+Add+Relu` for a fused node, the op otherwise.
  std::string label() const;
  /// `node 'conv1' (Conv)`, the prefix of every error about the node.
  std::string where() const;
};

struct Graph {
  std::vector<std::string> inputs;  // runtime inputs (initializers excluded)
  /// Runtime inputs of integer ids (token ids, int64 or int32 in the model), read only as
  /// Gather indices: the model takes them as int64 and its kernels read them as float32.
  std::set<std::string> int_inputs;
  std::vector<std::string> outputs;
  std::map<std::string, std::vector<int64_t>> shapes;  // every value's static shape
  std::map<std::string, HostTensor> constants;
  std::vector<Node> nodes;  // topological order once sort_topologically ran
  int64_t opset = 13;

  bool is_constant(const std::string& value) const { return constants.count(value) > 0; }
  /// The shape of a value; throws tessera::Error when it is unknown.
  const std::vector<int64_t>& shape(const std::string& value) const;
  /// Nodes reading `value`, by index.
  std::vector<size_t> consumers(const std::string& value) const;
  bool is_output(const std::string& value) const;
};

/// Orders nodes so that each comes after the producers of its inputs; throws tessera::Error on a
/// cycle or a value that nothing produces.
void sort_topologically(Graph& g);

/// Infers the static shape of every node output from the inputs' shapes and the attributes.
/// Throws tessera::Error naming the node and its op for an unsupported op, attribute or shape.
void infer_shapes(Graph& g);

/// The shape numpy broadcasting gives a and b; throws tessera::Error when they do not broadcast.
std::vector<int64_t> broadcast_shapes(const std::vector<int64_t>& a, const std::vector<int64_t>& b);

/// The operators the graph layer imports, executes and folds.
const std::vector<std::string>& supported_ops();

/// One line per node: `conv1: Conv+Relu(x, w, b) -> y [1, 8, 16, 16]`.
std::string print_graph(const Graph& g);

}  // namespace tessera::graph
