// Elementwise planning: a node's epilogue and chains of elementwise nodes each run as one kernel,
// so a value passes through memory once.
#include <algorithm>
#include <numeric>

#include "graph/kernels.h"
#include "graph/op_attrs.h"
#include "graph/op_table.h"
#include "graph/passes.h"
#include "graph/planner.h"
#include "graph/weight_layouts.h"
#include "te/error.h"

namespace tessera::graph {

namespace {

// The inputs an elementwise node's kernel reads: Clip's bounds are folded into it.
std::vector<std::string> elementwise_operands(const Node& n) {
  if (n.op == "Clip" || n.op == "Relu") return {n.inputs[0]};
  std::vector<std::string> operands;
  for (const std::string& v : n.inputs)
    if (!v.empty()) operands.push_back(v);
  return operands;
}

}  // namespace

void Planner::epilogue_step(const Node& n, size_t src, const std::vector<int64_t>& shape,
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
    } else if (e.kind == Epilogue::Kind::kClip) {
      steps.push_back({ElementwiseStep::Kind::kClip, -1, e.lo, e.hi, {}, {}});
    } else {
      const Activation act = fused_activation(e.kind);
      steps.push_back({ElementwiseStep::Kind::kScalar,
                       -1,
                       0,
                       0,
                       [act](const std::vector<Expr>& x) { return activate(act, x[0]); },
                       {}});
    }
  }
  args.push_back(output_slot(n));
  te_step(elementwise_kernel(shape, in_shapes, steps), std::move(args));
}

ElementwiseStep Planner::elementwise_step(const Node& n) const {
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

bool Planner::is_elementwise_step(const Node& n) const {
  if (const OpDef* row = find_op(n.op); row && row->lowering == Lowering::kElementwise) return true;
  if (n.op == "Add" || n.op == "Mul" || n.op == "Relu") return true;
  if (n.op != "Clip") return false;
  try {
    clip_bounds(n, g_);
    return true;
  } catch (const Error&) {
    return false;
  }
}

std::vector<size_t> Planner::elementwise_chain() const {
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

ElementwiseStep Planner::chained_step(const Node& n, size_t at,
                                      const std::vector<int>& others) const {
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

void Planner::plan_elementwise_chain(const Node& head, const std::vector<size_t>& chain,
                                     int64_t block) {
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

}  // namespace tessera::graph
