/// Tuners propose configurations of a search space and learn from their measured throughput.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <unordered_set>
#include <vector>

#include "ops/workload.h"
#include "space/config_space.h"

namespace tessera {

class TreeGRUModel;

/// Options of a tuning run. Defaults follow AutoTVM's XGBTuner where it has one.
struct TuneParams {
  /// xgb (rank loss), xgb-reg (regression), treegru, treegru-reg, random, grid, ga
  std::string tuner = "xgb";
  /// XGBoost's features: relation | context | knob (the TreeGRU always reads the loop tree)
  std::string features = "relation";
  int trials = 256;
  int batch_size = 64;  // b: configurations measured between model updates
  // Simulated annealing over the model (AutoTVM: 128 chains, 500 steps, early stop 50).
  int sa_chains = 128;
  int sa_steps = 500;
  int sa_early_stop = 50;
  int plan_size = 128;  // λb: the best unmeasured configurations SA keeps for selection
  double diversity_alpha =
      0.2;                // weight of each newly covered knob value (scores are scaled to [0, 1])
  double epsilon = 0.05;  // share of each batch drawn at random
  /// Transfer learning from the DB's records of other workloads (tune/global_model.h): "on",
  /// "off", or "auto" (on when the DB holds records of other workloads for this target).
  std::string transfer = "auto";
  /// A pretrained cost model (`tessera pretrain`) to transfer from instead of the DB's records;
  /// empty: none.
  std::string pretrained;
  /// n0 of the global weight w = 1 / (1 + n_local / n0) (model/transfer_model.h).
  double transfer_n0 = 64;
  /// Extra random share of a batch while the global model dominates: epsilon + this * w. The
  /// global model ranks what was fast on other workloads; the draws keep the search from
  /// settling there before the local model has seen this workload's own optimum.
  double transfer_epsilon = 0.25;
  /// At the end of a run, the `retime_top` fastest configurations (this run's and resumed ones)
  /// are timed again together, `retime_rounds` times each, and the best median is the run's
  /// result (tune/retime.h); 0: the single fastest measurement is. Not counted as trials.
  int retime_top = 5;
  int retime_rounds = 3;
  /// A run stops after this many trials without a better best (the rule of tune-all's task
  /// scheduler for one task); 0: it runs every trial.
  int early_stop = 0;
  /// The first trial is the default configuration (what an untuned model runs), so that tuning
  /// never ends slower than not tuning; false: the tuner's own proposals from the first trial, as
  /// AutoTVM's curves start (the default may already sit where a search ends).
  bool start_from_default = true;
  int ga_population = 64;
  double ga_mutation = 0.1;
  uint64_t seed = 0;
};

class Tuner {
 public:
  explicit Tuner(const ConfigSpace& space, uint64_t seed) : space_(space), rng_(seed) {}
  virtual ~Tuner() = default;

  /// Up to n configurations never proposed or observed before (fewer when the space runs out).
  virtual std::vector<Config> propose(int n) = 0;
  /// Measured throughput of configurations (GFLOP/s; 0 for failures). Also used to resume from
  /// records: observed configurations are never proposed again.
  virtual void observe(const std::vector<Config>& configs, const std::vector<double>& gflops);

  /// What the tuner's cost model forecasts for its next batch: the predicted throughput of the
  /// best configuration it would propose over that of the best one measured (below 1: no gain
  /// predicted; 0: nothing left to propose). nullopt when the tuner has no model that can tell.
  virtual std::optional<double> outlook() { return std::nullopt; }

  bool visited(const Config& c) const { return visited_.count(space_.to_index(c)) > 0; }
  /// Seconds spent in model fitting and search so far (not in measurement).
  double overhead_seconds() const { return overhead_seconds_; }

 protected:
  /// A random configuration not visited yet (nullopt-like: returns false when none was found).
  bool sample_unvisited(Config* out, int attempts = 1000);
  void mark(const Config& c) { visited_.insert(space_.to_index(c)); }

  const ConfigSpace& space_;
  std::mt19937_64 rng_;
  std::unordered_set<uint64_t> visited_;
  double overhead_seconds_ = 0;
};

class TransferModel;

/// Every tuner make_tuner builds, in the order the CLI lists them.
const std::vector<std::string>& tuner_names();
/// Tuners whose cost model is XGBoost (xgb, xgb-reg): the ones transfer learning serves, since
/// the global model and the pretrained model are boosted trees a local model corrects.
bool is_xgb_tuner(const std::string& tuner);
/// Tuners whose cost model is the TreeGRU (treegru, treegru-reg); they read kTree features.
bool is_treegru_tuner(const std::string& tuner);
/// The TreeGRU of params.pretrained (`tessera pretrain --tuner treegru...`) for params.tuner;
/// throws tessera::Error naming the file when it is not one or was trained for the other
/// objective.
std::unique_ptr<TreeGRUModel> load_pretrained_treegru(const TuneParams& params);

/// The tuner `params.tuner` names, for the space of `op`; throws tessera::Error on an unknown name.
/// With `transfer` given, an xgb/xgb-reg tuner's model is a TransferModel (model/
/// transfer_model.h) without a global model yet, returned in `*transfer` (null for the other
/// tuners); TuneSession::set_global gives it one.
/// Throws tessera::Error for a tuner or feature name make_tuner does not know: tune and
/// tune-all check before they open the records DB, so that bad input creates no file.
void check_tuner_names(const TuneParams& params);

std::unique_ptr<Tuner> make_tuner(const ConfigSpace& space, const OpInstance& op,
                                  const TuneParams& params, TransferModel** transfer = nullptr);
/// The feature function `params.features` names for configurations of `space` over `program`
/// (relation, context, knob); throws tessera::Error on an unknown name.
std::function<bool(const Config&, std::vector<float>*)> make_feature_fn(
    const ConfigSpace& space, const Program& program, const std::string& features);

}  // namespace tessera
