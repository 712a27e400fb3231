#include "ops/nn.h"

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
  if (data.ndim() != 4) throw_error("pad_nchw needs a 4-D NCHW tensor");
  if (pad < 0) throw_error("padding must not be negative, got {}", pad);
  const auto& s = data->shape;
  int64_t h = s[2], w = s[3];
  return compute({s[0], s[1], h + 2 * pad, w + 2 * pad},
                 [&](Var n, Var c, Var y, Var x) {
                   Expr inside = y >= Expr(int(pad)) && y < Expr(int(h + pad)) &&
                                 x >= Expr(int(pad)) && x < Expr(int(w + pad));
                   return select(inside, data(n, c, y - int(pad), x - int(pad)),
                                 make_int(0, data->dtype));
                 },
                 name, {"n", "c", "h", "w"});
}

Tensor conv2d_nchw(const Tensor& data, const Tensor& weight, int64_t stride, int64_t pad,
                   const std::string& name) {
  if (data.ndim() != 4 || weight.ndim() != 4)
    throw_error("conv2d needs 4-D NCHW data and OIHW weights");
  if (stride <= 0) throw_error("conv2d stride must be positive, got {}", stride);
  if (pad < 0) throw_error("conv2d padding must not be negative, got {}", pad);
  const auto& ds = data->shape;
  const auto& ws = weight->shape;
  if (ds[1] != ws[1])
    throw_error("conv2d: data has {} channels but weights expect {}", ds[1], ws[1]);
  int64_t kh = ws[2], kw = ws[3];
  int64_t ph = ds[2] + 2 * pad, pw = ds[3] + 2 * pad;
  if (kh > ph || kw > pw) {
    throw_error("conv2d: kernel {}x{} is larger than the padded input {}x{}", kh, kw, ph, pw);
  }
  int64_t oh = (ph - kh) / stride + 1, ow = (pw - kw) / stride + 1;
  Tensor in = pad > 0 ? pad_nchw(data, pad) : data;
  IterVar rc = reduce_axis(ds[1], "rc"), ry = reduce_axis(kh, "ry"), rx = reduce_axis(kw, "rx");
  int s = static_cast<int>(stride);
  return compute({ds[0], ws[0], oh, ow},
                 [&](Var n, Var o, Var y, Var x) {
                   return sum(in(n, rc.var, y * s + ry.var, x * s + rx.var) *
                                  weight(o, rc.var, ry.var, rx.var),
                              {rc, ry, rx});
                 },
                 name, {"n", "o", "y", "x"});
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

}  // namespace tessera
