#include "cli/run_model_command.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>

#include "cli/print_error.h"
#include "cli/validators.h"
#include "graph/choose_schedule.h"
#include "graph/compiled_model.h"
#include "graph/executor.h"
#include "graph/npy.h"
#include "graph/onnx_import.h"
#include "graph/op_table.h"
#include "graph/passes.h"
#include "graph/reference.h"
#include "runtime/output_file.h"
#include "runtime/timer.h"
#include "te/error.h"

namespace tessera {

namespace {

constexpr int kExitWrong = 1;
constexpr int kExitBadInput = 2;

struct OutputSummary {
  std::string name;
  std::vector<int64_t> shape;
  double checksum = 0;  // sum of the elements
  std::vector<double> first;
};

OutputSummary summarize(const std::string& name, const graph::HostTensor& t) {
  OutputSummary s{name, t.shape, 0, {}};
  for (double v : t.data) s.checksum += v;
  s.first.assign(t.data.begin(), t.data.begin() + std::min<size_t>(t.data.size(), 8));
  return s;
}

// max |a - b| over max |b|: relative to the output's scale, since elementwise relative errors
// of outputs near zero measure only rounding.
double max_relative_error(const graph::HostTensor& a, const graph::HostTensor& b) {
  double diff = 0, scale = 0;
  for (size_t i = 0; i < a.data.size(); ++i) {
    diff = std::max(diff, std::abs(a.data[i] - b.data[i]));
    scale = std::max(scale, std::abs(b.data[i]));
  }
  return diff / std::max(scale, 1e-30);
}

bool is_shared_object(const std::string& path) {
  return path.ends_with(".so");
}

// The model's input: read from --input (its shape and kind checked) or seeded random; ids
// (`id_bound` > 0: an integer input) drawn in [0, id_bound). Throws Error.
graph::HostTensor model_input(const RunModelArgs& args, const std::string& name,
                              const std::vector<int64_t>& shape, int64_t id_bound) {
  if (args.input.empty() && id_bound > 0) {
    std::mt19937_64 rng(args.seed);
    std::uniform_int_distribution<int64_t> id(0, id_bound - 1);
    graph::HostTensor ids{shape, {}, true};
    for (int64_t i = 0; i < graph::num_elements(shape); ++i)
      ids.data.push_back(static_cast<double>(id(rng)));
    return ids;
  }
  if (args.input.empty()) {
    NDArray a = NDArray::empty(shape, DType::kFloat32);
    a.fill_random(args.seed);
    return graph::to_host(a, shape);
  }
  graph::HostTensor input = graph::read_npy(args.input);
  if (input.shape != shape)
    throw_error("{}: shape {}, the model's input '{}' is {}", args.input,
                graph::shape_text(input.shape), name, graph::shape_text(shape));
  if (input.is_int != (id_bound > 0))
    throw_error("{}: holds {}, the model's input '{}' takes {}", args.input,
                input.is_int ? "integers" : "floats", name,
                id_bound > 0 ? "integer ids (an int64 or int32 .npy)" : "floats");
  // The model's Gathers clamp an index into their table; onnxruntime refuses one outside it.
  // A negative id counts from the end, as ONNX's Gather reads it.
  const auto bound = static_cast<double>(id_bound);
  for (size_t i = 0; id_bound > 0 && i < input.data.size(); ++i)
    if (input.data[i] < -bound || input.data[i] >= bound)
      throw_error("{}: id {:.0f} at {} lies outside the model's tables [-{}, {})", args.input,
                  input.data[i], i, id_bound, id_bound);
  return input;
}

// The report's input, outputs and timing, shared by both kinds of model.
void add_run_json(nlohmann::json& j, const RunModelArgs& args, const std::string& input_name,
                  const graph::HostTensor& input, const std::vector<std::string>& output_names,
                  const std::vector<graph::HostTensor>& outputs, const Timing& timing) {
  j["input"] = {
      {"name", input_name},
      {"shape", input.shape},
      {"source", args.input.empty() ? fmt::format("random (seed {})", args.seed) : args.input}};
  for (size_t i = 0; i < outputs.size(); ++i) {
    OutputSummary s = summarize(output_names[i], outputs[i]);
    j["outputs"].push_back(
        {{"name", s.name}, {"shape", s.shape}, {"checksum", s.checksum}, {"first", s.first}});
  }
  j["threads"] = num_threads();
  j["ms_median"] = timing.median * 1e3;
  std::vector<double> ms = timing.seconds_per_run;
  for (double& v : ms) v *= 1e3;
  j["ms_per_repeat"] = ms;
}

void print_input_and_outputs(const RunModelArgs& args, const std::string& input_name,
                             const graph::HostTensor& input,
                             const std::vector<std::string>& output_names,
                             const std::vector<graph::HostTensor>& outputs) {
  std::cout << fmt::format(
      "input     {} {} ({})\n", input_name, graph::shape_text(input.shape),
      args.input.empty() ? fmt::format("random, seed {}", args.seed) : args.input);
  for (size_t i = 0; i < outputs.size(); ++i) {
    OutputSummary s = summarize(output_names[i], outputs[i]);
    std::vector<std::string> first;
    for (double v : s.first) first.push_back(fmt::format("{:.6g}", v));
    std::cout << fmt::format("output    {} {} checksum {:.6g}, first [{}]\n", s.name,
                             graph::shape_text(s.shape), s.checksum, fmt::join(first, ", "));
  }
}

// A model runs for 200 ms before it is timed. In a fresh process MnasNet's first one to four
// 20 ms repeats ran 1.3-1.8x slower than the rest, with or without --fixed-threads (Xeon guest,
// 2 cores), which moved a median of 10 repeats by as much. A runtime whose session has run
// before is timed warm; so is this.
constexpr double kModelWarmUpMs = 200;

void print_time(const Timing& timing) {
  std::cout << fmt::format("time      {:.4f} ms (median of {}, {} thread{})\n", timing.median * 1e3,
                           timing.seconds_per_run.size(), num_threads(),
                           num_threads() == 1 ? "" : "s");
}

// A model library from `tessera compile -o`: loaded, fed, run and timed through its C
// interface, as an application would.
int run_library(const RunModelArgs& args) {
  std::string unsupported = args.check                     ? "--check"
                            : args.profile                 ? "--profile"
                            : !args.db.empty()             ? "--db"
                            : !args.layout.empty()         ? "--layout"
                            : !args.conv_algorithm.empty() ? "--conv-algorithm"
                                                           : "";
  if (!unsupported.empty()) {
    print_error(fmt::format(
        "{} needs model.onnx: {} is compiled (its schedules were fixed by `tessera compile`)",
        unsupported, args.model));
    return kExitBadInput;
  }
  graph::HostTensor input;
  std::optional<CompiledModel> model;
  try {
    if (args.threads < 0) throw_error("--threads must be positive");
    // A bare name would send dlopen to the loader's search path, not to the file named.
    model.emplace(CompiledModel::load(args.model.find('/') == std::string::npos ? "./" + args.model
                                                                                : args.model));
    if (model->num_inputs() != 1)
      throw_error("{}: the model has {} inputs (run-model feeds one)", args.model,
                  model->num_inputs());
    int64_t id_bound = 0;
    if (model->input_is_int(0)) {
      nlohmann::json d = nlohmann::json::parse(model->description());
      id_bound = d.at("inputs").at(0).at("id_bound").get<int64_t>();
    }
    input = model_input(args, model->input_name(0), model->input_shape(0), id_bound);
  } catch (const std::exception& e) {
    print_error(e.what());
    return kExitBadInput;
  }
  if (args.threads > 0) model->set_num_threads(args.threads);
  model->set_adaptive_threads(!args.fixed_threads);
  if (model->input_is_int(0)) {
    std::vector<int64_t> ids;
    for (double d : input.data) ids.push_back(graph::saturated_int(d));
    model->set_input_ids(0, ids);
  } else {
    std::vector<float> x(input.data.begin(), input.data.end());
    model->set_input(0, x);
  }
  model->run();
  std::vector<graph::HostTensor> outputs;
  std::vector<std::string> output_names;
  for (size_t i = 0; i < model->num_outputs(); ++i) {
    std::vector<float> y = model->get_output(i);
    outputs.push_back({model->output_shape(i), std::vector<double>(y.begin(), y.end()), false});
    output_names.push_back(model->output_name(i));
  }
  Timing timing = time_function([&] { model->run(); }, args.repeat, 20, kModelWarmUpMs);
  if (!args.output.empty()) {
    try {
      graph::write_npy(args.output, outputs.at(0));
    } catch (const Error& e) {
      print_error(e.what());
      return kExitBadInput;
    }
  }

  nlohmann::json d = nlohmann::json::parse(model->description(), nullptr, false);
  if (d.is_discarded() || !d.contains("kernels")) d = nlohmann::json::object();
  int tuned = 0, defaults = 0, fixed = 0;
  for (const auto& k : d.value("kernels", nlohmann::json::array())) {
    std::string schedule = k.value("schedule", "");
    tuned += schedule == "db";
    fixed += schedule == "fixed";
    defaults += schedule == "default" || schedule == "plain";
  }
  if (args.json) {
    nlohmann::json j;
    j["model"] = args.model;
    j["library"] = d;
    add_run_json(j, args, model->input_name(0), input, output_names, outputs, timing);
    j["threads_in_use"] = model->threads_in_use();
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  std::cout << fmt::format("model     {} (compiled from {} for {})\n", args.model,
                           d.value("model", "?"), d.value("target", "?"));
  std::cout << fmt::format(
      "kernels   {} distinct in {} steps: {} tuned (records DB), {} at the template's default "
      "configuration{}, {} graph te kernels\n",
      tuned + defaults + fixed, d.value("steps", 0), tuned, defaults,
      tuned == 0 && defaults > 0 ? " (compiled without tuning records)" : "", fixed);
  std::cout << fmt::format("memory    weights {:.1f} MB, intermediates {:.1f} MB in one arena\n",
                           d.value("weight_bytes", 0.0) / 1e6, d.value("arena_bytes", 0.0) / 1e6);
  print_input_and_outputs(args, model->input_name(0), input, output_names, outputs);
  print_time(timing);
  return 0;
}

int run_model(const RunModelArgs& args) {
  if (!args.output.empty()) {
    try {
      check_output_path(args.output, FileKind::kNpy, {args.model, args.input, args.db});
    } catch (const Error& e) {
      print_error(e.what());
      return kExitBadInput;
    }
  }
  if (is_shared_object(args.model)) return run_library(args);
  graph::Graph g;
  std::vector<graph::PassLog> log;
  graph::HostTensor input;
  size_t nodes_before = 0;
  try {
    if (args.threads < 0) throw_error("--threads must be positive");
    g = graph::import_onnx(args.model);
    nodes_before = g.nodes.size();
    log = graph::run_default_passes(
        g, {.blocked_layout = args.layout != "nchw", .winograd = args.conv_algorithm != "direct"});
    if (g.inputs.size() != 1)
      throw_error("{}: the model has {} inputs (run-model feeds one)", args.model, g.inputs.size());
    input = model_input(args, g.inputs[0], g.shape(g.inputs[0]),
                        g.int_inputs.count(g.inputs[0]) ? graph::id_bound(g, g.inputs[0]) : 0);
  } catch (const Error& e) {
    print_error(e.what());
    return kExitBadInput;
  }

  graph::ExecutorParams params;
  params.db = args.db;
  params.threads = args.threads;
  graph::Executor ex;
  try {
    ex = graph::compile_model(g, params);
  } catch (const graph::KernelBuildError& e) {
    print_error(e.what());
    return kExitWrong;
  } catch (const Error& e) {
    print_error(e.what());
    return kExitBadInput;
  }
  ex.set_input(0, input);
  ex.run();
  std::vector<graph::HostTensor> outputs;
  for (size_t i = 0; i < ex.num_outputs(); ++i) outputs.push_back(ex.output(i));
  Timing timing = time_function([&] { ex.run(); }, args.repeat, 20, kModelWarmUpMs);
  std::vector<double> kernel_ms;
  if (args.profile) kernel_ms = ex.profile(args.repeat);

  double check_error = -1;
  if (args.check) {
    std::vector<graph::HostTensor> expected = graph::run_reference(g, {{g.inputs[0], input}});
    check_error = 0;
    for (size_t i = 0; i < outputs.size(); ++i)
      check_error = std::max(check_error, max_relative_error(outputs[i], expected[i]));
  }
  if (!args.output.empty()) {
    try {
      graph::write_npy(args.output, outputs.at(0));
    } catch (const Error& e) {
      print_error(e.what());
      return kExitBadInput;
    }
  }

  int defaults = 0, recorded = 0, fixed = 0;
  for (const graph::KernelInfo& k : ex.kernels()) {
    defaults += k.schedule == "default" || k.schedule == "plain";
    recorded += k.schedule == "db";
    fixed += k.schedule == "fixed";
  }
  if (args.json) {
    nlohmann::json j;
    j["model"] = args.model;
    j["nodes_imported"] = nodes_before;
    j["nodes"] = g.nodes.size();
    for (const graph::PassLog& p : log) j["passes"][p.pass] = p.changed;
    j["graph"] = graph::print_graph(g);
    add_run_json(j, args, g.inputs[0], input, g.outputs, outputs, timing);
    for (size_t i = 0; i < ex.kernels().size(); ++i) {
      const graph::KernelInfo& k = ex.kernels()[i];
      j["kernels"].push_back({{"workload", k.workload},
                              {"schedule", k.schedule},
                              {"strategy", k.strategy},
                              {"in_model", k.in_model},
                              {"uses", k.uses}});
      if (args.profile) j["kernels"].back()["ms"] = kernel_ms[i];
    }
    j["steps"] = ex.steps();
    if (args.check) j["max_rel_error_vs_reference"] = check_error;
    std::cout << j.dump(2) << "\n";
  } else {
    std::cout << fmt::format("model     {} ({} nodes imported, {} after the passes)\n", args.model,
                             nodes_before, g.nodes.size());
    std::vector<std::string> passes;
    for (const graph::PassLog& p : log) passes.push_back(fmt::format("{} {}", p.pass, p.changed));
    std::cout << fmt::format("passes    {}\n", fmt::join(passes, ", "));
    std::cout << fmt::format(
        "kernels   {} distinct in {} steps: {} tuned (records DB), {} at the "
        "template's default configuration{}, {} graph te kernels\n",
        ex.kernels().size(), ex.steps(), recorded, defaults,
        args.db.empty() ? " (no --db)" : " (no records)", fixed);
    for (size_t i = 0; i < ex.kernels().size(); ++i) {
      const graph::KernelInfo& k = ex.kernels()[i];
      std::string ms = args.profile ? fmt::format(" {:9.4f} ms", kernel_ms[i]) : "";
      std::cout << fmt::format("         {} {:<8} x{} {}\n", ms, k.schedule, k.uses, k.workload);
    }
    print_input_and_outputs(args, g.inputs[0], input, g.outputs, outputs);
    if (args.check)
      std::cout << fmt::format("check     max relative error {:.3g} vs the reference path\n",
                               check_error);
    print_time(timing);
  }
  return args.check && !(check_error <= 1e-3) ? kExitWrong : 0;
}

}  // namespace

RunModelCommand add_run_model_command(CLI::App& app) {
  RunModelCommand c;
  RunModelArgs& a = *c.args;
  c.app = app.add_subcommand("run-model",
                             "Run a model: model.onnx imported, fused and compiled now, or a "
                             "model.so written by `tessera compile -o`");
  c.app->add_option("model", a.model, "model.onnx or model.so")->required();
  c.app->add_option("--input", a.input, "Input tensor as .npy (float32); default: random");
  c.app->add_option("--output", a.output, "Write the first output as .npy (float32)")
      ->check(nonempty_path());
  c.app->add_option("--db", a.db,
                    "Records DB: each kernel runs its best recorded configuration (default: the "
                    "templates' default configurations)");
  c.app->add_option("--threads,-t", a.threads, "Threads (default: all cores)")
      ->check(thread_count());
  c.app->add_option("--repeat", a.repeat, "Timed repeats (median reported)")
      ->check(CLI::PositiveNumber);
  c.app->add_option("--seed", a.seed, "Seed of the random input")->check(seed_number());
  c.app->add_flag("--check", a.check,
                  "Compare with the naive reference path (exit 1 above 1e-3 relative error)");
  c.app->add_flag("--profile", a.profile,
                  "Time each kernel (the sum over its steps, median of --repeat runs)");
  c.app->add_flag("--json", a.json, "Print the result as JSON");
  c.app->add_flag("--fixed-threads", a.fixed_threads,
                  "model.so: every run uses --threads, also when other processes keep the machine "
                  "busy (by default the library tries fewer where that runs faster)");
  add_layout_option(c.app, a.layout);
  add_conv_algorithm_option(c.app, a.conv_algorithm);
  return c;
}

std::optional<int> run_run_model_command(const RunModelCommand& c) {
  if (!c.app->parsed()) return std::nullopt;
  return run_model(*c.args);
}

}  // namespace tessera
