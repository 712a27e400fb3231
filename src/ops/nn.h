/// Operators written as index expressions with `te`.
#pragma once

#include <string>

#include "te/tensor.h"

namespace tessera {

/// C[i, j] = sum_k A[i, k] * B[k, j]
Tensor matmul(const Tensor& a, const Tensor& b, const std::string& name = "C");
/// Zero padding of H and W by `pad` on each side, of an NCHW or an NCHWc ([N][C/c][H][W][c])
/// tensor.
Tensor pad_nchw(const Tensor& data, int64_t pad, const std::string& name = "pad");
/// Padding of H and W of an NCHW or NCHWc tensor with `value`.
Tensor pad_nchw_with(const Tensor& data, int64_t pad, Expr value, const std::string& name = "pad");
/// The same with a pad of its own on each side of H and W.
Tensor pad_nchw_sides(const Tensor& data, int64_t top, int64_t left, int64_t bottom, int64_t right,
                      Expr value, const std::string& name = "pad");
/// conv[n, o, y, x] = sum_{rc, ry, rx} in[n, g*C/G + rc, y*S + ry*D, x*S + rx*D] *
/// w[o, rc, ry, rx] with g = o / (O/G): stride S, dilation D, G groups (weights [O][C/G][K][K]),
/// the input zero-padded by P (a separate `pad` stage when P > 0). 5-D weights are the same
/// weights pre-packed into blocks of b output channels, [O/b][C/G][K][K][b], read at
/// [o / b][rc][ry][rx][o % b].
Tensor conv2d_nchw(const Tensor& data, const Tensor& weight, int64_t stride, int64_t pad,
                   const std::string& name = "conv", int64_t dilation = 1, int64_t groups = 1);
/// The same convolution with channels in blocks, TVM's conv2d_NCHWc and oneDNN's nChw16c:
/// data [N][C/cb][H][W][cb], weights [O/ob][C/cb][K][K][cb][ob], out [N][O/ob][OH][OW][ob];
/// out[n, oc, y, x, ob] = sum_{ic, ry, rx, ib} in[n, ic, y*S + ry*D, x*S + rx*D, ib] *
/// w[oc, ic, ry, rx, ib, ob], the input zero-padded by P in H and W (a `pad` stage). With G
/// groups of whole blocks the weights are [O/ob][C/G/cb][K][K][cb][ob] and output block oc reads
/// the input blocks of its group: ic + (oc / (O/G/ob)) * (C/G/cb). The window may be
/// rectangular ([K][KW] weights), and `pad_w` pads W where it differs from `pad` (-1: the same).
Tensor conv2d_nchwc(const Tensor& data, const Tensor& weight, int64_t stride, int64_t pad,
                    const std::string& name = "conv", int64_t dilation = 1, int64_t groups = 1,
                    int64_t pad_w = -1);
/// out[n, c, y, x] = sum_{ry, rx} in[n, c, y*S + ry, x*S + rx] * w[c, ry, rx]: one KxK filter
/// per channel (weights [C][K][K]), input zero-padded by P.
Tensor depthwise_conv2d_nchw(const Tensor& data, const Tensor& weight, int64_t stride, int64_t pad,
                             const std::string& name = "dwconv");
/// The same with channels in blocks (TVM's depthwise_conv2d_NCHWc, oneDNN's nChw16c with
/// Goihw16g weights): data [N][C/cb][H][W][cb], weights [C/cb][K][K][cb], out
/// [N][C/cb][OH][OW][cb]; each channel of a block is a vector lane.
Tensor depthwise_conv2d_nchwc(const Tensor& data, const Tensor& weight, int64_t stride, int64_t pad,
                              const std::string& name = "dwconv", int64_t dilation = 1);
/// Max or average over KxK windows with stride S of an NCHW tensor padded by P (max pads with
/// the lowest float, average counts the padding, as PyTorch's default).
enum class PoolKind { kMax, kAvg };
Tensor pool2d_nchw(const Tensor& data, PoolKind kind, int64_t k, int64_t stride, int64_t pad,
                   const std::string& name = "pool");
/// dense[i, j] = sum_k x[i, k] * w[j, k]: a batch of rows times weights stored [out][in], as
/// inference frameworks keep them; 3-D weights [O/b][I][b] are the same pre-packed into blocks of
/// b outputs.
// With blocked weights the last block may be zero-padded: `out` (0: all rows) leaves it out.
Tensor dense(const Tensor& x, const Tensor& weight, const std::string& name = "dense",
             int64_t out = 0);
/// C[b, i, j] = sum_k A[b, i, k] * B[b, k, j]
Tensor batch_matmul(const Tensor& a, const Tensor& b, const std::string& name = "C");
/// C[i, j] = A[i, j] + b[j]: a row vector broadcast over the rows.
Tensor add_broadcast_rows(const Tensor& a, const Tensor& b, const std::string& name = "C");
/// Elementwise a + b of equal shapes.
Tensor add(const Tensor& a, const Tensor& b, const std::string& name = "C");
/// max(x, 0) elementwise.
Tensor relu(const Tensor& x, const std::string& name = "relu");
/// What a blocked convolution applies to its result as it writes it: + bias (one value per output
/// channel, [C/cb][cb], the same memory as [C]), + a residual of the output's shape, then an
/// activation. The graph layer fuses a model's BatchNormalization shift, skip connection and
/// Relu/Relu6, HardSwish, SiLU (x sigmoid x), GELU (x/2 (1 + erf(x/sqrt 2))) and Tanh here
/// (workload keys BIAS, RES, ACT).
enum class Activation {
  kNone = 0,
  kRelu = 1,
  kRelu6 = 2,
  kHardSwish = 3,
  kSilu = 4,
  kGelu = 5,
  kTanh = 6
};
/// erf(x) from exp, select and arithmetic, which the vector code computes on whole vectors (erff
/// is a libm call per lane); within 1.5e-7 of erf.
Expr erf_on_vectors(Expr x);
/// The activation's value at v (te), and its reference.
Expr activate(Activation act, Expr v);
double activate(Activation act, double v);
/// The epilogue stage over a [N][C/cb][H][W][cb] result (axes en, ec, ey, ex, eb, so that they
/// never shadow the producer's); `bias` and `residual` may be null.
Tensor blocked_epilogue(const Tensor& x, const Tensor* bias, const Tensor* residual, Activation act,
                        const std::string& name = "epilogue");
/// The same epilogue over a dense layer's [B][O] result (axes ei, ej): bias [O], a residual
/// [B][O].
Tensor dense_epilogue(const Tensor& x, const Tensor* bias, const Tensor* residual, Activation act,
                      const std::string& name = "epilogue");
/// x[n, o, y, x] + bias[o] for an NCHW x.
Tensor bias_add_nchw(const Tensor& x, const Tensor& bias, const std::string& name = "bias");

}  // namespace tessera
