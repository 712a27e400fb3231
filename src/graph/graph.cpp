#include "graph/graph.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "graph/op_table.h"
#include "ops/nn.h"
#include "te/error.h"

namespace tessera::graph {

int64_t num_elements(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    // Shapes come from model files: a product past 64 bits would wrap into a small allocation.
    if (d < 0 || __builtin_mul_overflow(n, d, &n))
      throw_error("shape {} has no valid number of elements", shape_text(shape));
  }
  return n;
}

int64_t HostTensor::num_elements() const {
  return graph::num_elements(shape);
}

std::string shape_text(const std::vector<int64_t>& shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

int64_t Node::attr_int(const std::string& key, int64_t fallback) const {
  auto it = attrs.find(key);
  if (it == attrs.end()) return fallback;
  if (const auto* v = std::get_if<int64_t>(&it->second)) return *v;
  throw_error("{}: attribute {} is not an integer", where(), key);
}

double Node::attr_float(const std::string& key, double fallback) const {
  auto it = attrs.find(key);
  if (it == attrs.end()) return fallback;
  if (const auto* v = std::get_if<double>(&it->second)) return *v;
  if (const auto* v = std::get_if<int64_t>(&it->second)) return static_cast<double>(*v);
  throw_error("{}: attribute {} is not a number", where(), key);
}

std::vector<int64_t> Node::attr_ints(const std::string& key, std::vector<int64_t> fallback) const {
  auto it = attrs.find(key);
  if (it == attrs.end()) return fallback;
  if (const auto* v = std::get_if<std::vector<int64_t>>(&it->second)) return *v;
  throw_error("{}: attribute {} is not a list of integers", where(), key);
}

std::vector<double> Node::attr_floats(const std::string& key, std::vector<double> fallback) const {
  auto it = attrs.find(key);
  if (it == attrs.end()) return fallback;
  if (const auto* v = std::get_if<std::vector<double>>(&it->second)) return *v;
  throw_error("{}: attribute {} is not a list of floats", where(), key);
}

std::string Node::attr_string(const std::string& key, const std::string& fallback) const {
  auto it = attrs.find(key);
  if (it == attrs.end()) return fallback;
  if (const auto* v = std::get_if<std::string>(&it->second)) return *v;
  throw_error("{}: attribute {} is not a string", where(), key);
}

std::string Node::label() const {
  std::string s = op;
  for (const Epilogue& e : epilogue) {
    switch (e.kind) {
      case Epilogue::Kind::kAdd:
        s += "+Add";
        break;
      case Epilogue::Kind::kRelu:
        s += "+Relu";
        break;
      case Epilogue::Kind::kClip:
        s += fmt::format("+Clip({:g},{:g})", e.lo, e.hi);
        break;
      case Epilogue::Kind::kHardSwish:
        s += "+HardSwish";
        break;
      case Epilogue::Kind::kSilu:
        s += "+Silu";
        break;
      case Epilogue::Kind::kGelu:
        s += "+Gelu";
        break;
      case Epilogue::Kind::kTanh:
        s += "+Tanh";
        break;
    }
  }
  return s;
}

Activation fused_activation(Epilogue::Kind kind) {
  switch (kind) {
    case Epilogue::Kind::kRelu:
      return Activation::kRelu;
    case Epilogue::Kind::kHardSwish:
      return Activation::kHardSwish;
    case Epilogue::Kind::kSilu:
      return Activation::kSilu;
    case Epilogue::Kind::kGelu:
      return Activation::kGelu;
    case Epilogue::Kind::kTanh:
      return Activation::kTanh;
    default:
      throw_internal("epilogue kind {} is no activation of its own", static_cast<int>(kind));
  }
}

std::string Node::where() const {
  return fmt::format("node '{}' ({})", name, op);
}

const std::vector<int64_t>& Graph::shape(const std::string& value) const {
  auto it = shapes.find(value);
  if (it == shapes.end()) throw_error("value '{}' has no known shape", value);
  return it->second;
}

std::vector<size_t> Graph::consumers(const std::string& value) const {
  std::vector<size_t> out;
  for (size_t i = 0; i < nodes.size(); ++i)
    if (std::find(nodes[i].inputs.begin(), nodes[i].inputs.end(), value) != nodes[i].inputs.end())
      out.push_back(i);
  return out;
}

bool Graph::is_output(const std::string& value) const {
  return std::find(outputs.begin(), outputs.end(), value) != outputs.end();
}

void sort_topologically(Graph& g) {
  std::set<std::string> ready(g.inputs.begin(), g.inputs.end());
  for (const auto& [name, c] : g.constants) ready.insert(name);
  ready.insert("");
  std::vector<Node> sorted;
  std::vector<bool> placed(g.nodes.size(), false);
  // Repeated sweeps keep the original order wherever it is already valid, which keeps printed
  // graphs and error messages in the order the model file lists its nodes.
  bool progress = true;
  while (sorted.size() < g.nodes.size() && progress) {
    progress = false;
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      if (placed[i]) continue;
      const Node& n = g.nodes[i];
      if (!std::all_of(n.inputs.begin(), n.inputs.end(),
                       [&](const std::string& v) { return ready.count(v) > 0; }))
        continue;
      placed[i] = progress = true;
      for (const std::string& v : n.outputs) ready.insert(v);
      sorted.push_back(n);
    }
  }
  if (sorted.size() < g.nodes.size()) {
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      if (placed[i]) continue;
      for (const std::string& v : g.nodes[i].inputs)
        if (!ready.count(v))
          throw_error("{}: input '{}' is produced by no node (or by a cycle)", g.nodes[i].where(),
                      v);
    }
  }
  for (const std::string& out : g.outputs)
    if (!ready.count(out)) throw_error("graph output '{}' is produced by no node", out);
  g.nodes = std::move(sorted);
}

std::vector<int64_t> broadcast_shapes(const std::vector<int64_t>& a,
                                      const std::vector<int64_t>& b) {
  size_t rank = std::max(a.size(), b.size());
  std::vector<int64_t> out(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1)
      throw_error("shapes {} and {} do not broadcast", shape_text(a), shape_text(b));
    out[i] = da == 1 ? db : da;
  }
  return out;
}

const std::vector<std::string>& supported_ops() {
  static const std::vector<std::string> ops = [] {
    std::vector<std::string> names;
    for (const OpDef& d : op_table()) names.push_back(d.name);
    return names;
  }();
  return ops;
}

std::string print_graph(const Graph& g) {
  std::string s;
  for (const Node& n : g.nodes) {
    std::vector<std::string> out_shapes;
    for (const std::string& o : n.outputs) {
      auto it = g.shapes.find(o);
      out_shapes.push_back(o + " " + (it == g.shapes.end() ? "?" : shape_text(it->second)));
    }
    s += fmt::format("{}: {}({}) -> {}\n", n.name, n.label(), fmt::join(n.inputs, ", "),
                     fmt::join(out_shapes, ", "));
  }
  return s;
}

}  // namespace tessera::graph
