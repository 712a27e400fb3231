// Channel padding: a value whose channels do not fill whole vectors (MobileNet-v2's 24 on
// AVX-512) would hold the whole graph to a narrower block. Such a value pads with every value it
// must pad with (through channelwise nodes: depthwise convolutions, activations, pools,
// squeeze-excite's scaling, residual adds); producers get zero output channels appended, readers
// zero input channels, a pool's result is cropped back, and where something else makes or reads
// a value a Pad or Slice bridges it; the padded channels are finite and never reach a real one.
#include <algorithm>
#include <map>
#include <optional>
#include <set>

#include "graph/op_attrs.h"
#include "graph/passes.h"
#include "te/error.h"

namespace tessera::graph {

namespace {

int64_t round_up(int64_t x, int64_t multiple) {
  return (x + multiple - 1) / multiple * multiple;
}

// A Conv of any groups with constant weights and bias, whose epilogue only adds per-channel or
// scalar constants and full-shape residuals.
bool constant_conv(const Graph& g, const Node& n) {
  if (n.op != "Conv" || n.inputs.size() < 2 || !g.is_constant(n.inputs[1])) return false;
  if (n.inputs.size() > 2 && !n.inputs[2].empty() && !g.is_constant(n.inputs[2])) return false;
  const std::vector<int64_t>& out = g.shape(n.outputs[0]);
  if (out.size() != 4 || g.shape(n.inputs[0]).size() != 4) return false;
  for (const Epilogue& e : n.epilogue) {
    if (e.kind != Epilogue::Kind::kAdd) continue;
    const std::string& v = n.inputs[static_cast<size_t>(e.input)];
    if (g.shape(v) == out) continue;
    if (!g.is_constant(v) || !(is_per_channel(g.shape(v), out[1]) || num_elements(g.shape(v)) == 1))
      return false;
  }
  return true;
}

// Such a Conv of one group.
bool plain_conv(const Graph& g, const Node& n) {
  return constant_conv(g, n) && n.attr_int("group", 1) == 1;
}

// The residual operands of a conv's epilogue (inputs of its output's shape).
std::vector<std::string> residuals(const Graph& g, const Node& n) {
  std::vector<std::string> out;
  for (const Epilogue& e : n.epilogue) {
    if (e.kind != Epilogue::Kind::kAdd) continue;  // an activation reads no input (input -1)
    const std::string& v = n.inputs[static_cast<size_t>(e.input)];
    if (!g.is_constant(v) && g.shape(v) == g.shape(n.outputs[0])) out.push_back(v);
  }
  return out;
}

// `t` with zeros appended along `axis` up to `to` entries.
HostTensor padded(const HostTensor& t, size_t axis, int64_t to) {
  HostTensor out = t;
  out.shape[axis] = to;
  int64_t outer = 1, inner = 1;
  for (size_t d = 0; d < axis; ++d) outer *= t.shape[d];
  for (size_t d = axis + 1; d < t.shape.size(); ++d) inner *= t.shape[d];
  const int64_t from = t.shape[axis];
  out.data.assign(static_cast<size_t>(outer * to * inner), 0.0);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t c = 0; c < from; ++c)
      for (int64_t i = 0; i < inner; ++i)
        out.data[static_cast<size_t>((o * to + c) * inner + i)] =
            t.data[static_cast<size_t>((o * from + c) * inner + i)];
  return out;
}

void replace_constant(Graph& g, Node& n, size_t input, HostTensor t, const std::string& suffix) {
  std::string name = n.name + suffix;
  g.shapes[name] = t.shape;
  g.constants[name] = std::move(t);
  n.inputs[input] = name;
}

// Zero output channels appended up to `to` to a Conv's `weights` (as given: padded along the
// input already where that pads too), bias and per-channel constant adds.
void pad_conv_outputs(Graph& g, Node& n, HostTensor weights, int64_t to) {
  const int64_t channels = weights.shape[0];
  replace_constant(g, n, 1, padded(weights, 0, to), ".weight_padded");
  if (n.inputs.size() > 2 && !n.inputs[2].empty())
    replace_constant(g, n, 2, padded(g.constants.at(n.inputs[2]), 0, to), ".bias_padded");
  for (size_t k = 0; k < n.epilogue.size(); ++k) {
    const Epilogue& e = n.epilogue[k];
    if (e.kind != Epilogue::Kind::kAdd) continue;
    const size_t input = static_cast<size_t>(e.input);
    const std::string& v = n.inputs[input];
    if (!g.is_constant(v) || !is_per_channel(g.shape(v), channels)) continue;
    HostTensor t = g.constants.at(v);
    t.shape = {1, channels, 1, 1};
    replace_constant(g, n, input, padded(t, 1, to), ".add" + std::to_string(k) + "_padded");
  }
}

// Node i writes `padded_shape` (more channels) under a new name, and a Slice after it keeps the
// real channels under the old one, for its readers.
void crop_after(Graph& g, size_t i, std::vector<int64_t> padded_shape) {
  Node& n = g.nodes[i];
  const std::string cropped = n.outputs[0];
  const int64_t channels = g.shape(cropped)[1];
  n.outputs[0] = cropped + ".padded";
  g.shapes[n.outputs[0]] = std::move(padded_shape);
  Node crop;
  crop.name = n.name + ".crop";
  crop.op = "Slice";
  crop.inputs = {n.outputs[0]};
  crop.outputs = {cropped};
  crop.attrs["starts"] = std::vector<int64_t>{0};
  crop.attrs["ends"] = std::vector<int64_t>{channels};
  crop.attrs["axes"] = std::vector<int64_t>{1};
  g.nodes.insert(g.nodes.begin() + static_cast<std::ptrdiff_t>(i) + 1, std::move(crop));
}

// A convolution of more than 8 but not whole vectors of output channels read by no convolution
// (the DCGAN generator's last layer: 12 phase channels of 3 colours, read by DepthToSpace) runs
// unblocked, vectorized over those few channels: 25 GFLOP/s there. Padded to whole vectors it
// runs blocked, and a Slice keeps the real channels under the old name (0.27 -> 0.10 ms with the
// crop, AMD EPYC, AVX2; 0.135 -> 0.065 ms with its Tanh, AMD EPYC, Zen 5, AVX-512). Only where
// there are positions enough to pay for the crop.
int pad_and_crop_outputs(Graph& g, int64_t lanes) {
  int changed = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (!plain_conv(g, g.nodes[i]) || !residuals(g, g.nodes[i]).empty()) continue;
    const std::vector<int64_t> out = g.shape(g.nodes[i].outputs[0]);
    const std::vector<int64_t>& in = g.shape(g.nodes[i].inputs[0]);
    const int64_t channels = out[1], to = round_up(channels, lanes);
    if (channels <= 8 || channels == to || out[2] * out[3] < 64) continue;
    // With vectors of 16, more than one vector of channels still runs blocked by 8.
    if (lanes > 8 && channels > lanes) continue;
    if (in[1] % lanes != 0 && in[1] > lanes) continue;  // unblocked either way
    bool read_by_conv = false;
    for (size_t r : g.consumers(g.nodes[i].outputs[0])) read_by_conv |= g.nodes[r].op == "Conv";
    if (read_by_conv) continue;
    Node& n = g.nodes[i];
    pad_conv_outputs(g, n, g.constants.at(n.inputs[1]), to);
    crop_after(g, i, {out[0], to, out[2], out[3]});
    ++changed;
  }
  return changed;
}

// Nodes a padded value passes through channel by channel: padded in, padded out, every padded
// channel finite (f(0) and f(finite) are finite for each of them; a pool's window of finite
// values too: ShuffleNet's stem pools its 24 channels).
bool channelwise_unary(const Node& n) {
  static const std::set<std::string> ops{"Relu", "Clip",      "HardSwish", "HardSigmoid", "Sigmoid",
                                         "Tanh", "LeakyRelu", "MaxPool",   "AveragePool"};
  return ops.count(n.op) > 0 && !n.inputs.empty();
}

// A grouped Conv whose groups map channels onto themselves (a depthwise one, or RegNet's 8
// channels a group) with constant weights, the epilogue plain_conv accepts, and room for whole
// groups in the padding to `lanes`: its padded channels get zero filters in groups of their own.
bool channelwise_conv(const Graph& g, const Node& n, int64_t lanes) {
  if (!constant_conv(g, n)) return false;
  const std::vector<int64_t>& in = g.shape(n.inputs[0]);
  const std::vector<int64_t>& out = g.shape(n.outputs[0]);
  const int64_t group = n.attr_int("group", 1);
  if (group <= 1 || out[1] != in[1] || in[1] % group != 0) return false;
  return (round_up(in[1], lanes) - in[1]) % (in[1] / group) == 0;
}

// Groups of fewer channels than a vector, merged `lanes / channels` at a time into groups of a
// whole vector, the filters zero across the groups they join: twice the products for RegNet's
// 8-channel groups in vectors of 16, in the same number of vector FMAs, and blocks of 16 for the
// whole graph.
bool mergeable_groups(const Graph& g, const Node& n, int64_t lanes) {
  if (!channelwise_conv(g, n, lanes)) return false;
  const int64_t group = n.attr_int("group", 1);
  const int64_t per_group = g.shape(n.inputs[0])[1] / group;
  return per_group > 1 && per_group % lanes != 0 && lanes % per_group == 0 &&
         group % (lanes / per_group) == 0;
}

int merge_groups(Graph& g, int64_t lanes) {
  int changed = 0;
  for (Node& n : g.nodes) {
    if (!mergeable_groups(g, n, lanes)) continue;
    const int64_t group = n.attr_int("group", 1);
    const int64_t channels = g.shape(n.inputs[0])[1], per_group = channels / group;
    const int64_t merged = lanes / per_group;
    const HostTensor& w = g.constants.at(n.inputs[1]);  // [C][per_group][K][K]
    const int64_t taps = w.shape[2] * w.shape[3];
    HostTensor wide{{channels, lanes, w.shape[2], w.shape[3]},
                    std::vector<double>(static_cast<size_t>(channels * lanes * taps), 0.0),
                    false};
    for (int64_t o = 0; o < channels; ++o) {
      const int64_t offset = (o / per_group) % merged * per_group;
      for (int64_t c = 0; c < per_group; ++c)
        for (int64_t t = 0; t < taps; ++t)
          wide.data[static_cast<size_t>((o * lanes + offset + c) * taps + t)] =
              w.data[static_cast<size_t>((o * per_group + c) * taps + t)];
    }
    replace_constant(g, n, 1, std::move(wide), ".weight_merged");
    n.attrs["group"] = group / merged;
    ++changed;
  }
  return changed;
}

// Global pooling over H and W: it keeps the padded channels apart, and its result is cropped.
bool global_pool(const Graph& g, const Node& n) {
  if (n.op == "GlobalAveragePool") return true;
  if (n.op != "ReduceMean" || g.shape(n.inputs[0]).size() != 4 || n.inputs.size() > 1) return false;
  std::vector<int64_t> axes = n.attr_ints("axes", {});
  std::sort(axes.begin(), axes.end());
  return axes == std::vector<int64_t>{2, 3} || axes == std::vector<int64_t>{-2, -1};
}

// Add, Sub or Mul of values of the output's shape or per channel, and of constants per channel or
// scalar.
bool channelwise_binary(const Graph& g, const Node& n) {
  if ((n.op != "Add" && n.op != "Sub" && n.op != "Mul") || n.inputs.size() != 2) return false;
  const std::vector<int64_t>& out = g.shape(n.outputs[0]);
  if (out.size() != 4) return false;
  for (const std::string& v : n.inputs) {
    const std::vector<int64_t>& shape = g.shape(v);
    if (g.is_constant(v)) {
      if (num_elements(shape) != 1 && !is_per_channel(shape, out[1])) return false;
    } else if (shape != out && shape != std::vector<int64_t>{out[0], out[1], 1, 1}) {
      return false;
    }
  }
  return true;
}

// Values that must pad together: a channelwise node's inputs and output, a convolution's output
// and its residuals.
class ChannelClasses {
 public:
  std::string find(const std::string& v) {
    auto it = parent_.find(v);
    if (it == parent_.end() || it->second == v) return v;
    return it->second = find(it->second);
  }
  void unite(const std::string& a, const std::string& b) {
    const std::string ra = find(a), rb = find(b);
    if (ra != rb) parent_[ra] = rb;
  }

 private:
  std::map<std::string, std::string> parent_;
};

// Whether node `n` reads its input `i` as a padded value can be read: a convolution's data input
// or residual, a channelwise node's operands, a global pool's input.
bool reads_padded(const Graph& g, const Node& n, size_t i, int64_t lanes) {
  const std::string& v = n.inputs[i];
  if (v.empty() || g.is_constant(v)) return false;
  if (n.op == kGatherChannels) return true;  // its channels keep their indices
  if (plain_conv(g, n) || channelwise_conv(g, n, lanes)) {
    if (i == 0) return true;
    std::vector<std::string> res = residuals(g, n);
    return std::find(res.begin(), res.end(), v) != res.end();
  }
  if (channelwise_unary(n) || global_pool(g, n)) return i == 0;
  return channelwise_binary(g, n);
}

// Whether node `n` can write its output padded.
bool writes_padded(const Graph& g, const Node& n, int64_t lanes) {
  return n.op == kGatherChannels || plain_conv(g, n) || channelwise_conv(g, n, lanes) ||
         channelwise_unary(n) || channelwise_binary(g, n);
}

// Where values_to_pad may bridge a class that something else makes or reads: nowhere, anywhere
// (when that wins the whole graph vectors of the lanes), or only where its channels fill no block
// of 8 and it has 64 positions or more (when that lets its convolutions run blocked at all).
enum class Bridges { kNone, kAny, kUnaligned };

// The values whose channels pad: ragged activations made by convolutions and the channelwise
// nodes between them (depthwise convolutions, activations, squeeze-excite's scaling, residual
// adds). Without bridges a class of values that pad together is dropped whole when anything
// else makes or reads one of them; with them, such a value is padded by a Pad node where
// something else makes it, and cropped by a Slice for what else reads it.
std::set<std::string> values_to_pad(const Graph& g, int64_t lanes, Bridges bridges) {
  ChannelClasses classes;
  std::set<std::string> held;  // values something else makes or reads, with their whole class
  std::set<std::string> read_padded;  // values some node reads as a padded value
  for (const std::string& v : g.inputs) held.insert(v);
  for (const std::string& v : g.outputs) held.insert(v);
  for (const Node& n : g.nodes) {
    const std::string& y = n.outputs[0];
    const bool plain = plain_conv(g, n), grouped = !plain && channelwise_conv(g, n, lanes);
    const bool unary = channelwise_unary(n), binary = channelwise_binary(g, n);
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      if (reads_padded(g, n, i, lanes)) {
        read_padded.insert(n.inputs[i]);
      } else if (!n.inputs[i].empty() && !g.is_constant(n.inputs[i])) {
        held.insert(n.inputs[i]);
      }
    }
    if (!writes_padded(g, n, lanes)) held.insert(y);
    for (size_t i = 1; i < n.outputs.size(); ++i) held.insert(n.outputs[i]);
    if (plain || grouped) {
      for (const std::string& r : residuals(g, n)) classes.unite(r, y);
      if (grouped) classes.unite(n.inputs[0], y);
    } else if (unary) {
      classes.unite(n.inputs[0], y);
    } else if (binary) {
      for (const std::string& v : n.inputs)
        if (!g.is_constant(v)) classes.unite(v, y);
    }
  }
  std::set<std::string> held_classes;
  for (const std::string& v : held) held_classes.insert(classes.find(v));
  // Padding pays only for convolutions: a class none of them reads or writes (a transformer's
  // 12 heads as the channels of [1, 12, 197, 64], scaled by a Mul) stays as it is.
  std::set<std::string> conv_classes;
  for (const Node& n : g.nodes) {
    if (!plain_conv(g, n) && !channelwise_conv(g, n, lanes)) continue;
    conv_classes.insert(classes.find(n.inputs[0]));
    conv_classes.insert(classes.find(n.outputs[0]));
  }
  // Every member of a class has the channels of the others (linked nodes keep them): the values
  // something writes or reads padded. A class pads when they are ragged and more than 8, and
  // nothing else makes or reads one of them, or else where `bridges` allows.
  std::map<std::string, std::vector<std::string>> members;
  std::set<std::string> refused;
  auto add_member = [&](const std::string& y, bool written_padded) {
    if (!written_padded && !read_padded.count(y)) return;
    if (g.is_constant(y) || g.shape(y).size() != 4 || g.shape(y)[0] != 1) {
      refused.insert(classes.find(y));
      return;
    }
    members[classes.find(y)].push_back(y);
  };
  // The graph's own inputs and outputs keep their channels: no bridge there.
  for (const std::string& v : g.inputs) refused.insert(classes.find(v));
  for (const std::string& v : g.outputs) refused.insert(classes.find(v));
  for (const Node& n : g.nodes)
    if (!global_pool(g, n)) add_member(n.outputs[0], writes_padded(g, n, lanes));
  std::set<std::string> padded_values;
  for (const auto& [root, values] : members) {
    if (refused.count(root) || !conv_classes.count(root)) continue;
    const int64_t c = g.shape(values.front())[1];
    if (c % lanes == 0 || c <= 8) continue;
    const bool bridged = held_classes.count(root) > 0;
    if (bridged && (bridges == Bridges::kNone || (bridges == Bridges::kUnaligned && c % 8 == 0)))
      continue;
    // Such a bridge's copy pays only where there are positions enough (see pad_and_crop_outputs).
    const bool few_positions_refused = bridged && bridges == Bridges::kUnaligned;
    bool same = std::all_of(values.begin(), values.end(), [&](const std::string& v) {
      return g.shape(v)[1] == c && (!few_positions_refused || g.shape(v)[2] * g.shape(v)[3] >= 64);
    });
    if (same) padded_values.insert(values.begin(), values.end());
  }
  return padded_values;
}

// Bridges (values_to_pad): a padded value something else makes gets a Pad after it, and one that
// something else reads is written padded under a new name with a Slice back to the old one; the
// nodes that read padded values read the new names. Returns the padded values' names now.
std::set<std::string> bridge(Graph& g, const std::set<std::string>& values, int64_t lanes) {
  std::map<std::string, std::string> renamed;
  std::vector<std::string> entries, exits;
  for (const std::string& v : values) {
    std::optional<size_t> producer;
    for (size_t i = 0; i < g.nodes.size() && !producer; ++i)
      if (g.nodes[i].outputs[0] == v) producer = i;
    const bool written_padded = producer && writes_padded(g, g.nodes[*producer], lanes);
    bool read_otherwise = g.is_output(v);
    for (size_t r : g.consumers(v)) {
      const Node& reader = g.nodes[r];
      for (size_t i = 0; i < reader.inputs.size(); ++i)
        read_otherwise =
            read_otherwise || (reader.inputs[i] == v && !reads_padded(g, reader, i, lanes));
    }
    if (!written_padded) {
      entries.push_back(v);
    } else if (read_otherwise) {
      exits.push_back(v);
    } else {
      continue;
    }
    renamed[v] = v + ".padded";
  }
  // Readers of padded values first, while the roles are still those of the unpadded graph.
  std::vector<std::pair<size_t, size_t>> redirect;
  for (size_t k = 0; k < g.nodes.size(); ++k)
    for (size_t i = 0; i < g.nodes[k].inputs.size(); ++i)
      if (renamed.count(g.nodes[k].inputs[i]) && reads_padded(g, g.nodes[k], i, lanes))
        redirect.emplace_back(k, i);
  for (auto [k, i] : redirect) g.nodes[k].inputs[i] = renamed.at(g.nodes[k].inputs[i]);
  auto padded_shape = [&](const std::string& v) {
    std::vector<int64_t> s = g.shape(v);
    s[1] = round_up(s[1], lanes);
    return s;
  };
  for (const std::string& v : exits) {
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      if (g.nodes[i].outputs[0] != v) continue;
      crop_after(g, i, padded_shape(v));
      break;
    }
  }
  for (const std::string& v : entries) {
    Node pad;
    pad.name = v + ".pad";
    pad.op = "Pad";
    pad.inputs = {v};
    pad.outputs = {renamed.at(v)};
    const int64_t extra = round_up(g.shape(v)[1], lanes) - g.shape(v)[1];
    pad.attrs["pads"] = std::vector<int64_t>{0, 0, 0, 0, 0, extra, 0, 0};
    g.shapes[pad.outputs[0]] = padded_shape(v);
    size_t at = 0;
    for (size_t i = 0; i < g.nodes.size(); ++i)
      if (g.nodes[i].outputs[0] == v) at = i + 1;
    g.nodes.insert(g.nodes.begin() + static_cast<std::ptrdiff_t>(at), std::move(pad));
  }
  std::set<std::string> now;
  for (const std::string& v : values) now.insert(renamed.count(v) ? renamed.at(v) : v);
  return now;
}

// A per-channel (or scalar) constant operand of a channelwise node, padded with zeros as
// [1, to, 1, 1].
void pad_channel_constant(Graph& g, Node& n, size_t input, int64_t channels, int64_t to) {
  const std::string& v = n.inputs[input];
  if (num_elements(g.shape(v)) == 1) return;
  HostTensor t = g.constants.at(v);
  t.shape = {1, channels, 1, 1};
  replace_constant(g, n, input, padded(t, 1, to), ".input" + std::to_string(input) + "_padded");
}

// Pads `padded_values` (values_to_pad) and the nodes around them.
int pad_through_convolutions(Graph& g, const std::set<std::string>& padded_values, int64_t lanes) {
  int changed = 0;
  for (Node& n : g.nodes) {
    const bool pads_out = padded_values.count(n.outputs[0]) > 0;
    if (n.op == kGatherChannels) {
      if (!pads_out) continue;
      // The padded channels copy a real one: finite, and read by nothing real.
      ChannelGather c = read_channel_gather(n, g);
      const int64_t to = round_up(static_cast<int64_t>(c.channels.size()), lanes);
      c.sources.resize(static_cast<size_t>(to), c.sources[0]);
      c.channels.resize(static_cast<size_t>(to), c.channels[0]);
      n.attrs["sources"] = std::move(c.sources);
      n.attrs["channels"] = std::move(c.channels);
      ++changed;
      continue;
    }
    if (n.op != "Conv") {
      if (!pads_out || !channelwise_binary(g, n)) continue;
      const int64_t channels = g.shape(n.outputs[0])[1];
      for (size_t i = 0; i < n.inputs.size(); ++i)
        if (g.is_constant(n.inputs[i]))
          pad_channel_constant(g, n, i, channels, round_up(channels, lanes));
      ++changed;
      continue;
    }
    bool pads_in = padded_values.count(n.inputs[0]) > 0;
    if (!pads_out && !pads_in) continue;
    ++changed;
    HostTensor w = g.constants.at(n.inputs[1]);
    // Grouped onto its own channels (values_to_pad took no other grouped kind); told by its
    // weights, since a bridged input already has the padded channels.
    const int64_t group = n.attr_int("group", 1);
    if (group > 1 && group * w.shape[1] == w.shape[0]) {
      // Zero filters in groups of their own for the padded channels.
      const int64_t to = round_up(w.shape[0], lanes), per_group = w.shape[1];
      pad_conv_outputs(g, n, std::move(w), to);
      n.attrs["group"] = to / per_group;
      continue;
    }
    if (pads_in) w = padded(w, 1, round_up(w.shape[1], lanes));
    if (!pads_out) {
      replace_constant(g, n, 1, std::move(w), ".weight_padded");
      continue;
    }
    const int64_t to = round_up(w.shape[0], lanes);
    pad_conv_outputs(g, n, std::move(w), to);
  }
  for (const std::string& v : padded_values) {
    std::vector<int64_t>& s = g.shapes.at(v);
    s[1] = round_up(s[1], lanes);  // bridged ones are whole already
  }
  // A pooled padded value: the pool writes every channel, a Slice keeps the real ones under the
  // old name (SqueezeNet's 1000 classes, which held the whole graph to blocks of 8 on AVX-512).
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    Node& pool = g.nodes[i];
    if (!global_pool(g, pool) || !padded_values.count(pool.inputs[0])) continue;
    std::vector<int64_t> shape = g.shape(pool.outputs[0]);
    shape[1] = g.shape(pool.inputs[0])[1];
    crop_after(g, i, std::move(shape));
    ++changed;
  }
  return changed;
}

}  // namespace

int pad_channels(Graph& g, int64_t lanes) {
  // Each attempt is kept only where it wins the graph that block: where other convolutions hold
  // it to blocks of 8 anyway, padding to 16 is only more work (a 24-channel input). First to the
  // lanes without bridges; then with bridges wherever needed, each a copy (ShuffleNet-v2, whose
  // channel shuffles hold every branch: 1.92 -> 1.53 ms in blocks of 16 against 8, interleaved,
  // Zen 5); then values whose channels fill no block of 8 alone to blocks of 8 (the lanes of
  // AVX2, or AVX-512 held otherwise). Then, on either ISA, the crops of the outputs that stayed
  // ragged.
  int changed = 0;
  struct Attempt {
    int64_t pad_to;
    Bridges bridges;
  };
  std::vector<Attempt> attempts{{8, Bridges::kUnaligned}};
  if (lanes > 8)
    attempts = {{lanes, Bridges::kNone}, {lanes, Bridges::kAny}, {8, Bridges::kUnaligned}};
  for (const Attempt& a : attempts) {
    const std::set<std::string> values = values_to_pad(g, a.pad_to, a.bridges);
    bool merges = false;
    for (const Node& n : g.nodes) merges = merges || mergeable_groups(g, n, a.pad_to);
    if (values.empty() && !merges) continue;
    // Tried on a copy, which holds the weights: only where something would change.
    Graph padded_graph = g;
    int padded = 0;
    if (!values.empty()) {
      const std::set<std::string> names = bridge(padded_graph, values, a.pad_to);
      padded = pad_through_convolutions(padded_graph, names, a.pad_to);
    }
    padded += merge_groups(padded_graph, a.pad_to);
    if (channel_block(padded_graph, lanes) == a.pad_to) {
      g = std::move(padded_graph);
      changed = padded;
      break;
    }
  }
  return changed + pad_and_crop_outputs(g, lanes);
}

}  // namespace tessera::graph
