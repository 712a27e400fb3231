// The pieces of the tessera._tessera extension module, one function per layer it exposes.
#pragma once

#include <nanobind/nanobind.h>

#include "te/expr.h"

namespace tessera::python {

namespace nb = nanobind;

/// An expression from a Python value: an Expr (or Var), an IterVar's variable, an int (int32) or
/// a float. Anything else raises TypeError.
Expr to_expr(nb::handle value);

void bind_te(nb::module_& m);        // te: placeholders, computes, reductions; lower; Program
void bind_strategy(nb::module_& m);  // rules, combinators, parsing, apply
void bind_kernel(nb::module_& m);    // build a Program into a callable Kernel; operators
void bind_tune(nb::module_& m);      // tune, tune_all, the records DB
void bind_model(nb::module_& m);     // ONNX import, compile, run, save, load

}  // namespace tessera::python
