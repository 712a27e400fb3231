#include "te/tensor.h"

#include <algorithm>
#include <set>

#include "te/error.h"
#include "te/expr_functor.h"

namespace tessera {

Expr Tensor::operator()(std::vector<Expr> indices) const {
  if (!node_) throw_error("read of an undefined tensor");
  if (indices.size() != node_->shape.size()) {
    throw_error("tensor {} has {} dimensions but is indexed with {}", node_->name,
                node_->shape.size(), indices.size());
  }
  for (Expr& i : indices) {
    if (!i.defined()) throw_error("undefined index into tensor {}", node_->name);
    if (i.dtype() != DType::kInt32) {
      throw_error("index into tensor {} must be int32, not {}", node_->name, dtype_name(i.dtype()));
    }
  }
  return Expr(std::make_shared<TensorReadNode>(node_->dtype, node_, std::move(indices)));
}

namespace {

void check_shape(const std::vector<int64_t>& shape, const std::string& name) {
  if (name.empty()) throw_error("a tensor needs a name");
  for (int64_t d : shape) {
    if (d <= 0) throw_error("tensor {} has non-positive extent {}", name, d);
  }
}

class ReduceChecker : public ExprVisitor {
 public:
  int reduces = 0;

 protected:
  using ExprVisitor::visit_;
  void visit_(const ReduceNode& n, const Expr& self) override {
    ++reduces;
    ExprVisitor::visit_(n, self);
  }
};

}  // namespace

Tensor placeholder(std::vector<int64_t> shape, DType dtype, std::string name) {
  check_shape(shape, name);
  auto node = std::make_shared<TensorNode>();
  node->name = std::move(name);
  node->dtype = dtype;
  node->shape = std::move(shape);
  node->is_placeholder = true;
  return Tensor(node);
}

Tensor compute(std::vector<int64_t> shape, const std::function<Expr(const std::vector<Var>&)>& f,
               std::string name, std::vector<std::string> axis_names) {
  check_shape(shape, name);
  static const char* kDefaultNames[] = {"i", "j", "k", "l", "m", "n"};
  if (!axis_names.empty() && axis_names.size() != shape.size()) {
    throw_error("compute {} has {} dimensions but {} axis names", name, shape.size(),
                axis_names.size());
  }
  std::vector<IterVar> axes;
  std::vector<Var> vars;
  for (size_t d = 0; d < shape.size(); ++d) {
    std::string axis = !axis_names.empty() ? axis_names[d]
                       : d < 6             ? kDefaultNames[d]
                                           : "ax" + std::to_string(d);
    vars.emplace_back(axis);
    axes.push_back({vars.back(), shape[d]});
  }
  Expr body = f(vars);
  if (!body.defined()) throw_error("compute {} has an undefined body", name);
  ReduceChecker rc;
  rc.visit(body);
  if (rc.reduces > (body.as<ReduceNode>() ? 1 : 0)) {
    throw_error("compute {}: a reduction must be the whole body of a compute", name);
  }
  auto node = std::make_shared<TensorNode>();
  node->name = std::move(name);
  node->dtype = body.dtype();
  node->shape = std::move(shape);
  node->is_placeholder = false;
  node->axes = std::move(axes);
  node->body = std::move(body);
  return Tensor(node);
}

Tensor compute(std::vector<int64_t> shape, const std::function<Expr(Var)>& f, std::string name,
               std::vector<std::string> axis_names) {
  if (shape.size() != 1) throw_error("compute {}: a 1-argument body needs a 1-D shape", name);
  return compute(
      std::move(shape), [&](const std::vector<Var>& v) { return f(v[0]); }, std::move(name),
      std::move(axis_names));
}
Tensor compute(std::vector<int64_t> shape, const std::function<Expr(Var, Var)>& f, std::string name,
               std::vector<std::string> axis_names) {
  if (shape.size() != 2) throw_error("compute {}: a 2-argument body needs a 2-D shape", name);
  return compute(
      std::move(shape), [&](const std::vector<Var>& v) { return f(v[0], v[1]); }, std::move(name),
      std::move(axis_names));
}
Tensor compute(std::vector<int64_t> shape, const std::function<Expr(Var, Var, Var)>& f,
               std::string name, std::vector<std::string> axis_names) {
  if (shape.size() != 3) throw_error("compute {}: a 3-argument body needs a 3-D shape", name);
  return compute(
      std::move(shape), [&](const std::vector<Var>& v) { return f(v[0], v[1], v[2]); },
      std::move(name), std::move(axis_names));
}
Tensor compute(std::vector<int64_t> shape, const std::function<Expr(Var, Var, Var, Var)>& f,
               std::string name, std::vector<std::string> axis_names) {
  if (shape.size() != 4) throw_error("compute {}: a 4-argument body needs a 4-D shape", name);
  return compute(
      std::move(shape), [&](const std::vector<Var>& v) { return f(v[0], v[1], v[2], v[3]); },
      std::move(name), std::move(axis_names));
}

IterVar reduce_axis(int64_t extent, std::string name) {
  if (extent <= 0) throw_error("reduce axis {} has non-positive extent {}", name, extent);
  return IterVar{Var(std::move(name)), extent};
}

Expr sum(Expr source, std::vector<IterVar> axes) {
  return make_reduce(ReduceOp::kSum, std::move(source), std::move(axes));
}
Expr max(Expr source, std::vector<IterVar> axes) {
  return make_reduce(ReduceOp::kMax, std::move(source), std::move(axes));
}
Expr min(Expr source, std::vector<IterVar> axes) {
  return make_reduce(ReduceOp::kMin, std::move(source), std::move(axes));
}

namespace {

class ReadCollector : public ExprVisitor {
 public:
  std::vector<Tensor> found;

 protected:
  using ExprVisitor::visit_;
  void visit_(const TensorReadNode& n, const Expr& self) override {
    if (std::none_of(found.begin(), found.end(),
                     [&](const Tensor& t) { return t.ref() == n.tensor; })) {
      found.emplace_back(n.tensor);
    }
    ExprVisitor::visit_(n, self);
  }
};

}  // namespace

std::vector<Tensor> direct_inputs(const Tensor& t) {
  if (t->is_placeholder) return {};
  ReadCollector rc;
  rc.visit(t->body);
  return rc.found;
}

std::vector<Tensor> topo_order(const std::vector<Tensor>& outputs) {
  std::vector<Tensor> order;
  std::set<const TensorNode*> done;
  std::function<void(const Tensor&)> dfs = [&](const Tensor& t) {
    if (done.count(t.ref().get())) return;
    done.insert(t.ref().get());
    for (const Tensor& in : direct_inputs(t)) dfs(in);
    order.push_back(t);
  };
  for (const Tensor& t : outputs) dfs(t);
  return order;
}

}  // namespace tessera
