#include "graph/onnx_import.h"

#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include "graph/op_table.h"
#include "runtime/text_file.h"
#include "te/error.h"

namespace tessera::graph {

namespace {

template <typename T>
std::vector<double> from_raw(const std::string& raw, int64_t count) {
  // Compared by division first: count * sizeof(T) can wrap to the size of a short string.
  if (static_cast<size_t>(count) > raw.size() / sizeof(T) ||
      raw.size() != static_cast<size_t>(count) * sizeof(T))
    throw_error("raw data holds {} bytes for {} elements", raw.size(), count);
  std::vector<double> out(count);
  for (int64_t i = 0; i < count; ++i) {
    T v;
    std::memcpy(&v, raw.data() + i * sizeof(T), sizeof(T));
    out[i] = static_cast<double>(v);
  }
  return out;
}

template <typename Field>
std::vector<double> from_field(const Field& f) {
  return std::vector<double>(f.begin(), f.end());
}

// The bytes of a tensor kept in a file beside the model (torch's default exporter writes
// `model.onnx.data`): `location` relative to the model's folder, `offset` and `length` in it.
std::string external_bytes(const onnx::TensorProto& t, const std::string& folder) {
  std::string location;
  int64_t offset = 0, length = -1;
  for (const onnx::StringStringEntryProto& e : t.external_data()) {
    if (e.key() == "location") location = e.value();
    if (e.key() == "offset" || e.key() == "length") {
      char* end = nullptr;
      errno = 0;
      const long long v = std::strtoll(e.value().c_str(), &end, 10);
      if (e.value().empty() || *end != '\0' || errno != 0 || v < 0)
        throw_error("tensor '{}': external data {} '{}' is not a size", t.name(), e.key(),
                    e.value());
      (e.key() == "offset" ? offset : length) = v;
    }
  }
  if (location.empty()) throw_error("tensor '{}': external data without a location", t.name());
  // The ONNX format keeps external data beside the model; a path leaving the folder is refused.
  const std::filesystem::path relative(location);
  if (relative.is_absolute() ||
      std::any_of(relative.begin(), relative.end(), [](const auto& p) { return p == ".."; }))
    throw_error("tensor '{}': external data location '{}' leaves the model's folder", t.name(),
                location);
  if (folder.empty())
    throw_error("tensor '{}' keeps its data in '{}' (give the model as a file)", t.name(),
                location);
  const std::string path = folder + "/" + location;
  require_regular_file(path, fmt::format("tensor '{}': external data", t.name()));
  std::ifstream in(path, std::ios::binary);
  if (!in) throw_error("tensor '{}': cannot read its external data {}", t.name(), path);
  in.seekg(0, std::ios::end);
  const auto size = static_cast<int64_t>(in.tellg());
  if (offset < 0 || offset > size || length < -1 || (length >= 0 && offset + length > size))
    throw_error("tensor '{}': bytes {}+{} lie outside {} ({} bytes)", t.name(), offset, length,
                path, size);
  if (length < 0) length = size - offset;
  std::string bytes(static_cast<size_t>(length), '\0');
  in.seekg(offset);
  in.read(bytes.data(), length);
  if (!in) throw_error("tensor '{}': cannot read its external data {}", t.name(), path);
  return bytes;
}

HostTensor read_tensor(const onnx::TensorProto& tensor, const std::string& folder = "") {
  onnx::TensorProto external;
  const onnx::TensorProto* tp = &tensor;
  if (tensor.data_location() == onnx::TensorProto::EXTERNAL) {
    external = tensor;
    external.set_raw_data(external_bytes(tensor, folder));
    tp = &external;
  }
  const onnx::TensorProto& t = *tp;
  HostTensor h;
  h.shape.assign(t.dims().begin(), t.dims().end());
  int64_t count = 0;
  try {
    count = num_elements(h.shape);
  } catch (const Error& e) {
    throw_error("tensor '{}': {}", t.name(), e.what());
  }
  bool raw = t.has_raw_data();
  switch (t.data_type()) {
    case onnx::TensorProto::FLOAT:
      h.data = raw ? from_raw<float>(t.raw_data(), count) : from_field(t.float_data());
      break;
    case onnx::TensorProto::DOUBLE:
      h.data = raw ? from_raw<double>(t.raw_data(), count) : from_field(t.double_data());
      break;
    case onnx::TensorProto::INT64:
      h.data = raw ? from_raw<int64_t>(t.raw_data(), count) : from_field(t.int64_data());
      h.is_int = true;
      break;
    case onnx::TensorProto::INT32:
      h.data = raw ? from_raw<int32_t>(t.raw_data(), count) : from_field(t.int32_data());
      h.is_int = true;
      break;
    // Masks (T5's attention mask under the dynamo exporter) and small integer tables; the
    // narrow types sit in int32_data when not raw.
    case onnx::TensorProto::BOOL:
    case onnx::TensorProto::UINT8:
      h.data = raw ? from_raw<uint8_t>(t.raw_data(), count) : from_field(t.int32_data());
      h.is_int = true;
      break;
    case onnx::TensorProto::INT8:
      h.data = raw ? from_raw<int8_t>(t.raw_data(), count) : from_field(t.int32_data());
      h.is_int = true;
      break;
    case onnx::TensorProto::INT16:
      h.data = raw ? from_raw<int16_t>(t.raw_data(), count) : from_field(t.int32_data());
      h.is_int = true;
      break;
    default:
      throw_error(
          "tensor '{}' has element type {} (float, double, bool and 8- to 64-bit integers are "
          "supported)",
          t.name(), onnx::TensorProto::DataType_Name(t.data_type()));
  }
  if (static_cast<int64_t>(h.data.size()) != count)
    throw_error("tensor '{}' holds {} values for shape {}", t.name(), h.data.size(),
                shape_text(h.shape));
  return h;
}

// Integer attributes are kernel sizes, strides, pads, dilations, axes, groups and counts. Bounded
// here by the largest dimension a value may have, so that shape arithmetic over them stays inside
// int64. Slice's starts and ends (before opset 10) mean "to the end" past it, so they are clamped.
int64_t bounded_attribute(const Node& n, const onnx::AttributeProto& a, int64_t v) {
  constexpr int64_t kBound = (int64_t{1} << 31) - 1;
  if (n.op == "Slice" && (a.name() == "starts" || a.name() == "ends"))
    return std::clamp(v, -kBound, kBound);
  if (v < -kBound || v > kBound)
    throw_error("{}: attribute {} = {} is out of range (at most 2^31 - 1 either way)", n.where(),
                a.name(), v);
  return v;
}

AttrValue read_attribute(const Node& n, const onnx::AttributeProto& a) {
  switch (a.type()) {
    case onnx::AttributeProto::INT:
      return bounded_attribute(n, a, a.i());
    case onnx::AttributeProto::FLOAT:
      return static_cast<double>(a.f());
    case onnx::AttributeProto::STRING:
      return a.s();
    case onnx::AttributeProto::INTS: {
      std::vector<int64_t> values;
      for (int64_t v : a.ints()) values.push_back(bounded_attribute(n, a, v));
      return values;
    }
    case onnx::AttributeProto::FLOATS:
      return std::vector<double>(a.floats().begin(), a.floats().end());
    case onnx::AttributeProto::TENSOR:  // ConstantOfShape's value: its elements
      return read_tensor(a.t()).data;
    default:
      throw_error("{}: attribute {} has type {} (not supported)", n.where(), a.name(),
                  onnx::AttributeProto::AttributeType_Name(a.type()));
  }
}

// Split becomes one Slice per output, each knowing its part (`tessera.split`: index, count);
// the shape rule of Slice turns the sizes into bounds once the input's shape is known.
void split_into_slices(const Node& split, std::vector<Node>& nodes) {
  const auto count = static_cast<int64_t>(split.outputs.size());
  for (int64_t i = 0; i < count; ++i) {
    if (split.outputs[i].empty()) continue;
    Node part = split;
    part.op = "Slice";
    part.name = fmt::format("{}_{}", split.name, i);
    part.outputs = {split.outputs[i]};
    part.attrs["tessera.split"] = std::vector<int64_t>{i, count};
    nodes.push_back(std::move(part));
  }
}

// Optional outputs nothing reads (Dropout's mask, LayerNormalization's mean) are dropped, so
// every node has the one output the executor computes.
void drop_unread_outputs(Graph& g) {
  std::set<std::string> read(g.outputs.begin(), g.outputs.end());
  for (const Node& n : g.nodes) read.insert(n.inputs.begin(), n.inputs.end());
  for (Node& n : g.nodes)
    while (n.outputs.size() > 1 && (n.outputs.back().empty() || !read.count(n.outputs.back())))
      n.outputs.pop_back();
}

// A recurrent layer (LSTM, GRU) computes each output it is asked for on its own node
// (`tessera.output`: 0 the sequence, 1 the last state, 2 the last cell): every node has one
// output. Usually only the sequence is read; where more are, the recurrence runs once for each.
void split_recurrent_outputs(Graph& g) {
  std::vector<Node> nodes;
  for (Node& n : g.nodes) {
    if ((n.op != "LSTM" && n.op != "GRU") || n.outputs.size() == 1) {
      nodes.push_back(std::move(n));
      continue;
    }
    std::vector<std::string> outputs = n.outputs;
    bool first = true;
    for (size_t k = 0; k < outputs.size(); ++k) {
      if (outputs[k].empty()) continue;
      Node part = n;
      if (!first) part.name = fmt::format("{}_{}", n.name, k);
      first = false;
      part.outputs = {outputs[k]};
      part.attrs["tessera.output"] = static_cast<int64_t>(k);
      nodes.push_back(std::move(part));
    }
  }
  g.nodes = std::move(nodes);
}

// One-dimensional convolutions and pools (audio, Whisper's and wav2vec2's front ends) run as
// two-dimensional ones over a height of 1: the input gains that axis (an Unsqueeze of axis 2, so
// no shape is needed yet), the weight and the window attributes gain it too, and a Squeeze
// removes it from the output.
void lift_one_dimensional(Graph& g) {
  static const std::set<std::string> windowed = {"Conv", "ConvTranspose", "MaxPool", "AveragePool"};
  std::vector<Node> nodes;
  int64_t count = 0;
  // Unsqueeze and Squeeze of axis 2: an input of another rank than 3 then fails the window's
  // own shape check.
  auto axis_two = [&]() {
    std::string name = fmt::format("tessera.lift_axis_{}", count++);
    g.constants[name] = HostTensor{{1}, {2.0}, true};
    return name;
  };
  for (Node& n : g.nodes) {
    // A list of integers, or nothing where the attribute is absent or of another type (the
    // shape check reports that).
    auto ints_of = [&](const char* key) -> std::vector<int64_t>* {
      auto it = n.attrs.find(key);
      return it == n.attrs.end() ? nullptr : std::get_if<std::vector<int64_t>>(&it->second);
    };
    bool one_d = false;
    if (windowed.count(n.op) && !n.inputs.empty() && n.outputs.size() == 1) {
      const bool has_kernel = n.attrs.count("kernel_shape") > 0;
      const bool constant_weight = n.inputs.size() > 1 && g.is_constant(n.inputs[1]);
      if (std::vector<int64_t>* kernel = ints_of("kernel_shape")) one_d = kernel->size() == 1;
      // A weight of another rank than 3 is the shape check's to report.
      if (constant_weight && (n.op == "Conv" || n.op == "ConvTranspose"))
        one_d = (one_d || !has_kernel) && g.constants.at(n.inputs[1]).shape.size() == 3;
    }
    if (!one_d) {
      nodes.push_back(std::move(n));
      continue;
    }
    Node lift;
    // Names under tessera., which no model value may have, made from the node's output (unique
    // in a valid model).
    const std::string prefix = "tessera.lift." + n.outputs[0];
    lift.op = "Unsqueeze";
    lift.name = prefix + ".in";
    lift.inputs = {n.inputs[0], axis_two()};
    lift.outputs = {lift.name};
    n.inputs[0] = lift.outputs[0];
    std::optional<Node> lift_weight;  // a weight computed from constants (weight norm)
    if (n.inputs.size() > 1 && (n.op == "Conv" || n.op == "ConvTranspose")) {
      auto w = g.constants.find(n.inputs[1]);
      if (w != g.constants.end()) {
        HostTensor lifted = w->second;
        lifted.shape.insert(lifted.shape.begin() + 2, 1);
        n.inputs[1] = prefix + ".w";
        g.constants[n.inputs[1]] = std::move(lifted);
      } else {
        lift_weight = Node{};
        lift_weight->op = "Unsqueeze";
        lift_weight->name = prefix + ".w";
        lift_weight->inputs = {n.inputs[1], axis_two()};
        lift_weight->outputs = {lift_weight->name};
        n.inputs[1] = lift_weight->outputs[0];
      }
    }
    auto widen = [&](const char* key, int64_t height) {
      std::vector<int64_t>* values = ints_of(key);
      if (!values) return;
      std::vector<int64_t>& v = *values;
      if (std::string_view(key) == "pads") {
        if (v.size() != 2) throw_error("{}: pads {} for one dimension", n.where(), v.size());
        v = {0, v[0], 0, v[1]};
      } else {
        if (v.size() != 1)
          throw_error("{}: {} of {} values for one dimension", n.where(), key, v.size());
        v.insert(v.begin(), height);
      }
    };
    // Over a height of 1 with a kernel height of 1 the stride and dilation along it change
    // nothing; the width's are repeated, so that the blocked convolution (one stride for both
    // axes) takes strided ones.
    auto width_value = [&](const char* key) {
      const std::vector<int64_t>* v = ints_of(key);
      return !v || v->empty() ? int64_t{1} : (*v)[0];
    };
    // ConvTranspose keeps 1: its stride over the height would multiply the phases it runs.
    const bool transposed = n.op == "ConvTranspose";
    widen("strides", transposed ? 1 : width_value("strides"));
    widen("dilations", transposed ? 1 : width_value("dilations"));
    widen("kernel_shape", 1);
    widen("output_padding", 0);
    widen("output_shape", 1);
    widen("pads", 0);
    Node drop;
    drop.op = "Squeeze";
    drop.name = prefix + ".out";
    drop.outputs = {n.outputs[0]};
    n.outputs[0] = prefix + ".2d";
    drop.inputs = {n.outputs[0], axis_two()};
    nodes.push_back(std::move(lift));
    if (lift_weight) nodes.push_back(std::move(*lift_weight));
    nodes.push_back(std::move(n));
    nodes.push_back(std::move(drop));
  }
  g.nodes = std::move(nodes);
}

// The values of integer (or bool) type: integer inputs and constants, and what ops compute
// from them (ONNX's types, followed without its type inference).
std::set<std::string> integer_values(const Graph& g) {
  static const std::set<std::string> to_bool = {
      "Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual", "And", "Or",
      "Xor",   "Not",  "IsNaN",       "IsInf",   "Shape",          "Size"};
  // Ops whose output has the type of the input named: 0 for data movement and arithmetic, 1
  // for Where (its condition is input 0).
  static const std::map<std::string, size_t> keeps = {
      {"Reshape", 0},   {"Flatten", 0},   {"Squeeze", 0},
      {"Unsqueeze", 0}, {"Identity", 0},  {"CumSum", 0},
      {"Expand", 0},    {"Slice", 0},     {"Tile", 0},
      {"Transpose", 0}, {"Concat", 0},    {"Gather", 0},
      {"GatherND", 0},  {"Pad", 0},       {"GatherElements", 0},
      {"ReduceSum", 0}, {"ReduceMax", 0}, {"ReduceMin", 0},
      {"Abs", 0},       {"Neg", 0},       {"Add", 0},
      {"Sub", 0},       {"Mul", 0},       {"Div", 0},
      {"Mod", 0},       {"Min", 0},       {"Max", 0},
      {"Sum", 0},       {"Range", 0},     {"Where", 1},
      {"ScatterND", 0}, {"Trilu", 0},     {"Clip", 0},
      {"Sign", 0},      {"Pow", 0},       {"ScatterElements", 0},
      {"Dropout", 0}};
  std::set<std::string> ints = g.int_inputs;
  for (const auto& [name, c] : g.constants)
    if (c.is_int) ints.insert(name);
  for (bool grew = true; grew;) {
    grew = false;
    for (const Node& n : g.nodes) {
      if (n.outputs.empty() || ints.count(n.outputs[0])) continue;
      bool is_int = to_bool.count(n.op) > 0;
      if (n.op == "Cast") is_int = !is_float_type(n.attr_int("to", 1));
      if (n.op == "ConstantOfShape") is_int = n.attr_int("tessera.value_is_int", 0) != 0;
      auto k = keeps.find(n.op);
      if (k != keeps.end() && k->second < n.inputs.size())
        is_int = ints.count(n.inputs[k->second]) > 0;
      if (is_int) grew = ints.insert(n.outputs[0]).second || grew;
    }
  }
  return ints;
}

// The first node reading `value`, for errors about the value that should name where it is used.
std::string reader_of(const onnx::GraphProto& gp, const std::string& value) {
  for (const onnx::NodeProto& np : gp.node())
    if (std::find(np.input().begin(), np.input().end(), value) != np.input().end())
      return fmt::format("node '{}' ({})", np.name(), np.op_type());
  return "no node";
}

}  // namespace

Graph import_onnx_bytes(const std::string& bytes, const std::string& folder) {
  onnx::ModelProto model;
  if (!model.ParseFromString(bytes)) throw_error("not an ONNX model (the protobuf does not parse)");
  const onnx::GraphProto& gp = model.graph();
  Graph g;
  g.opset = 0;
  for (const onnx::OperatorSetIdProto& os : model.opset_import())
    if (os.domain().empty() || os.domain() == "ai.onnx") g.opset = os.version();
  if (g.opset == 0) throw_error("the model imports no default ONNX opset");

  for (const onnx::TensorProto& t : gp.initializer()) {
    if (t.name().starts_with("tessera."))
      throw_error("initializer '{}': the name is reserved for tessera's own", t.name());
    try {
      g.constants[t.name()] = read_tensor(t, folder);
    } catch (const Error& e) {
      throw_error("initializer '{}': {}", t.name(), e.what());
    }
  }
  for (const onnx::ValueInfoProto& vi : gp.input()) {
    if (g.constants.count(vi.name())) continue;  // an initializer listed as input (IR < 4)
    std::string where = reader_of(gp, vi.name());
    if (!vi.type().has_tensor_type())
      throw_error("input '{}' (read by {}) is not a tensor", vi.name(), where);
    const onnx::TypeProto::Tensor& tt = vi.type().tensor_type();
    const bool ids =
        tt.elem_type() == onnx::TensorProto::INT64 || tt.elem_type() == onnx::TensorProto::INT32;
    if (tt.elem_type() != onnx::TensorProto::FLOAT && !ids)
      throw_error(
          "input '{}' (read by {}) has element type {} (float32 is supported, and int64 "
          "or int32 ids that Gather reads)",
          vi.name(), where, onnx::TensorProto::DataType_Name(tt.elem_type()));
    if (ids) g.int_inputs.insert(vi.name());
    if (!tt.has_shape())
      throw_error("input '{}' (read by {}) has an unknown shape (static shapes are needed)",
                  vi.name(), where);
    std::vector<int64_t> shape;
    for (const auto& d : tt.shape().dim()) {
      if (!d.has_dim_value() || d.dim_value() <= 0)
        throw_error(
            "input '{}' (read by {}) has a dynamic dimension '{}' (static shapes are "
            "needed)",
            vi.name(), where, d.has_dim_param() ? d.dim_param() : "?");
      shape.push_back(d.dim_value());
    }
    g.inputs.push_back(vi.name());
    g.shapes[vi.name()] = shape;
  }
  for (const onnx::ValueInfoProto& vi : gp.output()) g.outputs.push_back(vi.name());

  std::set<std::string> names;
  int unnamed = 0;
  for (const onnx::NodeProto& np : gp.node()) {
    Node n;
    n.op = np.op_type();
    n.name = np.name().empty() ? fmt::format("{}_{}", n.op, unnamed++) : np.name();
    if (!np.domain().empty() && np.domain() != "ai.onnx")
      throw_error("{}: operator domain '{}' is not supported", n.where(), np.domain());
    // tessera's own ops and attributes (the "tessera." names its passes add) never come from a
    // file.
    if (n.op.starts_with("tessera."))
      throw_error("{}: '{}' is not an ONNX operator", n.where(), n.op);
    for (const onnx::AttributeProto& a : np.attribute())
      if (a.name().starts_with("tessera."))
        throw_error("{}: attribute '{}' is not an ONNX attribute", n.where(), a.name());
    for (const std::string& v : np.output())
      if (v.starts_with("tessera."))
        throw_error("{}: value name '{}' is reserved for tessera's own", n.where(), v);
    n.inputs.assign(np.input().begin(), np.input().end());
    n.outputs.assign(np.output().begin(), np.output().end());
    if (n.op == "Constant") {
      const onnx::AttributeProto* value = nullptr;
      for (const onnx::AttributeProto& a : np.attribute())
        if (a.name() == "value" && a.type() == onnx::AttributeProto::TENSOR) value = &a;
      if (!value || n.outputs.size() != 1)
        throw_error("{}: only a Constant with a tensor `value` is supported", n.where());
      g.constants[n.outputs[0]] = read_tensor(value->t());
      continue;
    }
    for (const onnx::AttributeProto& a : np.attribute()) {
      n.attrs[a.name()] = read_attribute(n, a);
      if (a.type() == onnx::AttributeProto::TENSOR && read_tensor(a.t()).is_int)
        n.attrs["tessera.value_is_int"] = int64_t{1};
    }
    while (!n.inputs.empty() && n.inputs.back().empty()) n.inputs.pop_back();
    for (size_t k = g.nodes.size(); !names.insert(n.name).second; ++k)
      n.name += fmt::format("_{}", k);
    if (n.op == "Split") {
      split_into_slices(n, g.nodes);
      continue;
    }
    g.nodes.push_back(std::move(n));
  }
  drop_unread_outputs(g);
  split_recurrent_outputs(g);
  lift_one_dimensional(g);
  // Integers run as float32 (exact below 2^24); a division of them truncates.
  const std::set<std::string> integers = integer_values(g);
  for (Node& n : g.nodes)
    if (n.op == "Div" && !n.inputs.empty() && integers.count(n.inputs[0]))
      n.attrs["tessera.integer"] = int64_t{1};
  for (const std::string& v : g.outputs)
    if (g.int_inputs.count(v)) throw_error("integer input '{}' is an output of the model", v);
  // An integer input is token ids: a Gather (an embedding lookup) bounds them, whatever else
  // reads them.
  for (const std::string& v : g.int_inputs) {
    const std::set<std::string> views = id_values(g, {v});
    bool looked_up = false;
    for (const Node& n : g.nodes)
      looked_up =
          looked_up || (n.op == "Gather" && n.inputs.size() > 1 && views.count(n.inputs[1]));
    if (!looked_up)
      throw_error(
          "integer input '{}' is not read as the indices of a Gather (an embedding lookup), "
          "directly or through a Reshape, Flatten, Squeeze or Unsqueeze: only token ids are "
          "supported as integer inputs",
          v);
  }
  // Every unsupported node and attribute at once, so that a user sees the whole list.
  if (std::optional<std::string> unsupported = unsupported_nodes(g))
    throw_error("{}", *unsupported);
  if (g.outputs.empty()) throw_error("the model has no outputs: it computes nothing");
  sort_topologically(g);
  infer_shapes(g);
  return g;
}

Graph import_onnx(const std::string& path) {
  require_regular_file(path, "model");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw_error("cannot read {}", path);
  std::stringstream ss;
  ss << in.rdbuf();
  try {
    const std::string folder = std::filesystem::path(path).parent_path().string();
    return import_onnx_bytes(ss.str(), folder.empty() ? "." : folder);
  } catch (const Error& e) {
    throw_error("{}: {}", path, e.what());
  }
}

}  // namespace tessera::graph
