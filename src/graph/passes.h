/// Graph passes. Each rewrites the graph in place, keeps what it computes (up to float rounding),
/// and returns how many nodes it changed, for the log of `tessera run-model`.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "graph/graph.h"

namespace tessera::graph {

/// Nodes whose inputs are all constants (a Reshape's shape, a Transpose of weights) are evaluated
/// with the reference path and become constants.
int fold_constants(Graph& g);
/// A ReduceMean over the spatial axes of a 4-D value (global pooling as the dynamo exporter
/// writes it) becomes a GlobalAveragePool, followed by a Flatten where keepdims is 0.
int pool_reductions(Graph& g);
/// An Einsum of two operands that contracts letters both share (no diagonal, nothing summed
/// within one operand) becomes a MatMul over the shared output letters as batch, between
/// Transposes and Reshapes that group the letters. Returns how many.
int lower_einsum(Graph& g);
/// A ConvTranspose with constant weights becomes a stride-1 Conv, so it runs as every Conv does:
/// with a stride, one whose output channels are the phases of the output (which of the stride's
/// rows and columns), or one per output phase joined by a Concat where one Conv's grid would
/// overhang the output, interleaved by a tessera.PixelShuffle, with a batch norm after it folded in
/// and unary elementwise consumers moved before the shuffle (copied per phase); without one, a
/// tessera.ZeroInsert of the input (its padding) and a Conv with the weights flipped and their
/// channel axes swapped. Returns how many.
int lower_conv_transpose(Graph& g);
/// Convs with constant weights lose the leading and trailing kernel rows and columns whose taps
/// read only padding at every output position (a dilated 3x3 whose outer taps all fall outside a
/// small map becomes a 1x1); pads and dilations follow, the output shape stays. Returns how many.
int trim_padding_taps(Graph& g);
/// A BatchNormalization of `input` with constant weights and statistics as y = x * scale + shift
/// per channel (scale = gamma / sqrt(var + eps), shift = beta - mean * scale), or nothing.
struct BatchNormAffine {
  std::vector<double> scale, shift;
};
std::optional<BatchNormAffine> constant_batch_norm(const Graph& g, const Node& bn,
                                                   const std::string& input);
/// A BatchNormalization whose input is a Conv's output read by nothing else, with constant
/// weights and statistics, is folded into the Conv: w' = w * s, b' = (b - mean) * s + beta with
/// s = scale / sqrt(var + eps) per output channel. Any other BatchNormalization with constant
/// parameters becomes x * s + (beta - mean * s): a Mul and an Add of per-channel constants.
int fold_batch_norm(Graph& g);
/// Elementwise consumers of a Conv, Gemm or MatMul output read by nothing else (Relu, Clip with
/// constant bounds, HardSwish, Tanh, Add of a tensor that broadcasts to the output, such as a
/// residual or a bias), and SiLU as Mul(y, Sigmoid(y)), join the producer's epilogue list,
/// repeatedly, so the chain becomes one fused node.
int fuse_epilogues(Graph& g);
/// A Conv with constant weights, most of whose products read padding though no tap does at every
/// output position (a dilation near the map's size: DeepLab-v3's 3x3 at dilation 12 on 14x14),
/// becomes one Conv per pair of row and column bands in which the same taps are live, each over
/// the input it reads, joined by Concats; its epilogue goes to every piece (per-channel adds and
/// activations only: no residual). Returns how many.
int split_by_live_taps(Graph& g);
/// Chains of data movement that pick channels of a 4-D value, N, H and W kept (a channel
/// shuffle's Reshape, Transpose and Reshape; a Slice or Split along the channels of a Concat or of
/// such a pick), become tessera.GatherChannels, which then read through the Concats and gathers
/// before them (up to 12 inputs); what that leaves unread is removed. Returns how many gathers
/// were made or changed.
int gather_channels(Graph& g);
/// Chains of data movement (Transpose, Slice, Gather of constant indices, views) and Muls by a
/// scalar constant that copy more than once, and whose every output element is one input element
/// at an affine offset, become one tessera.StridedCopy (a transformer's query, key and value from
/// their joint projection: a split, heads, the key's transpose and the scale, one copy each).
/// Returns how many.
int fold_copies(Graph& g);
/// Scores (heads x queries x keys) from which attention runs fused: 4 MiB of float32, more than
/// two cores' L2 holds between the three unfused kernels. Untuned, interleaved (Xeon, Emerald
/// Rapids, 2 threads), fusing Whisper-tiny's 6 x 1500 x 1500 (54 MB) took its encoder 8% less
/// time, where models with 0.8-1.9 MB of scores (BERT, ViT, DistilBERT, T5 at 128-197 tokens)
/// ran 0-1% slower and GPT-2's and Swin-T's 2-3% slower.
inline constexpr int64_t kFusedAttentionScores = int64_t{1} << 20;
/// MatMul(Q, Kt), a Softmax along its last axis and MatMul(P, V), each read only by the next,
/// become one tessera.Attention node (the same leading dimensions on all three operands), where
/// the scores of all heads hold `min_scores` elements or more. Between the product and the
/// Softmax: a Mul or Div by a scalar constant (which then scales Q), then the Add of a bias
/// [..., M, N] (a node, or the product's fused epilogue) whose leading dimensions are 1 up to a
/// suffix of the scores'; the second product's epilogue stays on the result. Returns how many.
int fuse_attention(Graph& g, int64_t min_scores = kFusedAttentionScores);
/// Values whose channel count is not a multiple of `lanes` (above 8) get zero channels up to the
/// next multiple, so that the graph runs in one vector-wide channel block. Values that must pad
/// together form classes: a depthwise (or channel-preserving grouped) Conv, an activation, an
/// Add/Sub/Mul of same-shape or per-channel operands link their inputs and output, a Conv its
/// output and residuals. Producers get zero output channels (weights, bias, per-channel adds;
/// grouped Convs zero filters in groups of their own), group-1 readers zero input channels, and a
/// Slice after each GlobalAveragePool crops its result; a tessera.GatherChannels reads padded
/// inputs as they are and writes padded outputs (its extra channels copy a real one). A class some
/// other node makes or reads is padded across bridges (20 channels between two Concats): a Pad
/// after what else makes it, a Slice before what else reads it. Groups of fewer channels than a
/// vector merge into groups of one vector (zero filters across the merged groups). Tried to the
/// lanes without and with such bridges, then the unaligned classes to 8, each kept only where
/// channel_block then says that block. Then, with any `lanes`: a Conv of more than 8 output
/// channels in no whole vectors, read by no Conv, with 64 positions or more, computes the next
/// multiple and a Slice after it keeps the real channels (the DCGAN generator's 12 phase
/// channels). The graph's outputs are unchanged. Returns how many nodes changed and were added.
int pad_channels(Graph& g, int64_t lanes);
/// Nodes none of whose outputs reach a graph output, and constants nothing reads, are removed.
int eliminate_dead_nodes(Graph& g);

/// The attribute choose_layouts sets on a node that runs in channel blocks (the block size): its
/// output is [N][C/b][H][W][b] (a GlobalAveragePool: its input; its result is the same memory
/// either way).
inline constexpr const char* kBlockAttr = "tessera.block";
/// The block choose_layouts should use: the ISA's `lanes`, or 8 where the Convs that blocks of 8
/// would run but blocks of `lanes` would not do more than 5% of the Convs' work.
int64_t channel_block(const Graph& g, int64_t lanes);
/// Layout choice: Convs with constant weights and bias (group 1 with O and C multiples of `block`
/// or C below it, or depthwise) and whose epilogue their kernel runs (per-channel constant adds,
/// one residual, then one Relu, Relu6, HardSwish, SiLU, GELU or Tanh) produce blocked values;
/// MaxPool, Relu, Clip, Add, Mul and every elementwise row of the operator table of a blocked input
/// whose other operands are blocked-shaped, per-channel constants or (one image) per-channel values
/// stay blocked, and so does a Concat along the channels of blocked values and a DepthToSpace or
/// PixelShuffle in DCR order; GlobalAveragePool reads blocks. The executor converts where a blocked
/// value meets a node that reads NCHW, once per value. Returns how many nodes run blocked.
int choose_layouts(Graph& g, int64_t block);

/// The attribute fold_channel_scales sets on the Mul of a Conv's constant weights (input 0) by a
/// scale per input channel (input 1).
inline constexpr const char* kScaledWeightsAttr = "tessera.scaled_weights";
/// That Mul, where it computes `value`; nullptr otherwise.
const Node* scaled_weights(const Graph& g, const std::string& value);
/// After choose_layouts: where a blocked group-1 Conv's input is `x * s` with `s` a computed
/// scale per channel of one image (squeeze-excite), read by nothing else, the Conv reads `x` and
/// its weights become `W * s` along their input channels, when O*KH*KW < H*W: scaling the
/// weights then touches fewer values than scaling the input. Returns how many Convs changed.
int fold_channel_scales(Graph& g);

/// The attribute choose_conv_algorithms sets on a Conv that runs as Winograd F(4x4, 3x3).
inline constexpr const char* kWinogradAttr = "tessera.winograd";
/// Fewest output tiles for which Winograd pays on this machine's ISA: below, reading the
/// transformed weights (4x the direct ones, from memory in a model) costs more than the multiplies
/// it saves: 16, measured with AVX2 and AVX-512 (choose_conv_algorithms.cpp).
int64_t winograd_min_tiles();
/// A blocked 3x3 stride-1 Conv with constant weights, pads of 1, no groups or dilation, input
/// channels in whole blocks and at least winograd_min_tiles() 4x4 output tiles; at least 32 input
/// channels (AVX-512) or 64 and tiles at least three quarters covered by the output (AVX2).
bool winograd_applies(const Graph& g, const Node& n);
/// Algorithm choice after choose_layouts: every Conv winograd_applies to runs as Winograd
/// F(4x4, 3x3) (2.25 multiplies per output for the direct kernel's 9). Returns how many.
int choose_conv_algorithms(Graph& g);

struct PassLog {
  std::string pass;
  int changed = 0;
};
struct PassOptions {
  /// Channel blocks between convolutions (choose_layouts with channel_block of the target ISA's
  /// lanes); false leaves every value NCHW, the layout the model came in.
  bool blocked_layout = true;
  /// Winograd for the blocked 3x3 convolutions it applies to (choose_conv_algorithms); false
  /// keeps every convolution direct.
  bool winograd = true;
};
/// fold_constants, pool_reductions, lower_conv_transpose, trim_padding_taps, fold_batch_norm,
/// fuse_epilogues, split_by_live_taps, gather_channels, fold_copies, fuse_attention,
/// pad_channels (to the ISA's lanes, when the layout is blocked), eliminate_dead_nodes,
/// choose_layouts, fold_channel_scales, choose_conv_algorithms, in that order (the last three only
/// with a blocked layout).
std::vector<PassLog> run_default_passes(Graph& g, const PassOptions& options = {});

}  // namespace tessera::graph
