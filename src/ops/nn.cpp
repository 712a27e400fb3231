#include "ops/nn.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

#include "te/error.h"

namespace tessera {

Tensor matmul(const Tensor& a, const Tensor& b, const std::string& name) {
  if (a.ndim() != 2 || b.ndim() != 2 || a->shape[1] != b->shape[0]) {
    throw_error("matmul needs [M, K] x [K, N] operands");
  }
  IterVar k = reduce_axis(a->shape[1], "k");
  return compute({a->shape[0], b->shape[1]},
                 [&](Var i, Var j) { return sum(a(i, k.var) * b(k.var, j), {k}); }, name,
                 {"i", "j"});
}

Tensor pad_nchw(const Tensor& data, int64_t pad, const std::string& name) {
  return pad_nchw_with(data, pad, make_int(0, data->dtype), name);
}

Tensor pad_nchw_with(const Tensor& data, int64_t pad, Expr value, const std::string& name) {
  return pad_nchw_sides(data, pad, pad, pad, pad, std::move(value), name);
}

Tensor pad_nchw_sides(const Tensor& data, int64_t top, int64_t left, int64_t bottom, int64_t right,
                      Expr value, const std::string& name) {
  if (data.ndim() != 4 && data.ndim() != 5)
    throw_error("pad_nchw needs a 4-D NCHW or 5-D NCHWc tensor");
  if (top < 0 || left < 0 || bottom < 0 || right < 0)
    throw_error("padding must not be negative, got {}, {}, {}, {}", top, left, bottom, right);
  std::vector<int64_t> shape = data->shape;
  int64_t h = shape[2], w = shape[3];
  shape[2] += top + bottom;
  shape[3] += left + right;
  std::vector<std::string> names{"n", "c", "h", "w", "b"};
  names.resize(shape.size());
  const int t = static_cast<int>(top), l = static_cast<int>(left);
  return compute(
      shape,
      [&](const std::vector<Var>& i) {
        Expr inside = i[2] >= Expr(t) && i[2] < Expr(int(h + top)) && i[3] >= Expr(l) &&
                      i[3] < Expr(int(w + left));
        std::vector<Expr> at(i.begin(), i.end());
        at[2] = at[2] - t;
        at[3] = at[3] - l;
        return select(inside, data(at), value);
      },
      name, names);
}

namespace {

// Output plane of a KxK window with stride, padding and dilation, or a clear error.
std::pair<int64_t, int64_t> conv_output_plane(int64_t h, int64_t w, int64_t kh, int64_t kw,
                                              int64_t stride, int64_t pad, int64_t dilation,
                                              int64_t pad_w) {
  if (stride <= 0) throw_error("conv2d stride must be positive, got {}", stride);
  if (pad < 0 || pad_w < 0)
    throw_error("conv2d padding must not be negative, got {} and {}", pad, pad_w);
  if (dilation <= 0) throw_error("conv2d dilation must be positive, got {}", dilation);
  int64_t span_h = (kh - 1) * dilation + 1, span_w = (kw - 1) * dilation + 1;
  int64_t ph = h + 2 * pad, pw = w + 2 * pad_w;
  if (span_h > ph || span_w > pw) {
    throw_error("conv2d: kernel {}x{} (dilation {}) is larger than the padded input {}x{}", kh, kw,
                dilation, ph, pw);
  }
  return {(ph - span_h) / stride + 1, (pw - span_w) / stride + 1};
}

}  // namespace

Tensor conv2d_nchw(const Tensor& data, const Tensor& weight, int64_t stride, int64_t pad,
                   const std::string& name, int64_t dilation, int64_t groups) {
  bool blocked = weight.ndim() == 5;
  if (data.ndim() != 4 || (weight.ndim() != 4 && !blocked))
    throw_error("conv2d needs 4-D NCHW data and OIHW weights (or [O/b][C][K][K][b] blocks)");
  const auto& ds = data->shape;
  const auto& ws = weight->shape;
  int64_t block = blocked ? ws[4] : 1, out_channels = ws[0] * block;
  if (groups <= 0 || ds[1] % groups != 0 || out_channels % groups != 0) {
    throw_error("conv2d: {} groups do not divide {} input and {} output channels", groups, ds[1],
                out_channels);
  }
  int64_t group_in = ds[1] / groups, group_out = out_channels / groups;
  if (ws[1] != group_in) {
    throw_error("conv2d: data has {} channels per group but weights expect {}", group_in, ws[1]);
  }
  int64_t kh = ws[2], kw = ws[3];
  auto [oh, ow] = conv_output_plane(ds[2], ds[3], kh, kw, stride, pad, dilation, pad);
  Tensor in = pad > 0 ? pad_nchw(data, pad) : data;
  IterVar rc = reduce_axis(group_in, "rc"), ry = reduce_axis(kh, "ry"), rx = reduce_axis(kw, "rx");
  int s = static_cast<int>(stride), d = static_cast<int>(dilation), b = static_cast<int>(block);
  return compute({ds[0], out_channels, oh, ow},
                 [&](Var n, Var o, Var y, Var x) {
                   Expr channel =
                       groups == 1 ? Expr(rc.var) : (o / int(group_out)) * int(group_in) + rc.var;
                   Expr iy = d == 1 ? y * s + ry.var : y * s + ry.var * d;
                   Expr ix = d == 1 ? x * s + rx.var : x * s + rx.var * d;
                   Expr w = blocked ? weight(o / b, rc.var, ry.var, rx.var, o % b)
                                    : weight(o, rc.var, ry.var, rx.var);
                   return sum(in(n, channel, iy, ix) * w, {rc, ry, rx});
                 },
                 name, {"n", "o", "y", "x"});
}

Tensor conv2d_nchwc(const Tensor& data, const Tensor& weight, int64_t stride, int64_t pad,
                    const std::string& name, int64_t dilation, int64_t groups, int64_t pad_w) {
  if (pad_w < 0) pad_w = pad;
  if (data.ndim() != 5 || weight.ndim() != 6)
    throw_error(
        "conv2d_nchwc needs [N][C/cb][H][W][cb] data and [O/ob][C/cb][K][K][cb][ob] weights");
  const auto& ds = data->shape;
  const auto& ws = weight->shape;
  if (groups <= 0 || ws[0] % groups != 0)
    throw_error("conv2d_nchwc: {} groups do not divide {} output blocks", groups, ws[0]);
  if (ws[1] * groups != ds[1] || ws[4] != ds[4]) {
    throw_error(
        "conv2d_nchwc: data has {} blocks of {} channels but weights expect {} groups of {} of {}",
        ds[1], ds[4], groups, ws[1], ws[4]);
  }
  int64_t kh = ws[2], kw = ws[3];
  auto [oh, ow] = conv_output_plane(ds[2], ds[3], kh, kw, stride, pad, dilation, pad_w);
  Tensor in = pad > 0 || pad_w > 0
                  ? pad_nchw_sides(data, pad, pad_w, pad, pad_w, make_int(0, data->dtype), "pad")
                  : data;
  IterVar ic = reduce_axis(ws[1], "ic"), ry = reduce_axis(kh, "ry"), rx = reduce_axis(kw, "rx"),
          ib = reduce_axis(ds[4], "ib");
  int s = static_cast<int>(stride), d = static_cast<int>(dilation);
  const int64_t out_blocks_per_group = ws[0] / groups;
  return compute({ds[0], ws[0], oh, ow, ws[5]},
                 [&](const std::vector<Var>& i) {
                   Expr iy = d == 1 ? i[2] * s + ry.var : i[2] * s + ry.var * d;
                   Expr ix = d == 1 ? i[3] * s + rx.var : i[3] * s + rx.var * d;
                   // Blocks of one output group read their group's input blocks; one output
                   // block per group (RegNet's 8 channels a group in blocks of 8) stays affine.
                   Expr group = out_blocks_per_group == 1
                                    ? Expr(i[1])
                                    : Expr(i[1]) / make_int(out_blocks_per_group);
                   Expr in_block = groups == 1 ? Expr(ic.var) : group * make_int(ws[1]) + ic.var;
                   return sum(in(i[0], in_block, iy, ix, ib.var) *
                                  weight(i[1], ic.var, ry.var, rx.var, ib.var, i[4]),
                              {ic, ry, rx, ib});
                 },
                 name, {"n", "oc", "y", "x", "ob"});
}

Tensor depthwise_conv2d_nchw(const Tensor& data, const Tensor& weight, int64_t stride, int64_t pad,
                             const std::string& name) {
  if (data.ndim() != 4 || weight.ndim() != 3 || weight->shape[0] != data->shape[1])
    throw_error("depthwise_conv2d needs NCHW data and [C][K][K] weights with the same C");
  if (stride <= 0) throw_error("depthwise_conv2d stride must be positive, got {}", stride);
  if (pad < 0) throw_error("depthwise_conv2d padding must not be negative, got {}", pad);
  const auto& ds = data->shape;
  int64_t k = weight->shape[1];
  int64_t ph = ds[2] + 2 * pad, pw = ds[3] + 2 * pad;
  if (k > ph || k > pw || weight->shape[2] != k)
    throw_error("depthwise_conv2d: a {}x{} kernel does not fit the padded input {}x{}", k,
                weight->shape[2], ph, pw);
  int64_t oh = (ph - k) / stride + 1, ow = (pw - k) / stride + 1;
  Tensor in = pad > 0 ? pad_nchw(data, pad) : data;
  IterVar ry = reduce_axis(k, "ry"), rx = reduce_axis(k, "rx");
  int s = static_cast<int>(stride);
  return compute(
      {ds[0], ds[1], oh, ow},
      [&](Var n, Var c, Var y, Var x) {
        return sum(in(n, c, y * s + ry.var, x * s + rx.var) * weight(c, ry.var, rx.var), {ry, rx});
      },
      name, {"n", "c", "y", "x"});
}

Tensor depthwise_conv2d_nchwc(const Tensor& data, const Tensor& weight, int64_t stride, int64_t pad,
                              const std::string& name, int64_t dilation) {
  if (data.ndim() != 5 || weight.ndim() != 4)
    throw_error(
        "depthwise_conv2d_nchwc needs [N][C/cb][H][W][cb] data and [C/cb][K][K][cb] weights");
  const auto& ds = data->shape;
  const auto& ws = weight->shape;
  if (ws[1] != ws[2])
    throw_error("depthwise_conv2d_nchwc: the kernel must be square, got {}x{}", ws[1], ws[2]);
  if (ws[0] != ds[1] || ws[3] != ds[4]) {
    throw_error(
        "depthwise_conv2d_nchwc: data has {} blocks of {} channels but weights are "
        "[{}][{}][{}][{}]",
        ds[1], ds[4], ws[0], ws[1], ws[2], ws[3]);
  }
  if (dilation <= 0)
    throw_error("depthwise_conv2d_nchwc: dilation must be positive, got {}", dilation);
  int64_t k = ws[1];
  auto [oh, ow] = conv_output_plane(ds[2], ds[3], k, k, stride, pad, dilation, pad);
  Tensor in = pad > 0 ? pad_nchw(data, pad) : data;
  IterVar ry = reduce_axis(k, "ry"), rx = reduce_axis(k, "rx");
  int s = static_cast<int>(stride), d = static_cast<int>(dilation);
  auto tap = [d](const Var& r) { return d == 1 ? Expr(r) : Expr(r) * d; };
  return compute({ds[0], ds[1], oh, ow, ds[4]},
                 [&](const std::vector<Var>& i) {
                   return sum(in(i[0], i[1], i[2] * s + tap(ry.var), i[3] * s + tap(rx.var), i[4]) *
                                  weight(i[1], ry.var, rx.var, i[4]),
                              {ry, rx});
                 },
                 name, {"n", "c", "y", "x", "b"});
}

Tensor pool2d_nchw(const Tensor& data, PoolKind kind, int64_t k, int64_t stride, int64_t pad,
                   const std::string& name) {
  if (data.ndim() != 4) throw_error("pool2d needs a 4-D NCHW tensor");
  if (k <= 0 || stride <= 0 || pad < 0 || pad >= k)
    throw_error("pool2d: need K > 0, S > 0 and 0 <= P < K, got K={} S={} P={}", k, stride, pad);
  const auto& ds = data->shape;
  int64_t ph = ds[2] + 2 * pad, pw = ds[3] + 2 * pad;
  if (k > ph || k > pw) throw_error("pool2d: window {} is larger than the input {}x{}", k, ph, pw);
  int64_t oh = (ph - k) / stride + 1, ow = (pw - k) / stride + 1;
  Expr pad_value = kind == PoolKind::kMax
                       ? make_float(std::numeric_limits<float>::lowest(), data->dtype)
                       : make_int(0, data->dtype);
  Tensor in = pad > 0 ? pad_nchw_with(data, pad, pad_value) : data;
  IterVar ry = reduce_axis(k, "ry"), rx = reduce_axis(k, "rx");
  int s = static_cast<int>(stride);
  return compute({ds[0], ds[1], oh, ow},
                 [&](Var n, Var c, Var y, Var x) {
                   Expr v = in(n, c, y * s + ry.var, x * s + rx.var);
                   if (kind == PoolKind::kMax) return max(v, {ry, rx});
                   return sum(v * make_float(1.0 / double(k * k), data->dtype), {ry, rx});
                 },
                 name, {"n", "c", "y", "x"});
}

Tensor dense(const Tensor& x, const Tensor& weight, const std::string& name, int64_t out) {
  bool blocked = weight.ndim() == 3;
  if (x.ndim() != 2 || (weight.ndim() != 2 && !blocked) || x->shape[1] != weight->shape[1])
    throw_error("dense needs x[batch, in] and weights [out, in] (or [out/b, in, b] blocks)");
  IterVar k = reduce_axis(x->shape[1], "k");
  int b = blocked ? static_cast<int>(weight->shape[2]) : 1;
  const int64_t rows = weight->shape[0] * b;
  if (out == 0) out = rows;
  if (out > rows || out <= rows - b)
    throw_error("dense: {} outputs do not fill the last of {} weight blocks of {}", out,
                weight->shape[0], b);
  return compute({x->shape[0], out},
                 [&](Var i, Var j) {
                   Expr w = blocked ? weight(j / b, k.var, j % b) : weight(j, k.var);
                   return sum(x(i, k.var) * w, {k});
                 },
                 name, {"i", "j"});
}

Tensor batch_matmul(const Tensor& a, const Tensor& b, const std::string& name) {
  if (a.ndim() != 3 || b.ndim() != 3 || a->shape[0] != b->shape[0] || a->shape[2] != b->shape[1])
    throw_error("batch_matmul needs [B, M, K] x [B, K, N] operands");
  IterVar k = reduce_axis(a->shape[2], "k");
  return compute({a->shape[0], a->shape[1], b->shape[2]},
                 [&](Var bb, Var i, Var j) { return sum(a(bb, i, k.var) * b(bb, k.var, j), {k}); },
                 name, {"b", "i", "j"});
}

Tensor add_broadcast_rows(const Tensor& a, const Tensor& b, const std::string& name) {
  if (a.ndim() != 2 || b.ndim() != 1 || b->shape[0] != a->shape[1])
    throw_error("add_broadcast_rows needs A[M, N] and b[N]");
  return compute(a->shape, [&](Var i, Var j) { return a(i, j) + b(j); }, name, {"i", "j"});
}

Tensor add(const Tensor& a, const Tensor& b, const std::string& name) {
  if (a->shape != b->shape) throw_error("add needs operands of equal shape");
  return compute(
      a->shape,
      [&](const std::vector<Var>& v) {
        std::vector<Expr> idx(v.begin(), v.end());
        return a(idx) + b(idx);
      },
      name);
}

Tensor relu(const Tensor& x, const std::string& name) {
  return compute(
      x->shape,
      [&](const std::vector<Var>& v) {
        std::vector<Expr> idx(v.begin(), v.end());
        return max(x(idx), make_int(0, x->dtype));
      },
      name);
}

Tensor bias_add_nchw(const Tensor& x, const Tensor& bias, const std::string& name) {
  if (x.ndim() != 4 || bias.ndim() != 1 || bias->shape[0] != x->shape[1]) {
    throw_error("bias_add needs NCHW data and a bias with one value per channel");
  }
  return compute(x->shape, [&](Var n, Var o, Var y, Var w) { return x(n, o, y, w) + bias(o); },
                 name, {"n", "o", "y", "x"});
}

// erf in arithmetic alone, so that it runs on whole vectors (erff is one libm call per lane: 11
// of BERT's 209 ms): x P(x^2) / Q(x^2) on x clamped to [-4, 4], where erf(4) rounds to 1 in
// float32. P and Q (degree 5 each) are a rational fit of erf(x) / x over [0, 4] to a relative
// error of 2.5e-8, weighted towards minimax; evaluated in float32 the result is within 3.4e-7
// of erf everywhere and exact at 0 in relative terms. It replaced a Taylor series below 1 and
// Abramowitz and Stegun's 1 - p(t) e^(-x^2) above, both computed on every lane: BERT's GELU
// product ran 133 GFLOP/s against 165 for the same product without it (AMD EPYC, Zen 2, AVX2).
Expr erf_on_vectors(Expr x) {
  const DType type = x.dtype();
  auto c = [&](double v) { return make_float(v, type); };
  static constexpr std::array<double, 6> kP = {1.1283791394e+00, 1.9352741520e-01,
                                               5.3099667393e-02, 3.8826646445e-03,
                                               2.8456396361e-04, 1.9870874068e-06};
  static constexpr std::array<double, 6> kQ = {1.0000000000e+00, 5.0484176283e-01,
                                               1.1534294001e-01, 1.5205870079e-02,
                                               1.1854319182e-03, 3.7423247766e-05};
  // The constant first: min and max return their second operand on NaN, which NaN keeps.
  Expr xc = min(c(4.0), max(c(-4.0), x));
  Expr s = xc * xc;
  Expr p = c(kP[5]), q = c(kQ[5]);
  for (int k = 4; k >= 0; --k) {
    p = p * s + c(kP[k]);
    q = q * s + c(kQ[k]);
  }
  return xc * p / q;
}

Expr activate(Activation act, Expr v) {
  const DType t = v.dtype();
  switch (act) {
    case Activation::kNone:
      return v;
    case Activation::kRelu:
      return max(v, make_float(0.0, t));
    case Activation::kRelu6:
      return min(max(v, make_float(0.0, t)), make_float(6.0, t));
    case Activation::kHardSwish:
      return v * min(max(v * make_float(1.0 / 6, t) + make_float(0.5, t), make_float(0.0, t)),
                     make_float(1.0, t));
    case Activation::kSilu:
      // The vector code computes sigmoid on whole vectors, 10% faster than v / (1 + e^-v)
      // with an exact exp (AMD EPYC, Zen 2, AVX2).
      return v * sigmoid(v);
    case Activation::kGelu:
      return make_float(0.5, t) * v *
             (make_float(1.0, t) + erf_on_vectors(v * make_float(0.70710678118654752440, t)));
    case Activation::kTanh:
      // 1 - 2 sigmoid(-2v), as the Tanh row of the operator table: on whole vectors.
      return make_float(1.0, t) - make_float(2.0, t) * sigmoid(make_float(-2.0, t) * v);
  }
  return v;
}

double activate(Activation act, double v) {
  switch (act) {
    case Activation::kNone:
      return v;
    case Activation::kRelu:
      return std::max(v, 0.0);
    case Activation::kRelu6:
      return std::clamp(v, 0.0, 6.0);
    case Activation::kHardSwish:
      return v * std::clamp(v / 6 + 0.5, 0.0, 1.0);
    case Activation::kSilu:
      return v / (1 + std::exp(-v));
    case Activation::kGelu:
      return 0.5 * v * (1 + std::erf(v * 0.70710678118654752440));
    case Activation::kTanh:
      return std::tanh(v);
  }
  return v;
}

Tensor blocked_epilogue(const Tensor& x, const Tensor* bias, const Tensor* residual, Activation act,
                        const std::string& name) {
  if (x.ndim() != 5) throw_error("blocked_epilogue needs a 5-D NCHWc tensor");
  const auto& s = x->shape;
  if (bias && ((*bias).ndim() != 2 || (*bias)->shape[0] != s[1] || (*bias)->shape[1] != s[4]))
    throw_error("blocked_epilogue: the bias must be [{}][{}]", s[1], s[4]);
  if (residual && (*residual)->shape != s)
    throw_error("blocked_epilogue: the residual must have the result's shape");
  return compute(s,
                 [&](const std::vector<Var>& i) {
                   std::vector<Expr> at(i.begin(), i.end());
                   Expr v = x(at);
                   if (bias) v = v + (*bias)(i[1], i[4]);
                   if (residual) v = v + (*residual)(at);
                   return activate(act, v);
                 },
                 name, {"en", "ec", "ey", "ex", "eb"});
}

Tensor dense_epilogue(const Tensor& x, const Tensor* bias, const Tensor* residual, Activation act,
                      const std::string& name) {
  if (x.ndim() != 2) throw_error("dense_epilogue needs a 2-D [B][O] tensor");
  const auto& s = x->shape;
  if (bias && ((*bias).ndim() != 1 || (*bias)->shape[0] != s[1]))
    throw_error("dense_epilogue: the bias must be [{}]", s[1]);
  if (residual && (*residual)->shape != s)
    throw_error("dense_epilogue: the residual must have the result's shape");
  return compute(s,
                 [&](Var i, Var j) {
                   Expr v = x(i, j);
                   if (bias) v = v + (*bias)(j);
                   if (residual) v = v + (*residual)(i, j);
                   return activate(act, v);
                 },
                 name, {"ei", "ej"});
}

}  // namespace tessera
