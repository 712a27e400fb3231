#include "graph/winograd.h"

#include <array>
#include <optional>

#include "te/error.h"

namespace tessera::graph {

namespace {

// F(4x4, 3x3) on the points 0, 1, -1, 2, -2 and infinity (Lavin and Gray's matrices).
constexpr std::array<std::array<double, 6>, 6> kBt{{
    {4, 0, -5, 0, 1, 0},
    {0, -4, -4, 1, 1, 0},
    {0, 4, -4, -1, 1, 0},
    {0, -2, -1, 2, 1, 0},
    {0, 2, -1, -2, 1, 0},
    {0, 4, 0, -5, 0, 1},
}};
constexpr std::array<std::array<double, 3>, 6> kG{{
    {1.0 / 4, 0, 0},
    {-1.0 / 6, -1.0 / 6, -1.0 / 6},
    {-1.0 / 6, 1.0 / 6, -1.0 / 6},
    {1.0 / 24, 1.0 / 12, 1.0 / 6},
    {1.0 / 24, -1.0 / 12, 1.0 / 6},
    {0, 0, 1},
}};
constexpr std::array<std::array<double, 6>, 4> kAt{{
    {1, 1, 1, 1, 1, 0},
    {0, 1, -1, 2, -2, 0},
    {0, 1, 1, 4, 4, 0},
    {0, 1, -1, 8, -8, 1},
}};

// sum_k coef[k] * term(k) over the nonzero coefficients, with +-1 as additions: the transforms
// are mostly zeros and ones, and the C compiler sees exactly the arithmetic that is needed.
template <size_t N, typename Term>
Expr combination(const std::array<double, N>& coef, Term term) {
  Expr acc;
  bool first = true;
  for (size_t k = 0; k < N; ++k) {
    double c = coef[k];
    if (c == 0) continue;
    Expr t = term(static_cast<int>(k));
    if (first) {
      acc = c == 1 ? t : make_float(c, DType::kFloat32) * t;
      first = false;
    } else if (c == 1) {
      acc = acc + t;
    } else if (c == -1) {
      acc = acc - t;
    } else {
      acc = acc + make_float(c, DType::kFloat32) * t;
    }
  }
  return acc;
}

// select(at == 0, leaf(0), select(at == 1, leaf(1), ...)): one expression per value of an axis
// the schedule unrolls, so that the C compiler folds the conditions away.
template <typename Leaf>
Expr by_value(const Expr& at, int count, Leaf leaf) {
  Expr v = leaf(count - 1);
  for (int i = count - 1; i-- > 0;) v = select(eq(at, Expr(i)), leaf(i), v);
  return v;
}

}  // namespace

std::pair<int64_t, int64_t> winograd_tiles(int64_t h, int64_t w) {
  return {(h + kWinogradTile - 1) / kWinogradTile, (w + kWinogradTile - 1) / kWinogradTile};
}

HostTensor winograd_weights(const HostTensor& oihw) {
  if (oihw.shape.size() != 4 || oihw.shape[2] != 3 || oihw.shape[3] != 3)
    throw_internal("winograd_weights needs [O][C][3][3] weights");
  const int64_t o = oihw.shape[0], c = oihw.shape[1];
  HostTensor u{{kWinogradAlpha * kWinogradAlpha, c, o},
               std::vector<double>(static_cast<size_t>(36 * c * o)),
               false};
  for (int64_t oc = 0; oc < o; ++oc) {
    for (int64_t ic = 0; ic < c; ++ic) {
      const double* g = &oihw.data[static_cast<size_t>((oc * c + ic) * 9)];
      double gg[6][3];  // G g
      for (int e = 0; e < 6; ++e)
        for (int b = 0; b < 3; ++b)
          gg[e][b] = kG[e][0] * g[0 * 3 + b] + kG[e][1] * g[1 * 3 + b] + kG[e][2] * g[2 * 3 + b];
      for (int e = 0; e < 6; ++e)
        for (int n = 0; n < 6; ++n)
          u.data[static_cast<size_t>(((e * 6 + n) * c + ic) * o + oc)] =
              gg[e][0] * kG[n][0] + gg[e][1] * kG[n][1] + gg[e][2] * kG[n][2];
    }
  }
  return u;
}

int64_t winograd_rows(int64_t tiles) {
  return (tiles + kWinogradRowMultiple - 1) / kWinogradRowMultiple * kWinogradRowMultiple;
}

TeKernel winograd_input_kernel(const std::vector<int64_t>& in_shape) {
  auto [th, tw] = winograd_tiles(in_shape[2], in_shape[3]);
  const int tiles = static_cast<int>(th * tw);
  const int64_t cb = in_shape[1], b = in_shape[4];
  const int h = static_cast<int>(in_shape[2]), w = static_cast<int>(in_shape[3]);
  const int64_t rows = winograd_rows(th * tw);
  Tensor in = placeholder(in_shape, DType::kFloat32, "in");
  const int tiles_w = static_cast<int>(tw), m = static_cast<int>(kWinogradTile);
  // d[r][s] of a tile: the input with the convolution's one pixel of zeros on top and left and as
  // many as the last tiles need at the bottom and right, read in place (the condition is the same
  // for every lane, so it costs a branch per vector, not a padded copy).
  auto window = [&](const Expr& c, const Expr& tile, const Expr& y, const Expr& x,
                    const Expr& lane) {
    Expr iy = (tile / tiles_w) * m + y - 1, ix = (tile % tiles_w) * m + x - 1;
    Expr inside = iy >= Expr(0) && iy < Expr(h) && ix >= Expr(0) && ix < Expr(w);
    return select(inside, in(0, c, iy, ix, lane), make_float(0.0, DType::kFloat32));
  };
  // B^T d B in two passes of six-point transforms, (d B)[r][u] first and then B^T of its
  // columns: 2 x 36 short combinations per tile where the expanded form makes 36 long ones.
  Tensor across = compute({kWinogradAlpha, kWinogradAlpha, rows, cb, b},
                          [&](const std::vector<Var>& at) {
                            return by_value(at[1], 6, [&](int u) {
                              return combination(kBt[u], [&](int s) {
                                return window(at[3], at[2], at[0], Expr(s), at[4]);
                              });
                            });
                          },
                          "across", {"a0", "a1", "a2", "a3", "a4"});
  Tensor out = compute(
      {kWinogradAlpha, kWinogradAlpha, rows, cb, b},
      [&](const std::vector<Var>& at) {
        Expr transformed = by_value(at[0], 6, [&](int e) {
          return combination(kBt[e], [&](int r) { return across(r, at[1], at[2], at[3], at[4]); });
        });
        // The rows past the last tile are zeros.
        if (rows == tiles) return transformed;
        return select(at[2] < Expr(tiles), transformed, make_float(0.0, DType::kFloat32));
      },
      "out", {"i0", "i1", "i2", "i3", "i4"});
  // Threads over tiles; per tile and channel block both passes unrolled over one vector, their
  // 36 intermediate vectors in registers or L1.
  return finish_kernel("winograd_input", {in, out},
                       "reorder(i2, i3, i0, i1, i4) ; unroll(i0) ; unroll(i1) ; vectorize(i4) ; "
                       "compute_at(across, i3) ; unroll(a0) ; unroll(a1) ; vectorize(a4) ; "
                       "parallel(i2)",
                       false);
}

bool winograd_output_is_padded(const std::vector<int64_t>& out_shape) {
  return out_shape[2] % kWinogradTile != 0 || out_shape[3] % kWinogradTile != 0;
}

std::vector<int64_t> winograd_padded_output(const std::vector<int64_t>& out_shape) {
  auto [th, tw] = winograd_tiles(out_shape[2], out_shape[3]);
  return {out_shape[0], out_shape[1], th * kWinogradTile, tw * kWinogradTile, out_shape[4]};
}

namespace {

// The bias and residual placeholders of a blocked [1][O/b][H][W][b] result, as
// ops::blocked_epilogue reads them.
struct EpilogueOperands {
  std::optional<Tensor> bias, residual;
  EpilogueOperands(const std::vector<int64_t>& out_shape, bool has_bias, bool has_residual) {
    if (has_bias) bias = placeholder({out_shape[1], out_shape[4]}, DType::kFloat32, "bias");
    if (has_residual) residual = placeholder(out_shape, DType::kFloat32, "residual");
  }
  // `first`, then the operands, then `out`: the kernel's arguments in the executor's order.
  std::vector<Tensor> args(Tensor first, Tensor out) const {
    std::vector<Tensor> a{std::move(first)};
    if (bias) a.push_back(*bias);
    if (residual) a.push_back(*residual);
    a.push_back(std::move(out));
    return a;
  }
  Tensor epilogue(const Tensor& x, Activation act) const {
    return blocked_epilogue(x, bias ? &*bias : nullptr, residual ? &*residual : nullptr, act,
                            "out");
  }
};

}  // namespace

TeKernel winograd_output_kernel(const std::vector<int64_t>& out_shape, bool has_bias,
                                bool has_residual, Activation act) {
  auto [th, tw] = winograd_tiles(out_shape[2], out_shape[3]);
  const int64_t ob = out_shape[1], b = out_shape[4];
  Tensor products = placeholder({kWinogradAlpha, kWinogradAlpha, winograd_rows(th * tw), ob, b},
                                DType::kFloat32, "products");
  // Whole tiles only: a partial last tile's bounds tests inside the unrolled pixels cost 3x the
  // kernel (ResNet-18's 14x14 layers); such an output is written padded and cropped by the
  // epilogue kernel.
  const bool padded = winograd_output_is_padded(out_shape);
  if (padded && (has_bias || has_residual || act != Activation::kNone))
    throw_internal("a padded Winograd output takes its epilogue in winograd_crop_kernel");
  const int tiles_w = static_cast<int>(tw), m = static_cast<int>(kWinogradTile);
  // A^T M A in two passes, (A^T M)[i][n] first, as the input transform.
  Tensor down = compute({kWinogradTile, kWinogradAlpha, winograd_rows(th * tw), ob, b},
                        [&](const std::vector<Var>& at) {
                          return by_value(at[0], m, [&](int i) {
                            return combination(kAt[i], [&](int e) {
                              return products(e, at[1], at[2], at[3], at[4]);
                            });
                          });
                        },
                        "down", {"d0", "d1", "d2", "d3", "d4"});
  Tensor transform = compute(
      padded ? winograd_padded_output(out_shape) : out_shape,
      [&](const std::vector<Var>& at) {
        Expr tile = (at[2] / m) * tiles_w + at[3] / m;
        return by_value(at[3] % m, m, [&](int j) {
          return combination(kAt[j], [&](int n) { return down(at[2] % m, n, tile, at[1], at[4]); });
        });
      },
      "transform",
      padded ? std::vector<std::string>{"en", "ec", "ey", "ex", "eb"}
             : std::vector<std::string>{"i0", "i1", "i2", "i3", "i4"});
  // One output tile at a time, its 16 pixels unrolled so that the selects fold; the channel
  // blocks of a tile one after the other, so that each of the 36 planes of products is read as
  // one sequential stream; threads over tiles. The loops are the epilogue's
  // (ops::blocked_epilogue names them en..eb) once the transform is inlined into it, and the
  // transform's own where it is written alone.
  const std::string tiles =
      "split(ey, 4) ; split(ex, 4) ; reorder(en, ey.outer, ex.outer, ec, ey.inner, ex.inner, eb) "
      "; unroll(ey.inner) ; unroll(ex.inner) ; vectorize(eb) ; fuse(en, ey.outer) ; "
      "fuse(en.ey.outer.fused, ex.outer) ; parallel(en.ey.outer.fused.ex.outer.fused) ; "
      "compute_at(down, ec) ; unroll(d0) ; unroll(d1) ; vectorize(d4)";
  if (padded) return finish_kernel("winograd_output", {products, transform}, tiles, false);
  EpilogueOperands operands(out_shape, has_bias, has_residual);
  return finish_kernel("winograd_output",
                       operands.args(products, operands.epilogue(transform, act)),
                       "compute_inline(transform) ; " + tiles, false);
}

TeKernel winograd_crop_kernel(const std::vector<int64_t>& out_shape, bool has_bias,
                              bool has_residual, Activation act) {
  Tensor padded = placeholder(winograd_padded_output(out_shape), DType::kFloat32, "padded");
  Tensor crop =
      compute(out_shape,
              [&](const std::vector<Var>& at) { return padded(at[0], at[1], at[2], at[3], at[4]); },
              "crop", {"i0", "i1", "i2", "i3", "i4"});
  EpilogueOperands operands(out_shape, has_bias, has_residual);
  return finish_kernel(
      "winograd_crop", operands.args(padded, operands.epilogue(crop, act)),
      "compute_inline(crop) ; vectorize(eb) ; fuse(en, ec) ; parallel(en.ec.fused)", false);
}

}  // namespace tessera::graph
