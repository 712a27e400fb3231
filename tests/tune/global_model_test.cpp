// The global model of transfer learning: trained on every record of the DB for one target,
// saved next to the DB, reloaded while the DB is unchanged, refitted when it grows, rebuilt from
// a corrupt file with one warning; knob features only across one knob layout.
#include "tune/global_model.h"

#include <gtest/gtest.h>

#include <fstream>

#include "runtime/output_file.h"
#include "tune/tune.h"
#include "tune_test_util.h"

namespace tessera {
namespace {

using testing::add_synthetic_records;
using testing::fake_target;
using testing::TempDb;

const char* kA = "matmul:M=32,N=32,K=16";
const char* kB = "matmul:M=64,N=32,K=32";
const char* kC = "matmul:M=16,N=64,K=16";

// Relation features of some configurations of kC: what a tuner of kC would ask the model.
std::vector<std::vector<float>> probe_rows() {
  Workload w = parse_workload(kC);
  ConfigSpace space = space_for(w);
  OpInstance op = instantiate(w);
  auto features = make_feature_fn(space, op.program, "relation");
  std::mt19937_64 rng(5);
  std::vector<std::vector<float>> rows;
  while (rows.size() < 50) {
    std::vector<float> f;
    if (features(space.sample(rng), &f)) rows.push_back(f);
  }
  return rows;
}

TEST(GlobalModel, SavedModelReloadsAndPredictsIdenticallyAndRefitsWhenTheDbGrows) {
  TempDb tmp("global_reload");
  RecordDb db = RecordDb::open(tmp.path, RecordDb::Mode::kReadWrite);
  Target target = fake_target();
  add_synthetic_records(db, target, kA, 40, 1);
  add_synthetic_records(db, target, kB, 40, 2, 3.0);

  GlobalModel a(tmp.path, "relation", XGBoostParams::Objective::kRank);
  EXPECT_EQ(a.model_path(), tmp.path + ".global-relation.model");
  EXPECT_TRUE(a.refresh(db, target.key()));
  EXPECT_TRUE(a.rebuilt());
  ASSERT_TRUE(a.model());
  EXPECT_EQ(a.records(), 80u);
  EXPECT_EQ(a.workloads().size(), 2u);
  EXPECT_TRUE(a.knows_other_than(kA));
  EXPECT_TRUE(std::filesystem::exists(a.model_path()));
  EXPECT_TRUE(std::filesystem::exists(a.stamp_path()));
  EXPECT_FALSE(a.refresh(db, target.key())) << "nothing new: nothing to do";

  std::vector<std::vector<float>> rows = probe_rows();
  std::vector<float> pa = a.model()->predict(rows);
  GlobalModel b(tmp.path, "relation", XGBoostParams::Objective::kRank);
  std::vector<std::string> warnings;
  EXPECT_TRUE(b.refresh(db, target.key(), [&](const std::string& w) { warnings.push_back(w); }));
  EXPECT_FALSE(b.rebuilt()) << "the saved model is up to date: loaded, not refitted";
  EXPECT_TRUE(warnings.empty());
  ASSERT_TRUE(b.model());
  EXPECT_EQ(b.model()->predict(rows), pa);
  EXPECT_EQ(b.records(), 80u);
  EXPECT_EQ(b.workloads(), a.workloads());

  add_synthetic_records(db, target, kC, 20, 3);
  EXPECT_TRUE(b.refresh(db, target.key()));
  EXPECT_TRUE(b.rebuilt());
  EXPECT_EQ(b.records(), 100u);
  EXPECT_EQ(b.workloads().size(), 3u);

  // Another target's records are not this one's.
  GlobalModel other(tmp.path + "-other", "relation", XGBoostParams::Objective::kRank);
  Target t2 = fake_target();
  t2.cpu_model = "another";
  other.refresh(db, t2.key());
  EXPECT_FALSE(other.model());
  EXPECT_EQ(other.records(), 0u);
}

// A pretrained model (tessera pretrain): fitted on records of several DBs, written as one file
// that says what it was trained on, read back predicting exactly as fitted, and not changed by a
// DB's refresh; files that are not one are refused by name.
TEST(GlobalModel, PretrainedModelRoundTripsAndIgnoresTheDb) {
  TempDb tmp("global_pretrained");
  RecordDb db = RecordDb::open(tmp.path, RecordDb::Mode::kReadWrite);
  Target target = fake_target();
  add_synthetic_records(db, target, kA, 40, 1);
  add_synthetic_records(db, target, kB, 40, 2, 3.0);
  RecordQuery q;
  q.target_key = target.key();
  GlobalModel fitted(tmp.path + ".model", "relation", XGBoostParams::Objective::kRank);
  fitted.fit(db.records(q), target.key());
  ASSERT_TRUE(fitted.model());
  const std::string path = tmp.path + ".cost-model.json";
  fitted.save_pretrained(path);
  EXPECT_EQ(file_kind(path), FileKind::kCostModel);

  std::shared_ptr<GlobalModel> loaded = GlobalModel::load_pretrained(path);
  ASSERT_TRUE(loaded->model());
  EXPECT_TRUE(loaded->pretrained());
  EXPECT_EQ(loaded->target_key(), target.key());
  EXPECT_EQ(loaded->features(), "relation");
  EXPECT_EQ(loaded->objective(), XGBoostParams::Objective::kRank);
  EXPECT_EQ(loaded->records(), 80u);
  EXPECT_EQ(loaded->workloads(), fitted.workloads());
  std::vector<std::vector<float>> rows = probe_rows();
  EXPECT_EQ(loaded->model()->predict(rows), fitted.model()->predict(rows));
  add_synthetic_records(db, target, kC, 20, 3);
  EXPECT_FALSE(loaded->refresh(db, target.key())) << "a pretrained model is not refitted";
  EXPECT_EQ(loaded->records(), 80u);

  auto refused = [&](const std::string& text, const std::string& message) {
    const std::string bad = tmp.path + ".bad.json";
    { std::ofstream(bad) << text; }
    try {
      GlobalModel::load_pretrained(bad);
      ADD_FAILURE() << "accepted: " << text.substr(0, 60);
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
    }
  };
  refused("not json", "is not a tessera cost model");
  refused(R"({"format":"tessera-cost-model","version":7})", "version 7");
  refused(R"({"format":"tessera-cost-model","version":1,"features":"knob"})", "knob features");
  refused(R"({"format":"tessera-cost-model","version":1,"features":"relation",)"
          R"("objective":"rank:pairwise","model":{"learner":1}})",
          "holds no XGBoost model");
  EXPECT_THROW(GlobalModel::load_pretrained(tmp.path + ".missing"), Error);
}

TEST(GlobalModel, ACorruptModelOrStampIsRebuiltWithOneWarningAndNoRecordIsLost) {
  TempDb tmp("global_corrupt");
  RecordDb db = RecordDb::open(tmp.path, RecordDb::Mode::kReadWrite);
  Target target = fake_target();
  add_synthetic_records(db, target, kA, 30, 1);
  add_synthetic_records(db, target, kB, 30, 2);
  GlobalModel a(tmp.path, "relation", XGBoostParams::Objective::kRank);
  a.refresh(db, target.key());
  ASSERT_TRUE(a.model());

  std::ofstream(a.model_path(), std::ios::trunc) << "{\"learner\": tru";  // cut short
  GlobalModel b(tmp.path, "relation", XGBoostParams::Objective::kRank);
  std::vector<std::string> warnings;
  auto warn = [&](const std::string& w) { warnings.push_back(w); };
  EXPECT_TRUE(b.refresh(db, target.key(), warn));
  EXPECT_TRUE(b.rebuilt());
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_EQ(warnings[0].find('\n'), std::string::npos) << warnings[0];
  EXPECT_NE(warnings[0].find(a.model_path()), std::string::npos) << warnings[0];
  EXPECT_NE(warnings[0].find("rebuilding"), std::string::npos) << warnings[0];
  ASSERT_TRUE(b.model());
  EXPECT_EQ(b.records(), 60u);
  EXPECT_EQ(db.records().size(), 60u);

  // The rebuilt file is good again: the next process loads it quietly.
  warnings.clear();
  GlobalModel c(tmp.path, "relation", XGBoostParams::Objective::kRank);
  c.refresh(db, target.key(), warn);
  EXPECT_FALSE(c.rebuilt());
  EXPECT_TRUE(warnings.empty());

  // A readable model of another feature length (an older tessera's): rebuilt as well.
  GlobalModel context(tmp.path, "context", XGBoostParams::Objective::kRank);
  context.refresh(db, target.key());
  std::filesystem::copy_file(context.model_path(), a.model_path(),
                             std::filesystem::copy_options::overwrite_existing);
  GlobalModel e(tmp.path, "relation", XGBoostParams::Objective::kRank);
  e.refresh(db, target.key(), warn);
  EXPECT_TRUE(e.rebuilt());
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("trained on 328 features"), std::string::npos) << warnings[0];
  warnings.clear();

  std::ofstream(a.stamp_path(), std::ios::trunc) << "not json";
  GlobalModel d(tmp.path, "relation", XGBoostParams::Objective::kRank);
  d.refresh(db, target.key(), warn);
  EXPECT_TRUE(d.rebuilt());
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("stamp"), std::string::npos) << warnings[0];
  EXPECT_TRUE(d.model());
}

TEST(GlobalModel, KnobFeaturesTransferOnlyBetweenSpacesOfOneLayout) {
  TempDb tmp("global_knob");
  RecordDb db = RecordDb::open(tmp.path, RecordDb::Mode::kReadWrite);
  Target target = fake_target();
  const char* conv = "conv2d:N=1,C=8,H=8,W=8,O=16,K=3,S=1,P=1";
  add_synthetic_records(db, target, kA, 20, 1);
  add_synthetic_records(db, target, kB, 20, 2);
  add_synthetic_records(db, target, conv, 20, 3);
  std::string matmul_layout = knob_layout(space_for(parse_workload(kC)));
  EXPECT_EQ(matmul_layout, knob_layout(space_for(parse_workload(kA))));
  EXPECT_NE(matmul_layout, knob_layout(space_for(parse_workload(conv))));

  GlobalModel knob(tmp.path, "knob", XGBoostParams::Objective::kRank, matmul_layout);
  knob.refresh(db, target.key());
  EXPECT_EQ(knob.workloads(), (std::set<std::string>{kA, kB}));
  ASSERT_TRUE(knob.model());
  ConfigSpace matmul_space = space_for(parse_workload(kC));
  EXPECT_EQ(
      knob.model()->num_features(),
      matmul_space.knob_features(Config{std::vector<int>(matmul_space.knobs().size(), 0)}).size());

  GlobalModel relation(tmp.path, "relation", XGBoostParams::Objective::kRank);
  relation.refresh(db, target.key());
  EXPECT_EQ(relation.workloads().size(), 3u) << "relation features span operators";
  EXPECT_NE(knob.model_path(), relation.model_path());
  EXPECT_THROW(GlobalModel(tmp.path, "knob", XGBoostParams::Objective::kRank), Error);
}

TEST(GlobalModel, CanonicalWorkloadOrdersKeysLikeTheRegistry) {
  EXPECT_EQ(canonical_workload("matmul:N=2,K=3,M=1"), "matmul:M=1,N=2,K=3");
  EXPECT_EQ(canonical_workload("matmul:M=1,N=2,K=3"), "matmul:M=1,N=2,K=3");
  // Optional keys at their defaults are dropped; the others follow the required keys.
  EXPECT_EQ(canonical_workload("conv2d:G=2,N=1,C=4,H=8,W=8,O=4,K=3,S=1,P=1,D=1"),
            "conv2d:N=1,C=4,H=8,W=8,O=4,K=3,S=1,P=1,G=2");
  EXPECT_THROW(canonical_workload("matmul:M=1,N=2"), Error);
  EXPECT_THROW(canonical_workload("matmul:M=1,N=2,K=3,Q=4"), Error);
  EXPECT_THROW(canonical_workload("nosuchop:M=1"), Error);
}

}  // namespace
}  // namespace tessera
