// The helpers the rows of the operator table share (graph/op_rows.h).
#include "graph/op_rows.h"

#include <fmt/format.h>

#include <algorithm>
#include <string_view>

#include "graph/op_attrs.h"
#include "te/error.h"

namespace tessera::graph::rows {

const std::vector<int64_t>& input_shape(const Node& n, const Graph& g, size_t i) {
  if (i >= n.inputs.size() || n.inputs[i].empty())
    throw_error("{}: input {} is missing", n.where(), i);
  return g.shape(n.inputs[i]);
}

bool has_input(const Node& n, size_t i) {
  return i < n.inputs.size() && !n.inputs[i].empty();
}

// A constant integer input (a shape, axes, pads): static shapes need it known at import.
std::vector<int64_t> constant_ints(const Node& n, const Graph& g, size_t i, const char* what) {
  if (!has_input(n, i)) throw_error("{}: needs {} (input {})", n.where(), what, i);
  auto it = g.constants.find(n.inputs[i]);
  if (it == g.constants.end())
    throw_error("{}: {} '{}' is not a constant (dynamic shapes are not supported)", n.where(), what,
                n.inputs[i]);
  // Shape operands (pads, repeats, sizes, axes) within what a dimension may be, as integer
  // attributes are (onnx_import.cpp): Pad's arithmetic on 2^62 overflowed (the ONNX fuzzer).
  // Slice's starts and ends past it mean "to the end" and are clamped instead.
  constexpr int64_t kBound = (int64_t{1} << 31) - 1;
  const bool clamp =
      n.op == "Slice" && (std::string_view(what) == "starts" || std::string_view(what) == "ends");
  std::vector<int64_t> out;
  for (double d : it->second.data) {
    int64_t v = saturated_int(d);
    if (clamp) v = std::clamp(v, -kBound, kBound);
    if (v < -kBound || v > kBound)
      throw_error("{}: {} value {} is out of range (at most 2^31 - 1 either way)", n.where(), what,
                  v);
    out.push_back(v);
  }
  return out;
}

// Axes from input `input` where the opset moved them there, else from the attribute.
std::optional<std::vector<int64_t>> axes_of(const Node& n, const Graph& g, size_t input) {
  if (has_input(n, input)) return constant_ints(n, g, input, "axes");
  if (n.attrs.count("axes")) return n.attr_ints("axes", {});
  return std::nullopt;
}

std::vector<int64_t> normalized_axes(const Node& n, std::vector<int64_t> axes, int64_t rank) {
  for (int64_t& a : axes) a = normalize_axis(n, a, rank);
  std::sort(axes.begin(), axes.end());
  if (std::adjacent_find(axes.begin(), axes.end()) != axes.end())
    throw_error("{}: an axis is repeated", n.where());
  return axes;
}

std::vector<int64_t> unravel(int64_t i, const std::vector<int64_t>& shape) {
  std::vector<int64_t> idx(shape.size());
  for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
    idx[d] = i % shape[d];
    i /= shape[d];
  }
  return idx;
}

int64_t ravel(const std::vector<int64_t>& idx, const std::vector<int64_t>& shape) {
  int64_t flat = 0;
  for (size_t d = 0; d < shape.size(); ++d) flat = flat * shape[d] + idx[d];
  return flat;
}

std::vector<std::string> axis_names(size_t rank) {
  std::vector<std::string> names;
  for (size_t i = 0; i < rank; ++i) names.push_back(fmt::format("i{}", i));
  return names;
}

Expr f32(double v) {
  return make_float(v, DType::kFloat32);
}

Expr as_float(Expr cond) {
  return select(std::move(cond), f32(1.0), f32(0.0));
}

// Rows and columns of a tensor split at `axis`: everything before it, everything from it on.
std::pair<int64_t, int64_t> split_at(const std::vector<int64_t>& shape, int64_t axis) {
  int64_t rows = 1, cols = 1;
  for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d)
    (d < axis ? rows : cols) *= shape[d];
  return {rows, cols};
}

}  // namespace tessera::graph::rows
