#include "graph/choose_schedule.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <set>

#include "measure/target.h"
#include "ops/in_model.h"
#include "ops/templates.h"
#include "runtime/module.h"
#include "schedule/rules.h"
#include "schedule/stage_tools.h"
#include "schedule/strategy_parser.h"

namespace tessera::graph {

// Every knob at its first value, which the templates order as their plainest choice, except
// that the outer loop runs in parallel where a `parallel` knob offers it: the fallback for a
// kernel whose default configuration (ops/templates.h) does not apply.
Config first_values_config(const ConfigSpace& space, bool parallel) {
  Config c = space.from_index(0);
  if (!parallel) return c;
  for (size_t k = 0; k < space.knobs().size(); ++k) {
    const Knob& knob = space.knobs()[k];
    bool is_parallel =
        knob.name == "parallel" || (knob.name.size() > 9 && knob.name.ends_with(".parallel"));
    if (!is_parallel) continue;
    for (size_t v = 0; v < knob.labels.size(); ++v)
      if (knob.labels[v] == "outer") c.choice[k] = static_cast<int>(v);
  }
  return c;
}

std::optional<ProgramStrategy> reversed_order(const Program& program, int threads) {
  const ForNode* rows = find_loop(program, "j.outer");
  if (!rows) return std::nullopt;
  if (rows->for_kind == ForKind::kSerial) return reverse("j.outer");
  if (rows->for_kind != ForKind::kParallel) return std::nullopt;
  // OpenMP's static schedule gives each thread one block of the split: reversed inside, every
  // thread still reads its own rows, the ones in its own L2.
  const int64_t share = (rows->extent + threads - 1) / std::max(threads, 1);
  return seq(split("j.outer", share), reverse("j.outer.inner"));
}

namespace {

// The records a model's kernels run: those timed as in a model where a workload has any, else
// those timed alone.
std::vector<std::string> model_target_keys() {
  const Target alone = detect_target();
  return {alone.in_model().key(), alone.key()};
}

}  // namespace

ScheduleChooser::ScheduleChooser(const ExecutorParams& params) : params_(params) {
  if (!params.db.empty()) {
    db_.emplace(RecordDb::open(params.db, RecordDb::Mode::kReadOnly));
    target_keys_ = model_target_keys();
  }
}

ChosenSchedule ScheduleChooser::choose(const std::string& key) const {
  Workload w = parse_workload(key);
  OpInstance op = instantiate(w);
  KernelInfo info{key, "plain", "", 0, ""};
  Program program = op.program;
  std::optional<std::string> strategy;
  if (auto chosen = params_.strategies.find(key); chosen != params_.strategies.end()) {
    strategy = chosen->second;
  } else if (db_ && !params_.skip_records.count(key)) {
    for (const std::string& target : target_keys_) {
      if (std::optional<Record> best = db_->best(key, target)) {
        strategy = best->result.strategy;
        break;
      }
    }
  }
  if (strategy) {
    RewriteResult<Program> r = parse_strategy(*strategy)(op.program);
    if (r) {
      program = r.program();
      info.schedule = "db";
      info.strategy = *strategy;
    }
  }
  if (info.schedule == "plain") {
    ConfigSpace space = space_for(w);
    int threads = default_threads(w, op, num_threads());
    bool parallel = threads > 1;
    for (const Config& c :
         {default_config(space, w, threads), first_values_config(space, parallel)}) {
      ProgramStrategy s = space.instantiate(c);
      RewriteResult<Program> r = s(op.program);
      if (!r) continue;
      program = r.program();
      info.schedule = "default";
      info.strategy = s.text();
      break;
    }
  }
  program = with_in_model_hints(w, std::move(program), &info.in_model);

  return {std::move(program), std::move(info)};
}

namespace {

// Per workload, the milliseconds of one use in the model (the median of `repeat` runs of every
// step in the model's order), lowered into `best` where smaller.
void lower_in_model_ms(const Executor& ex, int repeat, std::map<std::string, double>& best) {
  std::vector<double> ms = ex.profile(repeat);
  for (size_t i = 0; i < ms.size(); ++i) {
    const KernelInfo& k = ex.kernels()[i];
    double per_use = ms[i] / std::max(k.uses, 1);
    auto [it, fresh] = best.emplace(k.workload, per_use);
    if (!fresh) it->second = std::min(it->second, per_use);
  }
}

// Whole runs of the model, `base` and `other` in turn: the median of other's time / base's over
// the pairs, as many as fit in about two seconds (at least 9, at most 41).
double whole_run_ratio(Executor& base, Executor& other) {
  auto time_run = [](Executor& ex) {
    auto start = std::chrono::steady_clock::now();
    ex.run();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  time_run(base), time_run(other);  // first runs touch every page
  const double pair_s = time_run(base) + time_run(other);
  const int pairs = std::clamp(static_cast<int>(2.0 / std::max(pair_s, 1e-6)), 9, 41);
  std::vector<double> ratios;
  for (int i = 0; i < pairs; ++i) {
    // Alternate which goes first, so that neither always runs after the other.
    double b, o;
    if (i % 2 == 0) {
      b = time_run(base);
      o = time_run(other);
    } else {
      o = time_run(other);
      b = time_run(base);
    }
    ratios.push_back(o / b);
  }
  std::nth_element(ratios.begin(), ratios.begin() + pairs / 2, ratios.end());
  return ratios[pairs / 2];
}

// The other configurations re-timed with each workload's best (its pick's candidates), fastest
// first, at most `most` of them.
std::map<std::string, std::vector<std::string>> runners_up(const Executor& with_records,
                                                           const std::string& db_path,
                                                           size_t most) {
  RecordDb db = RecordDb::open(db_path, RecordDb::Mode::kReadOnly);
  const std::vector<std::string> targets = model_target_keys();
  std::map<std::string, std::vector<std::string>> out;
  for (const KernelInfo& k : with_records.kernels()) {
    if (k.schedule != "db") continue;
    std::optional<Pick> pick;
    for (const std::string& target : targets)
      if (!pick) pick = db.current_pick(k.workload, target);
    if (!pick) continue;
    std::vector<PickCandidate> c = pick->candidates;
    std::stable_sort(c.begin(), c.end(), [](const PickCandidate& a, const PickCandidate& b) {
      return a.median < b.median;
    });
    for (const PickCandidate& candidate : c) {
      if (candidate.strategy == k.strategy || !std::isfinite(candidate.median) ||
          candidate.median <= 0 || out[k.workload].size() >= most)
        continue;
      out[k.workload].push_back(candidate.strategy);
    }
  }
  return out;
}

// Tuning times each kernel alone in a worker; inside the model its inputs, weights and threads
// are in another state, and a configuration that won alone can lose there (ResNet-18's tuned
// 7x7x512 layers: 2.2 ms alone, 3.0 in the model against 2.2 for the default; its default 28x28
// Winograd product ran 2.4x its time alone there, the tuned one 1.5x). So the model is profiled
// with its tuned kernels, with its default ones and with each workload's runners-up of the
// re-timing (all workloads at their n-th runner-up in one profile), and each workload keeps
// whichever ran fastest in the model.
}  // namespace

Executor choose_in_model(const Graph& g, ExecutorParams& params, Executor with_records,
                         const std::function<void(const std::string&)>& log) {
  bool any_tuned = false;
  for (const KernelInfo& k : with_records.kernels()) any_tuned |= k.schedule == "db";
  if (!any_tuned) return with_records;
  ExecutorParams plain = params;
  plain.db.clear();
  Executor defaults = Executor::compile(g, plain);
  std::map<std::string, std::vector<std::string>> others = runners_up(with_records, params.db, 4);
  size_t rounds = 0;
  for (const auto& [w, list] : others) rounds = std::max(rounds, list.size());
  std::vector<ExecutorParams> trial_params;
  std::vector<Executor> trials;
  for (size_t r = 0; r < rounds; ++r) {
    ExecutorParams trial = params;
    for (const auto& [w, list] : others)
      if (r < list.size()) trial.strategies[w] = list[r];
    trials.push_back(Executor::compile(g, trial));
    trial_params.push_back(std::move(trial));
  }
  // The profiles in turn, each round through all of them: the machine's speed drifts by tens of
  // percent over minutes on a shared host, and one profile after the other read the drift as a
  // difference between configurations.
  std::map<std::string, double> best_ms, default_ms;
  std::vector<std::map<std::string, double>> trial_ms(trials.size());
  for (int round = 0; round < 3; ++round) {
    lower_in_model_ms(with_records, 7, best_ms);
    lower_in_model_ms(defaults, 7, default_ms);
    for (size_t r = 0; r < trials.size(); ++r) lower_in_model_ms(trials[r], 7, trial_ms[r]);
  }
  std::map<std::string, std::pair<double, std::string>> fastest;  // ms, strategy ("": the best)
  for (const auto& [w, ms] : best_ms) fastest[w] = {ms, ""};
  for (size_t r = 0; r < trials.size(); ++r) {
    const std::map<std::string, double>& ms = trial_ms[r];
    for (const auto& [w, strategy] : trial_params[r].strategies) {
      auto it = fastest.find(w);
      if (it != fastest.end() && ms.count(w) && ms.at(w) < it->second.first)
        it->second = {ms.at(w), strategy};
    }
  }
  trials.clear();  // their weights and arenas, before the chosen model is built
  std::set<std::string> tuned;
  for (const KernelInfo& k : with_records.kernels()) {
    if (k.schedule != "db") continue;
    tuned.insert(k.workload);
    double t = best_ms.at(k.workload), d = default_ms.at(k.workload);
    const auto& [fast_ms, strategy] = fastest.at(k.workload);
    if (d < fast_ms) {
      params.skip_records.insert(k.workload);
      if (log)
        log(fmt::format(
            "in the model the default configuration of {} ran {:.3f} ms against the tuned "
            "{:.3f} ms: it keeps the default",
            k.workload, d, t));
    } else if (!strategy.empty()) {
      params.strategies[k.workload] = strategy;
      if (log)
        log(fmt::format(
            "in the model a runner-up of the re-timing of {} ran {:.3f} ms against the best's "
            "{:.3f} ms: it takes the runner-up",
            k.workload, fast_ms, t));
    }
  }
  // The kernels' choices one by one do not add up to the model's time: a kernel leaves the
  // caches and its threads' shares of the data to the next one. So the chosen model runs whole
  // against the untuned one, and where it is not faster the untuned one is kept (MobileNet-v2
  // after 300 trials ran 4% slower whole than untuned, its 30 tuned kernels each faster in the
  // profile; AMD EPYC, Zen 2, AVX2).
  if (params.skip_records.size() == tuned.size()) return defaults;
  Executor chosen = params.skip_records.empty() && params.strategies.empty()
                        ? std::move(with_records)
                        : Executor::compile(g, params);
  const double ratio = whole_run_ratio(defaults, chosen);
  if (ratio < 1.0) {
    if (log)
      log(fmt::format("the model with its tuned kernels ran {:.3f} of its untuned time", ratio));
    return chosen;
  }
  params.skip_records = tuned;
  params.strategies.clear();
  if (log)
    log(fmt::format(
        "the model with its tuned kernels ran {:.3f} of its untuned time whole: it keeps every "
        "default configuration",
        ratio));
  return defaults;
}

Executor compile_model(const Graph& g, ExecutorParams& params, bool in_model_check,
                       const std::function<void(const std::string&)>& log) {
  Executor ex = Executor::compile(g, params);
  if (params.db.empty() || !in_model_check) return ex;
  return choose_in_model(g, params, std::move(ex), log);
}

}  // namespace tessera::graph
