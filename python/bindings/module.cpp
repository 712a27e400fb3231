// The tessera._tessera extension: one submodule per layer it exposes (the Python package in
// python/tessera/ gives them their idiom). tessera's errors become tessera.Error carrying the
// same one-line message the CLI prints.
#include <nanobind/nanobind.h>

#include "bindings.h"
#include "graph/compiled_model.h"
#include "te/error.h"

namespace nb = nanobind;
using namespace tessera;
using namespace tessera::python;

NB_MODULE(_tessera, m) {
  m.doc() = "tessera's C++ core (use the tessera package, not this module)";
  m.attr("__version__") = TESSERA_VERSION;

  static nb::exception<Error> error(m, "Error");
  // A model library that does not load throws its own type, not tessera::Error.
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const CompiledModelError& e) {
      PyErr_SetString(error.ptr(), e.what());
    }
  });

  nb::module_ te = m.def_submodule("te", "Tensor expressions.");
  bind_te(te);
  nb::module_ strategy = m.def_submodule("strategy", "Strategies over loop programs.");
  bind_strategy(strategy);
  bind_kernel(m);
  bind_tune(m);
  bind_model(m);
}
