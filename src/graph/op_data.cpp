// The operator table's rows that move data (views, Slice, Pad, Tile, Expand, Gather) and those
// folded at import (Shape, Size, ConstantOfShape, Range).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "graph/op_attrs.h"
#include "graph/op_rows.h"
#include "runtime/isa.h"
#include "te/error.h"
#include "te/tensor.h"

namespace tessera::graph {

using namespace rows;

namespace {

HostTensor same_data(const HostTensor& x, std::vector<int64_t> shape) {
  HostTensor out = x;
  out.shape = std::move(shape);
  return out;
}

// ---------------------------------------------------------------------------------------------
// Views: the input's bytes under another shape

OpDef view(std::string name, std::vector<std::string> attributes, InferFn infer) {
  OpDef d;
  d.name = std::move(name);
  d.attributes = std::move(attributes);
  d.lowering = Lowering::kView;
  d.infer = std::move(infer);
  d.reference = [](const Node& n, const Graph& g, const std::vector<const HostTensor*>& in) {
    if (in.empty() || !in[0]) throw_error("{}: input 0 is missing", n.where());
    return same_data(*in[0], g.shape(n.outputs[0]));
  };
  return d;
}

std::vector<int64_t> squeeze_shape(const Node& n, const Graph& g) {
  const std::vector<int64_t>& x = input_shape(n, g, 0);
  std::optional<std::vector<int64_t>> axes = axes_of(n, g, 1);
  std::vector<int64_t> out;
  if (!axes) {
    for (int64_t d : x)
      if (d != 1) out.push_back(d);
    return out;
  }
  std::vector<int64_t> drop = normalized_axes(n, *axes, static_cast<int64_t>(x.size()));
  for (int64_t d = 0; d < static_cast<int64_t>(x.size()); ++d) {
    bool dropped = std::binary_search(drop.begin(), drop.end(), d);
    if (dropped && x[d] != 1)
      throw_error("{}: cannot squeeze dimension {} of size {}", n.where(), d, x[d]);
    if (!dropped) out.push_back(x[d]);
  }
  return out;
}

std::vector<int64_t> unsqueeze_shape(const Node& n, const Graph& g) {
  const std::vector<int64_t>& x = input_shape(n, g, 0);
  std::optional<std::vector<int64_t>> axes = axes_of(n, g, 1);
  if (!axes) throw_error("{}: needs axes", n.where());
  auto rank = static_cast<int64_t>(x.size() + axes->size());
  std::vector<int64_t> add = normalized_axes(n, *axes, rank);
  std::vector<int64_t> out;
  size_t next = 0;
  for (int64_t d = 0; d < rank; ++d) {
    if (std::binary_search(add.begin(), add.end(), d))
      out.push_back(1);
    else
      out.push_back(x.at(next++));
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Data movement: Slice, Pad, Tile, Expand, Gather

struct SliceSpec {
  std::vector<int64_t> start, step, out;
};

// ONNX's clamping: starts and ends count from the end when negative and are clamped into the
// dimension (to [0, d] stepping forward, [-1, d-1] stepping back).
SliceSpec slice_spec(const Node& n, const Graph& g) {
  const std::vector<int64_t>& x = input_shape(n, g, 0);
  auto rank = static_cast<int64_t>(x.size());
  std::vector<int64_t> starts, ends, axes, steps;
  if (n.attrs.count("tessera.split")) {
    // One output of a Split (onnx_import.cpp): sizes given, or equal parts (the last smaller).
    std::vector<int64_t> part = n.attr_ints("tessera.split", {});
    int64_t axis = normalize_axis(n, n.attr_int("axis", 0), rank), dim = x[axis];
    std::vector<int64_t> sizes =
        has_input(n, 1) ? constant_ints(n, g, 1, "split") : n.attr_ints("split", {});
    if (sizes.empty()) {
      int64_t each = (dim + part[1] - 1) / part[1];
      for (int64_t i = 0; i < part[1]; ++i)
        sizes.push_back(std::clamp<int64_t>(dim - i * each, 0, each));
    }
    if (static_cast<int64_t>(sizes.size()) != part[1] ||
        std::accumulate(sizes.begin(), sizes.end(), int64_t{0}) != dim)
      throw_error("{}: split sizes do not add up to dimension {} of {}", n.where(), axis,
                  shape_text(x));
    int64_t begin = std::accumulate(sizes.begin(), sizes.begin() + part[0], int64_t{0});
    starts = {begin};
    ends = {begin + sizes[part[0]]};
    axes = {axis};
  } else if (has_input(n, 1)) {
    starts = constant_ints(n, g, 1, "starts");
    ends = constant_ints(n, g, 2, "ends");
    if (has_input(n, 3)) axes = constant_ints(n, g, 3, "axes");
    if (has_input(n, 4)) steps = constant_ints(n, g, 4, "steps");
  } else {
    starts = n.attr_ints("starts", {});
    ends = n.attr_ints("ends", {});
    axes = n.attr_ints("axes", {});
  }
  if (axes.empty())
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size())
    throw_error("{}: starts, ends, axes and steps differ in length", n.where());
  SliceSpec s{std::vector<int64_t>(rank, 0), std::vector<int64_t>(rank, 1), x};
  std::vector<bool> seen(rank, false);
  for (size_t i = 0; i < starts.size(); ++i) {
    int64_t a = normalize_axis(n, axes[i], rank), dim = x[a], step = steps[i];
    if (seen[a]) throw_error("{}: axis {} is sliced twice", n.where(), a);
    seen[a] = true;
    if (step == 0) throw_error("{}: a step of 0", n.where());
    auto clamp = [&](int64_t v) {
      if (v < 0) v += dim;
      return step > 0 ? std::clamp<int64_t>(v, 0, dim) : std::clamp<int64_t>(v, -1, dim - 1);
    };
    // Exporters write INT64_MAX for "to the end": clamp before adding dim can overflow.
    int64_t b = clamp(std::clamp<int64_t>(starts[i], -dim - 1, dim + 1));
    int64_t e = clamp(std::clamp<int64_t>(ends[i], -dim - 1, dim + 1));
    int64_t count = step > 0 ? (e - b + step - 1) / step : (b - e - step - 1) / -step;
    s.start[a] = b;
    s.step[a] = step;
    s.out[a] = std::max<int64_t>(count, 0);
  }
  return s;
}

OpDef slice() {
  OpDef d;
  d.name = "Slice";
  // axis, split, num_outputs: a Split, rewritten into one Slice per output at import
  d.attributes = {"starts", "ends", "axes", "axis", "split", "num_outputs"};
  d.lowering = Lowering::kKernel;
  d.kernel_inputs = {0};
  d.infer = [](const Node& n, const Graph& g) { return slice_spec(n, g).out; };
  d.reference = [](const Node& n, const Graph& g, const std::vector<const HostTensor*>& in) {
    const HostTensor& x = *in.at(0);
    SliceSpec s = slice_spec(n, g);
    HostTensor out{s.out, {}, x.is_int};
    for (int64_t i = 0; i < num_elements(s.out); ++i) {
      std::vector<int64_t> idx = unravel(i, s.out);
      for (size_t k = 0; k < idx.size(); ++k) idx[k] = s.start[k] + idx[k] * s.step[k];
      out.data.push_back(x.data[ravel(idx, x.shape)]);
    }
    return out;
  };
  d.kernel = [](const Node& n, const Graph& g) {
    const std::vector<int64_t>& x = g.shape(n.inputs[0]);
    SliceSpec s = slice_spec(n, g);
    Tensor in = placeholder(x, DType::kFloat32, "in");
    Tensor out = compute(
        s.out,
        [&](const std::vector<Var>& at) {
          std::vector<Expr> idx;
          for (size_t k = 0; k < x.size(); ++k)
            idx.push_back(Expr(at[k]) * static_cast<int>(s.step[k]) + static_cast<int>(s.start[k]));
          return in(idx);
        },
        "out", axis_names(s.out.size()));
    return finish_kernel("slice", {in, out});
  };
  return d;
}

// tessera.GatherChannels: channels picked from several 4-D inputs (gather_channels.cpp).
OpDef gather_channels() {
  OpDef d;
  d.name = kGatherChannels;
  d.attributes = {"sources", "channels"};
  d.lowering = Lowering::kKernel;
  d.infer = [](const Node& n, const Graph& g) {
    std::vector<int64_t> out = input_shape(n, g, 0);
    out[1] = static_cast<int64_t>(read_channel_gather(n, g).channels.size());
    return out;
  };
  d.reference = [](const Node& n, const Graph& g, const std::vector<const HostTensor*>& in) {
    const ChannelGather c = read_channel_gather(n, g);
    std::vector<int64_t> shape = in.at(0)->shape;
    const int64_t plane = shape[2] * shape[3];
    shape[1] = static_cast<int64_t>(c.channels.size());
    HostTensor out{shape, {}, false};
    for (int64_t b = 0; b < shape[0]; ++b)
      for (size_t k = 0; k < c.channels.size(); ++k) {
        const HostTensor& x = *in.at(static_cast<size_t>(c.sources[k]));
        const auto first = x.data.begin() + (b * x.shape[1] + c.channels[k]) * plane;
        out.data.insert(out.data.end(), first, first + plane);
      }
    return out;
  };
  d.kernel = [](const Node& n, const Graph& g) {
    const ChannelGather c = read_channel_gather(n, g);
    std::vector<std::vector<int64_t>> inputs;
    for (const std::string& v : n.inputs) inputs.push_back(g.shape(v));
    return gather_channels_kernel(inputs, c.sources, c.channels, 0);
  };
  return d;
}

// tessera.StridedCopy: a chain of moves and scales as one affine read (data_movement.cpp).
OpDef strided_copy() {
  OpDef d;
  d.name = kStridedCopy;
  d.attributes = {"shape", "offset", "strides", "scale"};
  d.lowering = Lowering::kKernel;
  d.infer = [](const Node& n, const Graph& g) { return read_strided_copy(n, g).shape; };
  d.reference = [](const Node& n, const Graph& g, const std::vector<const HostTensor*>& in) {
    const StridedCopy c = read_strided_copy(n, g);
    const HostTensor& x = *in.at(0);
    HostTensor out{c.shape, {}, x.is_int};
    for (int64_t i = 0; i < num_elements(c.shape); ++i) {
      std::vector<int64_t> idx = unravel(i, c.shape);
      int64_t at = c.offset;
      for (size_t k = 0; k < idx.size(); ++k) at += idx[k] * c.strides[k];
      out.data.push_back(x.data[static_cast<size_t>(at)] * c.scale);
    }
    return out;
  };
  d.kernel = [](const Node& n, const Graph& g) {
    const StridedCopy c = read_strided_copy(n, g);
    // The input as its flat memory: the strides address it directly.
    Tensor in = placeholder({num_elements(g.shape(n.inputs[0]))}, DType::kFloat32, "in");
    Tensor out = compute(
        c.shape,
        [&](const std::vector<Var>& at) {
          Expr flat(static_cast<int>(c.offset));
          for (size_t k = 0; k < at.size(); ++k)
            if (c.strides[k] != 0) flat = flat + Expr(at[k]) * static_cast<int>(c.strides[k]);
          Expr v = in({flat});
          return c.scale == 1.0 ? v : v * f32(c.scale);
        },
        "out", axis_names(c.shape.size()));
    // Rows of whole vectors: each a vector move where the row is contiguous in the input, else
    // loaded lane by lane and stored as one vector.
    const int64_t lanes = target_isa().f32_lanes;
    const std::string last = fmt::format("i{}", c.shape.size() - 1);
    std::string schedule;
    if (!c.shape.empty() && c.shape.back() >= lanes)
      schedule = fmt::format("split({}, {}) ; vectorize({}.inner)", last, lanes, last);
    return finish_kernel("strided_copy", {in, out}, schedule);
  };
  return d;
}

struct PadSpec {
  std::vector<int64_t> before, out;
  double value = 0;
  std::string mode;
};

PadSpec pad_spec(const Node& n, const Graph& g) {
  const std::vector<int64_t>& x = input_shape(n, g, 0);
  auto rank = static_cast<int64_t>(x.size());
  std::vector<int64_t> pads =
      has_input(n, 1) ? constant_ints(n, g, 1, "pads") : n.attr_ints("pads", {});
  PadSpec s;
  s.mode = n.attr_string("mode", "constant");
  if (s.mode != "constant" && s.mode != "edge" && s.mode != "reflect")
    throw_error("{}: mode '{}' (constant, edge or reflect)", n.where(), s.mode);
  s.value = n.attr_float("value", 0.0);
  if (has_input(n, 2)) {
    auto it = g.constants.find(n.inputs[2]);
    if (it == g.constants.end() || it->second.data.size() != 1)
      throw_error("{}: constant_value must be a constant scalar", n.where());
    s.value = it->second.data[0];
  }
  std::vector<int64_t> axes;
  if (has_input(n, 3))
    axes = normalized_axes(n, constant_ints(n, g, 3, "axes"), rank);
  else
    for (int64_t d = 0; d < rank; ++d) axes.push_back(d);
  if (pads.size() != 2 * axes.size())
    throw_error("{}: {} pads for {} axes", n.where(), pads.size(), axes.size());
  s.before.assign(rank, 0);
  s.out = x;
  for (size_t i = 0; i < axes.size(); ++i) {
    int64_t a = axes[i], b = pads[i], e = pads[i + axes.size()];
    if (s.mode != "constant" && (b < 0 || e < 0))
      throw_error("{}: negative pads need mode constant", n.where());
    if (s.mode == "reflect" && (b >= x[a] || e >= x[a]))
      throw_error("{}: reflect pads must be smaller than the dimension", n.where());
    s.before[a] = b;
    s.out[a] = x[a] + b + e;
    if (s.out[a] <= 0) throw_error("{}: pads leave dimension {} empty", n.where(), a);
  }
  return s;
}

// Where output index o of a dimension of size `dim` reads, for edge and reflect; o - before for
// constant (outside the input there the pad value goes).
int64_t pad_source(int64_t o, int64_t before, int64_t dim, const std::string& mode) {
  int64_t i = o - before;
  if (mode == "edge") return std::clamp<int64_t>(i, 0, dim - 1);
  if (mode == "reflect") {
    if (i < 0) i = -i;
    if (i >= dim) i = 2 * (dim - 1) - i;
  }
  return i;
}

OpDef pad() {
  OpDef d;
  d.name = "Pad";
  d.attributes = {"mode", "pads", "value"};
  d.lowering = Lowering::kKernel;
  d.kernel_inputs = {0};
  d.infer = [](const Node& n, const Graph& g) { return pad_spec(n, g).out; };
  d.reference = [](const Node& n, const Graph& g, const std::vector<const HostTensor*>& in) {
    const HostTensor& x = *in.at(0);
    PadSpec s = pad_spec(n, g);
    HostTensor out{s.out, {}, x.is_int};
    for (int64_t i = 0; i < num_elements(s.out); ++i) {
      std::vector<int64_t> idx = unravel(i, s.out);
      bool inside = true;
      for (size_t k = 0; k < idx.size(); ++k) {
        idx[k] = pad_source(idx[k], s.before[k], x.shape[k], s.mode);
        inside = inside && idx[k] >= 0 && idx[k] < x.shape[k];
      }
      out.data.push_back(inside ? x.data[ravel(idx, x.shape)] : s.value);
    }
    return out;
  };
  d.kernel = [](const Node& n, const Graph& g) {
    const std::vector<int64_t>& x = g.shape(n.inputs[0]);
    PadSpec s = pad_spec(n, g);
    Tensor in = placeholder(x, DType::kFloat32, "in");
    Tensor out = compute(
        s.out,
        [&](const std::vector<Var>& at) {
          std::vector<Expr> idx;
          Expr inside;
          for (size_t k = 0; k < x.size(); ++k) {
            Expr i = Expr(at[k]) - static_cast<int>(s.before[k]);
            const int dim = static_cast<int>(x[k]);
            if (s.mode == "edge") {
              i = min(max(i, Expr(0)), Expr(dim - 1));
            } else if (s.mode == "reflect") {
              i = select(i < Expr(0), Expr(0) - i, i);
              i = select(i >= Expr(dim), Expr(2 * (dim - 1)) - i, i);
            } else if (s.before[k] != 0 || s.out[k] != x[k]) {
              Expr ok = i >= Expr(0) && i < Expr(dim);
              inside = inside.defined() ? (inside && ok) : ok;
              // Clamped so that the read is in bounds even where the select discards it.
              i = min(max(i, Expr(0)), Expr(dim - 1));
            }
            idx.push_back(i);
          }
          Expr v = in(idx);
          return inside.defined() ? select(inside, v, f32(s.value)) : v;
        },
        "out", axis_names(s.out.size()));
    return finish_kernel("pad", {in, out});
  };
  return d;
}

OpDef tile() {
  OpDef d;
  d.name = "Tile";
  d.lowering = Lowering::kKernel;
  d.kernel_inputs = {0};
  d.infer = [](const Node& n, const Graph& g) {
    std::vector<int64_t> x = input_shape(n, g, 0);
    std::vector<int64_t> repeats = constant_ints(n, g, 1, "repeats");
    if (repeats.size() != x.size())
      throw_error("{}: {} repeats for rank {}", n.where(), repeats.size(), x.size());
    for (size_t k = 0; k < x.size(); ++k) {
      if (repeats[k] < 1) throw_error("{}: repeats must be positive", n.where());
      if (__builtin_mul_overflow(x[k], repeats[k], &x[k]))
        throw_error("{}: repeating dimension {} {} times leaves int64", n.where(), k, repeats[k]);
    }
    return x;
  };
  d.reference = [](const Node& n, const Graph& g, const std::vector<const HostTensor*>& in) {
    const HostTensor& x = *in.at(0);
    std::vector<int64_t> shape = g.shape(n.outputs[0]);
    HostTensor out{shape, {}, x.is_int};
    for (int64_t i = 0; i < num_elements(shape); ++i) {
      std::vector<int64_t> idx = unravel(i, shape);
      for (size_t k = 0; k < idx.size(); ++k) idx[k] %= x.shape[k];
      out.data.push_back(x.data[ravel(idx, x.shape)]);
    }
    return out;
  };
  d.kernel = [](const Node& n, const Graph& g) {
    const std::vector<int64_t>& x = g.shape(n.inputs[0]);
    Tensor in = placeholder(x, DType::kFloat32, "in");
    Tensor out = compute(
        g.shape(n.outputs[0]),
        [&](const std::vector<Var>& at) {
          std::vector<Expr> idx;
          for (size_t k = 0; k < x.size(); ++k)
            idx.push_back(x[k] == 1 ? Expr(0) : Expr(at[k]) % static_cast<int>(x[k]));
          return in(idx);
        },
        "out", axis_names(x.size()));
    return finish_kernel("tile", {in, out});
  };
  return d;
}

OpDef expand() {
  OpDef d;
  d.name = "Expand";
  d.lowering = Lowering::kKernel;
  d.kernel_inputs = {0};
  d.infer = [](const Node& n, const Graph& g) {
    std::vector<int64_t> shape = constant_ints(n, g, 1, "shape");
    try {
      return broadcast_shapes(input_shape(n, g, 0), shape);
    } catch (const Error& e) {
      throw_error("{}: {}", n.where(), e.what());
    }
  };
  d.reference = [](const Node& n, const Graph& g, const std::vector<const HostTensor*>& in) {
    const HostTensor& x = *in.at(0);
    std::vector<int64_t> shape = g.shape(n.outputs[0]);
    HostTensor out{shape, {}, x.is_int};
    for (int64_t i = 0; i < num_elements(shape); ++i)
      out.data.push_back(x.data[broadcast_index(i, shape, x.shape)]);
    return out;
  };
  d.kernel = [](const Node& n, const Graph& g) {
    return elementwise_kernel(g.shape(n.outputs[0]), {g.shape(n.inputs[0])}, {});
  };
  return d;
}

}  // namespace

namespace rows {

// Indices not known until run time (token ids of an integer input) leave `indices` empty.
GatherSpec gather_spec(const Node& n, const Graph& g) {
  const std::vector<int64_t>& x = input_shape(n, g, 0);
  GatherSpec s;
  s.axis = normalize_axis(n, n.attr_int("axis", 0), static_cast<int64_t>(x.size()));
  if (n.inputs.size() > 1 && g.is_constant(n.inputs[1]))
    s.indices = constant_ints(n, g, 1, "indices");
  s.index_shape = input_shape(n, g, 1);
  for (int64_t& i : s.indices) {
    if (i < -x[s.axis] || i >= x[s.axis])
      throw_error("{}: index {} is out of range for dimension {} of size {}", n.where(), i, s.axis,
                  x[s.axis]);
    if (i < 0) i += x[s.axis];
  }
  s.out.assign(x.begin(), x.begin() + s.axis);
  s.out.insert(s.out.end(), s.index_shape.begin(), s.index_shape.end());
  s.out.insert(s.out.end(), x.begin() + s.axis + 1, x.end());
  return s;
}

}  // namespace rows

namespace {

// Gather with constant indices, or with ids a runtime integer input holds (an embedding lookup
// of token ids): those the kernel reads, clamped into the table as onnxruntime would refuse them.
OpDef gather() {
  OpDef d;
  d.name = "Gather";
  d.attributes = {"axis"};
  d.lowering = Lowering::kKernel;
  d.infer = [](const Node& n, const Graph& g) { return gather_spec(n, g).out; };
  d.reference = [](const Node& n, const Graph& g, const std::vector<const HostTensor*>& in) {
    const HostTensor& x = *in.at(0);
    GatherSpec s = gather_spec(n, g);
    HostTensor out{s.out, {}, x.is_int};
    if (s.indices.empty() && num_elements(s.index_shape) > 0) {
      // Runtime ids, read as the kernel does: negative from the end, clamped into the table.
      const int64_t dim = x.shape[s.axis];
      for (double d : in.at(1)->data) {
        int64_t i = saturated_int(d);
        if (i < 0) i += dim;
        s.indices.push_back(std::clamp<int64_t>(i, 0, dim - 1));
      }
    }
    auto q = static_cast<int64_t>(s.index_shape.size());
    for (int64_t i = 0; i < num_elements(s.out); ++i) {
      std::vector<int64_t> o = unravel(i, s.out);
      std::vector<int64_t> idx(o.begin(), o.begin() + s.axis);
      std::vector<int64_t> which(o.begin() + s.axis, o.begin() + s.axis + q);
      idx.push_back(s.indices[ravel(which, s.index_shape)]);
      idx.insert(idx.end(), o.begin() + s.axis + q, o.end());
      out.data.push_back(x.data[ravel(idx, x.shape)]);
    }
    return out;
  };
  d.kernel = [](const Node& n, const Graph& g) {
    const std::vector<int64_t>& x = g.shape(n.inputs[0]);
    GatherSpec s = gather_spec(n, g);
    Tensor in = placeholder(x, DType::kFloat32, "in");
    // The indices as the kernel's second argument (float32, exact below 2^24, as every array of
    // a model), read where they are not an arithmetic progression (a contiguous or strided run,
    // which is an affine index).
    Tensor indices = placeholder({num_elements(s.index_shape)}, DType::kFloat32, "indices");
    auto q = static_cast<int64_t>(s.index_shape.size());
    bool affine = !s.indices.empty();
    int64_t stride = s.indices.size() > 1 ? s.indices[1] - s.indices[0] : 0;
    for (size_t i = 1; i < s.indices.size(); ++i)
      affine = affine && s.indices[i] - s.indices[i - 1] == stride;
    const int dim = static_cast<int>(x[s.axis]);
    Tensor out = compute(
        s.out,
        [&](const std::vector<Var>& at) {
          Expr flat(0);
          for (int64_t k = 0; k < q; ++k)
            flat = flat * static_cast<int>(s.index_shape[k]) + Expr(at[s.axis + k]);
          Expr source;
          if (affine) {
            source = flat * static_cast<int>(stride) + static_cast<int>(s.indices[0]);
          } else {
            Expr raw = cast(DType::kInt32, indices(flat));
            source = min(max(select(raw < Expr(0), raw + dim, raw), Expr(0)), Expr(dim - 1));
          }
          std::vector<Expr> idx(at.begin(), at.begin() + s.axis);
          idx.push_back(source);
          idx.insert(idx.end(), at.begin() + s.axis + q, at.end());
          return in(idx);
        },
        "out", axis_names(s.out.size()));
    return finish_kernel("gather", {in, indices, out});
  };
  return d;
}

}  // namespace

ChannelGather read_channel_gather(const Node& n, const Graph& g) {
  ChannelGather c{n.attr_ints("sources", {}), n.attr_ints("channels", {})};
  if (c.channels.empty() || c.sources.size() != c.channels.size())
    throw_error("{}: sources and channels must be non-empty and of one length", n.where());
  const std::vector<int64_t>& first = input_shape(n, g, 0);
  for (size_t i = 0; i < n.inputs.size(); ++i) {
    const std::vector<int64_t>& x = input_shape(n, g, i);
    if (x.size() != 4 || first.size() != 4 || x[0] != first[0] || x[2] != first[2] ||
        x[3] != first[3])
      throw_error("{}: inputs must be 4-D with one N, H and W ({} and {})", n.where(),
                  shape_text(first), shape_text(x));
  }
  for (size_t k = 0; k < c.channels.size(); ++k) {
    const int64_t s = c.sources[k];
    if (s < 0 || s >= static_cast<int64_t>(n.inputs.size()) || c.channels[k] < 0 ||
        c.channels[k] >= input_shape(n, g, static_cast<size_t>(s))[1])
      throw_error("{}: output channel {} reads channel {} of input {}, which it lacks", n.where(),
                  k, c.channels[k], s);
  }
  return c;
}

StridedCopy read_strided_copy(const Node& n, const Graph& g) {
  StridedCopy c{n.attr_ints("shape", {}), n.attr_ints("strides", {}), n.attr_int("offset", 0),
                n.attr_float("scale", 1.0)};
  if (c.strides.size() != c.shape.size())
    throw_error("{}: strides must have one entry per dimension of shape", n.where());
  // The first and last elements bound every other (each index runs from 0 to its extent - 1).
  const int64_t elements = num_elements(input_shape(n, g, 0));
  int64_t lo = c.offset, hi = c.offset;
  for (size_t k = 0; k < c.shape.size(); ++k) {
    if (c.shape[k] < 0) throw_error("{}: negative dimension {}", n.where(), c.shape[k]);
    if (c.shape[k] == 0) return c;
    const int64_t reach = (c.shape[k] - 1) * c.strides[k];
    (reach < 0 ? lo : hi) += reach;
  }
  if (lo < 0 || hi >= elements)
    throw_error("{}: reads elements {} to {} of an input of {}", n.where(), lo, hi, elements);
  return c;
}

std::set<std::string> id_values(const Graph& g, const std::set<std::string>& inputs) {
  static const std::set<std::string> views = {"Reshape", "Flatten", "Squeeze", "Unsqueeze",
                                              "Identity"};
  std::set<std::string> ids = inputs;
  for (bool grew = true; grew;) {
    grew = false;
    for (const Node& n : g.nodes)
      if (views.count(n.op) && !n.inputs.empty() && n.outputs.size() == 1 &&
          ids.count(n.inputs[0]) && ids.insert(n.outputs[0]).second)
        grew = true;
  }
  return ids;
}

int64_t id_bound(const Graph& g, const std::string& input) {
  const std::set<std::string> ids = id_values(g, {input});
  int64_t bound = 0;
  for (const Node& n : g.nodes)
    if (n.op == "Gather" && n.inputs.size() > 1 && ids.count(n.inputs[1])) {
      const std::vector<int64_t>& x = g.shape(n.inputs[0]);
      int64_t axis = normalize_axis(n, n.attr_int("axis", 0), static_cast<int64_t>(x.size()));
      bound = bound == 0 ? x[axis] : std::min(bound, x[axis]);
    }
  return bound;
}

namespace {

// ---------------------------------------------------------------------------------------------
// Folded at import: shape arithmetic

OpDef folded(std::string name, std::vector<std::string> attributes, InferFn infer,
             ReferenceFn reference) {
  OpDef d;
  d.name = std::move(name);
  d.attributes = std::move(attributes);
  d.lowering = Lowering::kFolded;
  d.infer = std::move(infer);
  d.reference = std::move(reference);
  return d;
}

std::pair<int64_t, int64_t> shape_range(const Node& n, int64_t rank) {
  int64_t start = n.attr_int("start", 0), end = n.attr_int("end", rank);
  if (start < 0) start += rank;
  if (end < 0) end += rank;
  start = std::clamp<int64_t>(start, 0, rank);
  end = std::clamp<int64_t>(end, start, rank);
  return {start, end};
}

HostTensor shape_value(const Node& n, const Graph& g) {
  const std::vector<int64_t>& x = input_shape(n, g, 0);
  auto [start, end] = shape_range(n, static_cast<int64_t>(x.size()));
  HostTensor t{{end - start}, {}, true};
  for (int64_t d = start; d < end; ++d) t.data.push_back(static_cast<double>(x[d]));
  return t;
}

}  // namespace

void add_view_rows(std::vector<OpDef>& t) {
  t.push_back(view("Squeeze", {"axes"}, squeeze_shape));
  t.push_back(view("Unsqueeze", {"axes"}, unsqueeze_shape));
}

void add_data_rows(std::vector<OpDef>& t) {
  t.push_back(slice());
  t.push_back(pad());
  t.push_back(tile());
  t.push_back(expand());
  t.push_back(gather());
  t.push_back(gather_channels());
  t.push_back(strided_copy());
}

void add_folded_rows(std::vector<OpDef>& t) {
  OpDef shape = folded(
      "Shape", {"start", "end"},
      [](const Node& n, const Graph& g) { return shape_value(n, g).shape; },
      [](const Node& n, const Graph& g, const std::vector<const HostTensor*>&) {
        return shape_value(n, g);
      });
  shape.fold = shape_value;
  t.push_back(std::move(shape));
  OpDef size = folded(
      "Size", {}, [](const Node&, const Graph&) { return std::vector<int64_t>{}; },
      [](const Node& n, const Graph& g, const std::vector<const HostTensor*>&) {
        return HostTensor{{}, {static_cast<double>(num_elements(input_shape(n, g, 0)))}, true};
      });
  size.fold = [](const Node& n, const Graph& g) {
    return HostTensor{{}, {static_cast<double>(num_elements(input_shape(n, g, 0)))}, true};
  };
  t.push_back(std::move(size));
  t.push_back(folded(
      "ConstantOfShape", {"value"},
      [](const Node& n, const Graph& g) {
        std::vector<int64_t> shape = constant_ints(n, g, 0, "shape");
        for (int64_t d : shape)
          if (d < 0) throw_error("{}: negative dimension {}", n.where(), d);
        return shape;
      },
      [](const Node& n, const Graph&, const std::vector<const HostTensor*>& in) {
        std::vector<int64_t> shape;
        for (double d : in.at(0)->data) shape.push_back(saturated_int(d));
        std::vector<double> value = n.attrs.count("value")
                                        ? std::get<std::vector<double>>(n.attrs.at("value"))
                                        : std::vector<double>{0.0};
        if (value.size() != 1) throw_error("{}: value must hold one element", n.where());
        return HostTensor{shape, std::vector<double>(num_elements(shape), value[0]),
                          n.attr_int("tessera.value_is_int", 0) != 0};
      }));
  auto range_count = [](const Node& n, double start, double limit, double delta) {
    if (delta == 0) throw_error("{}: a delta of 0", n.where());
    return std::max<int64_t>(static_cast<int64_t>(std::ceil((limit - start) / delta)), 0);
  };
  auto scalar = [](const Node& n, const Graph& g, size_t i) {
    auto it = has_input(n, i) ? g.constants.find(n.inputs[i]) : g.constants.end();
    if (it == g.constants.end() || it->second.data.size() != 1)
      throw_error("{}: input {} must be a constant scalar (dynamic shapes are not supported)",
                  n.where(), i);
    return it->second.data[0];
  };
  t.push_back(folded(
      "Range", {},
      [range_count, scalar](const Node& n, const Graph& g) {
        return std::vector<int64_t>{
            range_count(n, scalar(n, g, 0), scalar(n, g, 1), scalar(n, g, 2))};
      },
      [range_count](const Node& n, const Graph&, const std::vector<const HostTensor*>& in) {
        double start = in.at(0)->data.at(0), delta = in.at(2)->data.at(0);
        int64_t count = range_count(n, start, in.at(1)->data.at(0), delta);
        HostTensor out{{count}, {}, in[0]->is_int};
        for (int64_t i = 0; i < count; ++i) out.data.push_back(start + double(i) * delta);
        return out;
      }));
}

}  // namespace tessera::graph
