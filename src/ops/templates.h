/// Tunable CPU templates: for each operator, a search space whose configurations instantiate to
/// strategies of the `schedule` library.
#pragma once

#include <string>

#include "ops/workload.h"
#include "space/config_space.h"

namespace tessera {

/// matmul: register tile (i.inner rows x j.inner.outer vectors of j.inner.inner lanes), k split and
/// unroll, outer loop order, optional array packing of B, write cache of the C block, parallel.
ConfigSpace matmul_space(int64_t m, int64_t n, int64_t k);
/// conv2d (NCHW in and out), TVM's conv2d_NCHWc on the plain program: output channels are the
/// vector lanes of a register tile of output columns x channel vectors, weights packed into
/// [O/oc][C][K][K][oc], the output block accumulated in a transposed [x][o] write cache;
/// input-channel split, loop order, padding at the root or per row, kw unroll, parallel.
ConfigSpace conv2d_space(const Workload& w);
/// dense (weights [O][I], packed into [O/bn][I][bn] inside the kernel) and batch_matmul: the
/// matmul space over their loops.
ConfigSpace dense_space(const Workload& w);
ConfigSpace batch_matmul_space(const Workload& w);
/// depthwise_conv2d (stage `dwconv`) and max/avg_pool2d (stage `pool`): vectors along the output
/// row, channels and rows unrolled into a register tile, the window unrolled, padding at the root
/// or per channel block, write cache, parallel channel blocks.
ConfigSpace window_space(const Workload& w, const std::string& stage);
/// add, relu, bias_add: vectors along the row, parallel rows.
ConfigSpace elementwise_space(const Workload& w);

/// A configuration of `space` (the space_for(w)) for a kernel nobody has tuned: register tiles,
/// unrolling and write caches that tuning keeps choosing, in the target ISA's registers, rather
/// than every knob's first value; outer loops parallel for `threads` > 1 (the count shapes which
/// loop gets them), serial for 1.
Config default_config(const ConfigSpace& space, const Workload& w, int threads);

/// Columns of a register tile that split a row no candidate divides into near-equal tiles, at
/// least two and at most `widest` columns each (17 as 9 + 8 rather than 8 + 8 + 1).
int64_t balanced_columns(int64_t row, int64_t widest);

/// The threads an untuned kernel runs on: one below 1 MFLOP and a quarter of a MiB of operands,
/// since waking the others costs more than they save (a few microseconds each, far more when a core
/// is busy elsewhere); `threads` otherwise. The operands count for a kernel that streams more than
/// it computes, as a batch-1 dense layer (the MLP's 784 x 512 layer reads 1.6 MB for 0.8 MFLOP).
/// SiLU, GELU and Tanh (ACT 4-6) add 40 FLOPs per output element. The threshold was 2 MFLOP,
/// under which depthwise layers of 0.9-1.0 MFLOP ran on one thread where two are faster
/// (MobileNet-v3's 28x28x96 5x5 stride 2, 19 -> 15 us; EfficientNet-B0's 7x7x1152 3x3, 15 -> 9 us;
/// AMD EPYC, AVX2).
int default_threads(const Workload& w, const OpInstance& op, int threads);

/// The space of a workload's operator; throws tessera::Error when the op has none yet.
ConfigSpace space_for(const Workload& w);

}  // namespace tessera
