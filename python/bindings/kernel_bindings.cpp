// Kernels from Python: a Program compiled to C and loaded, called on numpy arrays in place (the
// Python side allocates outputs), timed like `tessera run`; and the library's operators with
// their naive references.
#include <fmt/format.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstring>

#include "bindings.h"
#include "codegen/codegen_c.h"
#include "ops/workload.h"
#include "runtime/module.h"
#include "runtime/timer.h"
#include "te/error.h"
#include "tir/program.h"

namespace tessera::python {

namespace {

using Array = nb::ndarray<nb::device::cpu, nb::c_contig>;

struct Kernel {
  Program program;
  std::string source;
  std::shared_ptr<const Module> module;
};

nb::dlpack::dtype dlpack_dtype(DType t) {
  switch (t) {
    case DType::kBool:
      return nb::dtype<bool>();
    case DType::kInt32:
      return nb::dtype<int32_t>();
    case DType::kFloat32:
      return nb::dtype<float>();
    case DType::kFloat64:
      return nb::dtype<double>();
  }
  return nb::dtype<float>();
}

// The kernel reads and writes raw pointers: every array must be exactly its buffer (no
// conversion: an output converted to a copy would be written and dropped), and no output may
// overlap another array.
std::vector<void*> argument_pointers(const Kernel& k, const nb::args& arrays) {
  std::vector<Buffer> args = k.program.args();
  if (arrays.size() != args.size())
    throw_error("kernel {} takes {} arrays (inputs then outputs), given {}", k.program.name,
                args.size(), arrays.size());
  std::vector<void*> pointers;
  std::vector<std::pair<const char*, const char*>> ranges;
  for (size_t i = 0; i < args.size(); ++i) {
    const Buffer& b = args[i];
    Array a;
    if (!nb::try_cast<Array>(arrays[i], a, /*convert=*/false) ||
        a.dtype() != dlpack_dtype(b->dtype))
      throw_error("array {} ({}) must be a C-contiguous {} array", i, b->name,
                  dtype_name(b->dtype));
    if (shape_of(a) != b->shape)
      throw_error("array {} ({}) has shape [{}], the kernel's is [{}]", i, b->name,
                  fmt::join(shape_of(a), ", "), fmt::join(b->shape, ", "));
    pointers.push_back(a.data());
    const char* start = static_cast<const char*>(a.data());
    ranges.emplace_back(start, start + a.nbytes());
  }
  for (size_t i = k.program.inputs.size(); i < ranges.size(); ++i)
    for (size_t j = 0; j < ranges.size(); ++j)
      if (j != i && ranges[i].first < ranges[j].second && ranges[j].first < ranges[i].second)
        throw_error("array {} ({}) overlaps array {}: a kernel's output must not share memory", i,
                    args[i]->name, j);
  return pointers;
}

}  // namespace

void bind_kernel(nb::module_& m) {
  nb::class_<Kernel>(m, "Kernel", "A compiled loop program.")
      .def_ro("program", &Kernel::program)
      .def_ro("source", &Kernel::source, "The generated C.")
      .def(
          "run",
          [](const Kernel& k, const nb::args& arrays) {
            std::vector<void*> pointers = argument_pointers(k, arrays);
            nb::gil_scoped_release release;
            k.module->run(pointers);
          },
          "Runs the kernel on its arrays, inputs then outputs, in place.")
      .def(
          "time",
          [](const Kernel& k, const nb::args& arrays, int repeat, double min_repeat_ms) {
            if (repeat < 1) throw_error("repeat must be at least 1, given {}", repeat);
            std::vector<void*> pointers = argument_pointers(k, arrays);
            nb::gil_scoped_release release;
            return time_function([&] { k.module->run(pointers); }, repeat, min_repeat_ms);
          },
          nb::arg("arrays"), nb::arg("repeat") = 5, nb::arg("min_repeat_ms") = 100.0);

  nb::class_<Timing>(m, "Timing", "Seconds per call, one entry per repeat, and their summary.")
      .def_ro("seconds_per_run", &Timing::seconds_per_run)
      .def_ro("median", &Timing::median)
      .def_ro("mean", &Timing::mean)
      .def_ro("min", &Timing::min)
      .def("__repr__", [](const Timing& t) {
        return fmt::format("Timing(median={:.6g} s over {} repeats)", t.median,
                           t.seconds_per_run.size());
      });

  m.def(
      "build",
      [](const Program& p) {
        Kernel k{p, codegen_c(p), nullptr};
        std::string source = k.source;
        Module module;
        {
          nb::gil_scoped_release release;
          module = Module::compile(source);
        }
        k.module = std::make_shared<const Module>(std::move(module));
        return k;
      },
      nb::arg("program"));

  nb::class_<OpInstance>(m, "Operator", "A library operator at one workload.")
      .def_ro("program", &OpInstance::program, "The plain lowered loop program.")
      .def_ro("flops", &OpInstance::flops)
      .def(
          "reference",
          [](const OpInstance& op,
             std::vector<nb::ndarray<double, nb::device::cpu, nb::c_contig>> arrays) {
            std::vector<Buffer> args = op.program.args();
            if (arrays.size() != args.size())
              throw_error("the reference takes {} arrays (inputs then outputs), given {}",
                          args.size(), arrays.size());
            std::vector<std::vector<double>> values(arrays.size());
            for (size_t i = 0; i < arrays.size(); ++i) {
              if (static_cast<int64_t>(arrays[i].size()) != args[i]->num_elements())
                throw_error("array {} ({}) has {} elements, the operator's has {}", i,
                            args[i]->name, arrays[i].size(), args[i]->num_elements());
              values[i].assign(arrays[i].data(), arrays[i].data() + arrays[i].size());
            }
            op.reference(values);
            for (size_t i = op.program.inputs.size(); i < arrays.size(); ++i)
              std::memcpy(arrays[i].data(), values[i].data(), values[i].size() * sizeof(double));
          },
          nb::arg("arrays"),
          "The naive reference in float64, in place: inputs then outputs, as the kernel takes "
          "them.");
  m.def(
      "operator", [](const std::string& workload) { return instantiate(parse_workload(workload)); },
      nb::arg("workload"));
  m.def("canonical_workload", &canonical_workload, nb::arg("workload"));

  m.def("set_num_threads", &set_num_threads, nb::arg("n"));
  m.def("num_threads", &num_threads);
}

}  // namespace tessera::python
