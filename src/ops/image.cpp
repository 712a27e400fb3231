#include "ops/image.h"

#include "te/error.h"

namespace tessera {

Tensor blur2d(const Tensor& in, const Weights3x3& w, const std::string& name) {
  if (in.ndim() != 2) throw_error("blur2d needs a 2-D image");
  if (in->shape[0] < 3 || in->shape[1] < 3) {
    throw_error("blur2d needs an image of at least 3x3, got {}x{}", in->shape[0], in->shape[1]);
  }
  return compute({in->shape[0] - 2, in->shape[1] - 2},
                 [&](Var y, Var x) {
                   Expr acc;
                   for (int dy = 0; dy < 3; ++dy) {
                     for (int dx = 0; dx < 3; ++dx) {
                       // `y` rather than `y + 0`: the form a person would write.
                       Expr iy = dy == 0 ? Expr(y) : y + dy, ix = dx == 0 ? Expr(x) : x + dx;
                       Expr term = in(iy, ix) * make_float(w[dy][dx], in->dtype);
                       acc = acc.defined() ? acc + term : term;
                     }
                   }
                   return acc;
                 },
                 name, {"y", "x"});
}

Weights3x3 binomial_weights() {
  Weights1D v = binomial_weights_1d();
  Weights3x3 w;
  for (int dy = 0; dy < 3; ++dy)
    for (int dx = 0; dx < 3; ++dx) w[dy][dx] = v[dy] * v[dx];
  return w;
}

Weights1D binomial_weights_1d() {
  return {0.25, 0.5, 0.25};
}

}  // namespace tessera
