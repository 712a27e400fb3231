// The elementwise rows of the operator table: each one row of two scalar functions, in doubles
// (reference, constant folding) and as a te expression (the kernel).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "graph/op_attrs.h"
#include "graph/op_rows.h"
#include "ops/nn.h"
#include "te/error.h"
#include "te/tensor.h"

namespace tessera::graph {

using namespace rows;

namespace {

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

}  // namespace

bool is_float_type(int64_t onnx_type) {
  // FLOAT, FLOAT16, DOUBLE, BFLOAT16
  return onnx_type == 1 || onnx_type == 10 || onnx_type == 11 || onnx_type == 16;
}

void add_elementwise_rows(std::vector<OpDef>& t) {
  // The vector code computes float32 sigmoid on whole vectors, through exp.
  t.push_back(unary(
      "Sigmoid", [](double x) { return 1.0 / (1.0 + std::exp(-x)); },
      [](Expr x) { return sigmoid(x); }));
  // Through sigmoid, so that it runs on whole vectors (tanh is one libm call per lane: 0.12 of
  // the DCGAN generator's 2.5 ms): 1 - 2 / (e^2x + 1), exact at both ends (e^2x overflowing to
  // inf gives 1), within 2e-7 of tanh near 0.
  t.push_back(unary(
      "Tanh", [](double x) { return std::tanh(x); },
      [](Expr x) { return f32(1.0) - f32(2.0) * sigmoid(f32(-2.0) * x); }));
  t.push_back(unary(
      "Exp", [](double x) { return std::exp(x); }, [](Expr x) { return exp(x); }));
  t.push_back(unary(
      "Log", [](double x) { return std::log(x); }, [](Expr x) { return log(x); }));
  t.push_back(unary(
      "Sqrt", [](double x) { return std::sqrt(x); }, [](Expr x) { return sqrt(x); }));
  t.push_back(unary(
      "Erf", [](double x) { return std::erf(x); }, [](Expr x) { return erf_on_vectors(x); }));
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
  // Floor and Ceil through a truncating cast where that is exact; a float of magnitude 2^23 or
  // more is an integer already (and inf and NaN stay as they are). MobileViT's legacy export
  // pads its patches to a multiple.
  auto rounded = [](Expr x, bool up) {
    Expr t = cast(DType::kFloat32, cast(DType::kInt32, x));
    Expr r = up ? t + as_float(t < x) : t - as_float(t > x);
    return select(max(x, f32(0.0) - x) < f32(8388608.0), r, x);
  };
  t.push_back(unary(
      "Floor", [](double x) { return std::floor(x); },
      [rounded](Expr x) { return rounded(x, false); }));
  t.push_back(unary(
      "Ceil", [](double x) { return std::ceil(x); },
      [rounded](Expr x) { return rounded(x, true); }));
  // Under torch's dynamo exporter, masked_fill after a softmax guards against NaN rows.
  t.push_back(unary(
      "IsNaN", [](double x) { return std::isnan(x) ? 1.0 : 0.0; },
      [](Expr x) { return as_float(ne(x, x)); }));
  t.push_back(unary(
      "IsInf", [](double x) { return std::isinf(x) ? 1.0 : 0.0; },
      [](Expr x) { return as_float(ne(x - x, f32(0.0))) * as_float(eq(x, x)); }));
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
        if (p[0] == 0) return f32(0.5) * v * (f32(1.0) + erf_on_vectors(v * f32(M_SQRT1_2)));
        // (1 + tanh z) / 2 = sigmoid(2z), which runs on whole vectors.
        return v * sigmoid(f32(2 * std::sqrt(2 / M_PI)) * (v + f32(0.044715) * v * v * v));
      },
      [](const Node& n, const Graph&) {
        std::string a = n.attr_string("approximate", "none");
        if (a != "none" && a != "tanh")
          throw_error("{}: approximate='{}' (none or tanh)", n.where(), a);
        return std::vector<double>{a == "tanh" ? 1.0 : 0.0};
      }));

  t.push_back(binary("Sub", std::minus<double>(), [](Expr a, Expr b) { return a - b; }));
  // Integer division truncates (tessera.integer, set at import): torch.chunk's legacy export
  // sizes its pieces as (192 + 2) / 3 in int64 (MaxViT's query, key and value).
  t.push_back(elementwise(
      "Div", {}, 2, 2,
      [](const std::vector<double>& p, const std::vector<double>& x) {
        return p[0] != 0 ? std::trunc(x[0] / x[1]) : x[0] / x[1];
      },
      [](const std::vector<double>& p, const std::vector<Expr>& x) {
        return p[0] != 0 ? cast(DType::kFloat32, cast(DType::kInt32, x[0] / x[1])) : x[0] / x[1];
      },
      [](const Node& n, const Graph&) {
        return std::vector<double>{static_cast<double>(n.attr_int("tessera.integer", 0))};
      }));
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
}

}  // namespace tessera::graph
