#include "cli/tune_command.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/baselines.h"
#include "cli/print_error.h"
#include "cli/validators.h"
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
  if (!t.used) return "transfer off";
  if (t.pretrained && t.records == 0)  // a pretrained TreeGRU: its file counts no records
    return fmt::format("transfer on (pretrained {})", t.model_path);
  return fmt::format("transfer on ({} model: {} record{}, {} workload{})",
                     t.shipped      ? "shipped"
                     : t.pretrained ? "pretrained"
                                    : "global",
                     t.records, t.records == 1 ? "" : "s", t.workloads,
                     t.workloads == 1 ? "" : "s");
}

nlohmann::json transfer_json(const TransferInfo& t) {
  nlohmann::json j;
  j["used"] = t.used;
  j["records"] = t.records;
  j["workloads"] = t.workloads;
  j["rebuilt"] = t.rebuilt;
  j["model"] = t.model_path;
  j["seconds"] = t.seconds;
  j["pretrained"] = t.pretrained;
  j["shipped"] = t.shipped;
  if (!t.used) j["reason"] = t.reason;
  return j;
}

void add_retime_options(CLI::App* command, TuneParams& params) {
  command
      ->add_option("--retime", params.retime_top,
                   "After the trials, time this many of the fastest configurations again, "
                   "together, and return the best median (0: the single fastest measurement)")
      ->check(CLI::Range(0, 1000));
  command
      ->add_option("--retime-rounds", params.retime_rounds,
                   "Rounds of that re-timing, each in a fresh random order")
      ->check(CLI::Range(1, 1000));
}

nlohmann::json retime_json(const TuneResult& r) {
  if (r.retime_failed) {
    return {{"picked", nullptr},
            {"seconds", r.retime_seconds},
            {"reason", "every candidate failed when timed again"}};
  }
  if (!r.pick) return nullptr;
  const Pick& pick = *r.pick;
  nlohmann::json j;
  j["rounds"] = pick.rounds;
  j["seconds"] = r.retime_seconds;
  j["picked"] = pick.strategy;
  auto gflops = [&](double seconds) { return seconds > 0 ? r.flops / seconds * 1e-9 : 0.0; };
  for (const PickCandidate& c : pick.candidates) {
    nlohmann::json cj;
    cj["strategy"] = c.strategy;
    cj["tuned_gflops"] = gflops(c.tuned_median);
    cj["gflops"] = gflops(c.median);
    std::vector<double> rounds;
    for (double s : c.round_medians) rounds.push_back(gflops(s));
    cj["gflops_rounds"] = rounds;
    j["candidates"].push_back(cj);
  }
  return j;
}

namespace {

void show_progress(const TuneProgress& p, bool tty) {
  if (p.retime_rounds > 0) {
    std::string text = fmt::format("re-timing the fastest configurations: round {}/{}, {} elapsed",
                                   p.retime_round, p.retime_rounds, clock_text(p.elapsed_s));
    // On a terminal the bar's line is redrawn, padded over the longer trial line.
    if (tty) {
      std::cerr << fmt::format("\r[{}] {:<100}", std::string(30, '#'), text) << std::flush;
    } else {
      std::cerr << "tune: " << text << "\n";
    }
    return;
  }
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
  measure.as_in_model = args.timing == "in-model";
  TuneResult r;
  try {
    r = tune(args.workload, args.params, measure, args.db,
             [&](const TuneProgress& p) { show_progress(p, tty); });
  } catch (const Error& e) {
    if (tty) std::cerr << "\n";
    print_error(e.what());
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
    j["best_tuned_gflops"] = r.best_tuned_gflops;
    j["best_config"] = r.best_config;
    j["best_strategy"] = r.best_strategy;
    j["seconds"] = r.seconds;
    j["tuner_seconds"] = r.tuner_seconds;
    j["measure_seconds"] = r.measure_seconds;
    j["best_curve"] = r.best_curve;
    j["stopped_early"] = r.stopped_early;
    j["transfer"] = transfer_json(r.transfer);
    j["retime"] = retime_json(r);
    std::cout << j.dump(2) << "\n";
  } else {
    std::cout << fmt::format(
        "workload  {}\ntrials    {} ({} resumed from {}), {} errors{}\n", r.workload, r.trials,
        r.resumed, args.db, r.errors,
        r.stopped_early
            ? fmt::format(", stopped after {} without a better best", args.params.early_stop)
            : "");
    std::cout << fmt::format("best      {:.2f} GFLOP/s", r.best_gflops);
    if (r.pick) {
      size_t rank = 0;
      while (rank < r.pick->candidates.size() &&
             r.pick->candidates[rank].strategy != r.pick->strategy)
        ++rank;
      std::cout << fmt::format(
          " (median of {} rounds re-timing the {} fastest together: the {} in tuning; "
          "fastest single measurement {:.2f})",
          r.pick->rounds, r.pick->candidates.size(),
          rank == 0 ? std::string("fastest") : fmt::format("#{} fastest", rank + 1),
          r.best_tuned_gflops);
    }
    std::cout << fmt::format("\nconfig    {}\nstrategy  {}\n", r.best_config, r.best_strategy);
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

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

int bench_command(const BenchArgs& args) {
  try {
    Workload w = parse_workload(args.workload);
    OpInstance op = instantiate(w);
    RecordDb db = RecordDb::open(args.db, RecordDb::Mode::kReadOnly);
    // Records timed alone first, else those compile timed as in a model.
    std::optional<Record> best = db.best(w.text(), detect_target().key());
    if (!best) best = db.best(w.text(), detect_target().in_model().key());
    if (!best) {
      print_error(
          fmt::format("no successful record of {} on this machine in {} (run tessera tune "
                      "first)",
                      w.text(), args.db));
      return 2;
    }
    RewriteResult<Program> program = parse_strategy(best->result.strategy)(op.program);
    if (!program) throw Error("the recorded strategy no longer applies: " + program.message());
    if (args.threads > 0) set_num_threads(args.threads);
    // Rounds alternate tessera's kernel and the libraries: a machine that slows down for a while
    // then slows both, and the spread of the per-round ratios shows how far to trust the median.
    // tessera's kernel runs first in a round, so that no library thread still spinning after its
    // call can take a core from it.
    EvaluateParams params;
    params.threads = args.threads;
    params.repeat = args.repeat;
    Evaluation ev;
    std::vector<double> tessera_gflops, ratios;
    std::vector<std::vector<double>> library_gflops;
    std::vector<Baseline> baselines;
    for (int round = 0; round < args.rounds; ++round) {
      params.check = round == 0;
      Evaluation e = evaluate(op, program.program(), params);
      if (round == 0) ev = e;
      tessera_gflops.push_back(e.gflops);
      std::vector<Baseline> b = library_baselines(op, w, args.repeat);
      if (round == 0) {
        baselines = b;
        library_gflops.resize(b.size());
      }
      for (size_t i = 0; i < b.size() && i < library_gflops.size(); ++i)
        library_gflops[i].push_back(b[i].gflops);
      if (const Baseline* primary = primary_baseline(b))
        ratios.push_back(e.gflops / primary->gflops);
    }
    ev.gflops = median_of(tessera_gflops);
    ev.timing.median = op.flops / (ev.gflops * 1e9);
    for (size_t i = 0; i < baselines.size(); ++i)
      baselines[i].gflops = median_of(library_gflops[i]);
    const Baseline* primary = primary_baseline(baselines);
    double ratio = ratios.empty() ? 0 : median_of(ratios);
    auto [ratio_min, ratio_max] =
        ratios.empty() ? std::pair<double, double>{0, 0}
                       : std::pair<double, double>{*std::min_element(ratios.begin(), ratios.end()),
                                                   *std::max_element(ratios.begin(), ratios.end())};
    if (args.json) {
      nlohmann::json j;
      j["workload"] = w.text();
      j["strategy"] = best->result.strategy;
      j["gflops"] = ev.gflops;
      j["flops"] = op.flops;
      j["seconds"] = ev.timing.median;
      j["correct"] = ev.correct;
      j["threads"] = ev.threads;
      j["rounds"] = args.rounds;
      j["gflops_rounds"] = tessera_gflops;
      if (primary) {
        j["baseline"] = primary->name;
        j["baseline_gflops"] = primary->gflops;
        j["ratio"] = ratio;
        j["ratio_min"] = ratio_min;
        j["ratio_max"] = ratio_max;
      }
      for (size_t i = 0; i < baselines.size(); ++i) {
        const Baseline& b = baselines[i];
        j["baselines"].push_back({{"name", b.name},
                                  {"gflops", b.gflops},
                                  {"gflops_rounds", library_gflops[i]},
                                  {"same_layout", b.same_layout},
                                  {"own_layouts", b.own_layouts}});
      }
      std::cout << j.dump(2) << "\n";
    } else {
      std::cout << fmt::format("workload  {}\nstrategy  {}\n", w.text(), best->result.strategy);
      std::cout << fmt::format(
          "tessera   {:.2f} GFLOP/s ({} threads, median of {} rounds), correct: {}\n", ev.gflops,
          ev.threads, args.rounds, ev.correct ? "yes" : "NO");
      for (const Baseline& b : baselines) {
        std::cout << fmt::format("{:<9} {:.2f} GFLOP/s, tessera/library = {:.2f}{}\n", "library",
                                 b.gflops, ev.gflops / b.gflops,
                                 &b == primary
                                     ? fmt::format(" (the ratio reported: median of the rounds' "
                                                   "ratios {:.2f}, range {:.2f}-{:.2f})",
                                                   ratio, ratio_min, ratio_max)
                                     : "")
                  << "          " << b.name << "\n";
      }
      if (baselines.empty()) std::cout << "library   none linked for " << w.op << " yet\n";
    }
    return ev.correct ? 0 : 1;
  } catch (const Error& e) {
    print_error(e.what());
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
      ->check(positive_number());
  c.tune
      ->add_option("--tuner", t.params.tuner,
                   "xgb (rank loss), xgb-reg, treegru (rank loss), treegru-reg, random, grid or ga")
      ->check(CLI::IsMember(tuner_names()));
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
  c.tune
      ->add_option(
          "--pretrained", t.params.pretrained,
          "A pretrained cost model (tessera pretrain) to transfer from, in place of the "
          "DB's records of other workloads (default with the xgb tuner and relation features: "
          "the model shipped for this ISA, when the DB holds no record of this machine; "
          "none: not that either)")
      ->check(nonempty_path());
  c.tune
      ->add_option("--transfer-n0", t.params.transfer_n0,
                   "Local records at which the global model's weight has halved: w = 1 / (1 + "
                   "n / n0)")
      ->check(positive_number());
  c.tune
      ->add_option("--transfer-epsilon", t.params.transfer_epsilon,
                   "Extra random share of each batch while the global model dominates: epsilon + "
                   "this * w (default 0.25; 0 explores no more than without transfer)")
      ->check(CLI::Range(0.0, 1.0));
  c.tune->add_option("--batch", t.params.batch_size, "Measurements between model updates")
      ->check(positive_number());
  c.tune
      ->add_option("--early-stop", t.params.early_stop,
                   "Stop after this many trials without a better best, checked after each batch "
                   "(0, the default: run every trial)")
      ->check(non_negative_number());
  c.tune
      ->add_option_function<std::string>(
          "--first", [&t](const std::string& v) { t.params.start_from_default = v == "default"; },
          "default (the default): the first trial is the default configuration, so that tuning "
          "never ends slower than not tuning; tuner: the tuner's own proposals from the first "
          "trial, as AutoTVM's tuning curves start")
      ->check(CLI::IsMember({"default", "tuner"}));
  add_retime_options(c.tune, t.params);
  c.tune
      ->add_option("--timing", t.timing,
                   "How candidates are timed: alone (the default: back to back, operands in "
                   "cache) or in-model (as compile tunes a model's kernels; filed apart)")
      ->check(CLI::IsMember({"alone", "in-model"}));
  c.tune->add_option("--db", t.db, "Records DB (SQLite; created on first use)")->check(db_path());
  c.tune
      ->add_option("--threads,-t", t.threads,
                   "Threads of the measured kernels (0, the default: all cores)")
      ->check(thread_count());
  c.tune->add_option("--seed", t.params.seed, "Seed of every random choice")->check(seed_number());
  c.tune->add_flag("--json", t.json, "Print the result as one JSON object");

  BenchArgs& b = *c.bench_args;
  c.bench = app.add_subcommand(
      "bench", "Measure the best recorded configuration against OpenBLAS and oneDNN");
  c.bench->add_option("workload", b.workload, "op:key=value,...")->required();
  c.bench->add_option("--db", b.db, "Records DB")->check(db_path());
  c.bench->add_option("--threads,-t", b.threads, "Threads (0, the default: all cores)")
      ->check(thread_count());
  c.bench->add_option("--repeat", b.repeat, "Timed repeats (median reported)")
      ->check(positive_number());
  c.bench
      ->add_option("--rounds", b.rounds,
                   "Rounds timing tessera and the libraries alternately (medians reported)")
      ->check(positive_number());
  c.bench->add_flag("--json", b.json, "Print the result as JSON");
  return c;
}

std::optional<int> run_tune_commands(const TuneCommands& c) {
  if (c.tune->parsed()) return tune_command(*c.tune_args);
  if (c.bench->parsed()) return bench_command(*c.bench_args);
  return std::nullopt;
}

}  // namespace tessera
