// The operator table. Rows of the executor's own library operators point at their rules in
// shape_inference.cpp and reference.cpp; every other operator is declared here whole.
#include "graph/op_table.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>

#include "graph/op_attrs.h"
#include "te/error.h"
#include "te/tensor.h"

namespace tessera::graph {

namespace {

// ---------------------------------------------------------------------------------------------
// Shared helpers

const std::vector<int64_t>& input_shape(const Node& n, const Graph& g, size_t i) {
  if (i >= n.inputs.size() || n.inputs[i].empty())
    throw_error("{}: input {} is missing", n.where(), i);
  return g.shape(n.inputs[i]);
}

bool has_input(const Node& n, size_t i) {
  return i < n.inputs.size() && !n.inputs[i].empty();
}

// A constant integer input (a shape, axes, pads): static shapes need it known at import.
std::vector<int64_t> constant_ints(const Node& n, const Graph& g, size_t i, const char* what) {
  if (!has_input(n, i)) throw_error("{}: needs {} (input {})", n.where(), what, i);
  auto it = g.constants.find(n.inputs[i]);
  if (it == g.constants.end())
    throw_error("{}: {} '{}' is not a constant (dynamic shapes are not supported)", n.where(), what,
                n.inputs[i]);
  std::vector<int64_t> out;
  for (double d : it->second.data) out.push_back(saturated_int(d));
  return out;
}

// Axes from input `input` where the opset moved them there, else from the attribute.
std::optional<std::vector<int64_t>> axes_of(const Node& n, const Graph& g, size_t input) {
  if (has_input(n, input)) return constant_ints(n, g, input, "axes");
  if (n.attrs.count("axes")) return n.attr_ints("axes", {});
  return std::nullopt;
}

std::vector<int64_t> normalized_axes(const Node& n, std::vector<int64_t> axes, int64_t rank) {
  for (int64_t& a : axes) a = normalize_axis(n, a, rank);
  std::sort(axes.begin(), axes.end());
  if (std::adjacent_find(axes.begin(), axes.end()) != axes.end())
    throw_error("{}: an axis is repeated", n.where());
  return axes;
}

std::vector<int64_t> unravel(int64_t i, const std::vector<int64_t>& shape) {
  std::vector<int64_t> idx(shape.size());
  for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
    idx[d] = i % shape[d];
    i /= shape[d];
  }
  return idx;
}

int64_t ravel(const std::vector<int64_t>& idx, const std::vector<int64_t>& shape) {
  int64_t flat = 0;
  for (size_t d = 0; d < shape.size(); ++d) flat = flat * shape[d] + idx[d];
  return flat;
}

std::vector<std::string> axis_names(size_t rank) {
  std::vector<std::string> names;
  for (size_t i = 0; i < rank; ++i) names.push_back(fmt::format("i{}", i));
  return names;
}

Expr f32(double v) {
  return make_float(v, DType::kFloat32);
}

Expr as_float(Expr cond) {
  return select(std::move(cond), f32(1.0), f32(0.0));
}

HostTensor same_data(const HostTensor& x, std::vector<int64_t> shape) {
  HostTensor out = x;
  out.shape = std::move(shape);
  return out;
}

// ---------------------------------------------------------------------------------------------
// Elementwise rows

HostTensor elementwise_reference(const OpDef& op, const Node& n, const Graph& g,
                                 const std::vector<const HostTensor*>& in) {
  std::vector<const HostTensor*> args;
  for (const HostTensor* t : in)
    if (t) args.push_back(t);
  HostTensor out;
  out.shape = args.at(0)->shape;
  out.is_int = true;
  for (const HostTensor* t : args) {
    out.shape = broadcast_shapes(out.shape, t->shape);
    out.is_int = out.is_int && t->is_int;
  }
  std::vector<double> params = op.params ? op.params(n, g) : std::vector<double>{};
  out.data.resize(num_elements(out.shape));
  std::vector<double> x(args.size());
  for (int64_t i = 0; i < num_elements(out.shape); ++i) {
    for (size_t k = 0; k < args.size(); ++k)
      x[k] = args[k]->data[broadcast_index(i, out.shape, args[k]->shape)];
    out.data[i] = op.eval(params, x);
  }
  return out;
}

std::vector<int64_t> elementwise_shape(const OpDef& op, const Node& n, const Graph& g) {
  size_t count = 0;
  for (const std::string& v : n.inputs) count += !v.empty();
  if (static_cast<int>(count) < op.min_inputs ||
      (op.max_inputs >= 0 && static_cast<int>(count) > op.max_inputs))
    throw_error("{}: takes {} inputs, got {}", n.where(),
                op.max_inputs == op.min_inputs ? std::to_string(op.min_inputs)
                                               : fmt::format("{} or more", op.min_inputs),
                count);
  std::vector<int64_t> out = input_shape(n, g, 0);
  for (size_t i = 1; i < n.inputs.size(); ++i) {
    if (n.inputs[i].empty()) continue;
    try {
      out = broadcast_shapes(out, g.shape(n.inputs[i]));
    } catch (const Error& e) {
      throw_error("{}: {}", n.where(), e.what());
    }
  }
  return out;
}

OpDef elementwise(std::string name, std::vector<std::string> attributes, int min_inputs,
                  int max_inputs, ScalarEvalFn eval, ScalarBuildFn build, ParamsFn params = {}) {
  OpDef d;
  d.name = std::move(name);
  d.attributes = std::move(attributes);
  d.lowering = Lowering::kElementwise;
  d.min_inputs = min_inputs;
  d.max_inputs = max_inputs;
  d.eval = std::move(eval);
  d.build = std::move(build);
  d.params = std::move(params);
  return d;
}

OpDef unary(std::string name, std::function<double(double)> eval, std::function<Expr(Expr)> build) {
  return elementwise(
      std::move(name), {}, 1, 1,
      [eval](const std::vector<double>&, const std::vector<double>& x) { return eval(x[0]); },
      [build](const std::vector<double>&, const std::vector<Expr>& x) { return build(x[0]); });
}

OpDef binary(std::string name, std::function<double(double, double)> eval,
             std::function<Expr(Expr, Expr)> build) {
  return elementwise(
      std::move(name), {}, 2, 2,
      [eval](const std::vector<double>&, const std::vector<double>& x) { return eval(x[0], x[1]); },
      [build](const std::vector<double>&, const std::vector<Expr>& x) {
        return build(x[0], x[1]);
      });
}

// Min, Max, Sum, Mean: any number of inputs, folded left to right.
OpDef variadic(std::string name, std::function<double(double, double)> eval,
               std::function<Expr(Expr, Expr)> build, bool mean = false) {
  return elementwise(
      std::move(name), {}, 1, -1,
      [eval, mean](const std::vector<double>&, const std::vector<double>& x) {
        double v = x[0];
        for (size_t i = 1; i < x.size(); ++i) v = eval(v, x[i]);
        return mean ? v / static_cast<double>(x.size()) : v;
      },
      [build, mean](const std::vector<double>&, const std::vector<Expr>& x) {
        Expr v = x[0];
        for (size_t i = 1; i < x.size(); ++i) v = build(v, x[i]);
        return mean ? v * f32(1.0 / static_cast<double>(x.size())) : v;
      });
}

// x^e for a constant e: products for small integers, sqrt for a half, else exp(e log x) (NaN for
// a negative base, as powf gives for a non-integer exponent).
Expr power(Expr x, double e) {
  if (e == 0) return f32(1.0);
  if (e == 0.5) return sqrt(x);
  if (e == std::round(e) && std::abs(e) <= 4) {
    Expr v = x;
    for (int i = 1; i < static_cast<int>(std::abs(e)); ++i) v = v * x;
    return e < 0 ? f32(1.0) / v : v;
  }
  return exp(log(x) * f32(e));
}

bool is_float_type(int64_t onnx_type) {
  // FLOAT, FLOAT16, DOUBLE, BFLOAT16
  return onnx_type == 1 || onnx_type == 10 || onnx_type == 11 || onnx_type == 16;
}

void add_elementwise_rows(std::vector<OpDef>& t) {
  // Through exp, which the vector code computes on whole vectors (sigmoid() is a libm call a
  // lane).
  t.push_back(unary(
      "Sigmoid", [](double x) { return 1.0 / (1.0 + std::exp(-x)); },
      [](Expr x) { return f32(1.0) / (f32(1.0) + exp(f32(0.0) - x)); }));
  t.push_back(unary(
      "Tanh", [](double x) { return std::tanh(x); }, [](Expr x) { return tanh(x); }));
  t.push_back(unary(
      "Exp", [](double x) { return std::exp(x); }, [](Expr x) { return exp(x); }));
  t.push_back(unary(
      "Log", [](double x) { return std::log(x); }, [](Expr x) { return log(x); }));
  t.push_back(unary(
      "Sqrt", [](double x) { return std::sqrt(x); }, [](Expr x) { return sqrt(x); }));
  t.push_back(unary(
      "Erf", [](double x) { return std::erf(x); }, [](Expr x) { return erf(x); }));
  t.push_back(unary(
      "Neg", [](double x) { return -x; }, [](Expr x) { return f32(0.0) - x; }));
  t.push_back(unary(
      "Abs", [](double x) { return std::abs(x); }, [](Expr x) { return max(x, f32(0.0) - x); }));
  t.push_back(unary(
      "Reciprocal", [](double x) { return 1.0 / x; }, [](Expr x) { return f32(1.0) / x; }));
  t.push_back(unary(
      "Sign", [](double x) { return static_cast<double>((x > 0) - (x < 0)); },
      [](Expr x) { return as_float(x > f32(0.0)) - as_float(x < f32(0.0)); }));
  t.push_back(unary(
      "Softplus", [](double x) { return x > 20 ? x : std::log1p(std::exp(x)); },
      [](Expr x) { return select(x > f32(20.0), x, log(f32(1.0) + exp(x))); }));
  t.push_back(unary(
      "Not", [](double x) { return x == 0 ? 1.0 : 0.0; },
      [](Expr x) { return as_float(eq(x, f32(0.0))); }));
  t.push_back(unary(
      "HardSwish", [](double x) { return x * std::clamp(x / 6 + 0.5, 0.0, 1.0); },
      [](Expr x) { return x * min(max(x * f32(1.0 / 6) + f32(0.5), f32(0.0)), f32(1.0)); }));
  t.push_back(elementwise(
      "HardSigmoid", {"alpha", "beta"}, 1, 1,
      [](const std::vector<double>& p, const std::vector<double>& x) {
        return std::clamp(p[0] * x[0] + p[1], 0.0, 1.0);
      },
      [](const std::vector<double>& p, const std::vector<Expr>& x) {
        return min(max(x[0] * f32(p[0]) + f32(p[1]), f32(0.0)), f32(1.0));
      },
      [](const Node& n, const Graph&) {
        return std::vector<double>{n.attr_float("alpha", 0.2), n.attr_float("beta", 0.5)};
      }));
  t.push_back(elementwise(
      "LeakyRelu", {"alpha"}, 1, 1,
      [](const std::vector<double>& p, const std::vector<double>& x) {
        return x[0] < 0 ? p[0] * x[0] : x[0];
      },
      [](const std::vector<double>& p, const std::vector<Expr>& x) {
        return select(x[0] < f32(0.0), x[0] * f32(p[0]), x[0]);
      },
      [](const Node& n, const Graph&) {
        return std::vector<double>{n.attr_float("alpha", 0.01)};
      }));
  t.push_back(elementwise(
      "Elu", {"alpha"}, 1, 1,
      [](const std::vector<double>& p, const std::vector<double>& x) {
        return x[0] < 0 ? p[0] * (std::exp(x[0]) - 1) : x[0];
      },
      [](const std::vector<double>& p, const std::vector<Expr>& x) {
        return select(x[0] < f32(0.0), (exp(x[0]) - f32(1.0)) * f32(p[0]), x[0]);
      },
      [](const Node& n, const Graph&) { return std::vector<double>{n.attr_float("alpha", 1.0)}; }));
  // params: 1 for the tanh approximation.
  t.push_back(elementwise(
      "Gelu", {"approximate"}, 1, 1,
      [](const std::vector<double>& p, const std::vector<double>& x) {
        double v = x[0];
        if (p[0] == 0) return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0)));
        return 0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
      },
      [](const std::vector<double>& p, const std::vector<Expr>& x) {
        Expr v = x[0];
        if (p[0] == 0) return f32(0.5) * v * (f32(1.0) + erf(v * f32(M_SQRT1_2)));
        return f32(0.5) * v *
               (f32(1.0) + tanh(f32(std::sqrt(2 / M_PI)) * (v + f32(0.044715) * v * v * v)));
      },
      [](const Node& n, const Graph&) {
        std::string a = n.attr_string("approximate", "none");
        if (a != "none" && a != "tanh")
          throw_error("{}: approximate='{}' (none or tanh)", n.where(), a);
        return std::vector<double>{a == "tanh" ? 1.0 : 0.0};
      }));

  t.push_back(binary("Sub", std::minus<double>(), [](Expr a, Expr b) { return a - b; }));
  t.push_back(binary("Div", std::divides<double>(), [](Expr a, Expr b) { return a / b; }));
  // params: {1, e} where the exponent is a constant scalar (then the kernel multiplies), else {0}.
  t.push_back(elementwise(
      "Pow", {}, 2, 2,
      [](const std::vector<double>&, const std::vector<double>& x) { return std::pow(x[0], x[1]); },
      [](const std::vector<double>& p, const std::vector<Expr>& x) {
        return p[0] == 1 ? power(x[0], p[1]) : exp(log(x[0]) * x[1]);
      },
      [](const Node& n, const Graph& g) {
        auto it = g.constants.find(n.inputs.at(1));
        if (it != g.constants.end() && it->second.data.size() == 1)
          return std::vector<double>{1.0, it->second.data[0]};
        return std::vector<double>{0.0};
      }));
  // fmod=0: the remainder takes the divisor's sign (integers, Python's %); fmod=1: C's fmod.
  t.push_back(elementwise(
      "Mod", {"fmod"}, 2, 2,
      [](const std::vector<double>& p, const std::vector<double>& x) {
        double r = std::fmod(x[0], x[1]);
        if (p[0] == 0 && r != 0 && (r < 0) != (x[1] < 0)) r += x[1];
        return r;
      },
      [](const std::vector<double>& p, const std::vector<Expr>& x) {
        Expr r = x[0] - cast(DType::kFloat32, cast(DType::kInt32, x[0] / x[1])) * x[1];
        if (p[0] != 0) return r;
        Expr opposite = (r < f32(0.0) && x[1] > f32(0.0)) || (r > f32(0.0) && x[1] < f32(0.0));
        return select(opposite, r + x[1], r);
      },
      [](const Node& n, const Graph&) {
        return std::vector<double>{static_cast<double>(n.attr_int("fmod", 0))};
      }));
  t.push_back(variadic(
      "Min", [](double a, double b) { return std::min(a, b); },
      [](Expr a, Expr b) { return min(a, b); }));
  t.push_back(variadic(
      "Max", [](double a, double b) { return std::max(a, b); },
      [](Expr a, Expr b) { return max(a, b); }));
  t.push_back(variadic("Sum", std::plus<double>(), [](Expr a, Expr b) { return a + b; }));
  t.push_back(variadic(
      "Mean", std::plus<double>(), [](Expr a, Expr b) { return a + b; }, true));
  t.push_back(binary(
      "Equal", [](double a, double b) { return a == b ? 1.0 : 0.0; },
      [](Expr a, Expr b) { return as_float(eq(a, b)); }));
  t.push_back(binary(
      "Less", [](double a, double b) { return a < b ? 1.0 : 0.0; },
      [](Expr a, Expr b) { return as_float(a < b); }));
  t.push_back(binary(
      "LessOrEqual", [](double a, double b) { return a <= b ? 1.0 : 0.0; },
      [](Expr a, Expr b) { return as_float(a <= b); }));
  t.push_back(binary(
      "Greater", [](double a, double b) { return a > b ? 1.0 : 0.0; },
      [](Expr a, Expr b) { return as_float(a > b); }));
  t.push_back(binary(
      "GreaterOrEqual", [](double a, double b) { return a >= b ? 1.0 : 0.0; },
      [](Expr a, Expr b) { return as_float(a >= b); }));
  t.push_back(binary(
      "And", [](double a, double b) { return a != 0 && b != 0 ? 1.0 : 0.0; },
      [](Expr a, Expr b) { return as_float(ne(a, f32(0.0)) && ne(b, f32(0.0))); }));
  t.push_back(binary(
      "Or", [](double a, double b) { return a != 0 || b != 0 ? 1.0 : 0.0; },
      [](Expr a, Expr b) { return as_float(ne(a, f32(0.0)) || ne(b, f32(0.0))); }));
  t.push_back(elementwise(
      "Where", {}, 3, 3,
      [](const std::vector<double>&, const std::vector<double>& x) {
        return x[0] != 0 ? x[1] : x[2];
      },
      [](const std::vector<double>&, const std::vector<Expr>& x) {
        return select(ne(x[0], f32(0.0)), x[1], x[2]);
      }));
  // Values flow as float32 at run time (doubles in constants): a cast to an integer type
  // truncates toward zero, to bool tests for non-zero, to a float type changes nothing.
  OpDef cast_row = elementwise(
      "Cast", {"to", "saturate"}, 1, 1,
      [](const std::vector<double>& p, const std::vector<double>& x) {
        if (p[0] == 1) return x[0];
        if (p[0] == 9) return x[0] != 0 ? 1.0 : 0.0;
        return std::trunc(x[0]);
      },
      [](const std::vector<double>& p, const std::vector<Expr>& x) {
        if (p[0] == 1) return x[0];
        if (p[0] == 9) return as_float(ne(x[0], f32(0.0)));
        return cast(DType::kFloat32, cast(DType::kInt32, x[0]));
      },
      [](const Node& n, const Graph&) {
        int64_t to = n.attr_int("to", 1);
        if (to == 8) throw_error("{}: a cast to strings is not supported", n.where());
        return std::vector<double>{is_float_type(to) ? 1.0 : to == 9 ? 9.0 : 0.0};
      });
  ReferenceFn cast_values = [](const Node& n, const Graph& g,
                               const std::vector<const HostTensor*>& in) {
    HostTensor out = elementwise_reference(*find_op("Cast"), n, g, in);
    out.is_int = !is_float_type(n.attr_int("to", 1));
    return out;
  };
  cast_row.reference = cast_values;
  t.push_back(std::move(cast_row));
}

// ---------------------------------------------------------------------------------------------
// Views: the input's bytes under another shape

OpDef view(std::string name, std::vector<std::string> attributes, InferFn infer) {
  OpDef d;
  d.name = std::move(name);
  d.attributes = std::move(attributes);
  d.lowering = Lowering::kView;
  d.infer = std::move(infer);
  d.reference = [](const Node& n, const Graph& g, const std::vector<const HostTensor*>& in) {
    if (in.empty() || !in[0]) throw_error("{}: input 0 is missing", n.where());
    return same_data(*in[0], g.shape(n.outputs[0]));
  };
  return d;
}

std::vector<int64_t> squeeze_shape(const Node& n, const Graph& g) {
  const std::vector<int64_t>& x = input_shape(n, g, 0);
  std::optional<std::vector<int64_t>> axes = axes_of(n, g, 1);
  std::vector<int64_t> out;
  if (!axes) {
    for (int64_t d : x)
      if (d != 1) out.push_back(d);
    return out;
  }
  std::vector<int64_t> drop = normalized_axes(n, *axes, static_cast<int64_t>(x.size()));
  for (int64_t d = 0; d < static_cast<int64_t>(x.size()); ++d) {
    bool dropped = std::binary_search(drop.begin(), drop.end(), d);
    if (dropped && x[d] != 1)
      throw_error("{}: cannot squeeze dimension {} of size {}", n.where(), d, x[d]);
    if (!dropped) out.push_back(x[d]);
  }
  return out;
}

std::vector<int64_t> unsqueeze_shape(const Node& n, const Graph& g) {
  const std::vector<int64_t>& x = input_shape(n, g, 0);
  std::optional<std::vector<int64_t>> axes = axes_of(n, g, 1);
  if (!axes) throw_error("{}: needs axes", n.where());
  auto rank = static_cast<int64_t>(x.size() + axes->size());
  std::vector<int64_t> add = normalized_axes(n, *axes, rank);
  std::vector<int64_t> out;
  size_t next = 0;
  for (int64_t d = 0; d < rank; ++d) {
    if (std::binary_search(add.begin(), add.end(), d))
      out.push_back(1);
    else
      out.push_back(x.at(next++));
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Reductions over any axes, keepdims either way

struct ReduceSpec {
  std::vector<bool> reduced;        // per input dimension
  std::vector<int64_t> kept_shape;  // the input's shape with reduced dimensions 1
  std::vector<int64_t> out_shape;   // kept_shape, without them unless keepdims
};

ReduceSpec reduce_spec(const Node& n, const Graph& g) {
  const std::vector<int64_t>& x = input_shape(n, g, 0);
  auto rank = static_cast<int64_t>(x.size());
  std::optional<std::vector<int64_t>> axes = axes_of(n, g, 1);
  ReduceSpec s;
  s.reduced.assign(x.size(), false);
  if (!axes || axes->empty()) {
    if (n.attr_int("noop_with_empty_axes", 0) == 0) s.reduced.assign(x.size(), true);
  } else {
    for (int64_t a : normalized_axes(n, *axes, rank)) s.reduced[a] = true;
  }
  bool keep = n.attr_int("keepdims", 1) != 0;
  for (int64_t d = 0; d < rank; ++d) {
    s.kept_shape.push_back(s.reduced[d] ? 1 : x[d]);
    if (!s.reduced[d] || keep) s.out_shape.push_back(s.reduced[d] ? 1 : x[d]);
  }
  return s;
}

enum class ReduceKind { kSum, kMean, kMax, kMin };

OpDef reduction(std::string name, ReduceKind kind) {
  OpDef d;
  d.name = std::move(name);
  d.attributes = {"axes", "keepdims", "noop_with_empty_axes"};
  d.lowering = Lowering::kKernel;
  d.kernel_inputs = {0};
  d.infer = [](const Node& n, const Graph& g) { return reduce_spec(n, g).out_shape; };
  d.reference = [kind](const Node& n, const Graph& g, const std::vector<const HostTensor*>& in) {
    const HostTensor& x = *in.at(0);
    ReduceSpec s = reduce_spec(n, g);
    double init = kind == ReduceKind::kMax   ? -std::numeric_limits<double>::infinity()
                  : kind == ReduceKind::kMin ? std::numeric_limits<double>::infinity()
                                             : 0.0;
    HostTensor out{s.out_shape, std::vector<double>(num_elements(s.kept_shape), init), x.is_int};
    for (int64_t i = 0; i < x.num_elements(); ++i) {
      std::vector<int64_t> idx = unravel(i, x.shape);
      for (size_t k = 0; k < idx.size(); ++k)
        if (s.reduced[k]) idx[k] = 0;
      double& acc = out.data[ravel(idx, s.kept_shape)];
      double v = x.data[i];
      acc = kind == ReduceKind::kMax   ? std::max(acc, v)
            : kind == ReduceKind::kMin ? std::min(acc, v)
                                       : acc + v;
    }
    if (kind == ReduceKind::kMean) {
      double count = static_cast<double>(x.num_elements()) / double(out.data.size());
      for (double& v : out.data) v /= count;
    }
    return out;
  };
  d.kernel = [kind](const Node& n, const Graph& g) {
    const std::vector<int64_t>& x = g.shape(n.inputs[0]);
    ReduceSpec s = reduce_spec(n, g);
    Tensor in = placeholder(x, DType::kFloat32, "in");
    std::vector<IterVar> axes;
    int64_t count = 1;
    for (size_t k = 0; k < x.size(); ++k)
      if (s.reduced[k]) {
        axes.push_back(reduce_axis(x[k], fmt::format("r{}", k)));
        count *= x[k];
      }
    Tensor out = compute(
        s.kept_shape,
        [&](const std::vector<Var>& at) {
          std::vector<Expr> idx;
          for (size_t k = 0, r = 0; k < x.size(); ++k)
            idx.push_back(s.reduced[k] ? Expr(axes[r++].var) : Expr(at[k]));
          Expr v = in(idx);
          if (axes.empty()) return v;
          switch (kind) {
            case ReduceKind::kMax:
              return max(v, axes);
            case ReduceKind::kMin:
              return min(v, axes);
            case ReduceKind::kMean:
              return sum(v * f32(1.0 / static_cast<double>(count)), axes);
            case ReduceKind::kSum:
              break;
          }
          return sum(v, axes);
        },
        "out", axis_names(s.kept_shape.size()));
    return finish_kernel("reduce", {in, out});
  };
  return d;
}

// ---------------------------------------------------------------------------------------------
// Normalizations along trailing or any axes

// Rows and columns of a tensor split at `axis`: everything before it, everything from it on.
std::pair<int64_t, int64_t> split_at(const std::vector<int64_t>& shape, int64_t axis) {
  int64_t rows = 1, cols = 1;
  for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d)
    (d < axis ? rows : cols) *= shape[d];
  return {rows, cols};
}

OpDef layer_normalization() {
  OpDef d;
  d.name = "LayerNormalization";
  d.attributes = {"axis", "epsilon", "stash_type"};
  d.lowering = Lowering::kKernel;
  d.infer = [](const Node& n, const Graph& g) {
    const std::vector<int64_t>& x = input_shape(n, g, 0);
    int64_t axis = normalize_axis(n, n.attr_int("axis", -1), static_cast<int64_t>(x.size()));
    int64_t cols = split_at(x, axis).second;
    for (size_t i = 1; i < 3; ++i) {
      if (!has_input(n, i)) continue;
      int64_t e = num_elements(g.shape(n.inputs[i]));
      if (e != cols && e != 1)
        throw_error("{}: {} {} does not match the {} normalized elements", n.where(),
                    i == 1 ? "scale" : "bias", shape_text(g.shape(n.inputs[i])), cols);
    }
    return x;
  };
  d.reference = [](const Node& n, const Graph&, const std::vector<const HostTensor*>& in) {
    const HostTensor& x = *in.at(0);
    int64_t axis = normalize_axis(n, n.attr_int("axis", -1), static_cast<int64_t>(x.shape.size()));
    auto [rows, cols] = split_at(x.shape, axis);
    double eps = n.attr_float("epsilon", 1e-5);
    const HostTensor* scale = in.size() > 1 ? in[1] : nullptr;
    const HostTensor* bias = in.size() > 2 ? in[2] : nullptr;
    auto at = [cols](const HostTensor* t, int64_t c) {
      return t->data.size() == 1 ? t->data[0] : t->data[c % cols];
    };
    HostTensor out = x;
    out.is_int = false;
    for (int64_t r = 0; r < rows; ++r) {
      double mean = 0, var = 0;
      for (int64_t c = 0; c < cols; ++c) mean += x.data[r * cols + c];
      mean /= double(cols);
      for (int64_t c = 0; c < cols; ++c) var += std::pow(x.data[r * cols + c] - mean, 2);
      var /= double(cols);
      for (int64_t c = 0; c < cols; ++c) {
        double v = (x.data[r * cols + c] - mean) / std::sqrt(var + eps);
        if (scale) v *= at(scale, c);
        if (bias) v += at(bias, c);
        out.data[r * cols + c] = v;
      }
    }
    return out;
  };
  d.kernel = [](const Node& n, const Graph& g) {
    const std::vector<int64_t>& shape = g.shape(n.inputs[0]);
    int64_t axis = normalize_axis(n, n.attr_int("axis", -1), static_cast<int64_t>(shape.size()));
    auto [rows, cols] = split_at(shape, axis);
    double eps = n.attr_float("epsilon", 1e-5);
    Tensor x = placeholder({rows, cols}, DType::kFloat32, "x");
    std::vector<Tensor> args{x};
    std::optional<Tensor> scale, bias;
    auto param = [&](size_t i, const char* name) -> std::optional<Tensor> {
      if (!has_input(n, i)) return std::nullopt;
      args.push_back(placeholder({num_elements(g.shape(n.inputs[i]))}, DType::kFloat32, name));
      return args.back();
    };
    scale = param(1, "scale");
    bias = param(2, "bias");
    IterVar rc = reduce_axis(cols, "rc"), rv = reduce_axis(cols, "rv");
    const double inv = 1.0 / static_cast<double>(cols);
    Tensor mean =
        compute({rows}, [&](Var r) { return sum(x(r, rc.var) * f32(inv), {rc}); }, "mean", {"r"});
    Tensor var = compute({rows},
                         [&](Var r) {
                           Expr centered = x(r, rv.var) - mean(r);
                           return sum(centered * centered * f32(inv), {rv});
                         },
                         "var", {"r"});
    Tensor out =
        compute({rows, cols},
                [&](Var r, Var c) {
                  Expr v = (x(r, c) - mean(r)) / sqrt(var(r) + f32(eps));
                  auto at = [&](const Tensor& t) { return t->shape[0] == 1 ? t(0) : t(c); };
                  if (scale) v = v * at(*scale);
                  if (bias) v = v + at(*bias);
                  return v;
                },
                "out", {"i0", "i1"});
    args.push_back(out);
    return finish_kernel("layer_norm", std::move(args));
  };
  return d;
}

}  // namespace

// Softmax or LogSoftmax along any axis: the maximum, the sum of exponentials, the result.
TeKernel softmax_kernel(const std::vector<int64_t>& shape, int64_t axis, bool log_softmax) {
  int64_t outer = 1, len = shape[axis], inner = 1;
  for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d) {
    if (d < axis) outer *= shape[d];
    if (d > axis) inner *= shape[d];
  }
  Tensor x = placeholder({outer, len, inner}, DType::kFloat32, "x");
  IterVar rm = reduce_axis(len, "rm"), rs = reduce_axis(len, "rs");
  Tensor mx = compute({outer, inner}, [&](Var o, Var i) { return max(x(o, rm.var, i), {rm}); },
                      "mx", {"o", "i"});
  Tensor total = compute({outer, inner},
                         [&](Var o, Var i) { return sum(exp(x(o, rs.var, i) - mx(o, i)), {rs}); },
                         "total", {"o", "i"});
  Tensor out =
      compute({outer, len, inner},
              [&](Var o, Var j, Var i) {
                Expr shifted = x(o, j, i) - mx(o, i);
                return log_softmax ? shifted - log(total(o, i)) : exp(shifted) / total(o, i);
              },
              "out", {"i0", "i1", "i2"});
  return finish_kernel(log_softmax ? "log_softmax" : "softmax_axis", {x, out});
}

TeKernel pool2d_kernel(const Window2d& w, bool is_max) {
  if (!is_max && (w.dh != 1 || w.dw != 1))
    throw_error("average pooling with dilations is not supported");
  Tensor in = placeholder({w.n, w.c, w.h, w.w}, DType::kFloat32, "in");
  IterVar ry = reduce_axis(w.kh, "ry"), rx = reduce_axis(w.kw, "rx");
  const int sh = static_cast<int>(w.sh), sw = static_cast<int>(w.sw);
  const int pt = static_cast<int>(w.pt), pl = static_cast<int>(w.pl);
  const int h = static_cast<int>(w.h), wd = static_cast<int>(w.w);
  // A tap outside the input reads a clamped in-bounds element the select then discards.
  auto tap = [&](Var n, Var c, Var y, Var x) {
    Expr iy = Expr(y) * sh + Expr(ry.var) * static_cast<int>(w.dh) - pt;
    Expr ix = Expr(x) * sw + Expr(rx.var) * static_cast<int>(w.dw) - pl;
    Expr inside = iy >= Expr(0) && iy < Expr(h) && ix >= Expr(0) && ix < Expr(wd);
    Expr v = in(n, c, min(max(iy, Expr(0)), Expr(h - 1)), min(max(ix, Expr(0)), Expr(wd - 1)));
    return select(inside, v, f32(is_max ? std::numeric_limits<float>::lowest() : 0.0));
  };
  std::vector<int64_t> out_shape{w.n, w.c, w.oh, w.ow};
  if (is_max) {
    Tensor out = compute(out_shape,
                         [&](Var n, Var c, Var y, Var x) {
                           return max(tap(n, c, y, x), {ry, rx});
                         },
                         "out", {"i0", "i1", "i2", "i3"});
    return finish_kernel("max_pool", {in, out});
  }
  Tensor total = compute(out_shape,
                         [&](Var n, Var c, Var y, Var x) {
                           return sum(tap(n, c, y, x), {ry, rx});
                         },
                         "total", {"n", "c", "y", "x"});
  // Taps counted: inside the input, or inside the padded input with count_include_pad.
  const int lo_h = w.count_include_pad ? -pt : 0, hi_h = h + (w.count_include_pad ? int(w.pb) : 0);
  const int lo_w = w.count_include_pad ? -pl : 0, hi_w = wd + (w.count_include_pad ? int(w.pr) : 0);
  Tensor out =
      compute(out_shape,
              [&](Var n, Var c, Var y, Var x) {
                Expr y0 = Expr(y) * sh - pt, x0 = Expr(x) * sw - pl;
                Expr rows = min(y0 + static_cast<int>(w.kh), Expr(hi_h)) - max(y0, Expr(lo_h));
                Expr cols = min(x0 + static_cast<int>(w.kw), Expr(hi_w)) - max(x0, Expr(lo_w));
                return total(n, c, y, x) / cast(DType::kFloat32, rows * cols);
              },
              "out", {"i0", "i1", "i2", "i3"});
  return finish_kernel("avg_pool", {in, out});
}

TeKernel conv2d_kernel(const Window2d& w, bool bias) {
  const int64_t cg = w.c / w.group, og = w.out_channels / w.group;
  Tensor in = placeholder({w.n, w.c, w.h, w.w}, DType::kFloat32, "in");
  Tensor weight = placeholder({w.out_channels, cg, w.kh, w.kw}, DType::kFloat32, "weight");
  std::vector<Tensor> args{in, weight};
  if (bias) args.push_back(placeholder({w.out_channels}, DType::kFloat32, "bias"));
  IterVar rc = reduce_axis(cg, "rc"), ry = reduce_axis(w.kh, "ry"), rx = reduce_axis(w.kw, "rx");
  const int h = static_cast<int>(w.h), wd = static_cast<int>(w.w);
  Tensor acc = compute(
      {w.n, w.out_channels, w.oh, w.ow},
      [&](Var n, Var o, Var y, Var x) {
        Expr iy = Expr(y) * static_cast<int>(w.sh) + Expr(ry.var) * static_cast<int>(w.dh) -
                  static_cast<int>(w.pt);
        Expr ix = Expr(x) * static_cast<int>(w.sw) + Expr(rx.var) * static_cast<int>(w.dw) -
                  static_cast<int>(w.pl);
        Expr inside = iy >= Expr(0) && iy < Expr(h) && ix >= Expr(0) && ix < Expr(wd);
        Expr channel = Expr(o) / static_cast<int>(og) * static_cast<int>(cg) + Expr(rc.var);
        Expr v =
            in(n, channel, min(max(iy, Expr(0)), Expr(h - 1)), min(max(ix, Expr(0)), Expr(wd - 1)));
        return sum(select(inside, v, f32(0.0)) * weight(o, rc.var, ry.var, rx.var), {rc, ry, rx});
      },
      bias ? "acc" : "out", {"i0", "i1", "i2", "i3"});
  if (bias) {
    const Tensor& b = args[2];
    Tensor sum_only = acc;
    acc = compute({w.n, w.out_channels, w.oh, w.ow},
                  [&](Var n, Var o, Var y, Var x) { return sum_only(n, o, y, x) + b(o); }, "out",
                  {"i0", "i1", "i2", "i3"});
  }
  args.push_back(acc);
  return finish_kernel("conv2d_any", std::move(args));
}

namespace {

// ---------------------------------------------------------------------------------------------
// ConvTranspose: each input pixel spreads over a window of the output

struct TransposedWindow {
  int64_t n = 0, c = 0, h = 0, w = 0, out_channels = 0, group = 1;
  int64_t kh = 1, kw = 1, sh = 1, sw = 1, dh = 1, dw = 1, pt = 0, pl = 0, oh = 0, ow = 0;
};

TransposedWindow transposed_window(const Node& n, const Graph& g) {
  const std::vector<int64_t>& x = input_shape(n, g, 0);
  const std::vector<int64_t>& wt = input_shape(n, g, 1);
  if (x.size() != 4 || wt.size() != 4)
    throw_error("{}: needs a 4-D NCHW input and 4-D weights", n.where());
  TransposedWindow t;
  t.n = x[0], t.c = x[1], t.h = x[2], t.w = x[3];
  t.group = n.attr_int("group", 1);
  if (t.group <= 0 || wt[0] != t.c || t.c % t.group != 0)
    throw_error("{}: weights {} do not fit {} input channels in {} groups", n.where(),
                shape_text(wt), t.c, t.group);
  t.out_channels = wt[1] * t.group;
  t.kh = wt[2], t.kw = wt[3];
  std::vector<int64_t> strides = n.attr_ints("strides", {1, 1});
  std::vector<int64_t> dilations = n.attr_ints("dilations", {1, 1});
  std::vector<int64_t> pads = n.attr_ints("pads", {0, 0, 0, 0});
  std::vector<int64_t> extra = n.attr_ints("output_padding", {0, 0});
  if (strides.size() != 2 || dilations.size() != 2 || pads.size() != 4 || extra.size() != 2)
    throw_error("{}: strides, dilations, pads and output_padding must be 2-D", n.where());
  if (n.attr_string("auto_pad", "NOTSET") != "NOTSET")
    throw_error("{}: auto_pad is not supported (give explicit pads)", n.where());
  t.sh = strides[0], t.sw = strides[1], t.dh = dilations[0], t.dw = dilations[1];
  t.pt = pads[0], t.pl = pads[1];
  if (t.sh <= 0 || t.sw <= 0 || t.dh <= 0 || t.dw <= 0)
    throw_error("{}: strides and dilations must be positive", n.where());
  t.oh = t.sh * (t.h - 1) + extra[0] + (t.kh - 1) * t.dh + 1 - pads[0] - pads[2];
  t.ow = t.sw * (t.w - 1) + extra[1] + (t.kw - 1) * t.dw + 1 - pads[1] - pads[3];
  std::vector<int64_t> given = n.attr_ints("output_shape", {});
  if (!given.empty()) {
    // The pads that give this shape (the total split as SAME_UPPER splits it, as ONNX defines).
    if (given.size() != 2) throw_error("{}: output_shape must be 2-D", n.where());
    auto total = [](int64_t in, int64_t s, int64_t more, int64_t k, int64_t d, int64_t out) {
      return s * (in - 1) + more + (k - 1) * d + 1 - out;
    };
    t.pt = total(t.h, t.sh, extra[0], t.kh, t.dh, given[0]) / 2;
    t.pl = total(t.w, t.sw, extra[1], t.kw, t.dw, given[1]) / 2;
    t.oh = given[0], t.ow = given[1];
  }
  if (t.oh <= 0 || t.ow <= 0) throw_error("{}: an empty output", n.where());
  return t;
}

// Where output position `at` reads along one dimension for tap `k`: the input position
// (at + pad - k * dilation) / stride where that is whole and inside.
std::pair<Expr, Expr> transposed_tap(Expr at, Expr k, int64_t stride, int64_t dilation, int64_t pad,
                                     int64_t size, int64_t kernel) {
  const int s = static_cast<int>(stride), d = static_cast<int>(dilation);
  // Shifted up by whole strides so that C's % and / never see a negative number.
  const int shift = s * static_cast<int>((kernel * dilation) / stride + 1);
  Expr num = at + static_cast<int>(pad) - k * d + shift;
  Expr index = num / s - shift / s;
  Expr ok = eq(num % s, Expr(0)) && index >= Expr(0) && index < Expr(static_cast<int>(size));
  return {ok, min(max(index, Expr(0)), Expr(static_cast<int>(size) - 1))};
}

// tessera.ZeroInsert (graph/passes.h lower_conv_transpose): (stride - 1) zeros between the
// pixels of H and W and the given padding around them.
OpDef zero_insert() {
  OpDef d;
  d.name = "tessera.ZeroInsert";
  d.attributes = {"strides", "pads"};
  d.lowering = Lowering::kKernel;
  d.infer = [](const Node& n, const Graph& g) {
    const std::vector<int64_t>& x = input_shape(n, g, 0);
    std::vector<int64_t> s = n.attr_ints("strides", {1, 1}), p = n.attr_ints("pads", {0, 0, 0, 0});
    return std::vector<int64_t>{x[0], x[1], (x[2] - 1) * s[0] + 1 + p[0] + p[2],
                                (x[3] - 1) * s[1] + 1 + p[1] + p[3]};
  };
  d.reference = [](const Node& n, const Graph& g, const std::vector<const HostTensor*>& in) {
    const HostTensor& x = *in.at(0);
    std::vector<int64_t> s = n.attr_ints("strides", {1, 1}), p = n.attr_ints("pads", {0, 0, 0, 0});
    HostTensor out{g.shape(n.outputs[0]), {}, false};
    out.data.assign(num_elements(out.shape), 0.0);
    for (int64_t i = 0; i < x.num_elements(); ++i) {
      std::vector<int64_t> idx = unravel(i, x.shape);
      idx[2] = idx[2] * s[0] + p[0];
      idx[3] = idx[3] * s[1] + p[1];
      out.data[ravel(idx, out.shape)] = x.data[i];
    }
    return out;
  };
  d.kernel = [](const Node& n, const Graph& g) {
    const std::vector<int64_t>& x = g.shape(n.inputs[0]);
    std::vector<int64_t> s = n.attr_ints("strides", {1, 1}), p = n.attr_ints("pads", {0, 0, 0, 0});
    Tensor in = placeholder(x, DType::kFloat32, "in");
    Tensor out = compute(g.shape(n.outputs[0]),
                         [&](Var b, Var c, Var y, Var xx) {
                           auto [ok_y, iy] = transposed_tap(y, Expr(0), s[0], 1, -p[0], x[2], 1);
                           auto [ok_x, ix] = transposed_tap(xx, Expr(0), s[1], 1, -p[1], x[3], 1);
                           return select(ok_y && ok_x, in(b, c, iy, ix), f32(0.0));
                         },
                         "out", {"i0", "i1", "i2", "i3"});
    return finish_kernel("zero_insert", {in, out});
  };
  return d;
}

OpDef conv_transpose() {
  OpDef d;
  d.name = "ConvTranspose";
  d.attributes = {"auto_pad", "dilations",      "group",        "kernel_shape",
                  "pads",     "output_padding", "output_shape", "strides"};
  d.lowering = Lowering::kKernel;
  d.infer = [](const Node& n, const Graph& g) {
    TransposedWindow t = transposed_window(n, g);
    if (has_input(n, 2) && g.shape(n.inputs[2]) != std::vector<int64_t>{t.out_channels})
      throw_error("{}: bias does not match {} output channels", n.where(), t.out_channels);
    return std::vector<int64_t>{t.n, t.out_channels, t.oh, t.ow};
  };
  d.reference = [](const Node& n, const Graph& g, const std::vector<const HostTensor*>& in) {
    TransposedWindow t = transposed_window(n, g);
    const HostTensor& x = *in.at(0);
    const HostTensor& wt = *in.at(1);
    const HostTensor* bias = in.size() > 2 ? in[2] : nullptr;
    const int64_t cg = t.c / t.group, og = t.out_channels / t.group;
    HostTensor out{{t.n, t.out_channels, t.oh, t.ow}, {}, false};
    out.data.assign(num_elements(out.shape), 0.0);
    for (int64_t b = 0; b < t.n; ++b)
      for (int64_t c = 0; c < t.c; ++c)
        for (int64_t y = 0; y < t.h; ++y)
          for (int64_t xx = 0; xx < t.w; ++xx) {
            double v = x.data[((b * t.c + c) * t.h + y) * t.w + xx];
            for (int64_t oo = 0; oo < og; ++oo)
              for (int64_t ky = 0; ky < t.kh; ++ky)
                for (int64_t kx = 0; kx < t.kw; ++kx) {
                  int64_t oy = y * t.sh + ky * t.dh - t.pt, ox = xx * t.sw + kx * t.dw - t.pl;
                  if (oy < 0 || oy >= t.oh || ox < 0 || ox >= t.ow) continue;
                  int64_t o = c / cg * og + oo;
                  out.data[((b * t.out_channels + o) * t.oh + oy) * t.ow + ox] +=
                      v * wt.data[((c * og + oo) * t.kh + ky) * t.kw + kx];
                }
          }
    if (bias)
      for (int64_t i = 0; i < out.num_elements(); ++i)
        out.data[i] += bias->data[i / (t.oh * t.ow) % t.out_channels];
    return out;
  };
  d.kernel = [](const Node& n, const Graph& g) {
    TransposedWindow t = transposed_window(n, g);
    const int64_t cg = t.c / t.group, og = t.out_channels / t.group;
    Tensor in = placeholder({t.n, t.c, t.h, t.w}, DType::kFloat32, "in");
    Tensor weight = placeholder({t.c, og, t.kh, t.kw}, DType::kFloat32, "weight");
    std::vector<Tensor> args{in, weight};
    bool bias = has_input(n, 2);
    if (bias) args.push_back(placeholder({t.out_channels}, DType::kFloat32, "bias"));
    IterVar rc = reduce_axis(cg, "rc"), ry = reduce_axis(t.kh, "ry"), rx = reduce_axis(t.kw, "rx");
    Tensor acc = compute(
        {t.n, t.out_channels, t.oh, t.ow},
        [&](Var b, Var o, Var y, Var x) {
          auto [ok_y, iy] = transposed_tap(y, ry.var, t.sh, t.dh, t.pt, t.h, t.kh);
          auto [ok_x, ix] = transposed_tap(x, rx.var, t.sw, t.dw, t.pl, t.w, t.kw);
          Expr c = Expr(o) / static_cast<int>(og) * static_cast<int>(cg) + Expr(rc.var);
          Expr v = in(b, c, iy, ix) * weight(c, Expr(o) % static_cast<int>(og), ry.var, rx.var);
          return sum(select(ok_y && ok_x, v, f32(0.0)), {rc, ry, rx});
        },
        bias ? "acc" : "out", {"i0", "i1", "i2", "i3"});
    if (bias) {
      const Tensor& bt = args[2];
      Tensor sum_only = acc;
      acc = compute({t.n, t.out_channels, t.oh, t.ow},
                    [&](Var b, Var o, Var y, Var x) { return sum_only(b, o, y, x) + bt(o); }, "out",
                    {"i0", "i1", "i2", "i3"});
    }
    args.push_back(acc);
    return finish_kernel("conv_transpose", std::move(args));
  };
  return d;
}

}  // namespace

namespace {

OpDef log_softmax() {
  OpDef d;
  d.name = "LogSoftmax";
  d.attributes = {"axis"};
  d.lowering = Lowering::kKernel;
  d.infer = [](const Node& n, const Graph& g) {
    const std::vector<int64_t>& x = input_shape(n, g, 0);
    normalize_axis(n, n.attr_int("axis", g.opset >= 13 ? -1 : 1), static_cast<int64_t>(x.size()));
    return x;
  };
  d.reference = [](const Node& n, const Graph& g, const std::vector<const HostTensor*>& in) {
    const HostTensor& x = *in.at(0);
    int64_t axis = normalize_axis(n, n.attr_int("axis", g.opset >= 13 ? -1 : 1),
                                  static_cast<int64_t>(x.shape.size()));
    return softmax_reference(x, axis, g.opset < 13, true);
  };
  d.kernel = [](const Node& n, const Graph& g) {
    std::vector<int64_t> x = g.shape(n.inputs[0]);
    int64_t axis = normalize_axis(n, n.attr_int("axis", g.opset >= 13 ? -1 : 1),
                                  static_cast<int64_t>(x.size()));
    // Before opset 13 the input is coerced to 2-D at axis: one softmax over everything after.
    if (g.opset < 13) x = {split_at(x, axis).first, split_at(x, axis).second}, axis = 1;
    return softmax_kernel(x, axis, true);
  };
  return d;
}

// ---------------------------------------------------------------------------------------------
// Data movement: Slice, Pad, Tile, Expand, Gather

struct SliceSpec {
  std::vector<int64_t> start, step, out;
};

// ONNX's clamping: starts and ends count from the end when negative and are clamped into the
// dimension (to [0, d] stepping forward, [-1, d-1] stepping back).
SliceSpec slice_spec(const Node& n, const Graph& g) {
  const std::vector<int64_t>& x = input_shape(n, g, 0);
  auto rank = static_cast<int64_t>(x.size());
  std::vector<int64_t> starts, ends, axes, steps;
  if (n.attrs.count("tessera.split")) {
    // One output of a Split (onnx_import.cpp): sizes given, or equal parts (the last smaller).
    std::vector<int64_t> part = n.attr_ints("tessera.split", {});
    int64_t axis = normalize_axis(n, n.attr_int("axis", 0), rank), dim = x[axis];
    std::vector<int64_t> sizes =
        has_input(n, 1) ? constant_ints(n, g, 1, "split") : n.attr_ints("split", {});
    if (sizes.empty()) {
      int64_t each = (dim + part[1] - 1) / part[1];
      for (int64_t i = 0; i < part[1]; ++i)
        sizes.push_back(std::clamp<int64_t>(dim - i * each, 0, each));
    }
    if (static_cast<int64_t>(sizes.size()) != part[1] ||
        std::accumulate(sizes.begin(), sizes.end(), int64_t{0}) != dim)
      throw_error("{}: split sizes do not add up to dimension {} of {}", n.where(), axis,
                  shape_text(x));
    int64_t begin = std::accumulate(sizes.begin(), sizes.begin() + part[0], int64_t{0});
    starts = {begin};
    ends = {begin + sizes[part[0]]};
    axes = {axis};
  } else if (has_input(n, 1)) {
    starts = constant_ints(n, g, 1, "starts");
    ends = constant_ints(n, g, 2, "ends");
    if (has_input(n, 3)) axes = constant_ints(n, g, 3, "axes");
    if (has_input(n, 4)) steps = constant_ints(n, g, 4, "steps");
  } else {
    starts = n.attr_ints("starts", {});
    ends = n.attr_ints("ends", {});
    axes = n.attr_ints("axes", {});
  }
  if (axes.empty())
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size())
    throw_error("{}: starts, ends, axes and steps differ in length", n.where());
  SliceSpec s{std::vector<int64_t>(rank, 0), std::vector<int64_t>(rank, 1), x};
  std::vector<bool> seen(rank, false);
  for (size_t i = 0; i < starts.size(); ++i) {
    int64_t a = normalize_axis(n, axes[i], rank), dim = x[a], step = steps[i];
    if (seen[a]) throw_error("{}: axis {} is sliced twice", n.where(), a);
    seen[a] = true;
    if (step == 0) throw_error("{}: a step of 0", n.where());
    auto clamp = [&](int64_t v) {
      if (v < 0) v += dim;
      return step > 0 ? std::clamp<int64_t>(v, 0, dim) : std::clamp<int64_t>(v, -1, dim - 1);
    };
    // Exporters write INT64_MAX for "to the end": clamp before adding dim can overflow.
    int64_t b = clamp(std::clamp<int64_t>(starts[i], -dim - 1, dim + 1));
    int64_t e = clamp(std::clamp<int64_t>(ends[i], -dim - 1, dim + 1));
    int64_t count = step > 0 ? (e - b + step - 1) / step : (b - e - step - 1) / -step;
    s.start[a] = b;
    s.step[a] = step;
    s.out[a] = std::max<int64_t>(count, 0);
  }
  return s;
}

OpDef slice() {
  OpDef d;
  d.name = "Slice";
  // axis, split, num_outputs: a Split, rewritten into one Slice per output at import
  d.attributes = {"starts", "ends", "axes", "axis", "split", "num_outputs"};
  d.lowering = Lowering::kKernel;
  d.kernel_inputs = {0};
  d.infer = [](const Node& n, const Graph& g) { return slice_spec(n, g).out; };
  d.reference = [](const Node& n, const Graph& g, const std::vector<const HostTensor*>& in) {
    const HostTensor& x = *in.at(0);
    SliceSpec s = slice_spec(n, g);
    HostTensor out{s.out, {}, x.is_int};
    for (int64_t i = 0; i < num_elements(s.out); ++i) {
      std::vector<int64_t> idx = unravel(i, s.out);
      for (size_t k = 0; k < idx.size(); ++k) idx[k] = s.start[k] + idx[k] * s.step[k];
      out.data.push_back(x.data[ravel(idx, x.shape)]);
    }
    return out;
  };
  d.kernel = [](const Node& n, const Graph& g) {
    const std::vector<int64_t>& x = g.shape(n.inputs[0]);
    SliceSpec s = slice_spec(n, g);
    Tensor in = placeholder(x, DType::kFloat32, "in");
    Tensor out = compute(
        s.out,
        [&](const std::vector<Var>& at) {
          std::vector<Expr> idx;
          for (size_t k = 0; k < x.size(); ++k)
            idx.push_back(Expr(at[k]) * static_cast<int>(s.step[k]) + static_cast<int>(s.start[k]));
          return in(idx);
        },
        "out", axis_names(s.out.size()));
    return finish_kernel("slice", {in, out});
  };
  return d;
}

struct PadSpec {
  std::vector<int64_t> before, out;
  double value = 0;
  std::string mode;
};

PadSpec pad_spec(const Node& n, const Graph& g) {
  const std::vector<int64_t>& x = input_shape(n, g, 0);
  auto rank = static_cast<int64_t>(x.size());
  std::vector<int64_t> pads =
      has_input(n, 1) ? constant_ints(n, g, 1, "pads") : n.attr_ints("pads", {});
  PadSpec s;
  s.mode = n.attr_string("mode", "constant");
  if (s.mode != "constant" && s.mode != "edge" && s.mode != "reflect")
    throw_error("{}: mode '{}' (constant, edge or reflect)", n.where(), s.mode);
  s.value = n.attr_float("value", 0.0);
  if (has_input(n, 2)) {
    auto it = g.constants.find(n.inputs[2]);
    if (it == g.constants.end() || it->second.data.size() != 1)
      throw_error("{}: constant_value must be a constant scalar", n.where());
    s.value = it->second.data[0];
  }
  std::vector<int64_t> axes;
  if (has_input(n, 3))
    axes = normalized_axes(n, constant_ints(n, g, 3, "axes"), rank);
  else
    for (int64_t d = 0; d < rank; ++d) axes.push_back(d);
  if (pads.size() != 2 * axes.size())
    throw_error("{}: {} pads for {} axes", n.where(), pads.size(), axes.size());
  s.before.assign(rank, 0);
  s.out = x;
  for (size_t i = 0; i < axes.size(); ++i) {
    int64_t a = axes[i], b = pads[i], e = pads[i + axes.size()];
    if (s.mode != "constant" && (b < 0 || e < 0))
      throw_error("{}: negative pads need mode constant", n.where());
    if (s.mode == "reflect" && (b >= x[a] || e >= x[a]))
      throw_error("{}: reflect pads must be smaller than the dimension", n.where());
    s.before[a] = b;
    s.out[a] = x[a] + b + e;
    if (s.out[a] <= 0) throw_error("{}: pads leave dimension {} empty", n.where(), a);
  }
  return s;
}

// Where output index o of a dimension of size `dim` reads, for edge and reflect; o - before for
// constant (outside the input there the pad value goes).
int64_t pad_source(int64_t o, int64_t before, int64_t dim, const std::string& mode) {
  int64_t i = o - before;
  if (mode == "edge") return std::clamp<int64_t>(i, 0, dim - 1);
  if (mode == "reflect") {
    if (i < 0) i = -i;
    if (i >= dim) i = 2 * (dim - 1) - i;
  }
  return i;
}

OpDef pad() {
  OpDef d;
  d.name = "Pad";
  d.attributes = {"mode", "pads", "value"};
  d.lowering = Lowering::kKernel;
  d.kernel_inputs = {0};
  d.infer = [](const Node& n, const Graph& g) { return pad_spec(n, g).out; };
  d.reference = [](const Node& n, const Graph& g, const std::vector<const HostTensor*>& in) {
    const HostTensor& x = *in.at(0);
    PadSpec s = pad_spec(n, g);
    HostTensor out{s.out, {}, x.is_int};
    for (int64_t i = 0; i < num_elements(s.out); ++i) {
      std::vector<int64_t> idx = unravel(i, s.out);
      bool inside = true;
      for (size_t k = 0; k < idx.size(); ++k) {
        idx[k] = pad_source(idx[k], s.before[k], x.shape[k], s.mode);
        inside = inside && idx[k] >= 0 && idx[k] < x.shape[k];
      }
      out.data.push_back(inside ? x.data[ravel(idx, x.shape)] : s.value);
    }
    return out;
  };
  d.kernel = [](const Node& n, const Graph& g) {
    const std::vector<int64_t>& x = g.shape(n.inputs[0]);
    PadSpec s = pad_spec(n, g);
    Tensor in = placeholder(x, DType::kFloat32, "in");
    Tensor out = compute(
        s.out,
        [&](const std::vector<Var>& at) {
          std::vector<Expr> idx;
          Expr inside;
          for (size_t k = 0; k < x.size(); ++k) {
            Expr i = Expr(at[k]) - static_cast<int>(s.before[k]);
            const int dim = static_cast<int>(x[k]);
            if (s.mode == "edge") {
              i = min(max(i, Expr(0)), Expr(dim - 1));
            } else if (s.mode == "reflect") {
              i = select(i < Expr(0), Expr(0) - i, i);
              i = select(i >= Expr(dim), Expr(2 * (dim - 1)) - i, i);
            } else if (s.before[k] != 0 || s.out[k] != x[k]) {
              Expr ok = i >= Expr(0) && i < Expr(dim);
              inside = inside.defined() ? (inside && ok) : ok;
              // Clamped so that the read is in bounds even where the select discards it.
              i = min(max(i, Expr(0)), Expr(dim - 1));
            }
            idx.push_back(i);
          }
          Expr v = in(idx);
          return inside.defined() ? select(inside, v, f32(s.value)) : v;
        },
        "out", axis_names(s.out.size()));
    return finish_kernel("pad", {in, out});
  };
  return d;
}

OpDef tile() {
  OpDef d;
  d.name = "Tile";
  d.lowering = Lowering::kKernel;
  d.kernel_inputs = {0};
  d.infer = [](const Node& n, const Graph& g) {
    std::vector<int64_t> x = input_shape(n, g, 0);
    std::vector<int64_t> repeats = constant_ints(n, g, 1, "repeats");
    if (repeats.size() != x.size())
      throw_error("{}: {} repeats for rank {}", n.where(), repeats.size(), x.size());
    for (size_t k = 0; k < x.size(); ++k) {
      if (repeats[k] < 1) throw_error("{}: repeats must be positive", n.where());
      x[k] *= repeats[k];
    }
    return x;
  };
  d.reference = [](const Node& n, const Graph& g, const std::vector<const HostTensor*>& in) {
    const HostTensor& x = *in.at(0);
    std::vector<int64_t> shape = g.shape(n.outputs[0]);
    HostTensor out{shape, {}, x.is_int};
    for (int64_t i = 0; i < num_elements(shape); ++i) {
      std::vector<int64_t> idx = unravel(i, shape);
      for (size_t k = 0; k < idx.size(); ++k) idx[k] %= x.shape[k];
      out.data.push_back(x.data[ravel(idx, x.shape)]);
    }
    return out;
  };
  d.kernel = [](const Node& n, const Graph& g) {
    const std::vector<int64_t>& x = g.shape(n.inputs[0]);
    Tensor in = placeholder(x, DType::kFloat32, "in");
    Tensor out = compute(
        g.shape(n.outputs[0]),
        [&](const std::vector<Var>& at) {
          std::vector<Expr> idx;
          for (size_t k = 0; k < x.size(); ++k)
            idx.push_back(x[k] == 1 ? Expr(0) : Expr(at[k]) % static_cast<int>(x[k]));
          return in(idx);
        },
        "out", axis_names(x.size()));
    return finish_kernel("tile", {in, out});
  };
  return d;
}

OpDef expand() {
  OpDef d;
  d.name = "Expand";
  d.lowering = Lowering::kKernel;
  d.kernel_inputs = {0};
  d.infer = [](const Node& n, const Graph& g) {
    std::vector<int64_t> shape = constant_ints(n, g, 1, "shape");
    try {
      return broadcast_shapes(input_shape(n, g, 0), shape);
    } catch (const Error& e) {
      throw_error("{}: {}", n.where(), e.what());
    }
  };
  d.reference = [](const Node& n, const Graph& g, const std::vector<const HostTensor*>& in) {
    const HostTensor& x = *in.at(0);
    std::vector<int64_t> shape = g.shape(n.outputs[0]);
    HostTensor out{shape, {}, x.is_int};
    for (int64_t i = 0; i < num_elements(shape); ++i)
      out.data.push_back(x.data[broadcast_index(i, shape, x.shape)]);
    return out;
  };
  d.kernel = [](const Node& n, const Graph& g) {
    return elementwise_kernel(g.shape(n.outputs[0]), {g.shape(n.inputs[0])}, {});
  };
  return d;
}

struct GatherSpec {
  int64_t axis = 0;
  std::vector<int64_t> indices, index_shape, out;
};

GatherSpec gather_spec(const Node& n, const Graph& g) {
  const std::vector<int64_t>& x = input_shape(n, g, 0);
  GatherSpec s;
  s.axis = normalize_axis(n, n.attr_int("axis", 0), static_cast<int64_t>(x.size()));
  s.indices = constant_ints(n, g, 1, "indices");
  s.index_shape = g.shape(n.inputs[1]);
  for (int64_t& i : s.indices) {
    if (i < -x[s.axis] || i >= x[s.axis])
      throw_error("{}: index {} is out of range for dimension {} of size {}", n.where(), i, s.axis,
                  x[s.axis]);
    if (i < 0) i += x[s.axis];
  }
  s.out.assign(x.begin(), x.begin() + s.axis);
  s.out.insert(s.out.end(), s.index_shape.begin(), s.index_shape.end());
  s.out.insert(s.out.end(), x.begin() + s.axis + 1, x.end());
  return s;
}

// Gather with constant indices. Indices that only a runtime tensor holds (an embedding lookup of
// token ids) would need integer inputs at run time, which the executor does not have yet.
OpDef gather() {
  OpDef d;
  d.name = "Gather";
  d.attributes = {"axis"};
  d.lowering = Lowering::kKernel;
  d.infer = [](const Node& n, const Graph& g) { return gather_spec(n, g).out; };
  d.reference = [](const Node& n, const Graph& g, const std::vector<const HostTensor*>& in) {
    const HostTensor& x = *in.at(0);
    GatherSpec s = gather_spec(n, g);
    HostTensor out{s.out, {}, x.is_int};
    auto q = static_cast<int64_t>(s.index_shape.size());
    for (int64_t i = 0; i < num_elements(s.out); ++i) {
      std::vector<int64_t> o = unravel(i, s.out);
      std::vector<int64_t> idx(o.begin(), o.begin() + s.axis);
      std::vector<int64_t> which(o.begin() + s.axis, o.begin() + s.axis + q);
      idx.push_back(s.indices[ravel(which, s.index_shape)]);
      idx.insert(idx.end(), o.begin() + s.axis + q, o.end());
      out.data.push_back(x.data[ravel(idx, x.shape)]);
    }
    return out;
  };
  d.kernel = [](const Node& n, const Graph& g) {
    const std::vector<int64_t>& x = g.shape(n.inputs[0]);
    GatherSpec s = gather_spec(n, g);
    Tensor in = placeholder(x, DType::kFloat32, "in");
    // The indices as the kernel's second argument (float32, exact below 2^24, as every array of
    // a model), read where they are not an arithmetic progression (a contiguous or strided run,
    // which is an affine index).
    Tensor indices =
        placeholder({static_cast<int64_t>(s.indices.size())}, DType::kFloat32, "indices");
    auto q = static_cast<int64_t>(s.index_shape.size());
    bool affine = true;
    int64_t stride = s.indices.size() > 1 ? s.indices[1] - s.indices[0] : 0;
    for (size_t i = 1; i < s.indices.size(); ++i)
      affine = affine && s.indices[i] - s.indices[i - 1] == stride;
    const int dim = static_cast<int>(x[s.axis]);
    Tensor out = compute(
        s.out,
        [&](const std::vector<Var>& at) {
          Expr flat(0);
          for (int64_t k = 0; k < q; ++k)
            flat = flat * static_cast<int>(s.index_shape[k]) + Expr(at[s.axis + k]);
          Expr source;
          if (affine) {
            source = flat * static_cast<int>(stride) + static_cast<int>(s.indices[0]);
          } else {
            Expr raw = cast(DType::kInt32, indices(flat));
            source = min(max(select(raw < Expr(0), raw + dim, raw), Expr(0)), Expr(dim - 1));
          }
          std::vector<Expr> idx(at.begin(), at.begin() + s.axis);
          idx.push_back(source);
          idx.insert(idx.end(), at.begin() + s.axis + q, at.end());
          return in(idx);
        },
        "out", axis_names(s.out.size()));
    return finish_kernel("gather", {in, indices, out});
  };
  return d;
}

// ---------------------------------------------------------------------------------------------
// Folded at import: shape arithmetic

OpDef folded(std::string name, std::vector<std::string> attributes, InferFn infer,
             ReferenceFn reference) {
  OpDef d;
  d.name = std::move(name);
  d.attributes = std::move(attributes);
  d.lowering = Lowering::kFolded;
  d.infer = std::move(infer);
  d.reference = std::move(reference);
  return d;
}

std::pair<int64_t, int64_t> shape_range(const Node& n, int64_t rank) {
  int64_t start = n.attr_int("start", 0), end = n.attr_int("end", rank);
  if (start < 0) start += rank;
  if (end < 0) end += rank;
  start = std::clamp<int64_t>(start, 0, rank);
  end = std::clamp<int64_t>(end, start, rank);
  return {start, end};
}

HostTensor shape_value(const Node& n, const Graph& g) {
  const std::vector<int64_t>& x = input_shape(n, g, 0);
  auto [start, end] = shape_range(n, static_cast<int64_t>(x.size()));
  HostTensor t{{end - start}, {}, true};
  for (int64_t d = start; d < end; ++d) t.data.push_back(static_cast<double>(x[d]));
  return t;
}

void add_folded_rows(std::vector<OpDef>& t) {
  OpDef shape = folded(
      "Shape", {"start", "end"},
      [](const Node& n, const Graph& g) { return shape_value(n, g).shape; },
      [](const Node& n, const Graph& g, const std::vector<const HostTensor*>&) {
        return shape_value(n, g);
      });
  shape.fold = shape_value;
  t.push_back(std::move(shape));
  OpDef size = folded(
      "Size", {}, [](const Node&, const Graph&) { return std::vector<int64_t>{}; },
      [](const Node& n, const Graph& g, const std::vector<const HostTensor*>&) {
        return HostTensor{{}, {static_cast<double>(num_elements(input_shape(n, g, 0)))}, true};
      });
  size.fold = [](const Node& n, const Graph& g) {
    return HostTensor{{}, {static_cast<double>(num_elements(input_shape(n, g, 0)))}, true};
  };
  t.push_back(std::move(size));
  t.push_back(folded(
      "ConstantOfShape", {"value"},
      [](const Node& n, const Graph& g) {
        std::vector<int64_t> shape = constant_ints(n, g, 0, "shape");
        for (int64_t d : shape)
          if (d < 0) throw_error("{}: negative dimension {}", n.where(), d);
        return shape;
      },
      [](const Node& n, const Graph&, const std::vector<const HostTensor*>& in) {
        std::vector<int64_t> shape;
        for (double d : in.at(0)->data) shape.push_back(saturated_int(d));
        std::vector<double> value = n.attrs.count("value")
                                        ? std::get<std::vector<double>>(n.attrs.at("value"))
                                        : std::vector<double>{0.0};
        if (value.size() != 1) throw_error("{}: value must hold one element", n.where());
        return HostTensor{shape, std::vector<double>(num_elements(shape), value[0]),
                          n.attr_int("tessera.value_is_int", 0) != 0};
      }));
  auto range_count = [](const Node& n, double start, double limit, double delta) {
    if (delta == 0) throw_error("{}: a delta of 0", n.where());
    return std::max<int64_t>(static_cast<int64_t>(std::ceil((limit - start) / delta)), 0);
  };
  auto scalar = [](const Node& n, const Graph& g, size_t i) {
    auto it = has_input(n, i) ? g.constants.find(n.inputs[i]) : g.constants.end();
    if (it == g.constants.end() || it->second.data.size() != 1)
      throw_error("{}: input {} must be a constant scalar (dynamic shapes are not supported)",
                  n.where(), i);
    return it->second.data[0];
  };
  t.push_back(folded(
      "Range", {},
      [range_count, scalar](const Node& n, const Graph& g) {
        return std::vector<int64_t>{
            range_count(n, scalar(n, g, 0), scalar(n, g, 1), scalar(n, g, 2))};
      },
      [range_count](const Node& n, const Graph&, const std::vector<const HostTensor*>& in) {
        double start = in.at(0)->data.at(0), delta = in.at(2)->data.at(0);
        int64_t count = range_count(n, start, in.at(1)->data.at(0), delta);
        HostTensor out{{count}, {}, in[0]->is_int};
        for (int64_t i = 0; i < count; ++i) out.data.push_back(start + double(i) * delta);
        return out;
      }));
}

// ---------------------------------------------------------------------------------------------
// The executor's own operators

OpDef builtin(std::string name, std::vector<std::string> attributes,
              Lowering lowering = Lowering::kPlanner) {
  OpDef d;
  d.name = std::move(name);
  d.attributes = std::move(attributes);
  d.lowering = lowering;
  d.infer = infer_builtin;
  d.reference = reference_builtin;
  return d;
}

std::vector<OpDef> make_table() {
  std::vector<OpDef> t;
  const std::vector<std::string> window{"auto_pad", "dilations", "kernel_shape", "pads", "strides"};
  auto with = [](std::vector<std::string> a, std::initializer_list<std::string> more) {
    a.insert(a.end(), more);
    return a;
  };
  t.push_back(builtin("Conv", with(window, {"group"})));
  t.push_back(builtin("MaxPool", with(window, {"ceil_mode", "storage_order"})));
  t.push_back(builtin("AveragePool", with(window, {"ceil_mode", "count_include_pad"})));
  t.push_back(builtin("GlobalAveragePool", {}));
  t.push_back(builtin("BatchNormalization",
                      {"epsilon", "momentum", "training_mode", "spatial", "is_test"}));
  t.push_back(builtin("Relu", {}));
  t.push_back(builtin("Clip", {"min", "max"}));
  t.push_back(builtin("Add", {}));
  t.push_back(builtin("Mul", {}));
  t.push_back(builtin("Gemm", {"alpha", "beta", "transA", "transB"}));
  t.push_back(builtin("MatMul", {}));
  t.push_back(builtin("Softmax", {"axis"}));
  t.push_back(builtin("Concat", {"axis"}));
  t.push_back(builtin("Transpose", {"perm"}));
  t.push_back(builtin("Flatten", {"axis"}, Lowering::kView));
  t.push_back(builtin("Reshape", {"allowzero"}, Lowering::kView));
  t.push_back(builtin("Identity", {}, Lowering::kView));
  t.push_back(builtin("Dropout", {"ratio", "seed", "is_test"}, Lowering::kView));
  t.push_back(view("Squeeze", {"axes"}, squeeze_shape));
  t.push_back(view("Unsqueeze", {"axes"}, unsqueeze_shape));
  add_elementwise_rows(t);
  t.push_back(reduction("ReduceMean", ReduceKind::kMean));
  t.push_back(reduction("ReduceSum", ReduceKind::kSum));
  t.push_back(reduction("ReduceMax", ReduceKind::kMax));
  t.push_back(reduction("ReduceMin", ReduceKind::kMin));
  t.push_back(layer_normalization());
  t.push_back(log_softmax());
  t.push_back(slice());
  t.push_back(pad());
  t.push_back(tile());
  t.push_back(expand());
  t.push_back(gather());
  t.push_back(conv_transpose());
  t.push_back(zero_insert());
  add_folded_rows(t);
  // Elementwise rows take their shape rule and reference from their scalar functions.
  for (OpDef& d : t) {
    if (d.lowering != Lowering::kElementwise) continue;
    const std::string name = d.name;
    if (!d.infer)
      d.infer = [name](const Node& n, const Graph& g) {
        return elementwise_shape(*find_op(name), n, g);
      };
    if (!d.reference)
      d.reference = [name](const Node& n, const Graph& g,
                           const std::vector<const HostTensor*>& in) {
        return elementwise_reference(*find_op(name), n, g, in);
      };
  }
  return t;
}

}  // namespace

int64_t broadcast_index(int64_t i, const std::vector<int64_t>& to,
                        const std::vector<int64_t>& from) {
  int64_t src = 0, stride = 1;
  size_t offset = to.size() - from.size();
  for (int64_t d = static_cast<int64_t>(to.size()) - 1; d >= 0; --d) {
    int64_t coord = i % to[d];
    i /= to[d];
    if (d >= static_cast<int64_t>(offset)) {
      int64_t fd = from[d - offset];
      if (fd != 1) src += coord * stride;
      stride *= fd;
    }
  }
  return src;
}

HostTensor softmax_reference(const HostTensor& x, int64_t axis, bool coerce_2d, bool log_softmax) {
  auto rank = static_cast<int64_t>(x.shape.size());
  int64_t outer = 1, len = 1, inner = 1;
  for (int64_t d = 0; d < rank; ++d) {
    if (d < axis)
      outer *= x.shape[d];
    else if (d == axis || coerce_2d)
      len *= x.shape[d];
    else
      inner *= x.shape[d];
  }
  HostTensor out = x;
  out.is_int = false;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      auto at = [&](int64_t j) { return (o * len + j) * inner + i; };
      double mx = -std::numeric_limits<double>::infinity(), total = 0;
      for (int64_t j = 0; j < len; ++j) mx = std::max(mx, x.data[at(j)]);
      for (int64_t j = 0; j < len; ++j) total += std::exp(x.data[at(j)] - mx);
      for (int64_t j = 0; j < len; ++j)
        out.data[at(j)] = log_softmax ? x.data[at(j)] - mx - std::log(total)
                                      : std::exp(x.data[at(j)] - mx) / total;
    }
  return out;
}

int64_t saturated_int(double d) {
  if (std::isnan(d)) return 0;
  if (d >= 9.2233720368547758e18) return std::numeric_limits<int64_t>::max();
  if (d <= -9.2233720368547758e18) return std::numeric_limits<int64_t>::min();
  return static_cast<int64_t>(d);
}

const std::vector<OpDef>& op_table() {
  static const std::vector<OpDef> table = make_table();
  return table;
}

const OpDef* find_op(std::string_view name) {
  static const std::map<std::string, const OpDef*, std::less<>> index = [] {
    std::map<std::string, const OpDef*, std::less<>> m;
    for (const OpDef& d : op_table()) m[d.name] = &d;
    return m;
  }();
  auto it = index.find(name);
  return it == index.end() ? nullptr : it->second;
}

ElementwiseStep scalar_step(const Node& n, const Graph& g, std::vector<int> inputs) {
  ScalarCall call = scalar_call(n, g);
  ElementwiseStep step;
  step.kind = ElementwiseStep::Kind::kScalar;
  step.inputs = std::move(inputs);
  step.scalar = [call](const std::vector<Expr>& x) { return call.op->build(call.params, x); };
  return step;
}

ScalarCall scalar_call(const Node& n, const Graph& g) {
  const OpDef* op = find_op(n.op);
  if (!op || op->lowering != Lowering::kElementwise)
    throw_internal("{} is not an elementwise operator", n.where());
  return {op, op->params ? op->params(n, g) : std::vector<double>{}};
}

std::optional<std::string> unsupported_nodes(const Graph& g) {
  // op -> the nodes; "op attribute" -> the nodes
  std::map<std::string, std::vector<std::string>> ops, attributes;
  for (const Node& n : g.nodes) {
    const OpDef* op = find_op(n.op);
    if (!op) {
      ops[n.op].push_back(n.name);
      continue;
    }
    for (const auto& [name, value] : n.attrs) {
      if (name.starts_with("tessera.")) continue;
      if (std::find(op->attributes.begin(), op->attributes.end(), name) == op->attributes.end())
        attributes[fmt::format("{} attribute '{}'", n.op, name)].push_back(n.name);
    }
  }
  if (ops.empty() && attributes.empty()) return std::nullopt;
  auto list = [](const std::map<std::string, std::vector<std::string>>& m) {
    std::vector<std::string> parts;
    for (const auto& [what, nodes] : m) {
      std::vector<std::string> shown;
      for (size_t i = 0; i < nodes.size() && i < 3; ++i) shown.push_back("'" + nodes[i] + "'");
      if (nodes.size() > 3) shown.push_back("...");
      parts.push_back(fmt::format("{}{} (node{} {})", what,
                                  nodes.size() > 1 ? fmt::format(" x{}", nodes.size()) : "",
                                  nodes.size() > 1 ? "s" : "", fmt::join(shown, ", ")));
    }
    return fmt::format("{}", fmt::join(parts, ", "));
  };
  std::string message;
  size_t nodes = 0;
  for (const auto& [op, names] : ops) nodes += names.size();
  if (!ops.empty())
    message = fmt::format("{} unsupported node{}: {}", nodes, nodes > 1 ? "s" : "", list(ops));
  if (!attributes.empty())
    message +=
        fmt::format("{}unsupported attributes: {}", message.empty() ? "" : "; ", list(attributes));
  return message;
}

}  // namespace tessera::graph
