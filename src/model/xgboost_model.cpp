#include "model/xgboost_model.h"

#include <xgboost/c_api.h>

#include <cmath>
#include <cstdint>
#include <fstream>
#include <iterator>
#include <limits>
#include <numeric>
#include <random>

#include "runtime/text_file.h"
#include "te/error.h"

namespace tessera {
namespace {

// Every XGBoost call goes through here: a non-zero return becomes a tessera::Error that names
// the call and carries XGBoost's own message.
void check(int rc, const char* call) {
  if (rc != 0) throw_error("xgboost: {} failed: {}", call, XGBGetLastError());
}

struct DMatrix {
  DMatrixHandle handle = nullptr;
  DMatrix() = default;
  DMatrix(const DMatrix&) = delete;
  DMatrix& operator=(const DMatrix&) = delete;
  ~DMatrix() {
    if (handle) XGDMatrixFree(handle);
  }
};

void make_dmatrix(const float* data, size_t rows, size_t cols, DMatrix* out) {
  check(XGDMatrixCreateFromMat(data, static_cast<bst_ulong>(rows), static_cast<bst_ulong>(cols),
                               std::numeric_limits<float>::quiet_NaN(), &out->handle),
        "XGDMatrixCreateFromMat");
}

// Rows of one length, copied one after another.
std::vector<float> flatten(const std::vector<std::vector<float>>& x, size_t* cols) {
  *cols = x.empty() ? 0 : x[0].size();
  std::vector<float> flat;
  flat.reserve(x.size() * *cols);
  for (size_t r = 0; r < x.size(); ++r) {
    if (x[r].size() != *cols) {
      throw_error("cost model: row {} has {} features, row 0 has {}", r, x[r].size(), *cols);
    }
    flat.insert(flat.end(), x[r].begin(), x[r].end());
  }
  return flat;
}

constexpr const char* kPredictConfig =
    R"({"type": 0, "training": false, "iteration_begin": 0, "iteration_end": 0, )"
    R"("strict_shape": false})";

constexpr const char* kInplaceConfig =
    R"({"type": 0, "training": false, "iteration_begin": 0, "iteration_end": 0, )"
    R"("strict_shape": false, "missing": NaN, "cache_id": 0})";

std::vector<float> predict_dmatrix(BoosterHandle booster, DMatrixHandle dmat, size_t rows) {
  const bst_ulong* shape = nullptr;
  bst_ulong dim = 0;
  const float* result = nullptr;
  check(XGBoosterPredictFromDMatrix(booster, dmat, kPredictConfig, &shape, &dim, &result),
        "XGBoosterPredictFromDMatrix");
  return std::vector<float>(result, result + rows);
}

void set_param(BoosterHandle b, const char* key, const std::string& value) {
  check(XGBoosterSetParam(b, key, value.c_str()), "XGBoosterSetParam");
}

std::string num(double v) {
  return fmt::format("{:.17g}", v);
}

}  // namespace

const char* objective_name(XGBoostParams::Objective objective) {
  return objective == XGBoostParams::Objective::kRank ? "rank:pairwise" : "reg:squarederror";
}

void XGBoostModel::BoosterDeleter::operator()(void* handle) const {
  if (handle) XGBoosterFree(handle);
}

XGBoostModel::XGBoostModel(XGBoostParams params)
    : params_(std::move(params)), mutex_(std::make_unique<std::mutex>()) {}
XGBoostModel::~XGBoostModel() = default;
XGBoostModel::XGBoostModel(XGBoostModel&&) noexcept = default;
XGBoostModel& XGBoostModel::operator=(XGBoostModel&&) noexcept = default;

std::string XGBoostModel::name() const {
  return params_.objective == XGBoostParams::Objective::kRank ? "xgb-rank" : "xgb-reg";
}

void XGBoostModel::fit(const std::vector<std::vector<float>>& x, const std::vector<float>& y) {
  fit(x, y, FitOptions{});
}

void XGBoostModel::fit(const std::vector<std::vector<float>>& x, const std::vector<float>& y,
                       const FitOptions& options) {
  if (x.size() != y.size()) throw_error("cost model: {} rows but {} labels", x.size(), y.size());
  if (!options.base_margin.empty() && options.base_margin.size() != x.size()) {
    throw_error("cost model: {} rows but {} base margins", x.size(), options.base_margin.size());
  }
  if (!options.groups.empty() &&
      std::accumulate(options.groups.begin(), options.groups.end(), size_t{0}) != x.size()) {
    throw_error("cost model: query groups do not add up to the {} rows", x.size());
  }
  size_t cols = 0;
  std::vector<float> flat = flatten(x, &cols);
  booster_.reset();
  rounds_ = 0;
  best_score_ = 0;
  num_features_ = 0;
  if (x.empty()) return;
  if (cols == 0) throw_error("cost model: rows have no features");
  std::vector<float> labels(y);
  for (float& v : labels) {
    if (!std::isfinite(v)) v = 0;
  }

  // The split: evaluate on a seeded random share of the rows, or on the training rows.
  size_t n = x.size();
  size_t n_valid = static_cast<size_t>(std::lround(params_.validation_fraction * double(n)));
  if (n_valid < 16 || n - n_valid < 16 || !options.groups.empty()) n_valid = 0;
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  if (n_valid > 0) {
    std::mt19937_64 rng(params_.seed);
    for (size_t i = n - 1; i > 0; --i) std::swap(order[i], order[rng() % (i + 1)]);
  }
  size_t n_train = n - n_valid;
  const std::vector<float>& margin = options.base_margin;
  auto gather = [&](size_t begin, size_t end, std::vector<float>* data, std::vector<float>* lab,
                    std::vector<float>* base) {
    for (size_t i = begin; i < end; ++i) {
      data->insert(data->end(), flat.begin() + order[i] * cols,
                   flat.begin() + (order[i] + 1) * cols);
      lab->push_back(labels[order[i]]);
      if (!margin.empty()) base->push_back(margin[order[i]]);
    }
  };
  std::vector<float> train_x, train_y, valid_x, valid_y, train_base, valid_base;
  if (n_valid > 0) {
    gather(0, n_train, &train_x, &train_y, &train_base);
    gather(n_train, n, &valid_x, &valid_y, &valid_base);
  } else {
    train_x = std::move(flat);
    train_y = labels;
    train_base = margin;
  }

  DMatrix dtrain, dvalid;
  make_dmatrix(train_x.data(), n_train, cols, &dtrain);
  check(XGDMatrixSetFloatInfo(dtrain.handle, "label", train_y.data(), n_train),
        "XGDMatrixSetFloatInfo");
  if (!train_base.empty()) {
    check(XGDMatrixSetFloatInfo(dtrain.handle, "base_margin", train_base.data(), n_train),
          "XGDMatrixSetFloatInfo");
  }
  if (params_.objective == XGBoostParams::Objective::kRank) {
    std::vector<unsigned> groups = options.groups;
    if (groups.empty()) groups.push_back(static_cast<unsigned>(n_train));
    check(XGDMatrixSetUIntInfo(dtrain.handle, "group", groups.data(), groups.size()),
          "XGDMatrixSetUIntInfo");
  }
  DMatrixHandle deval = dtrain.handle;
  const std::vector<float>* eval_y = &train_y;
  if (n_valid > 0) {
    make_dmatrix(valid_x.data(), n_valid, cols, &dvalid);
    if (!valid_base.empty()) {
      check(XGDMatrixSetFloatInfo(dvalid.handle, "base_margin", valid_base.data(), n_valid),
            "XGDMatrixSetFloatInfo");
    }
    deval = dvalid.handle;
    eval_y = &valid_y;
  }

  // Both matrices are registered with the booster so that their predictions are cached and
  // updated incrementally after each round.
  DMatrixHandle dmats[2] = {dtrain.handle, dvalid.handle};
  BoosterHandle raw = nullptr;
  check(XGBoosterCreate(dmats, n_valid > 0 ? 2 : 1, &raw), "XGBoosterCreate");
  BoosterPtr booster(raw);
  set_param(raw, "verbosity", "0");
  set_param(raw, "objective", objective_name(params_.objective));
  set_param(raw, "max_depth", std::to_string(params_.max_depth));
  set_param(raw, "eta", num(params_.eta));
  set_param(raw, "subsample", num(params_.subsample));
  set_param(raw, "colsample_bytree", num(params_.colsample_bytree));
  set_param(raw, "min_child_weight", num(params_.min_child_weight));
  set_param(raw, "gamma", num(params_.gamma));
  set_param(raw, "lambda", num(params_.lambda));
  set_param(raw, "alpha", num(params_.alpha));
  set_param(raw, "tree_method", params_.tree_method);
  set_param(raw, "seed", std::to_string(params_.seed));
  if (params_.objective == XGBoostParams::Objective::kRank) {
    set_param(raw, "num_pairsample", std::to_string(std::max(params_.rank_pair_samples, 1)));
  }
  if (params_.nthread > 0) set_param(raw, "nthread", std::to_string(params_.nthread));
  // With a base margin the trees are a correction of it: no intercept of their own, so that
  // predict() (trees only) + the margin is what was trained.
  if (!options.base_margin.empty()) set_param(raw, "base_score", "0");

  int best_round = -1;
  double best = -1;
  int rounds = std::max(params_.num_boost_round, 1);
  int done = 0;
  for (int round = 0; round < rounds; ++round) {
    check(XGBoosterUpdateOneIter(raw, round, dtrain.handle), "XGBoosterUpdateOneIter");
    done = round + 1;
    if (params_.early_stopping_rounds <= 0) continue;
    std::vector<float> pred = predict_dmatrix(raw, deval, eval_y->size());
    double score = 0;
    if (options.groups.empty()) {
      score = average_recall(pred, *eval_y, params_.recall_top_k);
    } else {
      // The mean over query groups: each group (a workload) is ranked on its own.
      size_t begin = 0;
      for (unsigned g : options.groups) {
        std::vector<float> p(pred.begin() + begin, pred.begin() + begin + g);
        std::vector<float> t(eval_y->begin() + begin, eval_y->begin() + begin + g);
        score += average_recall(p, t, params_.recall_top_k);
        begin += g;
      }
      score /= static_cast<double>(options.groups.size());
    }
    if (score > best) {
      best = score;
      best_round = round;
    } else if (round - best_round >= params_.early_stopping_rounds) {
      break;
    }
  }
  if (best_round >= 0 && best_round + 1 < done) {
    BoosterHandle sliced = nullptr;
    check(XGBoosterSlice(raw, 0, best_round + 1, 1, &sliced), "XGBoosterSlice");
    booster.reset(sliced);
    done = best_round + 1;
  }
  booster_ = std::move(booster);
  rounds_ = done;
  best_score_ = std::max(best, 0.0);
  num_features_ = cols;
}

std::vector<float> XGBoostModel::predict_flat(const float* data, size_t rows, size_t cols) const {
  if (rows == 0) return {};
  if (!booster_) return std::vector<float>(rows, 0.0f);
  if (cols != num_features_) {
    throw_error("cost model: rows have {} features, the model was trained on {}", cols,
                num_features_);
  }
  // In-place prediction over the dense rows (an array-interface view, no DMatrix copy): the
  // whole batch in one call.
  std::string array =
      fmt::format(R"({{"data": [{}, true], "shape": [{}, {}], "typestr": "<f4", "version": 3}})",
                  reinterpret_cast<uintptr_t>(data), rows, cols);
  const bst_ulong* shape = nullptr;
  bst_ulong dim = 0;
  const float* result = nullptr;
  std::lock_guard<std::mutex> lock(*mutex_);
  check(XGBoosterPredictFromDense(booster_.get(), array.c_str(), kInplaceConfig, nullptr, &shape,
                                  &dim, &result),
        "XGBoosterPredictFromDense");
  return std::vector<float>(result, result + rows);
}

std::vector<float> XGBoostModel::predict(const std::vector<std::vector<float>>& x) const {
  if (x.empty()) return {};
  if (!booster_) return std::vector<float>(x.size(), 0.0f);
  size_t cols = 0;
  std::vector<float> flat = flatten(x, &cols);
  return predict_flat(flat.data(), x.size(), cols);
}

std::string XGBoostModel::to_json() const {
  if (!booster_) throw_error("cost model: nothing to save: the model is not fitted");
  bst_ulong len = 0;
  const char* buf = nullptr;
  check(XGBoosterSaveModelToBuffer(booster_.get(), R"({"format": "json"})", &len, &buf),
        "XGBoosterSaveModelToBuffer");
  return std::string(buf, len);
}

void XGBoostModel::save(const std::string& path) const {
  if (!booster_) throw_error("cost model: cannot save {}: the model is not fitted", path);
  const std::string bytes = to_json();
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) throw_error("cost model: cannot write {}", path);
}

void XGBoostModel::load(const std::string& path) {
  require_regular_file(path, "cost model");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw_error("cost model: cannot read {}", path);
  load_bytes(std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>()),
             path);
}

void XGBoostModel::load_bytes(const std::string& bytes, const std::string& source) {
  BoosterHandle raw = nullptr;
  check(XGBoosterCreate(nullptr, 0, &raw), "XGBoosterCreate");
  BoosterPtr booster(raw);
  if (XGBoosterLoadModelFromBuffer(raw, bytes.data(), bytes.size()) != 0) {
    std::string why = XGBGetLastError();
    throw_error("cost model: {} holds no XGBoost model ({})", source,
                why.substr(0, why.find('\n')));
  }
  bst_ulong features = 0;
  check(XGBoosterGetNumFeature(raw, &features), "XGBoosterGetNumFeature");
  int rounds = 0;
  check(XGBoosterBoostedRounds(raw, &rounds), "XGBoosterBoostedRounds");
  set_param(raw, "verbosity", "0");
  if (params_.nthread > 0) set_param(raw, "nthread", std::to_string(params_.nthread));
  booster_ = std::move(booster);
  num_features_ = features;
  rounds_ = rounds;
  best_score_ = 0;
}

}  // namespace tessera
