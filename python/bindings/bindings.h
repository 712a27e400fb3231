// The pieces of the tessera._tessera extension module, one function per layer it exposes.
#pragma once

#include <nanobind/nanobind.h>

#include <cstdint>
#include <vector>

#include "te/expr.h"

namespace tessera::python {

namespace nb = nanobind;

/// An expression from a Python value: an Expr (or Var), an IterVar's variable, an int (int32) or
/// a float. Anything else raises TypeError.
Expr to_expr(nb::handle value);

/// An nb::ndarray's shape, to compare with a buffer's or a model value's.
template <typename Array>
std::vector<int64_t> shape_of(const Array& a) {
  std::vector<int64_t> shape(a.ndim());
  for (size_t d = 0; d < a.ndim(); ++d) shape[d] = static_cast<int64_t>(a.shape(d));
  return shape;
}

void bind_te(nb::module_& m);        // te: placeholders, computes, reductions; lower; Program
void bind_strategy(nb::module_& m);  // rules, combinators, parsing, apply
void bind_kernel(nb::module_& m);    // build a Program into a callable Kernel; operators
void bind_tune(nb::module_& m);      // tune, tune_all, the records DB
void bind_model(nb::module_& m);     // ONNX import, compile, run, save, load

}  // namespace tessera::python
