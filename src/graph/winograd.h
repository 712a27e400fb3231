/// Winograd's minimal filtering F(4x4, 3x3) (Lavin and Gray, "Fast Algorithms for Convolutional
/// Neural Networks") for a 3x3 stride-1 convolution over channel-blocked values: each 4x4 output
/// tile is A^T [(G g G^T) . (B^T d B)] A of its 6x6 input tile d, so the 36 products of a tile
/// become 36 independent matrix products over channels, 2.25 multiplies per output where the
/// direct convolution makes 9. The graph runs it as three kernels: the input transform (which
/// pads each tile's window as it reads it), the batched product (the library's tuned
/// `batch_matmul`), and the output transform with the convolution's epilogue.
#pragma once

#include <cstdint>
#include <vector>

#include "graph/graph.h"
#include "graph/kernels.h"
#include "ops/nn.h"

namespace tessera::graph {

inline constexpr int64_t kWinogradTile = 4;   // outputs per tile side (m)
inline constexpr int64_t kWinogradAlpha = 6;  // inputs per tile side (m + 3 - 1)

/// The product's rows (tiles) are padded to a multiple of this, the rows of the default register
/// tile: a partial row tile runs bounds tests on every multiply-add.
inline constexpr int64_t kWinogradRowMultiple = 6;

/// The tiles covering an h x w output: (tiles along H, tiles along W).
std::pair<int64_t, int64_t> winograd_tiles(int64_t h, int64_t w);
/// The product's rows for `tiles` tiles (the extra rows are zeros).
int64_t winograd_rows(int64_t tiles);
/// Whether the output's H or W is not a multiple of 4: its transform writes whole tiles into
/// winograd_padded_output and the crop kernel applies the epilogue.
bool winograd_output_is_padded(const std::vector<int64_t>& blocked_out);
std::vector<int64_t> winograd_padded_output(const std::vector<int64_t>& blocked_out);

/// OIHW 3x3 weights transformed once, G g G^T per (output, input) channel pair, laid out as the
/// product's right operand [36][C][O].
HostTensor winograd_weights(const HostTensor& oihw);

/// V[e][n][p][c] = (B^T d_p B)[e][n] for every tile p and input channel c: the product's left
/// operand [36][winograd_rows(P)][C] from the blocked input [1][C/b][H][W][b], each tile's 6x6
/// window padded with the convolution's zeros as it is read.
TeKernel winograd_input_kernel(const std::vector<int64_t>& blocked_in);
/// Y = A^T M_p A per tile from the products M [36][winograd_rows(P)][O], written as the blocked
/// output [1][O/b][H][W][b] through the epilogue (+ bias [O/b][b], + a residual of the output's
/// shape, then the activation); where winograd_output_is_padded, Y alone into the padded output.
TeKernel winograd_output_kernel(const std::vector<int64_t>& blocked_out, bool bias, bool residual,
                                Activation act);
/// The padded output cropped to [1][O/b][H][W][b] through the epilogue.
TeKernel winograd_crop_kernel(const std::vector<int64_t>& blocked_out, bool bias, bool residual,
                              Activation act);

}  // namespace tessera::graph
