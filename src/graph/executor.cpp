// Planning maps each node to kernel steps over value slots (the schedule of each library kernel
// comes from graph/choose_schedule.h); building compiles every distinct kernel into one loaded
// module and lays values out in one arena; running calls the steps in order.
#include "graph/executor.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <optional>

#include "codegen/codegen_c.h"
#include "graph/choose_schedule.h"
#include "graph/kernels.h"
#include "graph/op_attrs.h"
#include "graph/op_table.h"
#include "graph/passes.h"
#include "graph/weight_layouts.h"
#include "graph/winograd.h"
#include "ops/workload.h"
#include "runtime/isa.h"
#include "runtime/parallel_jobs.h"
#include "te/error.h"

namespace tessera::graph {

std::string kernel_entry(size_t index) {
  return fmt::format("tsr_kernel{}", index);
}

class Planner {
 public:
  // With `collect` set the planner only lists the library workloads it meets, in order.
  Planner(const Graph& g, const ExecutorParams& p, Executor& ex,
          std::vector<PlannedWorkload>* collect = nullptr)
      : g_(g), params_(p), ex_(ex), collect_(collect), chooser_(collect ? ExecutorParams{} : p) {}

  void plan() {
    for (const std::string& v : g_.inputs) {
      ex_.input_slots_.push_back(new_array(g_.shape(v)));
      slots_[v] = ex_.input_slots_.back();
      bool ids = g_.int_inputs.count(v) > 0;
      ex_.input_ids_.push_back(ids ? std::optional(std::vector<int64_t>(
                                         static_cast<size_t>(num_elements(g_.shape(v))), 0))
                                   : std::nullopt);
      ex_.input_id_bound_.push_back(ids ? id_bound(g_, v) : 0);
    }
    for (size_t i = 0; i < g_.nodes.size(); ++i)
      for (const std::string& v : g_.nodes[i].outputs) producer_[v] = i;
    chained_.assign(g_.nodes.size(), false);
    place_concat_inputs();
    for (size_t i = 0; i < g_.nodes.size(); ++i) {
      if (chained_[i]) continue;  // computed by the kernel of an earlier elementwise node
      node_ = &g_.nodes[i];
      head_ = i;
      plan_node(g_.nodes[i]);
    }
    ex_.input_names_ = g_.inputs;
    ex_.output_names_ = g_.outputs;
    for (const std::string& v : g_.outputs) {
      ex_.output_slots_.push_back(slot(v));
      ex_.output_shapes_.push_back(g_.shape(v));
    }
  }

  void compile() {
    ex_.modules_.resize(ex_.codes_.size());
    std::vector<std::string> errors(ex_.codes_.size());
    run_parallel_jobs(ex_.codes_.size(), params_.compile_jobs, [&](size_t i) {
      try {
        CompileOptions opts;
        opts.entry = kernel_entry(i);
        ex_.modules_[i] = std::make_shared<Module>(Module::compile(ex_.codes_[i], opts));
      } catch (const Error& e) {
        errors[i] = e.what();
      }
    });
    for (size_t i = 0; i < errors.size(); ++i)
      if (!errors[i].empty())
        throw KernelBuildError(
            fmt::format("kernel {} does not compile: {}", ex_.kernels_[i].workload, errors[i]));
    // Values share one arena where their lifetimes do not overlap, as in the exported library:
    // a model then touches a few MB of activations instead of one buffer per value, and keeps
    // its weights in cache (ResNet-18: 31.9 MB of separate buffers; 11.2 -> 10.7 ms, Xeon).
    Executor::MemoryPlan memory = ex_.plan_memory();
    ex_.arena_ = NDArray::empty({static_cast<int64_t>(std::max<size_t>(memory.arena_bytes, 4) / 4)},
                                DType::kFloat32);
    auto* base = static_cast<unsigned char*>(ex_.arena_.data());
    for (size_t a = 0; a < ex_.arrays_.size(); ++a) {
      NDArray& array = ex_.arrays_[a];
      if (memory.in_arena[a]) {
        array = NDArray::view(base + memory.offsets[a], array.shape(), array.dtype());
      } else if (const auto& part = ex_.part_of_[a]; part && ex_.constant_[a]) {
        array =
            NDArray::view(static_cast<unsigned char*>(ex_.arrays_[part->of].data()) + part->bytes,
                          array.shape(), array.dtype());
      }
    }
    // The data pointers are final now.
    for (Executor::Step& s : ex_.steps_)
      for (size_t slot : s.slots) s.args.push_back(ex_.arrays_[slot].data());
  }

 private:
  size_t new_array(const std::vector<int64_t>& shape) {
    ex_.arrays_.push_back(NDArray::empty(shape, DType::kFloat32));
    ex_.constant_.push_back(false);
    ex_.part_of_.push_back(std::nullopt);
    return ex_.arrays_.size() - 1;
  }

  size_t constant_array(const HostTensor& t) {
    ex_.arrays_.push_back(to_ndarray(t));
    ex_.constant_.push_back(true);
    ex_.part_of_.push_back(std::nullopt);
    return ex_.arrays_.size() - 1;
  }

  // Elements [start, start + size of `shape`) of array `of`, as an array of `shape`: no copy.
  size_t part_array(size_t of, int64_t start, const std::vector<int64_t>& shape) {
    if (start < 0 ||
        static_cast<size_t>(start + num_elements(shape)) > ex_.arrays_[of].num_elements())
      throw_internal("part [{}, +{}) of an array of {} elements", start, num_elements(shape),
                     ex_.arrays_[of].num_elements());
    Executor::SubArray part{of, static_cast<size_t>(start) * sizeof(float)};
    if (const auto& outer = ex_.part_of_[of]) part = {outer->of, outer->bytes + part.bytes};
    // A placeholder until compile() points it into the arena or the weights.
    ex_.arrays_.push_back(NDArray::view(ex_.arrays_[of].data(), shape, DType::kFloat32));
    ex_.constant_.push_back(ex_.constant_[of]);
    ex_.part_of_.push_back(part);
    return ex_.arrays_.size() - 1;
  }

  // The slot holding a value in NCHW: a runtime input, a node output, or a constant uploaded
  // once; a value produced in channel blocks is converted back here, once.
  size_t slot(const std::string& value) {
    auto it = slots_.find(value);
    if (it != slots_.end()) return it->second;
    auto b = produced_block_.find(value);
    if (b != produced_block_.end()) {
      const std::vector<int64_t>& shape = g_.shape(value);
      size_t plain = slots_[value] = new_array(shape);
      te_step(from_blocked_kernel(shape, b->second),
              {blocked_slots_.at({value, b->second}), plain});
      return plain;
    }
    auto c = g_.constants.find(value);
    if (c == g_.constants.end()) throw_internal("value '{}' has no slot", value);
    return slots_[value] = constant_array(c->second);
  }

  size_t output_slot(const Node& n) {
    return slots_[n.outputs[0]] = new_array(g_.shape(n.outputs[0]));
  }

  // The slot holding a 4-D value in channel blocks of `block`, converted from NCHW once.
  size_t blocked_slot(const std::string& value, int64_t block) {
    auto it = blocked_slots_.find({value, block});
    if (it != blocked_slots_.end()) return it->second;
    const std::vector<int64_t>& shape = g_.shape(value);
    size_t plain = slot(value);
    // Blocks of one channel are NCHW's own bytes.
    if (block == 1) return blocked_slots_[{value, block}] = plain;
    size_t out = blocked_slots_[{value, block}] = new_array(blocked_shape(shape, block));
    te_step(to_blocked_kernel(shape, block), {plain, out});
    return out;
  }

  size_t blocked_output_slot(const Node& n, int64_t block) {
    const std::string& v = n.outputs[0];
    produced_block_[v] = block;
    return blocked_slots_[{v, block}] = home_array(v, block);
  }

  // The array a blocked value is written to: its own, or its channels' part of the output of the
  // Concat that joins it (place_concat_inputs), created with the first of its parts.
  size_t home_array(const std::string& v, int64_t block) {
    auto p = placed_.find(v);
    if (p == placed_.end()) {
      auto early = blocked_slots_.find({v, block});
      if (early != blocked_slots_.end()) return early->second;
      return new_array(blocked_shape(g_.shape(v), block));
    }
    size_t root = blocked_slots_[{p->second.root, block}] = home_array(p->second.root, block);
    return part_array(root, p->second.offset, blocked_shape(g_.shape(v), block));
  }

  // Where a Concat of channel blocks (one image: each block of channels one contiguous run) can
  // cost no copy, its inputs are written in place, each by its producer into its part of the
  // Concat's output. DenseNet joins every layer's features with all before them, in the same
  // order, so each Concat is the first part of the next one's output and the whole dense block
  // is one array: its Concats (8 ms of 51, AVX2) copy nothing. A value joined at two different
  // places keeps its own array where the second one would need it, and is copied there.
  void place_concat_inputs() {
    for (size_t i = g_.nodes.size(); i-- > 0;) {
      const Node& n = g_.nodes[i];
      const int64_t block = n.attr_int(kBlockAttr, 0);
      const std::vector<int64_t>& out = g_.shape(n.outputs[0]);
      if (n.op != "Concat" || block == 0 || out.size() != 4 || out[0] != 1) continue;
      // Inputs already in one array, one after another (torch's DenseNet joins the same features
      // again at every layer, each Concat one input longer): the output is that run of it.
      if (!placed_.count(n.outputs[0]) && placeable(n.outputs[0], block)) {
        std::optional<Placement> run;
        int64_t next = 0;
        for (const std::string& v : n.inputs) {
          auto p = placed_.find(v);
          if (p == placed_.end() ||
              (run && (p->second.root != run->root || p->second.offset != next))) {
            run.reset();
            break;
          }
          if (!run) run = p->second;
          next = p->second.offset + num_elements(g_.shape(v));
        }
        if (run) placed_[n.outputs[0]] = *run;
      }
      Placement home{n.outputs[0], 0};
      if (auto p = placed_.find(n.outputs[0]); p != placed_.end()) home = p->second;
      int64_t offset = home.offset;
      for (const std::string& v : n.inputs) {
        const std::vector<int64_t>& shape = g_.shape(v);
        Placement want{home.root, offset};
        offset += num_elements(shape);
        if (placed_.count(v) || !placeable(v, block) ||
            std::count(n.inputs.begin(), n.inputs.end(), v) != 1)
          continue;
        placed_[v] = want;
      }
    }
  }

  // A value its producer writes through blocked_output_slot, once, that no one reads from
  // outside the model.
  bool placeable(const std::string& v, int64_t block) const {
    if (g_.is_constant(v) || g_.is_output(v)) return false;
    auto p = producer_.find(v);
    if (p == producer_.end()) return false;  // a model input
    const Node& producer = g_.nodes[p->second];
    return producer.attr_int(kBlockAttr, 0) == block && producer.op != "GlobalAveragePool" &&
           g_.shape(v).size() == 4;
  }

  void add_step(int kernel, std::vector<size_t> args) {
    ex_.steps_.push_back({kernel, std::move(args), {}});
    ++ex_.kernels_[kernel].uses;
  }

  // A library operator under the schedule the chooser picks (graph/choose_schedule.h).
  void library_step(const std::string& text, std::vector<size_t> args) {
    std::string key = canonical_workload(text);
    if (collect_) return collect_->push_back({key, node_->name});
    auto it = kernel_index_.find(key);
    if (it != kernel_index_.end()) return add_step(it->second, std::move(args));
    ChosenSchedule chosen = chooser_.choose(key);
    add_kernel(key, std::move(chosen.info), codegen_c(chosen.program, entry_options()),
               std::move(args));
  }

  // Every kernel gets its own entry point name, so that all of them can link into one library.
  CodegenOptions entry_options() const {
    CodegenOptions o;
    o.entry = kernel_entry(ex_.codes_.size());
    return o;
  }

  void te_step(const TeKernel& k, std::vector<size_t> args) {
    if (collect_) return;
    std::string code = codegen_c(k.program);
    auto it = kernel_index_.find(code);
    if (it != kernel_index_.end()) return add_step(it->second, std::move(args));
    std::vector<std::string> shapes;
    for (const Tensor& t : k.args) shapes.push_back(shape_text(t->shape));
    KernelInfo info{fmt::format("graph:{}({})", k.name, fmt::join(shapes, ", ")), "fixed", "", 0,
                    ""};
    add_kernel(code, std::move(info), codegen_c(k.program, entry_options()), std::move(args));
  }

  void add_kernel(const std::string& key, KernelInfo info, std::string code,
                  std::vector<size_t> args) {
    ex_.kernels_.push_back(std::move(info));
    ex_.codes_.push_back(std::move(code));
    int index = static_cast<int>(ex_.codes_.size()) - 1;
    kernel_index_[key] = index;
    add_step(index, std::move(args));
  }

  // `src` (the producer's raw result, shape `shape`) through `extra` operands then the node's
  // epilogue into the node's output.
  void epilogue_step(const Node& n, size_t src, const std::vector<int64_t>& shape,
                     std::vector<std::pair<size_t, std::vector<int64_t>>> extra) {
    std::vector<std::vector<int64_t>> in_shapes{shape};
    std::vector<size_t> args{src};
    std::vector<ElementwiseStep> steps;
    for (auto& [s, sh] : extra) {
      steps.push_back({ElementwiseStep::Kind::kAdd, static_cast<int>(args.size()), 0, 0, {}, {}});
      args.push_back(s);
      in_shapes.push_back(sh);
    }
    for (const Epilogue& e : n.epilogue) {
      if (e.kind == Epilogue::Kind::kAdd) {
        steps.push_back({ElementwiseStep::Kind::kAdd, static_cast<int>(args.size()), 0, 0, {}, {}});
        args.push_back(slot(n.inputs[e.input]));
        in_shapes.push_back(g_.shape(n.inputs[e.input]));
      } else if (e.kind == Epilogue::Kind::kRelu) {
        steps.push_back({ElementwiseStep::Kind::kRelu, -1, 0, 0, {}, {}});
      } else {
        steps.push_back({ElementwiseStep::Kind::kClip, -1, e.lo, e.hi, {}, {}});
      }
    }
    args.push_back(output_slot(n));
    te_step(elementwise_kernel(shape, in_shapes, steps), std::move(args));
  }

  void plan_conv(const Node& n) {
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

  size_t transposed(const std::string& value) {
    if (g_.is_constant(value)) return constant_array(transposed_2d(g_.constants.at(value)));
    std::vector<int64_t> s = g_.shape(value);
    size_t out = new_array({s[1], s[0]});
    te_step(transpose_kernel(s, {1, 0}), {slot(value), out});
    return out;
  }

  void plan_gemm(const Node& n) {
    GemmAttrs a = read_gemm(n, g_.shape(n.inputs[0]), g_.shape(n.inputs[1]));
    size_t lhs = a.trans_a ? transposed(n.inputs[0]) : slot(n.inputs[0]);
    bool has_c = n.inputs.size() > 2 && !n.inputs[2].empty();
    bool needs_epilogue = has_c || !n.epilogue.empty();
    std::vector<int64_t> out_shape{a.m, a.n};
    size_t raw = needs_epilogue ? new_array(out_shape) : output_slot(n);
    if (g_.is_constant(n.inputs[1])) {
      // dense keeps weights [out][in], as Gemm with transB=1 stores them; alpha folds into them.
      HostTensor b = g_.constants.at(n.inputs[1]);
      HostTensor wt = a.trans_b ? b : transposed_2d(b);
      for (double& v : wt.data) v *= a.alpha;
      dense_step(lhs, dense_weights(wt, a.m), raw);
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

  // Constant dense weights [out][in] for a product of `batch` rows, packed here, once, into blocks
  // of the output channels the kernel's vectors read (WB) where the outputs fill whole blocks,
  // so that the kernel packs nothing (it copied all the weights every run: 7 MB for each of
  // BERT's 768 x 2304 projections). Small batches keep [out][in] for the dot form, which reads
  // the rows in place: the LSTM LM's per-step 1 x 650 x 2600 products took 10.4 ms over 70
  // steps prepacked, 6.4 as dot products, while its batch of 35 took 2.4 prepacked and 4.3 not
  // (AMD EPYC, AVX2, 2 threads).
  struct DenseWeights {
    size_t slot = 0;
    int64_t in = 0, out = 0, block = 0;  // block 0: [out][in] as they are
  };
  DenseWeights dense_weights(const HostTensor& weights, int64_t batch) {
    DenseWeights d;
    d.out = weights.shape.at(0);
    d.in = weights.shape.at(1);
    const int64_t lanes = target_isa().f32_lanes;
    d.block = batch >= 16 && d.out % lanes == 0 ? lanes : 0;
    d.slot = constant_array(d.block > 0 ? packed_weights(weights, d.block) : weights);
    return d;
  }

  // y = x W^T over the rows of x.
  void dense_step(size_t x, const DenseWeights& w, size_t y) {
    const int64_t batch = static_cast<int64_t>(ex_.arrays_[x].num_elements()) / w.in;
    library_step(fmt::format("dense:B={},I={},O={}{}", batch, w.in, w.out,
                             w.block > 0 ? fmt::format(",WB={}", w.block) : ""),
                 {x, w.slot, y});
  }

  void plan_matmul(const Node& n) {
    const std::vector<int64_t>& as = g_.shape(n.inputs[0]);
    const std::vector<int64_t>& bs = g_.shape(n.inputs[1]);
    std::vector<int64_t> out_shape = g_.shape(n.outputs[0]);
    int64_t m = as[as.size() - 2], k = as.back(), nn = bs.back();
    int64_t batch = num_elements(as) / (m * k);
    size_t raw = n.epilogue.empty() ? output_slot(n) : new_array(out_shape);
    if (bs.size() == 2 && g_.is_constant(n.inputs[1])) {
      // Constant weights (a transformer's projections): dense, which keeps them [out][in] and
      // prepacks them, as Gemm's do; the plain matmul's default ran BERT's 128x768x3072 40 ms
      // against dense's 2.5 (Zen AVX2, 2 threads).
      dense_step(slot(n.inputs[0]),
                 dense_weights(transposed_2d(g_.constants.at(n.inputs[1])), batch * m), raw);
      if (!n.epilogue.empty()) epilogue_step(n, raw, out_shape, {});
      return;
    }
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

  void plan_pool(const Node& n) {
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

  // Rows of the last dimension: the 2-D [M, N] view the library's elementwise ops take.
  static std::pair<int64_t, int64_t> rows(const std::vector<int64_t>& shape) {
    int64_t last = shape.empty() ? 1 : shape.back();
    return {num_elements(shape) / last, last};
  }

  // A Conv in channel blocks (graph/passes.h choose_layouts): conv2d_nchwc or
  // depthwise_conv2d_nchwc with its bias (the Conv's own plus per-channel constant adds),
  // residual and activation run by the kernel as it writes each block.
  void plan_blocked_conv(const Node& n, int64_t block) {
    Window2d w = read_window(n, g_.shape(n.inputs[0]), &g_.shape(n.inputs[1]));
    bool depthwise = w.group > 1;
    // Channels that fill no block (an image's three) are read as blocks of one: NCHW itself,
    // with no conversion.
    int64_t ib = depthwise || w.c % block == 0 ? block : 1;
    size_t x = blocked_slot(n.inputs[0], ib);
    const HostTensor& weights = g_.constants.at(n.inputs[1]);
    std::vector<double> bias(w.out_channels, 0.0);
    bool has_bias = n.inputs.size() > 2 && !n.inputs[2].empty();
    if (has_bias) bias = g_.constants.at(n.inputs[2]).data;
    std::optional<size_t> residual;
    int act = 0;
    for (const Epilogue& e : n.epilogue) {
      if (e.kind == Epilogue::Kind::kRelu) {
        act = 1;
      } else if (e.kind == Epilogue::Kind::kClip) {
        act = std::isinf(e.hi) ? 1 : 2;
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
    size_t wt = constant_array(depthwise ? blocked_depthwise_weights(weights, block)
                                         : blocked_conv_weights(weights, block, ib));
    std::vector<size_t> args{x, wt};
    if (bias_slot) args.push_back(*bias_slot);
    if (residual) args.push_back(*residual);
    args.push_back(blocked_output_slot(n, block));
    std::string epilogue =
        fmt::format(",BIAS={},RES={},ACT={}", has_bias ? 1 : 0, residual ? 1 : 0, act);
    std::string shape_keys = fmt::format("N={},C={},H={},W={}", w.n, w.c, w.h, w.w);
    library_step(depthwise ? fmt::format("depthwise_conv2d_nchwc:{},K={},S={},P={},CB={}{}",
                                         shape_keys, w.kh, w.sh, w.pt, block, epilogue)
                           : fmt::format("conv2d_nchwc:{},O={},K={},S={},P={},D={},CB={},IB={}{}",
                                         shape_keys, w.out_channels, w.kh, w.sh, w.pt, w.dh, block,
                                         ib == block ? 0 : ib, epilogue),
                 std::move(args));
  }

  // Winograd F(4x4, 3x3) (graph/winograd.h): the input transformed per tile (padded as read), 36
  // products over the channels by the library's batch_matmul (a tuning task of the model), and
  // the output transform with the convolution's epilogue writing the blocked result.
  void plan_winograd_conv(const Node& n, const Window2d& w, int64_t block, size_t x,
                          std::optional<size_t> bias, std::optional<size_t> residual,
                          Activation act) {
    std::vector<int64_t> in = blocked_shape(g_.shape(n.inputs[0]), block);
    auto [th, tw] = winograd_tiles(w.oh, w.ow);
    const int64_t rows = winograd_rows(th * tw), products = kWinogradAlpha * kWinogradAlpha;
    size_t transformed = new_array({products, rows, w.c});
    te_step(winograd_input_kernel(in), {x, transformed});
    size_t weights = constant_array(winograd_weights(g_.constants.at(n.inputs[1])));
    size_t product = new_array({products, rows, w.out_channels});
    library_step(
        fmt::format("batch_matmul:B={},M={},N={},K={}", products, rows, w.out_channels, w.c),
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

  // A node choose_layouts left in channel blocks: its blocked input read as it is, its result
  // written blocked.
  void plan_blocked(const Node& n, int64_t block) {
    if (n.op == "Conv") return plan_blocked_conv(n, block);
    const std::vector<int64_t>& in = g_.shape(n.inputs[0]);
    if (n.op == "MaxPool" || n.op == "AveragePool") {
      Window2d w = read_window(n, in, nullptr);
      return te_step(
          pool_blocked_kernel(blocked_shape(in, block), w.kh, w.sh, w.pt, n.op == "MaxPool"),
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
    if (n.op == "GlobalAveragePool")
      return te_step(global_avg_pool_kernel(blocked_shape(in, block)),
                     {blocked_slot(n.inputs[0], block), output_slot(n)});
    plan_elementwise_chain(n, elementwise_chain(), block);
  }

  // The inputs an elementwise node's kernel reads: Clip's bounds are folded into it.
  static std::vector<std::string> elementwise_operands(const Node& n) {
    if (n.op == "Clip" || n.op == "Relu") return {n.inputs[0]};
    std::vector<std::string> operands;
    for (const std::string& v : n.inputs)
      if (!v.empty()) operands.push_back(v);
    return operands;
  }

  // The one elementwise step of a node: Add, Mul (of input 1), Relu, Clip, or an elementwise row
  // of the operator table (of inputs 1..).
  ElementwiseStep elementwise_step(const Node& n) const {
    if (const OpDef* row = find_op(n.op); row && row->lowering == Lowering::kElementwise) {
      std::vector<int> inputs(elementwise_operands(n).size() - 1);
      std::iota(inputs.begin(), inputs.end(), 1);
      return scalar_step(n, g_, std::move(inputs));
    }
    if (n.op == "Add") return {ElementwiseStep::Kind::kAdd, 1, 0, 0, {}, {}};
    if (n.op == "Mul") return {ElementwiseStep::Kind::kMul, 1, 0, 0, {}, {}};
    if (n.op == "Relu") return {ElementwiseStep::Kind::kRelu, -1, 0, 0, {}, {}};
    auto [lo, hi] = clip_bounds(n, g_);
    return {ElementwiseStep::Kind::kClip, -1, lo, hi, {}, {}};
  }

  // Add, Mul, Relu, Clip with constant bounds, and the operator table's scalar rows: what one
  // step of an elementwise kernel computes.
  bool is_elementwise_step(const Node& n) const {
    if (const OpDef* row = find_op(n.op); row && row->lowering == Lowering::kElementwise)
      return true;
    if (n.op == "Add" || n.op == "Mul" || n.op == "Relu") return true;
    if (n.op != "Clip") return false;
    try {
      clip_bounds(n, g_);
      return true;
    } catch (const Error&) {
      return false;
    }
  }

  // The elementwise nodes after the head (the node being planned) that its kernel computes too,
  // in order: each the only reader of the value so far (which no one else sees), of its shape
  // and layout, with every other operand ready before the head runs. One pass over memory then
  // does a chain such as GELU's Div, Erf, Add, Mul, Mul (five kernels in BERT's legacy export).
  std::vector<size_t> elementwise_chain() const {
    std::vector<size_t> chain;
    const Node& head = g_.nodes[head_];
    if (!is_elementwise_step(head)) return chain;
    const int64_t block = head.attr_int(kBlockAttr, 0);
    const std::vector<int64_t>& shape = g_.shape(head.outputs[0]);
    std::string value = head.outputs[0];
    while (!g_.is_output(value) && !g_.is_constant(value)) {
      std::vector<size_t> readers = g_.consumers(value);
      if (readers.size() != 1) break;
      const Node& next = g_.nodes[readers[0]];
      if (!is_elementwise_step(next) || next.attr_int(kBlockAttr, 0) != block ||
          g_.shape(next.outputs[0]) != shape || g_.is_constant(next.outputs[0]) ||
          std::count(next.inputs.begin(), next.inputs.end(), value) != 1)
        break;
      std::vector<std::string> operands = elementwise_operands(next);
      if (std::find(operands.begin(), operands.end(), value) == operands.end()) break;
      bool ready = true;
      for (const std::string& v : operands) {
        if (v == value || g_.is_constant(v)) continue;
        auto p = producer_.find(v);
        ready = ready && (p == producer_.end() || p->second < head_);  // a model input, or earlier
      }
      if (!ready) break;
      chain.push_back(readers[0]);
      value = next.outputs[0];
    }
    return chain;
  }

  // The step of chained node `n` whose value so far is its operand `at`, its other operands
  // being kernel inputs `others`.
  ElementwiseStep chained_step(const Node& n, size_t at, const std::vector<int>& others) const {
    if (n.op == "Add" || n.op == "Mul")
      return {n.op == "Add" ? ElementwiseStep::Kind::kAdd : ElementwiseStep::Kind::kMul,
              others.at(0),
              0,
              0,
              {},
              {}};
    if (n.op == "Relu" || n.op == "Clip") return elementwise_step(n);
    ScalarCall call = scalar_call(n, g_);
    ElementwiseStep step;
    step.kind = ElementwiseStep::Kind::kScalar;
    step.inputs = others;
    step.scalar = [call, at](const std::vector<Expr>& x) {
      std::vector<Expr> operands(x.begin() + 1, x.end());
      operands.insert(operands.begin() + static_cast<std::ptrdiff_t>(at), x[0]);
      return call.op->build(call.params, operands);
    };
    return step;
  }

  // One kernel for `head` and the nodes of `chain` after it; with `block`, in channel blocks:
  // full-shape operands blocked, per-channel values as [1][C/b][1][1][b] (the same memory as
  // [C]: a constant, or a squeeze-excite scale of one image), scalars as they are.
  void plan_elementwise_chain(const Node& head, const std::vector<size_t>& chain, int64_t block) {
    const std::vector<int64_t>& out = g_.shape(head.outputs[0]);
    const std::vector<int64_t> kernel_shape = block > 0 ? blocked_shape(out, block) : out;
    std::vector<std::vector<int64_t>> shapes;
    std::vector<size_t> args;
    auto operand = [&](const std::string& v) {
      if (block == 0) {
        shapes.push_back(g_.shape(v));
        args.push_back(slot(v));
      } else if (g_.shape(v) == out) {
        shapes.push_back(kernel_shape);
        args.push_back(blocked_slot(v, block));
      } else if (is_per_channel(g_.shape(v), out[1]) && g_.is_constant(v)) {
        HostTensor t = g_.constants.at(v);
        t.shape = {1, out[1] / block, 1, 1, block};
        shapes.push_back(t.shape);
        args.push_back(constant_array(t));
      } else if (is_per_channel(g_.shape(v), out[1])) {
        shapes.push_back({1, out[1] / block, 1, 1, block});
        args.push_back(slot(v));
      } else {
        shapes.push_back(g_.shape(v));
        args.push_back(slot(v));
      }
      return static_cast<int>(args.size()) - 1;
    };
    for (const std::string& v : elementwise_operands(head)) operand(v);
    std::vector<ElementwiseStep> steps{elementwise_step(head)};
    std::string value = head.outputs[0];
    for (size_t c : chain) {
      const Node& n = g_.nodes[c];
      chained_[c] = true;
      std::vector<std::string> operands = elementwise_operands(n);
      size_t at = 0;
      std::vector<int> others;
      for (size_t k = 0; k < operands.size(); ++k) {
        if (operands[k] == value)
          at = k;
        else
          others.push_back(operand(operands[k]));
      }
      steps.push_back(chained_step(n, at, others));
      value = n.outputs[0];
    }
    const Node& last = chain.empty() ? head : g_.nodes[chain.back()];
    args.push_back(block > 0 ? blocked_output_slot(last, block) : output_slot(last));
    te_step(elementwise_kernel(kernel_shape, shapes, steps), std::move(args));
  }

  void plan_node(const Node& n) {
    const std::string& op = n.op;
    const std::vector<int64_t>& out_shape = g_.shape(n.outputs[0]);
    const OpDef* row = find_op(op);
    if (!row) throw_error("{}: unsupported operator", n.where());
    // Folded at import (shape arithmetic): its readers take the constant.
    if (g_.is_constant(n.outputs[0]) && !g_.is_output(n.outputs[0])) return;
    if (int64_t block = n.attr_int(kBlockAttr, 0); block > 0) return plan_blocked(n, block);
    switch (row->lowering) {
      case Lowering::kView:
        slots_[n.outputs[0]] = slot(n.inputs[0]);  // a view: same data, another shape
        return;
      case Lowering::kElementwise:
        return plan_elementwise_chain(n, elementwise_chain(), 0);
      case Lowering::kKernel: {
        std::vector<size_t> args;
        if (row->kernel_inputs.empty()) {
          for (const std::string& v : n.inputs)
            if (!v.empty()) args.push_back(slot(v));
        } else {
          for (int i : row->kernel_inputs) args.push_back(slot(n.inputs.at(i)));
        }
        args.push_back(output_slot(n));
        return te_step(row->kernel(n, g_), std::move(args));
      }
      case Lowering::kFolded:
        throw_error("{}: its inputs are not constant (dynamic shapes are not supported)",
                    n.where());
      case Lowering::kPlanner:
        break;
    }
    if (op == "Conv") return plan_conv(n);
    if (op == "Gemm") return plan_gemm(n);
    if (op == "MatMul") return plan_matmul(n);
    if (op == "MaxPool" || op == "AveragePool") return plan_pool(n);
    if (op == "GlobalAveragePool")
      return te_step(global_avg_pool_kernel(g_.shape(n.inputs[0])),
                     {slot(n.inputs[0]), output_slot(n)});
    if (op == "Relu" || op == "Add" || op == "Mul" || op == "Clip") {
      // Followed by more elementwise steps: one kernel for all of them.
      if (std::vector<size_t> chain = elementwise_chain(); !chain.empty())
        return plan_elementwise_chain(n, chain, 0);
    }
    if (op == "Relu") {
      auto [m, nn] = rows(out_shape);
      return library_step(fmt::format("relu:M={},N={}", m, nn),
                          {slot(n.inputs[0]), output_slot(n)});
    }
    if (op == "Add") {
      const auto& a = g_.shape(n.inputs[0]);
      const auto& b = g_.shape(n.inputs[1]);
      auto [m, nn] = rows(out_shape);
      if (a == b)
        return library_step(fmt::format("add:M={},N={}", m, nn),
                            {slot(n.inputs[0]), slot(n.inputs[1]), output_slot(n)});
      for (int side = 0; side < 2; ++side) {
        const auto& big = side == 0 ? a : b;
        const auto& small = side == 0 ? b : a;
        if (big == out_shape && num_elements(small) == nn && !small.empty() && small.back() == nn)
          return library_step(fmt::format("bias_add:M={},N={}", m, nn),
                              {slot(n.inputs[side]), slot(n.inputs[1 - side]), output_slot(n)});
      }
      return plan_elementwise_chain(n, {}, 0);
    }
    if (op == "Mul" || op == "Clip") return plan_elementwise_chain(n, {}, 0);
    if (op == "BatchNormalization") return plan_batch_norm(n);
    if (op == "LSTM" || op == "GRU") return plan_recurrent(n);
    if (op == "Softmax") {
      auto rank = static_cast<int64_t>(out_shape.size());
      int64_t axis = normalize_axis(n, n.attr_int("axis", g_.opset >= 13 ? -1 : 1), rank);
      int64_t inner = 1;
      for (int64_t d = axis + 1; d < rank; ++d) inner *= out_shape[d];
      if (g_.opset >= 13 && inner != 1)
        return te_step(softmax_kernel(out_shape, axis, false), {slot(n.inputs[0]), output_slot(n)});
      int64_t len = out_shape[axis] * inner;
      return library_step(fmt::format("softmax:M={},N={}", num_elements(out_shape) / len, len),
                          {slot(n.inputs[0]), output_slot(n)});
    }
    if (op == "Concat") {
      std::vector<std::vector<int64_t>> shapes;
      std::vector<size_t> args;
      for (const std::string& v : n.inputs) {
        shapes.push_back(g_.shape(v));
        args.push_back(slot(v));
      }
      args.push_back(output_slot(n));
      int64_t axis =
          normalize_axis(n, n.attr_int("axis", 0), static_cast<int64_t>(out_shape.size()));
      return te_step(concat_kernel(shapes, axis), std::move(args));
    }
    if (op == "Transpose") {
      const auto& s = g_.shape(n.inputs[0]);
      std::vector<int64_t> perm = transpose_perm(n, static_cast<int64_t>(s.size()));
      // Moving only dimensions of size 1 keeps every element where it is: a view (a recurrent
      // layer's [seq, 1, batch, hidden] output put batch first).
      int64_t last_moved = -1;
      bool same_order = true;
      for (int64_t d : perm)
        if (s[d] != 1) same_order = same_order && d > last_moved, last_moved = d;
      if (same_order) {
        slots_[n.outputs[0]] = slot(n.inputs[0]);
        return;
      }
      return te_step(transpose_kernel(s, transpose_perm(n, static_cast<int64_t>(s.size()))),
                     {slot(n.inputs[0]), output_slot(n)});
    }
    throw_error("{}: no kernel for this operator", n.where());
  }

  // LSTM and GRU: the input projection of every time step at once (one dense, a tuning task),
  // then per step a dense of the previous state (another) and the cell's te kernels. Steps read
  // and write the sequence output in place through parts of it, so each step's kernels are the
  // same compiled code.
  void plan_recurrent(const Node& n) {
    const RecurrentSpec s = recurrent_spec(n, g_);
    const int64_t H = s.hidden, G = s.gates * H, B = s.batch;
    // Weights computed at run time (not folded to constants) would need a dense of two inputs.
    for (size_t i : {1, 2, 3})
      if (n.inputs.size() > i && !n.inputs[i].empty() && !g_.is_constant(n.inputs[i]))
        throw_error("{}: input {} ('{}') is not a constant", n.where(), i, n.inputs[i]);
    const HostTensor& w = g_.constants.at(n.inputs[1]);
    const HostTensor& r = g_.constants.at(n.inputs[2]);
    auto has = [&](size_t i) { return n.inputs.size() > i && !n.inputs[i].empty(); };
    const std::vector<int64_t> state{B, H};
    const std::vector<int64_t> sequence{s.seq, s.directions, B, H};
    size_t y = s.output == 0 ? output_slot(n) : new_array(sequence);
    size_t last = s.output == 0 ? 0 : output_slot(n);
    size_t x = slot(n.inputs[0]);
    std::optional<size_t> zeros;
    auto zero_state = [&] {
      if (!zeros) zeros = constant_array({state, std::vector<double>(B * H, 0.0), false});
      return *zeros;
    };
    auto at_step = [&](int64_t t, int64_t d) { return ((t * s.directions) + d) * B * H; };
    for (int64_t d = 0; d < s.directions; ++d) {
      const bool reverse = s.reverse_first || d == 1;
      size_t xw = new_array({s.seq * B, G});
      dense_step(x, dense_weights(constant_rows(w, d, 0, G), s.seq * B), xw);
      HostTensor bias_x{{G}, std::vector<double>(G, 0.0), false}, bias_h = bias_x;
      if (has(3)) {
        const HostTensor& b = g_.constants.at(n.inputs[3]);
        std::copy_n(b.data.begin() + d * 2 * G, G, bias_x.data.begin());
        std::copy_n(b.data.begin() + d * 2 * G + G, G, bias_h.data.begin());
      }
      // An LSTM adds both biases to every gate: one vector, the other zero.
      if (!s.gru)
        for (int64_t k = 0; k < G; ++k) bias_x.data[k] += bias_h.data[k], bias_h.data[k] = 0;
      size_t bx = constant_array(bias_x), bh = constant_array(bias_h);
      // GRU without linear_before_reset: the state's dense covers z and r, R_h runs after reset.
      const int64_t state_gates = s.gru && !s.linear_before_reset ? 2 : s.gates;
      const DenseWeights rd = dense_weights(constant_rows(r, d, 0, state_gates * H), B);
      std::optional<DenseWeights> r_h;
      if (state_gates == 2) r_h = dense_weights(constant_rows(r, d, 2 * H, H), B);
      size_t hr = new_array({B, state_gates * H});
      size_t h = has(5) ? part_array(slot(n.inputs[5]), d * B * H, state) : zero_state();
      size_t c = has(6) ? part_array(slot(n.inputs[6]), d * B * H, state) : zero_state();
      size_t cells[2] = {0, 0};
      if (!s.gru) cells[0] = new_array(state), cells[1] = new_array(state);
      for (int64_t step = 0; step < s.seq; ++step) {
        const int64_t t = reverse ? s.seq - 1 - step : step;
        size_t xw_t = part_array(xw, t * B * G, {B, G});
        size_t h_next = part_array(y, at_step(t, d), state);
        dense_step(h, rd, hr);
        if (!s.gru) {
          size_t c_next = cells[step % 2];
          te_step(lstm_cell_kernel(B, H), {xw_t, hr, bx, bh, c, c_next});
          te_step(lstm_hidden_kernel(B, H), {xw_t, hr, bx, bh, c_next, h_next});
          c = c_next;
        } else if (s.linear_before_reset) {
          te_step(gru_cell_kernel(B, H, true), {xw_t, hr, bx, bh, h, h_next});
        } else {
          size_t reset_h = new_array(state), reset_term = new_array(state);
          te_step(gru_reset_kernel(B, H), {xw_t, hr, bx, bh, h, reset_h});
          dense_step(reset_h, *r_h, reset_term);
          te_step(gru_cell_kernel(B, H, false), {xw_t, hr, bx, bh, reset_term, h, h_next});
        }
        h = h_next;
      }
      if (s.output != 0)
        te_step(elementwise_kernel(state, {state}, {}),
                {s.output == 1 ? h : c, part_array(last, d * B * H, state)});
    }
  }

  // A BatchNormalization no Conv absorbed: y = x * s + t per channel, s and t computed once.
  void plan_batch_norm(const Node& n) {
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
    std::vector<size_t> args{slot(n.inputs[0]), constant_array(s), constant_array(t),
                             output_slot(n)};
    te_step(elementwise_kernel(x, {x, param_shape, param_shape}, steps), std::move(args));
  }

  const Graph& g_;
  const ExecutorParams& params_;
  Executor& ex_;
  std::vector<PlannedWorkload>* collect_;
  const Node* node_ = nullptr;
  size_t head_ = 0;                         // the index of the node being planned
  std::map<std::string, size_t> producer_;  // value -> the index of the node computing it
  std::vector<bool> chained_;  // nodes computed by an earlier node's elementwise kernel
  struct Placement {
    std::string root;    // the value whose array holds it
    int64_t offset = 0;  // in elements
    bool operator==(const Placement&) const = default;
  };
  std::map<std::string, Placement> placed_;  // blocked values written into a Concat's output
  ScheduleChooser chooser_;
  std::map<std::string, size_t> slots_;  // values in NCHW (or their own shape)
  std::map<std::pair<std::string, int64_t>, size_t> blocked_slots_;  // (value, block) -> slot
  std::map<std::string, int64_t> produced_block_;  // values a blocked node wrote: their block
  std::map<std::string, int> kernel_index_;
};

Executor Executor::compile(const Graph& g, const ExecutorParams& params) {
  if (params.threads > 0) set_num_threads(params.threads);
  Executor ex;
  Planner planner(g, params, ex);
  planner.plan();
  planner.compile();
  return ex;
}

std::vector<PlannedWorkload> Executor::library_workloads(const Graph& g) {
  std::vector<PlannedWorkload> out;
  Executor scratch;
  ExecutorParams params;
  Planner planner(g, params, scratch, &out);
  planner.plan();
  return out;
}

}  // namespace tessera::graph
