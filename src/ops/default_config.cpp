// Configurations for kernels nobody has tuned yet. The knobs' first values are each template's
// plainest choice (a one-column register tile, no unrolling, no write cache): a fine start for a
// search, a slow kernel to run. These pick register tiles of several accumulators sized to the
// ISA's registers, unrolled windows, write caches and parallel outer loops instead; bench/models.py
// measures what they are worth against the first values.
#include <fmt/format.h>

#include <algorithm>

#include "ops/nn.h"
#include "ops/templates.h"
#include "runtime/isa.h"

namespace tessera {

namespace {

// Sets knobs of one space (or of one alternative of a choice of spaces, by its prefix) by name;
// a knob the space does not have, or a value it does not offer, is left as it is, so that a
// template that changes shape keeps a valid configuration.
class Chooser {
 public:
  Chooser(const ConfigSpace& space, Config& config) : space_(space), config_(config) {}

  void set_prefix(std::string prefix) { prefix_ = std::move(prefix); }
  bool has(const std::string& knob) const { return index(knob) >= 0; }
  /// A choice knob's option by label.
  void label(const std::string& knob, const std::string& option) {
    int k = index(knob);
    if (k < 0) return;
    const Knob& kn = space_.knobs()[static_cast<size_t>(k)];
    for (size_t v = 0; v < kn.labels.size(); ++v)
      if (kn.labels[v] == option) config_.choice[static_cast<size_t>(k)] = static_cast<int>(v);
  }
  /// The first of `wanted` (inner factors of a split, or an int knob's value) that the knob
  /// offers and that `ok` accepts.
  void value(const std::string& knob, const std::vector<std::vector<int64_t>>& wanted,
             const std::function<bool(const std::vector<int64_t>&)>& ok = nullptr) {
    int k = index(knob);
    if (k < 0) return;
    const Knob& kn = space_.knobs()[static_cast<size_t>(k)];
    for (const std::vector<int64_t>& w : wanted) {
      for (size_t v = 0; v < kn.values.size(); ++v) {
        const std::vector<int64_t>& have = kn.values[v];
        // Split values carry the outer factor first; int knobs are the value alone.
        bool match = have.size() == w.size() + 1 ? std::equal(w.begin(), w.end(), have.begin() + 1)
                                                 : have == w;
        if (match && (!ok || ok(have))) {
          config_.choice[static_cast<size_t>(k)] = static_cast<int>(v);
          return;
        }
      }
    }
  }

 private:
  int index(const std::string& knob) const {
    const std::vector<Knob>& knobs = space_.knobs();
    for (size_t k = 0; k < knobs.size(); ++k)
      if (knobs[k].name == prefix_ + knob) return static_cast<int>(k);
    return -1;
  }
  const ConfigSpace& space_;
  Config& config_;
  std::string prefix_;
};

// The exact split of `extent` with the largest inner factor up to `most`.
std::vector<std::vector<int64_t>> exact_inner(int64_t extent, int64_t most) {
  std::vector<std::vector<int64_t>> out;
  for (int64_t f = std::min(extent, most); f >= 1; --f)
    if (extent % f == 0) out.push_back({f});
  return out;
}

// The first of `preferred` that divides `extent`, then the rest of them (a guard is cheaper than
// a one-column tile).
std::vector<std::vector<int64_t>> dividing_first(int64_t extent,
                                                 const std::vector<int64_t>& preferred) {
  std::vector<std::vector<int64_t>> out;
  for (int64_t f : preferred)
    if (extent % f == 0) out.push_back({f});
  for (int64_t f : preferred)
    if (extent % f != 0) out.push_back({f});
  return out;
}

// SiLU, GELU and Tanh evaluate an exp per element (SiLU about 19 cycles a vector on AVX2): their
// write-back weighs on register tiles and thread counts as a ReLU's does not.
bool exp_activation(const Workload& w) {
  const auto act = static_cast<Activation>(w.get_or("ACT", 0));
  return act == Activation::kSilu || act == Activation::kGelu || act == Activation::kTanh;
}

int64_t out_extent(const Workload& w, const std::string& key) {
  int64_t k = w.get("K"), d = w.get_or("D", 1), p = w.get("P"), s = w.get("S");
  if (key == "W") {
    k = w.kernel_width();
    p = w.width_padding();
  }
  return (w.get(key) + 2 * p - (k - 1) * d - 1) / s + 1;
}

void gemm_defaults(Chooser& c, int64_t m, int64_t n, int threads) {
  const Isa& isa = target_isa();
  const int64_t lanes = isa.f32_lanes;
  // Tiles of 8-12 accumulators: enough FMAs in flight to hide their latency on both ISAs; with
  // AVX-512's 32 registers 24, so that each vector of B loaded feeds six FMAs and each broadcast
  // of A four.
  std::vector<std::vector<int64_t>> tiles{{6, 2, lanes}, {4, 2, lanes}, {4, 1, lanes},
                                          {2, 2, lanes}, {1, 2, lanes}, {2, 1, lanes},
                                          {1, 1, lanes}};
  if (isa.vector_registers >= 32) tiles.insert(tiles.begin(), {6, 4, lanes});
  c.value("tile", tiles,
          [&](const std::vector<int64_t>& t) { return t[0] <= m && t[1] * t[2] <= n; });
  c.value("tile_k", {{8}, {4}, {2}});
  c.label("cache", "write_cache");
  // The k steps of a tile unrolled: BERT's 128 x 768 x 3072 dense 205-292 GFLOP/s without, 322-328
  // with (peak 424; Xeon AVX-512, 2 threads), the whole encoder 93 -> 83 ms.
  c.label("unroll_k", "on");
  // Column blocks outermost where B is the larger operand (a dense's weights over a short batch):
  // each panel of B is read once while the rows of A stay in L2, instead of all of B once per
  // tile of rows.
  if (n > m) c.label("order", "j_first");
  if (threads > 1) c.label("parallel", "outer");
}

void conv2d_defaults(Chooser& c, const Workload& w, int threads) {
  const Isa& isa = target_isa();
  int64_t o = w.get("O"), ow = out_extent(w, "W");
  // Two vectors of the ISA's lanes where the channels allow, so that each input value loaded
  // feeds two FMAs; then as many columns as the registers hold besides the broadcast value (the
  // FMAs read the weights from memory): 7 x 2 accumulators with AVX2's 16 registers.
  int64_t lanes = isa.f32_lanes;
  if (o % lanes != 0) lanes = o % 8 == 0 ? 8 : 4;
  // Pre-packed weights fix the vector to one block.
  if (w.get_or("WB", 0) > 0) lanes = w.get("WB");
  int64_t vectors = o % (2 * lanes) == 0 ? 2 : 1;
  c.value("tile_oc", {{vectors, lanes}, {1, lanes}});
  int64_t per_column = vectors * std::max<int64_t>(1, lanes / isa.f32_lanes);
  int64_t columns = (isa.vector_registers - 2) / per_column;
  c.value("tile_ow", dividing_first(ow, {8, 7, 14, 4, 2}),
          [&](const std::vector<int64_t>& t) { return t[1] <= columns; });
  c.value("tile_ic", exact_inner(w.get("C"), 16));
  c.label("unroll_kw", "on");
  if (c.has("epilogue")) {
    // The epilogue per finished block, while it is in L1 (measured 1.7x faster than a separate
    // pass on ResNet's 56x56 layer); it cannot run inside a fused parallel loop, so the threads
    // take channel blocks where there are enough of them and rows otherwise.
    c.label("epilogue", "at_block");
    if (threads > 1) {
      if (o / (vectors * lanes) < 2 * threads) c.label("order", "row_first");
      c.label("parallel", "outer");
    }
  } else if (threads > 1) {
    // Grouped convolutions offer no fused loop.
    c.label("parallel", "outer");
    c.label("parallel", "fused");
  }
}

// Columns of a register tile: the largest that divides the row when it is within one of what
// the registers hold, else as many as they hold with a shorter last tile (56 columns on AVX2: 6
// with a tail of 2 ran 59 GFLOP/s on one Zen 3 core, 4 without one 41, 7 spilling 50).
int64_t register_columns(int64_t row, int64_t most) {
  for (int64_t f = most; f >= 2; --f)
    if (row % f == 0 && (f >= most - 1 || row <= 2 * most)) return f;
  if (row > 2 * most) return most;
  return row <= most + 1 ? row : most;
}

void blocked_conv_defaults(Chooser& c, const Workload& w, int threads) {
  const Isa& isa = target_isa();
  int64_t cb = w.get_or("CB", 16);
  int64_t registers_per_block = std::max<int64_t>(1, cb / isa.f32_lanes);
  // An image's few channels (one input block of C < CB) leave a short reduction per window tap,
  // so each input value loaded feeds several blocks, and the tile holds half the registers in
  // accumulators: on AVX2 4 x 2 ran 84 GFLOP/s on ResNet's 7x7 first layer (1 x 8: 64, 2 x 6: 35)
  // and 64 on the DQN's first (1 x 8 with a tail: 30), Zen 3, 2 threads; on AVX-512 4 x 4 ran
  // 360 there (4 x 2: 300, 4 x 7 spilling: 170) and 2 x 8 on MobileNet-v2's 3x3 first layer 173
  // (1 x 8: 141), Xeon, 2 threads. That tile's window loop stays rolled (unrolled, the 7x7
  // layer's 4 x 4 ran 320); AVX2's 4 x 2 keeps it unrolled (rolled: 1.16 -> 1.28 ms under
  // TESSERA_ISA=avx2 on the Xeon).
  bool few_channels = w.get("C") % cb != 0;
  int64_t out_blocks = w.get("O") / cb;
  int64_t blocks = out_blocks % 2 == 0 ? 2 : 1;
  // An odd count of 9 blocks or more still takes two at a time on AVX2, the last tile half
  // empty: 2 x 7 against 1 x 14 ran 147 against 120 GFLOP/s (9 blocks, 56 wide), 154 against
  // 127 (15, 28 wide), 176 against 117 as 1 x 8 (SqueezeNet's 125-block classifier, 13 wide), and
  // 155 against 158 (25, 14 wide; AMD EPYC, 2 threads).
  const bool few_registers = isa.vector_registers < 32;
  if (few_registers && !few_channels && out_blocks % 2 == 1 && out_blocks >= 9) blocks = 2;
  if (few_channels) blocks = out_blocks % 4 == 0 ? 4 : blocks;
  c.value("tile_oc", {{blocks}, {1}});
  // Each column holds `blocks` accumulators; the weights of the blocks and one broadcast input
  // value take the rest, up to 8 columns (but see below).
  int64_t per_column = blocks * registers_per_block;
  int64_t most = std::clamp<int64_t>((isa.vector_registers - per_column - 1) / per_column, 1, 8);
  if (few_channels) most = std::max<int64_t>(1, isa.vector_registers / 2 / per_column);
  int64_t columns = register_columns(out_extent(w, "W"), most);
  // A 1x1 window has no window loop to unroll beside the tile, so one column more than the
  // registers hold with the weights in them fits where it splits the row evenly: ResNet-50's
  // 14-wide 1x1 layers ran 130 GFLOP/s as 2 x 7 against 115 as 6 + 6 + 2 (C=1024, O=256;
  // AVX2, 2 threads), while its 28-wide ones ran 161 as 6 with a tail against 122 as 7 and its
  // 14-wide 3x3 ones 138 against 105.
  const int64_t row = out_extent(w, "W");
  const bool pointwise = w.get("K") == 1 && w.kernel_width() == 1;
  if (pointwise && !few_channels && row % (most + 1) == 0 && row <= 2 * (most + 1))
    columns = most + 1;
  // A row that no tile splits evenly: on AVX2 two blocks take 7 columns where the last tile is
  // one short, rather than 6 with a ragged tail: SqueezeNet's 13-wide 3x3 layer (6 + 6 + 1) 136
  // -> 166 GFLOP/s as 7 + 6, its 27-wide one 129 -> 146 (AMD EPYC, 2 threads); an even split
  // stays (its 55-wide layers as 11 x 5: 143, as 7s: 137).
  if (few_registers && !few_channels && blocks == 2 && row % columns != 0 &&
      row % (most + 1) == most)
    columns = most + 1;
  // Wider still where the registers hold it and an even width splits the row: ResNet-50's
  // 14-, 28- and 56-wide layers as 14 x 2 accumulators took the network from 32.4 to 30.6 ms
  // and ResNet-18 from 11.7 to 11.2 (Xeon AVX-512, 2 threads). Odd widths were slower (SqueezeNet's
  // 13-wide layers as 13 columns: 2.7 -> 7.1 ms), so 8 stays the first choice there.
  const int64_t widest =
      std::min<int64_t>((isa.vector_registers - per_column - 1) / per_column, 14);
  for (int64_t f = widest; f > most && !few_channels; --f)
    if (row % f == 0 && f % 2 == 0) {
      columns = f;
      break;
    }
  // A row that still has a short last tile splits into near-equal ones on AVX-512: Inception's
  // 17-wide 1x1 layers (768 -> 192) ran 338 GFLOP/s as 8 + 8 + 1 columns, 426 as 9 + 8 (Xeon,
  // Emerald Rapids, 2 threads).
  if (!few_registers && !few_channels && row > most && row % columns != 0)
    columns = balanced_columns(row, widest);
  // A short row whose divisor leaves a tile of few columns (9 as 3 + 3 + 3: six accumulators,
  // fewer than AVX2's two FMA pipes keep busy) splits into two near halves: the DCGAN generator's
  // 9x9 phase convolution (256 -> 512, 2x2) ran 112 GFLOP/s as 2 x 3, 159 as 5 + 4, 151 as 6 + 3
  // (AMD EPYC, Zen 2, 2 threads).
  if (few_registers && !few_channels && blocks == 2 && row > most + 1 && row <= 2 * most &&
      2 * columns <= most)
    columns = (row + 1) / 2;
  c.value("tile_ow", {{columns}, {most}, {1}});
  // A row of at most half the columns the registers hold takes two rows into the tile, so that
  // each weight vector feeds as many pixels: the DCGAN generator's 4x4 phases (512 -> 256, 2x2)
  // 436 -> 536 GFLOP/s warm, 252 -> 296 with the weights flushed (AMD EPYC, Zen 5, 2 threads).
  // The widest tile counts, not the 8 columns: a 7-wide row's 2 x 7 tile holds 14 of its 28
  // accumulators, and ResNet-50's 7x7 layers, whose weights stream from memory in the model,
  // ran 345 (3x3, 512 -> 512) and 367 GFLOP/s (1x1, 512 -> 2048) there against 467 and 452 as
  // the tuner's 28-accumulator tiles (Zen 5, 2 threads).
  if (!few_registers && !few_channels && 2 * columns <= widest) c.value("tile_oh", {{2}, {1}});
  c.label("unroll_kw", few_channels && per_column * most >= 16 ? "off" : "on");
  // On AVX-512 an image's few channels take rows in the tile as well: two blocks of 2 columns x
  // 4 rows. Measured alone against the tiles above (AMD EPYC, Zen 5, 2 threads): ResNet-18's
  // 7x7 first layer 368 -> 453 GFLOP/s, SqueezeNet's 392 -> 474, MobileNet-v2's 203 -> 288 and
  // MobileNet-v3-small's (blocks of 8) 58 -> 149, the last two with their rows padded as the
  // threads go (below).
  // With a 3x3 window the reduction is 27 long for 3 channels, so the write-back weighs: one
  // block of 8 columns x 2 rows, once the padded rows were copied as vectors (rather than 4 rows
  // that each thread pads fewer rows for), ran MobileNet-v3-small's first layer 0.059 -> 0.035 ms
  // and MobileNet-v2's 0.065 -> 0.059; the 7x7 window of ResNet's ran best as before (0.514
  // against 0.535 ms; Xeon, Emerald Rapids, 2 threads, caches flushed).
  const bool image_rows = few_channels && !few_registers;
  if (image_rows && w.get("K") <= 3) {
    c.value("tile_oc", {{1}});
    c.value("tile_ow", dividing_first(out_extent(w, "W"), {8, 14, 16, 4, 2}));
    c.value("tile_oh", {{2}, {1}});
  } else if (image_rows) {
    c.value("tile_oc", {{out_blocks % 2 == 0 ? 2 : 1}, {1}});
    c.value("tile_ow", {{2}, {1}});
    c.value("tile_oh", {{4}, {2}, {1}});
  }
  if (threads == 1) return;
  if (!c.has("epilogue")) return c.label("parallel", "fused");
  // The epilogue per finished block, while it is in L1 (103 against 81 GFLOP/s as a separate pass
  // on ResNet's 56x56x64 layer, 2 threads, Zen 3); the threads take whichever of rows and channel
  // tiles has more iterations.
  c.label("epilogue", "at_block");
  // A grouped convolution's output block reads only its group's input block, so the threads
  // take (row, block) pairs, each padding the few input rows of one block as it goes: RegNet-Y's
  // 3x3 layers with 16 channels per group (208 channels at 14x14; 112 at 56x56, stride 2) ran
  // 125-181 and 197 GFLOP/s with the whole input padded first, 250-256 and 220 so (Xeon,
  // Emerald Rapids, 2 threads, caches flushed). AVX2 was not measured.
  const bool grouped_pairs = !few_registers && w.get_or("G", 1) > 1 && w.get("P") > 0;
  int64_t channel_tiles = w.get("O") / cb / blocks;
  const bool rows_first = grouped_pairs || out_extent(w, "H") > channel_tiles;
  c.label("order", rows_first ? "row_first" : "oc_first");
  c.label("parallel", grouped_pairs ? "fused" : "outer");
  // Where the threads take rows, each pads the input rows its row tile reads as it goes, rather
  // than the whole input first and then reading it back: on AVX2 the DCGAN generator's last layer
  // (64 -> 16, 2x2, 32x32) 48 -> 90 GFLOP/s, SqueezeNet's 55x55 3x3 (16 -> 64) 151 -> 184,
  // ResNet-18's 3x3 stride-2 64 -> 128 136 -> 168, EfficientNet-B0's first layer 41 -> 48, the
  // 27x27 3x3 (32 -> 128) even. Channel tiles first would pad the rows again per tile (ResNet's
  // deeper stride-2 layers: 147 -> 129), and a 7x7 window rereads 7 padded rows per row (the
  // 7x7 stride-2 first layer 140 -> 129; AMD EPYC, Zen 2, 2 threads). AVX-512 was not measured.
  if (grouped_pairs || ((few_registers || image_rows) && rows_first && w.get("K") <= 3))
    c.label("pad", "at_row");
}

void window_defaults(Chooser& c, const Workload& w, int threads) {
  int64_t ow = out_extent(w, "W"), oh = out_extent(w, "H");
  c.value("tile_x", {{1, 16}, {2, 8}, {1, 8}, {1, 4}},
          [&](const std::vector<int64_t>& t) { return ow % (t[1] * t[2]) == 0; });
  c.value("tile_y", oh % 2 == 0 ? std::vector<std::vector<int64_t>>{{2}} : exact_inner(oh, 1));
  c.label("pad", "at_channel");
  c.label("unroll_window", "on");
  c.label("cache", "write_cache");
  if (threads > 1) c.label("parallel", "outer");
}

void channel_block_defaults(Chooser& c, const Workload& w, int threads) {
  c.value("tile_ow", dividing_first(out_extent(w, "W"), {8, 7, 14, 4, 2}));
  c.label("unroll_window", "on");
  if (threads > 1) {
    c.label("parallel", "outer");
    c.label("parallel", "fused");
  }
}

}  // namespace

Config default_config(const ConfigSpace& space, const Workload& w, int threads) {
  threads = std::max(threads, 1);
  Config config = space.from_index(0);
  Chooser c(space, config);
  const std::string& op = w.op;
  if (op == "conv2d" || op == "conv2d_bias_relu") {
    if (c.has("form")) {
      // 1x1: the NCHWc form (the same defaults as every other convolution of the model).
      c.label("form", "nchwc");
      c.set_prefix("nchwc.");
    }
    if (w.get_or("IM2COL", 0) == 1) {
      gemm_defaults(c, w.get("O"), out_extent(w, "H") * out_extent(w, "W"), threads);
    } else {
      conv2d_defaults(c, w, threads);
    }
  } else if (op == "conv2d_nchwc") {
    blocked_conv_defaults(c, w, threads);
  } else if (op == "depthwise_conv2d_nchwc") {
    // Columns per register tile with 16 registers, alone, AVX2, 2 threads (GFLOP/s): a 3x3
    // window's nine weights stay in registers next to four accumulators; eight spill. 112 and 56
    // wide, 8 -> 4: EfficientNet-B0's SiLU 112x112x32 21 -> 27, 56x56x144 20 -> 27; MobileNet-v2's
    // ReLU6 112x112x32 80 -> 91. At 28 and 14 wide seven run faster under ReLU or ReLU6
    // (28x28x88 90-95 against 80-84, 14x14x480 106-112 against 79), while under SiLU (its exp's
    // temporaries) four do, with a tail (14x14x480 23 -> 27, 28x28x144 19 -> 27). A 5x5 window
    // reads its weights from memory: eight columns with a tail ran faster alone (14x14x672 ReLU
    // 116 -> 126) and slower in MnasNet (its 28x28x120 and 14x14x480 layers 0.120 -> 0.140 and
    // 0.098 -> 0.112 ms), so it takes the columns that divide the row.
    const bool few_registers = target_isa().vector_registers < 32;
    const int64_t ow = out_extent(w, "W");
    if (!few_registers) {
      c.value("tile_ow", dividing_first(ow, {8, 7, 14, 4, 2}));
    } else if (w.get("K") <= 3 && exp_activation(w) && ow >= 8) {
      c.value("tile_ow", {{4}, {2}});
    } else {
      c.value("tile_ow",
              dividing_first(ow, ow >= 56 || w.get("K") > 3 ? std::vector<int64_t>{4, 7, 8, 2}
                                                            : std::vector<int64_t>{7, 4, 8, 2}));
    }
    c.label("unroll_window", "on");
    // No padded copy: with channels as lanes the bounds test is one per vector, and the copy
    // doubled the memory traffic of these memory-bound kernels (MobileNet-v2's 112x112x32 layer
    // 14 -> 28 GFLOP/s, its stride-2 112x112x96 layer 12 -> 39, Zen 3, 2 threads).
    c.label("pad", "inline");
    c.label("epilogue", "at_block");
    // Rows outside where the pointwise convolution before it put rows outside (its rows
    // outnumber its tiles of two channel blocks, blocked_conv_defaults), so each thread reads
    // what it wrote.
    if (w.get("H") > w.get("C") / (2 * w.get_or("CB", 16))) c.label("order", "row_first");
    // A block's epilogue cannot run inside a fused parallel loop (see blocked_conv_defaults).
    if (threads > 1) c.label("parallel", c.has("epilogue") ? "outer" : "fused");
  } else if (op == "dense") {
    if (c.has("form")) {
      // A small batch: the dot form reads W[O][I] in place; the outer-product form would pack
      // the whole weight matrix on every call.
      c.label("form", "dot");
      c.set_prefix("dot.");
      c.value("tile_o", {{4}, {2}, {1}},
              [&](const std::vector<int64_t>& t) { return w.get("O") % t[1] == 0; });
      c.value("vector_k", {{16}, {8}});
      if (threads > 1) c.label("parallel", "outputs");
    } else {
      gemm_defaults(c, w.get("B"), w.get("O"), threads);
    }
    // Bias, residual and activation per finished block, while it is in L1.
    if (c.has("epilogue")) c.label("epilogue", "at_block");
  } else if (op == "matmul") {
    gemm_defaults(c, w.get("M"), w.get("N"), threads);
  } else if (op == "batch_matmul") {
    gemm_defaults(c, w.get("M"), w.get("N"), threads);
  } else if (op == "depthwise_conv2d") {
    // Rows as vectors where they are long and contiguous; channel blocks where rows are short
    // or strided (a stride-2 row is a gather).
    bool rows = w.get("S") == 1 && out_extent(w, "W") >= 56;
    if (c.has("form")) {
      c.label("form", rows ? "rows" : "channel_blocks");
      c.set_prefix(rows ? "rows." : "channel_blocks.");
      if (!rows) {
        channel_block_defaults(c, w, threads);
        return config;
      }
    }
    window_defaults(c, w, threads);
  } else if (op == "max_pool2d" || op == "avg_pool2d") {
    window_defaults(c, w, threads);
  } else if (op == "attention") {
    // A tile of query rows that divides M, so that no tile is guarded, in register tiles of 6 or
    // 4 rows that divide the tile (a guard inside an unrolled tile tests every accumulator).
    c.value("tile_rows", dividing_first(w.get("M"), {12, 16, 8, 24, 4}));
    const int64_t tile = c.has("tile_rows") ? space.value(config, "tile_rows")[1] : 1;
    const int64_t rows = tile % 6 == 0 ? 6 : tile % 4 == 0 ? 4 : tile % 2 == 0 ? 2 : 1;
    c.value("score_tile", {{rows, 4}, {rows, 2}, {rows, 1}, {1, 1}});
    c.value("attend_rows", {{rows}, {2}, {1}});
    // Four chains of partial maxima and sums: one waited on its previous add (Whisper-tiny's
    // 1500-long rows, 1 thread, EMR: 108 -> 112-120 GFLOP/s for the whole operator).
    c.value("row_vectors", {{4}});
    if (threads > 1) c.label("parallel", w.get("B") % threads == 0 ? "heads" : "tiles");
  } else if (op == "softmax") {
    // One pass over each tile of rows with the row stages as vectors along the row: BERT's
    // 1536 x 128 softmax ran 1.13 ms at the first values (scalar, three passes), 0.105 so
    // (the best of 64 trials; AMD EPYC, AVX2, 2 threads).
    const int64_t n = w.get("N");
    c.label("fuse", "row_tile");
    c.label("exp", "stored");
    // A row of 32 or more that 16 does not divide (ViT's 197 tokens) still runs as vectors of
    // 16, the last one masked (below 32 the mask costs more than 4-wide vectors gain): ViT-B/16's
    // 2364 x 197 softmax took 2.29 ms scalar, 0.17 so (1 thread, Zen 5); Whisper's 9000 x 1500
    // (rows of 4 vectors of 4 before) 18.2 ms, 5.1 so (2 threads, EMR).
    const bool ragged = n % 16 != 0 && n >= 32;
    if (n % 16 == 0 || ragged) c.label("row_stages", "rfactor");
    c.value("vector_j", {{16}, {8}, {4}},
            [&](const std::vector<int64_t>& v) { return ragged || n % v[0] == 0; });
    c.value("tile_row", exact_inner(w.get("M"), 4));
    if (threads > 1) c.label("parallel", "rows");
  } else if (threads > 1) {
    // Elementwise operators: their first values are already vectors along the row.
    c.label("parallel", "outer");
    c.label("parallel", "rows");
  }
  return config;
}

int default_threads(const Workload& w, const OpInstance& op, int threads) {
  double bytes = 0, out_elements = 0;
  for (const Tensor& t : op.args) {
    double elements = 1;
    for (int64_t d : t->shape) elements *= static_cast<double>(d);
    bytes += 4 * elements;
    out_elements = elements;  // the output comes last
  }
  // An exp-based activation weighs as much as 40 FLOPs an element: it made EfficientNet-B0's
  // 14x14x480 3x3 depthwise layer 1.7 MFLOP and 139 us on one thread (72 us on two).
  double work = op.flops;
  if (exp_activation(w)) work += 40 * out_elements;
  // A kernel that moves a quarter of a MiB is bound by one core's reads from the shared cache
  // (about 40 GB/s on the Xeon): two cores read twice as fast. Untuned, against 1 MiB before,
  // interleaved (Emerald Rapids, 2 threads): ShuffleNet-v2 1.070x, MobileNet-v3-small 1.043x,
  // LR-ASPP 1.037x, MobileNet-v2 1.021x; its 16-channel 112x112 stride-2 depthwise layer 0.025 ->
  // 0.007 ms in the model. 128 KiB gained nothing more.
  return work >= 1e6 || bytes >= (1 << 18) ? threads : 1;
}

}  // namespace tessera
