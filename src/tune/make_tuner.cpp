// The tuner a name selects, with the feature extraction and cost model it needs.
#include <memory>

#include "feature/feature.h"
#include "model/xgboost_model.h"
#include "te/error.h"
#include "tune/baseline_tuners.h"
#include "tune/model_tuner.h"

namespace tessera {

std::unique_ptr<Tuner> make_tuner(const ConfigSpace& space, const OpInstance& op,
                                  const TuneParams& params) {
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
  auto model = std::make_unique<XGBoostModel>(xgb);

  ModelTuner::FeatureFn features;
  if (params.features == "knob") {
    features = [&space](const Config& c, std::vector<float>* out) {
      *out = space.knob_features(c);
      return true;
    };
  } else if (params.features == "relation" || params.features == "context") {
    FeatureKind kind =
        params.features == "relation" ? FeatureKind::kRelation : FeatureKind::kContext;
    // The program is what the model sees: features of the rewritten loop program, not the knobs.
    features = [&space, program = op.program, kind](const Config& c, std::vector<float>* out) {
      RewriteResult<Program> r = space.instantiate(c)(program);
      if (!r) return false;
      *out = extract_features(r.program(), kind);
      return true;
    };
  } else {
    throw_error("unknown features '{}' (relation, context, knob)", params.features);
  }
  return std::make_unique<ModelTuner>(space, params, std::move(model), std::move(features));
}

}  // namespace tessera
