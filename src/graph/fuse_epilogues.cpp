#include <algorithm>
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
  if (next.op == "HardSwish") {
    if (activated(producer)) return false;
    producer.epilogue.push_back({Epilogue::Kind::kHardSwish, -1, 0, 0});
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
