/// Tensors as index expressions: placeholders, computes, reductions (the `te` user API).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "te/expr.h"

namespace tessera {

/// A tensor is a placeholder (an input) or a compute: body evaluated at every point of axes.
struct TensorNode {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  bool is_placeholder = true;
  std::vector<IterVar> axes;  // compute only: one per dimension
  Expr body;                  // compute only: a scalar expression or a top-level Reduce
};

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(TensorRef node) : node_(std::move(node)) {}

  const TensorNode* operator->() const { return node_.get(); }
  const TensorRef& ref() const { return node_; }
  bool defined() const { return node_ != nullptr; }
  size_t ndim() const { return node_->shape.size(); }

  /// Reads one element; throws on a wrong number of indices.
  Expr operator()(std::vector<Expr> indices) const;
  template <typename... Idx>
  Expr operator()(Idx... idx) const {
    return (*this)(std::vector<Expr>{Expr(idx)...});
  }

 private:
  TensorRef node_;
};

Tensor placeholder(std::vector<int64_t> shape, DType dtype, std::string name);

/// A compute tensor. `axis_names` name the loops of its nest (default i, j, k, l, ...).
Tensor compute(std::vector<int64_t> shape, const std::function<Expr(const std::vector<Var>&)>& f,
               std::string name, std::vector<std::string> axis_names = {});
Tensor compute(std::vector<int64_t> shape, const std::function<Expr(Var)>& f, std::string name,
               std::vector<std::string> axis_names = {});
Tensor compute(std::vector<int64_t> shape, const std::function<Expr(Var, Var)>& f, std::string name,
               std::vector<std::string> axis_names = {});
Tensor compute(std::vector<int64_t> shape, const std::function<Expr(Var, Var, Var)>& f,
               std::string name, std::vector<std::string> axis_names = {});
Tensor compute(std::vector<int64_t> shape, const std::function<Expr(Var, Var, Var, Var)>& f,
               std::string name, std::vector<std::string> axis_names = {});

IterVar reduce_axis(int64_t extent, std::string name);
Expr sum(Expr source, std::vector<IterVar> axes);
Expr max(Expr source, std::vector<IterVar> axes);
Expr min(Expr source, std::vector<IterVar> axes);

/// The tensors `outputs` depend on, producers first, each once (placeholders included).
std::vector<Tensor> topo_order(const std::vector<Tensor>& outputs);
/// Tensors read directly by a compute's body.
std::vector<Tensor> direct_inputs(const Tensor& t);

}  // namespace tessera
