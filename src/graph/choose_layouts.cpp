// Layout choice: which values live in channel blocks (NCHWc) between the nodes that produce and
// read them. The executor converts at the edges only, where a blocked value meets a node that
// reads NCHW (or the reverse), once per value.
#include <algorithm>
#include <cmath>

#include "graph/op_attrs.h"
#include "graph/op_table.h"
#include "graph/passes.h"
#include "te/error.h"

namespace tessera::graph {

namespace {

// EfficientNet-B0's squeeze-excite convolutions (0%) kept it at blocks of 8 under the old rule
// "every convolution fits": 8.7 ms, at 16 7.1; MobileNet-v3-small's (23%) runs 1.44 ms at 8, 1.66
// at 16; SqueezeNet's 1000-class convolution (25%) 4.05 at 8, 3.80 at 16 (Xeon AVX-512, 2
// threads). On Zen 5 (AVX-512, interleaved): 8 is faster for MobileNet-v3-small (23%, 1.26x),
// MnasNet (20%, 1.09x) and ShuffleNet-v2 (28%, 1.05x), about even for LR-ASPP (18%) and
// RegNet-Y-400MF (46%), and 16 for DeepLab-v3's MobileNet-v3 (6%, 1.32x), whose 960-channel atrous
// convolutions are most of its work.
constexpr double kNarrowShare = 0.10;

// The conv kernel's own epilogue (ops/nn.h blocked_epilogue): constant per-channel adds (folded
// into the bias) and full-shape residuals before at most one activation (Relu, Clip(0, 6),
// HardSwish, SiLU, GELU, Tanh), and nothing after.
bool kernel_epilogue(const Graph& g, const Node& n, int64_t channels) {
  const std::vector<int64_t>& out = g.shape(n.outputs[0]);
  int residuals = 0;
  bool activated = false;
  for (const Epilogue& e : n.epilogue) {
    if (activated) return false;
    if (e.kind == Epilogue::Kind::kAdd) {
      const std::string& v = n.inputs[e.input];
      if (g.is_constant(v) && is_per_channel(g.shape(v), channels)) continue;
      if (g.shape(v) != out || ++residuals > 1) return false;
      continue;
    }
    activated = true;
    if (e.kind == Epilogue::Kind::kClip && !(e.lo == 0 && (e.hi == 6 || std::isinf(e.hi))))
      return false;
  }
  return true;
}

bool blockable_conv(const Graph& g, const Node& n, int64_t block) {
  if (n.inputs.size() < 2 || !g.is_constant(n.inputs[1])) return false;
  if (n.inputs.size() > 2 && !n.inputs[2].empty() && !g.is_constant(n.inputs[2])) return false;
  Window2d w;
  try {
    w = read_window(n, g.shape(n.inputs[0]), &g.shape(n.inputs[1]));
  } catch (const Error&) {
    return false;
  }
  // Pads may differ by side: the planner pads the blocked input first (the phases of a strided
  // ConvTranspose, lower_conv_transpose.cpp).
  if (w.sh != w.sw || w.dh != w.dw || w.overhang || w.n != 1) return false;
  bool depthwise = w.group > 1 && w.group == w.c && w.out_channels == w.c;
  // The blocked convolution takes a rectangular window (Inception's 1x7 and 7x1); the blocked
  // depthwise one a square one.
  if (w.kh != w.kw && depthwise) return false;
  if (depthwise) {
    if (w.c % block != 0) return false;
  } else if (w.group > 1) {
    // Groups of whole blocks (RegNet's 8 channels a group, in blocks of 8).
    if ((w.c / w.group) % block != 0 || (w.out_channels / w.group) % block != 0) return false;
  } else if (w.out_channels % block != 0 || (w.c % block != 0 && w.c > block)) {
    return false;
  }
  return kernel_epilogue(g, n, w.out_channels);
}

}  // namespace

int64_t channel_block(const Graph& g, int64_t lanes) {
  // One block for the whole graph, so that blocked values never need reblocking: the ISA's lanes
  // unless convolutions that only blocks of 8 take (MobileNet-v2's 24 channels, where padding
  // does not reach) do a share of the work that narrower vectors everywhere cost less than
  // leaving them unblocked. Squeeze-excite's 1 x 1 convolutions weigh nothing.
  if (lanes <= 8) return lanes;
  double all = 0, only_narrow = 0;
  for (const Node& n : g.nodes) {
    if (n.op != "Conv" || n.inputs.size() < 2 || !g.is_constant(n.inputs[1])) continue;
    const std::vector<int64_t>& w = g.shape(n.inputs[1]);
    if (w.size() != 4) continue;
    const double flops = 2.0 * num_elements(g.shape(n.outputs[0])) * w[1] * w[2] * w[3];
    all += flops;
    if (blockable_conv(g, n, 8) && !blockable_conv(g, n, lanes)) only_narrow += flops;
  }
  return only_narrow > kNarrowShare * all ? 8 : lanes;
}

int choose_layouts(Graph& g, int64_t block) {
  if (block <= 1) return 0;
  int changed = 0;
  std::map<std::string, bool> blocked;  // value -> produced in channel blocks
  auto mark = [&](Node& n) {
    n.attrs[kBlockAttr] = block;
    blocked[n.outputs[0]] = true;
    ++changed;
  };
  for (Node& n : g.nodes) {
    n.attrs.erase(kBlockAttr);
    const std::vector<int64_t>& out = g.shape(n.outputs[0]);
    if (n.op == "Conv") {
      if (blockable_conv(g, n, block)) mark(n);
      continue;
    }
    // The rest only stays blocked where its input already is: converting for them would cost more
    // than they run. An elementwise node's blocked input may come second: squeeze-excite's
    // `scale * x` in torchvision's EfficientNet, whose NCHW scale (a 1x1 convolution to channels
    // in no whole blocks) had the product and its 14x14 input converted out and back (0.6 of
    // 14 ms, AMD EPYC, AVX2).
    const OpDef* row = find_op(n.op);
    bool elementwise = n.op == "Relu" || n.op == "Add" || n.op == "Clip" || n.op == "Mul" ||
                       (row && row->lowering == Lowering::kElementwise);
    bool reads_blocked = !n.inputs.empty() && blocked.count(n.inputs[0]);
    if (elementwise && n.op != "Clip")
      for (const std::string& v : n.inputs)
        reads_blocked = reads_blocked || (blocked.count(v) && g.shape(v) == out);
    if (n.op == kGatherChannels) {
      // Picks channels out of blocks into blocks where every input is blocked.
      bool all_blocked = out.size() == 4 && out[1] % block == 0;
      for (const std::string& v : n.inputs)
        all_blocked = all_blocked && blocked.count(v) && g.shape(v)[1] % block == 0;
      if (all_blocked) mark(n);
      continue;
    }
    if (!reads_blocked) continue;
    if (out.size() != 4 || out[1] % block != 0) continue;
    if (n.op == "MaxPool" || n.op == "AveragePool") {
      // The blocked mean counts the pads (DenseNet's transitions have none).
      try {
        Window2d w = read_window(n, g.shape(n.inputs[0]), nullptr);
        // A max takes pads of its own on each side and ceil_mode's overhang (GoogLeNet's pools),
        // as long as every window reads the input.
        const std::array<int64_t, 4> pads = w.read_pads();
        const bool max_window = n.op == "MaxPool" && w.kh == w.kw && w.sh == w.sw && w.dh == 1 &&
                                w.dw == 1 && *std::max_element(pads.begin(), pads.end()) < w.kh;
        if (max_window || (w.is_square_symmetric() && w.dh == 1 && w.pt < w.kh &&
                           (w.pt == 0 || w.count_include_pad)))
          mark(n);
      } catch (const Error&) {
      }
      continue;
    }
    if (n.op == "Concat") {
      // Along the channels, of blocked values whose channels fill whole blocks: the blocks are
      // joined as they are, with no conversion to NCHW and back (DenseNet joins at every layer).
      bool joins_blocks = normalize_axis(n, n.attr_int("axis", 0), 4) == 1;
      for (const std::string& v : n.inputs)
        joins_blocks = joins_blocks && blocked.count(v) && g.shape(v).size() == 4 &&
                       g.shape(v)[1] % block == 0;
      if (joins_blocks) mark(n);
      continue;
    }
    if (n.op == "DepthToSpace" || n.op == "tessera.PixelShuffle") {
      // In DCR order a phase's channels are consecutive, so whole blocks move (the phases of a
      // strided ConvTranspose, lower_conv_transpose.cpp); CRD interleaves inside the blocks.
      try {
        if (read_depth_to_space(n, g.shape(n.inputs[0])).dcr) mark(n);
      } catch (const Error&) {
      }
      continue;
    }
    if (n.op == "GlobalAveragePool") {
      // Reads blocks; its [N][C][1][1] result is the same memory in either layout.
      n.attrs[kBlockAttr] = block;
      ++changed;
      continue;
    }
    if (!elementwise) continue;
    bool operands_fit = true;
    size_t operands = n.op == "Clip" ? 1 : n.inputs.size();
    for (size_t i = 0; i < operands; ++i) {
      const std::string& v = n.inputs[i];
      if (v.empty() || g.shape(v) == out) continue;
      // Per-channel operands: constants, or (one image) a computed [1][C][1][1] such as a
      // squeeze-excite scale, whose memory is the same in either layout.
      bool per_channel = is_per_channel(g.shape(v), out[1]) && (g.is_constant(v) || out[0] == 1);
      operands_fit =
          operands_fit && (per_channel || (g.is_constant(v) && num_elements(g.shape(v)) == 1));
    }
    if (n.op == "Clip") {
      try {
        clip_bounds(n, g);
      } catch (const Error&) {
        operands_fit = false;
      }
    }
    if (operands_fit) mark(n);
  }
  return changed;
}

}  // namespace tessera::graph
