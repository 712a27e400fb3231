#include "graph/kernels.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "lower/lower.h"
#include "ops/nn.h"
#include "runtime/isa.h"
#include "schedule/strategy_parser.h"
#include "te/error.h"

namespace tessera::graph {

namespace {

std::vector<std::string> axis_names(size_t rank) {
  std::vector<std::string> names;
  for (size_t i = 0; i < rank; ++i) names.push_back(fmt::format("i{}", i));
  return names;
}

// Index expressions reading a tensor of shape `from` broadcast to the output axes `at`.
std::vector<Expr> broadcast_at(const std::vector<Var>& at, const std::vector<int64_t>& from) {
  std::vector<Expr> idx;
  size_t offset = at.size() - from.size();
  for (size_t d = 0; d < from.size(); ++d)
    idx.push_back(from[d] == 1 ? Expr(0) : Expr(at[offset + d]));
  return idx;
}

}  // namespace

// The graph kernels' one schedule: threads over the first dimension with more than one
// iteration (the batch of one is skipped by fusing it into the next), so that a kernel over
// [1, C, H, W] still spreads its channels across the cores.
TeKernel finish_kernel(std::string name, std::vector<Tensor> args, const std::string& first,
                       bool auto_parallel, int64_t reduced_elements) {
  Program program = lower(name, args);
  if (!first.empty()) {
    RewriteResult<Program> r = parse_strategy(first)(program);
    if (!r) throw_internal("graph kernel {}: {}", name, r.message());
    program = r.program();
  }
  if (!auto_parallel) return {std::move(name), std::move(args), std::move(program)};
  const Tensor& out = args.back();
  int64_t elements = 1;
  for (int64_t d : out->shape) elements *= d;
  elements = std::max(elements, reduced_elements);
  std::vector<std::string> strategies;  // the first that applies
  const std::vector<int64_t>& shape = out->shape;
  if (elements >= kParallelElements && shape.size() >= 3 && shape[0] * shape[1] < 8) {
    // Too few images x channel blocks to share (the image's one block of 3 channels, the 4 blocks
    // of a 64-channel value): the rows join the parallel loop.
    strategies.push_back("fuse(i0, i1) ; fuse(i0.i1.fused, i2) ; parallel(i0.i1.fused.i2.fused)");
  }
  if (elements >= kParallelElements && shape.size() >= 2 && shape[0] == 1) {
    strategies.push_back("fuse(i0, i1) ; parallel(i0.i1.fused)");
  } else if (elements >= kParallelElements) {
    strategies.push_back("parallel(i0)");
  }
  for (const std::string& strategy : strategies) {
    RewriteResult<Program> r = parse_strategy(strategy)(program);
    if (!r) continue;
    program = r.program();
    break;
  }
  return {std::move(name), std::move(args), std::move(program)};
}

namespace {

// The same elementwise computation over fewer dimensions: neighbouring output dimensions merge
// where every input either spans both or broadcasts along both, as the arrays are contiguous.
// [1, 576, 14, 14] + [1, 576, 1, 1] becomes [576, 196] + [576, 1]: the threads take channels and
// the inner loop is one contiguous run the C compiler vectorizes, where a row of 14 was not.
void merge_dimensions(std::vector<int64_t>& out, std::vector<std::vector<int64_t>>& inputs) {
  for (std::vector<int64_t>& in : inputs) in.insert(in.begin(), out.size() - in.size(), 1);
  for (size_t d = 0; d + 1 < out.size();) {
    bool mergeable = true;
    for (const std::vector<int64_t>& in : inputs) {
      bool spans = in[d] == out[d] && in[d + 1] == out[d + 1];
      bool broadcasts = in[d] == 1 && in[d + 1] == 1;
      mergeable = mergeable && (spans || broadcasts);
    }
    if (!mergeable) {
      ++d;
      continue;
    }
    out[d] *= out[d + 1];
    out.erase(out.begin() + static_cast<long>(d) + 1);
    for (std::vector<int64_t>& in : inputs) {
      in[d] *= in[d + 1];
      in.erase(in.begin() + static_cast<long>(d) + 1);
    }
  }
}

}  // namespace

TeKernel elementwise_kernel(const std::vector<int64_t>& full_out_shape,
                            const std::vector<std::vector<int64_t>>& full_inputs,
                            const std::vector<ElementwiseStep>& steps) {
  for (const std::vector<int64_t>& in : full_inputs)
    if (in.size() > full_out_shape.size())
      throw_internal("elementwise input has a higher rank than the output");
  std::vector<int64_t> out_shape = full_out_shape;
  std::vector<std::vector<int64_t>> inputs = full_inputs;
  merge_dimensions(out_shape, inputs);
  // The last dimension as rows of whole vectors, the innermost loop vectorized: the functions
  // of the operator table (Sigmoid's exp) then run on whole vectors, not one libm call a lane
  // (EfficientNet-B0's SiLU kernels took 14 of its 25 ms that way).
  const int64_t lanes = target_isa().f32_lanes;
  const bool vector = !out_shape.empty() && out_shape.back() % lanes == 0;
  if (vector) {
    for (std::vector<int64_t>& in : inputs) {
      if (in.back() == out_shape.back()) {
        in.back() /= lanes;
        in.push_back(lanes);
      } else {
        in.push_back(1);
      }
    }
    out_shape.back() /= lanes;
    out_shape.push_back(lanes);
  }
  std::vector<Tensor> args;
  for (size_t i = 0; i < inputs.size(); ++i)
    args.push_back(placeholder(inputs[i], DType::kFloat32, fmt::format("in{}", i)));
  Tensor out = compute(
      out_shape,
      [&](const std::vector<Var>& at) {
        Expr v = args[0](broadcast_at(at, inputs[0]));
        for (const ElementwiseStep& s : steps) {
          switch (s.kind) {
            case ElementwiseStep::Kind::kAdd:
              v = v + args.at(s.input)(broadcast_at(at, inputs[s.input]));
              break;
            case ElementwiseStep::Kind::kMul:
              v = v * args.at(s.input)(broadcast_at(at, inputs[s.input]));
              break;
            case ElementwiseStep::Kind::kRelu:
              v = max(v, make_float(0.0, DType::kFloat32));
              break;
            case ElementwiseStep::Kind::kClip:
              // Infinite bounds (an open side of Clip) are left out rather than printed as C.
              if (std::isfinite(s.lo)) v = max(v, make_float(s.lo, DType::kFloat32));
              if (std::isfinite(s.hi)) v = min(v, make_float(s.hi, DType::kFloat32));
              break;
            case ElementwiseStep::Kind::kScalar: {
              std::vector<Expr> operands{v};
              for (int i : s.inputs) operands.push_back(args.at(i)(broadcast_at(at, inputs[i])));
              v = s.scalar(operands);
              break;
            }
          }
        }
        return v;
      },
      "out", axis_names(out_shape.size()));
  args.push_back(out);
  return finish_kernel("elementwise", std::move(args),
                       vector ? fmt::format("vectorize(i{})", out_shape.size() - 1) : "");
}

namespace {

// The same permutation over fewer dimensions: ones dropped, and input dimensions that stay
// neighbours in the same order merged, as the arrays are contiguous. BERT's query/key/value split
// [1, 128, 1, 3, 768] -> [3, 128, 1, 1, 768] becomes [128, 3, 768] -> [3, 128, 768], whose rows of
// 768 are copied whole.
void merge_permuted(std::vector<int64_t>& in_shape, std::vector<int64_t>& perm) {
  std::vector<int64_t> kept(in_shape.size(), -1);  // input dimension -> index among the kept
  std::vector<int64_t> shape;
  for (size_t d = 0; d < in_shape.size(); ++d) {
    if (in_shape[d] == 1) continue;
    kept[d] = static_cast<int64_t>(shape.size());
    shape.push_back(in_shape[d]);
  }
  std::vector<int64_t> order;  // the kept input dimensions in output order
  for (int64_t d : perm)
    if (kept[d] >= 0) order.push_back(kept[d]);
  // Runs of consecutive input dimensions in the output become one dimension each.
  std::vector<std::vector<int64_t>> runs;
  for (int64_t d : order) {
    if (!runs.empty() && runs.back().back() + 1 == d) {
      runs.back().push_back(d);
    } else {
      runs.push_back({d});
    }
  }
  std::vector<std::vector<int64_t>> by_input = runs;
  std::sort(by_input.begin(), by_input.end());
  in_shape.clear();
  for (const auto& run : by_input) {
    int64_t extent = 1;
    for (int64_t d : run) extent *= shape[d];
    in_shape.push_back(extent);
  }
  perm.clear();
  for (const auto& run : runs)
    perm.push_back(std::lower_bound(by_input.begin(), by_input.end(), run) - by_input.begin());
}

}  // namespace

TeKernel transpose_kernel(const std::vector<int64_t>& full_in_shape,
                          const std::vector<int64_t>& full_perm) {
  std::vector<int64_t> in_shape = full_in_shape, perm = full_perm;
  merge_permuted(in_shape, perm);
  if (in_shape.empty()) {  // every dimension 1
    in_shape = {1};
    perm = {0};
  }
  // Where the innermost dimension stays innermost, its rows are copied in whole vectors.
  const int64_t lanes = target_isa().f32_lanes;
  const size_t rank = in_shape.size();
  const bool vector = perm.back() == static_cast<int64_t>(rank) - 1 && in_shape.back() % lanes == 0;
  if (vector) {
    in_shape.back() /= lanes;
    in_shape.push_back(lanes);
    perm.push_back(static_cast<int64_t>(rank));
  }
  Tensor in = placeholder(in_shape, DType::kFloat32, "in");
  std::vector<int64_t> out_shape;
  for (int64_t p : perm) out_shape.push_back(in_shape[p]);
  Tensor out = compute(
      out_shape,
      [&](const std::vector<Var>& at) {
        std::vector<Expr> idx(in_shape.size());
        for (size_t d = 0; d < perm.size(); ++d) idx[perm[d]] = at[d];
        return in(idx);
      },
      "out", axis_names(out_shape.size()));
  std::string schedule = vector ? fmt::format("vectorize(i{})", out_shape.size() - 1) : "";
  int64_t elements = 1;
  for (int64_t d : out_shape) elements *= d;
  // A few outer rows (the 3 of query, key and value) would leave a thread idle: the threads
  // take the first two dimensions together.
  if (elements >= kParallelElements && out_shape.size() >= 3 && out_shape[0] < 16) {
    schedule = "fuse(i0, i1) ; parallel(i0.i1.fused)" + (schedule.empty() ? "" : " ; " + schedule);
    return finish_kernel("transpose", {in, out}, schedule, /*auto_parallel=*/false);
  }
  return finish_kernel("transpose", {in, out}, schedule);
}

TeKernel concat_kernel(const std::vector<std::vector<int64_t>>& inputs, int64_t axis) {
  std::vector<Tensor> args;
  std::vector<int64_t> out_shape = inputs.at(0);
  out_shape[axis] = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    args.push_back(placeholder(inputs[i], DType::kFloat32, fmt::format("in{}", i)));
    out_shape[axis] += inputs[i][axis];
  }
  Tensor out = compute(
      out_shape,
      [&](const std::vector<Var>& at) {
        // Nested selects from the last input backwards; only the chosen branch is read.
        int64_t offset = out_shape[axis] - inputs.back()[axis];
        auto read = [&](size_t i, int64_t off) {
          std::vector<Expr> idx(at.begin(), at.end());
          idx[axis] = idx[axis] - static_cast<int>(off);
          return args[i](idx);
        };
        Expr v = read(inputs.size() - 1, offset);
        for (size_t i = inputs.size() - 1; i-- > 0;) {
          offset -= inputs[i][axis];
          v = select(Expr(at[axis]) < static_cast<int>(offset + inputs[i][axis]), read(i, offset),
                     v);
        }
        return v;
      },
      "out", axis_names(out_shape.size()));
  args.push_back(out);
  return finish_kernel("concat", std::move(args));
}

namespace {

// The output channels one input fills at a constant stride, from its channels at a constant
// stride: a channel shuffle's half is two of them (even outputs from one input, odd from the
// other), a concatenation one per input.
struct ChannelRun {
  int source = 0;
  int64_t first_out = 0, out_step = 1, first_in = 0, in_step = 1, count = 1;
};

std::vector<ChannelRun> channel_runs(const std::vector<int64_t>& sources,
                                     const std::vector<int64_t>& channels) {
  std::vector<ChannelRun> runs;
  std::vector<bool> taken(sources.size(), false);
  for (size_t k = 0; k < sources.size(); ++k) {
    if (taken[k]) continue;
    ChannelRun r{static_cast<int>(sources[k]), static_cast<int64_t>(k), 1, channels[k], 1, 1};
    taken[k] = true;
    // The next output of the same source sets the strides; the run goes on while they hold.
    size_t next = k + 1;
    while (next < sources.size() && sources[next] != sources[k]) ++next;
    if (next < sources.size()) {
      r.out_step = static_cast<int64_t>(next - k);
      r.in_step = channels[next] - channels[k];
      for (size_t j = next; j < sources.size() && sources[j] == sources[k] && !taken[j] &&
                            channels[j] == r.first_in + r.count * r.in_step;
           j += static_cast<size_t>(r.out_step)) {
        taken[j] = true;
        ++r.count;
      }
    }
    runs.push_back(r);
  }
  return runs;
}

}  // namespace

TeKernel gather_channels_kernel(const std::vector<std::vector<int64_t>>& inputs,
                                const std::vector<int64_t>& sources,
                                const std::vector<int64_t>& channels, int64_t block) {
  std::vector<Tensor> args;
  for (size_t i = 0; i < inputs.size(); ++i)
    args.push_back(placeholder(inputs[i], DType::kFloat32, fmt::format("in{}", i)));
  const auto count = static_cast<int64_t>(sources.size());
  std::vector<int64_t> out_shape = inputs.at(0);
  out_shape[1] = block > 0 ? count / block : count;
  const std::vector<ChannelRun> runs = channel_runs(sources, channels);
  Tensor out = compute(
      out_shape,
      [&](const std::vector<Var>& at) {
        Expr k = block > 0 ? Expr(at[1]) * static_cast<int>(block) + Expr(at[4]) : Expr(at[1]);
        auto read = [&](const ChannelRun& r) {
          // The run's j-th output is k = first_out + j * out_step.
          Expr j = k - static_cast<int>(r.first_out);
          if (r.out_step > 1) j = j / static_cast<int>(r.out_step);
          Expr c = j * static_cast<int>(r.in_step) + static_cast<int>(r.first_in);
          std::vector<Expr> idx(at.begin(), at.end());
          if (block > 0) {
            idx[1] = c / static_cast<int>(block);
            idx[4] = c % static_cast<int>(block);
          } else {
            idx[1] = c;
          }
          return args[static_cast<size_t>(r.source)](idx);
        };
        // Nested selects from the last run backwards; every channel is in exactly one run, and
        // only the chosen branch is read.
        Expr v = read(runs.back());
        for (size_t i = runs.size() - 1; i-- > 0;) {
          const ChannelRun& r = runs[i];
          const auto last = static_cast<int>(r.first_out + (r.count - 1) * r.out_step);
          Expr in_run = k >= static_cast<int>(r.first_out) && k <= last;
          if (r.out_step > 1 && r.count > 1)
            in_run =
                in_run &&
                eq((k - static_cast<int>(r.first_out)) % static_cast<int>(r.out_step), Expr(0));
          v = select(in_run, read(r), v);
        }
        return v;
      },
      "out", axis_names(out_shape.size()));
  args.push_back(out);
  if (block == 0) return finish_kernel("gather_channels", std::move(args));
  // Blocked: per pixel, every output channel unrolled, so that each choice of run is a constant
  // the C compiler folds away and each output vector is built from plain loads.
  return finish_kernel("gather_channels", std::move(args),
                       "reorder(i0, i2, i3, i1, i4) ; unroll(i4) ; unroll(i1) ; fuse(i0, i2) ; "
                       "parallel(i0.i2.fused)",
                       /*auto_parallel=*/false);
}

TeKernel global_avg_pool_kernel(const std::vector<int64_t>& in_shape) {
  Tensor in = placeholder(in_shape, DType::kFloat32, "in");
  IterVar ry = reduce_axis(in_shape[2], "ry"), rx = reduce_axis(in_shape[3], "rx");
  double scale = 1.0 / static_cast<double>(in_shape[2] * in_shape[3]);
  bool blocked = in_shape.size() == 5;
  std::vector<int64_t> out_shape{in_shape[0], in_shape[1], 1, 1};
  if (blocked) out_shape.push_back(in_shape[4]);
  Tensor out = compute(
      out_shape,
      [&](const std::vector<Var>& at) {
        std::vector<Expr> idx{at[0], at[1], ry.var, rx.var};
        if (blocked) idx.push_back(at[4]);
        return sum(in(idx)*make_float(scale, DType::kFloat32), {ry, rx});
      },
      "out", axis_names(out_shape.size()));
  // Blocked: the window outside the block's lanes, so each step adds one whole vector. The
  // threads count by what it reads: as its few outputs, EfficientNet-B0's 112x112x32 pool ran on
  // one thread.
  int64_t reads = 1;
  for (int64_t d : in_shape) reads *= d;
  return finish_kernel("global_avg_pool", {in, out},
                       blocked ? "reorder(i0, i1, i2, i3, ry, rx, i4) ; vectorize(i4)" : "", true,
                       reads);
}

TeKernel to_blocked_kernel(const std::vector<int64_t>& nchw, int64_t block) {
  Tensor in = placeholder(nchw, DType::kFloat32, "in");
  Tensor out = compute(
      {nchw[0], nchw[1] / block, nchw[2], nchw[3], block},
      [&](const std::vector<Var>& at) {
        return in(at[0], at[1] * static_cast<int>(block) + at[4], at[2], at[3]);
      },
      "out", axis_names(5));
  return finish_kernel("to_blocked", {in, out});
}

TeKernel from_blocked_kernel(const std::vector<int64_t>& nchw, int64_t block) {
  Tensor in =
      placeholder({nchw[0], nchw[1] / block, nchw[2], nchw[3], block}, DType::kFloat32, "in");
  int b = static_cast<int>(block);
  Tensor out = compute(
      nchw,
      [&](const std::vector<Var>& at) { return in(at[0], at[1] / b, at[2], at[3], at[1] % b); },
      "out", axis_names(4));
  return finish_kernel("from_blocked", {in, out});
}

TeKernel pool_blocked_kernel(const std::vector<int64_t>& in_shape, int64_t k, int64_t stride,
                             const std::array<int64_t, 4>& pads, bool is_max) {
  Tensor in = placeholder(in_shape, DType::kFloat32, "in");
  const double fill = is_max ? std::numeric_limits<float>::lowest() : 0.0;
  const auto [top, left, bottom, right] = pads;
  const bool pad = top > 0 || left > 0 || bottom > 0 || right > 0;
  Tensor padded =
      pad ? pad_nchw_sides(in, top, left, bottom, right, make_float(fill, DType::kFloat32)) : in;
  IterVar ry = reduce_axis(k, "ry"), rx = reduce_axis(k, "rx");
  int s = static_cast<int>(stride);
  int64_t oh = (in_shape[2] + top + bottom - k) / stride + 1,
          ow = (in_shape[3] + left + right - k) / stride + 1;
  // The mean with pads counted: each tap weighted by one divisor (an FMA per tap).
  const Expr weight = make_float(1.0 / static_cast<double>(k * k), DType::kFloat32);
  Tensor out = compute(
      {in_shape[0], in_shape[1], oh, ow, in_shape[4]},
      [&](const std::vector<Var>& at) {
        Expr tap = padded(at[0], at[1], at[2] * s + ry.var, at[3] * s + rx.var, at[4]);
        return is_max ? max(tap, {ry, rx}) : sum(tap * weight, {ry, rx});
      },
      "out", axis_names(5));
  // The padding read in place (one test per vector, the block shares it), the window outside
  // the block's lanes and unrolled, each output vector accumulated in a register (through memory
  // every tap waited on the store before it) and written once.
  std::string first = "reorder(i0, i1, i2, i3, ry, rx, i4) ; vectorize(i4)";
  if (pad) first += " ; compute_inline(pad)";
  first += " ; cache_write(out, i3) ; unroll(rx) ; unroll(ry) ; try(drop_init(out))";
  return finish_kernel(is_max ? "max_pool_blocked" : "avg_pool_blocked", {in, out}, first);
}

TeKernel subsample_blocked_kernel(const std::vector<int64_t>& in_shape, int64_t stride) {
  Tensor in = placeholder(in_shape, DType::kFloat32, "in");
  int s = static_cast<int>(stride);
  Tensor out = compute(
      {in_shape[0], in_shape[1], (in_shape[2] - 1) / stride + 1, (in_shape[3] - 1) / stride + 1,
       in_shape[4]},
      [&](const std::vector<Var>& at) { return in(at[0], at[1], at[2] * s, at[3] * s, at[4]); },
      "out", axis_names(5));
  return finish_kernel("subsample_blocked", {in, out}, "vectorize(i4)");
}

TeKernel depth_to_space_blocked_kernel(const std::vector<int64_t>& in_shape,
                                       const DepthToSpace& d) {
  if (!d.dcr) throw_internal("blocked depth_to_space needs DCR order");
  Tensor in = placeholder(in_shape, DType::kFloat32, "in");
  const auto bh = static_cast<int>(d.bh), bw = static_cast<int>(d.bw);
  const auto top = static_cast<int>(d.top), left = static_cast<int>(d.left);
  const int64_t out_blocks = in_shape[1] / (d.bh * d.bw);
  Tensor out = compute(
      {in_shape[0], out_blocks, d.oh, d.ow, in_shape[4]},
      [&](const std::vector<Var>& at) {
        Expr y = at[2] + top, x = at[3] + left;
        Expr phase = y % bh * bw + x % bw;
        return in(at[0], phase * static_cast<int>(out_blocks) + at[1], y / bh, x / bw, at[4]);
      },
      "out", axis_names(5));
  return finish_kernel("depth_to_space_blocked", {in, out}, "vectorize(i4)");
}

TeKernel pad_blocked_kernel(const std::vector<int64_t>& in_shape, int64_t top, int64_t left,
                            int64_t bottom, int64_t right) {
  Tensor in = placeholder(in_shape, DType::kFloat32, "in");
  const auto h = static_cast<int>(in_shape[2]), w = static_cast<int>(in_shape[3]);
  const auto t = static_cast<int>(top), l = static_cast<int>(left);
  Tensor out = compute(
      {in_shape[0], in_shape[1], in_shape[2] + top + bottom, in_shape[3] + left + right,
       in_shape[4]},
      [&](const std::vector<Var>& at) {
        Expr inside =
            at[2] >= Expr(t) && at[2] < Expr(t + h) && at[3] >= Expr(l) && at[3] < Expr(l + w);
        return select(inside, in(at[0], at[1], at[2] - t, at[3] - l, at[4]),
                      make_float(0.0, DType::kFloat32));
      },
      "out", axis_names(5));
  // Blocks of one: an image's NCHW channels, read as blocks by a convolution (plan_blocked_conv).
  return finish_kernel("pad_blocked", {in, out}, in_shape[4] > 1 ? "vectorize(i4)" : "");
}

}  // namespace tessera::graph
