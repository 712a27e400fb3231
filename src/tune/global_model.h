/// The global cost model of transfer learning: XGBoost trained on every record of a records DB
/// for one target (all workloads, all operators), kept next to the DB and refitted when the DB
/// has new records.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "db/record_db.h"
#include "model/xgboost_model.h"
#include "ops/workload.h"
#include "space/config_space.h"

namespace tessera {

using WarnFn = std::function<void(const std::string&)>;

/// The knob layout of a space: its knob names and the width of each knob's values. Knob features
/// of two workloads are comparable only when their layouts are equal (in practice: the same
/// operator's template).
std::string knob_layout(const ConfigSpace& space);

/// Strategy text -> configuration index of every configuration of `space` (empty when the space
/// has more than `limit` configurations): how records are mapped back to configurations.
std::unordered_map<std::string, uint64_t> strategy_index(const ConfigSpace& space,
                                                         uint64_t limit = 2'000'000);

class GlobalModel {
 public:
  /// `features`: relation, context or knob (tree: training_set() only); for knob, `layout`
  /// (knob_layout of the workload being tuned) selects the records whose spaces have that layout.
  /// The objective should be the local model's: the local model learns a correction of the global
  /// model's scores.
  GlobalModel(std::string db_path, std::string features, XGBoostParams::Objective objective,
              std::string layout = "", uint64_t seed = 0);

  /// `<db>.global-<features>[-reg][-<layout hash>].model`; the stamp is the same name with
  /// `.stamp` for `.model`.
  const std::string& model_path() const { return model_path_; }
  const std::string& stamp_path() const { return stamp_path_; }

  /// Brings the model up to date with `db`'s records for `target_key`: nothing when it already
  /// is, a load of the saved model when its stamp (target, record count, last record's key)
  /// matches, else a full refit on every usable record, saved with a new stamp. A saved file
  /// that cannot be used is rebuilt after one line to `warn`. Returns whether the model changed.
  bool refresh(RecordDb& db, const std::string& target_key, const WarnFn& warn = nullptr);

  /// Null until a refresh found usable records (a workload with at least one success).
  std::shared_ptr<const XGBoostModel> model() const { return model_; }
  /// Records the model was trained on (failures included) and their workloads.
  size_t records() const { return rows_; }
  const std::set<std::string>& workloads() const { return workloads_; }
  /// Whether the model was trained on records of a workload other than `workload`.
  bool knows_other_than(const std::string& workload) const;
  /// Whether the last refresh refitted (rather than loaded or kept) the model.
  bool rebuilt() const { return rebuilt_; }

  /// The rows a fit on `records` trains on: features of this model's kind (`tree` too, for
  /// pretraining the TreeGRU), labels throughput / the workload's best (failures 0), rows
  /// grouped by workload (`groups`: the rows of each, in order).
  struct TrainingSet {
    std::vector<std::vector<float>> x;
    std::vector<float> y;
    std::vector<unsigned> groups;
    std::set<std::string> workloads;
  };
  TrainingSet training_set(const std::vector<Record>& records);

  /// Fits the model on `records` (of one target, any workloads) as a refresh does, keeping no
  /// file: what `tessera pretrain` trains on the records of several DBs.
  void fit(const std::vector<Record>& records, const std::string& target_key);
  /// Writes the fitted model with what it was trained on (target, features, objective,
  /// workloads) as one JSON file: a pretrained cost model. Throws when nothing was fitted.
  void save_pretrained(const std::string& path) const;
  /// A model save_pretrained wrote, used instead of a DB's global model (refresh() leaves it as
  /// it is). Throws tessera::Error naming the file when it is not one, or was trained on
  /// knob features or on feature rows of another length than this tessera extracts.
  static std::shared_ptr<GlobalModel> load_pretrained(const std::string& path, uint64_t seed = 0);
  bool pretrained() const { return pretrained_; }
  const std::string& target_key() const { return target_key_; }
  const std::string& features() const { return features_; }
  XGBoostParams::Objective objective() const { return objective_; }

 private:
  struct Row {
    std::string workload;
    std::vector<float> features;
    double gflops = 0;
  };
  bool try_load(const std::string& stamp_text, const WarnFn& warn);
  void rebuild(const std::vector<Record>& records);
  struct WorkloadInfo;
  const WorkloadInfo& info_of(const std::string& workload);
  /// Features of a record's program, or nullopt when it does not apply.
  std::optional<std::vector<float>> extract(const WorkloadInfo& info, const Record& r) const;
  /// Fills the cache (by record key) for the records not in it yet.
  void extract_missing(const std::vector<const Record*>& records);

  std::string db_path_, features_, layout_;
  XGBoostParams::Objective objective_;
  uint64_t seed_;
  std::string model_path_, stamp_path_;
  std::string target_key_, last_key_;
  size_t db_records_ = 0;
  bool synced_ = false;
  std::shared_ptr<const XGBoostModel> model_;
  size_t rows_ = 0;
  std::set<std::string> workloads_;
  bool rebuilt_ = false;
  bool pretrained_ = false;
  std::unordered_map<std::string, std::optional<std::vector<float>>> cache_;  // by Record::key()
  std::unordered_map<std::string, std::shared_ptr<WorkloadInfo>> workload_info_;
};

}  // namespace tessera
