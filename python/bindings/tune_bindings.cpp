// Tuning and records from Python: tune one workload or a task list into a records DB, with
// progress through a Python callable, and the DB's records as JSON (the Python side makes them
// dicts, as `tessera db export` writes them).
#include <fmt/format.h>
#include <nanobind/stl/function.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bindings.h"
#include "db/jsonl.h"
#include "db/record_db.h"
#include "measure/target.h"
#include "runtime/output_file.h"
#include "te/error.h"
#include "tune/tune.h"
#include "tune/tune_all.h"

namespace tessera::python {

namespace {

const std::string& checked_db_path(const std::string& path) {
  if (names_no_db_file(path))
    throw_error("db '{}' names no file: every record would be lost", path);
  return path;
}

// Calls into Python from the tuner, which runs with the GIL released. A pending Ctrl-C or an
// exception of the callback ends the run (records already measured stay in the DB).
template <typename Progress>
std::function<void(const Progress&)> python_progress(
    nb::object callback, std::function<nb::dict(const Progress&)> fields) {
  return [callback, fields](const Progress& p) {
    nb::gil_scoped_acquire gil;
    if (PyErr_CheckSignals() != 0) throw nb::python_error();
    if (!callback.is_none()) callback(fields(p));
  };
}

nb::dict tune_progress_fields(const TuneProgress& p) {
  nb::dict d;
  d["trials_done"] = p.trials_done;
  d["trials_total"] = p.trials_total;
  d["errors"] = p.errors;
  d["best_gflops"] = p.best_gflops;
  d["elapsed_s"] = p.elapsed_s;
  d["eta_s"] = p.eta_s;
  d["retime_round"] = p.retime_round;
  d["retime_rounds"] = p.retime_rounds;
  return d;
}

nb::dict tune_all_progress_fields(const TuneAllProgress& p) {
  nb::dict d;
  d["trials_done"] = p.trials_done;
  d["trials_total"] = p.trials_total;
  d["elapsed_s"] = p.elapsed_s;
  d["total_latency_s"] = p.total_latency_s;
  d["retimed"] = p.retimed;
  if (p.tasks && p.last_task >= 0)
    d["task"] = p.tasks->at(static_cast<size_t>(p.last_task)).task.workload;
  return d;
}

MeasureParams measure_params(int threads, const std::string& worker) {
  if (threads < 0 || threads > 1024) throw_error("threads must be 0 (all cores) to 1024");
  MeasureParams measure;
  measure.run.threads = threads;
  measure.run.worker_path = worker;
  return measure;
}

TuneParams tune_params(int trials, const std::string& tuner, uint64_t seed,
                       const std::string& pretrained, int early_stop = 0, int batch_size = 64) {
  if (trials < 1) throw_error("trials must be at least 1, given {}", trials);
  if (early_stop < 0) throw_error("early_stop must be 0 (never) or more, given {}", early_stop);
  TuneParams params;
  if (batch_size < 1) throw_error("batch_size must be at least 1, given {}", batch_size);
  params.early_stop = early_stop;
  params.batch_size = batch_size;
  params.trials = trials;
  params.tuner = tuner;
  params.seed = seed;
  params.pretrained = pretrained;
  return params;
}

void warn_python(const std::string& message) {
  nb::gil_scoped_acquire gil;
  nb::module_::import_("warnings").attr("warn")("tessera: " + message);
}

}  // namespace

void bind_tune(nb::module_& m) {
  nb::class_<TuneResult>(m, "TuneResult", "One workload's tuning run.")
      .def_ro("workload", &TuneResult::workload)
      .def_ro("flops", &TuneResult::flops)
      .def_ro("trials", &TuneResult::trials)
      .def_ro("resumed", &TuneResult::resumed)
      .def_ro("errors", &TuneResult::errors)
      .def_ro("best_gflops", &TuneResult::best_gflops)
      .def_ro("best_strategy", &TuneResult::best_strategy)
      .def_ro("best_config", &TuneResult::best_config)
      .def_ro("best_curve", &TuneResult::best_curve)
      .def_ro("seconds", &TuneResult::seconds)
      .def_ro("tuner_seconds", &TuneResult::tuner_seconds)
      .def_ro("measure_seconds", &TuneResult::measure_seconds)
      .def_ro("stopped_early", &TuneResult::stopped_early)
      .def("__repr__", [](const TuneResult& r) {
        return fmt::format("<TuneResult {}: {} trials, best {:.2f} GFLOP/s>", r.workload, r.trials,
                           r.best_gflops);
      });

  m.def(
      "tune",
      [](const std::string& workload, int trials, const std::string& db, const std::string& tuner,
         int threads, uint64_t seed, const std::string& pretrained, int early_stop, int batch_size,
         const std::string& worker, nb::object progress) {
        TuneParams params = tune_params(trials, tuner, seed, pretrained, early_stop, batch_size);
        MeasureParams measure = measure_params(threads, worker);
        auto report = python_progress<TuneProgress>(progress, tune_progress_fields);
        nb::gil_scoped_release release;
        return tune(workload, params, measure, checked_db_path(db), report, warn_python);
      },
      nb::arg("workload"), nb::arg("trials"), nb::arg("db"), nb::arg("tuner"), nb::arg("threads"),
      nb::arg("seed"), nb::arg("pretrained"), nb::arg("early_stop"), nb::arg("batch_size"),
      nb::arg("worker"), nb::arg("progress").none());

  m.def(
      "tune_all",
      [](const std::vector<std::string>& workloads, int trials, const std::string& db,
         const std::string& tuner, int threads, uint64_t seed, const std::string& pretrained,
         const std::string& scheduler, const std::string& worker, nb::object progress) {
        std::vector<TaskSpec> specs;
        for (const std::string& w : workloads) specs.push_back({"", canonical_workload(w)});
        if (specs.empty()) throw_error("tune_all needs at least one workload");
        TuneAllParams params;
        params.tune = tune_params(trials, tuner, seed, pretrained);
        params.scheduler.policy = parse_scheduler_policy(scheduler);
        MeasureParams measure = measure_params(threads, worker);
        auto report = python_progress<TuneAllProgress>(progress, tune_all_progress_fields);
        TuneAllResult all;
        {
          nb::gil_scoped_release release;
          all = tune_all(specs, params, measure, checked_db_path(db), report, warn_python);
        }
        std::vector<TuneResult> results;
        for (const TaskReport& t : all.tasks) results.push_back(t.result);
        return results;
      },
      nb::arg("workloads"), nb::arg("trials"), nb::arg("db"), nb::arg("tuner"), nb::arg("threads"),
      nb::arg("seed"), nb::arg("pretrained"), nb::arg("scheduler"), nb::arg("worker"),
      nb::arg("progress").none());

  m.def(
      "target_key", [] { return detect_target().key(); },
      "This machine and compiler as the records DB keys results.");
  m.def(
      "db_best",
      [](const std::string& db, const std::string& workload,
         bool any_target) -> std::optional<std::string> {
        RecordDb records = RecordDb::open(checked_db_path(db), RecordDb::Mode::kReadOnly);
        std::optional<Record> best = records.best(
            canonical_workload(workload), any_target ? std::string() : detect_target().key());
        if (!best) return std::nullopt;
        return record_to_json(*best);
      },
      nb::arg("db"), nb::arg("workload"), nb::arg("any_target"));
  m.def(
      "db_records",
      [](const std::string& db, const std::string& workload, int64_t limit, bool only_ok) {
        RecordDb records = RecordDb::open(checked_db_path(db), RecordDb::Mode::kReadOnly);
        RecordQuery query;
        query.workload = workload.empty() ? workload : canonical_workload(workload);
        query.limit = limit;
        query.only_ok = only_ok;
        std::vector<std::string> lines;
        for (const Record& r : records.records(query)) lines.push_back(record_to_json(r));
        return lines;
      },
      nb::arg("db"), nb::arg("workload"), nb::arg("limit"), nb::arg("only_ok"));
  m.def(
      "db_export",
      [](const std::string& db, const std::string& output) {
        check_output_path(output, FileKind::kJsonl, {db});
        RecordDb records = RecordDb::open(checked_db_path(db), RecordDb::Mode::kReadOnly);
        size_t count = 0;
        write_file_atomically(output,
                              [&](std::ostream& out) { count = export_jsonl(records, out); });
        return count;
      },
      nb::arg("db"), nb::arg("output"));
}

}  // namespace tessera::python
