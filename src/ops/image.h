/// Image-processing operators: the 3x3 blur of Elevate's binomial-filter example.
#pragma once

#include <array>
#include <string>

#include "te/tensor.h"

namespace tessera {

using Weights1D = std::array<double, 3>;
using Weights3x3 = std::array<Weights1D, 3>;

/// out[y, x] = sum over dy, dx in 0..2 of in[y + dy, x + dx] * w[dy][dx], for a 2-D image
/// in[H, W] and out[H - 2, W - 2]. The weights are literals of in's type in the body, written
/// out as nine terms `in[y + dy, x + dx]*w` added left to right (dy outer, dx inner), the form
/// separate_filter (ops/separate_filter.h) recognises. Axes `y`, `x`.
Tensor blur2d(const Tensor& in, const Weights3x3& w, const std::string& name = "out");

/// The binomial filter [1 2 1]^T x [1 2 1] / 16 and its factor [1 2 1] / 4 (exact in float32).
Weights3x3 binomial_weights();
Weights1D binomial_weights_1d();

}  // namespace tessera
