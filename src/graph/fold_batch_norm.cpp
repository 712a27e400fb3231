#include <cmath>

#include "graph/passes.h"

namespace tessera::graph {

std::optional<BatchNormAffine> constant_batch_norm(const Graph& g, const Node& bn,
                                                   const std::string& input) {
  if (bn.op != "BatchNormalization" || bn.inputs.size() < 5 || bn.inputs[0] != input)
    return std::nullopt;
  for (size_t k = 1; k <= 4; ++k)
    if (!g.is_constant(bn.inputs[k])) return std::nullopt;
  const HostTensor& gamma = g.constants.at(bn.inputs[1]);
  const HostTensor& beta = g.constants.at(bn.inputs[2]);
  const HostTensor& mean = g.constants.at(bn.inputs[3]);
  const HostTensor& var = g.constants.at(bn.inputs[4]);
  double eps = bn.attr_float("epsilon", 1e-5);
  BatchNormAffine a;
  for (size_t c = 0; c < gamma.data.size(); ++c) {
    a.scale.push_back(gamma.data[c] / std::sqrt(var.data[c] + eps));
    a.shift.push_back(beta.data[c] - mean.data[c] * a.scale.back());
  }
  return a;
}

int fold_batch_norm(Graph& g) {
  int folded = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    Node& conv = g.nodes[i];
    if (conv.op != "Conv" || !conv.epilogue.empty() || !g.is_constant(conv.inputs[1])) continue;
    bool has_bias = conv.inputs.size() > 2 && !conv.inputs[2].empty();
    if (has_bias && !g.is_constant(conv.inputs[2])) continue;
    const std::string& y = conv.outputs[0];
    std::vector<size_t> readers = g.consumers(y);
    if (readers.size() != 1 || g.is_output(y)) continue;
    Node& bn = g.nodes[readers[0]];
    std::optional<BatchNormAffine> affine = constant_batch_norm(g, bn, y);
    HostTensor w = g.constants.at(conv.inputs[1]);
    int64_t out_channels = w.shape[0], per_channel = w.num_elements() / out_channels;
    if (!affine || std::ssize(affine->scale) != out_channels) continue;
    HostTensor b{{out_channels}, std::vector<double>(out_channels, 0.0), false};
    if (has_bias) b = g.constants.at(conv.inputs[2]);
    for (int64_t o = 0; o < out_channels; ++o) {
      for (int64_t k = 0; k < per_channel; ++k) w.data[o * per_channel + k] *= affine->scale[o];
      b.data[o] = b.data[o] * affine->scale[o] + affine->shift[o];
    }
    // New names: the original weights may be shared with another node.
    std::string w_name = conv.name + ".weight_bn", b_name = conv.name + ".bias_bn";
    g.constants[w_name] = std::move(w);
    g.constants[b_name] = std::move(b);
    g.shapes[w_name] = g.constants[w_name].shape;
    g.shapes[b_name] = {out_channels};
    conv.inputs.resize(3);
    conv.inputs[1] = w_name;
    conv.inputs[2] = b_name;
    conv.outputs[0] = bn.outputs[0];
    // The BN node now reads nothing that is produced and writes a value the conv writes instead;
    // it is dropped right away so no second producer exists.
    g.nodes.erase(g.nodes.begin() + static_cast<std::ptrdiff_t>(readers[0]));
    ++folded;
  }
  // A batch norm no convolution absorbs (DenseNet's, after each Concat) becomes a Mul and an Add
  // of per-channel constants: elementwise rows, which stay in channel blocks and run in one
  // kernel with the Relu after them (a separate NCHW kernel before, and a conversion each way).
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& bn = g.nodes[i];
    if (bn.op != "BatchNormalization" || bn.outputs.size() != 1 || bn.inputs.empty()) continue;
    std::optional<BatchNormAffine> affine = constant_batch_norm(g, bn, bn.inputs[0]);
    const std::vector<int64_t> x = g.shape(bn.inputs[0]);
    if (!affine || x.size() < 2 || std::ssize(affine->scale) != x[1]) continue;
    std::vector<int64_t> per_channel(x.size(), 1);
    per_channel[1] = x[1];
    const std::string scale = bn.name + ".scale_bn", shift = bn.name + ".shift_bn",
                      scaled = bn.outputs[0] + ".scaled_bn";
    g.constants[scale] = {per_channel, affine->scale, false};
    g.constants[shift] = {per_channel, affine->shift, false};
    g.shapes[scale] = g.shapes[shift] = per_channel;
    g.shapes[scaled] = x;
    Node mul, add;
    mul.name = bn.name + ".scale";
    mul.op = "Mul";
    mul.inputs = {bn.inputs[0], scale};
    mul.outputs = {scaled};
    add.name = bn.name;
    add.op = "Add";
    add.inputs = {scaled, shift};
    add.outputs = bn.outputs;
    g.nodes[i] = std::move(mul);
    g.nodes.insert(g.nodes.begin() + static_cast<std::ptrdiff_t>(i) + 1, std::move(add));
    ++i;
    ++folded;
  }
  return folded;
}

}  // namespace tessera::graph
