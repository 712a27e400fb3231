#include "ops/templates.h"

#include <fmt/format.h>

#include <algorithm>

#include "ops/attention.h"
#include "ops/softmax.h"
#include "runtime/isa.h"
#include "schedule/library.h"
#include "te/error.h"

namespace tessera {

namespace {

// The loops and buffers of one matrix product C[i, j] = sum_k A[i, k] * B[k, j] as some operator
// names them: the operand B packed into [N/bn][K][bn] blocks, the output written through a cache.
struct GemmNames {
  GemmNames(std::string output, std::string packed, int64_t packed_dim, std::string batch,
            bool pack_required)
      : output(std::move(output)),
        packed(std::move(packed)),
        packed_dim(packed_dim),
        batch(std::move(batch)),
        pack_required(pack_required) {}
  std::string output;  // the stage computing C
  std::string packed;  // the operand read along j, or empty when it is contiguous already
  int64_t packed_dim;  // its j dimension
  std::string batch;   // an outer batch loop, or empty
  bool pack_required;  // B's j dimension is not its innermost: unpacked reads are gathers
  std::string i = "i", j = "j", k = "k";
  std::vector<std::string> unit_loops;   // extent-1 reduction loops kept beside k.outer
  std::vector<ProgramStrategy> prelude;  // steps that make the nest a matmul
  int64_t lanes = 0;  // the only vector width along j (weights pre-packed in such blocks)
  std::vector<std::string> parallel_prelude;  // prelude loops that run on threads with the rest
  bool parallel_batch = false;  // threads take whole batches (an image's batch loop has extent 1)
  bool epilogue = false;  // an `epilogue` stage (axes ei, ej) follows the output (dense's BIAS...)
};

// A fused epilogue (blocked convolutions, dense) (bias, residual, activation; ops/nn.h).
bool has_epilogue(const Workload& w) {
  return w.get_or("BIAS", 0) != 0 || w.get_or("RES", 0) != 0 || w.get_or("ACT", 0) != 0;
}

// Per output block right after its write-back, while the block is in L1, or as a separate pass.
Knob epilogue_knob() {
  return choice_knob("epilogue", {"at_block", "separate"});
}

// The L2 block of the reduction: none, or a slice depth that divides k.
Knob kc_knob(int64_t k) {
  std::vector<int64_t> depths{0};
  for (int64_t kc : {128, 256, 512}) {
    if (kc < k && k % kc == 0) depths.push_back(kc);
  }
  return int_knob("tile_kc", depths);
}

// The register tile of a matrix product: {rows, vectors, lanes} with rows x vectors x lanes
// accumulators, the rows a split of m and vectors x lanes a split of n. A vector of twice the
// ISA's lanes is two registers (GCC lowers it so). Tiles with more accumulators than the ISA has
// vector registers spill on every k step, so the space leaves them out: with 32 registers
// (AVX-512) 8 x 4 vectors stays, the tile measured best at 1024-2048; with 16 (AVX2) 6 x 2 and
// 4 x 3, the shapes OpenBLAS's Haswell kernels use.
Knob register_tile_knob(int64_t m, int64_t n, const std::vector<int64_t>& rows,
                        const std::vector<std::vector<int64_t>>& vector_tiles, const Isa& isa) {
  Knob knob{"tile", {}, {}};
  for (int64_t r : rows) {
    if (r > m) continue;
    for (const std::vector<int64_t>& vt : vector_tiles) {
      int64_t vectors = vt[0], lanes = vt[1];
      if (vectors * lanes > n) continue;
      int64_t registers = r * vectors * std::max<int64_t>(1, lanes / isa.f32_lanes);
      if (registers > isa.vector_registers) continue;
      knob.values.push_back({r, vectors, lanes});
    }
  }
  // A matrix narrower than one vector still gets a (scalar) tile.
  if (knob.values.empty()) knob.values.push_back({1, 1, 1});
  return knob;
}

ConfigSpace gemm_like_space(std::string name, int64_t m, int64_t n, int64_t k, GemmNames g) {
  // "panel" copies the block of B that one j.outer iteration reads (K x block_j, contiguous once
  // copied) inside that iteration: the copy runs on the thread that uses it, while the panel is
  // hot, with no separate pass. It needs B's j dimension innermost, where the block is a box.
  std::vector<std::string> pack_options{"none", "pack_b", "panel"};
  if (g.packed.empty()) pack_options = {"none"};
  if (g.pack_required) pack_options = {"pack_b"};
  const Isa& isa = target_isa();
  const int64_t lanes = isa.f32_lanes;
  // In the ISA's lanes L: the list tuned on AVX-512 (L = 16); 16 registers add rows of 3 and
  // vectors of two registers, the 12-accumulator shapes 6 x 2 and 4 x 3 among them.
  std::vector<std::vector<int64_t>> j_tiles{{1, lanes / 2}, {1, lanes},    {2, lanes},
                                            {3, lanes},     {4, lanes},    {8, lanes},
                                            {2, lanes / 2}, {4, lanes / 2}};
  std::vector<int64_t> rows{1, 2, 4, 6, 8, 12, 16};
  if (isa.vector_registers < 32) {
    j_tiles.insert(j_tiles.end(), {{1, 2 * lanes}, {2, 2 * lanes}});
    rows.insert(rows.begin() + 2, 3);
  }
  if (g.lanes > 0) j_tiles = {{1, g.lanes}, {2, g.lanes}, {3, g.lanes}, {4, g.lanes}, {8, g.lanes}};
  std::vector<Knob> knobs{
      register_tile_knob(m, n, rows, j_tiles, isa),
      split_knob("tile_k", k, 2, SplitPolicy::kPowersOfTwo, 32),
      choice_knob("order", {"i_first", "j_first"}),
      choice_knob("pack", pack_options),
      choice_knob("cache", {"none", "write_cache"}),
      choice_knob("unroll_k", {"off", "on"}),
      choice_knob("parallel", {"off", "outer"}),
      kc_knob(k),
  };
  // An L2 block of rows (GotoBLAS's mc) for products too large for one operand to stay in
  // cache across the other's blocks: the j blocks run over tile_mc row tiles at a time, so those
  // rows of A are reused from L2 instead of streamed from L3 once per j block (2048 on AVX2:
  // 0.79x oneDNN without it).
  const bool row_blocks = m >= 512 && n >= 512;
  if (row_blocks) knobs.push_back(int_knob("tile_mc", {0, 8, 16, 32}));
  // The epilogue per block of the result right after its last k step, while the block is in
  // L1 (and, from the write cache, without the result ever reaching memory), or as a pass of its
  // own over the whole result.
  if (g.epilogue) knobs.push_back(epilogue_knob());
  auto instantiate = [g, row_blocks](const ConfigSpace& s, const Config& c) {
    const auto& tile = s.value(c, "tile");
    const int64_t rows = tile[0], vectors = tile[1], lanes = tile[2];
    const auto& tk = s.value(c, "tile_k");
    bool i_first = s.value0(c, "order") == 0;
    const std::string& pack_label = s.label(c, "pack");
    bool packed = pack_label == "pack_b";
    bool cached = s.label(c, "cache") == "write_cache";
    int64_t block_j = vectors * lanes;
    std::vector<ProgramStrategy> steps = g.prelude;
    steps.insert(steps.end(),
                 {split(g.i, rows), split(g.j, block_j), split(g.j + ".inner", lanes)});
    // With a kc block, k.outer walks kc-deep slices of the packed panels outermost (GotoBLAS's
    // L2 blocking) and the register-level k loops are k.inner.outer and k.inner.inner.
    int64_t kc = s.value0(c, "tile_kc");
    std::string ko = g.k + ".outer", ki = g.k + ".inner";
    if (kc > 0) {
      steps.push_back(split(g.k, kc));
      steps.push_back(split(ki, tk[1]));
      ko = g.k + ".inner.outer";
      ki = g.k + ".inner.inner";
    } else {
      steps.push_back(split(g.k, tk[1]));
    }
    std::string first = (i_first ? g.i : g.j) + ".outer", second = (i_first ? g.j : g.i) + ".outer";
    std::vector<std::string> order{first, second, ko};
    // With row blocks the j blocks run inside a block of rows: i.outer.outer, j.outer,
    // i.outer.inner (in i-first order the split changes no order, only names).
    const int64_t mc = row_blocks ? s.value0(c, "tile_mc") : 0;
    if (mc > 0) {
      steps.push_back(split(g.i + ".outer", mc));
      const std::string rows_outer = g.i + ".outer.outer", rows_inner = g.i + ".outer.inner";
      order = i_first ? std::vector<std::string>{rows_outer, rows_inner, second, ko}
                      : std::vector<std::string>{rows_outer, first, rows_inner, ko};
      if (i_first) first = rows_outer;
      if (!i_first) second = rows_inner;
    }
    if (kc > 0) order.insert(order.begin(), g.k + ".outer");
    order.insert(order.end(), g.unit_loops.begin(), g.unit_loops.end());
    order.insert(order.end(), {ki, g.i + ".inner", g.j + ".inner.outer", g.j + ".inner.inner"});
    if (!g.batch.empty()) order.insert(order.begin(), g.batch);
    steps.push_back(reorder(order));
    steps.push_back(vectorize(g.j + ".inner.inner"));
    steps.push_back(unroll(g.j + ".inner.outer"));
    steps.push_back(unroll(g.i + ".inner"));
    if (s.value0(c, "unroll_k") == 1) steps.push_back(unroll(ki));
    if (packed) steps.push_back(pack(g.packed, g.packed_dim, block_j));
    if (pack_label == "panel") steps.push_back(cache_read(g.packed, g.j + ".outer"));
    if (cached) steps.push_back(cache_write(g.output, second));
    // With a kc block the k slices run outside the block loops: a block is final only after
    // the last slice, and an epilogue inside would add the bias and residual once per slice.
    const bool at_block = g.epilogue && s.label(c, "epilogue") == "at_block" && kc == 0;
    if (at_block) {
      if (cached) steps.push_back(try_(drop_init(g.output)));
      steps.push_back(reverse_compute_at("epilogue", second));
      if (cached) steps.push_back(try_(fuse_write_back(g.output)));
      steps.push_back(split("ej", lanes));
      steps.push_back(vectorize("ej.inner"));
    } else if (g.epilogue && s.value0(c, "parallel") == 1) {
      steps.push_back(parallel("ei"));
    }
    if (s.value0(c, "parallel") == 1) {
      bool batch_parallel = g.parallel_batch;
      steps.push_back(parallel(batch_parallel ? g.batch : first));
      // An epilogue at the block drops the init pass first (the cache starts from zero).
      ProgramStrategy init = parallel((batch_parallel ? g.batch : g.i) + ".init");
      steps.push_back(g.epilogue ? try_(init) : init);
      if (packed) steps.push_back(parallel(g.packed + ".pack.0"));
      for (const std::string& l : g.parallel_prelude) steps.push_back(parallel(l));
    }
    // A cache started from zero writes each block back whole, leaving the init pass dead (it is
    // not, and stays, when the cache must first read the block: k blocked outside it).
    if (cached && !at_block) steps.push_back(try_(drop_init(g.output)));
    return seq_all(steps);
  };
  return ConfigSpace(std::move(name), std::move(knobs), instantiate);
}

}  // namespace

ConfigSpace matmul_space(int64_t m, int64_t n, int64_t k) {
  return gemm_like_space(fmt::format("matmul:M={},N={},K={}", m, n, k), m, n, k,
                         GemmNames("C", "B", 1, "", false));
}

// A 1x1 convolution with stride 1 over NCHW is a matrix product weight[O][C] x data[C][H*W]: with
// y and x fused into one pixel loop it gets the matmul space, vectors along the pixels and no
// transposed write-back. Merging the output's y and x dimensions turns the pixel index
// (p / W, p % W) back into p, so a block of pixels is a box the write cache can hold.
ConfigSpace conv1x1_gemm_space(const Workload& w) {
  GemmNames g("conv", "", 0, "n", false);
  g.i = "o";
  g.j = "y.x.fused";
  g.k = "rc";
  g.unit_loops = {"ry", "rx"};
  g.prelude = {fuse("y", "x"), merge_dims("conv", 2)};
  return gemm_like_space(w.text(), w.get("O"), w.get("H") * w.get("W"), w.get("C"), g);
}

// im2col as a strategy: the padded input is gathered into col[n][rc][ry][rx][y][x] (the reduction
// by the output pixels), the reduction loops and the pixel loops are fused, and what is left is
// the matrix product weight[O][C*K*K] x col[C*K*K][OH*OW] with the matmul space.
ConfigSpace conv_im2col_space(const Workload& w, int64_t oh, int64_t ow) {
  bool padded = w.get("P") > 0;
  std::string input = padded ? "pad" : "data", n = padded ? "conv.n" : "n";
  GemmNames g("conv", "", 0, n, false);
  g.i = "o";
  g.j = "y.x.fused";
  g.k = "rc.ry.fused.rx.fused";
  g.prelude = {gather(input, {n, "rc", "ry", "rx", "y", "x"}), fuse("y", "x"), fuse("rc", "ry"),
               fuse("rc.ry.fused", "rx"), merge_dims("conv", 2)};
  g.parallel_prelude = {input + ".gather.1"};
  if (padded) g.parallel_prelude.push_back("c");
  int64_t kk = w.get("K");
  return gemm_like_space(w.text(), w.get("O"), oh * ow, w.get("C") * kk * kk, g);
}

// Weights [O][I] are read along O for the output vector: packing them into [O/bn][I][bn] is
// what makes the reads contiguous, and it is part of the measured kernel.
// With WB the workload's weights are already [O/WB][I][WB] (packed once, ahead of time): the vector
// is one block and the kernel packs nothing.
// The other form of a dense layer, for small batches (a matrix-vector product at batch 1): each
// output is a dot product along the contiguous rows of X and W[O][I], so the vectors run along
// the reduction (rfactor into `vector_k` partial sums), a register tile of tile_b x tile_o
// outputs shares each vector of X and of W, and the partials are combined per tile in the write
// cache. Nothing is packed.
ConfigSpace dense_dot_space(const Workload& w) {
  std::vector<Knob> knobs{
      split_knob_from("tile_b", w.get("B"), {{1}, {2}, {4}}),
      split_knob_from("tile_o", w.get("O"), {{1}, {2}, {4}, {6}, {8}, {12}, {16}}),
      int_knob("vector_k", {8, 16}),
      choice_knob("parallel", {"off", "outputs"}),
  };
  const bool epilogue = has_epilogue(w);
  if (epilogue) knobs.push_back(epilogue_knob());
  auto instantiate = [epilogue](const ConfigSpace& s, const Config& c) {
    const int64_t lanes = s.value0(c, "vector_k");
    std::vector<ProgramStrategy> steps{
        split("i", s.value(c, "tile_b")[1]),
        split("j", s.value(c, "tile_o")[1]),
        split("k", lanes),
        reorder({"i.outer", "j.outer", "k.outer", "i.inner", "j.inner", "k.inner"}),
        cache_write("dense", "j.outer"),
        rfactor("dense.local", "k.inner"),
        vectorize("k.inner"),
        unroll("j.inner"),
        unroll("i.inner"),
    };
    if (epilogue && s.label(c, "epilogue") == "at_block") {
      steps.push_back(reverse_compute_at("epilogue", "j.outer"));
    } else if (epilogue && s.value0(c, "parallel") == 1) {
      steps.push_back(parallel("ei"));
    }
    if (s.value0(c, "parallel") == 1) steps.push_back(parallel("j.outer"));
    steps.push_back(try_(drop_init("dense")));
    return seq_all(steps);
  };
  return ConfigSpace(w.text(), std::move(knobs), instantiate);
}

ConfigSpace dense_space(const Workload& w) {
  int64_t wb = w.get_or("WB", 0);
  const bool epilogue = has_epilogue(w);
  // The outer-product form packs W on every call, which a batch of 32 or more amortizes; below
  // that the dot form is offered too. Offering it everywhere halved what the same trial budget
  // found for BERT's batch of 128 (docs/operators.md).
  GemmNames outer("dense", "W", 0, "", true);
  outer.epilogue = epilogue;
  if (wb == 0 && w.get("B") >= 32)
    return gemm_like_space(w.text(), w.get("B"), w.get("O"), w.get("I"), outer);
  if (wb == 0) {
    return choice_of_spaces(
        w.text(), "form",
        {{"outer", gemm_like_space(w.text(), w.get("B"), w.get("O"), w.get("I"), outer)},
         {"dot", dense_dot_space(w)}});
  }
  GemmNames g("dense", "", 0, "", false);
  g.lanes = wb;
  g.epilogue = epilogue;
  return gemm_like_space(w.text(), w.get("B"), w.get("O"), w.get("I"), g);
}

ConfigSpace batch_matmul_space(const Workload& w) {
  GemmNames g("C", "B", 2, "b", false);
  g.parallel_batch = true;
  return gemm_like_space(w.text(), w.get("M"), w.get("N"), w.get("K"), g);
}

// TVM's x86 conv2d_NCHWc as a strategy on the plain NCHW program: output channels are the vector
// lanes (a register tile of tile_ow columns x tile_oc channels), the weights are packed into
// [O/oc][C][K][K][oc] blocks so one contiguous vector load feeds tile_ow FMAs, and the output
// block accumulates in a [x][o] cache that is transposed back to NCHW once per block.
ConfigSpace conv2d_space(const Workload& w) {
  int64_t c_in = w.get("C"), wd = w.get("W"), o = w.get("O"), kk = w.get("K"), s = w.get("S"),
          p = w.get("P");
  int64_t ow = (wd + 2 * p - (kk - 1) * w.get_or("D", 1) - 1) / s + 1;
  bool grouped = w.get_or("G", 1) > 1;
  // Weights pre-packed in blocks of WB output channels fix the vector to one block.
  int64_t wb = w.get_or("WB", 0);
  // Vectors of the ISA's lanes L: 8-lane vectors unrolled twice beat one 16-lane vector on AVX2
  // (85 against 58 GFLOP/s on ResNet's 7x7x512 layer, Zen 3).
  const int64_t lanes = target_isa().f32_lanes;
  std::vector<std::vector<int64_t>> oc_tiles{{1, lanes}, {2, lanes},     {3, lanes},
                                             {4, lanes}, {1, lanes / 2}, {1, lanes / 4}};
  if (wb > 0) oc_tiles = {{1, wb}, {2, wb}, {3, wb}, {4, wb}};
  std::vector<Knob> knobs{
      split_knob_from("tile_oc", o, oc_tiles),
      split_knob_from("tile_ow", ow, {{1}, {2}, {4}, {7}, {8}, {14}, {16}, {28}}),
      split_knob("tile_ic", c_in, 2, SplitPolicy::kPowersOfTwo, 64),
      choice_knob("order", {"oc_first", "row_first"}),
      // With groups, the input channel read depends on the output channel: computing the padding
      // per row and proving a fused loop's writes disjoint both fail there, so they are left out.
      choice_knob("pad", p > 0 ? grouped ? std::vector<std::string>{"root"}
                                         : std::vector<std::string>{"root", "at_row"}
                               : std::vector<std::string>{"none"}),
      choice_knob("unroll_kw", {"off", "on"}),
      grouped ? choice_knob("parallel", {"off", "outer"})
              : choice_knob("parallel", {"off", "outer", "fused"}),
  };
  // conv2d_bias_relu shares the axis names with its epilogue stages, so its loops are qualified.
  bool fused = w.op == "conv2d_bias_relu";
  // Its epilogue runs as a separate pass over the output, or per output block right after the
  // block's write-back, while the block is in L1.
  if (fused) knobs.push_back(choice_knob("epilogue", {"separate", "at_block"}));
  std::string q = fused ? "conv." : "";
  std::string n_loop = p > 0 || fused ? "conv.n" : "n";
  bool prepacked = wb > 0;
  auto instantiate = [n_loop, q, fused, prepacked](const ConfigSpace& sp, const Config& c) {
    const auto& toc = sp.value(c, "tile_oc");
    int64_t oc_block = toc[1] * toc[2];
    bool oc_first = sp.value0(c, "order") == 0;
    std::string o = q + "o", y = q + "y", x = q + "x";
    std::vector<ProgramStrategy> steps{split(o, oc_block), split(o + ".inner", toc[2]),
                                       split(x, sp.value(c, "tile_ow")[1]),
                                       split("rc", sp.value(c, "tile_ic")[1])};
    std::string first = oc_first ? o + ".outer" : y, second = oc_first ? y : o + ".outer";
    steps.push_back(reorder({n_loop, first, second, x + ".outer", "rc.outer", "ry", "rx",
                             "rc.inner", x + ".inner", o + ".inner.outer", o + ".inner.inner"}));
    steps.push_back(vectorize(o + ".inner.inner"));
    steps.push_back(unroll(o + ".inner.outer"));
    steps.push_back(unroll(x + ".inner"));
    if (sp.value0(c, "unroll_kw") == 1) steps.push_back(unroll("rx"));
    if (!prepacked) steps.push_back(pack("weight", 0, oc_block));
    steps.push_back(cache_write("conv", x + ".outer", {0, 2, 3, 1}));
    const std::string& pad_label = sp.label(c, "pad");
    if (pad_label == "at_row") steps.push_back(compute_at("pad", y));
    int64_t parallel_mode = sp.value0(c, "parallel");
    if (parallel_mode != 0) {
      if (parallel_mode == 1) {
        steps.push_back(parallel(first));
      } else {
        steps.push_back(fuse(first, second));
        steps.push_back(parallel(first + "." + second + ".fused"));
      }
      steps.push_back(parallel(o + ".init"));
      if (!prepacked) steps.push_back(parallel("weight.pack.0"));
      if (pad_label == "root") steps.push_back(parallel("c"));
    }
    if (fused) {
      // The epilogue: bias and relu in one pass, vectorized by the C compiler along the fused
      // plane loop, or over each block the convolution finishes.
      steps.push_back(compute_inline("bias_add"));
      if (sp.value0(c, "epilogue") == 1) {
        steps.push_back(reverse_compute_at("relu", x + ".outer"));
      } else {
        steps.push_back(fuse("k", "l"));
        if (parallel_mode != 0) steps.push_back(parallel("j"));
      }
    }
    return seq_all(steps);
  };
  ConfigSpace nchwc(w.text(), std::move(knobs), instantiate);
  if (grouped || fused) return nchwc;
  bool pointwise = kk == 1 && s == 1 && p == 0 && w.get_or("D", 1) == 1;
  if (!pointwise) return nchwc;
  return choice_of_spaces(w.text(), "form", {{"nchwc", nchwc}, {"gemm", conv1x1_gemm_space(w)}});
}

namespace {

// The blocked convolutions' parallel choice (0 off, 1 the `first` loop, 2 `first` fused with
// `second`) and padding choice (root, at_row: per y.outer row tile, inline, or none).
// `pad_channel` names the pad stage's channel loop, parallel when the padding runs at the root,
// and `pad_block` its loop over a block's channels; `pad_row` its loop along a row, vectorized
// instead where the block is one channel (an image's input), when named.
void place_parallel_and_padding(std::vector<ProgramStrategy>* steps, const std::string& first,
                                const std::string& second, int64_t parallel_mode,
                                const std::string& pad_label, const std::string& pad_channel,
                                const std::string& pad_block, const std::string& pad_row = "") {
  // Fused first, so that padding computed per row lands inside the fused loop whichever order.
  std::string row = "y.outer";
  if (parallel_mode == 2) {
    row = first + "." + second + ".fused";
    steps->push_back(fuse(first, second));
    steps->push_back(parallel(row));
  }
  if (parallel_mode == 1) steps->push_back(parallel(first));
  if (pad_label == "at_row") steps->push_back(compute_at("pad", row));
  if (pad_label == "inline") steps->push_back(compute_inline("pad"));
  if (parallel_mode != 0 && pad_label == "root") steps->push_back(parallel(pad_channel));
  // A copied pixel is a block of channels under one test of its row and column: one vector.
  // Left to the C compiler the copy stayed scalar (its load sits behind the test), 39% of a
  // grouped convolution's time with 16 channels per group (RegNet-Y-400MF's 3x3 layers).
  if (pad_label != "root" && pad_label != "at_row") return;
  if (pad_row.empty()) {
    steps->push_back(try_(vectorize(pad_block)));
    return;
  }
  // Along the row the padding test varies by lane, and the vector path loads under its mask:
  // MobileNet-v2's 3 -> 32 stem ran 0.099 -> 0.065 ms (Xeon, Emerald Rapids, 2 threads).
  const std::string inner = pad_row + ".inner";
  steps->push_back(split(pad_row, 16));
  steps->push_back(reorder({pad_block, inner}));
  steps->push_back(vectorize(inner));
}

void place_epilogue(std::vector<ProgramStrategy>* steps, const std::string& stage,
                    const std::string& label, bool threaded) {
  if (label == "at_block") {
    steps->push_back(reverse_compute_at("epilogue", "x.outer"));
    // The epilogue then reads the block from the write cache: no intermediate output buffer,
    // no init pass over it, no write and read back of the whole output.
    steps->push_back(try_(fuse_write_back(stage)));
    steps->push_back(try_(vectorize("eb")));
    return;
  }
  // One contiguous row per block of channels and row, vectorized by the C compiler.
  steps->push_back(fuse("ex", "eb"));
  if (threaded) steps->push_back(parallel("ec"));
}

}  // namespace

int64_t balanced_columns(int64_t row, int64_t widest) {
  const int64_t tiles = std::max<int64_t>(2, (row + widest - 1) / widest);
  return (row + tiles - 1) / tiles;
}

// conv2d_NCHWc in its own layout, as TVM's x86 schedule: the output block's channels are the
// vector, a register tile of tile_ow columns x tile_oc blocks accumulates across the whole
// reduction, each input value is broadcast from its channel block (contiguous along ib) and each
// weight vector is one contiguous load. Nothing is packed or transposed: the data arrives blocked.
ConfigSpace conv2d_nchwc_space(const Workload& w) {
  int64_t cb = w.get_or("CB", 16), o = w.get("O"), kk = w.get("K"), p = w.get("P");
  int64_t kw = w.kernel_width(), pw = w.width_padding();
  int64_t span = (kk - 1) * w.get_or("D", 1) + 1, span_w = (kw - 1) * w.get_or("D", 1) + 1;
  int64_t ow = (w.get("W") + 2 * pw - span_w) / w.get("S") + 1;
  int64_t oh = (w.get("H") + 2 * p - span) / w.get("S") + 1;
  const bool padded = p > 0 || pw > 0;
  // The columns that split the row evenly into tiles of at most 14 come last, where no other
  // candidate is them (a 17-wide row's 9), so that the others keep their places.
  std::vector<std::vector<int64_t>> columns{{1}, {2}, {3},  {4},  {5},  {6},
                                            {7}, {8}, {12}, {14}, {16}, {28}};
  const int64_t balanced = balanced_columns(ow, 14);
  if (std::none_of(columns.begin(), columns.end(), [&](const auto& c) { return c[0] == balanced; }))
    columns.push_back({balanced});
  std::vector<Knob> knobs{
      split_knob_from("tile_oc", o / cb, {{1}, {2}, {3}, {4}}),
      split_knob_from("tile_ow", ow, columns),
      // Rows in the register tile too: each weight vector then feeds tile_oh x tile_ow pixels,
      // which is what keeps small planes (7 x 7 at 512 channels) from streaming the weights.
      split_knob_from("tile_oh", oh, {{1}, {2}, {4}, {7}}),
      choice_knob("order", {"oc_first", "row_first"}),
      // Input-channel blocks outside the window (each weight block read once per tile) or inside
      // it (the rows of the window stay in L1 across the channels).
      choice_knob("reduction", {"ic_outer", "window_outer"}),
      choice_knob("pad", padded ? std::vector<std::string>{"root", "at_row"}
                                : std::vector<std::string>{"none"}),
      choice_knob("unroll_kw", {"off", "on"}),
      choice_knob("parallel", {"off", "outer", "fused"}),
  };
  bool epilogue = has_epilogue(w);
  if (epilogue) knobs.push_back(epilogue_knob());
  std::string n_loop = padded ? "conv.n" : "n";
  bool one_channel_blocks = w.get_or("IB", 0) == 1;
  auto instantiate = [n_loop, epilogue, one_channel_blocks](const ConfigSpace& sp,
                                                            const Config& c) {
    bool oc_first = sp.value0(c, "order") == 0;
    std::vector<ProgramStrategy> steps{split("oc", sp.value(c, "tile_oc")[1]),
                                       split("x", sp.value(c, "tile_ow")[1]),
                                       split("y", sp.value(c, "tile_oh")[1])};
    std::string first = oc_first ? "oc.outer" : "y.outer",
                second = oc_first ? "y.outer" : "oc.outer";
    std::vector<std::string> reduction{"ic", "ry", "rx"};
    if (sp.value0(c, "reduction") == 1) reduction = {"ry", "rx", "ic"};
    std::vector<std::string> order{n_loop, first, second, "x.outer"};
    order.insert(order.end(), reduction.begin(), reduction.end());
    order.insert(order.end(), {"ib", "y.inner", "x.inner", "oc.inner", "ob"});
    steps.push_back(reorder(order));
    steps.push_back(vectorize("ob"));
    steps.push_back(unroll("oc.inner"));
    steps.push_back(unroll("x.inner"));
    steps.push_back(unroll("y.inner"));
    if (sp.value0(c, "unroll_kw") == 1) steps.push_back(unroll("rx"));
    steps.push_back(cache_write("conv", "x.outer"));
    // The cache starts from zero and writes each tile back whole: the init pass is dead.
    steps.push_back(try_(drop_init("conv")));
    if (epilogue)
      place_epilogue(&steps, "conv", sp.label(c, "epilogue"), sp.value0(c, "parallel") != 0);
    place_parallel_and_padding(&steps, first, second, sp.value0(c, "parallel"), sp.label(c, "pad"),
                               "c", "b", one_channel_blocks ? "w" : "");
    return seq_all(steps);
  };
  return ConfigSpace(w.text(), std::move(knobs), instantiate);
}

// Depthwise convolution and pooling: each output reads one KxK window of its own channel, so the
// vector runs along the output row (contiguous for stride 1), with channels and rows unrolled into
// a register tile and the window loops unrolled.
ConfigSpace window_space(const Workload& w, const std::string& stage) {
  int64_t ow = (w.get("W") + 2 * w.get("P") - w.get("K")) / w.get("S") + 1;
  int64_t oh = (w.get("H") + 2 * w.get("P") - w.get("K")) / w.get("S") + 1;
  bool padded = w.get("P") > 0;
  std::vector<Knob> knobs{
      split_knob_from("tile_x", ow, {{1, 8}, {1, 16}, {2, 16}, {2, 8}, {4, 8}, {4, 16}, {1, 4}}),
      split_knob_from("tile_y", oh, {{1}, {2}, {4}}),
      split_knob_from("tile_c", w.get("C"), {{1}, {2}, {4}}),
      choice_knob("pad", padded ? std::vector<std::string>{"root", "at_channel"}
                                : std::vector<std::string>{"none"}),
      choice_knob("unroll_window", {"off", "on"}),
      choice_knob("cache", {"none", "write_cache"}),
      choice_knob("parallel", {"off", "outer"}),
  };
  std::string n = padded ? stage + ".n" : "n", c = padded ? stage + ".c" : "c";
  auto instantiate = [=](const ConfigSpace& sp, const Config& cfg) {
    const auto& tx = sp.value(cfg, "tile_x");
    std::vector<ProgramStrategy> steps{split(c, sp.value(cfg, "tile_c")[1]),
                                       split("y", sp.value(cfg, "tile_y")[1]),
                                       split("x", tx[1] * tx[2]), split("x.inner", tx[2])};
    steps.push_back(reorder({n, c + ".outer", "y.outer", "x.outer", "ry", "rx", c + ".inner",
                             "y.inner", "x.inner.outer", "x.inner.inner"}));
    steps.push_back(vectorize("x.inner.inner"));
    steps.push_back(unroll("x.inner.outer"));
    steps.push_back(unroll("y.inner"));
    steps.push_back(unroll(c + ".inner"));
    if (sp.value0(cfg, "unroll_window") == 1) {
      steps.push_back(unroll("rx"));
      steps.push_back(unroll("ry"));
    }
    if (sp.value0(cfg, "cache") == 1) steps.push_back(cache_write(stage, "x.outer"));
    const std::string& pad_label = sp.label(cfg, "pad");
    if (pad_label == "at_channel") steps.push_back(compute_at("pad", c + ".outer"));
    if (sp.value0(cfg, "parallel") == 1) {
      steps.push_back(parallel(c + ".outer"));
      steps.push_back(parallel(c + ".init"));
      if (pad_label == "root") steps.push_back(parallel("pad.c"));
    }
    return seq_all(steps);
  };
  return ConfigSpace(w.text(), std::move(knobs), instantiate);
}

// depthwise_conv2d in channel blocks, as TVM's depthwise_conv2d_NCHWc and oneDNN's dw kernels: a
// block's channels are the vector, so a stride-2 row is still read as whole vectors and rows of 7
// columns lose no lanes. Register tile: tile_oh rows x tile_ow columns x tile_c blocks.
ConfigSpace depthwise_nchwc_space(const Workload& w) {
  int64_t cb = w.get_or("CB", 16), s = w.get("S"), p = w.get("P");
  int64_t span = (w.get("K") - 1) * w.get_or("D", 1) + 1;
  int64_t ow = (w.get("W") + 2 * p - span) / s + 1, oh = (w.get("H") + 2 * p - span) / s + 1;
  std::vector<Knob> knobs{
      split_knob_from("tile_ow", ow, {{1}, {2}, {4}, {7}, {8}, {14}, {16}, {28}}),
      split_knob_from("tile_oh", oh, {{1}, {2}, {4}}),
      split_knob_from("tile_c", w.get("C") / cb, {{1}, {2}}),
      // inline: no padded copy at all, each read tests its row and column; with channels as
      // lanes the test is the same for the whole vector (stride 2 doubled: docs/operators.md).
      choice_knob("pad", p > 0 ? std::vector<std::string>{"root", "at_row", "inline"}
                               : std::vector<std::string>{"none"}),
      choice_knob("unroll_window", {"off", "on"}),
      choice_knob("parallel", {"off", "outer", "fused"}),
  };
  bool epilogue = has_epilogue(w);
  if (epilogue) knobs.push_back(epilogue_knob());
  // Which of channel blocks and rows the outer (parallel) loop takes: rows keep each thread on
  // the rows the pointwise convolutions around it computed or will read.
  knobs.push_back(choice_knob("order", {"c_first", "row_first"}));
  // The pad stage has loops n, c, h, w, b too: the convolution's own are named by stage there.
  std::string n = p > 0 ? "dwconv.n" : "n", c = p > 0 ? "dwconv.c" : "c",
              b = p > 0 ? "dwconv.b" : "b";
  auto instantiate = [=](const ConfigSpace& sp, const Config& cfg) {
    std::vector<ProgramStrategy> steps{split(c, sp.value(cfg, "tile_c")[1]),
                                       split("y", sp.value(cfg, "tile_oh")[1]),
                                       split("x", sp.value(cfg, "tile_ow")[1])};
    bool rows_first = sp.label(cfg, "order") == "row_first";
    std::string first = rows_first ? "y.outer" : c + ".outer",
                second = rows_first ? c + ".outer" : "y.outer";
    steps.push_back(
        reorder({n, first, second, "x.outer", "ry", "rx", c + ".inner", "y.inner", "x.inner", b}));
    steps.push_back(vectorize(b));
    steps.push_back(unroll("x.inner"));
    steps.push_back(unroll("y.inner"));
    steps.push_back(unroll(c + ".inner"));
    if (sp.value0(cfg, "unroll_window") == 1) {
      steps.push_back(unroll("rx"));
      steps.push_back(unroll("ry"));
    }
    steps.push_back(cache_write("dwconv", "x.outer"));
    steps.push_back(try_(drop_init("dwconv")));
    if (epilogue)
      place_epilogue(&steps, "dwconv", sp.label(cfg, "epilogue"), sp.value0(cfg, "parallel") != 0);
    place_parallel_and_padding(&steps, first, second, sp.value0(cfg, "parallel"),
                               sp.label(cfg, "pad"), "pad.c", "pad.b");
    return seq_all(steps);
  };
  return ConfigSpace(w.text(), std::move(knobs), instantiate);
}

// Depthwise convolution on NCHW tensors with channels as the vector, for rows too short or too
// strided to vectorize (MobileNet's 14- and 7-column layers, stride 2): the input and the weights
// are packed into blocks of `lanes` channels inside the kernel, the padding is read in place
// (inlined), and each register tile of columns x channels is transposed back to NCHW as it is
// written. The packing passes are part of the measured kernel, as the layout is NCHW.
ConfigSpace depthwise_channel_blocks_space(const Workload& w, int64_t lanes) {
  int64_t k = w.get("K"), s = w.get("S"), p = w.get("P");
  int64_t ow = (w.get("W") + 2 * p - k) / s + 1;
  std::vector<Knob> knobs{
      split_knob_from("tile_ow", ow, {{1}, {2}, {4}, {7}, {8}, {14}, {16}}),
      split_knob_from("tile_c", w.get("C") / lanes, {{1}, {2}}),
      choice_knob("unroll_window", {"off", "on"}),
      choice_knob("parallel", {"off", "outer"}),
  };
  bool padded = p > 0;
  std::string n = padded ? "dwconv.n" : "n", c = padded ? "dwconv.c" : "c";
  auto instantiate = [=](const ConfigSpace& sp, const Config& cfg) {
    int64_t blocks = sp.value(cfg, "tile_c")[1];
    std::vector<ProgramStrategy> steps{split(c, blocks * lanes), split(c + ".inner", lanes),
                                       split("x", sp.value(cfg, "tile_ow")[1])};
    steps.push_back(reorder({n, c + ".outer", "y", "x.outer", "ry", "rx", c + ".inner.outer",
                             "x.inner", c + ".inner.inner"}));
    steps.push_back(vectorize(c + ".inner.inner"));
    steps.push_back(unroll("x.inner"));
    steps.push_back(unroll(c + ".inner.outer"));
    if (sp.value0(cfg, "unroll_window") == 1) {
      steps.push_back(unroll("rx"));
      steps.push_back(unroll("ry"));
    }
    if (padded) steps.push_back(compute_inline("pad"));
    steps.push_back(pack("data", 1, lanes));
    steps.push_back(pack("weight", 0, lanes));
    // The tile accumulates as [x][c] (channels in lanes) and is stored back into [c][y][x].
    steps.push_back(cache_write("dwconv", "x.outer", {0, 2, 3, 1}));
    steps.push_back(try_(drop_init("dwconv")));
    if (sp.value0(cfg, "parallel") == 1) {
      steps.push_back(parallel(c + ".outer"));
      steps.push_back(parallel("data.pack.0"));
      steps.push_back(parallel("weight.pack.0"));
    }
    return seq_all(steps);
  };
  return ConfigSpace(w.text(), std::move(knobs), instantiate);
}

// Elementwise operators over [M, N]: vectors along the row, rows split across threads.
ConfigSpace elementwise_space(const Workload& w) {
  std::vector<Knob> knobs{
      split_knob_from("tile_j", w.get("N"), {{1, 16}, {2, 16}, {4, 16}, {1, 8}, {1, 1}}),
      choice_knob("parallel", {"off", "outer"}),
  };
  auto instantiate = [](const ConfigSpace& sp, const Config& cfg) {
    const auto& tj = sp.value(cfg, "tile_j");
    std::vector<ProgramStrategy> steps{split("j", tj[1] * tj[2]), split("j.inner", tj[2]),
                                       vectorize("j.inner.inner"), unroll("j.inner.outer")};
    if (sp.value0(cfg, "parallel") == 1) steps.push_back(parallel("i"));
    return seq_all(steps);
  };
  return ConfigSpace(w.text(), std::move(knobs), instantiate);
}

ConfigSpace space_for(const Workload& w) {
  if (w.op == "matmul") return matmul_space(w.get("M"), w.get("N"), w.get("K"));
  // im2col is a template of its own, as TVM registers one per implementation: as a form inside
  // the NCHWc space it was never the best and diluted the search (docs/tuning.md).
  if (w.op == "conv2d" && w.get_or("IM2COL", 0) == 1) {
    int64_t k = w.get("K"), d = w.get_or("D", 1), s = w.get("S"), p = w.get("P");
    return conv_im2col_space(w, (w.get("H") + 2 * p - (k - 1) * d - 1) / s + 1,
                             (w.get("W") + 2 * p - (k - 1) * d - 1) / s + 1);
  }
  if (w.op == "conv2d" || w.op == "conv2d_bias_relu") return conv2d_space(w);
  if (w.op == "conv2d_nchwc") return conv2d_nchwc_space(w);
  if (w.op == "dense") return dense_space(w);
  if (w.op == "batch_matmul") return batch_matmul_space(w);
  if (w.op == "depthwise_conv2d") {
    int64_t c = w.get("C");
    // Channel blocks of the ISA's vector (8 on AVX2, 16 on AVX-512), or of 8 when C allows no
    // more.
    const int64_t isa_lanes = target_isa().f32_lanes;
    int64_t lanes = c % isa_lanes == 0 ? isa_lanes : c % 8 == 0 ? 8 : 0;
    if (lanes == 0) return window_space(w, "dwconv");
    return choice_of_spaces(w.text(), "form",
                            {{"rows", window_space(w, "dwconv")},
                             {"channel_blocks", depthwise_channel_blocks_space(w, lanes)}});
  }
  if (w.op == "depthwise_conv2d_nchwc") return depthwise_nchwc_space(w);
  if (w.op == "max_pool2d" || w.op == "avg_pool2d") return window_space(w, "pool");
  if (w.op == "add" || w.op == "relu" || w.op == "bias_add") return elementwise_space(w);
  if (w.op == "softmax") return softmax_space(w);
  if (w.op == "attention") return attention_space(w);
  throw_error(
      "no search space for {} yet (spaces: matmul, conv2d, conv2d_nchwc, conv2d_bias_relu, dense, "
      "batch_matmul, depthwise_conv2d, depthwise_conv2d_nchwc, max_pool2d, avg_pool2d, add, relu, "
      "bias_add, softmax, attention)",
      w.op);
}

}  // namespace tessera
