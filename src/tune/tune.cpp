#include "tune/tune.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <unordered_map>

#include "model/transfer_model.h"
#include "model/treegru_model.h"
#include "ops/templates.h"
#include "runtime/module.h"
#include "te/error.h"
#include "tune/model_tuner.h"
#include "tune/shipped_model.h"

namespace tessera {

namespace {

// Repeats spread by more than this (standard deviation over mean) are noise, not the kernel.
constexpr double kNoisySpread = 0.10;

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
}  // namespace

void warn_to_stderr(const std::string& message) {
  std::cerr << "tessera: warning: " << message << "\n";
}

TuneSession::TuneSession(const std::string& workload_text, const TuneParams& params,
                         Measurer& measurer, RecordDb* db, bool transfer)
    : workload_(parse_workload(workload_text)),
      params_(params),
      measurer_(measurer),
      db_(db),
      started_(now_s()) {
  OpInstance op = instantiate(workload_);
  flops_ = op.flops;
  const int threads = measurer_.runner().params().threads;
  default_threads_ = default_threads(workload_, op, threads > 0 ? threads : num_threads());
  space_ = std::make_unique<ConfigSpace>(space_for(workload_));
  tuner_ = make_tuner(*space_, op, params_, transfer ? &transfer_ : nullptr);
  result_.workload = workload_.text();
  result_.flops = flops_;

  // Resume: configurations already measured on this machine are learned from, not re-measured.
  if (db_) {
    RecordQuery q;
    q.workload = result_.workload;
    q.target_key = measurer_.target().key();
    std::vector<Record> old = db_->records(q);
    if (!old.empty()) {
      std::unordered_map<std::string, uint64_t> by_text = strategy_index(*space_);
      std::vector<Config> configs;
      std::vector<double> gflops;
      for (const Record& r : old) {
        auto it = by_text.find(r.result.strategy);
        if (it == by_text.end()) continue;
        configs.push_back(space_->from_index(it->second));
        gflops.push_back(r.result.error == ErrorKind::kOk ? r.result.gflops() : 0.0);
        if (gflops.back() > 0)
          note_success(r.result.strategy, r.result.timing.median, space_->describe(configs.back()));
      }
      result_.resumed = static_cast<int>(configs.size());
      if (!configs.empty()) tuner_->observe(configs, gflops);
      resume_best(q.target_key);
    }
  }
  result_.seconds = now_s() - started_;
  result_.tuner_seconds = tuner_->overhead_seconds();
}

TuneSession::~TuneSession() = default;

void TuneSession::note_success(const std::string& strategy, double seconds,
                               const std::string& config) {
  auto [it, fresh] = fastest_.emplace(strategy, seconds);
  if (!fresh) it->second = std::min(it->second, seconds);
  config_text_.emplace(strategy, config);
  double gflops = flops_ / seconds * 1e-9;
  // A pick stays the best until a measurement beats its median, as in RecordDb::best.
  if (gflops > result_.best_gflops) {
    result_.best_gflops = gflops;
    result_.best_strategy = strategy;
    result_.best_config = config;
  }
  result_.best_tuned_gflops = std::max(result_.best_tuned_gflops, gflops);
}

void TuneSession::resume_best(const std::string& target_key) {
  // The best so far is what `db best` would answer: an earlier run's standing pick at its
  // re-timed median rather than the fastest single record it ranked below.
  std::optional<Record> best = db_->best(result_.workload, target_key);
  if (!best || !config_text_.count(best->result.strategy)) return;
  std::optional<Pick> pick = db_->current_pick(result_.workload, target_key);
  result_.best_gflops = flops_ / (pick ? pick->median : best->result.timing.median) * 1e-9;
  result_.best_strategy = best->result.strategy;
  result_.best_config = config_text_[best->result.strategy];
}

void TuneSession::retime(const RetimeProgressFn& progress, const WarnFn& warn) {
  if (params_.retime_top <= 0 || fastest_.empty()) return;
  std::vector<std::pair<std::string, double>> top(fastest_.begin(), fastest_.end());
  std::sort(top.begin(), top.end(), [](const auto& a, const auto& b) {
    return a.second != b.second ? a.second < b.second : a.first < b.first;
  });
  if (top.size() > static_cast<size_t>(params_.retime_top))
    top.resize(static_cast<size_t>(params_.retime_top));
  double start = now_s();
  RetimeParams rp{params_.retime_rounds, params_.seed};
  std::optional<Pick> pick = tessera::retime(result_.workload, top, measurer_, rp, progress);
  result_.retime_seconds += now_s() - start;
  result_.measure_seconds += now_s() - start;
  result_.seconds = now_s() - started_;
  if (!pick) {
    result_.retime_failed = true;
    return;
  }
  if (db_) {
    // Every trial is already recorded: a DB that refuses the pick costs the pick, not the run.
    try {
      db_->add_pick(*pick);
    } catch (const Error& e) {
      (warn ? warn
            : WarnFn(warn_to_stderr))(fmt::format("the pick was not recorded: {}", e.what()));
    }
  }
  result_.best_gflops = flops_ / pick->median * 1e-9;
  result_.best_strategy = pick->strategy;
  result_.best_config = config_text_[pick->strategy];
  result_.pick = std::move(pick);
}

const CostModel* TuneSession::global() const {
  return transfer_ ? transfer_->global() : nullptr;
}

void TuneSession::set_global(std::shared_ptr<const CostModel> global, const TransferInfo& info) {
  if (!transfer_) return;
  bool informed = global != nullptr;
  transfer_->set_global(std::move(global));
  auto* model_tuner = static_cast<ModelTuner*>(tuner_.get());  // transfer_ implies a ModelTuner
  model_tuner->refit();
  if (informed) model_tuner->use_model_from_start();
  result_.transfer = info;
  result_.transfer.used = informed;
  result_.tuner_seconds = tuner_->overhead_seconds();
}

int TuneSession::step(int n) {
  // The first trial is the default configuration (what an untuned model runs), so that tuning
  // never ends slower than not tuning: a short budget's learned picks can all be worse than it.
  std::optional<Config> seed;
  if (!default_tried_ && n > 0 && params_.start_from_default) {
    default_tried_ = true;
    try {
      // As the graph executor runs it untuned (small kernels on one thread).
      Config c = default_config(*space_, workload_, default_threads_);
      if (!tuner_->visited(c)) seed = c;
    } catch (const Error&) {
      // No default for this space: the tuner's own proposals only.
    }
  }
  std::vector<Config> batch = tuner_->propose(seed ? n - 1 : n);
  if (seed) {
    uint64_t index = space_->to_index(*seed);
    std::erase_if(batch, [&](const Config& c) { return space_->to_index(c) == index; });
    batch.insert(batch.begin(), *seed);
  }
  if (batch.empty()) return 0;  // the space is exhausted
  std::vector<MeasureInput> inputs;
  for (const Config& c : batch)
    inputs.push_back({result_.workload, space_->instantiate(c).text(), std::nullopt});
  double measure_start = now_s();
  // Each trial is committed as it finishes: a killed run loses the trials in flight, not the
  // batch (64 trials of a 1024 matmul are two minutes of measuring).
  Measurer::ResultFn keep = nullptr;
  if (db_) keep = [&](size_t, const MeasureResult& r) { db_->append(measurer_.target(), {r}); };
  std::vector<MeasureResult> measured = measurer_.measure(inputs, nullptr, keep);
  result_.measure_seconds += now_s() - measure_start;
  std::vector<double> gflops;
  for (size_t i = 0; i < measured.size(); ++i) {
    bool ok = measured[i].error == ErrorKind::kOk;
    gflops.push_back(ok ? measured[i].gflops() : 0.0);
    result_.errors += !ok;
    if (gflops.back() > 0) {
      note_success(measured[i].strategy, measured[i].timing.median, space_->describe(batch[i]));
      const TimingResult& t = measured[i].timing;
      ++result_.timed_trials;
      result_.noisy_trials += t.mean > 0 && t.std > kNoisySpread * t.mean;
    }
    ++result_.trials;
    result_.best_curve.push_back(result_.best_gflops);
  }
  tuner_->observe(batch, gflops);
  result_.seconds = now_s() - started_;
  result_.tuner_seconds = tuner_->overhead_seconds();
  return static_cast<int>(batch.size());
}

std::optional<double> TuneSession::outlook() {
  std::optional<double> forecast = tuner_->outlook();
  result_.tuner_seconds = tuner_->overhead_seconds();
  return forecast;
}

namespace {

// params.pretrained, an XGBoost model, checked against the tuner and features.
std::shared_ptr<GlobalModel> load_pretrained_for(const TuneParams& params) {
  if (params.transfer == "off")
    throw_error("--pretrained and --transfer off contradict each other");
  if (!is_xgb_tuner(params.tuner))
    throw_error("--pretrained needs an xgb tuner (xgb, xgb-reg), not {}", params.tuner);
  std::shared_ptr<GlobalModel> g = GlobalModel::load_pretrained(params.pretrained, params.seed);
  if (g->features() != params.features)
    throw_error("{} was trained on {} features: tune with --features {}", params.pretrained,
                g->features(), g->features());
  const auto objective = params.tuner == "xgb" ? XGBoostParams::Objective::kRank
                                               : XGBoostParams::Objective::kRegression;
  if (g->objective() != objective)
    throw_error("{} was trained for the {} tuner, not {}", params.pretrained,
                g->objective() == XGBoostParams::Objective::kRank ? "xgb" : "xgb-reg",
                params.tuner);
  return g;
}

TransferInfo pretrained_info(const GlobalModel& g, const std::string& path, bool shipped) {
  TransferInfo info;
  info.used = true;
  info.pretrained = true;
  info.shipped = shipped;
  info.records = g.records();
  info.workloads = g.workloads().size();
  info.model_path = path;
  return info;
}

}  // namespace

std::shared_ptr<GlobalModel> open_pretrained(const TuneParams& params) {
  if (params.pretrained.empty() || params.pretrained == kNoPretrained) return nullptr;
  if (is_treegru_tuner(params.tuner)) {
    load_pretrained_treegru(params);  // only checked: each tuner loads its own copy to train
    return nullptr;
  }
  return load_pretrained_for(params);
}

std::shared_ptr<GlobalModel> start_pretrained(const TuneParams& params,
                                              std::shared_ptr<GlobalModel> given, RecordDb* db,
                                              const std::string& target_key, const WarnFn& warn,
                                              TransferInfo* info) {
  if (given) {
    if (warn && given->target_key() != target_key)
      warn(fmt::format("{} was trained on another machine ({}); this one is {}", params.pretrained,
                       given->target_key(), target_key));
    *info = pretrained_info(*given, params.pretrained, /*shipped=*/false);
    return given;
  }
  if (!params.pretrained.empty() && params.pretrained != kNoPretrained) {
    // A TreeGRU: the tuner loads it as its own model (make_tuner), no global model to combine.
    *info = TransferInfo{};
    info->used = info->pretrained = true;
    info->model_path = params.pretrained;
    return nullptr;
  }
  std::optional<std::string> shipped = default_pretrained(params, db, target_key);
  if (!shipped) return nullptr;
  TuneParams with_shipped = params;
  with_shipped.pretrained = *shipped;
  try {
    // Trained on another machine of this ISA by design: that is not worth a warning.
    std::shared_ptr<GlobalModel> g = load_pretrained_for(with_shipped);
    *info = pretrained_info(*g, *shipped, /*shipped=*/true);
    return g;
  } catch (const Error& e) {
    if (warn)
      warn(fmt::format("cannot use the shipped cost model: {}; tuning without it", e.what()));
    return nullptr;
  }
}

std::shared_ptr<GlobalModel> prepare_transfer(const std::string& workload, const TuneParams& params,
                                              std::shared_ptr<GlobalModel> given,
                                              const std::string& db_path, RecordDb* db,
                                              const std::string& target_key, const WarnFn& warn,
                                              TransferInfo* info) {
  *info = TransferInfo{};
  if (params.transfer != "on" && params.transfer != "off" && params.transfer != "auto")
    throw_error("--transfer must be on, off or auto, not '{}'", params.transfer);
  double start = now_s();
  if (std::shared_ptr<GlobalModel> g =
          start_pretrained(params, std::move(given), db, target_key, warn, info)) {
    info->seconds = now_s() - start;
    return g;
  }
  if (info->used) return nullptr;  // a pretrained TreeGRU
  if (params.transfer == "off") {
    info->reason = "--transfer off";
    return nullptr;
  }
  if (!is_xgb_tuner(params.tuner)) {
    if (params.transfer == "on")
      throw_error("--transfer on needs an xgb tuner (xgb, xgb-reg), not {}", params.tuner);
    info->reason = is_treegru_tuner(params.tuner)
                       ? "the TreeGRU learns from this workload's trials only"
                       : "the " + params.tuner + " tuner has no cost model";
    return nullptr;
  }
  if (!db) {
    info->reason = "no records DB";
    if (params.transfer == "on") throw_error("--transfer on needs a records DB");
    return nullptr;
  }
  if (params.transfer == "auto") {
    // Nothing to transfer from without another workload: no global model to fit or save.
    RecordQuery q;
    q.target_key = target_key;
    bool others = false;
    for (const Record& r : db->records(q)) others |= r.result.workload != workload;
    if (!others) {
      info->reason = "no records of other workloads in the DB for this target";
      return nullptr;
    }
  }
  std::string layout;
  if (params.features == "knob") layout = knob_layout(space_for(parse_workload(workload)));
  auto objective = params.tuner == "xgb" ? XGBoostParams::Objective::kRank
                                         : XGBoostParams::Objective::kRegression;
  auto global =
      std::make_shared<GlobalModel>(db_path, params.features, objective, layout, params.seed);
  start = now_s();
  global->refresh(*db, target_key, warn);
  info->seconds = now_s() - start;
  info->records = global->records();
  info->workloads = global->workloads().size();
  info->rebuilt = global->rebuilt();
  info->model_path = global->model_path();
  if (!global->model()) {
    info->reason = "no usable records in the DB for this target";
    return nullptr;
  }
  if (params.transfer == "auto" && !global->knows_other_than(workload)) {
    info->reason = "no records of other workloads in the DB for this target";
    return nullptr;
  }
  info->used = true;
  return global;
}

std::optional<std::string> busy_machine_warning(const TuneResult& r) {
  if (r.timed_trials < 8 || 4 * r.noisy_trials < r.timed_trials) return std::nullopt;
  return fmt::format(
      "{}: the repeats of {} of {} trials spread by more than {:.0f}%: the machine looks busy "
      "(other processes on its cores), and these times rank candidates by their load; tune on "
      "an idle machine, or pin the measurement with --cpus",
      r.workload, r.noisy_trials, r.timed_trials, kNoisySpread * 100);
}

int trials_without_gain(const std::vector<double>& best_curve) {
  double before = 0;
  int since = 0;
  for (double best : best_curve) {
    since = best > before ? 0 : since + 1;
    before = std::max(before, best);
  }
  // A curve that never rose above zero found nothing at all: every trial counts.
  return before > 0 ? since : static_cast<int>(best_curve.size());
}

TuneResult tune(const std::string& workload_text, const TuneParams& params,
                const MeasureParams& measure_params, const std::string& db_path,
                const TuneProgressFn& progress, const WarnFn& warn) {
  WarnFn say = warn ? warn : WarnFn(warn_to_stderr);
  double start = now_s();
  if (params.retime_top > 0 && params.retime_rounds <= 0)
    throw_error("--retime-rounds must be positive, not {}", params.retime_rounds);
  Workload workload = parse_workload(workload_text);
  check_tuner_names(params);
  // Before the DB is opened: a bad file must leave none behind.
  std::shared_ptr<GlobalModel> given = open_pretrained(params);
  Measurer measurer(measure_params);
  std::optional<RecordDb> db;
  if (!db_path.empty()) db.emplace(RecordDb::open(db_path, RecordDb::Mode::kReadWrite));

  TransferInfo info;
  std::shared_ptr<GlobalModel> global;
  global = prepare_transfer(workload.text(), params, std::move(given), db_path, db ? &*db : nullptr,
                            measurer.target().key(), say, &info);
  TuneSession session(workload.text(), params, measurer, db ? &*db : nullptr, global != nullptr);
  if (global) session.set_global(global->model(), info);
  TuneResult result = session.result();
  result.transfer = info;

  auto report = [&] {
    if (!progress) return;
    const TuneResult& r = session.result();
    TuneProgress p{r.trials, params.trials, r.errors, r.best_gflops, now_s() - start, 0, info};
    p.eta_s = p.trials_done ? p.elapsed_s / p.trials_done * (p.trials_total - p.trials_done) : 0;
    progress(p);
  };
  bool warned_busy = false;
  bool stopped_early = false;
  while (session.result().trials < params.trials) {
    int n = std::min(params.batch_size, params.trials - session.result().trials);
    if (session.step(n) == 0) break;
    report();
    if (params.early_stop > 0 &&
        trials_without_gain(session.result().best_curve) >= params.early_stop) {
      stopped_early = true;
      break;
    }
    if (std::optional<std::string> busy = busy_machine_warning(session.result());
        busy && !warned_busy) {
      say(*busy);
      warned_busy = true;
    }
  }
  session.retime(
      [&](int round, int rounds) {
        if (!progress) return;
        const TuneResult& r = session.result();
        TuneProgress p{r.trials, params.trials, r.errors, r.best_gflops, now_s() - start, 0, info};
        p.retime_round = round;
        p.retime_rounds = rounds;
        progress(p);
      },
      say);
  result = session.result();
  result.transfer = info;
  result.stopped_early = stopped_early;
  if (db && db->skipped_rows() > 0)
    say(
        fmt::format("{}: {} damaged records passed over (unreadable repeats, or a successful run "
                    "without a positive median)",
                    db_path, db->skipped_rows()));
  return result;
}

}  // namespace tessera
