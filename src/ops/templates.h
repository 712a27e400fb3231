/// Tunable CPU templates: for each operator, a search space whose configurations instantiate to
/// strategies of the `schedule` library.
#pragma once

#include "ops/workload.h"
#include "space/config_space.h"

namespace tessera {

/// matmul: register tile (i.inner rows x j.inner.outer vectors of j.inner.inner lanes), k split and
/// unroll, outer loop order, optional array packing of B, write cache of the C block, parallel.
ConfigSpace matmul_space(int64_t m, int64_t n, int64_t k);
/// conv2d (NCHW): tiles over output channels and width (vectorized), input-channel split, loop
/// order, what happens to the padding stage (root, inlined, computed at the row), write cache,
/// parallel output-channel blocks.
ConfigSpace conv2d_space(const Workload& w);

/// The space of a workload's operator; throws tessera::Error when the op has none yet.
ConfigSpace space_for(const Workload& w);

}  // namespace tessera
