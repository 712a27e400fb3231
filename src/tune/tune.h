/// The tuning loop: propose a batch, measure it in isolated workers, record it, learn, repeat.
/// TuneSession runs it one batch at a time (tune-all interleaves sessions); tune() runs one
/// session to its trial count.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "db/record_db.h"
#include "measure/measure.h"
#include "tune/global_model.h"
#include "tune/retime.h"
#include "tune/tuner.h"

namespace tessera {

/// What the run knows from other workloads (tune/global_model.h).
struct TransferInfo {
  bool used = false;        // the cost model is f_global + f_local
  size_t records = 0;       // records the global model was trained on
  size_t workloads = 0;     // their workloads
  bool rebuilt = false;     // the global model was refitted (not loaded) for this run
  std::string model_path;   // where it is saved
  double seconds = 0;       // spent loading or refitting it (features of the records included)
  std::string reason;       // why transfer is off, when it is
  bool pretrained = false;  // the global model is a pretrained one (--pretrained), not the DB's
  bool shipped = false;     // ... the one shipped with tessera for this ISA (tune/shipped_model.h)
};

struct TuneProgress {
  int trials_done = 0;
  int trials_total = 0;
  int errors = 0;
  double best_gflops = 0;
  double elapsed_s = 0;
  double eta_s = 0;
  TransferInfo transfer;
  int retime_round = 0;  // > 0 while re-timing: rounds done of retime_rounds
  int retime_rounds = 0;
};
using TuneProgressFn = std::function<void(const TuneProgress&)>;

struct TuneResult {
  std::string workload;
  double flops = 0;  // of one run of the workload
  int trials = 0;    // measured in this run
  int resumed = 0;   // records of earlier runs the tuner started from
  int errors = 0;
  /// Over this run and the resumed records: the pick's re-timed median when re-timed, otherwise
  /// the fastest single measurement.
  double best_gflops = 0;
  double best_tuned_gflops = 0;  // the fastest single measurement, re-timed or not
  std::optional<Pick> pick;      // the re-timing, when there was one
  double retime_seconds = 0;
  bool retime_failed = false;  // re-timed, but every candidate failed in half the rounds or more
  std::string best_strategy;
  std::string best_config;         // knob values
  std::vector<double> best_curve;  // best GFLOP/s after each trial of this run
  double seconds = 0;
  double tuner_seconds = 0;    // model fitting and search
  double measure_seconds = 0;  // building and running candidates
  TransferInfo transfer;
  /// Successful trials of this run, and those whose repeats spread more than 10% (their
  /// standard deviation over their mean): on an idle machine a few percent.
  int timed_trials = 0, noisy_trials = 0;
  bool stopped_early = false;  // TuneParams::early_stop trials passed without a better best
};

/// Trials at the end of `best_curve` (best GFLOP/s after each trial) since its last rise: 0 when
/// the last trial found a better best, the whole length when none ever did.
int trials_without_gain(const std::vector<double>& best_curve);

/// A warning when a quarter or more of at least 8 timed trials were noisy: the machine is busy
/// and the times rank candidates by the other processes' load; nothing otherwise.
std::optional<std::string> busy_machine_warning(const TuneResult& r);

class TransferModel;

/// One workload's tuning state, driven a batch at a time.
class TuneSession {
 public:
  /// Sets up the space and tuner of `workload` and resumes from `db`'s records of it on the
  /// measurer's target (db may be null). With `transfer`, an xgb tuner's model is a
  /// TransferModel waiting for set_global(). Throws tessera::Error on bad input.
  TuneSession(const std::string& workload, const TuneParams& params, Measurer& measurer,
              RecordDb* db, bool transfer = false);
  ~TuneSession();
  TuneSession(const TuneSession&) = delete;
  TuneSession& operator=(const TuneSession&) = delete;

  /// Proposes, measures, records and learns from up to n configurations; returns how many were
  /// measured (0: the space is exhausted).
  int step(int n);
  /// Gives the transfer model a (new) global model and refits the local one on top of it.
  /// Ignored when the tuner has no transfer model (random, grid, ga, or transfer off).
  void set_global(std::shared_ptr<const CostModel> global, const TransferInfo& info);
  /// Times the params' retime_top fastest configurations so far again, together (tune/
  /// retime.h), records the pick in the DB and makes it the result's best. Does nothing with
  /// retime_top 0 or without a correct configuration.
  /// A DB that cannot take the pick gets one warning through `warn` (default: stderr).
  void retime(const RetimeProgressFn& progress = nullptr, const WarnFn& warn = nullptr);
  /// The tuner's forecast for its next batch (Tuner::outlook): the best proposal's predicted
  /// throughput over the best measured one's; nullopt when its model cannot tell.
  std::optional<double> outlook();
  /// Whether the tuner can take a global model.
  bool accepts_global() const { return transfer_ != nullptr; }
  const CostModel* global() const;

  /// The result so far (seconds and tuner_seconds as of the last step).
  const TuneResult& result() const { return result_; }
  const ConfigSpace& space() const { return *space_; }
  const Workload& workload() const { return workload_; }
  double flops() const { return flops_; }

 private:
  Workload workload_;
  TuneParams params_;
  Measurer& measurer_;
  RecordDb* db_;
  std::unique_ptr<ConfigSpace> space_;
  std::unique_ptr<Tuner> tuner_;
  TransferModel* transfer_ = nullptr;
  double flops_ = 0;
  int default_threads_ = 1;  // what the default configuration runs on, as the executor runs it
  double started_ = 0;
  bool default_tried_ = false;  // the default configuration went into the first batch
  TuneResult result_;
  // Every correct configuration's fastest measurement (seconds) and knob values, for re-timing.
  std::unordered_map<std::string, double> fastest_;
  std::unordered_map<std::string, std::string> config_text_;
  void note_success(const std::string& strategy, double seconds, const std::string& config);
  void resume_best(const std::string& target_key);
};

/// params.pretrained loaded and checked as the run will use it, or a tessera::Error naming
/// what is wrong (its file, features or tuner): what tune and tune-all do before they open any
/// file. Null when no file is given, and for a TreeGRU (only checked here: each tuner loads its
/// own copy to train on).
std::shared_ptr<GlobalModel> open_pretrained(const TuneParams& params);
/// The pretrained model a run starts from: `given` (open_pretrained's) when there is one, else
/// the shipped one when default_pretrained() says so (one that does not load is reported to
/// `warn` and the run goes on without it). Null when neither, and for a pretrained TreeGRU;
/// `info` describes the model when there is one. `warn` hears of a model trained on another
/// machine.
std::shared_ptr<GlobalModel> start_pretrained(const TuneParams& params,
                                              std::shared_ptr<GlobalModel> given, RecordDb* db,
                                              const std::string& target_key, const WarnFn& warn,
                                              TransferInfo* info);
/// Decides on and prepares transfer for tuning `workload` (canonical text) with `params`:
/// start_pretrained()'s model when there is one, else the DB's global model for the features
/// and objective, refreshed; whether to use it (params.transfer: on, off, auto = when it knows
/// other workloads). Null when not used, with the reason in `info`. Throws tessera::Error for
/// --transfer on with a tuner without a model or without a DB.
std::shared_ptr<GlobalModel> prepare_transfer(const std::string& workload, const TuneParams& params,
                                              std::shared_ptr<GlobalModel> given,
                                              const std::string& db_path, RecordDb* db,
                                              const std::string& target_key, const WarnFn& warn,
                                              TransferInfo* info);

/// Tunes `workload` for `params.trials` trials. With a non-empty `db_path`, records of the same
/// workload and machine are loaded first (the run resumes from them), every batch is appended as
/// soon as it is measured, and the records of other workloads train a global model for transfer
/// (params.transfer). `warn` gets one-line warnings (default: stderr).
TuneResult tune(const std::string& workload, const TuneParams& params, const MeasureParams& measure,
                const std::string& db_path, const TuneProgressFn& progress = nullptr,
                const WarnFn& warn = nullptr);

/// One-line warnings to stderr as `tessera: warning: ...`.
void warn_to_stderr(const std::string& message);

}  // namespace tessera
