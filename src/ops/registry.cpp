// The operators `tessera run` knows, each with its te definition and a naive reference.
#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <optional>

#include "lower/lower.h"
#include "ops/attention.h"
#include "ops/image.h"
#include "ops/nn.h"
#include "ops/separate_filter.h"
#include "ops/softmax.h"
#include "ops/workload.h"
#include "te/error.h"

namespace tessera {

namespace {

using Arrays = std::vector<std::vector<double>>;

OpInstance build_matmul(const Workload& w) {
  int64_t m = w.positive("M"), n = w.positive("N"), k = w.positive("K");
  Tensor a = placeholder({m, k}, DType::kFloat32, "A");
  Tensor b = placeholder({k, n}, DType::kFloat32, "B");
  Tensor c = matmul(a, b, "C");
  OpInstance op{{a, b, c}, lower("matmul", {a, b, c}), 2.0 * m * n * k, k, nullptr};
  op.reference = [=](Arrays& x) {
    const auto &A = x[0], &B = x[1];
    auto& C = x[2];
    std::fill(C.begin(), C.end(), 0.0);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t kk = 0; kk < k; ++kk)
        for (int64_t j = 0; j < n; ++j) C[i * n + j] += A[i * k + kk] * B[kk * n + j];
  };
  return op;
}

struct ConvShape {
  int64_t n, c, h, w, o, k, s, p, oh, ow, d = 1, g = 1;
  int64_t wb = 0;  // weights pre-packed in blocks of wb output channels (0: plain OIHW)
  // The window's width and the padding of the width where they differ from k and p (KW, PW:
  // Inception's 1x7 and 7x1 convolutions); conv2d_nchwc reads them.
  int64_t kw = 0, pw = 0;

  std::vector<int64_t> weight_shape() const {
    if (wb == 0) return {o, c / g, k, k};
    return {o / wb, c / g, k, k, wb};
  }
  int64_t weight_index(int64_t oc, int64_t ic, int64_t ky, int64_t kx) const {
    if (wb == 0) return ((oc * (c / g) + ic) * k + ky) * k + kx;
    return (((oc / wb * (c / g) + ic) * k + ky) * k + kx) * wb + oc % wb;
  }
};

ConvShape conv_shape(const Workload& w) {
  ConvShape s{w.positive("N"),
              w.positive("C"),
              w.positive("H"),
              w.positive("W"),
              w.positive("O"),
              w.positive("K"),
              w.positive("S"),
              w.get("P"),
              0,
              0};
  if (s.p < 0) throw_error("{}: P must not be negative, got {}", w.op, s.p);
  s.d = w.get_or("D", 1);
  s.g = w.get_or("G", 1);
  if (s.d <= 0) throw_error("{}: D must be positive, got {}", w.op, s.d);
  if (s.g <= 0 || s.c % s.g != 0 || s.o % s.g != 0)
    throw_error("{}: G={} must divide C={} and O={}", w.op, s.g, s.c, s.o);
  int64_t im2col = w.get_or("IM2COL", 0);
  if (im2col != 0 && im2col != 1) throw_error("{}: IM2COL must be 0 or 1, got {}", w.op, im2col);
  if (im2col == 1 && s.g != 1) throw_error("{}: IM2COL=1 needs G=1", w.op);
  s.wb = w.get_or("WB", 0);
  if (s.wb < 0 || (s.wb > 0 && s.o % s.wb != 0))
    throw_error("{}: WB={} (pre-packed weight block) must divide O={}", w.op, s.wb, s.o);
  if (w.get_or("KW", 0) < 0) throw_error("{}: KW must not be negative, got {}", w.op, w.get("KW"));
  s.kw = w.kernel_width();
  s.pw = w.width_padding();
  int64_t span = (s.k - 1) * s.d + 1, span_w = (s.kw - 1) * s.d + 1;
  if (span > s.h + 2 * s.p || span_w > s.w + 2 * s.pw) {
    throw_error("{}: kernel {} is larger than the padded input {}x{}", w.op,
                span == span_w ? std::to_string(span) : fmt::format("{}x{}", span, span_w),
                s.h + 2 * s.p, s.w + 2 * s.pw);
  }
  s.oh = (s.h + 2 * s.p - span) / s.s + 1;
  s.ow = (s.w + 2 * s.pw - span_w) / s.s + 1;
  return s;
}

// Direct convolution over doubles: data NCHW, weight O(C/G)HW, out NOHW.
void reference_conv(const ConvShape& s, const std::vector<double>& data,
                    const std::vector<double>& weight, std::vector<double>& out) {
  int64_t cg = s.c / s.g, og = s.o / s.g;
  for (int64_t n = 0; n < s.n; ++n)
    for (int64_t o = 0; o < s.o; ++o)
      for (int64_t y = 0; y < s.oh; ++y)
        for (int64_t x = 0; x < s.ow; ++x) {
          double acc = 0;
          for (int64_t c = 0; c < cg; ++c)
            for (int64_t ky = 0; ky < s.k; ++ky)
              for (int64_t kx = 0; kx < s.k; ++kx) {
                int64_t iy = y * s.s + ky * s.d - s.p, ix = x * s.s + kx * s.d - s.p;
                if (iy < 0 || iy >= s.h || ix < 0 || ix >= s.w) continue;
                acc += data[((n * s.c + o / og * cg + c) * s.h + iy) * s.w + ix] *
                       weight[s.weight_index(o, c, ky, kx)];
              }
          out[((n * s.o + o) * s.oh + y) * s.ow + x] = acc;
        }
}

OpInstance build_conv2d(const Workload& w) {
  ConvShape s = conv_shape(w);
  Tensor data = placeholder({s.n, s.c, s.h, s.w}, DType::kFloat32, "data");
  Tensor weight = placeholder(s.weight_shape(), DType::kFloat32, "weight");
  Tensor out = conv2d_nchw(data, weight, s.s, s.p, "conv", s.d, s.g);
  double flops = 2.0 * s.n * s.o * s.oh * s.ow * (s.c / s.g) * s.k * s.k;
  OpInstance op{{data, weight, out},
                lower("conv2d", {data, weight, out}),
                flops,
                s.c / s.g * s.k * s.k,
                nullptr};
  op.reference = [s](Arrays& x) { reference_conv(s, x[0], x[1], x[2]); };
  return op;
}

// Element (n, c, y, x) of a [N][C/cb][H][W][cb] tensor: channel c in block c / cb, lane c % cb.
int64_t nchwc_index(int64_t n, int64_t c, int64_t y, int64_t x, int64_t channels, int64_t h,
                    int64_t w, int64_t cb) {
  return (((n * (channels / cb) + c / cb) * h + y) * w + x) * cb + c % cb;
}

// conv2d_nchwc's blocks: output channels in blocks of CB, input channels in blocks of IB where
// given, else CB where it divides C, else one block of all C (a 3-channel image is
// [N][1][H][W][3]; with IB=1 it is NCHW itself, [N][3][H][W][1]).
struct BlockedConv {
  ConvShape s;
  int64_t ib, ob;
  int64_t data_index(int64_t n, int64_t c, int64_t y, int64_t x) const {
    return nchwc_index(n, c, y, x, s.c, s.h, s.w, ib);
  }
  /// `c` counts within the output channel's group.
  int64_t weight_index(int64_t o, int64_t c, int64_t ky, int64_t kx) const {
    return ((((o / ob * (s.c / s.g / ib) + c / ib) * s.k + ky) * s.kw + kx) * ib + c % ib) * ob +
           o % ob;
  }
  int64_t out_index(int64_t n, int64_t o, int64_t y, int64_t x) const {
    return nchwc_index(n, o, y, x, s.o, s.oh, s.ow, ob);
  }
};

// The fused epilogue of a blocked convolution: BIAS=1 adds bias[O] ([O/cb][cb]), RES=1 a residual
// of the output's layout, ACT=1 relu, ACT=2 relu6, ACT=3 hardswish, ACT=4 silu, ACT=5 gelu, ACT=6
// tanh.
struct EpilogueKeys {
  bool bias = false, residual = false;
  Activation act = Activation::kNone;

  bool any() const { return bias || residual || act != Activation::kNone; }
  double apply(double v, double bias_value, double residual_value) const {
    return activate(act, v + bias_value + residual_value);
  }
};

EpilogueKeys epilogue_keys(const Workload& w) {
  auto flag = [&](const char* key) {
    int64_t v = w.get_or(key, 0);
    if (v != 0 && v != 1) throw_error("{}: {} must be 0 or 1, got {}", w.op, key, v);
    return v == 1;
  };
  EpilogueKeys e{flag("BIAS"), flag("RES"), Activation::kNone};
  int64_t act = w.get_or("ACT", 0);
  if (act < 0 || act > 6)
    throw_error(
        "{}: ACT must be 0 (none), 1 (relu), 2 (relu6), 3 (hardswish), 4 (silu), 5 (gelu) or 6 "
        "(tanh), got {}",
        w.op, act);
  e.act = static_cast<Activation>(act);
  return e;
}

// The epilogue's stage and arguments after the producer's: [bias][residual], then the output.
Tensor with_epilogue(const EpilogueKeys& e, const Tensor& raw, int64_t blocks, int64_t block,
                     std::vector<Tensor>& args) {
  if (!e.any()) return raw;
  std::optional<Tensor> bias, residual;
  if (e.bias) args.push_back(*(bias = placeholder({blocks, block}, DType::kFloat32, "bias")));
  if (e.residual)
    args.push_back(*(residual = placeholder(raw->shape, DType::kFloat32, "residual")));
  return blocked_epilogue(raw, bias ? &*bias : nullptr, residual ? &*residual : nullptr, e.act);
}

// The reference of the epilogue, in place on the output (argument `out`), bias and residual
// right before it.
void reference_epilogue(const EpilogueKeys& e, Arrays& x, size_t out, int64_t block, int64_t plane,
                        int64_t channels) {
  if (!e.any()) return;
  size_t next = out - (e.bias ? 1 : 0) - (e.residual ? 1 : 0);
  const std::vector<double>* bias = e.bias ? &x[next++] : nullptr;
  const std::vector<double>* residual = e.residual ? &x[next] : nullptr;
  for (size_t i = 0; i < x[out].size(); ++i) {
    int64_t idx = static_cast<int64_t>(i);
    int64_t c = idx / (plane * block) % (channels / block) * block + idx % block;
    x[out][i] = e.apply(x[out][i], bias ? (*bias)[c] : 0.0, residual ? (*residual)[i] : 0.0);
  }
}

OpInstance build_conv2d_nchwc(const Workload& w) {
  BlockedConv b{conv_shape(w), 0, w.get_or("CB", 16)};
  const ConvShape& s = b.s;
  if (b.ob <= 0 || s.o % b.ob != 0)
    throw_error("conv2d_nchwc: CB={} (channel block) must divide O={}", b.ob, s.o);
  EpilogueKeys e = epilogue_keys(w);
  b.ib = w.get_or("IB", 0);
  if (b.ib < 0 || (b.ib > 0 && s.c % b.ib != 0))
    throw_error("conv2d_nchwc: IB={} (input channel block) must divide C={}", b.ib, s.c);
  if (b.ib == 0) b.ib = s.c % b.ob == 0 ? b.ob : s.c;
  // Groups of whole blocks on both sides, so that every block belongs to one group.
  const int64_t cg = s.c / s.g, og = s.o / s.g;
  if (s.g > 1 && (cg % b.ib != 0 || og % b.ob != 0)) {
    throw_error(
        "conv2d_nchwc: G={} groups of {} input and {} output channels are not whole blocks of "
        "{} and {}",
        s.g, cg, og, b.ib, b.ob);
  }
  Tensor data = placeholder({s.n, s.c / b.ib, s.h, s.w, b.ib}, DType::kFloat32, "data");
  Tensor weight =
      placeholder({s.o / b.ob, cg / b.ib, s.k, s.kw, b.ib, b.ob}, DType::kFloat32, "weight");
  std::vector<Tensor> args{data, weight};
  Tensor out = with_epilogue(e, conv2d_nchwc(data, weight, s.s, s.p, "conv", s.d, s.g, s.pw),
                             s.o / b.ob, b.ob, args);
  args.push_back(out);
  double flops = 2.0 * s.n * s.o * s.oh * s.ow * cg * s.k * s.kw;
  OpInstance op{args, lower("conv2d_nchwc", args), flops, cg * s.k * s.kw, nullptr};
  op.reference = [b, e](Arrays& x) {
    const ConvShape& s = b.s;
    size_t out = x.size() - 1;
    for (int64_t n = 0; n < s.n; ++n)
      for (int64_t o = 0; o < s.o; ++o)
        for (int64_t y = 0; y < s.oh; ++y)
          for (int64_t xx = 0; xx < s.ow; ++xx) {
            double acc = 0;
            const int64_t cg = s.c / s.g, first = o / (s.o / s.g) * cg;
            for (int64_t c = 0; c < cg; ++c)
              for (int64_t ky = 0; ky < s.k; ++ky)
                for (int64_t kx = 0; kx < s.kw; ++kx) {
                  int64_t iy = y * s.s + ky * s.d - s.p, ix = xx * s.s + kx * s.d - s.pw;
                  if (iy < 0 || iy >= s.h || ix < 0 || ix >= s.w) continue;
                  acc +=
                      x[0][b.data_index(n, first + c, iy, ix)] * x[1][b.weight_index(o, c, ky, kx)];
                }
            x[out][b.out_index(n, o, y, xx)] = acc;
          }
    reference_epilogue(e, x, out, b.ob, s.oh * s.ow, s.o);
  };
  return op;
}

OpInstance build_conv2d_bias_relu(const Workload& w) {
  ConvShape s = conv_shape(w);
  Tensor data = placeholder({s.n, s.c, s.h, s.w}, DType::kFloat32, "data");
  Tensor weight = placeholder(s.weight_shape(), DType::kFloat32, "weight");
  Tensor bias = placeholder({s.o}, DType::kFloat32, "bias");
  Tensor out =
      relu(bias_add_nchw(conv2d_nchw(data, weight, s.s, s.p, "conv", s.d, s.g), bias, "bias_add"),
           "relu");
  double flops =
      2.0 * s.n * s.o * s.oh * s.ow * (s.c / s.g) * s.k * s.k + 2.0 * s.n * s.o * s.oh * s.ow;
  OpInstance op{{data, weight, bias, out},
                lower("conv2d_bias_relu", {data, weight, bias, out}),
                flops,
                s.c / s.g * s.k * s.k,
                nullptr};
  op.reference = [s](Arrays& x) {
    reference_conv(s, x[0], x[1], x[3]);
    int64_t plane = s.oh * s.ow;
    for (size_t i = 0; i < x[3].size(); ++i) {
      int64_t o = static_cast<int64_t>(i) / plane % s.o;
      x[3][i] = std::max(x[3][i] + x[2][o], 0.0);
    }
  };
  return op;
}

// Window shape of depthwise convolution and pooling: K, S, P (and the blocked depthwise
// convolution's dilation D) over NCHW.
struct WindowShape {
  int64_t n, c, h, w, k, s, p, oh, ow, d = 1;
};

WindowShape window_shape(const Workload& w) {
  WindowShape s{w.positive("N"),
                w.positive("C"),
                w.positive("H"),
                w.positive("W"),
                w.positive("K"),
                w.positive("S"),
                w.get("P"),
                0,
                0};
  if (s.p < 0) throw_error("{}: P must not be negative, got {}", w.op, s.p);
  s.d = w.get_or("D", 1);
  if (s.d <= 0) throw_error("{}: D must be positive, got {}", w.op, s.d);
  const int64_t span = (s.k - 1) * s.d + 1;
  if (span > s.h + 2 * s.p || span > s.w + 2 * s.p)
    throw_error("{}: window {} is larger than the padded input {}x{}", w.op, span, s.h + 2 * s.p,
                s.w + 2 * s.p);
  s.oh = (s.h + 2 * s.p - span) / s.s + 1;
  s.ow = (s.w + 2 * s.p - span) / s.s + 1;
  return s;
}

// Calls f(n, c, y, x, value at window offset (ky, kx) or nullopt in the padding) per window.
template <typename F>
void for_each_window(const WindowShape& s, const std::vector<double>& data, F f) {
  for (int64_t n = 0; n < s.n; ++n)
    for (int64_t c = 0; c < s.c; ++c)
      for (int64_t y = 0; y < s.oh; ++y)
        for (int64_t x = 0; x < s.ow; ++x)
          for (int64_t ky = 0; ky < s.k; ++ky)
            for (int64_t kx = 0; kx < s.k; ++kx) {
              int64_t iy = y * s.s + ky - s.p, ix = x * s.s + kx - s.p;
              bool inside = iy >= 0 && iy < s.h && ix >= 0 && ix < s.w;
              double v = inside ? data[((n * s.c + c) * s.h + iy) * s.w + ix] : 0.0;
              f(((n * s.c + c) * s.oh + y) * s.ow + x, c, ky, kx, inside, v);
            }
}

// depthwise_conv2d (NCHW) and depthwise_conv2d_nchwc (blocks of CB channels): NCHW is the blocked
// layout with blocks of one channel, so one reference serves both.
OpInstance build_depthwise_conv2d(const Workload& w, bool blocked) {
  WindowShape s = window_shape(w);
  int64_t cb = blocked ? w.get_or("CB", 16) : 1;
  if (cb <= 0 || s.c % cb != 0)
    throw_error("{}: CB={} (channel block) must divide C={}", w.op, cb, s.c);
  Tensor data = blocked ? placeholder({s.n, s.c / cb, s.h, s.w, cb}, DType::kFloat32, "data")
                        : placeholder({s.n, s.c, s.h, s.w}, DType::kFloat32, "data");
  Tensor weight = blocked ? placeholder({s.c / cb, s.k, s.k, cb}, DType::kFloat32, "weight")
                          : placeholder({s.c, s.k, s.k}, DType::kFloat32, "weight");
  EpilogueKeys e = blocked ? epilogue_keys(w) : EpilogueKeys{};
  std::vector<Tensor> args{data, weight};
  Tensor out = blocked
                   ? with_epilogue(e, depthwise_conv2d_nchwc(data, weight, s.s, s.p, "dwconv", s.d),
                                   s.c / cb, cb, args)
                   : depthwise_conv2d_nchw(data, weight, s.s, s.p, "dwconv");
  args.push_back(out);
  OpInstance op{args, lower(w.op, args), 2.0 * s.n * s.c * s.oh * s.ow * s.k * s.k, s.k * s.k,
                nullptr};
  op.reference = [s, cb, e](Arrays& x) {
    size_t out = x.size() - 1;
    for (int64_t n = 0; n < s.n; ++n)
      for (int64_t c = 0; c < s.c; ++c)
        for (int64_t y = 0; y < s.oh; ++y)
          for (int64_t xx = 0; xx < s.ow; ++xx) {
            double acc = 0;
            for (int64_t ky = 0; ky < s.k; ++ky)
              for (int64_t kx = 0; kx < s.k; ++kx) {
                int64_t iy = y * s.s + ky * s.d - s.p, ix = xx * s.s + kx * s.d - s.p;
                if (iy < 0 || iy >= s.h || ix < 0 || ix >= s.w) continue;
                acc += x[0][nchwc_index(n, c, iy, ix, s.c, s.h, s.w, cb)] *
                       x[1][((c / cb * s.k + ky) * s.k + kx) * cb + c % cb];
              }
            x[out][nchwc_index(n, c, y, xx, s.c, s.oh, s.ow, cb)] = acc;
          }
    reference_epilogue(e, x, out, cb, s.oh * s.ow, s.c);
  };
  return op;
}

OpInstance build_pool2d(const Workload& w, PoolKind kind) {
  WindowShape s = window_shape(w);
  if (s.p >= s.k) throw_error("{}: P={} must be smaller than K={}", w.op, s.p, s.k);
  Tensor data = placeholder({s.n, s.c, s.h, s.w}, DType::kFloat32, "data");
  Tensor out = pool2d_nchw(data, kind, s.k, s.s, s.p, "pool");
  OpInstance op{{data, out},
                lower(w.op, {data, out}),
                double(s.n * s.c * s.oh * s.ow * s.k * s.k),
                s.k * s.k,
                nullptr};
  op.reference = [s, kind](Arrays& x) {
    bool is_max = kind == PoolKind::kMax;
    std::fill(x[1].begin(), x[1].end(),
              is_max ? double(std::numeric_limits<float>::lowest()) : 0.0);
    for_each_window(s, x[0], [&](int64_t out, int64_t, int64_t, int64_t, bool inside, double v) {
      if (is_max) {
        if (inside) x[1][out] = std::max(x[1][out], v);
      } else {
        x[1][out] += v / double(s.k * s.k);
      }
    });
  };
  return op;
}

OpInstance build_dense(const Workload& w) {
  int64_t b = w.positive("B"), in = w.positive("I"), out = w.positive("O");
  int64_t wb = w.get_or("WB", 0);
  if (wb < 0) throw_error("dense: WB={} (pre-packed weight block) is negative", wb);
  // A last block of fewer than WB outputs is zero-padded: LSTM's 4 x 650 gates in AVX-512's 16.
  Tensor x = placeholder({b, in}, DType::kFloat32, "X");
  Tensor weight = placeholder(
      wb == 0 ? std::vector<int64_t>{out, in} : std::vector<int64_t>{(out + wb - 1) / wb, in, wb},
      DType::kFloat32, "W");
  const EpilogueKeys e = epilogue_keys(w);
  std::vector<Tensor> args{x, weight};
  std::optional<Tensor> bias, residual;
  if (e.bias) args.push_back(*(bias = placeholder({out}, DType::kFloat32, "bias")));
  if (e.residual) args.push_back(*(residual = placeholder({b, out}, DType::kFloat32, "residual")));
  Tensor y = dense(x, weight, "dense", out);
  if (e.any())
    y = dense_epilogue(y, bias ? &*bias : nullptr, residual ? &*residual : nullptr, e.act);
  args.push_back(y);
  OpInstance op{args, lower("dense", args), 2.0 * b * in * out, in, nullptr};
  const size_t result = args.size() - 1;
  op.reference = [=](Arrays& a) {
    for (int64_t i = 0; i < b; ++i)
      for (int64_t j = 0; j < out; ++j) {
        double acc = 0;
        for (int64_t k = 0; k < in; ++k) {
          int64_t wi = wb == 0 ? j * in + k : (j / wb * in + k) * wb + j % wb;
          acc += a[0][i * in + k] * a[1][wi];
        }
        size_t next = 2;
        if (e.bias) acc += a[next++][j];
        if (e.residual) acc += a[next][i * out + j];
        a[result][i * out + j] = activate(e.act, acc);
      }
  };
  return op;
}

OpInstance build_batch_matmul(const Workload& w) {
  int64_t bs = w.positive("B"), m = w.positive("M"), n = w.positive("N"), k = w.positive("K");
  Tensor a = placeholder({bs, m, k}, DType::kFloat32, "A");
  Tensor b = placeholder({bs, k, n}, DType::kFloat32, "B");
  Tensor c = batch_matmul(a, b, "C");
  OpInstance op{{a, b, c}, lower("batch_matmul", {a, b, c}), 2.0 * bs * m * n * k, k, nullptr};
  op.reference = [=](Arrays& x) {
    std::fill(x[2].begin(), x[2].end(), 0.0);
    for (int64_t q = 0; q < bs; ++q)
      for (int64_t i = 0; i < m; ++i)
        for (int64_t kk = 0; kk < k; ++kk)
          for (int64_t j = 0; j < n; ++j)
            x[2][(q * m + i) * n + j] += x[0][(q * m + i) * k + kk] * x[1][(q * k + kk) * n + j];
  };
  return op;
}

OpInstance build_bias_add(const Workload& w) {
  int64_t m = w.positive("M"), n = w.positive("N");
  Tensor a = placeholder({m, n}, DType::kFloat32, "A");
  Tensor b = placeholder({n}, DType::kFloat32, "b");
  Tensor c = add_broadcast_rows(a, b, "C");
  OpInstance op{{a, b, c}, lower("bias_add", {a, b, c}), double(m * n), 1, nullptr};
  op.reference = [=](Arrays& x) {
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) x[2][i * n + j] = x[0][i * n + j] + x[1][j];
  };
  return op;
}

OpInstance build_add(const Workload& w) {
  int64_t m = w.positive("M"), n = w.positive("N");
  Tensor a = placeholder({m, n}, DType::kFloat32, "A");
  Tensor b = placeholder({m, n}, DType::kFloat32, "B");
  Tensor c = add(a, b, "C");
  OpInstance op{{a, b, c}, lower("add", {a, b, c}), double(m * n), 1, nullptr};
  op.reference = [](Arrays& x) {
    for (size_t i = 0; i < x[2].size(); ++i) x[2][i] = x[0][i] + x[1][i];
  };
  return op;
}

OpInstance build_relu(const Workload& w) {
  int64_t m = w.positive("M"), n = w.positive("N");
  Tensor a = placeholder({m, n}, DType::kFloat32, "A");
  Tensor b = relu(a, "B");
  OpInstance op{{a, b}, lower("relu", {a, b}), double(m * n), 1, nullptr};
  op.reference = [](Arrays& x) {
    for (size_t i = 0; i < x[1].size(); ++i) x[1][i] = std::max(x[0][i], 0.0);
  };
  return op;
}

// separate=1 applies the te-level rewrite before lowering, so strategies schedule two passes.
OpInstance build_blur2d(const Workload& w) {
  int64_t h = w.positive("H"), wd = w.positive("W"), separate = w.get("separate");
  if (h < 3 || wd < 3) throw_error("blur2d: the image must be at least 3x3, got {}x{}", h, wd);
  if (separate != 0 && separate != 1) throw_error("blur2d: separate must be 0 or 1");
  Tensor in = placeholder({h, wd}, DType::kFloat32, "in");
  TensorProgram tp{"blur2d", {in, blur2d(in, binomial_weights(), "out")}};
  if (separate) {
    Weights1D v = binomial_weights_1d();
    RewriteResult<TensorProgram> r = separate_filter("out", v, v)(tp);
    if (!r) throw_error("{}", r.message());
    tp = r.program();
  }
  int64_t oh = h - 2, ow = wd - 2;
  OpInstance op{tp.args, lower(tp.name, tp.args), 17.0 * oh * ow, 9, nullptr};
  op.reference = [=](Arrays& x) {
    Weights3x3 k = binomial_weights();
    for (int64_t y = 0; y < oh; ++y)
      for (int64_t xx = 0; xx < ow; ++xx) {
        double acc = 0;
        for (int dy = 0; dy < 3; ++dy)
          for (int dx = 0; dx < 3; ++dx) acc += x[0][(y + dy) * wd + xx + dx] * k[dy][dx];
        x[1][y * ow + xx] = acc;
      }
  };
  return op;
}

}  // namespace

const std::vector<OpDef>& op_registry() {
  static const std::vector<OpDef> registry = {
      {"matmul", {"M", "N", "K"}, {}, "C[M,N] = A[M,K] x B[K,N], float32", build_matmul},
      {"conv2d",
       {"N", "C", "H", "W", "O", "K", "S", "P"},
       {{"D", 1}, {"G", 1}, {"WB", 0}, {"IM2COL", 0}},
       "NCHW convolution, O filters of KxK, stride S, zero padding P, dilation D, G groups, "
       "float32; WB>0: weights pre-packed as [O/WB][C/G][K][K][WB]; IM2COL=1: the im2col + "
       "matmul template instead of NCHWc",
       build_conv2d},
      {"conv2d_nchwc",
       {"N", "C", "H", "W", "O", "K", "S", "P"},
       {{"D", 1},
        {"G", 1},
        {"CB", 16},
        {"IB", 0},
        {"BIAS", 0},
        {"RES", 0},
        {"ACT", 0},
        {"KW", 0},
        {"PW", -1}},
       "conv2d with channels in blocks of CB (TVM's NCHWc, oneDNN's nChw16c): data "
       "[N][C/cb][H][W][cb] (cb = IB where given, else CB, or C where CB does not divide it), "
       "weights "
       "[O/CB][C/G/cb][K][KW][cb][CB] (G groups of whole blocks), out [N][O/CB][OH][OW][CB]; "
       "a rectangular window: KW its width and PW the padding of W where they differ from K and "
       "P; epilogue as it writes: BIAS=1 + "
       "bias[O], RES=1 + a residual like out, ACT=1 relu, ACT=2 relu6, ACT=3 hardswish, ACT=4 "
       "silu, ACT=5 gelu, ACT=6 tanh",
       build_conv2d_nchwc},
      {"conv2d_bias_relu",
       {"N", "C", "H", "W", "O", "K", "S", "P"},
       {{"D", 1}, {"G", 1}, {"WB", 0}},
       "conv2d, then + bias[O], then relu: one multi-stage program",
       build_conv2d_bias_relu},
      {"depthwise_conv2d",
       {"N", "C", "H", "W", "K", "S", "P"},
       {},
       "one KxK filter per channel (weights [C][K][K]), stride S, zero padding P, float32",
       [](const Workload& w) { return build_depthwise_conv2d(w, false); }},
      {"depthwise_conv2d_nchwc",
       {"N", "C", "H", "W", "K", "S", "P"},
       {{"CB", 16}, {"D", 1}, {"BIAS", 0}, {"RES", 0}, {"ACT", 0}},
       "depthwise_conv2d with channels in blocks of CB (TVM's NCHWc, oneDNN's nChw16c): data "
       "[N][C/CB][H][W][CB], weights [C/CB][K][K][CB], out [N][C/CB][OH][OW][CB]; dilation D; "
       "BIAS, RES, ACT as conv2d_nchwc's",
       [](const Workload& w) { return build_depthwise_conv2d(w, true); }},
      {"max_pool2d",
       {"N", "C", "H", "W", "K", "S", "P"},
       {},
       "max over KxK windows, stride S, padding P (never chosen), float32",
       [](const Workload& w) { return build_pool2d(w, PoolKind::kMax); }},
      {"avg_pool2d",
       {"N", "C", "H", "W", "K", "S", "P"},
       {},
       "mean over KxK windows, stride S, zero padding P counted in the mean, float32",
       [](const Workload& w) { return build_pool2d(w, PoolKind::kAvg); }},
      {"dense",
       {"B", "I", "O"},
       {{"WB", 0}, {"BIAS", 0}, {"RES", 0}, {"ACT", 0}},
       "Y[B,O] = X[B,I] x W[O,I]^T, weights stored [out][in] as in inference, float32; WB>0: "
       "weights pre-packed as [ceil(O/WB)][I][WB], the last block zero-padded; epilogue as it "
       "writes: BIAS=1 + bias[O], RES=1 + a residual like Y, ACT as conv2d_nchwc's",
       build_dense},
      {"batch_matmul",
       {"B", "M", "N", "K"},
       {},
       "C[B,M,N] = A[B,M,K] x B[B,K,N], float32",
       build_batch_matmul},
      {"softmax",
       {"M", "N"},
       {},
       "row-wise softmax of X[M,N] (max subtracted first), float32",
       build_softmax},
      {"attention",
       {"B", "M", "N", "D", "DV"},
       {{"BB", 0}},
       "out[B,M,DV] = softmax(Q[B,M,D] x Kt[B,D,N] + bias) x V[B,N,DV] (softmax along N, max "
       "subtracted first), float32: scores computed per tile of rows of out, never stored whole; "
       "BB>0: + bias[b mod BB][M][N]",
       build_attention},
      {"bias_add",
       {"M", "N"},
       {},
       "C[M,N] = A[M,N] + b[N] (broadcast over rows), float32",
       build_bias_add},
      {"add", {"M", "N"}, {}, "C = A + B elementwise, float32", build_add},
      {"relu", {"M", "N"}, {}, "B = max(A, 0) elementwise, float32", build_relu},
      {"blur2d",
       {"H", "W", "separate"},
       {},
       "3x3 binomial blur of in[H,W] into out[H-2,W-2], float32; separate=1: two 1-D passes",
       build_blur2d},
  };
  return registry;
}

}  // namespace tessera
