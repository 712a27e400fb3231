// The operator table: its assembly from the families of rows (op_elementwise.cpp, op_nn.cpp,
// op_data.cpp; the builtin rows point at their rules in shape_inference.cpp and reference.cpp),
// lookup, and the import check of unsupported nodes.
#include "graph/op_table.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "graph/op_rows.h"
#include "te/error.h"

namespace tessera::graph {

namespace {

// ---------------------------------------------------------------------------------------------
// The executor's own operators

OpDef builtin(std::string name, std::vector<std::string> attributes,
              Lowering lowering = Lowering::kPlanner) {
  OpDef d;
  d.name = std::move(name);
  d.attributes = std::move(attributes);
  d.lowering = lowering;
  d.infer = infer_builtin;
  d.reference = reference_builtin;
  return d;
}

std::vector<OpDef> make_table() {
  std::vector<OpDef> t;
  const std::vector<std::string> window{"auto_pad", "dilations", "kernel_shape", "pads", "strides"};
  auto with = [](std::vector<std::string> a, std::initializer_list<std::string> more) {
    a.insert(a.end(), more);
    return a;
  };
  t.push_back(builtin("Conv", with(window, {"group"})));
  t.push_back(builtin("MaxPool", with(window, {"ceil_mode", "storage_order"})));
  t.push_back(builtin("AveragePool", with(window, {"ceil_mode", "count_include_pad"})));
  t.push_back(builtin("GlobalAveragePool", {}));
  t.push_back(builtin("BatchNormalization",
                      {"epsilon", "momentum", "training_mode", "spatial", "is_test"}));
  t.push_back(builtin("Relu", {}));
  t.push_back(builtin("Clip", {"min", "max"}));
  t.push_back(builtin("Add", {}));
  t.push_back(builtin("Mul", {}));
  t.push_back(builtin("Gemm", {"alpha", "beta", "transA", "transB"}));
  t.push_back(builtin("MatMul", {}));
  t.push_back(builtin("Softmax", {"axis"}));
  t.push_back(builtin("Concat", {"axis"}));
  t.push_back(builtin("Transpose", {"perm"}));
  t.push_back(builtin("Flatten", {"axis"}, Lowering::kView));
  t.push_back(builtin("Reshape", {"allowzero"}, Lowering::kView));
  t.push_back(builtin("Identity", {}, Lowering::kView));
  t.push_back(builtin("Dropout", {"ratio", "seed", "is_test"}, Lowering::kView));
  add_view_rows(t);
  add_elementwise_rows(t);
  add_nn_rows(t);
  add_norm_rows(t);
  add_einsum_rows(t);
  add_recurrent_rows(t);
  add_data_rows(t);
  add_resize_rows(t);
  add_mask_rows(t);
  add_attention_rows(t);
  add_folded_rows(t);
  return t;
}

}  // namespace

int64_t broadcast_index(int64_t i, const std::vector<int64_t>& to,
                        const std::vector<int64_t>& from) {
  int64_t src = 0, stride = 1;
  size_t offset = to.size() - from.size();
  for (int64_t d = static_cast<int64_t>(to.size()) - 1; d >= 0; --d) {
    int64_t coord = i % to[d];
    i /= to[d];
    if (d >= static_cast<int64_t>(offset)) {
      int64_t fd = from[d - offset];
      if (fd != 1) src += coord * stride;
      stride *= fd;
    }
  }
  return src;
}

int64_t saturated_int(double d) {
  if (std::isnan(d)) return 0;
  if (d >= 9.2233720368547758e18) return std::numeric_limits<int64_t>::max();
  if (d <= -9.2233720368547758e18) return std::numeric_limits<int64_t>::min();
  return static_cast<int64_t>(d);
}

const std::vector<OpDef>& op_table() {
  static const std::vector<OpDef> table = make_table();
  return table;
}

const OpDef* find_op(std::string_view name) {
  static const std::map<std::string, const OpDef*, std::less<>> index = [] {
    std::map<std::string, const OpDef*, std::less<>> m;
    for (const OpDef& d : op_table()) m[d.name] = &d;
    return m;
  }();
  auto it = index.find(name);
  return it == index.end() ? nullptr : it->second;
}

ElementwiseStep scalar_step(const Node& n, const Graph& g, std::vector<int> inputs) {
  ScalarCall call = scalar_call(n, g);
  ElementwiseStep step;
  step.kind = ElementwiseStep::Kind::kScalar;
  step.inputs = std::move(inputs);
  step.scalar = [call](const std::vector<Expr>& x) { return call.op->build(call.params, x); };
  return step;
}

ScalarCall scalar_call(const Node& n, const Graph& g) {
  const OpDef* op = find_op(n.op);
  if (!op || op->lowering != Lowering::kElementwise)
    throw_internal("{} is not an elementwise operator", n.where());
  return {op, op->params ? op->params(n, g) : std::vector<double>{}};
}

std::optional<std::string> unsupported_nodes(const Graph& g) {
  // op -> the nodes; "op attribute" -> the nodes
  std::map<std::string, std::vector<std::string>> ops, attributes;
  for (const Node& n : g.nodes) {
    const OpDef* op = find_op(n.op);
    if (!op) {
      ops[n.op].push_back(n.name);
      continue;
    }
    for (const auto& [name, value] : n.attrs) {
      if (name.starts_with("tessera.")) continue;
      if (std::find(op->attributes.begin(), op->attributes.end(), name) == op->attributes.end())
        attributes[fmt::format("{} attribute '{}'", n.op, name)].push_back(n.name);
    }
  }
  if (ops.empty() && attributes.empty()) return std::nullopt;
  auto list = [](const std::map<std::string, std::vector<std::string>>& m) {
    std::vector<std::string> parts;
    for (const auto& [what, nodes] : m) {
      std::vector<std::string> shown;
      for (size_t i = 0; i < nodes.size() && i < 3; ++i) shown.push_back("'" + nodes[i] + "'");
      if (nodes.size() > 3) shown.push_back("...");
      parts.push_back(fmt::format("{}{} (node{} {})", what,
                                  nodes.size() > 1 ? fmt::format(" x{}", nodes.size()) : "",
                                  nodes.size() > 1 ? "s" : "", fmt::join(shown, ", ")));
    }
    return fmt::format("{}", fmt::join(parts, ", "));
  };
  std::string message;
  size_t nodes = 0;
  for (const auto& [op, names] : ops) nodes += names.size();
  if (!ops.empty())
    message = fmt::format("{} unsupported node{}: {}", nodes, nodes > 1 ? "s" : "", list(ops));
  if (!attributes.empty())
    message +=
        fmt::format("{}unsupported attributes: {}", message.empty() ? "" : "; ", list(attributes));
  return message;
}

}  // namespace tessera::graph
