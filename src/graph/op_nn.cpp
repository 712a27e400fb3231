// The operator table's rows of network layers with te kernels of their own: reductions,
// LogSoftmax, ConvTranspose (and the zero insertion and pixel shuffle it
// lowers to), DepthToSpace; the generic convolution, pooling and softmax kernels the planner falls
// back to.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "graph/op_attrs.h"
#include "graph/op_rows.h"
#include "ops/softmax.h"
#include "te/error.h"
#include "te/tensor.h"

namespace tessera::graph {

using namespace rows;

namespace {

// ---------------------------------------------------------------------------------------------
// Reductions over any axes, keepdims either way

struct ReduceSpec {
  std::vector<bool> reduced;        // per input dimension
  std::vector<int64_t> kept_shape;  // the input's shape with reduced dimensions 1
  std::vector<int64_t> out_shape;   // kept_shape, without them unless keepdims
};

// GlobalMaxPool reduces every axis after N and C, keeping them.
bool is_global_pool(const Node& n) {
  return n.op == "GlobalMaxPool";
}

ReduceSpec reduce_spec(const Node& n, const Graph& g) {
  const std::vector<int64_t>& x = input_shape(n, g, 0);
  auto rank = static_cast<int64_t>(x.size());
  std::optional<std::vector<int64_t>> axes = axes_of(n, g, 1);
  ReduceSpec s;
  s.reduced.assign(x.size(), false);
  if (is_global_pool(n)) {
    if (rank < 3)
      throw_error("{}: needs N, C and a spatial axis, got {}", n.where(), shape_text(x));
    for (int64_t d = 2; d < rank; ++d) s.reduced[d] = true;
  } else if (!axes || axes->empty()) {
    if (n.attr_int("noop_with_empty_axes", 0) == 0) s.reduced.assign(x.size(), true);
  } else {
    for (int64_t a : normalized_axes(n, *axes, rank)) s.reduced[a] = true;
  }
  bool keep = is_global_pool(n) || n.attr_int("keepdims", 1) != 0;
  for (int64_t d = 0; d < rank; ++d) {
    s.kept_shape.push_back(s.reduced[d] ? 1 : x[d]);
    if (!s.reduced[d] || keep) s.out_shape.push_back(s.reduced[d] ? 1 : x[d]);
  }
  return s;
}

// L2 and L1: cosine attention (Swin-v2) and F.normalize write them.
enum class ReduceKind { kSum, kMean, kMax, kMin, kSumSquare, kL2, kL1 };

OpDef reduction(std::string name, ReduceKind kind) {
  OpDef d;
  d.name = std::move(name);
  if (d.name != "GlobalMaxPool") d.attributes = {"axes", "keepdims", "noop_with_empty_axes"};
  d.lowering = Lowering::kKernel;
  d.kernel_inputs = {0};
  d.infer = [](const Node& n, const Graph& g) { return reduce_spec(n, g).out_shape; };
  d.reference = [kind](const Node& n, const Graph& g, const std::vector<const HostTensor*>& in) {
    const HostTensor& x = *in.at(0);
    ReduceSpec s = reduce_spec(n, g);
    double init = kind == ReduceKind::kMax   ? -std::numeric_limits<double>::infinity()
                  : kind == ReduceKind::kMin ? std::numeric_limits<double>::infinity()
                                             : 0.0;
    HostTensor out{s.out_shape, std::vector<double>(num_elements(s.kept_shape), init),
                   x.is_int && kind != ReduceKind::kL2};
    for (int64_t i = 0; i < x.num_elements(); ++i) {
      std::vector<int64_t> idx = unravel(i, x.shape);
      for (size_t k = 0; k < idx.size(); ++k)
        if (s.reduced[k]) idx[k] = 0;
      double& acc = out.data[ravel(idx, s.kept_shape)];
      double v = x.data[i];
      if (kind == ReduceKind::kSumSquare || kind == ReduceKind::kL2) v *= v;
      if (kind == ReduceKind::kL1) v = std::abs(v);
      acc = kind == ReduceKind::kMax   ? std::max(acc, v)
            : kind == ReduceKind::kMin ? std::min(acc, v)
                                       : acc + v;
    }
    if (kind == ReduceKind::kMean) {
      double count = static_cast<double>(x.num_elements()) / double(out.data.size());
      for (double& v : out.data) v /= count;
    }
    if (kind == ReduceKind::kL2)
      for (double& v : out.data) v = std::sqrt(v);
    return out;
  };
  d.kernel = [kind](const Node& n, const Graph& g) {
    const std::vector<int64_t>& x = g.shape(n.inputs[0]);
    ReduceSpec s = reduce_spec(n, g);
    Tensor in = placeholder(x, DType::kFloat32, "in");
    std::vector<IterVar> axes;
    int64_t count = 1;
    for (size_t k = 0; k < x.size(); ++k)
      if (s.reduced[k]) {
        axes.push_back(reduce_axis(x[k], fmt::format("r{}", k)));
        count *= x[k];
      }
    Tensor out = compute(
        s.kept_shape,
        [&](const std::vector<Var>& at) {
          std::vector<Expr> idx;
          for (size_t k = 0, r = 0; k < x.size(); ++k)
            idx.push_back(s.reduced[k] ? Expr(axes[r++].var) : Expr(at[k]));
          Expr v = in(idx);
          if (kind == ReduceKind::kSumSquare || kind == ReduceKind::kL2) v = v * v;
          if (kind == ReduceKind::kL1) v = max(v, f32(0.0) - v);
          if (axes.empty()) return v;
          switch (kind) {
            case ReduceKind::kMax:
              return max(v, axes);
            case ReduceKind::kMin:
              return min(v, axes);
            case ReduceKind::kMean:
              return sum(v * f32(1.0 / static_cast<double>(count)), axes);
            case ReduceKind::kSumSquare:
            case ReduceKind::kL2:
            case ReduceKind::kL1:
            case ReduceKind::kSum:
              break;
          }
          return sum(v, axes);
        },
        kind == ReduceKind::kL2 ? "sum_square" : "out", axis_names(s.kept_shape.size()));
    if (kind == ReduceKind::kL2) {
      Tensor sum_square = out;
      out = compute(
          s.kept_shape,
          [&](const std::vector<Var>& at) {
            return sqrt(sum_square(std::vector<Expr>(at.begin(), at.end())));
          },
          "out", axis_names(s.kept_shape.size()));
    }
    return finish_kernel("reduce", {in, out});
  };
  return d;
}

OpDef log_softmax() {
  OpDef d;
  d.name = "LogSoftmax";
  d.attributes = {"axis"};
  d.lowering = Lowering::kKernel;
  d.infer = [](const Node& n, const Graph& g) {
    const std::vector<int64_t>& x = input_shape(n, g, 0);
    normalize_axis(n, n.attr_int("axis", g.opset >= 13 ? -1 : 1), static_cast<int64_t>(x.size()));
    return x;
  };
  d.reference = [](const Node& n, const Graph& g, const std::vector<const HostTensor*>& in) {
    const HostTensor& x = *in.at(0);
    int64_t axis = normalize_axis(n, n.attr_int("axis", g.opset >= 13 ? -1 : 1),
                                  static_cast<int64_t>(x.shape.size()));
    return softmax_reference(x, axis, g.opset < 13, true);
  };
  d.kernel = [](const Node& n, const Graph& g) {
    std::vector<int64_t> x = g.shape(n.inputs[0]);
    int64_t axis = normalize_axis(n, n.attr_int("axis", g.opset >= 13 ? -1 : 1),
                                  static_cast<int64_t>(x.size()));
    // Before opset 13 the input is coerced to 2-D at axis: one softmax over everything after.
    if (g.opset < 13) x = {split_at(x, axis).first, split_at(x, axis).second}, axis = 1;
    return softmax_kernel(x, axis, true);
  };
  return d;
}

// ---------------------------------------------------------------------------------------------
// ConvTranspose: each input pixel spreads over a window of the output

struct TransposedWindow {
  int64_t n = 0, c = 0, h = 0, w = 0, out_channels = 0, group = 1;
  int64_t kh = 1, kw = 1, sh = 1, sw = 1, dh = 1, dw = 1, pt = 0, pl = 0, oh = 0, ow = 0;
};

TransposedWindow transposed_window(const Node& n, const Graph& g) {
  const std::vector<int64_t>& x = input_shape(n, g, 0);
  const std::vector<int64_t>& wt = input_shape(n, g, 1);
  if (x.size() != 4 || wt.size() != 4)
    throw_error("{}: needs a 4-D NCHW input and 4-D weights", n.where());
  TransposedWindow t;
  t.n = x[0], t.c = x[1], t.h = x[2], t.w = x[3];
  t.group = n.attr_int("group", 1);
  if (t.group <= 0 || wt[0] != t.c || t.c % t.group != 0)
    throw_error("{}: weights {} do not fit {} input channels in {} groups", n.where(),
                shape_text(wt), t.c, t.group);
  t.out_channels = wt[1] * t.group;
  t.kh = wt[2], t.kw = wt[3];
  std::vector<int64_t> strides = n.attr_ints("strides", {1, 1});
  std::vector<int64_t> dilations = n.attr_ints("dilations", {1, 1});
  std::vector<int64_t> pads = n.attr_ints("pads", {0, 0, 0, 0});
  std::vector<int64_t> extra = n.attr_ints("output_padding", {0, 0});
  if (strides.size() != 2 || dilations.size() != 2 || pads.size() != 4 || extra.size() != 2)
    throw_error("{}: strides, dilations, pads and output_padding must be 2-D", n.where());
  if (n.attr_string("auto_pad", "NOTSET") != "NOTSET")
    throw_error("{}: auto_pad is not supported (give explicit pads)", n.where());
  t.sh = strides[0], t.sw = strides[1], t.dh = dilations[0], t.dw = dilations[1];
  t.pt = pads[0], t.pl = pads[1];
  if (t.sh <= 0 || t.sw <= 0 || t.dh <= 0 || t.dw <= 0)
    throw_error("{}: strides and dilations must be positive", n.where());
  // In 128 bits: a stride times an extent plus a dilated kernel can pass 2^63 even with every
  // attribute under 2^31 (onnx_import.cpp's bound).
  auto extent = [&](int64_t s, int64_t in, int64_t more, int64_t k, int64_t d, int64_t pad_sum) {
    const __int128 e =
        static_cast<__int128>(s) * (in - 1) + more + static_cast<__int128>(k - 1) * d + 1 - pad_sum;
    if (e > (int64_t{1} << 31) - 1) throw_error("{}: an output extent past 2^31 - 1", n.where());
    return static_cast<int64_t>(e);
  };
  t.oh = extent(t.sh, t.h, extra[0], t.kh, t.dh, pads[0] + pads[2]);
  t.ow = extent(t.sw, t.w, extra[1], t.kw, t.dw, pads[1] + pads[3]);
  std::vector<int64_t> given = n.attr_ints("output_shape", {});
  if (!given.empty()) {
    // The pads that give this shape (the total split as SAME_UPPER splits it, as ONNX defines).
    if (given.size() != 2) throw_error("{}: output_shape must be 2-D", n.where());
    auto total = [](int64_t in, int64_t s, int64_t more, int64_t k, int64_t d, int64_t out) {
      return s * (in - 1) + more + (k - 1) * d + 1 - out;
    };
    t.pt = total(t.h, t.sh, extra[0], t.kh, t.dh, given[0]) / 2;
    t.pl = total(t.w, t.sw, extra[1], t.kw, t.dw, given[1]) / 2;
    t.oh = given[0], t.ow = given[1];
  }
  if (t.oh <= 0 || t.ow <= 0) throw_error("{}: an empty output", n.where());
  return t;
}

// Where output position `at` reads along one dimension for tap `k`: the input position
// (at + pad - k * dilation) / stride where that is whole and inside.
std::pair<Expr, Expr> transposed_tap(Expr at, Expr k, int64_t stride, int64_t dilation, int64_t pad,
                                     int64_t size, int64_t kernel) {
  const int s = static_cast<int>(stride), d = static_cast<int>(dilation);
  // Shifted up by whole strides so that C's % and / never see a negative number.
  const int shift = s * static_cast<int>((kernel * dilation) / stride + 1);
  Expr num = at + static_cast<int>(pad) - k * d + shift;
  Expr index = num / s - shift / s;
  Expr ok = eq(num % s, Expr(0)) && index >= Expr(0) && index < Expr(static_cast<int>(size));
  return {ok, min(max(index, Expr(0)), Expr(static_cast<int>(size) - 1))};
}

// tessera.ZeroInsert (graph/passes.h lower_conv_transpose): (stride - 1) zeros between the
// pixels of H and W and the given padding around them.
OpDef zero_insert() {
  OpDef d;
  d.name = "tessera.ZeroInsert";
  d.attributes = {"strides", "pads"};
  d.lowering = Lowering::kKernel;
  d.infer = [](const Node& n, const Graph& g) {
    const std::vector<int64_t>& x = input_shape(n, g, 0);
    std::vector<int64_t> s = n.attr_ints("strides", {1, 1}), p = n.attr_ints("pads", {0, 0, 0, 0});
    return std::vector<int64_t>{x[0], x[1], (x[2] - 1) * s[0] + 1 + p[0] + p[2],
                                (x[3] - 1) * s[1] + 1 + p[1] + p[3]};
  };
  d.reference = [](const Node& n, const Graph& g, const std::vector<const HostTensor*>& in) {
    const HostTensor& x = *in.at(0);
    std::vector<int64_t> s = n.attr_ints("strides", {1, 1}), p = n.attr_ints("pads", {0, 0, 0, 0});
    HostTensor out{g.shape(n.outputs[0]), {}, false};
    out.data.assign(num_elements(out.shape), 0.0);
    for (int64_t i = 0; i < x.num_elements(); ++i) {
      std::vector<int64_t> idx = unravel(i, x.shape);
      idx[2] = idx[2] * s[0] + p[0];
      idx[3] = idx[3] * s[1] + p[1];
      out.data[ravel(idx, out.shape)] = x.data[i];
    }
    return out;
  };
  d.kernel = [](const Node& n, const Graph& g) {
    const std::vector<int64_t>& x = g.shape(n.inputs[0]);
    std::vector<int64_t> s = n.attr_ints("strides", {1, 1}), p = n.attr_ints("pads", {0, 0, 0, 0});
    Tensor in = placeholder(x, DType::kFloat32, "in");
    Tensor out = compute(g.shape(n.outputs[0]),
                         [&](Var b, Var c, Var y, Var xx) {
                           auto [ok_y, iy] = transposed_tap(y, Expr(0), s[0], 1, -p[0], x[2], 1);
                           auto [ok_x, ix] = transposed_tap(xx, Expr(0), s[1], 1, -p[1], x[3], 1);
                           return select(ok_y && ok_x, in(b, c, iy, ix), f32(0.0));
                         },
                         "out", {"i0", "i1", "i2", "i3"});
    return finish_kernel("zero_insert", {in, out});
  };
  return d;
}

// ---------------------------------------------------------------------------------------------
// Depth to space: blocks of channels become blocks of pixels

DepthToSpace depth_to_space_of(const Node& n, const Graph& g) {
  return read_depth_to_space(n, input_shape(n, g, 0));
}

OpDef depth_to_space(const char* name, std::vector<std::string> attributes) {
  OpDef d;
  d.name = name;
  d.attributes = std::move(attributes);
  d.lowering = Lowering::kKernel;
  d.infer = [](const Node& n, const Graph& g) {
    DepthToSpace s = depth_to_space_of(n, g);
    const std::vector<int64_t>& x = input_shape(n, g, 0);
    return std::vector<int64_t>{x[0], x[1] / (s.bh * s.bw), s.oh, s.ow};
  };
  d.reference = [](const Node& n, const Graph& g, const std::vector<const HostTensor*>& in) {
    DepthToSpace s = depth_to_space_of(n, g);
    const HostTensor& x = *in.at(0);
    HostTensor out{g.shape(n.outputs[0]), {}, false};
    out.data.resize(num_elements(out.shape));
    const int64_t channels = out.shape[1];
    for (int64_t i = 0; i < out.num_elements(); ++i) {
      std::vector<int64_t> idx = unravel(i, out.shape);
      int64_t y = idx[2] + s.top, xx = idx[3] + s.left;
      int64_t block = y % s.bh * s.bw + xx % s.bw;
      int64_t c = s.dcr ? block * channels + idx[1] : idx[1] * s.bh * s.bw + block;
      out.data[i] = x.data[ravel({idx[0], c, y / s.bh, xx / s.bw}, x.shape)];
    }
    return out;
  };
  d.kernel = [](const Node& n, const Graph& g) {
    DepthToSpace s = depth_to_space_of(n, g);
    Tensor in = placeholder(g.shape(n.inputs[0]), DType::kFloat32, "in");
    const auto channels = static_cast<int>(g.shape(n.outputs[0])[1]);
    const auto bh = static_cast<int>(s.bh), bw = static_cast<int>(s.bw);
    Tensor out = compute(
        g.shape(n.outputs[0]),
        [&](Var b, Var o, Var y, Var x) {
          Expr yy = Expr(y) + static_cast<int>(s.top), xx = Expr(x) + static_cast<int>(s.left);
          Expr block = yy % bh * bw + xx % bw;
          Expr c = s.dcr ? block * channels + Expr(o) : Expr(o) * (bh * bw) + block;
          return in(b, c, yy / bh, xx / bw);
        },
        "out", {"i0", "i1", "i2", "i3"});
    return finish_kernel("depth_to_space", {in, out});
  };
  return d;
}

OpDef conv_transpose() {
  OpDef d;
  d.name = "ConvTranspose";
  d.attributes = {"auto_pad", "dilations",      "group",        "kernel_shape",
                  "pads",     "output_padding", "output_shape", "strides"};
  d.lowering = Lowering::kKernel;
  d.infer = [](const Node& n, const Graph& g) {
    TransposedWindow t = transposed_window(n, g);
    if (has_input(n, 2) && g.shape(n.inputs[2]) != std::vector<int64_t>{t.out_channels})
      throw_error("{}: bias does not match {} output channels", n.where(), t.out_channels);
    return std::vector<int64_t>{t.n, t.out_channels, t.oh, t.ow};
  };
  d.reference = [](const Node& n, const Graph& g, const std::vector<const HostTensor*>& in) {
    TransposedWindow t = transposed_window(n, g);
    const HostTensor& x = *in.at(0);
    const HostTensor& wt = *in.at(1);
    const HostTensor* bias = in.size() > 2 ? in[2] : nullptr;
    const int64_t cg = t.c / t.group, og = t.out_channels / t.group;
    HostTensor out{{t.n, t.out_channels, t.oh, t.ow}, {}, false};
    out.data.assign(num_elements(out.shape), 0.0);
    for (int64_t b = 0; b < t.n; ++b)
      for (int64_t c = 0; c < t.c; ++c)
        for (int64_t y = 0; y < t.h; ++y)
          for (int64_t xx = 0; xx < t.w; ++xx) {
            double v = x.data[((b * t.c + c) * t.h + y) * t.w + xx];
            for (int64_t oo = 0; oo < og; ++oo)
              for (int64_t ky = 0; ky < t.kh; ++ky)
                for (int64_t kx = 0; kx < t.kw; ++kx) {
                  int64_t oy = y * t.sh + ky * t.dh - t.pt, ox = xx * t.sw + kx * t.dw - t.pl;
                  if (oy < 0 || oy >= t.oh || ox < 0 || ox >= t.ow) continue;
                  int64_t o = c / cg * og + oo;
                  out.data[((b * t.out_channels + o) * t.oh + oy) * t.ow + ox] +=
                      v * wt.data[((c * og + oo) * t.kh + ky) * t.kw + kx];
                }
          }
    if (bias)
      for (int64_t i = 0; i < out.num_elements(); ++i)
        out.data[i] += bias->data[i / (t.oh * t.ow) % t.out_channels];
    return out;
  };
  d.kernel = [](const Node& n, const Graph& g) {
    TransposedWindow t = transposed_window(n, g);
    const int64_t cg = t.c / t.group, og = t.out_channels / t.group;
    Tensor in = placeholder({t.n, t.c, t.h, t.w}, DType::kFloat32, "in");
    Tensor weight = placeholder({t.c, og, t.kh, t.kw}, DType::kFloat32, "weight");
    std::vector<Tensor> args{in, weight};
    bool bias = has_input(n, 2);
    if (bias) args.push_back(placeholder({t.out_channels}, DType::kFloat32, "bias"));
    IterVar rc = reduce_axis(cg, "rc"), ry = reduce_axis(t.kh, "ry"), rx = reduce_axis(t.kw, "rx");
    Tensor acc = compute(
        {t.n, t.out_channels, t.oh, t.ow},
        [&](Var b, Var o, Var y, Var x) {
          auto [ok_y, iy] = transposed_tap(y, ry.var, t.sh, t.dh, t.pt, t.h, t.kh);
          auto [ok_x, ix] = transposed_tap(x, rx.var, t.sw, t.dw, t.pl, t.w, t.kw);
          Expr c = Expr(o) / static_cast<int>(og) * static_cast<int>(cg) + Expr(rc.var);
          Expr v = in(b, c, iy, ix) * weight(c, Expr(o) % static_cast<int>(og), ry.var, rx.var);
          return sum(select(ok_y && ok_x, v, f32(0.0)), {rc, ry, rx});
        },
        bias ? "acc" : "out", {"i0", "i1", "i2", "i3"});
    if (bias) {
      const Tensor& bt = args[2];
      Tensor sum_only = acc;
      acc = compute({t.n, t.out_channels, t.oh, t.ow},
                    [&](Var b, Var o, Var y, Var x) { return sum_only(b, o, y, x) + bt(o); }, "out",
                    {"i0", "i1", "i2", "i3"});
    }
    args.push_back(acc);
    return finish_kernel("conv_transpose", std::move(args));
  };
  return d;
}

}  // namespace

HostTensor softmax_reference(const HostTensor& x, int64_t axis, bool coerce_2d, bool log_softmax) {
  auto rank = static_cast<int64_t>(x.shape.size());
  int64_t outer = 1, len = 1, inner = 1;
  for (int64_t d = 0; d < rank; ++d) {
    if (d < axis)
      outer *= x.shape[d];
    else if (d == axis || coerce_2d)
      len *= x.shape[d];
    else
      inner *= x.shape[d];
  }
  HostTensor out = x;
  out.is_int = false;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      auto at = [&](int64_t j) { return (o * len + j) * inner + i; };
      double mx = -std::numeric_limits<double>::infinity(), total = 0;
      for (int64_t j = 0; j < len; ++j) mx = std::max(mx, x.data[at(j)]);
      for (int64_t j = 0; j < len; ++j) total += std::exp(x.data[at(j)] - mx);
      for (int64_t j = 0; j < len; ++j)
        out.data[at(j)] = log_softmax ? x.data[at(j)] - mx - std::log(total)
                                      : std::exp(x.data[at(j)] - mx) / total;
    }
  return out;
}

// Softmax or LogSoftmax along any axis: the maximum, the sum of exponentials, the result.
TeKernel softmax_kernel(const std::vector<int64_t>& shape, int64_t axis, bool log_softmax) {
  int64_t outer = 1, len = shape[axis], inner = 1;
  for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d) {
    if (d < axis) outer *= shape[d];
    if (d > axis) inner *= shape[d];
  }
  Tensor x = placeholder({outer, len, inner}, DType::kFloat32, "x");
  IterVar rm = reduce_axis(len, "rm"), rs = reduce_axis(len, "rs");
  Tensor mx = compute({outer, inner}, [&](Var o, Var i) { return max(x(o, rm.var, i), {rm}); },
                      "mx", {"o", "i"});
  // No denormal exponentials, as in the library's softmax.
  Tensor total = compute(
      {outer, inner},
      [&](Var o, Var i) { return sum(exp_without_denormals(x(o, rs.var, i) - mx(o, i)), {rs}); },
      "total", {"o", "i"});
  Tensor out = compute({outer, len, inner},
                       [&](Var o, Var j, Var i) {
                         Expr shifted = x(o, j, i) - mx(o, i);
                         return log_softmax ? shifted - log(total(o, i))
                                            : exp_without_denormals(shifted) / total(o, i);
                       },
                       "out", {"i0", "i1", "i2"});
  return finish_kernel(log_softmax ? "log_softmax" : "softmax_axis", {x, out});
}

TeKernel pool2d_kernel(const Window2d& w, bool is_max) {
  if (!is_max && (w.dh != 1 || w.dw != 1))
    throw_error("average pooling with dilations is not supported");
  Tensor in = placeholder({w.n, w.c, w.h, w.w}, DType::kFloat32, "in");
  IterVar ry = reduce_axis(w.kh, "ry"), rx = reduce_axis(w.kw, "rx");
  const int sh = static_cast<int>(w.sh), sw = static_cast<int>(w.sw);
  const int pt = static_cast<int>(w.pt), pl = static_cast<int>(w.pl);
  const int h = static_cast<int>(w.h), wd = static_cast<int>(w.w);
  // A tap outside the input reads a clamped in-bounds element the select then discards.
  auto tap = [&](Var n, Var c, Var y, Var x) {
    Expr iy = Expr(y) * sh + Expr(ry.var) * static_cast<int>(w.dh) - pt;
    Expr ix = Expr(x) * sw + Expr(rx.var) * static_cast<int>(w.dw) - pl;
    Expr inside = iy >= Expr(0) && iy < Expr(h) && ix >= Expr(0) && ix < Expr(wd);
    Expr v = in(n, c, min(max(iy, Expr(0)), Expr(h - 1)), min(max(ix, Expr(0)), Expr(wd - 1)));
    return select(inside, v, f32(is_max ? std::numeric_limits<float>::lowest() : 0.0));
  };
  std::vector<int64_t> out_shape{w.n, w.c, w.oh, w.ow};
  if (is_max) {
    Tensor out = compute(out_shape,
                         [&](Var n, Var c, Var y, Var x) {
                           return max(tap(n, c, y, x), {ry, rx});
                         },
                         "out", {"i0", "i1", "i2", "i3"});
    return finish_kernel("max_pool", {in, out});
  }
  Tensor total = compute(out_shape,
                         [&](Var n, Var c, Var y, Var x) {
                           return sum(tap(n, c, y, x), {ry, rx});
                         },
                         "total", {"n", "c", "y", "x"});
  // Taps counted: inside the input, or inside the padded input with count_include_pad.
  const int lo_h = w.count_include_pad ? -pt : 0, hi_h = h + (w.count_include_pad ? int(w.pb) : 0);
  const int lo_w = w.count_include_pad ? -pl : 0, hi_w = wd + (w.count_include_pad ? int(w.pr) : 0);
  Tensor out =
      compute(out_shape,
              [&](Var n, Var c, Var y, Var x) {
                Expr y0 = Expr(y) * sh - pt, x0 = Expr(x) * sw - pl;
                Expr rows = min(y0 + static_cast<int>(w.kh), Expr(hi_h)) - max(y0, Expr(lo_h));
                Expr cols = min(x0 + static_cast<int>(w.kw), Expr(hi_w)) - max(x0, Expr(lo_w));
                return total(n, c, y, x) / cast(DType::kFloat32, rows * cols);
              },
              "out", {"i0", "i1", "i2", "i3"});
  return finish_kernel("avg_pool", {in, out});
}

TeKernel conv2d_kernel(const Window2d& w, bool bias) {
  const int64_t cg = w.c / w.group, og = w.out_channels / w.group;
  Tensor in = placeholder({w.n, w.c, w.h, w.w}, DType::kFloat32, "in");
  Tensor weight = placeholder({w.out_channels, cg, w.kh, w.kw}, DType::kFloat32, "weight");
  std::vector<Tensor> args{in, weight};
  if (bias) args.push_back(placeholder({w.out_channels}, DType::kFloat32, "bias"));
  IterVar rc = reduce_axis(cg, "rc"), ry = reduce_axis(w.kh, "ry"), rx = reduce_axis(w.kw, "rx");
  const int h = static_cast<int>(w.h), wd = static_cast<int>(w.w);
  Tensor acc = compute(
      {w.n, w.out_channels, w.oh, w.ow},
      [&](Var n, Var o, Var y, Var x) {
        Expr iy = Expr(y) * static_cast<int>(w.sh) + Expr(ry.var) * static_cast<int>(w.dh) -
                  static_cast<int>(w.pt);
        Expr ix = Expr(x) * static_cast<int>(w.sw) + Expr(rx.var) * static_cast<int>(w.dw) -
                  static_cast<int>(w.pl);
        Expr inside = iy >= Expr(0) && iy < Expr(h) && ix >= Expr(0) && ix < Expr(wd);
        Expr channel = Expr(o) / static_cast<int>(og) * static_cast<int>(cg) + Expr(rc.var);
        Expr v =
            in(n, channel, min(max(iy, Expr(0)), Expr(h - 1)), min(max(ix, Expr(0)), Expr(wd - 1)));
        return sum(select(inside, v, f32(0.0)) * weight(o, rc.var, ry.var, rx.var), {rc, ry, rx});
      },
      bias ? "acc" : "out", {"i0", "i1", "i2", "i3"});
  if (bias) {
    const Tensor& b = args[2];
    Tensor sum_only = acc;
    acc = compute({w.n, w.out_channels, w.oh, w.ow},
                  [&](Var n, Var o, Var y, Var x) { return sum_only(n, o, y, x) + b(o); }, "out",
                  {"i0", "i1", "i2", "i3"});
  }
  args.push_back(acc);
  return finish_kernel("conv2d_any", std::move(args));
}

void add_nn_rows(std::vector<OpDef>& t) {
  t.push_back(reduction("ReduceMean", ReduceKind::kMean));
  t.push_back(reduction("ReduceSum", ReduceKind::kSum));
  t.push_back(reduction("ReduceMax", ReduceKind::kMax));
  t.push_back(reduction("ReduceMin", ReduceKind::kMin));
  t.push_back(reduction("ReduceSumSquare", ReduceKind::kSumSquare));
  t.push_back(reduction("ReduceL2", ReduceKind::kL2));
  t.push_back(reduction("ReduceL1", ReduceKind::kL1));
  t.push_back(reduction("GlobalMaxPool", ReduceKind::kMax));
  t.push_back(log_softmax());
  t.push_back(conv_transpose());
  t.push_back(zero_insert());
  t.push_back(depth_to_space("DepthToSpace", {"blocksize", "mode"}));
  t.push_back(depth_to_space("tessera.PixelShuffle", {"blocks", "offsets", "sizes", "mode"}));
}

}  // namespace tessera::graph
