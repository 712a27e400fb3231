/// The attributes of windowed and axis operators read once, with ONNX's defaults, for shape
/// inference, the reference path and the executor alike.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <utility>
#include <vector>

#include "graph/graph.h"

namespace tessera::graph {

/// A 2-D window over NCHW: Conv, MaxPool, AveragePool.
struct Window2d {
  int64_t n = 0, c = 0, h = 0, w = 0;  // input
  int64_t kh = 1, kw = 1, sh = 1, sw = 1, dh = 1, dw = 1;
  int64_t pt = 0, pl = 0, pb = 0, pr = 0;  // pads: top, left, bottom, right
  int64_t oh = 0, ow = 0;
  int64_t group = 1, out_channels = 0;  // Conv only
  bool count_include_pad = false;       // AveragePool only
  bool overhang = false;  // ceil_mode added an output row or column past the floor rule's

  /// One K for both dimensions, one stride, one dilation and one pad on every side: the form
  /// tessera's conv2d and pooling operators take.
  bool is_square_symmetric() const {
    return kh == kw && sh == sw && dh == dw && pt == pl && pt == pb && pt == pr && !overhang;
  }
  /// The padding the output's windows read on each side (top, left, bottom, right): at the
  /// bottom and right more than the pads where ceil_mode's last window overhangs, less where the
  /// floor rule leaves padding unread.
  std::array<int64_t, 4> read_pads() const {
    return {pt, pl, std::max<int64_t>(0, (oh - 1) * sh + (kh - 1) * dh + 1 - h - pt),
            std::max<int64_t>(0, (ow - 1) * sw + (kw - 1) * dw + 1 - w - pl)};
  }
};

/// Reads the window of a Conv (weights [O][C/group][kh][kw] give the kernel) or a pooling node
/// over `input` (NCHW), ceil_mode included; throws tessera::Error for auto_pad other than
/// NOTSET/VALID,
/// a non-4-D input, or a window larger than the padded input.
Window2d read_window(const Node& n, const std::vector<int64_t>& input,
                     const std::vector<int64_t>* weight);

/// A possibly negative axis of a rank-`rank` tensor as an index; throws when out of range.
int64_t normalize_axis(const Node& n, int64_t axis, int64_t rank);

/// Transpose's permutation (default: reversed dimensions), validated.
std::vector<int64_t> transpose_perm(const Node& n, int64_t rank);

/// Gemm's attributes.
struct GemmAttrs {
  bool trans_a = false, trans_b = false;
  double alpha = 1, beta = 1;
  int64_t m = 0, k = 0, n = 0;
};
GemmAttrs read_gemm(const Node& n, const std::vector<int64_t>& a, const std::vector<int64_t>& b);

/// Clip's bounds: attributes min/max before opset 11, constant inputs 1 and 2 after (absent:
/// unbounded); throws when a bound is not a constant.
std::pair<double, double> clip_bounds(const Node& n, const Graph& g);

/// A per-channel operand of an NCHW value with `channels` channels: [C][1][1] or [1][C][1][1]
/// (what broadcasts along every dimension but the channels').
bool is_per_channel(const std::vector<int64_t>& shape, int64_t channels);

/// DepthToSpace, or tessera.PixelShuffle (lower_conv_transpose): output pixel (y, x) of channel o
/// reads channel `block * C + o` (DCR) or `o * bh * bw + block` (CRD) at pixel
/// ((y + top) / bh, (x + left) / bw) of the input, where block = (y + top) % bh * bw +
/// (x + left) % bw and C is the output's channels. Throws on a malformed node.
struct DepthToSpace {
  int64_t bh = 1, bw = 1, top = 0, left = 0, oh = 0, ow = 0;
  bool dcr = false;
};
DepthToSpace read_depth_to_space(const Node& n, const std::vector<int64_t>& input);

/// tessera.GatherChannels (gather_channels.cpp): output channel k is channel `channels[k]` of input
/// `sources[k]`; the inputs are 4-D and share N, H and W. Read and checked (throws on a malformed
/// node).
inline constexpr const char* kGatherChannels = "tessera.GatherChannels";
struct ChannelGather {
  std::vector<int64_t> sources, channels;
};
ChannelGather read_channel_gather(const Node& n, const Graph& g);

/// tessera.StridedCopy (data_movement.cpp): output element (i0, i1, ...) of shape `shape` is
/// `scale` times element offset + i0 * strides[0] + i1 * strides[1] + ... of the input's memory.
inline constexpr const char* kStridedCopy = "tessera.StridedCopy";
struct StridedCopy {
  std::vector<int64_t> shape, strides;
  int64_t offset = 0;
  double scale = 1.0;
};
StridedCopy read_strided_copy(const Node& n, const Graph& g);

/// tessera.Attention (fuse_attention.cpp): softmax(Q Kt + bias) V along the last axis, over
/// inputs Q [..., M, D], Kt [..., D, N] and V [..., N, DV] of the same leading dimensions and an
/// optional bias [..., M, N] broadcast over the leading ones (input 3 where attribute
/// `tessera.bias` is 1); the inputs after them are its epilogue's.
inline constexpr const char* kAttention = "tessera.Attention";

/// Reshape's output shape from its constant shape input (0 copies a dimension, -1 is inferred);
/// throws when the shape input is not constant or does not fit the element count.
std::vector<int64_t> reshape_target(const Node& n, const Graph& g);

}  // namespace tessera::graph
