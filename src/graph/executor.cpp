// Planning maps each node to kernel steps over value slots (the schedule of each library kernel
// comes from graph/choose_schedule.h); building compiles every distinct kernel into one loaded
// module and lays values out in one arena; running calls the steps in order. Here: the plan and
// build passes, step emission and the dispatch of a node; planner.h lists where the rest lives.
#include "graph/executor.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>

#include "codegen/codegen_c.h"
#include "graph/choose_schedule.h"
#include "graph/kernels.h"
#include "graph/op_attrs.h"
#include "graph/op_rows.h"
#include "graph/op_table.h"
#include "graph/passes.h"
#include "graph/planner.h"
#include "ops/workload.h"
#include "runtime/parallel_jobs.h"
#include "te/error.h"

namespace tessera::graph {

std::string kernel_entry(size_t index) {
  return fmt::format("tsr_kernel{}", index);
}

namespace {

// Rows of the last dimension: the 2-D [M, N] view the library's elementwise ops take.
std::pair<int64_t, int64_t> as_rows(const std::vector<int64_t>& shape) {
  int64_t last = shape.empty() ? 1 : shape.back();
  return {num_elements(shape) / last, last};
}

}  // namespace

void Planner::plan() {
  for (const std::string& v : g_.inputs) {
    ex_.input_slots_.push_back(new_array(g_.shape(v)));
    slots_[v] = ex_.input_slots_.back();
    bool ids = g_.int_inputs.count(v) > 0;
    ex_.input_ids_.push_back(
        ids ? std::optional(std::vector<int64_t>(static_cast<size_t>(num_elements(g_.shape(v))), 0))
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

void Planner::compile() {
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
      array = NDArray::view(static_cast<unsigned char*>(ex_.arrays_[part->of].data()) + part->bytes,
                            array.shape(), array.dtype());
    }
  }
  // The data pointers are final now.
  for (Executor::Step& s : ex_.steps_)
    for (size_t slot : s.slots) s.args.push_back(ex_.arrays_[slot].data());
}

void Planner::add_step(int kernel, std::vector<size_t> args) {
  ex_.steps_.push_back({kernel, std::move(args), {}});
  ++ex_.kernels_[kernel].uses;
}

void Planner::library_step(const std::string& text, std::vector<size_t> args, bool reversed) {
  std::string key = canonical_workload(text);
  if (collect_) return collect_->push_back({key, node_->name});
  const std::string kernel_key = reversed ? key + " reversed" : key;
  auto it = kernel_index_.find(kernel_key);
  if (it != kernel_index_.end()) return add_step(it->second, std::move(args));
  ChosenSchedule chosen = chooser_.choose(key);
  if (reversed) {
    if (std::optional<ProgramStrategy> order = reversed_order(chosen.program, num_threads())) {
      if (RewriteResult<Program> r = (*order)(chosen.program)) {
        chosen.program = r.program();
        std::string& in_model = chosen.info.in_model;
        in_model += (in_model.empty() ? "" : " ; ") + order->text();
      }
    }
  }
  add_kernel(kernel_key, std::move(chosen.info), codegen_c(chosen.program, entry_options()),
             std::move(args));
}

CodegenOptions Planner::entry_options() const {
  CodegenOptions o;
  o.entry = kernel_entry(ex_.codes_.size());
  return o;
}

void Planner::te_step(const TeKernel& k, std::vector<size_t> args) {
  if (collect_) return;
  std::string code = codegen_c(k.program);
  auto it = kernel_index_.find(code);
  if (it != kernel_index_.end()) return add_step(it->second, std::move(args));
  std::vector<std::string> shapes;
  for (const Tensor& t : k.args) shapes.push_back(shape_text(t->shape));
  KernelInfo info{fmt::format("graph:{}({})", k.name, fmt::join(shapes, ", ")), "fixed", "", 0, ""};
  add_kernel(code, std::move(info), codegen_c(k.program, entry_options()), std::move(args));
}

void Planner::add_kernel(const std::string& key, KernelInfo info, std::string code,
                         std::vector<size_t> args) {
  ex_.kernels_.push_back(std::move(info));
  ex_.codes_.push_back(std::move(code));
  int index = static_cast<int>(ex_.codes_.size()) - 1;
  kernel_index_[key] = index;
  add_step(index, std::move(args));
}

// A Gather of constant consecutive indices along an axis with nothing but ones before it reads
// one contiguous run of its input (the query, key and value a transformer's attention takes
// from one projection): a view at that run's start, in elements, rather than a copy. Not for
// model inputs and outputs, whose arrays the caller provides and reads.
std::optional<int64_t> Planner::gather_view_start(const Node& n) const {
  if (n.op != "Gather" || n.inputs.size() != 2 || !g_.is_constant(n.inputs[1]) ||
      !producer_.count(n.inputs[0]) || g_.is_output(n.outputs[0]))
    return std::nullopt;
  const rows::GatherSpec s = rows::gather_spec(n, g_);
  if (s.indices.empty()) return std::nullopt;
  for (size_t i = 1; i < s.indices.size(); ++i)
    if (s.indices[i] != s.indices[0] + static_cast<int64_t>(i)) return std::nullopt;
  const std::vector<int64_t>& x = g_.shape(n.inputs[0]);
  const auto [outer, inner] = rows::split_at(x, s.axis);
  if (outer != 1) return std::nullopt;
  return s.indices[0] * (inner / x[s.axis]);
}

void Planner::plan_node(const Node& n) {
  const std::string& op = n.op;
  const std::vector<int64_t>& out_shape = g_.shape(n.outputs[0]);
  const OpDef* row = find_op(op);
  if (!row) throw_error("{}: unsupported operator", n.where());
  // Folded at import (shape arithmetic): its readers take the constant.
  if (g_.is_constant(n.outputs[0]) && !g_.is_output(n.outputs[0])) return;
  // Weights scaled per input channel: their blocked Conv scales its packed copy.
  if (n.attr_int(kScaledWeightsAttr, 0) == 1) return;
  if (int64_t block = n.attr_int(kBlockAttr, 0); block > 0) return plan_blocked(n, block);
  if (std::optional<int64_t> start = gather_view_start(n)) {
    slots_[n.outputs[0]] = part_array(slot(n.inputs[0]), *start, out_shape);
    return;
  }
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
      throw_error("{}: its inputs are not constant (dynamic shapes are not supported)", n.where());
    case Lowering::kPlanner:
      break;
  }
  if (op == "Conv") return plan_conv(n);
  if (op == "Gemm") return plan_gemm(n);
  if (op == "MatMul") return plan_matmul(n);
  if (op == kAttention) return plan_attention(n);
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
    auto [m, nn] = as_rows(out_shape);
    return library_step(fmt::format("relu:M={},N={}", m, nn), {slot(n.inputs[0]), output_slot(n)});
  }
  if (op == "Add") {
    const auto& a = g_.shape(n.inputs[0]);
    const auto& b = g_.shape(n.inputs[1]);
    auto [m, nn] = as_rows(out_shape);
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
    int64_t axis = normalize_axis(n, n.attr_int("axis", 0), static_cast<int64_t>(out_shape.size()));
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
