/// te computes for what a model needs and the operator library does not have: elementwise chains
/// with numpy broadcasting (fused epilogues, Mul, Clip, a lone BatchNormalization), Transpose,
/// Concat and GlobalAveragePool. They lower and compile like every tessera kernel.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "graph/op_attrs.h"
#include "te/tensor.h"
#include "tir/program.h"

namespace tessera::graph {

/// A kernel built from te: its arguments (inputs, then the one output) and its lowered program
/// with the graph layer's fixed schedule applied (parallel outer loop).
struct TeKernel {
  std::string name;
  std::vector<Tensor> args;
  Program program;
};

/// Below this many elements of work a graph kernel runs on one thread: waking the others costs
/// more than they save.
constexpr int64_t kParallelElements = 1 << 15;

/// Lowers a te kernel and applies `first` (a strategy that must apply); then, with
/// `auto_parallel`, threads over its first dimension with more than one iteration where the
/// work is large enough to pay for them: the output's elements, or `reduced_elements` (what a
/// reduction reads) where that is more.
TeKernel finish_kernel(std::string name, std::vector<Tensor> args, const std::string& first = "",
                       bool auto_parallel = true, int64_t reduced_elements = 0);

/// One step of an elementwise chain; the chain starts from input 0.
struct ElementwiseStep {
  enum class Kind { kAdd, kMul, kRelu, kClip, kScalar };
  Kind kind = Kind::kRelu;
  int input = -1;  // kAdd, kMul: which input (broadcast to the output shape)
  double lo = 0, hi = 0;
  /// kScalar: an operator table row's function of the value so far and `inputs` (graph/op_table.h)
  std::function<Expr(const std::vector<Expr>&)> scalar;
  std::vector<int> inputs;
};

/// out = steps applied to inputs[0]; every input broadcasts (numpy rules) to `out_shape`.
TeKernel elementwise_kernel(const std::vector<int64_t>& out_shape,
                            const std::vector<std::vector<int64_t>>& inputs,
                            const std::vector<ElementwiseStep>& steps);
/// out[i_perm[0], ...] = in[...]: ONNX Transpose (out dimension d is in dimension perm[d]).
TeKernel transpose_kernel(const std::vector<int64_t>& in_shape, const std::vector<int64_t>& perm);
/// The inputs joined along `axis`.
TeKernel concat_kernel(const std::vector<std::vector<int64_t>>& inputs, int64_t axis);
/// out[n, c, 0, 0] = mean over H x W of in[n, c]; a 5-D input is channel-blocked
/// [N][C/b][H][W][b] and the result [N][C/b][1][1][b], the same memory as [N][C][1][1].
TeKernel global_avg_pool_kernel(const std::vector<int64_t>& in_shape);
/// NCHW [N][C][H][W] into channel blocks [N][C/b][H][W][b] (b divides C), and back.
TeKernel to_blocked_kernel(const std::vector<int64_t>& nchw, int64_t block);
TeKernel from_blocked_kernel(const std::vector<int64_t>& nchw, int64_t block);
/// tessera.GatherChannels: output channel k is channel `channels[k]` of input `sources[k]`. The
/// inputs share N, H and W; with `block` 0 they are NCHW [N][C][H][W], else channel-blocked
/// [N][C/b][H][W][b] with the output's channel count a multiple of the block.
TeKernel gather_channels_kernel(const std::vector<std::vector<int64_t>>& inputs,
                                const std::vector<int64_t>& sources,
                                const std::vector<int64_t>& channels, int64_t block);
/// Max or average pooling (KxK window, stride S, pads top, left, bottom, right; the mean counts
/// the pads) of a channel-blocked [N][C/b][H][W][b] tensor, the block's channels as the vector.
TeKernel pool_blocked_kernel(const std::vector<int64_t>& in_shape, int64_t k, int64_t stride,
                             const std::array<int64_t, 4>& pads, bool is_max);
/// Every `stride`-th row and column of a channel-blocked [N][C/b][H][W][b] tensor:
/// [N][C/b][(H-1)/stride+1][(W-1)/stride+1][b], the block's channels as the vector.
TeKernel subsample_blocked_kernel(const std::vector<int64_t>& in_shape, int64_t stride);
/// DepthToSpace in DCR order on channel blocks: [N][C/b][H][W][b] -> [N][C/(bh bw b)][oh][ow][b],
/// each output block of pixel (y, x) one input block of the pixel's phase (whole vectors, as the
/// channels of one phase are consecutive).
TeKernel depth_to_space_blocked_kernel(const std::vector<int64_t>& in_shape, const DepthToSpace& d);
/// A channel-blocked [N][C/b][H][W][b] tensor with zero rows above (top) and below (bottom) and
/// zero columns left and right of it, the block's channels as the vector.
TeKernel pad_blocked_kernel(const std::vector<int64_t>& in_shape, int64_t top, int64_t left,
                            int64_t bottom, int64_t right);

}  // namespace tessera::graph
