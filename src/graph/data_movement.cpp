// Data movement rewritten by what it does to its input's elements, found by running the
// reference of a chain of movement nodes on the input's flat indices.
//
// Channel selections as one node each (gather_channels). ShuffleNet-v2's units end in a channel
// shuffle (Concat, Reshape to [N, 2, C/2, H, W], Transpose of the two channel axes, Reshape back)
// that Slices or a Split halve again: six copies a unit, each an edge where channel blocks were
// converted to NCHW and back. As tessera.GatherChannels nodes that read the Concat's inputs and
// the earlier gathers directly, a unit copies the channels its branch reads once, in blocks, and
// the padding of 58 channels to 64 passes through them (pad_channels.cpp).
//
// Chains that copy more than once as one strided copy (fold_copies). A transformer's attention
// splits one projection into query, key and value (a Transpose, Gathers), each into heads (a
// Reshape and a Transpose), transposes the key again and scales query and key: three or four
// copies each, where every element of the result is one element of the projection times a scale.
#include <algorithm>
#include <deque>
#include <map>
#include <optional>
#include <set>

#include "graph/op_attrs.h"
#include "graph/passes.h"
#include "graph/reference.h"
#include "te/error.h"

namespace tessera::graph {

namespace {

// A gather reading more inputs than this keeps its nearer ones: every input is a branch of the
// select each output element makes.
constexpr size_t kMaxGatherInputs = 12;
// Chains whose probe would hold more elements than this are left alone.
constexpr int64_t kMaxProbeElements = int64_t{1} << 22;

// Nodes that only move the data of their first input (their other inputs constants).
bool moves_data(const Graph& g, const Node& n) {
  static const std::set<std::string> ops{"Reshape", "Transpose", "Slice",   "Gather",
                                         "Squeeze", "Unsqueeze", "Flatten", "Identity"};
  if (!ops.count(n.op) || n.inputs.empty() || !n.epilogue.empty() || n.outputs.size() != 1 ||
      g.is_constant(n.inputs[0]))
    return false;
  for (size_t i = 1; i < n.inputs.size(); ++i)
    if (!n.inputs[i].empty() && !g.is_constant(n.inputs[i])) return false;
  return true;
}

bool same_image_grid(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  return a.size() == 4 && b.size() == 4 && a[0] == b[0] && a[2] == b[2] && a[3] == b[3];
}

// `x`'s flat indices through `chain` (nodes in order, the first reading `x`; a Mul by a scalar
// constant counts as a copy, its factor multiplied into `scale`), or nothing where a node fails.
std::optional<HostTensor> probe(const Graph& g, const std::string& x,
                                const std::vector<size_t>& chain, double* scale = nullptr) {
  const std::vector<int64_t>& xs = g.shape(x);
  if (num_elements(xs) > kMaxProbeElements) return std::nullopt;
  HostTensor value{xs, std::vector<double>(static_cast<size_t>(num_elements(xs))), false};
  for (size_t i = 0; i < value.data.size(); ++i) value.data[i] = static_cast<double>(i);
  try {
    for (size_t i : chain) {
      const Node& n = g.nodes[i];
      if (n.op == "Mul") {
        if (!scale) return std::nullopt;
        *scale *= g.constants.at(n.inputs[1]).data[0];
        continue;
      }
      std::vector<const HostTensor*> in{&value};
      for (size_t k = 1; k < n.inputs.size(); ++k)
        in.push_back(n.inputs[k].empty() ? nullptr : &g.constants.at(n.inputs[k]));
      value = evaluate_node(n, g, in);
    }
  } catch (const Error&) {
    return std::nullopt;
  }
  return value;
}

// Which channel of `x` each output channel of `chain` is; nothing where the chain does anything
// else (moves pixels, mixes images).
std::optional<std::vector<int64_t>> picked_channels(const Graph& g, const std::string& x,
                                                    const std::vector<size_t>& chain) {
  std::optional<HostTensor> value = probe(g, x, chain);
  if (!value) return std::nullopt;
  const std::vector<int64_t>& xs = g.shape(x);
  const std::vector<int64_t>& ys = value->shape;
  if (!same_image_grid(xs, ys)) return std::nullopt;
  const int64_t plane = xs[2] * xs[3];
  std::vector<int64_t> channels;
  for (int64_t k = 0; k < ys[1]; ++k) {
    const auto first = static_cast<int64_t>(value->data[static_cast<size_t>(k * plane)]);
    if (first % plane != 0 || first / plane >= xs[1]) return std::nullopt;
    channels.push_back(first / plane);
  }
  for (int64_t b = 0; b < ys[0]; ++b)
    for (int64_t k = 0; k < ys[1]; ++k)
      for (int64_t p = 0; p < plane; ++p)
        if (value->data[static_cast<size_t>((b * ys[1] + k) * plane + p)] !=
            static_cast<double>((b * xs[1] + channels[static_cast<size_t>(k)]) * plane + p))
          return std::nullopt;
  return channels;
}

void make_gather(Node& n, std::vector<std::string> inputs, std::vector<int64_t> sources,
                 std::vector<int64_t> channels) {
  n.op = kGatherChannels;
  n.inputs = std::move(inputs);
  n.attrs.clear();
  n.attrs["sources"] = std::move(sources);
  n.attrs["channels"] = std::move(channels);
}

// Chains of data movement from a 4-D value to one of the same N, H and W that pick its channels
// become gathers: the shuffle's Reshape, Transpose and Reshape, a Slice or Split along the
// channels, a Gather of what a Concat or a gather wrote.
int chains_to_gathers(Graph& g) {
  std::map<std::string, size_t> producer;
  for (size_t i = 0; i < g.nodes.size(); ++i)
    for (const std::string& o : g.nodes[i].outputs) producer[o] = i;
  int changed = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (!moves_data(g, g.nodes[i])) continue;
    const std::vector<int64_t>& y = g.shape(g.nodes[i].outputs[0]);
    if (y.size() != 4) continue;
    std::deque<size_t> chain{i};
    std::optional<std::string> x;
    while (chain.size() <= 4) {
      const std::string& v = g.nodes[chain.front()].inputs[0];
      if (same_image_grid(g.shape(v), y)) {
        x = v;
        break;
      }
      auto p = producer.find(v);
      if (p == producer.end() || !moves_data(g, g.nodes[p->second])) break;
      chain.push_front(p->second);
    }
    if (!x) continue;
    if (chain.size() == 1 && g.nodes[i].op == "Gather") {
      // A lone Gather of consecutive channels can be a view (Planner::gather_view_start).
      auto p = producer.find(*x);
      if (p == producer.end() ||
          (g.nodes[p->second].op != "Concat" && g.nodes[p->second].op != kGatherChannels))
        continue;
    }
    std::optional<std::vector<int64_t>> channels =
        picked_channels(g, *x, std::vector<size_t>(chain.begin(), chain.end()));
    if (!channels) continue;
    std::vector<int64_t> sources(channels->size(), 0);
    make_gather(g.nodes[i], {*x}, std::move(sources), std::move(*channels));
    ++changed;
  }
  return changed;
}

// The input and channel an entry reads, looked through the Concat along channels or the gather
// that wrote it.
std::pair<std::string, int64_t> origin(const Graph& g,
                                       const std::map<std::string, size_t>& producer, std::string v,
                                       int64_t c) {
  for (;;) {
    auto p = producer.find(v);
    if (p == producer.end()) return {v, c};
    const Node& n = g.nodes[p->second];
    if (n.op == kGatherChannels) {
      // Read through already: its inputs are no gathers or Concats it could look into.
      const ChannelGather in = read_channel_gather(n, g);
      return {n.inputs[static_cast<size_t>(in.sources[static_cast<size_t>(c)])],
              in.channels[static_cast<size_t>(c)]};
    }
    if (n.op != "Concat" || !n.epilogue.empty() || g.shape(v).size() != 4 ||
        normalize_axis(n, n.attr_int("axis", 0), 4) != 1)
      return {v, c};
    for (const std::string& part : n.inputs) {
      const int64_t channels = g.shape(part)[1];
      if (c < channels) {
        v = part;
        break;
      }
      c -= channels;
    }
  }
}

// Each gather reads through the Concats and gathers before it, in graph order, so that those
// already read through theirs.
int read_through(Graph& g) {
  std::map<std::string, size_t> producer;
  for (size_t i = 0; i < g.nodes.size(); ++i)
    for (const std::string& o : g.nodes[i].outputs) producer[o] = i;
  int changed = 0;
  for (Node& n : g.nodes) {
    if (n.op != kGatherChannels) continue;
    const ChannelGather c = read_channel_gather(n, g);
    std::vector<std::string> inputs;
    std::vector<int64_t> sources, channels;
    for (size_t k = 0; k < c.channels.size(); ++k) {
      auto [v, channel] =
          origin(g, producer, n.inputs[static_cast<size_t>(c.sources[k])], c.channels[k]);
      auto at = std::find(inputs.begin(), inputs.end(), v);
      sources.push_back(at - inputs.begin());
      if (at == inputs.end()) inputs.push_back(v);
      channels.push_back(channel);
    }
    if (inputs == n.inputs || inputs.size() > kMaxGatherInputs) continue;
    make_gather(n, std::move(inputs), std::move(sources), std::move(channels));
    ++changed;
  }
  return changed;
}

// A gather that copies its one input whole (a Transpose and its inverse): its readers read the
// input.
int drop_copies(Graph& g) {
  std::map<std::string, std::string> same;
  for (const Node& n : g.nodes) {
    if (n.op != kGatherChannels || n.inputs.size() != 1 || g.is_output(n.outputs[0])) continue;
    const ChannelGather c = read_channel_gather(n, g);
    bool copy = static_cast<int64_t>(c.channels.size()) == g.shape(n.inputs[0])[1];
    for (size_t k = 0; k < c.channels.size(); ++k)
      copy = copy && c.channels[k] == static_cast<int64_t>(k);
    if (copy) same[n.outputs[0]] = n.inputs[0];
  }
  for (Node& n : g.nodes)
    for (std::string& v : n.inputs)
      if (auto it = same.find(v); it != same.end()) v = it->second;
  return static_cast<int>(same.size());
}

// A Mul of a scalar constant (second operand), which commutes with every move.
bool scales(const Graph& g, const Node& n) {
  return n.op == "Mul" && n.inputs.size() == 2 && n.epilogue.empty() &&
         !g.is_constant(n.inputs[0]) && g.is_constant(n.inputs[1]) &&
         num_elements(g.shape(n.inputs[1])) == 1 && g.shape(n.inputs[0]) == g.shape(n.outputs[0]);
}

// Nodes of a chain that copy: a view (Reshape, Squeeze, Unsqueeze, Flatten, Identity) moves
// nothing; a Transpose that keeps the order of the dimensions above 1 is a view too.
bool copies(const Graph& g, const Node& n) {
  if (n.op == "Transpose") {
    const std::vector<int64_t>& in = g.shape(n.inputs[0]);
    std::vector<int64_t> order;
    for (int64_t d : n.attr_ints("perm", {}))
      if (in.at(static_cast<size_t>(d)) > 1) order.push_back(d);
    return !std::is_sorted(order.begin(), order.end());
  }
  return n.op == "Slice" || n.op == "Gather" || n.op == "Mul";
}

// Every element of the chain's output as `x`'s element offset + sum of index * stride (in
// elements of x's memory); nothing where some element is not.
std::optional<StridedCopy> strided(const HostTensor& value) {
  const std::vector<int64_t>& shape = value.shape;
  StridedCopy copy;
  copy.shape = shape;
  copy.offset = value.data.empty() ? 0 : static_cast<int64_t>(value.data[0]);
  int64_t unit = 1;
  copy.strides.assign(shape.size(), 0);
  for (size_t d = shape.size(); d-- > 0;) {
    if (shape[d] > 1)
      copy.strides[d] = static_cast<int64_t>(value.data[static_cast<size_t>(unit)]) - copy.offset;
    unit *= shape[d];
  }
  std::vector<int64_t> idx(shape.size(), 0);
  for (size_t i = 0; i < value.data.size(); ++i) {
    int64_t at = copy.offset;
    for (size_t d = 0; d < shape.size(); ++d) at += idx[d] * copy.strides[d];
    if (value.data[i] != static_cast<double>(at)) return std::nullopt;
    for (size_t d = shape.size(); d-- > 0;) {
      if (++idx[d] < shape[d]) break;
      idx[d] = 0;
    }
  }
  return copy;
}

}  // namespace

int fold_copies(Graph& g) {
  std::map<std::string, size_t> producer;
  for (size_t i = 0; i < g.nodes.size(); ++i)
    for (const std::string& o : g.nodes[i].outputs) producer[o] = i;
  auto links = [&](const Node& n) { return moves_data(g, n) || scales(g, n); };
  int changed = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (!links(g.nodes[i])) continue;
    // The chain ends where something else reads the value (or the graph returns it).
    const std::string& y = g.nodes[i].outputs[0];
    bool read_otherwise = g.is_output(y);
    for (size_t r : g.consumers(y)) read_otherwise = read_otherwise || !links(g.nodes[r]);
    if (!read_otherwise) continue;
    std::deque<size_t> chain{i};
    for (;;) {
      auto p = producer.find(g.nodes[chain.front()].inputs[0]);
      if (p == producer.end() || !links(g.nodes[p->second])) break;
      chain.push_front(p->second);
    }
    int copying = 0;
    for (size_t k : chain) copying += copies(g, g.nodes[k]);
    if (copying < 2) continue;
    const std::string x = g.nodes[chain.front()].inputs[0];
    double scale = 1.0;
    std::optional<HostTensor> value =
        probe(g, x, std::vector<size_t>(chain.begin(), chain.end()), &scale);
    if (!value) continue;
    std::optional<StridedCopy> copy = strided(*value);
    if (!copy) continue;
    Node& n = g.nodes[i];
    n.op = kStridedCopy;
    n.inputs = {x};
    n.attrs.clear();
    n.attrs["shape"] = copy->shape;
    n.attrs["offset"] = copy->offset;
    n.attrs["strides"] = copy->strides;
    n.attrs["scale"] = scale;
    ++changed;
  }
  if (changed > 0) eliminate_dead_nodes(g);
  return changed;
}

int gather_channels(Graph& g) {
  const int changed = chains_to_gathers(g) + read_through(g) + drop_copies(g);
  // The Concats and shuffles read through are dead now; later passes must not see their reads.
  if (changed > 0) eliminate_dead_nodes(g);
  return changed;
}

}  // namespace tessera::graph
