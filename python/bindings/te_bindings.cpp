// te from Python: expressions with Python's operators, tensors indexed with [], computes whose
// body is a Python callable (called once, while the compute is built), and lowering to a Program.
#include <fmt/format.h>
#include <nanobind/stl/function.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <limits>

#include "bindings.h"
#include "lower/lower.h"
#include "te/error.h"
#include "te/tensor.h"
#include "tir/parser.h"
#include "tir/printer.h"
#include "tir/program.h"

namespace tessera::python {

namespace {

DType dtype_from(const std::string& name) {
  std::optional<DType> t = parse_dtype(name);
  if (!t) throw_error("unknown dtype '{}' (bool, int32, float32, float64)", name);
  return *t;
}

std::vector<Expr> indices_from(nb::handle index) {
  std::vector<Expr> indices;
  if (nb::isinstance<nb::tuple>(index)) {
    for (nb::handle item : nb::borrow<nb::tuple>(index)) indices.push_back(to_expr(item));
  } else {
    indices.push_back(to_expr(index));
  }
  return indices;
}

// Buffers as (name, shape, dtype) tuples: what Python needs to allocate a kernel's arrays.
using BufferInfo = std::tuple<std::string, std::vector<int64_t>, std::string>;

std::vector<BufferInfo> buffer_infos(const std::vector<Buffer>& buffers) {
  std::vector<BufferInfo> infos;
  for (const Buffer& b : buffers) infos.emplace_back(b->name, b->shape, dtype_name(b->dtype));
  return infos;
}

}  // namespace

Expr to_expr(nb::handle value) {
  if (nb::isinstance<Expr>(value)) return nb::cast<Expr>(value);
  if (nb::isinstance<IterVar>(value)) return nb::cast<IterVar>(value).var;
  // bool is an int in Python; a bool literal in an index expression is almost surely a slip.
  if (PyBool_Check(value.ptr())) throw nb::type_error("a bool is not an expression");
  if (PyLong_Check(value.ptr())) {
    int64_t v = nb::cast<int64_t>(value);
    if (v < std::numeric_limits<int32_t>::min() || v > std::numeric_limits<int32_t>::max())
      throw_error("integer literal {} does not fit int32", v);
    return Expr(static_cast<int>(v));
  }
  if (PyFloat_Check(value.ptr())) return Expr(nb::cast<double>(value));
  throw nb::type_error(fmt::format("expected an expression, an int or a float, got {}",
                                   nb::cast<std::string>(nb::str(nb::handle(Py_TYPE(value.ptr())))))
                           .c_str());
}

void bind_te(nb::module_& m) {
  nb::class_<Expr> expr(m, "Expr", "A scalar expression of te (immutable).");
  expr.def_prop_ro("dtype", [](const Expr& e) { return std::string(dtype_name(e.dtype())); })
      .def("__repr__", [](const Expr& e) { return print_expr(e); })
      .def("__bool__",
           [](const Expr&) -> bool {
             throw nb::type_error(
                 "an expression has no truth value: use te.select for a condition, te.eq to "
                 "compare");
           })
      .def("__neg__", [](const Expr& a) { return -a; })
      .def("__invert__", [](const Expr& a) { return !a; });
  auto binary = [&](const char* name, const char* rname, Expr (*op)(Expr, Expr)) {
    expr.def(name, [op](const Expr& a, nb::handle b) { return op(a, to_expr(b)); });
    if (rname) expr.def(rname, [op](const Expr& a, nb::handle b) { return op(to_expr(b), a); });
  };
  binary("__add__", "__radd__", [](Expr a, Expr b) { return a + b; });
  binary("__sub__", "__rsub__", [](Expr a, Expr b) { return a - b; });
  binary("__mul__", "__rmul__", [](Expr a, Expr b) { return a * b; });
  binary("__truediv__", "__rtruediv__", [](Expr a, Expr b) { return a / b; });
  binary("__floordiv__", "__rfloordiv__", [](Expr a, Expr b) { return a / b; });
  binary("__mod__", "__rmod__", [](Expr a, Expr b) { return a % b; });
  binary("__lt__", nullptr, [](Expr a, Expr b) { return a < b; });
  binary("__le__", nullptr, [](Expr a, Expr b) { return a <= b; });
  binary("__gt__", nullptr, [](Expr a, Expr b) { return a > b; });
  binary("__ge__", nullptr, [](Expr a, Expr b) { return a >= b; });
  binary("__and__", "__rand__", [](Expr a, Expr b) { return a && b; });
  binary("__or__", "__ror__", [](Expr a, Expr b) { return a || b; });

  nb::class_<Var, Expr>(m, "Var", "A loop variable of a compute (one per output dimension).")
      .def_prop_ro("name", [](const Var& v) { return v.as<VarNode>()->name; });

  nb::class_<IterVar>(m, "IterVar", "A reduction axis: a variable and its extent.")
      .def_prop_ro("var", [](const IterVar& iv) { return iv.var; })
      .def_ro("extent", &IterVar::extent)
      .def("__repr__", [](const IterVar& iv) {
        return fmt::format("reduce_axis({}, '{}')", iv.extent, iv.var.as<VarNode>()->name);
      });

  nb::class_<Tensor>(m, "Tensor", "A placeholder (input) or a compute tensor.")
      .def_prop_ro("name", [](const Tensor& t) { return t->name; })
      .def_prop_ro("shape", [](const Tensor& t) { return t->shape; })
      .def_prop_ro("dtype", [](const Tensor& t) { return std::string(dtype_name(t->dtype)); })
      .def_prop_ro("ndim", &Tensor::ndim)
      .def("__getitem__", [](const Tensor& t, nb::handle index) { return t(indices_from(index)); })
      .def("__repr__", [](const Tensor& t) {
        return fmt::format("Tensor({}, shape=[{}], {})", t->name, fmt::join(t->shape, ", "),
                           dtype_name(t->dtype));
      });

  m.def(
      "placeholder",
      [](std::vector<int64_t> shape, const std::string& name, const std::string& dtype) {
        return placeholder(std::move(shape), dtype_from(dtype), name);
      },
      nb::arg("shape"), nb::arg("name"), nb::arg("dtype") = "float32");
  m.def(
      "compute",
      [](std::vector<int64_t> shape, nb::callable body, const std::string& name,
         std::vector<std::string> axis_names) {
        return compute(
            std::move(shape),
            [&body](const std::vector<Var>& vars) {
              nb::list args;
              for (const Var& v : vars) args.append(nb::cast(v));
              nb::object value = body(*args);
              // A body that is one Python float (a constant tensor) is float32, as in TVM; in an
              // expression a float literal takes its other operand's type.
              if (PyFloat_Check(value.ptr()))
                return make_float(nb::cast<double>(value), DType::kFloat32);
              return to_expr(value);
            },
            name, std::move(axis_names));
      },
      nb::arg("shape"), nb::arg("body"), nb::arg("name"), nb::arg("axis_names"));
  m.def("reduce_axis", &reduce_axis, nb::arg("extent"), nb::arg("name"));
  auto reduction = [&](const char* name, Expr (*op)(Expr, std::vector<IterVar>)) {
    m.def(name, [op](nb::handle source, std::vector<IterVar> axes) {
      return op(to_expr(source), std::move(axes));
    });
  };
  reduction("sum", [](Expr e, std::vector<IterVar> axes) { return sum(e, std::move(axes)); });
  reduction("max", [](Expr e, std::vector<IterVar> axes) { return max(e, std::move(axes)); });
  reduction("min", [](Expr e, std::vector<IterVar> axes) { return min(e, std::move(axes)); });
  auto unary = [&](const char* name, Expr (*op)(Expr)) {
    m.def(name, [op](nb::handle x) { return op(to_expr(x)); });
  };
  unary("exp", [](Expr x) { return exp(x); });
  unary("log", [](Expr x) { return log(x); });
  unary("sqrt", [](Expr x) { return sqrt(x); });
  unary("tanh", [](Expr x) { return tanh(x); });
  unary("sigmoid", [](Expr x) { return sigmoid(x); });
  unary("erf", [](Expr x) { return erf(x); });
  auto pairwise = [&](const char* name, Expr (*op)(Expr, Expr)) {
    m.def(name, [op](nb::handle a, nb::handle b) { return op(to_expr(a), to_expr(b)); });
  };
  pairwise("maximum", [](Expr a, Expr b) { return max(a, b); });
  pairwise("minimum", [](Expr a, Expr b) { return min(a, b); });
  pairwise("eq", [](Expr a, Expr b) { return eq(a, b); });
  pairwise("ne", [](Expr a, Expr b) { return ne(a, b); });
  m.def("select", [](nb::handle c, nb::handle t, nb::handle f) {
    return select(to_expr(c), to_expr(t), to_expr(f));
  });
  m.def("cast",
        [](const std::string& dtype, nb::handle x) { return cast(dtype_from(dtype), to_expr(x)); });

  nb::class_<Program>(m, "Program", "A loop program: what strategies rewrite and build compiles.")
      .def_ro("name", &Program::name)
      .def_prop_ro("inputs", [](const Program& p) { return buffer_infos(p.inputs); })
      .def_prop_ro("outputs", [](const Program& p) { return buffer_infos(p.outputs); })
      .def_prop_ro("text", [](const Program& p) { return print_program(p); })
      .def("__str__", [](const Program& p) { return print_program(p); })
      .def("__repr__", [](const Program& p) {
        return fmt::format("<Program {}: {} inputs, {} outputs>", p.name, p.inputs.size(),
                           p.outputs.size());
      });
  m.def("lower", &lower, nb::arg("name"), nb::arg("tensors"));
  m.def("parse_program", [](const std::string& text) { return parse_program(text); });
}

}  // namespace tessera::python
