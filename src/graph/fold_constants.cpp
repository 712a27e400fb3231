#include "graph/passes.h"
#include "graph/reference.h"

namespace tessera::graph {

int fold_constants(Graph& g) {
  int folded = 0;
  std::vector<Node> kept;
  for (const Node& n : g.nodes) {
    // Shape arithmetic import already evaluated (infer_shapes): the node is done.
    if (g.is_constant(n.outputs[0]) && !g.is_output(n.outputs[0])) {
      ++folded;
      continue;
    }
    bool all_constant = !n.inputs.empty();
    for (const std::string& v : n.inputs)
      all_constant = all_constant && (v.empty() || g.is_constant(v));
    // A graph output stays computed by a node, so that the executor writes it like any other.
    if (!all_constant || g.is_output(n.outputs[0])) {
      kept.push_back(n);
      continue;
    }
    std::vector<const HostTensor*> in;
    for (const std::string& v : n.inputs) in.push_back(v.empty() ? nullptr : &g.constants.at(v));
    g.constants[n.outputs[0]] = evaluate_node(n, g, in, true);
    ++folded;
  }
  g.nodes = std::move(kept);
  return folded;
}

}  // namespace tessera::graph
