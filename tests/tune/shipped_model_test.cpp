// The cost models shipped with tessera: present for the ISAs of the machines it runs on, loadable
// by this build, trained on the workloads their README names, and used exactly when a run has
// nothing better.
#include "tune/shipped_model.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "measure/measure.h"
#include "ops/workload.h"
#include "runtime/isa.h"
#include "tune/global_model.h"
#include "tune_test_util.h"

namespace tessera {
namespace {

using testing::TempDb;

// The canonical workloads of the list an ISA's model is trained on: bench/workloads/
// pretrain-corpus.txt, in AVX2's channel blocks for AVX2 (pretrain-corpus-avx2.txt).
std::set<std::string> corpus_workloads(const std::string& isa) {
  std::ifstream in(std::string(TESSERA_SOURCE_DIR) + "/bench/workloads/pretrain-corpus" +
                   (isa == "avx2" ? "-avx2" : "") + ".txt");
  std::set<std::string> out;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream words(line);
    std::string name, workload;
    words >> name >> workload;
    out.insert(canonical_workload(workload));
  }
  return out;
}

TEST(ShippedModel, ShipsForTheIsaOfThisMachine) {
  const std::string isa = target_isa().name;
  if (isa == "sse") GTEST_SKIP() << "no model ships for SSE-only machines";
  EXPECT_TRUE(shipped_cost_model(isa).has_value()) << "no shipped cost model for " << isa;
  EXPECT_FALSE(shipped_cost_model("no-such-isa").has_value());
}

TEST(ShippedModel, EveryShippedModelLoadsAndWasTrainedOnTheCorpusOnly) {
  int found = 0;
  for (const char* isa : {"avx512", "avx2"}) {
    const std::set<std::string> corpus = corpus_workloads(isa);
    ASSERT_GT(corpus.size(), 30u) << isa;
    std::optional<std::string> path = shipped_cost_model(isa);
    if (!path) continue;
    ++found;
    std::shared_ptr<GlobalModel> g = GlobalModel::load_pretrained(*path);
    EXPECT_EQ(g->features(), "relation") << *path;
    EXPECT_EQ(g->objective(), XGBoostParams::Objective::kRank) << *path;
    EXPECT_GT(g->records(), 500u) << *path;
    ASSERT_FALSE(g->workloads().empty());
    for (const std::string& w : g->workloads())
      EXPECT_TRUE(corpus.count(w)) << *path << " was trained on " << w << ", not in the corpus";
  }
  EXPECT_GT(found, 0);
}

TEST(ShippedModel, DefaultOnlyWhenTheRunHasNothingBetter) {
  const std::optional<std::string> shipped = shipped_cost_model(target_isa().name);
  if (!shipped) GTEST_SKIP() << "no model ships for " << target_isa().name;
  const std::string key = "the-key-of-this-machine";
  TuneParams params;  // xgb, relation features, transfer auto
  EXPECT_EQ(default_pretrained(params, nullptr, key), shipped);

  TuneParams other = params;
  other.transfer = "off";
  EXPECT_FALSE(default_pretrained(other, nullptr, key));
  other = params;
  other.tuner = "xgb-reg";  // the shipped model ranks; a regression tuner cannot use it
  EXPECT_FALSE(default_pretrained(other, nullptr, key));
  other = params;
  other.features = "context";
  EXPECT_FALSE(default_pretrained(other, nullptr, key));
  other = params;
  other.pretrained = "mine.json";
  EXPECT_FALSE(default_pretrained(other, nullptr, key));

  TempDb tmp("shipped_default");
  RecordDb db = RecordDb::open(tmp.path, RecordDb::Mode::kReadWrite);
  EXPECT_EQ(default_pretrained(params, &db, key), shipped);
  testing::add_synthetic_records(db, testing::fake_target(), "matmul:M=16,N=16,K=16", 3, 1);
  // Records of another machine do not help this one: still the shipped model.
  EXPECT_EQ(default_pretrained(params, &db, key), shipped);
  EXPECT_FALSE(default_pretrained(params, &db, testing::fake_target().key()));
}

}  // namespace
}  // namespace tessera
