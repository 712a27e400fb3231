#include <algorithm>

#include "graph/op_attrs.h"
#include "graph/passes.h"
#include "te/error.h"

namespace tessera::graph {

namespace {

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
        std::vector<size_t> readers = g.consumers(y);
        if (readers.size() != 1 || g.is_output(y)) break;
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
