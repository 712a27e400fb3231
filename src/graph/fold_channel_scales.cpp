// Squeeze-excite's scale moved from a convolution's input onto its weights.
#include <algorithm>

#include "graph/op_attrs.h"
#include "graph/passes.h"
#include "te/error.h"

namespace tessera::graph {

const Node* scaled_weights(const Graph& g, const std::string& value) {
  for (const Node& n : g.nodes)
    if (n.op == "Mul" && n.attr_int(kScaledWeightsAttr, 0) == 1 && n.outputs[0] == value &&
        n.inputs.size() == 2 && g.is_constant(n.inputs[0]))
      return &n;
  return nullptr;
}

int fold_channel_scales(Graph& g) {
  std::map<std::string, size_t> producer;
  for (size_t i = 0; i < g.nodes.size(); ++i)
    for (const std::string& v : g.nodes[i].outputs) producer[v] = i;
  int folded = 0;
  for (Node& conv : g.nodes) {
    // Blocked ones: their weights are packed at planning, and the scale applies to the packed
    // copy (Planner::plan_blocked_conv). An NCHW one would pack them again in every run.
    if (conv.op != "Conv" || conv.attr_int(kBlockAttr, 0) <= 0 || conv.inputs.size() < 2 ||
        !g.is_constant(conv.inputs[1]))
      continue;
    const std::string y = conv.inputs[0];
    auto p = producer.find(y);
    if (p == producer.end()) continue;
    Node& mul = g.nodes[p->second];
    if (mul.op != "Mul" || mul.inputs.size() != 2 || mul.attrs.count(kScaledWeightsAttr)) continue;
    if (g.is_output(y) || g.consumers(y).size() != 1 ||
        std::count(conv.inputs.begin(), conv.inputs.end(), y) != 1)
      continue;
    const std::vector<int64_t>& in = g.shape(y);
    const std::vector<int64_t>& weights = g.shape(conv.inputs[1]);
    if (in.size() != 4 || in[0] != 1 || weights.size() != 4) continue;
    Window2d w;
    try {
      w = read_window(conv, in, &weights);
    } catch (const Error&) {
      continue;
    }
    if (w.group != 1) continue;
    // The operand of the input's shape, and a scale per channel computed in the model: the
    // point is to save a pass per run, which a constant scale would rather save at import.
    int full = g.shape(mul.inputs[0]) == in ? 0 : g.shape(mul.inputs[1]) == in ? 1 : -1;
    if (full < 0) continue;
    const std::string x = mul.inputs[full], scale = mul.inputs[1 - full];
    if (g.is_constant(scale) || !is_per_channel(g.shape(scale), w.c)) continue;
    // Scaling the weights reads and writes O*C*KH*KW values where scaling the input does C*H*W:
    // EfficientNet-B0's 112x112 and 56x56 layers save nearly all of their scale pass, its 7x7
    // ones (1152 channels into 192 or 320) would do more work so.
    if (w.out_channels * w.kh * w.kw >= w.h * w.w) continue;
    const std::string scaled = conv.outputs[0] + ".weight_scaled";  // values are unique
    mul.inputs = {conv.inputs[1], scale};
    mul.outputs = {scaled};
    mul.attrs[kScaledWeightsAttr] = int64_t{1};
    mul.attrs.erase(kBlockAttr);
    g.shapes[scaled] = weights;
    g.shapes.erase(y);
    conv.inputs[0] = x;
    conv.inputs[1] = scaled;
    ++folded;
  }
  return folded;
}

}  // namespace tessera::graph
