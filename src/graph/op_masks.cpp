// The operator table's rows that exporters use to build attention masks, biases and positions:
// Trilu (a causal mask, torch's legacy export of `is_causal`), ScatterND (slice assignment:
// Swin's shifted-window masks), GatherND (Swin-v2's position bias), CumSum and GatherElements
// (RoBERTa's position ids from its tokens). ScatterND and GatherND are folded at import, their
// inputs computed from static shapes; the others are kernels as well.
#include <fmt/format.h>

#include <algorithm>
#include <string>

#include "graph/op_rows.h"
#include "te/error.h"
#include "te/tensor.h"

namespace tessera::graph {

using namespace rows;

namespace {

// Trilu keeps the elements on and above the k-th diagonal (upper) or on and below it (lower) of
// the last two dimensions; the others become zero. k is clamped to the matrix: past it every
// element or none is kept alike, and the kernel's index arithmetic stays within int32.
struct TriluSpec {
  bool upper = true;
  int64_t k = 0;
};

TriluSpec trilu_spec(const Node& n, const Graph& g) {
  const std::vector<int64_t>& x = input_shape(n, g, 0);
  if (x.size() < 2) throw_error("{}: needs rank 2 or more, got {}", n.where(), shape_text(x));
  TriluSpec s;
  s.upper = n.attr_int("upper", 1) != 0;
  if (has_input(n, 1)) {
    std::vector<int64_t> k = constant_ints(n, g, 1, "k");
    if (k.size() != 1) throw_error("{}: k must be one integer", n.where());
    const int64_t span = x[x.size() - 1] + x[x.size() - 2];
    s.k = std::clamp<int64_t>(k[0], -span, span);
  }
  return s;
}

bool trilu_keeps(const TriluSpec& s, int64_t row, int64_t col) {
  return s.upper ? col - row >= s.k : col - row <= s.k;
}

OpDef trilu() {
  OpDef d;
  d.name = "Trilu";
  d.attributes = {"upper"};
  d.lowering = Lowering::kKernel;
  d.kernel_inputs = {0};
  d.infer = [](const Node& n, const Graph& g) {
    trilu_spec(n, g);
    return input_shape(n, g, 0);
  };
  d.reference = [](const Node& n, const Graph& g, const std::vector<const HostTensor*>& in) {
    const HostTensor& x = *in.at(0);
    const TriluSpec s = trilu_spec(n, g);
    const int64_t cols = x.shape.back(), rows = x.shape[x.shape.size() - 2];
    HostTensor out = x;
    for (int64_t i = 0; i < num_elements(x.shape); ++i) {
      if (!trilu_keeps(s, (i / cols) % rows, i % cols)) out.data[i] = 0;
    }
    return out;
  };
  d.kernel = [](const Node& n, const Graph& g) {
    const std::vector<int64_t>& x = g.shape(n.inputs[0]);
    const TriluSpec s = trilu_spec(n, g);
    Tensor in = placeholder(x, DType::kFloat32, "in");
    Tensor out = compute(
        x,
        [&](const std::vector<Var>& at) {
          std::vector<Expr> idx(at.begin(), at.end());
          Expr diagonal = Expr(at[x.size() - 1]) - Expr(at[x.size() - 2]);
          Expr keep =
              s.upper ? diagonal >= static_cast<int>(s.k) : diagonal <= static_cast<int>(s.k);
          return select(keep, in(idx), f32(0.0));
        },
        "out", axis_names(x.size()));
    return finish_kernel("trilu", {in, out});
  };
  return d;
}

// A scatter's reduction attribute, checked; and one update applied to its element.
std::string scatter_reduction(const Node& n) {
  const std::string reduction = n.attr_string("reduction", "none");
  if (reduction != "none" && reduction != "add" && reduction != "mul" && reduction != "max" &&
      reduction != "min")
    throw_error("{}: reduction '{}' (none, add, mul, max or min are supported)", n.where(),
                reduction);
  return reduction;
}

void scatter_into(double& o, double u, const std::string& reduction) {
  if (reduction == "add") {
    o += u;
  } else if (reduction == "mul") {
    o *= u;
  } else if (reduction == "max") {
    o = std::max(o, u);
  } else if (reduction == "min") {
    o = std::min(o, u);
  } else {
    o = u;
  }
}

// ScatterND: a copy of the data with the slices the indices name replaced by (or combined
// with) the updates. data [d0 ... dr-1], indices [i0 ... iq-2, k], updates [i0 ... iq-2, dk ...].
void check_scatter_shapes(const Node& n, const Graph& g) {
  const std::vector<int64_t>& data = input_shape(n, g, 0);
  const std::vector<int64_t>& indices = input_shape(n, g, 1);
  const std::vector<int64_t>& updates = input_shape(n, g, 2);
  if (indices.empty()) throw_error("{}: indices must have rank 1 or more", n.where());
  const int64_t k = indices.back();
  if (k < 1 || k > static_cast<int64_t>(data.size()))
    throw_error("{}: index tuples of {} into data of rank {}", n.where(), k, data.size());
  std::vector<int64_t> expected(indices.begin(), indices.end() - 1);
  expected.insert(expected.end(), data.begin() + k, data.end());
  if (updates != expected)
    throw_error("{}: updates {} where indices {} into data {} need {}", n.where(),
                shape_text(updates), shape_text(indices), shape_text(data), shape_text(expected));
  scatter_reduction(n);
}

// ScatterElements: a copy of the data with data[index with the axis's entry replaced by
// indices[i]] set to (or combined with) updates[i]. BEiT's relative position index under the
// dynamo exporter (select_scatter).
OpDef scatter_elements() {
  OpDef d;
  d.name = "ScatterElements";
  d.attributes = {"axis", "reduction"};
  d.lowering = Lowering::kFolded;
  d.infer = [](const Node& n, const Graph& g) {
    const std::vector<int64_t>& data = input_shape(n, g, 0);
    const std::vector<int64_t>& indices = input_shape(n, g, 1);
    if (data.empty()) throw_error("{}: needs rank 1 or more", n.where());
    const int64_t axis = normalize_axis(n, n.attr_int("axis", 0), std::ssize(data));
    if (indices != input_shape(n, g, 2) || indices.size() != data.size())
      throw_error("{}: indices {} and updates {} must have one shape, of data {}'s rank", n.where(),
                  shape_text(indices), shape_text(input_shape(n, g, 2)), shape_text(data));
    for (size_t a = 0; a < data.size(); ++a)
      if (static_cast<int64_t>(a) != axis && indices[a] > data[a])
        throw_error("{}: indices {} exceed data {} off the axis", n.where(), shape_text(indices),
                    shape_text(data));
    scatter_reduction(n);
    return data;
  };
  d.reference = [](const Node& n, const Graph&, const std::vector<const HostTensor*>& in) {
    const HostTensor &data = *in.at(0), &indices = *in.at(1), &updates = *in.at(2);
    const int64_t axis = normalize_axis(n, n.attr_int("axis", 0), std::ssize(data.shape));
    const int64_t dim = data.shape[axis];
    const std::string reduction = scatter_reduction(n);
    HostTensor out = data;
    for (int64_t i = 0; i < indices.num_elements(); ++i) {
      std::vector<int64_t> at = unravel(i, indices.shape);
      const int64_t k = saturated_int(indices.data[i]);
      if (k < -dim || k >= dim)
        throw_error("{}: index {} out of range for dimension {} of {}", n.where(), k, axis, dim);
      at[axis] = k < 0 ? k + dim : k;
      scatter_into(out.data[ravel(at, data.shape)], updates.data[i], reduction);
    }
    return out;
  };
  return d;
}

OpDef scatter_nd() {
  OpDef d;
  d.name = "ScatterND";
  d.attributes = {"reduction"};
  d.lowering = Lowering::kFolded;
  d.infer = [](const Node& n, const Graph& g) {
    check_scatter_shapes(n, g);
    return input_shape(n, g, 0);
  };
  d.reference = [](const Node& n, const Graph&, const std::vector<const HostTensor*>& in) {
    const HostTensor &data = *in.at(0), &indices = *in.at(1), &updates = *in.at(2);
    const int64_t k = indices.shape.back();
    const int64_t tuples = num_elements(indices.shape) / k;
    int64_t block = 1;
    for (size_t a = k; a < data.shape.size(); ++a) block *= data.shape[a];
    const std::string reduction = scatter_reduction(n);
    HostTensor out = data;
    for (int64_t t = 0; t < tuples; ++t) {
      int64_t offset = 0;
      for (int64_t a = 0; a < k; ++a) {
        const int64_t dim = data.shape[a];
        int64_t i = saturated_int(indices.data[t * k + a]);
        if (i < -dim || i >= dim)
          throw_error("{}: index {} out of range for dimension {} of {}", n.where(), i, a, dim);
        offset = offset * dim + (i < 0 ? i + dim : i);
      }
      offset *= block;
      for (int64_t e = 0; e < block; ++e)
        scatter_into(out.data[offset + e], updates.data[t * block + e], reduction);
    }
    return out;
  };
  return d;
}

// GatherND: slices of the data named by index tuples, the first batch_dims dimensions shared.
// data [b..., d_b ... d_r-1], indices [b..., i..., k] -> [b..., i..., d_b+k ...]. Swin-v2's
// relative position bias reads its table so, under the dynamo exporter.
struct GatherNdSpec {
  int64_t batch_dims = 0, k = 0;
  std::vector<int64_t> out;
};

GatherNdSpec gather_nd_spec(const Node& n, const Graph& g) {
  const std::vector<int64_t>& data = input_shape(n, g, 0);
  const std::vector<int64_t>& indices = input_shape(n, g, 1);
  GatherNdSpec s;
  s.batch_dims = n.attr_int("batch_dims", 0);
  const auto rank = static_cast<int64_t>(data.size());
  const auto index_rank = static_cast<int64_t>(indices.size());
  if (index_rank < 1) throw_error("{}: indices must have rank 1 or more", n.where());
  s.k = indices.back();
  if (s.batch_dims < 0 || s.batch_dims >= std::min(rank, index_rank))
    throw_error("{}: batch_dims {} for data {} and indices {}", n.where(), s.batch_dims,
                shape_text(data), shape_text(indices));
  if (s.k < 1 || s.k > rank - s.batch_dims)
    throw_error("{}: index tuples of {} into data {} past {} batch dimensions", n.where(), s.k,
                shape_text(data), s.batch_dims);
  for (int64_t b = 0; b < s.batch_dims; ++b)
    if (data[b] != indices[b])
      throw_error("{}: batch dimension {} is {} in data and {} in indices", n.where(), b, data[b],
                  indices[b]);
  s.out.assign(indices.begin(), indices.end() - 1);
  s.out.insert(s.out.end(), data.begin() + s.batch_dims + s.k, data.end());
  return s;
}

OpDef gather_nd() {
  OpDef d;
  d.name = "GatherND";
  d.attributes = {"batch_dims"};
  d.lowering = Lowering::kFolded;
  d.infer = [](const Node& n, const Graph& g) { return gather_nd_spec(n, g).out; };
  d.reference = [](const Node& n, const Graph& g, const std::vector<const HostTensor*>& in) {
    const HostTensor &data = *in.at(0), &indices = *in.at(1);
    const GatherNdSpec s = gather_nd_spec(n, g);
    int64_t batches = 1, block = 1;
    for (int64_t a = 0; a < s.batch_dims; ++a) batches *= data.shape[a];
    for (size_t a = s.batch_dims + s.k; a < data.shape.size(); ++a) block *= data.shape[a];
    int64_t batch_stride = 1;  // data elements per batch
    for (size_t a = s.batch_dims; a < data.shape.size(); ++a) batch_stride *= data.shape[a];
    int64_t tuples_per_batch = 1;
    for (size_t a = s.batch_dims; a + 1 < indices.shape.size(); ++a)
      tuples_per_batch *= indices.shape[a];
    HostTensor out{s.out, {}, data.is_int};
    out.data.reserve(num_elements(s.out));
    for (int64_t b = 0; b < batches; ++b) {
      for (int64_t t = 0; t < tuples_per_batch; ++t) {
        const int64_t tuple = (b * tuples_per_batch + t) * s.k;
        int64_t offset = 0;
        for (int64_t a = 0; a < s.k; ++a) {
          const int64_t dim = data.shape[s.batch_dims + a];
          const int64_t i = saturated_int(indices.data[tuple + a]);
          if (i < -dim || i >= dim)
            throw_error("{}: index {} out of range for dimension {} of {}", n.where(), i,
                        s.batch_dims + a, dim);
          offset = offset * dim + (i < 0 ? i + dim : i);
        }
        const double* from = data.data.data() + b * batch_stride + offset * block;
        out.data.insert(out.data.end(), from, from + block);
      }
    }
    return out;
  };
  return d;
}

// CumSum along one axis (inclusive or exclusive, forwards or reversed): RoBERTa's position ids
// count the tokens that are not padding.
struct CumSumSpec {
  int64_t axis = 0;
  bool exclusive = false, reverse = false;
};

CumSumSpec cum_sum_spec(const Node& n, const Graph& g) {
  const std::vector<int64_t>& x = input_shape(n, g, 0);
  if (x.empty()) throw_error("{}: needs rank 1 or more", n.where());
  std::vector<int64_t> axis = constant_ints(n, g, 1, "axis");
  if (axis.size() != 1) throw_error("{}: axis must be one integer", n.where());
  return {normalize_axis(n, axis[0], static_cast<int64_t>(x.size())),
          n.attr_int("exclusive", 0) != 0, n.attr_int("reverse", 0) != 0};
}

// Whether position k along the axis counts towards position i.
bool cum_sum_takes(const CumSumSpec& s, int64_t k, int64_t i) {
  if (s.reverse) return s.exclusive ? k > i : k >= i;
  return s.exclusive ? k < i : k <= i;
}

OpDef cum_sum() {
  OpDef d;
  d.name = "CumSum";
  d.attributes = {"exclusive", "reverse"};
  d.lowering = Lowering::kKernel;
  d.kernel_inputs = {0};
  d.infer = [](const Node& n, const Graph& g) {
    cum_sum_spec(n, g);
    return input_shape(n, g, 0);
  };
  d.reference = [](const Node& n, const Graph& g, const std::vector<const HostTensor*>& in) {
    const HostTensor& x = *in.at(0);
    const CumSumSpec s = cum_sum_spec(n, g);
    HostTensor out = x;
    for (int64_t i = 0; i < x.num_elements(); ++i) {
      std::vector<int64_t> at = unravel(i, x.shape);
      const int64_t position = at[s.axis];
      double total = 0;
      for (int64_t k = 0; k < x.shape[s.axis]; ++k) {
        at[s.axis] = k;
        if (cum_sum_takes(s, k, position)) total += x.data[ravel(at, x.shape)];
      }
      out.data[i] = total;
    }
    return out;
  };
  d.kernel = [](const Node& n, const Graph& g) {
    const std::vector<int64_t>& x = g.shape(n.inputs[0]);
    const CumSumSpec s = cum_sum_spec(n, g);
    Tensor in = placeholder(x, DType::kFloat32, "in");
    IterVar k = reduce_axis(x[s.axis], "k");
    Tensor out = compute(
        x,
        [&](const std::vector<Var>& at) {
          std::vector<Expr> idx(at.begin(), at.end());
          idx[s.axis] = Expr(k.var);
          Expr i(at[s.axis]), from(k.var);
          Expr takes = s.reverse ? (s.exclusive ? from > i : from >= i)
                                 : (s.exclusive ? from < i : from <= i);
          return sum(select(takes, in(idx), f32(0.0)), {k});
        },
        "out", axis_names(x.size()));
    return finish_kernel("cum_sum", {in, out});
  };
  return d;
}

// GatherElements: out[i] = data[i with the axis's index replaced by indices[i]], the indices
// clamped into the data as Gather's runtime ids are.
OpDef gather_elements() {
  OpDef d;
  d.name = "GatherElements";
  d.attributes = {"axis"};
  d.lowering = Lowering::kKernel;
  d.infer = [](const Node& n, const Graph& g) {
    const std::vector<int64_t>& data = input_shape(n, g, 0);
    const std::vector<int64_t>& indices = input_shape(n, g, 1);
    if (data.empty()) throw_error("{}: needs rank 1 or more", n.where());
    const int64_t axis = normalize_axis(n, n.attr_int("axis", 0), std::ssize(data));
    if (data[axis] == 0 && num_elements(indices) > 0)
      throw_error("{}: indices into an empty axis {} of data {}", n.where(), axis,
                  shape_text(data));
    if (indices.size() != data.size())
      throw_error("{}: indices {} and data {} differ in rank", n.where(), shape_text(indices),
                  shape_text(data));
    for (size_t a = 0; a < data.size(); ++a)
      if (static_cast<int64_t>(a) != axis && indices[a] > data[a])
        throw_error("{}: indices {} exceed data {} off the axis", n.where(), shape_text(indices),
                    shape_text(data));
    return indices;
  };
  d.reference = [](const Node& n, const Graph&, const std::vector<const HostTensor*>& in) {
    const HostTensor &data = *in.at(0), &indices = *in.at(1);
    const int64_t axis = normalize_axis(n, n.attr_int("axis", 0), std::ssize(data.shape));
    const int64_t dim = data.shape[axis];
    HostTensor out{indices.shape, {}, data.is_int};
    for (int64_t i = 0; i < indices.num_elements(); ++i) {
      std::vector<int64_t> at = unravel(i, indices.shape);
      int64_t k = saturated_int(indices.data[i]);
      if (k < 0) k += dim;
      at[axis] = std::clamp<int64_t>(k, 0, dim - 1);
      out.data.push_back(data.data[ravel(at, data.shape)]);
    }
    return out;
  };
  d.kernel = [](const Node& n, const Graph& g) {
    const std::vector<int64_t>& data = g.shape(n.inputs[0]);
    const std::vector<int64_t>& index_shape = g.shape(n.inputs[1]);
    const int64_t axis = normalize_axis(n, n.attr_int("axis", 0), std::ssize(data));
    const int dim = static_cast<int>(data[axis]);
    Tensor in = placeholder(data, DType::kFloat32, "data");
    Tensor indices = placeholder(index_shape, DType::kFloat32, "indices");
    Tensor out = compute(
        index_shape,
        [&](const std::vector<Var>& at) {
          std::vector<Expr> idx(at.begin(), at.end());
          Expr raw = cast(DType::kInt32, indices(idx));
          idx[axis] = min(max(select(raw < Expr(0), raw + dim, raw), Expr(0)), Expr(dim - 1));
          return in(idx);
        },
        "out", axis_names(index_shape.size()));
    return finish_kernel("gather_elements", {in, indices, out});
  };
  return d;
}

}  // namespace

void add_mask_rows(std::vector<OpDef>& t) {
  t.push_back(trilu());
  t.push_back(scatter_nd());
  t.push_back(scatter_elements());
  t.push_back(gather_nd());
  t.push_back(cum_sum());
  t.push_back(gather_elements());
}

}  // namespace tessera::graph
