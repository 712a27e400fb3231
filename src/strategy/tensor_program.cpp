#include "strategy/tensor_program.h"

#include <map>
#include <memory>

#include "te/error.h"
#include "te/expr_functor.h"
#include "tir/printer.h"

namespace tessera {

namespace {

std::vector<Tensor> computes(const TensorProgram& p) {
  std::vector<Tensor> out;
  for (const Tensor& t : topo_order(p.args)) {
    if (!t->is_placeholder) out.push_back(t);
  }
  return out;
}

class ReadRemapper : public ExprMutator {
 public:
  explicit ReadRemapper(const std::map<const TensorNode*, TensorRef>& m) : map_(m) {}

 protected:
  using ExprMutator::visit_;
  Expr visit_(const TensorReadNode& n, const Expr& self) override {
    std::vector<Expr> idx;
    bool changed = mutate_all(n.indices, &idx);
    auto it = map_.find(n.tensor.get());
    if (it == map_.end() && !changed) return self;
    TensorRef t = it == map_.end() ? n.tensor : it->second;
    return Expr(std::make_shared<TensorReadNode>(n.dtype, t, changed ? idx : n.indices));
  }

 private:
  const std::map<const TensorNode*, TensorRef>& map_;
};

}  // namespace

Tensor find_stage(const TensorProgram& p, const std::string& name) {
  for (const Tensor& t : computes(p)) {
    if (t->name == name) return t;
  }
  return Tensor();
}

TensorProgram replace_stage(const TensorProgram& p, const Tensor& old, const Tensor& replacement) {
  if (old->shape != replacement->shape || old->dtype != replacement->dtype) {
    throw_internal("replace_stage: {} and its replacement differ in shape or type", old->name);
  }
  std::map<const TensorNode*, TensorRef> map{{old.ref().get(), replacement.ref()}};
  // Producers come first, so a consumer sees its producers' replacements when it is rebuilt.
  for (const Tensor& t : computes(p)) {
    if (t.ref() == old.ref()) continue;
    Expr body = ReadRemapper(map).visit(t->body);
    if (body.same_as(t->body)) continue;
    auto node = std::make_shared<TensorNode>(*t.ref());
    node->body = body;
    map[t.ref().get()] = node;
  }
  TensorProgram out{p.name, {}};
  for (const Tensor& t : p.args) {
    auto it = map.find(t.ref().get());
    out.args.push_back(it == map.end() ? t : Tensor(it->second));
  }
  return out;
}

std::string print_tensor_program(const TensorProgram& p) {
  std::string out;
  for (const Tensor& t : computes(p)) {
    out += t->name + "[";
    for (size_t i = 0; i < t->axes.size(); ++i) {
      out += (i ? ", " : "") + t->axes[i].var.name();
    }
    out += "] = " + print_expr(t->body) + "\n";
  }
  return out;
}

}  // namespace tessera
