// Whole models from Python: an ONNX graph imported and rewritten by the default passes, its
// library workloads (the tuning tasks), compiled in process by graph::compile_model (the one
// way `tessera compile` and `run-model` take), run on numpy arrays, saved as the same shared
// object the CLI writes; and such a library loaded back.
#include <fmt/format.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <cstring>
#include <filesystem>

#include "bindings.h"
#include "graph/choose_schedule.h"
#include "graph/compiled_model.h"
#include "graph/executor.h"
#include "graph/graph.h"
#include "graph/onnx_import.h"
#include "graph/passes.h"
#include "runtime/output_file.h"
#include "te/error.h"

namespace tessera::python {

namespace {

using FloatArray = nb::ndarray<float, nb::device::cpu, nb::c_contig>;
using IdArray = nb::ndarray<int64_t, nb::device::cpu, nb::c_contig>;
// (name, shape, dtype): dtype "float32", or "int64" for an input of token ids.
using ValueInfo = std::tuple<std::string, std::vector<int64_t>, std::string>;

struct Model {
  graph::Executor executor;
  std::string source;  // the ONNX file it came from, "" when given as bytes
};

template <typename A>
void check_shape(const A& a, const std::vector<int64_t>& expected, const std::string& what) {
  std::vector<int64_t> shape = shape_of(a);
  if (shape != expected)
    throw_error("{} has shape [{}], the model's is [{}]", what, fmt::join(shape, ", "),
                fmt::join(expected, ", "));
}

std::vector<ValueInfo> graph_values(const graph::Graph& g, const std::vector<std::string>& names) {
  std::vector<ValueInfo> infos;
  for (const std::string& v : names)
    infos.emplace_back(v, g.shape(v), g.int_inputs.count(v) ? "int64" : "float32");
  return infos;
}

// The executor under the names of CompiledModel's, so that one function runs either.
struct InProcess {
  graph::Executor& ex;
  size_t num_inputs() const { return ex.num_inputs(); }
  size_t num_outputs() const { return ex.num_outputs(); }
  bool input_is_int(size_t i) const { return ex.input_is_int(i); }
  std::vector<int64_t> input_shape(size_t i) const { return ex.input(i).shape(); }
  const std::vector<int64_t>& output_shape(size_t i) const { return ex.output_shape(i); }
  void set_input(size_t i, const float* data, size_t count) {
    std::memcpy(ex.input(i).data(), data, count * sizeof(float));
  }
  void set_input_ids(size_t i, const int64_t* data, size_t count) {
    std::memcpy(ex.input_ids(i).data(), data, count * sizeof(int64_t));
  }
  void run() { ex.run(); }
  const float* output_data(size_t i) const { return ex.output_data(i); }
};

// Checks every array against the model's shapes first (the copies rely on them), runs without
// the GIL, and copies the outputs into the caller's arrays.
template <typename M>
void run_on_arrays(M& m, const std::vector<nb::object>& inputs,
                   const std::vector<FloatArray>& outputs) {
  if (inputs.size() != m.num_inputs())
    throw_error("the model takes {} inputs, given {}", m.num_inputs(), inputs.size());
  if (outputs.size() != m.num_outputs())
    throw_error("the model has {} outputs, given {} arrays for them", m.num_outputs(),
                outputs.size());
  for (size_t i = 0; i < outputs.size(); ++i)
    check_shape(outputs[i], m.output_shape(i), fmt::format("output {}", i));
  for (size_t i = 0; i < inputs.size(); ++i) {
    std::string what = fmt::format("input {}", i);
    if (m.input_is_int(i)) {
      IdArray ids = nb::cast<IdArray>(inputs[i]);
      check_shape(ids, m.input_shape(i), what);
      m.set_input_ids(i, ids.data(), ids.size());
    } else {
      FloatArray x = nb::cast<FloatArray>(inputs[i]);
      check_shape(x, m.input_shape(i), what);
      m.set_input(i, x.data(), x.size());
    }
  }
  {
    nb::gil_scoped_release release;
    m.run();
  }
  for (size_t i = 0; i < outputs.size(); ++i)
    std::memcpy(outputs[i].data(), m.output_data(i), outputs[i].size() * sizeof(float));
}

}  // namespace

void bind_model(nb::module_& m) {
  nb::class_<graph::Graph>(m, "Graph", "A model's graph as tessera imported it.")
      .def_prop_ro("inputs", [](const graph::Graph& g) { return graph_values(g, g.inputs); })
      .def_prop_ro("outputs", [](const graph::Graph& g) { return graph_values(g, g.outputs); })
      .def_prop_ro("num_nodes", [](const graph::Graph& g) { return g.nodes.size(); })
      .def(
          "run_passes",
          [](graph::Graph& g, bool blocked_layout, bool winograd) {
            graph::run_default_passes(g, {.blocked_layout = blocked_layout, .winograd = winograd});
          },
          nb::arg("blocked_layout"), nb::arg("winograd"))
      .def(
          "library_workloads",
          [](const graph::Graph& g) {
            std::vector<std::string> workloads;
            for (const graph::PlannedWorkload& w : graph::Executor::library_workloads(g))
              workloads.push_back(w.workload);
            return workloads;
          },
          "The library operators the model runs, one per step (its tuning tasks).");
  m.def("import_onnx", &graph::import_onnx, nb::arg("path"));
  m.def(
      "import_onnx_bytes",
      [](nb::bytes data) {
        return graph::import_onnx_bytes(std::string(data.c_str(), data.size()));
      },
      nb::arg("data"));

  nb::class_<Model>(m, "CompiledGraph", "A model compiled in this process.")
      .def_prop_ro("num_inputs", [](const Model& md) { return md.executor.num_inputs(); })
      .def_prop_ro("num_outputs", [](const Model& md) { return md.executor.num_outputs(); })
      .def_prop_ro("kernels",
                   [](const Model& md) {
                     std::vector<std::tuple<std::string, std::string, std::string, int>> rows;
                     for (const graph::KernelInfo& k : md.executor.kernels())
                       rows.emplace_back(k.workload, k.schedule, k.strategy, k.uses);
                     return rows;
                   })
      .def(
          "run",
          [](Model& md, const std::vector<nb::object>& inputs,
             const std::vector<FloatArray>& outputs) {
            InProcess model{md.executor};
            run_on_arrays(model, inputs, outputs);
          },
          nb::arg("inputs"), nb::arg("outputs"))
      .def(
          "profile", [](const Model& md, int repeat) { return md.executor.profile(repeat); },
          nb::arg("repeat"), "Milliseconds per kernel per run, in `kernels` order.")
      .def(
          "save",
          [](const Model& md, const std::string& path) {
            check_output_path(path, FileKind::kSharedLibrary, {md.source});
            graph::ExportOptions options;
            options.model = md.source;
            nb::gil_scoped_release release;
            md.executor.export_library(path, options);
          },
          nb::arg("path"));
  m.def(
      "compile_graph",
      [](const graph::Graph& g, const std::string& db, int threads, bool in_model_check,
         const std::string& source) {
        if (threads < 0 || threads > 1024) throw_error("threads must be 0 (all cores) to 1024");
        graph::ExecutorParams params;
        if (!db.empty() && std::filesystem::exists(db)) params.db = db;
        params.threads = threads;
        nb::gil_scoped_release release;
        return Model{graph::compile_model(g, params, in_model_check && !params.db.empty()), source};
      },
      nb::arg("graph"), nb::arg("db"), nb::arg("threads"), nb::arg("in_model_check"),
      nb::arg("source"));

  nb::class_<CompiledModel>(m, "ModelLibrary", "A model library written by compile -o.")
      .def_static("load", &CompiledModel::load, nb::arg("path"))
      .def_prop_ro("inputs",
                   [](const CompiledModel& c) {
                     std::vector<ValueInfo> infos;
                     for (size_t i = 0; i < c.num_inputs(); ++i)
                       infos.emplace_back(c.input_name(i), c.input_shape(i),
                                          c.input_is_int(i) ? "int64" : "float32");
                     return infos;
                   })
      .def_prop_ro("outputs",
                   [](const CompiledModel& c) {
                     std::vector<ValueInfo> infos;
                     for (size_t i = 0; i < c.num_outputs(); ++i)
                       infos.emplace_back(c.output_name(i), c.output_shape(i), "float32");
                     return infos;
                   })
      .def_prop_ro("description", &CompiledModel::description)
      .def("set_adaptive_threads", &CompiledModel::set_adaptive_threads, nb::arg("on"))
      .def(
          "run",
          [](CompiledModel& c, const std::vector<nb::object>& inputs,
             const std::vector<FloatArray>& outputs) { run_on_arrays(c, inputs, outputs); },
          nb::arg("inputs"), nb::arg("outputs"));
}

}  // namespace tessera::python
