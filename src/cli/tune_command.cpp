#include "cli/tune_command.h"

#include <fmt/format.h>
#include <oneapi/dnnl/dnnl.h>
#include <unistd.h>

#include <cstring>
#include <iostream>
#include <nlohmann/json.hpp>
#include <oneapi/dnnl/dnnl.hpp>

#include "bench/openblas_env.h"
#include "db/record_db.h"
#include "ops/evaluate.h"
#include "runtime/module.h"
#include "runtime/ndarray.h"
#include "schedule/strategy_parser.h"
#include "te/error.h"
#include "tune/tune.h"

namespace tessera {

namespace {

std::string clock_text(double s) {
  auto t = static_cast<int64_t>(s + 0.5);
  return fmt::format("{:02}:{:02}:{:02}", t / 3600, t / 60 % 60, t % 60);
}

}  // namespace

std::string transfer_text(const TransferInfo& t) {
  if (t.used) {
    return fmt::format("transfer on (global model: {} records, {} workloads)", t.records,
                       t.workloads);
  }
  return "transfer off";
}

nlohmann::json transfer_json(const TransferInfo& t) {
  nlohmann::json j;
  j["used"] = t.used;
  j["records"] = t.records;
  j["workloads"] = t.workloads;
  j["rebuilt"] = t.rebuilt;
  j["model"] = t.model_path;
  j["seconds"] = t.seconds;
  if (!t.used) j["reason"] = t.reason;
  return j;
}

namespace {

void show_progress(const TuneProgress& p, bool tty) {
  std::string text =
      fmt::format("{}/{} trials, {} errors, best {:.2f} GFLOP/s, {}, {} elapsed, ETA {}",
                  p.trials_done, p.trials_total, p.errors, p.best_gflops, transfer_text(p.transfer),
                  clock_text(p.elapsed_s), clock_text(p.eta_s));
  if (tty) {
    int width = 30, filled = p.trials_total ? width * p.trials_done / p.trials_total : width;
    std::cerr << "\r[" << std::string(static_cast<size_t>(filled), '#')
              << std::string(static_cast<size_t>(width - filled), '.') << "] " << text
              << std::flush;
  } else {
    std::cerr << "tune: " << text << "\n";
  }
}

int tune_command(const TuneArgs& args) {
  bool tty = isatty(STDERR_FILENO);
  MeasureParams measure;
  measure.run.threads = args.threads;
  TuneResult r;
  try {
    r = tune(args.workload, args.params, measure, args.db,
             [&](const TuneProgress& p) { show_progress(p, tty); });
  } catch (const Error& e) {
    if (tty) std::cerr << "\n";
    std::cerr << "tessera: error: " << e.what() << "\n";
    return 2;
  }
  if (tty) std::cerr << "\n";
  if (args.json) {
    nlohmann::json j;
    j["workload"] = r.workload;
    j["trials"] = r.trials;
    j["resumed"] = r.resumed;
    j["errors"] = r.errors;
    j["best_gflops"] = r.best_gflops;
    j["best_config"] = r.best_config;
    j["best_strategy"] = r.best_strategy;
    j["seconds"] = r.seconds;
    j["tuner_seconds"] = r.tuner_seconds;
    j["measure_seconds"] = r.measure_seconds;
    j["best_curve"] = r.best_curve;
    j["transfer"] = transfer_json(r.transfer);
    std::cout << j.dump(2) << "\n";
  } else {
    std::cout << fmt::format("workload  {}\ntrials    {} ({} resumed from {}), {} errors\n",
                             r.workload, r.trials, r.resumed, args.db, r.errors);
    std::cout << fmt::format("best      {:.2f} GFLOP/s\nconfig    {}\nstrategy  {}\n",
                             r.best_gflops, r.best_config, r.best_strategy);
    std::cout << fmt::format("time      {:.1f} s ({:.1f} s measuring, {:.1f} s model and search)\n",
                             r.seconds, r.measure_seconds, r.tuner_seconds);
    std::cout << "model     " << transfer_text(r.transfer)
              << (r.transfer.used
                      ? fmt::format(", {:.1f} s to load or refit it", r.transfer.seconds)
                      : ": " + r.transfer.reason)
              << "\n";
  }
  return r.best_gflops > 0 ? 0 : 1;
}

struct Baseline {
  std::string name;
  double gflops = 0;
};

// oneDNN's direct convolution with the layouts it prefers (tag::any, usually channel-blocked),
// data and weights already in them: the best a user of the library gets for inference.
Baseline onednn_conv2d(const OpInstance& op, const Workload& w, int repeat) {
  using dnnl::memory;
  int64_t n = w.get("N"), c = w.get("C"), h = w.get("H"), wd = w.get("W"), o = w.get("O"),
          k = w.get("K"), s = w.get("S"), p = w.get("P");
  int64_t oh = (h + 2 * p - k) / s + 1, ow = (wd + 2 * p - k) / s + 1;
  dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  dnnl::stream stream(engine);
  auto any = [](memory::dims d) {
    return memory::desc(d, memory::data_type::f32, memory::format_tag::any);
  };
  dnnl::convolution_forward::desc desc(
      dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, any({n, c, h, wd}),
      any({o, c, k, k}), any({n, o, oh, ow}), {s, s}, {p, p}, {p, p});
  dnnl::convolution_forward::primitive_desc pd(desc, engine);
  memory src(pd.src_desc(), engine), weights(pd.weights_desc(), engine), dst(pd.dst_desc(), engine);
  std::memset(src.get_data_handle(), 0, pd.src_desc().get_size());
  std::memset(weights.get_data_handle(), 0, pd.weights_desc().get_size());
  dnnl::convolution_forward conv(pd);
  Timing t = time_function(
      [&] {
        conv.execute(stream,
                     {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, weights}, {DNNL_ARG_DST, dst}});
        stream.wait();
      },
      repeat);
  return {"oneDNN convolution_forward (" + std::string(pd.impl_info_str()) + ", its own layouts)",
          op.flops / t.median * 1e-9};
}

std::vector<Baseline> library_baselines(const OpInstance& op, const Workload& w, int repeat) {
  std::vector<Baseline> out;
  if (w.op == "conv2d") out.push_back(onednn_conv2d(op, w, repeat));
  if (w.op != "matmul") return out;
  int64_t m = w.get("M"), n = w.get("N"), k = w.get("K");
  NDArray a = NDArray::empty({m, k}, DType::kFloat32), b = NDArray::empty({k, n}, DType::kFloat32),
          c = NDArray::empty({m, n}, DType::kFloat32);
  a.fill_random(1);
  b.fill_random(2);
  out.push_back({"OpenBLAS cblas_sgemm (" + bench::openblas_core_description() + ")",
                 op.flops / bench::time_openblas_sgemm(m, n, k, num_threads(), repeat) * 1e-9});
  Timing dnnl = time_function(
      [&] {
        dnnl_sgemm('N', 'N', m, n, k, 1.0f, a.data_as<float>(), k, b.data_as<float>(), n, 0.0f,
                   c.data_as<float>(), n);
      },
      repeat);
  out.push_back({"oneDNN dnnl_sgemm", op.flops / dnnl.median * 1e-9});
  return out;
}

int bench_command(const BenchArgs& args) {
  try {
    Workload w = parse_workload(args.workload);
    OpInstance op = instantiate(w);
    RecordDb db = RecordDb::open(args.db, RecordDb::Mode::kReadOnly);
    std::optional<Record> best = db.best(w.text(), detect_target().key());
    if (!best) {
      std::cerr << "tessera: error: no successful record of " << w.text() << " on this machine in "
                << args.db << " (run tessera tune first)\n";
      return 2;
    }
    RewriteResult<Program> program = parse_strategy(best->result.strategy)(op.program);
    if (!program) throw Error("the recorded strategy no longer applies: " + program.message());
    if (args.threads > 0) set_num_threads(args.threads);
    std::vector<Baseline> baselines = library_baselines(op, w, args.repeat);
    EvaluateParams params;
    params.threads = args.threads;
    params.repeat = args.repeat;
    Evaluation ev = evaluate(op, program.program(), params);
    if (args.json) {
      nlohmann::json j;
      j["workload"] = w.text();
      j["strategy"] = best->result.strategy;
      j["gflops"] = ev.gflops;
      j["correct"] = ev.correct;
      j["threads"] = ev.threads;
      if (!baselines.empty()) {
        j["baseline"] = baselines.back().name;
        j["baseline_gflops"] = baselines.back().gflops;
        j["ratio"] = ev.gflops / baselines.back().gflops;
        for (const Baseline& b : baselines) j["baselines"][b.name] = b.gflops;
      }
      std::cout << j.dump(2) << "\n";
    } else {
      std::cout << fmt::format("workload  {}\nstrategy  {}\n", w.text(), best->result.strategy);
      std::cout << fmt::format("tessera   {:.2f} GFLOP/s ({} threads), correct: {}\n", ev.gflops,
                               ev.threads, ev.correct ? "yes" : "NO");
      for (const Baseline& b : baselines) {
        std::cout << fmt::format("{:<9} {:.2f} GFLOP/s, tessera/library = {:.2f}\n", "library",
                                 b.gflops, ev.gflops / b.gflops)
                  << "          " << b.name << "\n";
      }
      if (baselines.empty()) std::cout << "library   none linked for " << w.op << " yet\n";
    }
    return ev.correct ? 0 : 1;
  } catch (const Error& e) {
    std::cerr << "tessera: error: " << e.what() << "\n";
    return 2;
  }
}

}  // namespace

TuneCommands add_tune_commands(CLI::App& app) {
  TuneCommands c;
  TuneArgs& t = *c.tune_args;
  c.tune = app.add_subcommand("tune",
                              "Search a workload's schedule space with a learned cost model; every "
                              "measurement goes to the records DB");
  c.tune->add_option("workload", t.workload, "op:key=value,..., e.g. matmul:M=512,N=512,K=512")
      ->required();
  c.tune->add_option("--trials,-n", t.params.trials, "Configurations to measure")
      ->check(CLI::PositiveNumber);
  c.tune->add_option("--tuner", t.params.tuner, "xgb (rank loss), xgb-reg, random, grid or ga")
      ->check(CLI::IsMember({"xgb", "xgb-reg", "random", "grid", "ga"}));
  c.tune
      ->add_option("--features", t.params.features,
                   "Cost-model features: relation (default), context or knob; knob "
                   "features transfer only between workloads of the same template")
      ->check(CLI::IsMember({"relation", "context", "knob"}));
  c.tune
      ->add_option("--transfer", t.params.transfer,
                   "Transfer learning from the DB's other workloads: on, off, or auto (on when "
                   "the DB holds records of other workloads for this machine)")
      ->check(CLI::IsMember({"on", "off", "auto"}));
  c.tune->add_option("--batch", t.params.batch_size, "Measurements between model updates")
      ->check(CLI::PositiveNumber);
  c.tune->add_option("--db", t.db, "Records DB (SQLite; created on first use)");
  c.tune->add_option("--threads,-t", t.threads,
                     "Threads of the measured kernels (default: all cores)");
  c.tune->add_option("--seed", t.params.seed, "Seed of every random choice");
  c.tune->add_flag("--json", t.json, "Print the result as one JSON object");

  BenchArgs& b = *c.bench_args;
  c.bench = app.add_subcommand(
      "bench", "Measure the best recorded configuration against OpenBLAS and oneDNN");
  c.bench->add_option("workload", b.workload, "op:key=value,...")->required();
  c.bench->add_option("--db", b.db, "Records DB");
  c.bench->add_option("--threads,-t", b.threads, "Threads (default: all cores)");
  c.bench->add_option("--repeat", b.repeat, "Timed repeats (median reported)")
      ->check(CLI::PositiveNumber);
  c.bench->add_flag("--json", b.json, "Print the result as JSON");
  return c;
}

std::optional<int> run_tune_commands(const TuneCommands& c) {
  if (c.tune->parsed()) return tune_command(*c.tune_args);
  if (c.bench->parsed()) return bench_command(*c.bench_args);
  return std::nullopt;
}

}  // namespace tessera
