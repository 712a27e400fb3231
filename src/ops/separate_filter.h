/// Elevate's binomial-filter rewrite at the te level: a separable 3x3 stencil becomes a vertical
/// then a horizontal 1-D pass, given the separated weights.
#pragma once

#include <string>

#include "ops/image.h"
#include "strategy/tensor_program.h"

namespace tessera {

/// Rewrites the stage `stage` of the form (as blur2d writes it; terms in any order)
///
///   out[y, x] = sum over dy, dx in 0..2 of in[y + dy, x + dx] * c[dy][dx]
///
/// into two stages, given the separated weights v (vertical) and h (horizontal):
///
///   vert[vy, vx] = in[vy, vx]*v[0] + in[vy + 1, vx]*v[1] + in[vy + 2, vx]*v[2]
///   out[y, x]    = vert[y, x]*h[0] + vert[y, x + 1]*h[1] + vert[y, x + 2]*h[2]
///
/// where vert covers the rows of out and the columns out reads (its width + 2). Consumers of out
/// are rebuilt to read the new stage. The rule checks that c[dy][dx] == v[dy]*h[dx] for all nine
/// weights, up to float32 rounding: |v*h - c| <= 2^-23 |c|, so float32 literals of an exactly
/// separable filter pass and any real mismatch fails. It fails, naming itself, when there is no
/// such stage, the body is not a 3x3 weighted sum of one 2-D tensor (a term `in[..]` alone has
/// weight 1), a weight does not factor (naming the weight), or `vert_name` names a tensor already.
TensorStrategy separate_filter(const std::string& stage, const Weights1D& v, const Weights1D& h,
                               const std::string& vert_name = "vert");

}  // namespace tessera
