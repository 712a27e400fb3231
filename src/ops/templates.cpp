#include "ops/templates.h"

#include <fmt/format.h>

#include "schedule/library.h"
#include "te/error.h"

namespace tessera {

ConfigSpace matmul_space(int64_t m, int64_t n, int64_t k) {
  std::vector<Knob> knobs{
      split_knob_from("tile_i", m, {{1}, {2}, {4}, {6}, {8}, {12}, {16}}),
      split_knob_from("tile_j", n,
                      {{1, 8}, {1, 16}, {2, 16}, {3, 16}, {4, 16}, {8, 16}, {2, 8}, {4, 8}}),
      split_knob("tile_k", k, 2, SplitPolicy::kPowersOfTwo, 32),
      choice_knob("order", {"i_first", "j_first"}),
      choice_knob("pack", {"none", "pack_b"}),
      choice_knob("cache", {"none", "write_cache"}),
      choice_knob("unroll_k", {"off", "on"}),
      choice_knob("parallel", {"off", "outer"}),
  };
  auto instantiate = [](const ConfigSpace& s, const Config& c) {
    const auto& ti = s.value(c, "tile_i");
    const auto& tj = s.value(c, "tile_j");
    const auto& tk = s.value(c, "tile_k");
    bool i_first = s.value0(c, "order") == 0;
    int64_t block_j = tj[1] * tj[2];
    std::vector<ProgramStrategy> steps{split("i", ti[1]), split("j", block_j),
                                       split("j.inner", tj[2]), split("k", tk[1])};
    std::string first = i_first ? "i.outer" : "j.outer", second = i_first ? "j.outer" : "i.outer";
    steps.push_back(reorder(
        {first, second, "k.outer", "k.inner", "i.inner", "j.inner.outer", "j.inner.inner"}));
    steps.push_back(vectorize("j.inner.inner"));
    steps.push_back(unroll("j.inner.outer"));
    steps.push_back(unroll("i.inner"));
    if (s.value0(c, "unroll_k") == 1) steps.push_back(unroll("k.inner"));
    if (s.value0(c, "pack") == 1) steps.push_back(pack("B", 1, block_j));
    if (s.value0(c, "cache") == 1) steps.push_back(cache_write("C", second));
    if (s.value0(c, "parallel") == 1) {
      steps.push_back(parallel(first));
      steps.push_back(parallel("i.init"));
      if (s.value0(c, "pack") == 1) steps.push_back(parallel("B.pack.0"));
    }
    return seq_all(steps);
  };
  return ConfigSpace(fmt::format("matmul:M={},N={},K={}", m, n, k), std::move(knobs), instantiate);
}

// TVM's x86 conv2d_NCHWc as a strategy on the plain NCHW program: output channels are the vector
// lanes (a register tile of tile_ow columns x tile_oc channels), the weights are packed into
// [O/oc][C][K][K][oc] blocks so one contiguous vector load feeds tile_ow FMAs, and the output
// block accumulates in a [x][o] cache that is transposed back to NCHW once per block.
ConfigSpace conv2d_space(const Workload& w) {
  int64_t c_in = w.get("C"), wd = w.get("W"), o = w.get("O"), kk = w.get("K"), s = w.get("S"),
          p = w.get("P");
  int64_t ow = (wd + 2 * p - kk) / s + 1;
  std::vector<Knob> knobs{
      split_knob_from("tile_oc", o, {{1, 16}, {2, 16}, {3, 16}, {4, 16}, {1, 8}, {1, 4}}),
      split_knob_from("tile_ow", ow, {{1}, {2}, {4}, {7}, {8}, {14}, {16}, {28}}),
      split_knob("tile_ic", c_in, 2, SplitPolicy::kPowersOfTwo, 64),
      choice_knob("order", {"oc_first", "row_first"}),
      choice_knob("pad", p > 0 ? std::vector<std::string>{"root", "at_row"}
                               : std::vector<std::string>{"none"}),
      choice_knob("unroll_kw", {"off", "on"}),
      choice_knob("parallel", {"off", "outer", "fused"}),
  };
  std::string n_loop = p > 0 ? "conv.n" : "n";
  auto instantiate = [n_loop](const ConfigSpace& sp, const Config& c) {
    const auto& toc = sp.value(c, "tile_oc");
    int64_t oc_block = toc[1] * toc[2];
    bool oc_first = sp.value0(c, "order") == 0;
    std::vector<ProgramStrategy> steps{split("o", oc_block), split("o.inner", toc[2]),
                                       split("x", sp.value(c, "tile_ow")[1]),
                                       split("rc", sp.value(c, "tile_ic")[1])};
    std::string first = oc_first ? "o.outer" : "y", second = oc_first ? "y" : "o.outer";
    steps.push_back(reorder({n_loop, first, second, "x.outer", "rc.outer", "ry", "rx", "rc.inner",
                             "x.inner", "o.inner.outer", "o.inner.inner"}));
    steps.push_back(vectorize("o.inner.inner"));
    steps.push_back(unroll("o.inner.outer"));
    steps.push_back(unroll("x.inner"));
    if (sp.value0(c, "unroll_kw") == 1) steps.push_back(unroll("rx"));
    steps.push_back(pack("weight", 0, oc_block));
    steps.push_back(cache_write("conv", "x.outer", {0, 2, 3, 1}));
    const std::string& pad_label = sp.knobs()[4].labels[static_cast<size_t>(sp.value0(c, "pad"))];
    if (pad_label == "at_row") steps.push_back(compute_at("pad", "y"));
    int64_t parallel_mode = sp.value0(c, "parallel");
    if (parallel_mode != 0) {
      if (parallel_mode == 1) {
        steps.push_back(parallel(first));
      } else {
        steps.push_back(fuse(first, second));
        steps.push_back(parallel(first + "." + second + ".fused"));
      }
      steps.push_back(parallel("o.init"));
      steps.push_back(parallel("weight.pack.0"));
      if (pad_label == "root") steps.push_back(parallel("c"));
    }
    return seq_all(steps);
  };
  return ConfigSpace(w.text(), std::move(knobs), instantiate);
}

ConfigSpace space_for(const Workload& w) {
  if (w.op == "matmul") return matmul_space(w.get("M"), w.get("N"), w.get("K"));
  if (w.op == "conv2d") return conv2d_space(w);
  throw_error("no search space for {} yet (spaces: matmul, conv2d)", w.op);
}

}  // namespace tessera
