// The tuner a name selects, with the feature extraction and cost model it needs.
#include <memory>
#include <set>
#include <string>

#include "feature/feature.h"
#include "model/transfer_model.h"
#include "model/xgboost_model.h"
#include "te/error.h"
#include "tune/baseline_tuners.h"
#include "tune/model_tuner.h"

namespace tessera {

std::function<bool(const Config&, std::vector<float>*)> make_feature_fn(
    const ConfigSpace& space, const Program& program, const std::string& features) {
  if (features == "knob") {
    return [&space](const Config& c, std::vector<float>* out) {
      *out = space.knob_features(c);
      return true;
    };
  }
  if (features == "relation" || features == "context") {
    FeatureKind kind = features == "relation" ? FeatureKind::kRelation : FeatureKind::kContext;
    // The program is what the model sees: features of the rewritten loop program, not the knobs.
    return [&space, program, kind](const Config& c, std::vector<float>* out) {
      RewriteResult<Program> r = space.instantiate(c)(program);
      if (!r) return false;
      *out = extract_features(r.program(), kind);
      return true;
    };
  }
  throw_error("unknown features '{}' (relation, context, knob)", features);
}

void check_tuner_names(const TuneParams& params) {
  static const std::set<std::string> tuners{"xgb", "xgb-reg", "random", "grid", "ga"};
  static const std::set<std::string> features{"relation", "context", "knob"};
  if (!tuners.count(params.tuner))
    throw_error("unknown tuner '{}' (xgb, xgb-reg, random, grid, ga)", params.tuner);
  if (!features.count(params.features))
    throw_error("unknown features '{}' (relation, context, knob)", params.features);
}

std::unique_ptr<Tuner> make_tuner(const ConfigSpace& space, const OpInstance& op,
                                  const TuneParams& params, TransferModel** transfer) {
  if (transfer) *transfer = nullptr;
  if (params.tuner == "random") return std::make_unique<RandomTuner>(space, params.seed);
  if (params.tuner == "grid") return std::make_unique<GridTuner>(space, params.seed);
  if (params.tuner == "ga") {
    return std::make_unique<GeneticTuner>(space, params.seed, params.ga_population,
                                          params.ga_mutation);
  }
  if (params.tuner != "xgb" && params.tuner != "xgb-reg") {
    throw_error("unknown tuner '{}' (xgb, xgb-reg, random, grid, ga)", params.tuner);
  }
  XGBoostParams xgb;
  xgb.objective = params.tuner == "xgb" ? XGBoostParams::Objective::kRank
                                        : XGBoostParams::Objective::kRegression;
  xgb.seed = params.seed;
  auto local = std::make_unique<XGBoostModel>(xgb);
  ModelTuner::FeatureFn features = make_feature_fn(space, op.program, params.features);
  if (!transfer) {
    return std::make_unique<ModelTuner>(space, params, std::move(local), std::move(features));
  }
  auto model = std::make_unique<TransferModel>(nullptr, std::move(local), params.transfer_n0);
  *transfer = model.get();
  return std::make_unique<ModelTuner>(space, params, std::move(model), std::move(features));
}

}  // namespace tessera
