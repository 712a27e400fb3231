// Convolutions, products and pooling as tuned library operators (te kernels where the library
// has no form), in NCHW, in channel blocks or by Winograd; and a batch norm no Conv absorbed.
#include <fmt/format.h>

#include <cmath>
#include <optional>

#include "graph/kernels.h"
#include "graph/op_attrs.h"
#include "graph/op_table.h"
#include "graph/passes.h"
#include "graph/planner.h"
#include "graph/weight_layouts.h"
#include "graph/winograd.h"
#include "runtime/isa.h"
#include "te/error.h"

namespace tessera::graph {

void Planner::plan_conv(const Node& n) {
  Window2d w = read_window(n, g_.shape(n.inputs[0]), &g_.shape(n.inputs[1]));
  // tessera's conv2d takes one K, one stride, one dilation and equal pads on all sides; any
  // other window runs as the generic te convolution.
  if (!w.is_square_symmetric() || w.dh != w.dw) {
    bool has_bias = n.inputs.size() > 2 && !n.inputs[2].empty();
    std::vector<size_t> args{slot(n.inputs[0]), slot(n.inputs[1])};
    if (has_bias) args.push_back(slot(n.inputs[2]));
    if (n.epilogue.empty()) {
      args.push_back(output_slot(n));
      return te_step(conv2d_kernel(w, has_bias), std::move(args));
    }
    std::vector<int64_t> out_shape = g_.shape(n.outputs[0]);
    size_t raw = new_array(out_shape);
    args.push_back(raw);
    te_step(conv2d_kernel(w, has_bias), std::move(args));
    return epilogue_step(n, raw, out_shape, {});
  }
  bool has_bias = n.inputs.size() > 2 && !n.inputs[2].empty();
  bool depthwise = w.group > 1 && w.group == w.c && w.out_channels == w.c && w.dh == 1;
  std::vector<int64_t> out_shape = g_.shape(n.outputs[0]);
  size_t x = slot(n.inputs[0]);
  std::string shape_keys = fmt::format("N={},C={},H={},W={}", w.n, w.c, w.h, w.w);
  // Constant weights are packed here, once, into the blocks of output channels the kernel's
  // vectors read (WB): packing them inside the kernel rereads and rewrites them every run,
  // 9.4 MB for each of ResNet-18's 3x3x512 convolutions.
  const int64_t block = target_isa().f32_lanes;
  bool prepack =
      !depthwise && w.group == 1 && g_.is_constant(n.inputs[1]) && w.out_channels % block == 0;
  size_t wt = prepack ? constant_array(packed_weights(g_.constants.at(n.inputs[1]), block))
                      : slot(n.inputs[1]);
  std::string wb_key = prepack ? fmt::format(",WB={}", block) : "";
  if (!depthwise && n.epilogue.size() == 1 && n.epilogue[0].kind == Epilogue::Kind::kRelu) {
    size_t bias =
        has_bias
            ? slot(n.inputs[2])
            : constant_array({{w.out_channels}, std::vector<double>(w.out_channels, 0.0), false});
    return library_step(
        fmt::format("conv2d_bias_relu:{},O={},K={},S={},P={},D={},G={}{}", shape_keys,
                    w.out_channels, w.kh, w.sh, w.pt, w.dh, w.group, wb_key),
        {x, wt, bias, output_slot(n)});
  }
  std::string text =
      depthwise ? fmt::format("depthwise_conv2d:{},K={},S={},P={}", shape_keys, w.kh, w.sh, w.pt)
                : fmt::format("conv2d:{},O={},K={},S={},P={},D={},G={}{}", shape_keys,
                              w.out_channels, w.kh, w.sh, w.pt, w.dh, w.group, wb_key);
  if (!has_bias && n.epilogue.empty()) return library_step(text, {x, wt, output_slot(n)});
  size_t raw = new_array(out_shape);
  library_step(text, {x, wt, raw});
  std::vector<std::pair<size_t, std::vector<int64_t>>> extra;
  if (has_bias) extra.push_back({slot(n.inputs[2]), {1, w.out_channels, 1, 1}});
  epilogue_step(n, raw, out_shape, std::move(extra));
}

void Planner::plan_gemm(const Node& n) {
  GemmAttrs a = read_gemm(n, g_.shape(n.inputs[0]), g_.shape(n.inputs[1]));
  size_t lhs = a.trans_a ? transposed(n.inputs[0]) : slot(n.inputs[0]);
  bool has_c = n.inputs.size() > 2 && !n.inputs[2].empty();
  bool needs_epilogue = has_c || !n.epilogue.empty();
  std::vector<int64_t> out_shape{a.m, a.n};
  std::optional<DenseWeights> dense;
  if (g_.is_constant(n.inputs[1])) {
    // dense keeps weights [out][in], as Gemm with transB=1 stores them; alpha folds into them.
    HostTensor b = g_.constants.at(n.inputs[1]);
    HostTensor wt = a.trans_b ? b : transposed_2d(b);
    for (double& v : wt.data) v *= a.alpha;
    dense = dense_weights(wt, a.m);
    if (auto e = dense_epilogue(n, out_shape, has_c ? n.inputs[2] : "", a.beta))
      return dense_step(lhs, *dense, output_slot(n), *e);
  }
  size_t raw = needs_epilogue ? new_array(out_shape) : output_slot(n);
  if (dense) {
    dense_step(lhs, *dense, raw);
  } else {
    if (a.alpha != 1.0)
      throw_error("{}: alpha={} with non-constant B is not supported", n.where(), a.alpha);
    size_t rhs = a.trans_b ? transposed(n.inputs[1]) : slot(n.inputs[1]);
    library_step(fmt::format("matmul:M={},N={},K={}", a.m, a.n, a.k), {lhs, rhs, raw});
  }
  if (!needs_epilogue) return;
  std::vector<std::pair<size_t, std::vector<int64_t>>> extra;
  if (has_c) {
    const std::string& c = n.inputs[2];
    if (g_.is_constant(c)) {
      HostTensor scaled = g_.constants.at(c);
      for (double& v : scaled.data) v *= a.beta;
      extra.push_back({constant_array(scaled), scaled.shape});
    } else {
      if (a.beta != 1.0)
        throw_error("{}: beta={} with non-constant C is not supported", n.where(), a.beta);
      extra.push_back({slot(c), g_.shape(c)});
    }
  }
  epilogue_step(n, raw, out_shape, std::move(extra));
}

Planner::DenseWeights Planner::dense_weights(const HostTensor& weights, int64_t batch) {
  DenseWeights d;
  d.out = weights.shape.at(0);
  d.in = weights.shape.at(1);
  const int64_t lanes = target_isa().f32_lanes;
  // Blocks of the vector's lanes, the last zero-padded when they do not divide the outputs.
  d.block = batch >= 16 && d.out >= lanes ? lanes : 0;
  d.slot = constant_array(d.block > 0 ? packed_weights(weights, d.block) : weights);
  return d;
}

std::optional<Planner::DenseEpilogue> Planner::dense_epilogue(const Node& n,
                                                              const std::vector<int64_t>& out_shape,
                                                              const std::string& c, double beta) {
  const int64_t columns = out_shape.back();
  std::vector<double> bias(static_cast<size_t>(columns), 0.0);
  bool has_bias = false;
  std::optional<std::string> residual;
  int act = 0;
  // Takes `v` times `scale` into the bias or as the residual; false where it fits neither.
  auto add = [&](const std::string& v, double scale) {
    if (act != 0) return false;
    const std::vector<int64_t>& s = g_.shape(v);
    bool along_columns =
        num_elements(s) == 1 || (!s.empty() && s.back() == columns && num_elements(s) == columns &&
                                 s.size() <= out_shape.size());
    if (g_.is_constant(v) && along_columns) {
      const HostTensor& t = g_.constants.at(v);
      for (size_t j = 0; j < bias.size(); ++j)
        bias[j] += scale * t.data[t.data.size() == 1 ? 0 : j];
      has_bias = true;
      return true;
    }
    if (residual || scale != 1.0 || s != out_shape) return false;
    residual = v;
    return true;
  };
  if (!c.empty() && !add(c, beta)) return std::nullopt;
  for (const Epilogue& e : n.epilogue) {
    if (e.kind == Epilogue::Kind::kAdd) {
      if (!add(n.inputs[e.input], 1.0)) return std::nullopt;
      continue;
    }
    if (act != 0) return std::nullopt;
    if (e.kind == Epilogue::Kind::kClip) {
      if (e.lo != 0 || !(e.hi == 6 || std::isinf(e.hi))) return std::nullopt;
      act = std::isinf(e.hi) ? 1 : 2;
    } else {
      act = static_cast<int>(fused_activation(e.kind));
    }
  }
  DenseEpilogue d;
  d.act = act;
  if (has_bias) d.bias = constant_array({{columns}, bias, false});
  if (residual)
    d.residual =
        g_.is_constant(*residual) ? constant_array(g_.constants.at(*residual)) : slot(*residual);
  return d;
}

void Planner::dense_step(size_t x, const DenseWeights& w, size_t y, bool reversed) {
  dense_step(x, w, y, DenseEpilogue(), reversed);
}

void Planner::dense_step(size_t x, const DenseWeights& w, size_t y, const DenseEpilogue& e,
                         bool reversed) {
  const int64_t batch = static_cast<int64_t>(ex_.arrays_[x].num_elements()) / w.in;
  std::vector<size_t> args{x, w.slot};
  std::string keys = w.block > 0 ? fmt::format(",WB={}", w.block) : "";
  if (e.bias) {
    keys += ",BIAS=1";
    args.push_back(*e.bias);
  }
  if (e.residual) {
    keys += ",RES=1";
    args.push_back(*e.residual);
  }
  if (e.act != 0) keys += fmt::format(",ACT={}", e.act);
  args.push_back(y);
  library_step(fmt::format("dense:B={},I={},O={}{}", batch, w.in, w.out, keys), std::move(args),
               reversed);
}

void Planner::plan_matmul(const Node& n) {
  const std::vector<int64_t>& as = g_.shape(n.inputs[0]);
  const std::vector<int64_t>& bs = g_.shape(n.inputs[1]);
  std::vector<int64_t> out_shape = g_.shape(n.outputs[0]);
  int64_t m = as[as.size() - 2], k = as.back(), nn = bs.back();
  int64_t batch = num_elements(as) / (m * k);
  if (bs.size() == 2 && g_.is_constant(n.inputs[1])) {
    // Constant weights (a transformer's projections): dense, which keeps them [out][in] and
    // prepacks them, as Gemm's do; the plain matmul's default ran BERT's 128x768x3072 40 ms
    // against dense's 2.5 (Zen AVX2, 2 threads).
    DenseWeights weights = dense_weights(transposed_2d(g_.constants.at(n.inputs[1])), batch * m);
    if (auto e = dense_epilogue(n, out_shape, "", 1.0))
      return dense_step(slot(n.inputs[0]), weights, output_slot(n), *e);
    size_t raw = new_array(out_shape);
    dense_step(slot(n.inputs[0]), weights, raw);
    epilogue_step(n, raw, out_shape, {});
    return;
  }
  size_t raw = n.epilogue.empty() ? output_slot(n) : new_array(out_shape);
  std::vector<size_t> args{slot(n.inputs[0]), slot(n.inputs[1]), raw};
  if (bs.size() == 2) {
    library_step(fmt::format("matmul:M={},N={},K={}", batch * m, nn, k), args);
  } else {
    // Operands whose batch dimensions broadcast are copied out to the output's first.
    const std::vector<int64_t> out_batch(out_shape.begin(), out_shape.end() - 2);
    for (int side = 0; side < 2; ++side) {
      const std::vector<int64_t>& s = side == 0 ? as : bs;
      std::vector<int64_t> full = out_batch;
      full.insert(full.end(), s.end() - 2, s.end());
      if (s == full) continue;
      size_t expanded = new_array(full);
      te_step(elementwise_kernel(full, {s}, {}), {args[side], expanded});
      args[side] = expanded;
    }
    batch = num_elements(out_batch);
    library_step(fmt::format("batch_matmul:B={},M={},N={},K={}", batch, m, nn, k), args);
  }
  if (!n.epilogue.empty()) epilogue_step(n, raw, out_shape, {});
}

void Planner::plan_attention(const Node& n) {
  const std::vector<int64_t>& qs = g_.shape(n.inputs[0]);
  const int64_t m = qs[qs.size() - 2], d = qs.back(), keys = g_.shape(n.inputs[1]).back();
  const int64_t dv = g_.shape(n.inputs[2]).back();
  std::string text = fmt::format("attention:B={},M={},N={},D={},DV={}", num_elements(qs) / (m * d),
                                 m, keys, d, dv);
  std::vector<size_t> args{slot(n.inputs[0]), slot(n.inputs[1]), slot(n.inputs[2])};
  if (n.attr_int("tessera.bias", 0) != 0) {
    // The bias's leading dimensions of 1 broadcast: its elements are those of [BB, M, N].
    text += fmt::format(",BB={}", num_elements(g_.shape(n.inputs[3])) / (m * keys));
    args.push_back(slot(n.inputs[3]));
  }
  const std::vector<int64_t>& out_shape = g_.shape(n.outputs[0]);
  const size_t raw = n.epilogue.empty() ? output_slot(n) : new_array(out_shape);
  args.push_back(raw);
  library_step(text, std::move(args));
  if (!n.epilogue.empty()) epilogue_step(n, raw, out_shape, {});
}

void Planner::plan_pool(const Node& n) {
  Window2d w = read_window(n, g_.shape(n.inputs[0]), nullptr);
  bool is_max = n.op == "MaxPool";
  // The library's pooling takes one K, one stride, equal pads smaller than K and (average)
  // pads counted in the mean; any other window runs as the generic te kernel.
  if (!w.is_square_symmetric() || w.dh != 1 || w.pt >= w.kh ||
      (!is_max && w.pt > 0 && !w.count_include_pad))
    return te_step(pool2d_kernel(w, is_max), {slot(n.inputs[0]), output_slot(n)});
  library_step(
      fmt::format("{}:N={},C={},H={},W={},K={},S={},P={}", is_max ? "max_pool2d" : "avg_pool2d",
                  w.n, w.c, w.h, w.w, w.kh, w.sh, w.pt),
      {slot(n.inputs[0]), output_slot(n)});
}

void Planner::plan_blocked_conv(const Node& n, int64_t block) {
  Window2d w = read_window(n, g_.shape(n.inputs[0]), &g_.shape(n.inputs[1]));
  // Otherwise groups of whole blocks (choose_layouts), or one group.
  bool depthwise = w.group > 1 && w.group == w.c && w.out_channels == w.c;
  // Channels that fill no block (an image's three) are read as blocks of one: NCHW itself,
  // with no conversion.
  int64_t ib = depthwise || w.c % block == 0 ? block : 1;
  size_t x = blocked_slot(n.inputs[0], ib);
  // The kernel pads both ends of an axis alike (the depthwise one both axes alike): other pads
  // are written around the input first, and the convolution runs unpadded on it.
  if (w.pt != w.pb || w.pl != w.pr || (depthwise && w.pt != w.pl)) {
    TeKernel pad =
        pad_blocked_kernel(blocked_shape(g_.shape(n.inputs[0]), ib), w.pt, w.pl, w.pb, w.pr);
    size_t padded = new_array(pad.args.back()->shape);
    te_step(pad, {x, padded});
    x = padded;
    w.h += w.pt + w.pb;
    w.w += w.pl + w.pr;
    w.pt = w.pl = w.pb = w.pr = 0;
  }
  // Weights scaled per input channel (fold_channel_scales): the constant ones packed, then scaled.
  const Node* scaling = g_.is_constant(n.inputs[1]) ? nullptr : scaled_weights(g_, n.inputs[1]);
  const HostTensor& weights = g_.constants.at(scaling ? scaling->inputs[0] : n.inputs[1]);
  std::vector<double> bias(w.out_channels, 0.0);
  bool has_bias = n.inputs.size() > 2 && !n.inputs[2].empty();
  if (has_bias) bias = g_.constants.at(n.inputs[2]).data;
  std::optional<size_t> residual;
  int act = 0;
  for (const Epilogue& e : n.epilogue) {
    if (e.kind == Epilogue::Kind::kClip) {
      act = std::isinf(e.hi) ? 1 : 2;
    } else if (e.kind != Epilogue::Kind::kAdd) {
      act = static_cast<int>(fused_activation(e.kind));
    } else if (g_.is_constant(n.inputs[e.input]) &&
               is_per_channel(g_.shape(n.inputs[e.input]), w.out_channels)) {
      const HostTensor& add = g_.constants.at(n.inputs[e.input]);
      for (int64_t c = 0; c < w.out_channels; ++c) bias[c] += add.data[c];
      has_bias = true;
    } else {
      residual = blocked_slot(n.inputs[e.input], block);
    }
  }
  std::optional<size_t> bias_slot;
  if (has_bias) bias_slot = constant_array({{w.out_channels / block, block}, bias, false});
  if (n.attr_int(kWinogradAttr, 0) == 1)
    return plan_winograd_conv(n, w, block, x, bias_slot, residual, static_cast<Activation>(act));
  // A strided 1x1 convolution reads one position in `stride` along its rows; where a block of
  // channels is narrower than a cache line, half of each line it loads goes unused and its input
  // outgrows L2. Its rows and columns are copied out first and the convolution runs at stride 1:
  // ResNet-50's 1x1 stride-2 layers ran 143 -> 172, 156 -> 180 and 139 -> 180 GFLOP/s so (AMD
  // EPYC, AVX2, blocks of 8, 2 threads). A block of 16 fills the line and keeps the direct read.
  // (choose_layouts blocks square windows only: one K, one stride.)
  const bool pointwise = !depthwise && w.kh == 1 && w.pt == 0 && ib == block;
  constexpr int64_t kCacheLineFloats = 16;
  if (pointwise && w.sh > 1 && block < kCacheLineFloats) {
    TeKernel subsample =
        subsample_blocked_kernel(blocked_shape(g_.shape(n.inputs[0]), block), w.sh);
    size_t dense = new_array(subsample.args.back()->shape);
    te_step(subsample, {x, dense});
    x = dense;
    w.h = w.oh;
    w.w = w.ow;
    w.sh = w.sw = 1;
  }
  // A 1x1 stride-1 convolution reads and writes its positions in one contiguous run per block
  // of channels, so on AVX2 it runs as one row of H*W: the register tiles of 2 blocks x 6 columns
  // then cross rows, where a 14-wide row took 2 x 7 (one weight vector reloaded per column) or
  // 6 + 6 + 2. Alone, ResNet-50's 1x1 layers ran 168-194 GFLOP/s by rows and 170-205 so; in the
  // model its 14x14 and 28x28 ones saved 1.0 of 48.3 ms (AMD EPYC, Zen 2, 2 threads). Only where
  // the threads take channel tiles anyway (at least as many tiles of two blocks as rows): by
  // rows, MobileNet-v2's narrow layers shared one row between the threads, and the depthwise
  // layer after read what the other thread wrote (5.5 -> 7.0 ms). AVX-512 keeps rows: its 2 x 14
  // tiles fit a 14-wide row.
  if (pointwise && w.sh == 1 && target_isa().vector_registers < 32 &&
      w.out_channels / (2 * block) >= w.oh) {
    w.w = w.ow = w.h * w.w;
    w.h = w.oh = 1;
  }
  size_t wt = constant_array(depthwise ? blocked_depthwise_weights(weights, block)
                                       : blocked_conv_weights(weights, block, ib));
  if (scaling) {
    // [O/b][C/ib][K][K][ib][b] times the scale's [C/ib][ib].
    const std::vector<int64_t> packed{w.out_channels / block, w.c / ib, w.kh * w.kw, ib, block},
        per_channel{1, w.c / ib, 1, ib, 1};
    size_t scaled = new_array(ex_.arrays_[wt].shape());
    te_step(elementwise_kernel(packed, {packed, per_channel},
                               {{ElementwiseStep::Kind::kMul, 1, 0, 0, {}, {}}}),
            {part_array(wt, 0, packed), part_array(slot(scaling->inputs[1]), 0, per_channel),
             part_array(scaled, 0, packed)});
    wt = scaled;
  }
  std::vector<size_t> args{x, wt};
  if (bias_slot) args.push_back(*bias_slot);
  if (residual) args.push_back(*residual);
  args.push_back(blocked_output_slot(n, block));
  std::string epilogue =
      fmt::format(",BIAS={},RES={},ACT={}", has_bias ? 1 : 0, residual ? 1 : 0, act);
  std::string shape_keys = fmt::format("N={},C={},H={},W={}", w.n, w.c, w.h, w.w);
  // D only where dilated, so that the workloads (and their records) of the others stay as they
  // were.
  std::string dilation = w.dh > 1 ? fmt::format(",D={}", w.dh) : "";
  std::string groups = w.group > 1 ? fmt::format(",G={}", w.group) : "";
  // KW and PW only where the window is not square, likewise.
  std::string width = (w.kw != w.kh ? fmt::format(",KW={}", w.kw) : "") +
                      (w.pl != w.pt ? fmt::format(",PW={}", w.pl) : "");
  library_step(depthwise ? fmt::format("depthwise_conv2d_nchwc:{},K={},S={},P={}{},CB={}{}",
                                       shape_keys, w.kh, w.sh, w.pt, dilation, block, epilogue)
                         : fmt::format("conv2d_nchwc:{},O={},K={},S={},P={},D={}{},CB={},IB={}{}{}",
                                       shape_keys, w.out_channels, w.kh, w.sh, w.pt, w.dh, groups,
                                       block, ib == block ? 0 : ib, width, epilogue),
               std::move(args));
}

void Planner::plan_winograd_conv(const Node& n, const Window2d& w, int64_t block, size_t x,
                                 std::optional<size_t> bias, std::optional<size_t> residual,
                                 Activation act) {
  std::vector<int64_t> in = blocked_shape(g_.shape(n.inputs[0]), block);
  auto [th, tw] = winograd_tiles(w.oh, w.ow);
  const int64_t rows = winograd_rows(th * tw), products = kWinogradAlpha * kWinogradAlpha;
  size_t transformed = new_array({products, rows, w.c});
  te_step(winograd_input_kernel(in), {x, transformed});
  size_t weights = constant_array(winograd_weights(g_.constants.at(n.inputs[1])));
  size_t product = new_array({products, rows, w.out_channels});
  library_step(fmt::format("batch_matmul:B={},M={},N={},K={}", products, rows, w.out_channels, w.c),
               {transformed, weights, product});
  std::vector<int64_t> out = blocked_shape(g_.shape(n.outputs[0]), block);
  std::vector<size_t> args{product};
  if (winograd_output_is_padded(out)) {
    size_t whole_tiles = new_array(winograd_padded_output(out));
    te_step(winograd_output_kernel(out, false, false, Activation::kNone), {product, whole_tiles});
    args = {whole_tiles};
  }
  if (bias) args.push_back(*bias);
  if (residual) args.push_back(*residual);
  args.push_back(blocked_output_slot(n, block));
  te_step(winograd_output_is_padded(out)
              ? winograd_crop_kernel(out, bias.has_value(), residual.has_value(), act)
              : winograd_output_kernel(out, bias.has_value(), residual.has_value(), act),
          std::move(args));
}

void Planner::plan_blocked(const Node& n, int64_t block) {
  if (n.op == "Conv") return plan_blocked_conv(n, block);
  const std::vector<int64_t>& in = g_.shape(n.inputs[0]);
  if (n.op == "MaxPool" || n.op == "AveragePool") {
    Window2d w = read_window(n, in, nullptr);
    // ceil_mode's last window (an overhang) reads past the bottom and right pads, into more of
    // the max's fill.
    return te_step(
        pool_blocked_kernel(blocked_shape(in, block), w.kh, w.sh, w.read_pads(), n.op == "MaxPool"),
        {blocked_slot(n.inputs[0], block), blocked_output_slot(n, block)});
  }
  if (n.op == "Concat") {
    // [N][C/b][H][W][b] joined along the blocks of channels; no kernel where every input was
    // written in its place (place_concat_inputs).
    Placement home{n.outputs[0], 0};
    if (auto p = placed_.find(n.outputs[0]); p != placed_.end()) home = p->second;
    bool in_place = true;
    int64_t offset = home.offset;
    std::vector<std::vector<int64_t>> shapes;
    std::vector<size_t> args;
    for (const std::string& v : n.inputs) {
      auto p = placed_.find(v);
      in_place = in_place && p != placed_.end() && p->second == Placement{home.root, offset};
      offset += num_elements(g_.shape(v));
      shapes.push_back(blocked_shape(g_.shape(v), block));
      args.push_back(blocked_slot(v, block));
    }
    args.push_back(blocked_output_slot(n, block));
    if (in_place) return;
    return te_step(concat_kernel(shapes, 1), std::move(args));
  }
  if (n.op == kGatherChannels) {
    const ChannelGather c = read_channel_gather(n, g_);
    std::vector<std::vector<int64_t>> shapes;
    std::vector<size_t> args;
    for (const std::string& v : n.inputs) {
      shapes.push_back(blocked_shape(g_.shape(v), block));
      args.push_back(blocked_slot(v, block));
    }
    args.push_back(blocked_output_slot(n, block));
    return te_step(gather_channels_kernel(shapes, c.sources, c.channels, block), std::move(args));
  }
  if (n.op == "DepthToSpace" || n.op == "tessera.PixelShuffle")
    return te_step(
        depth_to_space_blocked_kernel(blocked_shape(in, block), read_depth_to_space(n, in)),
        {blocked_slot(n.inputs[0], block), blocked_output_slot(n, block)});
  if (n.op == "GlobalAveragePool")
    return te_step(global_avg_pool_kernel(blocked_shape(in, block)),
                   {blocked_slot(n.inputs[0], block), output_slot(n)});
  plan_elementwise_chain(n, elementwise_chain(), block);
}

void Planner::plan_batch_norm(const Node& n) {
  for (size_t k = 1; k <= 4; ++k)
    if (!g_.is_constant(n.inputs[k]))
      throw_error("{}: parameter '{}' is not a constant", n.where(), n.inputs[k]);
  const auto& x = g_.shape(n.inputs[0]);
  int64_t c = x[1];
  double eps = n.attr_float("epsilon", 1e-5);
  std::vector<int64_t> param_shape(x.size(), 1);
  param_shape[1] = c;
  HostTensor s{param_shape, std::vector<double>(c), false}, t = s;
  for (int64_t i = 0; i < c; ++i) {
    s.data[i] = g_.constants.at(n.inputs[1]).data[i] /
                std::sqrt(g_.constants.at(n.inputs[4]).data[i] + eps);
    t.data[i] =
        g_.constants.at(n.inputs[2]).data[i] - g_.constants.at(n.inputs[3]).data[i] * s.data[i];
  }
  std::vector<ElementwiseStep> steps{{ElementwiseStep::Kind::kMul, 1, 0, 0, {}, {}},
                                     {ElementwiseStep::Kind::kAdd, 2, 0, 0, {}, {}}};
  std::vector<size_t> args{slot(n.inputs[0]), constant_array(s), constant_array(t), output_slot(n)};
  te_step(elementwise_kernel(x, {x, param_shape, param_shape}, steps), std::move(args));
}

}  // namespace tessera::graph
