#include <algorithm>
#include <cmath>
#include <optional>
#include <utility>

#include "graph/op_attrs.h"
#include "graph/passes.h"
#include "te/error.h"

namespace tessera::graph {

namespace {

// A blocked kernel runs one activation, last; Relu and Clip after one stay as they always were.
bool activated(const Node& n) {
  return std::any_of(n.epilogue.begin(), n.epilogue.end(),
                     [](const Epilogue& e) { return e.kind != Epilogue::Kind::kAdd; });
}

bool fusable_producer(const Node& n) {
  return n.op == "Conv" || n.op == "Gemm" || n.op == "MatMul";
}

// Joins `next` (which reads only `producer`'s output among produced values, or adds a tensor of
// broadcastable shape) to the producer's epilogue; false when it does not fit.
bool absorb(Graph& g, Node& producer, const Node& next) {
  const std::string& y = producer.outputs[0];
  const std::vector<int64_t>& shape = g.shape(y);
  if (next.op == "Relu") {
    producer.epilogue.push_back({Epilogue::Kind::kRelu, -1, 0, 0});
    return true;
  }
  if (next.op == "HardSwish" || next.op == "Tanh") {
    if (activated(producer)) return false;
    producer.epilogue.push_back(
        {next.op == "Tanh" ? Epilogue::Kind::kTanh : Epilogue::Kind::kHardSwish, -1, 0, 0});
    return true;
  }
  // The tanh approximation is a different function; only the exact form is fused.
  if (next.op == "Gelu" && next.attr_string("approximate", "none") == "none") {
    if (activated(producer)) return false;
    producer.epilogue.push_back({Epilogue::Kind::kGelu, -1, 0, 0});
    return true;
  }
  if (next.op == "Clip") {
    if (next.inputs[0] != y) return false;
    std::pair<double, double> bounds;
    try {
      bounds = clip_bounds(next, g);
    } catch (const Error&) {
      return false;
    }
    producer.epilogue.push_back({Epilogue::Kind::kClip, -1, bounds.first, bounds.second});
    return true;
  }
  if (next.op == "Add") {
    const std::string& other = next.inputs[0] == y ? next.inputs[1] : next.inputs[0];
    if (other == y) return false;  // y + y
    // The result keeps the producer's shape, so the other operand may broadcast only into it.
    std::vector<int64_t> joint;
    try {
      joint = broadcast_shapes(shape, g.shape(other));
    } catch (const Error&) {
      return false;
    }
    if (joint != shape) return false;
    // Epilogue operands follow the op's own optional inputs (a Conv's bias, a Gemm's C), which
    // are padded with "" (absent) so an operand is never read as one of them.
    size_t arity = producer.op == "MatMul" ? 2 : 3;
    if (producer.inputs.size() < arity) producer.inputs.resize(arity);
    producer.inputs.push_back(other);
    producer.epilogue.push_back(
        {Epilogue::Kind::kAdd, static_cast<int>(producer.inputs.size()) - 1, 0, 0});
    return true;
  }
  return false;
}

// SiLU as exporters write it, Mul(y, Sigmoid(y)): the indices of the Sigmoid and the Mul when
// they are `y`'s only readers and the Sigmoid's value is read by that Mul alone.
std::optional<std::pair<size_t, size_t>> silu_of(const Graph& g, const std::string& y) {
  std::vector<size_t> readers = g.consumers(y);
  if (readers.size() != 2) return std::nullopt;
  for (int first = 0; first < 2; ++first) {
    const size_t s = readers[first], m = readers[1 - first];
    const Node& sigmoid = g.nodes[s];
    const Node& mul = g.nodes[m];
    if (sigmoid.op != "Sigmoid" || mul.op != "Mul" || mul.inputs.size() != 2) continue;
    const std::string& gate = sigmoid.outputs[0];
    if (g.is_output(gate) || g.consumers(gate).size() != 1) continue;
    if ((mul.inputs[0] == y && mul.inputs[1] == gate) ||
        (mul.inputs[0] == gate && mul.inputs[1] == y))
      return std::make_pair(s, m);
  }
  return std::nullopt;
}

// A scalar constant operand of `n` other than `value`, when `n` is binary and reads `value`.
std::optional<double> scalar_operand(const Graph& g, const Node& n, const std::string& value) {
  if (n.inputs.size() != 2) return std::nullopt;
  const std::string& other = n.inputs[0] == value ? n.inputs[1] : n.inputs[0];
  if (other == value || (n.inputs[0] != value && n.inputs[1] != value)) return std::nullopt;
  if (!g.is_constant(other) || g.constants.at(other).data.size() != 1) return std::nullopt;
  return g.constants.at(other).data[0];
}

bool near(double a, double b) {
  return std::abs(a - b) <= 1e-6 * std::abs(b);
}

// The one node reading `value`, when nothing else (nor the graph's outputs) sees it.
std::optional<size_t> sole_reader(const Graph& g, const std::string& value) {
  if (g.is_output(value)) return std::nullopt;
  std::vector<size_t> readers = g.consumers(value);
  if (readers.size() != 1) return std::nullopt;
  return readers[0];
}

// The exact GELU as exporters write it: y/sqrt2 (a Div or a Mul by 1/sqrt2), Erf, Add 1, and the
// product with y and 1/2 in either order: Mul(Mul(y, erf + 1), 1/2) (torch's nn.GELU) or
// Mul(Mul(y, 1/2), erf + 1). The indices of its five nodes, the last first, when they read
// nothing but `y` and each other and nothing else reads them.
std::optional<std::vector<size_t>> gelu_of(const Graph& g, const std::string& y) {
  std::vector<size_t> readers = g.consumers(y);
  if (readers.size() != 2) return std::nullopt;
  for (int first = 0; first < 2; ++first) {
    const Node& scale = g.nodes[readers[first]];
    const std::optional<double> by = scalar_operand(g, scale, y);
    if (!by || !((scale.op == "Div" && scale.inputs[0] == y && near(*by, std::sqrt(2.0))) ||
                 (scale.op == "Mul" && near(*by, std::sqrt(0.5)))))
      continue;
    const std::optional<size_t> erf = sole_reader(g, scale.outputs[0]);
    if (!erf || g.nodes[*erf].op != "Erf") continue;
    const std::optional<size_t> plus_one = sole_reader(g, g.nodes[*erf].outputs[0]);
    if (!plus_one || g.nodes[*plus_one].op != "Add") continue;
    const std::optional<double> one =
        scalar_operand(g, g.nodes[*plus_one], g.nodes[*erf].outputs[0]);
    if (!one || *one != 1.0) continue;
    const std::string& gate = g.nodes[*plus_one].outputs[0];
    const size_t product = readers[1 - first];
    const Node& mul = g.nodes[product];
    if (mul.op != "Mul" || mul.inputs.size() != 2) continue;
    const std::optional<size_t> last = sole_reader(g, mul.outputs[0]);
    if (!last || g.nodes[*last].op != "Mul") continue;
    const Node& end = g.nodes[*last];
    const bool gate_first = (mul.inputs[0] == y && mul.inputs[1] == gate) ||
                            (mul.inputs[0] == gate && mul.inputs[1] == y);
    bool matched = false;
    if (gate_first) {
      const std::optional<double> half = scalar_operand(g, end, mul.outputs[0]);
      matched = half && *half == 0.5 && sole_reader(g, gate) == product;
    } else {
      const std::optional<double> half = scalar_operand(g, mul, y);
      matched = half && *half == 0.5 && sole_reader(g, gate) == *last && end.inputs.size() == 2 &&
                ((end.inputs[0] == mul.outputs[0] && end.inputs[1] == gate) ||
                 (end.inputs[0] == gate && end.inputs[1] == mul.outputs[0]));
    }
    if (!matched) continue;
    std::vector<size_t> nodes{*last, product, *plus_one, *erf, readers[first]};
    return nodes;
  }
  return std::nullopt;
}

}  // namespace

int fuse_epilogues(Graph& g) {
  int fused = 0;
  // A fused node that moves down past other nodes may pass producers not yet visited, so the
  // sweep restarts after each move until one sweep moves nothing.
  bool moved_down = true;
  while (moved_down) {
    moved_down = false;
    for (size_t i = 0; i < g.nodes.size() && !moved_down; ++i) {
      if (!fusable_producer(g.nodes[i])) continue;
      while (true) {
        Node& producer = g.nodes[i];
        const std::string y = producer.outputs[0];
        if (g.is_output(y)) break;
        if (auto silu = silu_of(g, y); silu && !activated(producer)) {
          producer.epilogue.push_back({Epilogue::Kind::kSilu, -1, 0, 0});
          producer.outputs[0] = g.nodes[silu->second].outputs[0];
          // Both read the producer, so both come after it: erased, the later first.
          for (size_t r :
               {std::max(silu->first, silu->second), std::min(silu->first, silu->second)})
            g.nodes.erase(g.nodes.begin() + static_cast<std::ptrdiff_t>(r));
          fused += 2;
          continue;
        }
        if (auto gelu = gelu_of(g, y); gelu && !activated(producer)) {
          producer.epilogue.push_back({Epilogue::Kind::kGelu, -1, 0, 0});
          producer.outputs[0] = g.nodes[gelu->front()].outputs[0];
          // All come after the producer; erased from the back so the indices stay valid.
          std::vector<size_t> order = *gelu;
          std::sort(order.rbegin(), order.rend());
          for (size_t r : order) g.nodes.erase(g.nodes.begin() + static_cast<std::ptrdiff_t>(r));
          fused += static_cast<int>(order.size());
          continue;
        }
        std::vector<size_t> readers = g.consumers(y);
        if (readers.size() != 1) break;
        size_t r = readers[0];
        const Node next = g.nodes[r];
        // The residual operand of an Add must exist before the fused node runs: moving the Add's
        // work up to the producer's position is only valid when its other input is already there.
        if (next.op == "Add") {
          const std::string& other = next.inputs[0] == y ? next.inputs[1] : next.inputs[0];
          bool available = g.is_constant(other) ||
                           std::find(g.inputs.begin(), g.inputs.end(), other) != g.inputs.end();
          for (size_t k = 0; k < i && !available; ++k) available = g.nodes[k].outputs[0] == other;
          if (!available) {
            // The fused node can move down to the Add instead, since everything it reads exists
            // there too (it is read by nothing but that Add).
            Node moved = g.nodes[i];
            if (!absorb(g, moved, next)) break;
            moved.outputs[0] = next.outputs[0];
            g.nodes[r] = std::move(moved);
            g.nodes.erase(g.nodes.begin() + static_cast<std::ptrdiff_t>(i));
            ++fused;
            moved_down = true;
            break;
          }
        }
        if (!absorb(g, producer, next)) break;
        producer.outputs[0] = next.outputs[0];
        g.nodes.erase(g.nodes.begin() + static_cast<std::ptrdiff_t>(r));
        ++fused;
      }
    }
  }
  return fused;
}

}  // namespace tessera::graph
