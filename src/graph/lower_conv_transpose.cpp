// ConvTranspose as a convolution, two ways.
//
// With a stride (or a 1x1 input, where any stride is the kernel's size), by phases: output row Y
// is reached from input row i by tap ky = Y + pad - i * s, so the rows of one phase
// (Y + pad) mod s all read the taps of that phase, ceil(k / s) of them, at consecutive input rows.
// One stride-1 Conv computes every phase as channels of its own (output channel o of phase
// (ry, rx) is channel (o * sh + ry) * sw + rx) and a tessera.PixelShuffle interleaves the phases
// into pixels and crops to the output: no multiply by an inserted zero. Where that Conv's grid of
// whole strides overhangs the output and the output's phases have equal rows, each output phase
// is a Conv of its own instead, over exactly its pixels with pads of its own, joined by a Concat
// in DCR order that stays in channel blocks (the DCGAN generator: 2.24 -> 2.00 ms, AMD EPYC,
// AVX2, 2 threads). A BatchNormalization
// after it folds into the weights and unary elementwise consumers (Relu, Tanh) move before the
// shuffle, so that the Conv fuses them as it fuses any epilogue.
//
// Otherwise (dilations, stride 1): the input with the padding around it (tessera.ZeroInsert),
// then a stride-1 Conv with the weights flipped and their channel axes swapped.
//
// The DCGAN generator ran 413 ms as a gathered ConvTranspose kernel, 15.0 ms as zero insertion
// and a convolution (3 in 4 of its multiplies by inserted zeros) against onnxruntime's 4.0.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <optional>

#include "graph/op_table.h"
#include "graph/passes.h"

namespace tessera::graph {

namespace {

// One spatial dimension of the phase form.
struct PhaseDim {
  int64_t stride = 1, taps = 1;        // the phases and each phase's taps
  int64_t pad_begin = 0, pad_end = 0;  // of the stride-1 Conv
  int64_t steps = 0;                   // its output size: whole strides covering the output
  int64_t offset = 0;                  // the output's first row in the interleaved grid
};

// Or nothing where the Conv would need negative padding (a crop of the input).
std::optional<PhaseDim> phase_dim(int64_t in, int64_t out, int64_t kernel, int64_t stride,
                                  int64_t pad) {
  PhaseDim d;
  d.stride = in == 1 ? std::max(stride, kernel) : stride;
  d.taps = (kernel + d.stride - 1) / d.stride;
  const int64_t first = pad / d.stride, last = (pad + out - 1) / d.stride;
  d.steps = last - first + 1;
  d.offset = pad - first * d.stride;
  d.pad_begin = d.taps - 1 - first;
  d.pad_end = d.steps + d.taps - 1 - in - d.pad_begin;
  if (d.pad_begin < 0 || d.pad_end < 0) return std::nullopt;
  return d;
}

// Unary elementwise: Relu, or a table row of one runtime input and scalar constants.
bool commutes_with_shuffle(const Graph& g, const Node& m, const std::string& value) {
  if (m.outputs.size() != 1 || m.inputs.empty() || m.inputs[0] != value) return false;
  const OpDef* row = find_op(m.op);
  if (m.op != "Relu" && !(row && row->lowering == Lowering::kElementwise)) return false;
  for (size_t i = 1; i < m.inputs.size(); ++i)
    if (!m.inputs[i].empty() &&
        (!g.is_constant(m.inputs[i]) || num_elements(g.shape(m.inputs[i])) != 1))
      return false;
  return true;
}

struct Transposed {
  const Node& node;
  HostTensor weights;  // [C][O/group][kh][kw]
  std::vector<double> bias;
  int64_t group = 1;
};

// One output phase of a dimension (the rows Y = j * stride + phase): the taps' phase it reads
// and the pads of its Conv.
struct OutputPhase {
  int64_t taps_phase = 0, pad_begin = 0, pad_end = 0;
};

// Each output phase of a dimension as out / stride rows of a Conv of its own, or nothing where
// the phases differ in rows (out not a multiple of the stride) or one would crop the input.
std::optional<std::vector<OutputPhase>> output_phases(int64_t in, int64_t out, const PhaseDim& d,
                                                      int64_t pad) {
  if (out % d.stride != 0) return std::nullopt;
  const int64_t rows = out / d.stride;
  std::vector<OutputPhase> phases;
  for (int64_t p = 0; p < d.stride; ++p) {
    const int64_t first = (p + pad) / d.stride;  // the input step of the phase's first row
    OutputPhase o{(p + pad) % d.stride, d.taps - 1 - first, first + rows - in};
    if (o.pad_begin < 0 || o.pad_end < 0) return std::nullopt;
    phases.push_back(o);
  }
  return phases;
}

// The smallest block of channels choose_layouts uses: phases of whole blocks join without a copy.
constexpr int64_t kMinChannelBlock = 8;

// Conv weights [O * phases][C / group][taps_h][taps_w], output channel o of taps phase (ry, rx)
// at channel (o * sh + ry) * sw + rx; or [O][C][taps_h][taps_w] of the one taps phase `only`
// names. Tap u of phase r reads input row q - (taps - 1 - u), transposed tap r + s * (taps - 1 -
// u).
HostTensor phase_weights(const Transposed& t, const PhaseDim& rows, const PhaseDim& cols,
                         std::optional<std::pair<int64_t, int64_t>> only) {
  const int64_t c = t.weights.shape[0], og = t.weights.shape[1];
  const int64_t kh = t.weights.shape[2], kw = t.weights.shape[3], cg = c / t.group;
  const int64_t out_channels = og * t.group;
  const int64_t phases = only ? 1 : rows.stride * cols.stride;
  HostTensor w{{out_channels * phases, cg, rows.taps, cols.taps}, {}, false};
  w.data.assign(num_elements(w.shape), 0.0);
  for (int64_t o = 0; o < out_channels; ++o)
    for (int64_t ry = 0; ry < rows.stride; ++ry)
      for (int64_t rx = 0; rx < cols.stride; ++rx) {
        if (only && std::pair{ry, rx} != *only) continue;
        const int64_t phase_channel = only ? o : (o * rows.stride + ry) * cols.stride + rx;
        for (int64_t ci = 0; ci < cg; ++ci)
          for (int64_t u = 0; u < rows.taps; ++u)
            for (int64_t v = 0; v < cols.taps; ++v) {
              int64_t ky = ry + rows.stride * (rows.taps - 1 - u);
              int64_t kx = rx + cols.stride * (cols.taps - 1 - v);
              if (ky >= kh || kx >= kw) continue;
              int64_t channel = o / og * cg + ci;  // the transposed weights' input channel
              w.data[((phase_channel * cg + ci) * rows.taps + u) * cols.taps + v] =
                  t.weights.data[((channel * og + o % og) * kh + ky) * kw + kx];
            }
      }
  return w;
}

bool lower_by_phases(Graph& g, const Transposed& t, std::vector<Node>& nodes,
                     std::vector<bool>& absorbed) {
  const Node& n = t.node;
  std::vector<int64_t> strides = n.attr_ints("strides", {1, 1});
  std::vector<int64_t> dilations = n.attr_ints("dilations", {1, 1});
  std::vector<int64_t> pads = n.attr_ints("pads", {0, 0, 0, 0});
  if (dilations != std::vector<int64_t>{1, 1}) return false;
  const std::vector<int64_t>& x = g.shape(n.inputs[0]);
  const std::vector<int64_t>& y = g.shape(n.outputs[0]);
  const int64_t og = t.weights.shape[1], out_channels = og * t.group;
  const int64_t kh = t.weights.shape[2], kw = t.weights.shape[3];
  std::optional<PhaseDim> rows = phase_dim(x[2], y[2], kh, strides[0], pads[0]);
  std::optional<PhaseDim> cols = phase_dim(x[3], y[3], kw, strides[1], pads[1]);
  if (!rows || !cols || rows->stride * cols->stride == 1) return false;
  const int64_t phases = rows->stride * cols->stride;

  // The unary consumers that move before the shuffle, which then writes the last one's output.
  std::vector<Node> unary;
  std::string result = n.outputs[0];
  for (;;) {
    std::vector<size_t> readers = g.consumers(result);
    if (readers.size() != 1 || g.is_output(result) ||
        !commutes_with_shuffle(g, g.nodes[readers[0]], result))
      break;
    absorbed[readers[0]] = true;
    unary.push_back(g.nodes[readers[0]]);
    result = unary.back().outputs[0];
  }
  // `value` through copies of the unary chain, their outputs named after `suffix`.
  auto through_unary = [&](std::string value, const std::vector<int64_t>& shape,
                           const std::string& suffix) {
    for (const Node& m : unary) {
      Node moved = m;
      moved.name += suffix;
      moved.inputs[0] = value;
      value = moved.outputs[0] = m.outputs[0] + suffix;
      g.shapes[value] = shape;
      nodes.push_back(std::move(moved));
    }
    return value;
  };
  auto add_conv = [&](const std::string& name, HostTensor weights, std::vector<double> bias,
                      std::vector<int64_t> conv_pads, const std::vector<int64_t>& shape) {
    Node conv;
    conv.name = name;
    conv.op = "Conv";
    conv.inputs = {n.inputs[0], name + "_weights", name + "_bias"};
    conv.outputs = {name + "_out"};
    conv.attrs["kernel_shape"] = std::vector<int64_t>{rows->taps, cols->taps};
    conv.attrs["pads"] = std::move(conv_pads);
    conv.attrs["group"] = t.group;
    g.shapes[conv.inputs[1]] = weights.shape;
    g.shapes[conv.inputs[2]] = {static_cast<int64_t>(bias.size())};
    g.constants[conv.inputs[1]] = std::move(weights);
    g.constants[conv.inputs[2]] = HostTensor{{static_cast<int64_t>(bias.size())}, bias, false};
    g.shapes[conv.outputs[0]] = shape;
    nodes.push_back(std::move(conv));
    return name + "_out";
  };
  Node shuffle;
  shuffle.name = n.name + "_shuffle";
  shuffle.op = "tessera.PixelShuffle";
  shuffle.outputs = {result};
  shuffle.attrs["blocks"] = std::vector<int64_t>{rows->stride, cols->stride};

  // One Conv for all phases computes a grid of whole strides over the output, so with pads some
  // of it falls outside: the DCGAN generator's 4x4 -> 8x8 layer computed 5x5 steps of 2x2 pixels,
  // 100 for 64. Where the phases have equal rows, each output phase is a Conv of its own over
  // exactly its pixels, with its own pads, and a Concat joins them phase by phase (DCR order,
  // which moves whole blocks of channels).
  std::optional<std::vector<OutputPhase>> row_phases = output_phases(x[2], y[2], *rows, pads[0]);
  std::optional<std::vector<OutputPhase>> col_phases = output_phases(x[3], y[3], *cols, pads[1]);
  const bool grid_overhangs = rows->steps * cols->steps * phases > y[2] * y[3];
  if (row_phases && col_phases && grid_overhangs && t.group == 1 &&
      out_channels % kMinChannelBlock == 0) {
    const std::vector<int64_t> phase_shape{x[0], out_channels, y[2] / rows->stride,
                                           y[3] / cols->stride};
    Node concat;
    concat.name = n.name + "_phases";
    concat.op = "Concat";
    concat.attrs["axis"] = int64_t{1};
    for (int64_t py = 0; py < rows->stride; ++py)
      for (int64_t px = 0; px < cols->stride; ++px) {
        const OutputPhase& r = (*row_phases)[py];
        const OutputPhase& c = (*col_phases)[px];
        const std::string suffix = fmt::format("_phase{}_{}", py, px);
        std::string value = add_conv(
            n.name + suffix, phase_weights(t, *rows, *cols, std::pair{r.taps_phase, c.taps_phase}),
            t.bias, {r.pad_begin, c.pad_begin, r.pad_end, c.pad_end}, phase_shape);
        concat.inputs.push_back(through_unary(value, phase_shape, suffix));
      }
    concat.outputs = {n.name + "_phases"};
    g.shapes[concat.outputs[0]] = {x[0], out_channels * phases, phase_shape[2], phase_shape[3]};
    shuffle.inputs = concat.outputs;
    nodes.push_back(std::move(concat));
    shuffle.attrs["offsets"] = std::vector<int64_t>{0, 0};
    shuffle.attrs["mode"] = std::string("DCR");
  } else {
    // One stride-1 Conv computes every phase as channels of its own (output channel o of phase
    // (ry, rx) is channel (o * sh + ry) * sw + rx).
    std::vector<double> bias;
    for (int64_t o = 0; o < out_channels * phases; ++o) bias.push_back(t.bias[o / phases]);
    const std::vector<int64_t> grid_shape{x[0], out_channels * phases, rows->steps, cols->steps};
    std::string value =
        add_conv(n.name + "_phases", phase_weights(t, *rows, *cols, std::nullopt), std::move(bias),
                 {rows->pad_begin, cols->pad_begin, rows->pad_end, cols->pad_end}, grid_shape);
    shuffle.inputs = {through_unary(value, grid_shape, "_phases")};
    shuffle.attrs["offsets"] = std::vector<int64_t>{rows->offset, cols->offset};
  }
  shuffle.attrs["sizes"] = std::vector<int64_t>{y[2], y[3]};
  nodes.push_back(std::move(shuffle));
  return true;
}

bool lower_by_zero_insertion(Graph& g, const Transposed& t, std::vector<Node>& nodes) {
  const Node& n = t.node;
  const std::vector<int64_t>& x = g.shape(n.inputs[0]);
  const int64_t c = t.weights.shape[0], og = t.weights.shape[1];
  const int64_t kh = t.weights.shape[2], kw = t.weights.shape[3], cg = c / t.group;
  std::vector<int64_t> strides = n.attr_ints("strides", {1, 1});
  std::vector<int64_t> dilations = n.attr_ints("dilations", {1, 1});
  std::vector<int64_t> pads = n.attr_ints("pads", {0, 0, 0, 0});
  std::vector<int64_t> extra = n.attr_ints("output_padding", {0, 0});
  // The convolution's padding: the window's reach less the transposed one's pads (and the
  // output_padding after); a negative one would crop, which this form does not do.
  std::vector<int64_t> conv_pads{
      (kh - 1) * dilations[0] - pads[0], (kw - 1) * dilations[1] - pads[1],
      (kh - 1) * dilations[0] - pads[2] + extra[0], (kw - 1) * dilations[1] - pads[3] + extra[1]};
  if (std::any_of(conv_pads.begin(), conv_pads.end(), [](int64_t p) { return p < 0; }))
    return false;
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
  HostTensor flipped{{t.group * og, cg, kh, kw}, std::vector<double>(t.weights.data.size()), false};
  for (int64_t ci = 0; ci < c; ++ci)
    for (int64_t o = 0; o < og; ++o)
      for (int64_t ky = 0; ky < kh; ++ky)
        for (int64_t kx = 0; kx < kw; ++kx)
          flipped.data[(((ci / cg * og + o) * cg + ci % cg) * kh + ky) * kw + kx] =
              t.weights.data[((ci * og + o) * kh + (kh - 1 - ky)) * kw + (kw - 1 - kx)];
  Node conv;
  conv.name = n.name;
  conv.op = "Conv";
  conv.inputs = {stuff.outputs[0], n.name + "_flipped_weights", n.name + "_bias"};
  conv.outputs = n.outputs;
  conv.attrs["kernel_shape"] = std::vector<int64_t>{kh, kw};
  conv.attrs["dilations"] = dilations;
  conv.attrs["group"] = t.group;
  g.constants[conv.inputs[1]] = std::move(flipped);
  g.shapes[conv.inputs[1]] = g.constants[conv.inputs[1]].shape;
  g.constants[conv.inputs[2]] = HostTensor{{t.group * og}, t.bias, false};
  g.shapes[conv.inputs[2]] = {t.group * og};
  nodes.push_back(std::move(stuff));
  nodes.push_back(std::move(conv));
  return true;
}

}  // namespace

int lower_conv_transpose(Graph& g) {
  int lowered = 0;
  std::vector<Node> nodes;
  std::vector<bool> absorbed(g.nodes.size(), false);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (absorbed[i]) continue;
    Node n = g.nodes[i];
    bool has_bias = n.inputs.size() > 2 && !n.inputs[2].empty();
    if (n.op != "ConvTranspose" || !g.is_constant(n.inputs[1]) ||
        (has_bias && !g.is_constant(n.inputs[2])) || n.attrs.count("output_shape")) {
      nodes.push_back(std::move(n));
      continue;
    }
    Transposed t{n, g.constants.at(n.inputs[1]), {}, n.attr_int("group", 1)};
    const int64_t og = t.weights.shape[1], out_channels = og * t.group;
    if (has_bias)
      t.bias = g.constants.at(n.inputs[2]).data;
    else
      t.bias.assign(out_channels, 0.0);
    // A batch norm after it scales each output channel's weights and shifts its bias.
    std::vector<size_t> readers = g.consumers(n.outputs[0]);
    bool folded_batch_norm = false;
    if (readers.size() == 1 && !g.is_output(n.outputs[0])) {
      const Node& bn = g.nodes[readers[0]];
      std::optional<BatchNormAffine> affine = constant_batch_norm(g, bn, n.outputs[0]);
      if (affine && std::ssize(affine->scale) == out_channels) {
        const int64_t cg = t.weights.shape[0] / t.group;
        const int64_t taps = t.weights.shape[2] * t.weights.shape[3];
        for (int64_t ci = 0; ci < t.weights.shape[0]; ++ci)
          for (int64_t o = 0; o < og; ++o)
            for (int64_t k = 0; k < taps; ++k)
              t.weights.data[(ci * og + o) * taps + k] *= affine->scale[ci / cg * og + o];
        for (int64_t o = 0; o < out_channels; ++o)
          t.bias[o] = t.bias[o] * affine->scale[o] + affine->shift[o];
        absorbed[readers[0]] = folded_batch_norm = true;
        n.outputs[0] = bn.outputs[0];
      }
    }
    if (lower_by_phases(g, t, nodes, absorbed) || lower_by_zero_insertion(g, t, nodes)) {
      ++lowered;
      continue;
    }
    // Neither form fits (it would crop the input): the node stays, its batch norm after it.
    if (folded_batch_norm) absorbed[readers[0]] = false;
    nodes.push_back(g.nodes[i]);
  }
  g.nodes = std::move(nodes);
  return lowered;
}

}  // namespace tessera::graph
