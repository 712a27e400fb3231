// ConvTranspose as a convolution: the input with (stride - 1) zeros between its pixels and the
// padding around it (tessera.ZeroInsert), then a stride-1 Conv with the weights flipped and their
// channel axes swapped. The convolution then takes every path a Conv takes (batch norms folded
// into it, Relu fused, channel blocks, tuned kernels) at the price of the multiplies by the
// inserted zeros (3 in 4 at stride 2): the DCGAN generator ran 413 ms as the gathered
// ConvTranspose kernel against onnxruntime's 3.1.
#include <fmt/format.h>

#include "graph/op_table.h"
#include "graph/passes.h"

namespace tessera::graph {

int lower_conv_transpose(Graph& g) {
  int lowered = 0;
  std::vector<Node> nodes;
  for (const Node& n : g.nodes) {
    bool has_bias = n.inputs.size() > 2 && !n.inputs[2].empty();
    if (n.op != "ConvTranspose" || !g.is_constant(n.inputs[1]) ||
        (has_bias && !g.is_constant(n.inputs[2])) || n.attrs.count("output_shape")) {
      nodes.push_back(n);
      continue;
    }
    const HostTensor& w = g.constants.at(n.inputs[1]);  // [C][O/group][kh][kw]
    const std::vector<int64_t>& x = g.shape(n.inputs[0]);
    const int64_t group = n.attr_int("group", 1);
    const int64_t c = w.shape[0], og = w.shape[1], kh = w.shape[2], kw = w.shape[3];
    const int64_t cg = c / group;
    std::vector<int64_t> strides = n.attr_ints("strides", {1, 1});
    std::vector<int64_t> dilations = n.attr_ints("dilations", {1, 1});
    std::vector<int64_t> pads = n.attr_ints("pads", {0, 0, 0, 0});
    std::vector<int64_t> extra = n.attr_ints("output_padding", {0, 0});
    // The convolution's padding: the window's reach less the transposed one's pads (and the
    // output_padding after); a negative one would crop, which this form does not do.
    std::vector<int64_t> conv_pads{
        (kh - 1) * dilations[0] - pads[0], (kw - 1) * dilations[1] - pads[1],
        (kh - 1) * dilations[0] - pads[2] + extra[0], (kw - 1) * dilations[1] - pads[3] + extra[1]};
    if (std::any_of(conv_pads.begin(), conv_pads.end(), [](int64_t p) { return p < 0; })) {
      nodes.push_back(n);
      continue;
    }
    Node stuff;
    stuff.name = n.name + "_zero_insert";
    stuff.op = "tessera.ZeroInsert";
    stuff.inputs = {n.inputs[0]};
    stuff.outputs = {n.outputs[0] + "_zero_inserted"};
    stuff.attrs["strides"] = strides;
    stuff.attrs["pads"] = conv_pads;
    g.shapes[stuff.outputs[0]] = {x[0], x[1],
                                  (x[2] - 1) * strides[0] + 1 + conv_pads[0] + conv_pads[2],
                                  (x[3] - 1) * strides[1] + 1 + conv_pads[1] + conv_pads[3]};
    HostTensor flipped{{group * og, cg, kh, kw}, std::vector<double>(w.data.size()), false};
    for (int64_t ci = 0; ci < c; ++ci)
      for (int64_t o = 0; o < og; ++o)
        for (int64_t y = 0; y < kh; ++y)
          for (int64_t xx = 0; xx < kw; ++xx)
            flipped.data[(((ci / cg * og + o) * cg + ci % cg) * kh + y) * kw + xx] =
                w.data[((ci * og + o) * kh + (kh - 1 - y)) * kw + (kw - 1 - xx)];
    const std::string weights = n.name + "_flipped_weights";
    g.constants[weights] = flipped;
    g.shapes[weights] = flipped.shape;
    Node conv;
    conv.name = n.name;
    conv.op = "Conv";
    conv.inputs = {stuff.outputs[0], weights};
    if (has_bias) conv.inputs.push_back(n.inputs[2]);
    conv.outputs = n.outputs;
    conv.attrs["kernel_shape"] = std::vector<int64_t>{kh, kw};
    conv.attrs["dilations"] = dilations;
    conv.attrs["group"] = group;
    nodes.push_back(std::move(stuff));
    nodes.push_back(std::move(conv));
    ++lowered;
  }
  g.nodes = std::move(nodes);
  return lowered;
}

}  // namespace tessera::graph
