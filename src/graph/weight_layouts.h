/// The layouts the executor packs constant weights into once, at planning, so that kernels read
/// them as their vectors want (graph/planner.h's Planner).
#pragma once

#include <cstdint>
#include <vector>

#include "graph/graph.h"

namespace tessera::graph {

/// Weights [O][...] as [ceil(O/block)][...][block], the last block zero-padded: conv2d's OIHW
/// and dense's [O][I] with WB=block.
HostTensor packed_weights(const HostTensor& t, int64_t block);
/// OIHW weights as conv2d_nchwc's [O/block][C/ib][K][K][ib][block].
HostTensor blocked_conv_weights(const HostTensor& t, int64_t block, int64_t ib);
/// Depthwise [C][1][K][K] weights as depthwise_conv2d_nchwc's [C/block][K][K][block].
HostTensor blocked_depthwise_weights(const HostTensor& t, int64_t block);
/// [N][C][H][W] as [N][C/block][H][W][block].
std::vector<int64_t> blocked_shape(const std::vector<int64_t>& nchw, int64_t block);
/// Rows [first, first + count) of slice `d` (along the first dimension) of a 3-D constant, as
/// 2-D: one direction's gates of a recurrent layer's weights.
HostTensor constant_rows(const HostTensor& t, int64_t d, int64_t first, int64_t count);
/// A 2-D tensor transposed.
HostTensor transposed_2d(const HostTensor& t);

}  // namespace tessera::graph
