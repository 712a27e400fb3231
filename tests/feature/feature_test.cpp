#include "feature/feature.h"

#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <string>

#include "feature/loop_stats.h"
#include "ops/workload.h"
#include "schedule/strategy_parser.h"
#include "te/error.h"

namespace tessera {
namespace {

constexpr const char* kBlocked =
    "tile(i, j, 32, 32) ; split(k, 4) ; reorder(i.outer, j.outer, k.outer, i.inner, k.inner, "
    "j.inner) ; vectorize(j.inner) ; pack(B, 1, 32) ; cache_write(C, j.outer) ; "
    "unroll(k.inner) ; parallel(i.outer)";

Program scheduled(const char* workload, const char* strategy) {
  OpInstance op = instantiate(parse_workload(workload));
  RewriteResult<Program> r = parse_strategy(strategy)(op.program);
  if (!r.ok()) ADD_FAILURE() << r.message();
  return r.ok() ? r.program() : op.program;
}

std::vector<Program> varied_programs() {
  return {
      scheduled("matmul:M=64,N=64,K=64", "id"),
      scheduled("matmul:M=64,N=64,K=64", "tile(i, j, 8, 8)"),
      scheduled("matmul:M=128,N=128,K=128", kBlocked),
      scheduled("conv2d:N=1,C=4,H=8,W=8,O=4,K=3,S=1,P=1", "id"),
      scheduled("conv2d_bias_relu:N=1,C=4,H=8,W=8,O=4,K=3,S=2,P=1", "id"),
      scheduled("add:M=16,N=16", "id"),
  };
}

float feature(const std::vector<float>& v, FeatureKind kind, const std::string& name) {
  std::vector<std::string> names = feature_names(kind);
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i] == name) return v.at(i);
  }
  ADD_FAILURE() << "no feature named " << name;
  return NAN;
}

TEST(Feature, FixedLengthWhateverTheLoopStructure) {
  for (FeatureKind kind : {FeatureKind::kRelation, FeatureKind::kContext, FeatureKind::kTree}) {
    std::vector<std::string> names = feature_names(kind);
    EXPECT_EQ(names.size(), feature_length(kind));
    EXPECT_EQ(std::set<std::string>(names.begin(), names.end()).size(), names.size());
    for (const Program& p : varied_programs()) {
      std::vector<float> v = extract_features(p, kind);
      ASSERT_EQ(v.size(), feature_length(kind)) << p.name;
      for (float x : v) EXPECT_TRUE(std::isfinite(x));
    }
  }
  EXPECT_EQ(feature_length(FeatureKind::kContext), 328u);
  EXPECT_EQ(feature_length(FeatureKind::kRelation), 548u);
  TreeLayout t = tree_layout();
  EXPECT_EQ(feature_length(FeatureKind::kTree), t.globals + t.nodes * t.node_width);
  EXPECT_EQ(t.node_width, 2u + 39u);  // presence, parent, one loop-context vector
  for (FeatureKind kind : {FeatureKind::kRelation, FeatureKind::kContext, FeatureKind::kTree})
    EXPECT_EQ(parse_feature_kind(feature_kind_name(kind)), kind);
  EXPECT_THROW(parse_feature_kind("knob"), Error);
  // A program without loops still has every feature.
  Program empty;
  EXPECT_EQ(extract_features(empty, FeatureKind::kRelation).size(),
            feature_length(FeatureKind::kRelation));
}

TEST(Feature, DeterministicAndBatchedExtractionAgrees) {
  std::vector<Program> programs = varied_programs();
  for (FeatureKind kind : {FeatureKind::kRelation, FeatureKind::kContext, FeatureKind::kTree}) {
    std::vector<std::vector<float>> batch = extract_features(programs, kind, 2);
    ASSERT_EQ(batch.size(), programs.size());
    for (size_t i = 0; i < programs.size(); ++i) {
      EXPECT_EQ(extract_features(programs[i], kind), batch[i]);
      EXPECT_EQ(extract_features(programs[i], kind), extract_features(programs[i], kind));
    }
  }
}

TEST(Feature, PlainMatmulContextIsTheUpdateNest) {
  Program p = scheduled("matmul:M=64,N=64,K=64", "id");
  std::vector<float> v = extract_features(p, FeatureKind::kContext);
  auto f = [&](const std::string& n) { return feature(v, FeatureKind::kContext, n); };
  // Innermost first: k, j, i; the init nest is not the main nest.
  EXPECT_FLOAT_EQ(f("ctx0.log_extent"), std::log2(65.0f));
  EXPECT_FLOAT_EQ(f("ctx0.nest_level"), 2);
  EXPECT_FLOAT_EQ(f("ctx0.innermost"), 1);
  EXPECT_FLOAT_EQ(f("ctx2.nest_level"), 0);
  EXPECT_FLOAT_EQ(f("ctx2.log_inner_product"), std::log2(1.0f + 64 * 64 * 64));
  EXPECT_FLOAT_EQ(f("ctx0.log_fma"), std::log2(65.0f));
  EXPECT_FLOAT_EQ(f("ctx3.log_extent"), 0);  // padding
  // Along k: C (read and written, 128 accesses) does not move; A moves by 1, B by a row (64).
  EXPECT_FLOAT_EQ(f("ctx0.buf0.log_count"), std::log2(129.0f));
  EXPECT_FLOAT_EQ(f("ctx0.buf0.log_stride"), 0);
  EXPECT_FLOAT_EQ(f("ctx0.buf0.written"), 1);
  EXPECT_FLOAT_EQ(f("ctx0.buf1.log_stride"), 1);                 // A
  EXPECT_FLOAT_EQ(f("ctx0.buf2.log_stride"), std::log2(65.0f));  // B
  EXPECT_FLOAT_EQ(f("ctx0.buf2.log_bytes"), std::log2(1.0f + 64 * 4));
  // The whole of B is touched by the outermost loop, and reused 64 times.
  EXPECT_FLOAT_EQ(f("ctx2.buf2.log_bytes"), std::log2(1.0f + 64 * 64 * 4));
  EXPECT_FLOAT_EQ(f("ctx2.buf2.log_reuse"), std::log2(65.0f));
  EXPECT_FLOAT_EQ(f("g.num_nests"), 2);
  EXPECT_FLOAT_EQ(f("g.main_float_share"), 1);
}

TEST(Feature, BlockedMatmulSeesAnnotationsAndStages) {
  Program p = scheduled("matmul:M=128,N=128,K=128", kBlocked);
  ProgramStats s = analyze_loops(p);
  ASSERT_EQ(s.main_path.size(), 6u);
  EXPECT_EQ(s.loops[s.main_path.back()].name, "j.inner");
  std::vector<float> v = extract_features(p, FeatureKind::kContext);
  auto f = [&](const std::string& n) { return feature(v, FeatureKind::kContext, n); };
  EXPECT_FLOAT_EQ(f("ctx0.vectorized"), 1);
  EXPECT_FLOAT_EQ(f("ctx1.unrolled"), 1);
  EXPECT_FLOAT_EQ(f("ctx5.parallel"), 1);
  EXPECT_FLOAT_EQ(f("g.num_allocations"), 2);
  EXPECT_FLOAT_EQ(f("g.parallel_float_share"), 1);
  EXPECT_FLOAT_EQ(f("g.log_vector_extent"), std::log2(33.0f));
  // The local accumulator is read and written with unit stride along j.inner.
  EXPECT_FLOAT_EQ(f("ctx0.buf0.log_stride"), 1);
  std::vector<float> r = extract_features(p, FeatureKind::kRelation);
  EXPECT_FLOAT_EQ(feature(r, FeatureKind::kRelation, "max.vectorized.log_extent"),
                  std::log2(33.0f));
  EXPECT_FLOAT_EQ(feature(r, FeatureKind::kRelation, "max.parallel.log_extent"), std::log2(5.0f));
}

// The tree row holds the loop nest itself: the main nest first, every node's parent before it,
// the loops' context vectors as kContext computes them.
TEST(Feature, TreeRowsAreTheLoopNestMainNestFirst) {
  Program p = scheduled("matmul:M=64,N=64,K=64", "id");
  ProgramStats s = analyze_loops(p);
  ASSERT_EQ(s.loops.size(), 5u);  // init nest (i, j), update nest (i, j, k)
  std::vector<float> v = extract_features(p, FeatureKind::kTree);
  auto f = [&](const std::string& n) { return feature(v, FeatureKind::kTree, n); };
  // Slots 0-2: the update nest i > j > k; slots 3-4: the init nest; slot 5 on: empty.
  EXPECT_FLOAT_EQ(f("node0.present"), 1);
  EXPECT_FLOAT_EQ(f("node0.parent"), 0);
  EXPECT_FLOAT_EQ(f("node1.parent"), 1);
  EXPECT_FLOAT_EQ(f("node2.parent"), 2);
  EXPECT_FLOAT_EQ(f("node2.innermost"), 1);
  EXPECT_FLOAT_EQ(f("node2.log_fma"), std::log2(65.0f));
  EXPECT_FLOAT_EQ(f("node3.parent"), 0);
  EXPECT_FLOAT_EQ(f("node4.parent"), 4);
  EXPECT_FLOAT_EQ(f("node4.log_fma"), 0);
  EXPECT_FLOAT_EQ(f("node5.present"), 0);
  EXPECT_FLOAT_EQ(f("node5.log_extent"), 0);
  // The innermost update loop's vector is kContext's ctx0.
  std::vector<float> c = extract_features(p, FeatureKind::kContext);
  std::vector<std::string> tree_names = feature_names(FeatureKind::kTree);
  std::vector<std::string> context_names = feature_names(FeatureKind::kContext);
  for (size_t i = 0; i < tree_names.size(); ++i) {
    if (tree_names[i].rfind("node2.", 0) != 0 || tree_names[i] == "node2.present" ||
        tree_names[i] == "node2.parent")
      continue;
    std::string ctx = "ctx0." + tree_names[i].substr(6);
    EXPECT_FLOAT_EQ(v[i], feature(c, FeatureKind::kContext, ctx)) << tree_names[i];
  }
  // Every present node's parent is an earlier present slot, in every program.
  TreeLayout t = tree_layout();
  for (const Program& q : varied_programs()) {
    std::vector<float> row = extract_features(q, FeatureKind::kTree);
    size_t present = 0;
    for (size_t i = 0; i < t.nodes; ++i) {
      const float* node = row.data() + t.globals + i * t.node_width;
      if (node[0] == 0) continue;
      ++present;
      EXPECT_LE(node[1], static_cast<float>(i)) << q.name;
      if (node[1] > 0) {
        EXPECT_EQ(row[t.globals + (size_t(node[1]) - 1) * t.node_width], 1);
      }
    }
    EXPECT_EQ(present, std::min(t.nodes, analyze_loops(q).loops.size())) << q.name;
  }
}

TEST(Feature, ChangeWhenTheScheduleChanges) {
  const char* w = "matmul:M=64,N=64,K=64";
  Program serial = scheduled(w, "split(j, 16) ; reorder(i, j.outer, k, j.inner)");
  Program vec = scheduled(w, "split(j, 16) ; reorder(i, j.outer, k, j.inner) ; vectorize(j.inner)");
  Program par = scheduled(w, "split(j, 16) ; reorder(i, j.outer, k, j.inner) ; parallel(i)");
  Program other = scheduled(w, "split(j, 8) ; reorder(i, j.outer, k, j.inner)");
  for (FeatureKind kind : {FeatureKind::kRelation, FeatureKind::kContext, FeatureKind::kTree}) {
    std::vector<float> a = extract_features(serial, kind);
    EXPECT_NE(a, extract_features(vec, kind)) << feature_kind_name(kind);
    EXPECT_NE(a, extract_features(par, kind)) << feature_kind_name(kind);
    EXPECT_NE(a, extract_features(other, kind)) << feature_kind_name(kind);
  }
  std::vector<float> v = extract_features(vec, FeatureKind::kContext);
  EXPECT_FLOAT_EQ(feature(v, FeatureKind::kContext, "ctx0.vectorized"), 1);
  EXPECT_FLOAT_EQ(feature(v, FeatureKind::kContext, "g.vectorized_float_share"), 1);
}

TEST(Feature, RelationFeaturesFollowTheDefinition) {
  // R(a|b)_t = max a over loops with b < beta_t: for matmul 64^3 every loop has extent 64
  // (log2 65 ~ 6.02), so extent-below-2^6 selects nothing and extent-below-2^8 selects all.
  Program p = scheduled("matmul:M=64,N=64,K=64", "id");
  std::vector<float> r = extract_features(p, FeatureKind::kRelation);
  auto f = [&](const std::string& n) { return feature(r, FeatureKind::kRelation, n); };
  EXPECT_FLOAT_EQ(f("rel.log_inner_product|log_extent<2^6"), 0);
  EXPECT_FLOAT_EQ(f("rel.log_inner_product|log_extent<2^8"), std::log2(1.0f + 64 * 64 * 64));
  EXPECT_FLOAT_EQ(f("max.all.log_inner_product"), std::log2(1.0f + 64 * 64 * 64));
  EXPECT_FLOAT_EQ(f("max.vectorized.log_extent"), 0);
}

}  // namespace
}  // namespace tessera
