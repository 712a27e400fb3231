/// `te` to `tir`: one plain loop nest per compute stage, producers first, with bounds inference.
#pragma once

#include <string>
#include <vector>

#include "te/tensor.h"
#include "tir/program.h"

namespace tessera {

/// Lowers the computation of the compute tensors in `args` from the placeholders in `args`.
/// Placeholders become inputs, computes in `args` outputs, other computes intermediate buffers.
/// A reduction stage becomes an init nest (loops named `<axis>.init`) and an update nest, so the
/// update is a perfect nest that loop rules can reorder freely. Loop names are the axis names,
/// qualified as `<stage>.<axis>` where two stages share an axis name. Each intermediate stage
/// loops only over the region its consumers read (bounds inference).
Program lower(const std::string& name, const std::vector<Tensor>& args);

}  // namespace tessera
