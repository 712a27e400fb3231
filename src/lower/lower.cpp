#include "lower/lower.h"

#include <algorithm>
#include <map>
#include <set>

#include "te/error.h"
#include "te/expr_functor.h"
#include "tir/simplify.h"

namespace tessera {

namespace {

using Region = std::vector<IntRange>;

class ReadLowerer : public ExprMutator {
 public:
  explicit ReadLowerer(const std::map<const TensorNode*, Buffer>& buffers) : buffers_(buffers) {}

 protected:
  using ExprMutator::visit_;
  Expr visit_(const TensorReadNode& n, const Expr& self) override {
    std::vector<Expr> idx;
    mutate_all(n.indices, &idx);
    auto it = buffers_.find(n.tensor.get());
    if (it == buffers_.end()) throw_internal("no buffer for tensor {}", n.tensor->name);
    (void)self;
    return make_load(it->second, std::move(idx));
  }

 private:
  const std::map<const TensorNode*, Buffer>& buffers_;
};

// Widens the regions of the tensors a stage reads by the index ranges of its reads.
class RegionCollector : public ExprVisitor {
 public:
  RegionCollector(const RangeMap& ranges, std::map<const TensorNode*, std::optional<Region>>& out)
      : ranges_(ranges), out_(out) {}

 protected:
  using ExprVisitor::visit_;
  void visit_(const TensorReadNode& n, const Expr& self) override {
    ExprVisitor::visit_(n, self);
    auto it = out_.find(n.tensor.get());
    if (it == out_.end()) return;  // a placeholder or an output: full region already
    Region r;
    for (size_t d = 0; d < n.indices.size(); ++d) {
      std::optional<IntRange> b = bound_of(n.indices[d], ranges_);
      r.push_back(b ? *b : IntRange{0, n.tensor->shape[d] - 1});
    }
    if (!it->second) {
      it->second = r;
    } else {
      for (size_t d = 0; d < r.size(); ++d) {
        (*it->second)[d].min = std::min((*it->second)[d].min, r[d].min);
        (*it->second)[d].max = std::max((*it->second)[d].max, r[d].max);
      }
    }
  }

 private:
  const RangeMap& ranges_;
  std::map<const TensorNode*, std::optional<Region>>& out_;
};

Stmt build_nest(const std::vector<Var>& vars, const std::vector<IntRange>& ranges, Stmt body) {
  for (size_t d = vars.size(); d-- > 0;) {
    body = make_for(vars[d], make_int(ranges[d].min), ranges[d].max - ranges[d].min + 1,
                    ForKind::kSerial, body);
  }
  return body;
}

Expr combine(ReduceOp op, const Expr& acc, const Expr& value) {
  switch (op) {
    case ReduceOp::kSum:
      return acc + value;
    case ReduceOp::kMax:
      return max(acc, value);
    case ReduceOp::kMin:
      return min(acc, value);
  }
  throw_internal("unknown reduce op");
}

}  // namespace

Program lower(const std::string& name, const std::vector<Tensor>& args) {
  if (args.empty()) throw_error("lower: {} has no arguments", name);
  std::set<const TensorNode*> arg_set;
  Program p;
  p.name = name;
  std::map<const TensorNode*, Buffer> buffers;
  for (const Tensor& t : args) {
    if (!t.defined()) throw_error("lower: undefined tensor in the arguments of {}", name);
    if (!arg_set.insert(t.ref().get()).second)
      throw_error("lower: tensor {} is passed twice", t->name);
    Buffer b = make_buffer(t->name, t->dtype, t->shape);
    buffers[t.ref().get()] = b;
    (t->is_placeholder ? p.inputs : p.outputs).push_back(b);
  }
  if (p.outputs.empty()) throw_error("lower: {} has no compute tensor among its arguments", name);

  std::vector<Tensor> outputs;
  for (const Tensor& t : args) {
    if (!t->is_placeholder) outputs.push_back(t);
  }
  std::vector<Tensor> order = topo_order(outputs);
  std::vector<Tensor> stages;
  std::set<std::string> buffer_names;
  for (const Tensor& t : order) {
    if (!buffer_names.insert(t->name).second)
      throw_error("lower: two tensors are named {}", t->name);
    if (t->is_placeholder) {
      if (!arg_set.count(t.ref().get())) {
        throw_error("lower: placeholder {} is read but is not an argument of {}", t->name, name);
      }
      continue;
    }
    stages.push_back(t);
    if (!buffers.count(t.ref().get()))
      buffers[t.ref().get()] = make_buffer(t->name, t->dtype, t->shape);
  }

  // Bounds inference, consumers before producers.
  std::map<const TensorNode*, std::optional<Region>> regions;
  for (const Tensor& t : stages) {
    if (!arg_set.count(t.ref().get())) regions[t.ref().get()] = std::nullopt;
  }
  std::map<const TensorNode*, Region> final_regions;
  for (auto it = stages.rbegin(); it != stages.rend(); ++it) {
    const Tensor& t = *it;
    Region region;
    auto r = regions.find(t.ref().get());
    for (size_t d = 0; d < t->shape.size(); ++d) {
      IntRange full{0, t->shape[d] - 1};
      if (r == regions.end() || !r->second) {
        region.push_back(full);  // an output, or an intermediate nobody reads
      } else {
        IntRange need = (*r->second)[d];
        region.push_back({std::max(need.min, full.min), std::min(need.max, full.max)});
        if (region.back().min > region.back().max) region.back() = full;
      }
    }
    final_regions[t.ref().get()] = region;
    RangeMap ranges;
    for (size_t d = 0; d < t->axes.size(); ++d) ranges[t->axes[d].var.get()] = region[d];
    if (const auto* red = t->body.as<ReduceNode>()) {
      for (const IterVar& iv : red->axes) ranges[iv.var.get()] = {0, iv.extent - 1};
    }
    RegionCollector rc(ranges, regions);
    rc.visit(t->body);
  }

  // Loop names: axis names, qualified by stage where stages share one.
  std::map<std::string, int> name_count;
  for (const Tensor& t : stages) {
    std::set<std::string> names;
    for (const IterVar& iv : t->axes) names.insert(iv.var.name());
    if (const auto* red = t->body.as<ReduceNode>()) {
      for (const IterVar& iv : red->axes) names.insert(iv.var.name());
    }
    for (const std::string& n : names) ++name_count[n];
  }

  std::vector<Stmt> nests;
  ReadLowerer lower_reads(buffers);
  for (const Tensor& t : stages) {
    auto loop_name = [&](const std::string& axis) {
      return name_count[axis] > 1 ? t->name + "." + axis : axis;
    };
    const Buffer& out = buffers[t.ref().get()];
    const Region& region = final_regions[t.ref().get()];
    std::vector<Var> vars;
    std::vector<std::pair<const VarNode*, Expr>> rename;
    for (const IterVar& iv : t->axes) {
      vars.emplace_back(loop_name(iv.var.name()));
      rename.emplace_back(iv.var.get(), vars.back());
    }
    std::vector<Expr> store_idx(vars.begin(), vars.end());
    const auto* red = t->body.as<ReduceNode>();
    if (!red) {
      Expr value = substitute(lower_reads.visit(t->body), rename);
      nests.push_back(build_nest(vars, region, make_store(out, store_idx, value)));
      continue;
    }
    std::vector<Var> init_vars;
    for (const Var& v : vars) init_vars.emplace_back(v.name() + ".init");
    std::vector<Expr> init_idx(init_vars.begin(), init_vars.end());
    nests.push_back(build_nest(init_vars, region,
                               make_store(out, init_idx, reduce_identity(red->op, t->dtype))));
    std::vector<Var> update_vars = vars;
    Region update_ranges = region;
    for (const IterVar& iv : red->axes) {
      update_vars.emplace_back(loop_name(iv.var.name()));
      rename.emplace_back(iv.var.get(), update_vars.back());
      update_ranges.push_back({0, iv.extent - 1});
    }
    Expr source = substitute(lower_reads.visit(red->source), rename);
    Expr acc = make_load(out, store_idx);
    nests.push_back(build_nest(update_vars, update_ranges,
                               make_store(out, store_idx, combine(red->op, acc, source))));
  }

  Stmt body = make_seq(nests);
  for (auto it = stages.rbegin(); it != stages.rend(); ++it) {
    if (!arg_set.count(it->ref().get())) body = make_allocate(buffers[it->ref().get()], body);
  }
  p.body = simplify(body);
  return p;
}

}  // namespace tessera
