#include "tune/global_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "feature/feature.h"
#include "measure/hash.h"
#include "ops/templates.h"
#include "runtime/output_file.h"
#include "runtime/text_file.h"
#include "schedule/strategy_parser.h"
#include "te/error.h"

namespace tessera {

namespace {
constexpr int kStampVersion = 1;
constexpr const char* kPretrainedFormat = "tessera-cost-model";
constexpr int kPretrainedVersion = 1;

std::string objective_suffix(XGBoostParams::Objective objective) {
  return objective == XGBoostParams::Objective::kRank ? "" : "-reg";
}

// The first line of a message (XGBoost's run over several, with a stack trace).
std::string one_line(const std::string& text) {
  std::string line = text.substr(0, text.find('\n'));
  while (!line.empty() && (line.back() == ' ' || line.back() == ':')) line.pop_back();
  return line;
}

// Writes through a temporary file and a rename, so that a kill never leaves half a file.
void write_atomically(const std::string& path, const std::function<void(const std::string&)>& w) {
  std::string tmp = path + ".tmp";
  w(tmp);
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) throw_error("cannot rename {} to {}: {}", tmp, path, ec.message());
}
}  // namespace

std::string knob_layout(const ConfigSpace& space) {
  std::string op = space.name().substr(0, space.name().find(':'));
  std::vector<std::string> knobs;
  for (const Knob& k : space.knobs()) {
    size_t width = k.values.empty() ? 0 : k.values[0].size();
    knobs.push_back(fmt::format("{}/{}", k.name, width));
  }
  return fmt::format("{}[{}]", op, fmt::join(knobs, ","));
}

std::unordered_map<std::string, uint64_t> strategy_index(const ConfigSpace& space, uint64_t limit) {
  std::unordered_map<std::string, uint64_t> out;
  if (space.size() > limit) return out;
  for (uint64_t i = 0; i < space.size(); ++i)
    out.emplace(space.instantiate(space.from_index(i)).text(), i);
  return out;
}

struct GlobalModel::WorkloadInfo {
  bool usable = false;
  Program program;
  std::unique_ptr<ConfigSpace> space;                 // knob features only
  std::unordered_map<std::string, uint64_t> by_text;  // knob features only
};

GlobalModel::GlobalModel(std::string db_path, std::string features,
                         XGBoostParams::Objective objective, std::string layout, uint64_t seed)
    : db_path_(std::move(db_path)),
      features_(std::move(features)),
      layout_(std::move(layout)),
      objective_(objective),
      seed_(seed) {
  if (features_ != "relation" && features_ != "context" && features_ != "knob" &&
      features_ != "tree")
    throw_error("unknown features '{}' (relation, context, knob, tree)", features_);
  if (features_ == "knob" && layout_.empty())
    throw_error("a global model on knob features needs the knob layout of the space");
  std::string base =
      fmt::format("{}.global-{}{}", db_path_, features_, objective_suffix(objective_));
  if (features_ == "knob") base = fmt::format("{}-{}", base, stable_hash({layout_}).substr(0, 12));
  model_path_ = base + ".model";
  stamp_path_ = base + ".stamp";
}

bool GlobalModel::knows_other_than(const std::string& workload) const {
  for (const std::string& w : workloads_) {
    if (w != workload) return true;
  }
  return false;
}

const GlobalModel::WorkloadInfo& GlobalModel::info_of(const std::string& workload) {
  auto it = workload_info_.find(workload);
  if (it != workload_info_.end()) return *it->second;
  auto info = std::make_shared<WorkloadInfo>();
  try {
    Workload w = parse_workload(workload);
    info->program = instantiate(w).program;
    if (features_ == "knob") {
      info->space = std::make_unique<ConfigSpace>(space_for(w));
      if (knob_layout(*info->space) == layout_) info->by_text = strategy_index(*info->space);
      info->usable = !info->by_text.empty();
    } else {
      info->usable = true;
    }
  } catch (const Error&) {
    info->usable = false;  // an operator or space this tessera does not have: nothing to learn
  }
  return *workload_info_.emplace(workload, std::move(info)).first->second;
}

std::optional<std::vector<float>> GlobalModel::extract(const WorkloadInfo& info,
                                                       const Record& r) const {
  if (!info.usable) return std::nullopt;
  if (features_ == "knob") {
    auto it = info.by_text.find(r.result.strategy);
    if (it == info.by_text.end()) return std::nullopt;
    return info.space->knob_features(info.space->from_index(it->second));
  }
  try {
    RewriteResult<Program> p = parse_strategy(r.result.strategy)(info.program);
    if (!p) return std::nullopt;
    return extract_features(p.program(), parse_feature_kind(features_));
  } catch (const Error&) {
    return std::nullopt;  // a strategy text this tessera no longer parses
  }
}

void GlobalModel::extract_missing(const std::vector<const Record*>& records) {
  // Applying strategies and extracting features is most of a refit's time: records not seen
  // before in this process are done on all cores.
  std::vector<const Record*> missing;
  std::vector<const WorkloadInfo*> infos;
  std::set<std::string> queued;
  for (const Record* r : records) {
    std::string key = r->key();
    if (cache_.count(key) || !queued.insert(key).second) continue;
    missing.push_back(r);
    infos.push_back(&info_of(r->result.workload));
  }
  std::vector<std::optional<std::vector<float>>> computed(missing.size());
#pragma omp parallel for schedule(dynamic)
  for (size_t i = 0; i < missing.size(); ++i) computed[i] = extract(*infos[i], *missing[i]);
  for (size_t i = 0; i < missing.size(); ++i)
    cache_.emplace(missing[i]->key(), std::move(computed[i]));
}

GlobalModel::TrainingSet GlobalModel::training_set(const std::vector<Record>& records) {
  // Labels per workload: throughput / that workload's best; failures 0, as in the local model.
  // Workloads without a success teach nothing (the local model is not fitted either).
  std::map<std::string, double> best;
  for (const Record& r : records) {
    double g = r.result.error == ErrorKind::kOk ? r.result.gflops() : 0.0;
    best[r.result.workload] = std::max(best[r.result.workload], g);
  }
  std::vector<const Record*> used;
  for (const Record& r : records) {
    if (best[r.result.workload] > 0) used.push_back(&r);
  }
  extract_missing(used);
  std::map<std::string, std::vector<std::pair<const std::vector<float>*, float>>> by_workload;
  for (const Record* rp : used) {
    const Record& r = *rp;
    double b = best[r.result.workload];
    const std::optional<std::vector<float>>& f = cache_.at(r.key());
    if (!f) continue;
    double g = r.result.error == ErrorKind::kOk ? r.result.gflops() : 0.0;
    by_workload[r.result.workload].emplace_back(&*f, static_cast<float>(g / b));
  }
  TrainingSet set;
  for (const auto& [workload, rows] : by_workload) {
    set.workloads.insert(workload);
    set.groups.push_back(static_cast<unsigned>(rows.size()));
    for (const auto& [f, label] : rows) {
      set.x.push_back(*f);
      set.y.push_back(label);
    }
  }
  return set;
}

void GlobalModel::rebuild(const std::vector<Record>& records) {
  TrainingSet set = training_set(records);
  workloads_ = std::move(set.workloads);
  rows_ = set.x.size();
  model_.reset();
  if (set.x.empty()) return;
  if (features_ == "tree")
    throw_error("the global model is XGBoost: tree features are the TreeGRU's");
  XGBoostParams params;
  params.objective = objective_;
  params.seed = seed_;
  auto model = std::make_shared<XGBoostModel>(params);
  FitOptions options;
  if (objective_ == XGBoostParams::Objective::kRank) options.groups = std::move(set.groups);
  model->fit(set.x, set.y, options);
  model_ = std::move(model);
}

bool GlobalModel::try_load(const std::string& stamp_text, const WarnFn& warn) {
  auto say = [&](const std::string& what) {
    if (warn) warn(fmt::format("{}; rebuilding it from {} records", what, db_records_));
  };
  nlohmann::json stamp = nlohmann::json::parse(stamp_text, nullptr, /*allow_exceptions=*/false);
  if (stamp.is_discarded() || !stamp.is_object()) {
    say(fmt::format("global model stamp {} is unreadable", stamp_path_));
    return false;
  }
  try {
    if (stamp.value("version", 0) != kStampVersion || stamp.value("target", "") != target_key_ ||
        stamp.value("db_records", size_t{0}) != db_records_ ||
        stamp.value("last_key", "") != last_key_ || stamp.value("features", "") != features_ ||
        stamp.value("objective", "") != objective_name(objective_) ||
        stamp.value("layout", "") != layout_) {
      return false;  // stale: the DB has changed since (or another target): refit quietly
    }
    if (!stamp.at("rows").is_number_unsigned()) return false;  // a float past size_t is undefined
    size_t rows = stamp.at("rows").get<size_t>();
    std::set<std::string> workloads = stamp.at("workloads").get<std::set<std::string>>();
    if (rows == 0) {
      model_.reset();
    } else {
      XGBoostParams params;
      params.objective = objective_;
      params.seed = seed_;
      auto model = std::make_shared<XGBoostModel>(params);
      model->load(model_path_);
      if (model->num_features() == 0) throw Error("the file holds no trees");
      if (features_ != "knob" &&
          model->num_features() != feature_length(features_ == "relation"
                                                      ? FeatureKind::kRelation
                                                      : FeatureKind::kContext)) {
        throw Error(fmt::format("it was trained on {} features, this tessera extracts {}",
                                model->num_features(),
                                feature_length(features_ == "relation" ? FeatureKind::kRelation
                                                                       : FeatureKind::kContext)));
      }
      model_ = std::move(model);
    }
    rows_ = rows;
    workloads_ = std::move(workloads);
    return true;
  } catch (const std::exception& e) {
    say(fmt::format("cannot use the global model {} ({})", model_path_, one_line(e.what())));
    return false;
  }
}

void GlobalModel::fit(const std::vector<Record>& records, const std::string& target_key) {
  target_key_ = target_key;
  rebuild(records);
}

void GlobalModel::save_pretrained(const std::string& path) const {
  if (!model_) throw_error("no cost model to save: no usable records");
  // In this order (the format first), so that file_kind() knows the file by its first bytes.
  nlohmann::ordered_json j;
  j["format"] = kPretrainedFormat;
  j["version"] = kPretrainedVersion;
  j["target"] = target_key_;
  j["features"] = features_;
  j["objective"] = objective_name(objective_);
  j["rows"] = rows_;
  j["workloads"] = workloads_;
  j["model"] = nlohmann::ordered_json::parse(model_->to_json());
  write_file_atomically(path, [&](std::ostream& out) { out << j.dump() << "\n"; });
}

std::shared_ptr<GlobalModel> GlobalModel::load_pretrained(const std::string& path, uint64_t seed) {
  require_regular_file(path, "pretrained cost model");
  nlohmann::json j =
      nlohmann::json::parse(read_text_file(path), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object() || j.value("format", "") != kPretrainedFormat)
    throw_error("{} is not a tessera cost model (write one with tessera pretrain)", path);
  if (j.value("version", 0) != kPretrainedVersion)
    throw_error("{}: cost model version {} (this tessera reads {})", path, j.value("version", 0),
                kPretrainedVersion);
  try {
    const std::string features = j.at("features").get<std::string>();
    if (features != "relation" && features != "context")
      throw_error("trained on {} features (relation or context)", features);
    const std::string objective = j.at("objective").get<std::string>();
    if (objective != objective_name(XGBoostParams::Objective::kRank) &&
        objective != objective_name(XGBoostParams::Objective::kRegression))
      throw_error("unknown objective '{}'", objective);
    auto kind = objective == objective_name(XGBoostParams::Objective::kRank)
                    ? XGBoostParams::Objective::kRank
                    : XGBoostParams::Objective::kRegression;
    auto g = std::make_shared<GlobalModel>(path, features, kind, "", seed);
    XGBoostParams params;
    params.objective = kind;
    params.seed = seed;
    auto model = std::make_shared<XGBoostModel>(params);
    model->load_bytes(j.at("model").dump(), path);
    const size_t expected =
        feature_length(features == "relation" ? FeatureKind::kRelation : FeatureKind::kContext);
    if (model->num_features() != expected)
      throw_error("trained on rows of {} features, this tessera extracts {}", model->num_features(),
                  expected);
    g->model_ = std::move(model);
    g->target_key_ = j.at("target").get<std::string>();
    // A float converted to size_t past its range is undefined behaviour: whole counts only.
    if (!j.at("rows").is_number_unsigned()) throw_error("'rows' is not a count");
    g->rows_ = j.at("rows").get<size_t>();
    g->workloads_ = j.at("workloads").get<std::set<std::string>>();
    g->pretrained_ = true;
    g->synced_ = true;
    return g;
  } catch (const nlohmann::json::exception& e) {
    throw_error("{}: a damaged cost model ({})", path, one_line(e.what()));
  } catch (const Error& e) {
    throw_error("{}: {}", path, one_line(e.what()));
  }
}

bool GlobalModel::refresh(RecordDb& db, const std::string& target_key, const WarnFn& warn) {
  if (pretrained_) return false;  // trained once, elsewhere: the DB does not change it
  RecordQuery q;
  q.target_key = target_key;
  std::vector<Record> records = db.records(q);
  std::string last = records.empty() ? "" : records.back().key();
  rebuilt_ = false;
  if (synced_ && target_key == target_key_ && records.size() == db_records_ && last == last_key_)
    return false;
  synced_ = true;
  target_key_ = target_key;
  db_records_ = records.size();
  last_key_ = last;
  if (records.empty()) {  // nothing to learn from, nothing to save
    model_.reset();
    rows_ = 0;
    workloads_.clear();
    return true;
  }
  if (std::filesystem::exists(stamp_path_) && try_load(read_text_file(stamp_path_), warn))
    return true;

  rebuild(records);
  rebuilt_ = true;
  try {
    if (model_) write_atomically(model_path_, [&](const std::string& tmp) { model_->save(tmp); });
    nlohmann::json stamp;
    stamp["version"] = kStampVersion;
    stamp["target"] = target_key_;
    stamp["db_records"] = db_records_;
    stamp["last_key"] = last_key_;
    stamp["features"] = features_;
    stamp["objective"] = objective_name(objective_);
    stamp["layout"] = layout_;
    stamp["rows"] = rows_;
    stamp["workloads"] = workloads_;
    write_atomically(stamp_path_,
                     [&](const std::string& tmp) { write_text_file(tmp, stamp.dump(1) + "\n"); });
  } catch (const Error& e) {
    if (warn) warn(fmt::format("cannot save the global model: {}", one_line(e.what())));
  }
  return true;
}

}  // namespace tessera
