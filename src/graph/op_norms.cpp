// The operator table's normalization rows: LayerNormalization (over the trailing axes, a scale
// and bias per normalized element) and InstanceNormalization (over each channel's spatial
// extent, a scale and bias per channel: style transfer, and GroupNorm as torch exports it,
// between two Reshapes). Both normalize the rows of a [rows, cols] matrix and share one kernel.
#include <fmt/format.h>

#include <cmath>
#include <optional>

#include "graph/op_attrs.h"
#include "graph/op_rows.h"
#include "te/error.h"
#include "te/tensor.h"

namespace tessera::graph {

using namespace rows;

namespace {

// Where a row's scale and bias come from: one value for the whole tensor, one per column
// (LayerNormalization), or one per channel where row r is channel r % channels
// (InstanceNormalization).
struct RowParams {
  bool per_channel = false;
  int64_t channels = 1;
};

HostTensor normalize_rows_reference(const HostTensor& x, int64_t rows, int64_t cols, double eps,
                                    const HostTensor* scale, const HostTensor* bias, RowParams p) {
  auto at = [&](const HostTensor* t, int64_t r, int64_t c) {
    if (t->data.size() == 1) return t->data[0];
    return p.per_channel ? t->data[r % p.channels] : t->data[c % cols];
  };
  HostTensor out = x;
  out.is_int = false;
  for (int64_t r = 0; r < rows; ++r) {
    double mean = 0, var = 0;
    for (int64_t c = 0; c < cols; ++c) mean += x.data[r * cols + c];
    mean /= double(cols);
    for (int64_t c = 0; c < cols; ++c) var += std::pow(x.data[r * cols + c] - mean, 2);
    var /= double(cols);
    for (int64_t c = 0; c < cols; ++c) {
      double v = (x.data[r * cols + c] - mean) / std::sqrt(var + eps);
      if (scale) v *= at(scale, r, c);
      if (bias) v += at(bias, r, c);
      out.data[r * cols + c] = v;
    }
  }
  return out;
}

// (x, [scale], [bias]) -> out over [rows, cols]; scale and bias hold `param_lengths` elements.
TeKernel normalize_rows_kernel(const char* name, int64_t rows, int64_t cols, double eps,
                               std::optional<int64_t> scale_length,
                               std::optional<int64_t> bias_length, RowParams p) {
  Tensor x = placeholder({rows, cols}, DType::kFloat32, "x");
  std::vector<Tensor> args{x};
  auto param = [&](std::optional<int64_t> length, const char* arg) -> std::optional<Tensor> {
    if (!length) return std::nullopt;
    args.push_back(placeholder({*length}, DType::kFloat32, arg));
    return args.back();
  };
  std::optional<Tensor> scale = param(scale_length, "scale");
  std::optional<Tensor> bias = param(bias_length, "bias");
  IterVar rc = reduce_axis(cols, "rc"), rv = reduce_axis(cols, "rv");
  const double inv = 1.0 / static_cast<double>(cols);
  Tensor mean =
      compute({rows}, [&](Var r) { return sum(x(r, rc.var) * f32(inv), {rc}); }, "mean", {"r"});
  Tensor var = compute({rows},
                       [&](Var r) {
                         Expr centered = x(r, rv.var) - mean(r);
                         return sum(centered * centered * f32(inv), {rv});
                       },
                       "var", {"r"});
  // One sqrt and one division per row, not per element (the vector code calls sqrt lane by
  // lane).
  Tensor rstd =
      compute({rows}, [&](Var r) { return f32(1.0) / sqrt(var(r) + f32(eps)); }, "rstd", {"r"});
  Tensor out = compute({rows, cols},
                       [&](Var r, Var c) {
                         Expr v = (x(r, c) - mean(r)) * rstd(r);
                         auto at = [&](const Tensor& t) {
                           if (t->shape[0] == 1) return t(0);
                           return p.per_channel ? t(Expr(r) % static_cast<int>(p.channels)) : t(c);
                         };
                         if (scale) v = v * at(*scale);
                         if (bias) v = v + at(*bias);
                         return v;
                       },
                       "out", {"i0", "i1"});
  args.push_back(out);
  if (cols % 16 != 0) return finish_kernel(name, std::move(args));
  // As softmax's fused form (ops/softmax.cpp): the row statistics computed at each tile of
  // rows while it is in cache, as 16 partial sums along the row on whole vectors, the rows'
  // tiles on threads. BERT's 128 x 768 normalization: 0.37 ms as root nests of scalar loops.
  const int64_t tile = rows % 4 == 0 ? 4 : 1;
  std::string strategy = fmt::format(
      "split(i0, {}) ; compute_at(rstd, i0.outer) ; compute_at(var, i0.outer) ; "
      "compute_at(mean, i0.outer) ; split(i1, 8) ; vectorize(i1.inner) ; split(rc, 16) ; "
      "rfactor(mean, rc.inner) ; vectorize(rc.inner) ; split(rv, 16) ; rfactor(var, rv.inner) ; "
      "vectorize(rv.inner) ; parallel(i0.outer)",
      tile);
  return finish_kernel(name, std::move(args), strategy, false);
}

std::optional<int64_t> param_length(const Node& n, const Graph& g, size_t i) {
  if (!has_input(n, i)) return std::nullopt;
  return num_elements(g.shape(n.inputs[i]));
}

OpDef layer_normalization() {
  OpDef d;
  d.name = "LayerNormalization";
  d.attributes = {"axis", "epsilon", "stash_type"};
  d.lowering = Lowering::kKernel;
  d.infer = [](const Node& n, const Graph& g) {
    const std::vector<int64_t>& x = input_shape(n, g, 0);
    int64_t axis = normalize_axis(n, n.attr_int("axis", -1), static_cast<int64_t>(x.size()));
    int64_t cols = split_at(x, axis).second;
    for (size_t i = 1; i < 3; ++i) {
      if (!has_input(n, i)) continue;
      int64_t e = num_elements(g.shape(n.inputs[i]));
      if (e != cols && e != 1)
        throw_error("{}: {} {} does not match the {} normalized elements", n.where(),
                    i == 1 ? "scale" : "bias", shape_text(g.shape(n.inputs[i])), cols);
    }
    return x;
  };
  d.reference = [](const Node& n, const Graph&, const std::vector<const HostTensor*>& in) {
    const HostTensor& x = *in.at(0);
    int64_t axis = normalize_axis(n, n.attr_int("axis", -1), static_cast<int64_t>(x.shape.size()));
    const auto [rows, cols] = split_at(x.shape, axis);
    return normalize_rows_reference(x, rows, cols, n.attr_float("epsilon", 1e-5),
                                    in.size() > 1 ? in[1] : nullptr,
                                    in.size() > 2 ? in[2] : nullptr, {});
  };
  d.kernel = [](const Node& n, const Graph& g) {
    const std::vector<int64_t>& shape = g.shape(n.inputs[0]);
    int64_t axis = normalize_axis(n, n.attr_int("axis", -1), static_cast<int64_t>(shape.size()));
    auto [rows, cols] = split_at(shape, axis);
    return normalize_rows_kernel("layer_norm", rows, cols, n.attr_float("epsilon", 1e-5),
                                 param_length(n, g, 1), param_length(n, g, 2), {});
  };
  return d;
}

// x [N, C, D1 ...]: rows N * C of D1 * ... elements each.
std::pair<int64_t, int64_t> instance_rows(const Node& n, const Graph& g) {
  const std::vector<int64_t>& x = input_shape(n, g, 0);
  if (x.size() < 3)
    throw_error("{}: needs N, C and a spatial axis, got {}", n.where(), shape_text(x));
  for (size_t i = 1; i < 3; ++i) {
    if (!has_input(n, i)) throw_error("{}: needs a scale and a bias", n.where());
    if (g.shape(n.inputs[i]) != std::vector<int64_t>{x[1]})
      throw_error("{}: {} {} where the input has {} channels", n.where(), i == 1 ? "scale" : "bias",
                  shape_text(g.shape(n.inputs[i])), x[1]);
  }
  return split_at(x, 2);
}

OpDef instance_normalization() {
  OpDef d;
  d.name = "InstanceNormalization";
  d.attributes = {"epsilon"};
  d.lowering = Lowering::kKernel;
  d.infer = [](const Node& n, const Graph& g) {
    instance_rows(n, g);
    return input_shape(n, g, 0);
  };
  d.reference = [](const Node& n, const Graph& g, const std::vector<const HostTensor*>& in) {
    const auto [rows, cols] = instance_rows(n, g);
    return normalize_rows_reference(*in.at(0), rows, cols, n.attr_float("epsilon", 1e-5), in.at(1),
                                    in.at(2), {true, input_shape(n, g, 0)[1]});
  };
  d.kernel = [](const Node& n, const Graph& g) {
    const auto [rows, cols] = instance_rows(n, g);
    const int64_t channels = input_shape(n, g, 0)[1];
    return normalize_rows_kernel("instance_norm", rows, cols, n.attr_float("epsilon", 1e-5),
                                 channels, channels, {true, channels});
  };
  return d;
}

}  // namespace

void add_norm_rows(std::vector<OpDef>& t) {
  t.push_back(layer_normalization());
  t.push_back(instance_normalization());
}

}  // namespace tessera::graph
