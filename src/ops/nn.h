/// Operators written as index expressions with `te`.
#pragma once

#include <string>

#include "te/tensor.h"

namespace tessera {

/// C[i, j] = sum_k A[i, k] * B[k, j]
Tensor matmul(const Tensor& a, const Tensor& b, const std::string& name = "C");
/// Zero padding of the two innermost dimensions of an NCHW tensor by `pad` on each side.
Tensor pad_nchw(const Tensor& data, int64_t pad, const std::string& name = "pad");
/// conv[n, o, y, x] = sum_{rc, ry, rx} in[n, rc, y*S + ry, x*S + rx] * w[o, rc, ry, rx], with the
/// input zero-padded by P (a separate `pad` stage when P > 0).
Tensor conv2d_nchw(const Tensor& data, const Tensor& weight, int64_t stride, int64_t pad,
                   const std::string& name = "conv");
/// Elementwise a + b of equal shapes.
Tensor add(const Tensor& a, const Tensor& b, const std::string& name = "C");
/// max(x, 0) elementwise.
Tensor relu(const Tensor& x, const std::string& name = "relu");
/// x[n, o, y, x] + bias[o] for an NCHW x.
Tensor bias_add_nchw(const Tensor& x, const Tensor& bias, const std::string& name = "bias");

}  // namespace tessera
