// The tuner a name selects, with the feature extraction and cost model it needs.
#include <fmt/ranges.h>

#include <algorithm>
#include <memory>
#include <set>
#include <string>

#include "feature/feature.h"
#include "model/transfer_model.h"
#include "model/treegru_model.h"
#include "model/xgboost_model.h"
#include "te/error.h"
#include "tune/baseline_tuners.h"
#include "tune/model_tuner.h"
#include "tune/shipped_model.h"

namespace tessera {

std::function<bool(const Config&, std::vector<float>*)> make_feature_fn(
    const ConfigSpace& space, const Program& program, const std::string& features) {
  if (features == "knob") {
    return [&space](const Config& c, std::vector<float>* out) {
      *out = space.knob_features(c);
      return true;
    };
  }
  if (features == "relation" || features == "context" || features == "tree") {
    FeatureKind kind = parse_feature_kind(features);
    // The program is what the model sees: features of the rewritten loop program, not the knobs.
    return [&space, program, kind](const Config& c, std::vector<float>* out) {
      RewriteResult<Program> r = space.instantiate(c)(program);
      if (!r) return false;
      *out = extract_features(r.program(), kind);
      return true;
    };
  }
  throw_error("unknown features '{}' (relation, context, tree, knob)", features);
}

bool is_xgb_tuner(const std::string& tuner) {
  return tuner == "xgb" || tuner == "xgb-reg";
}
bool is_treegru_tuner(const std::string& tuner) {
  return tuner == "treegru" || tuner == "treegru-reg";
}

const std::vector<std::string>& tuner_names() {
  static const std::vector<std::string> names{"xgb",    "xgb-reg", "treegru", "treegru-reg",
                                              "random", "grid",    "ga"};
  return names;
}

namespace {
[[noreturn]] void unknown_tuner(const std::string& tuner) {
  throw_error("unknown tuner '{}' ({})", tuner, fmt::join(tuner_names(), ", "));
}
}  // namespace

void check_tuner_names(const TuneParams& params) {
  static const std::set<std::string> features{"relation", "context", "knob"};
  const std::vector<std::string>& tuners = tuner_names();
  if (std::find(tuners.begin(), tuners.end(), params.tuner) == tuners.end())
    unknown_tuner(params.tuner);
  if (!features.count(params.features))
    throw_error("unknown features '{}' (relation, context, knob)", params.features);
  // Transfer is XGBoost's global model under a local correction (model/transfer_model.h), or a
  // pretrained TreeGRU the tuner's fits go on training.
  const bool pretrained = !params.pretrained.empty() && params.pretrained != kNoPretrained;
  if (pretrained && !is_xgb_tuner(params.tuner) && !is_treegru_tuner(params.tuner))
    throw_error("--pretrained needs a model tuner (xgb, xgb-reg, treegru, treegru-reg), not {}",
                params.tuner);
  if (params.transfer == "on" && !is_xgb_tuner(params.tuner))
    throw_error("--transfer on needs an xgb tuner (xgb, xgb-reg), not {}", params.tuner);
  if (pretrained && is_treegru_tuner(params.tuner) && params.transfer == "off")
    throw_error("--pretrained and --transfer off contradict each other");
}

namespace {

TreeGRUParams treegru_params(const TuneParams& params) {
  TreeGRUParams gru;
  gru.objective = params.tuner == "treegru" ? TreeGRUParams::Objective::kRank
                                            : TreeGRUParams::Objective::kRegression;
  gru.seed = params.seed;
  return gru;
}

}  // namespace

std::unique_ptr<TreeGRUModel> load_pretrained_treegru(const TuneParams& params) {
  const TreeGRUParams gru = treegru_params(params);
  auto model = std::make_unique<TreeGRUModel>(gru);
  model->load(params.pretrained);
  if (model->params().objective != gru.objective)
    throw_error(
        "{} is a TreeGRU for the {} tuner, not {}", params.pretrained,
        model->params().objective == TreeGRUParams::Objective::kRank ? "treegru" : "treegru-reg",
        params.tuner);
  return model;
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
  if (is_treegru_tuner(params.tuner)) {
    const bool pretrained = !params.pretrained.empty() && params.pretrained != kNoPretrained;
    std::unique_ptr<TreeGRUModel> model =
        pretrained ? load_pretrained_treegru(params)
                   : std::make_unique<TreeGRUModel>(treegru_params(params));
    auto tuner = std::make_unique<ModelTuner>(space, params, std::move(model),
                                              make_feature_fn(space, op.program, "tree"));
    // Pretrained, it proposes from the first batch; each fit goes on from its weights.
    if (pretrained) tuner->use_model_from_start();
    return tuner;
  }
  if (!is_xgb_tuner(params.tuner)) unknown_tuner(params.tuner);
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
