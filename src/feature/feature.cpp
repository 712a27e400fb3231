#include "feature/feature.h"

#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <exception>

#include "feature/loop_stats.h"
#include "te/error.h"

namespace tessera {
namespace {

// Layout constants (docs/cost-model.md describes the layout they produce).
constexpr int kContextLoops = 8;  // loops of the main nest, innermost first
constexpr int kBufferSlots = 5;   // buffer touches per loop, most accessed first
constexpr int kRelationAxes = 7;  // per-loop features the relation features relate
constexpr int kThresholds = 12;   // beta_t = 2t in log2 units: 4, 16, ..., 2^24
constexpr float kThresholdStep = 2;
constexpr int kTreeNodes = 32;  // loop slots of kTree: enough for every template's main nest

float lg(double x) {
  return static_cast<float>(std::log2(1.0 + std::max(x, 0.0)));
}

// Features are written through a sink so that one piece of code defines both the values and
// their names: the value sink ignores the names, the name sink ignores the values.
struct ValueSink {
  std::vector<float>* out;
  template <typename Name>
  void add(float v, Name&&) {
    out->push_back(std::isfinite(v) ? v : 0.0f);
  }
};

struct NameSink {
  std::vector<std::string>* out;
  void add(float, const char* name) { out->emplace_back(name); }
  template <typename Name>
  void add(float, Name&& name) {
    out->push_back(name());
  }
};

template <typename Sink>
void emit_globals(const ProgramStats& s, Sink& out) {
  double flops = s.total_ops.float_ops();
  auto share = [&](double part) { return flops > 0 ? static_cast<float>(part / flops) : 0.0f; };
  out.add(lg(flops), "g.log_float_ops");
  out.add(lg(s.total_ops.int_ops), "g.log_int_ops");
  out.add(lg(s.store_executions), "g.log_store_executions");
  out.add(lg(s.bytes_accessed), "g.log_bytes_accessed");
  out.add(static_cast<float>(s.loops.size()), "g.num_loops");
  out.add(static_cast<float>(s.num_nests), "g.num_nests");
  out.add(static_cast<float>(s.num_allocations), "g.num_allocations");
  out.add(lg(s.allocated_bytes), "g.log_allocated_bytes");
  out.add(lg(s.max_parallel_extent), "g.log_parallel_extent");
  out.add(lg(s.max_vector_extent), "g.log_vector_extent");
  out.add(lg(s.max_unrolled_product), "g.log_unrolled_product");
  out.add(share(s.float_ops_parallel), "g.parallel_float_share");
  out.add(share(s.float_ops_vectorized), "g.vectorized_float_share");
  out.add(share(s.main_float_ops), "g.main_float_share");
  out.add(lg(s.guarded_store_executions), "g.log_guarded_executions");
  out.add(s.store_executions > 0
              ? static_cast<float>(s.guarded_store_executions / s.store_executions)
              : 0.0f,
          "g.guarded_share");
}

constexpr const char* kLoopScalarNames[] = {
    "log_extent", "nest_level",      "log_outer_product", "log_inner_product", "serial",
    "parallel",   "vectorized",      "unrolled",          "log_float_add",     "log_float_mul",
    "log_fma",    "log_float_other", "log_int_ops",       "innermost"};
constexpr const char* kSlotNames[] = {"log_stride", "log_count", "log_bytes", "log_reuse",
                                      "written"};
constexpr int kLoopScalars = sizeof(kLoopScalarNames) / sizeof(kLoopScalarNames[0]);
constexpr int kSlotFeatures = sizeof(kSlotNames) / sizeof(kSlotNames[0]);

// One loop's context vector; l == nullptr pads with zeros. Names are `<prefix><index>.<name>`.
template <typename Sink>
void emit_loop(const LoopStats* l, int index, Sink& out, const char* prefix = "ctx") {
  float scalars[kLoopScalars] = {};
  if (l) {
    float v[kLoopScalars] = {lg(double(l->extent)),
                             static_cast<float>(l->depth),
                             lg(l->outer_product),
                             lg(l->inner_product),
                             l->kind == ForKind::kSerial ? 1.0f : 0.0f,
                             l->kind == ForKind::kParallel ? 1.0f : 0.0f,
                             l->kind == ForKind::kVectorized ? 1.0f : 0.0f,
                             l->kind == ForKind::kUnrolled ? 1.0f : 0.0f,
                             lg(l->ops.float_add),
                             lg(l->ops.float_mul),
                             lg(l->ops.fma),
                             lg(l->ops.float_other),
                             lg(l->ops.int_ops),
                             l->innermost ? 1.0f : 0.0f};
    std::copy(std::begin(v), std::end(v), scalars);
  }
  for (int f = 0; f < kLoopScalars; ++f) {
    out.add(scalars[f], [&] { return fmt::format("{}{}.{}", prefix, index, kLoopScalarNames[f]); });
  }
  for (int b = 0; b < kBufferSlots; ++b) {
    float slot[kSlotFeatures] = {};
    if (l && b < static_cast<int>(l->touches.size())) {
      const BufferTouch& t = l->touches[b];
      slot[0] = lg(t.stride);
      slot[1] = lg(t.count);
      slot[2] = lg(t.bytes);
      slot[3] = lg(t.elements > 0 ? t.count / t.elements : 0);
      slot[4] = t.write ? 1.0f : 0.0f;
    }
    for (int f = 0; f < kSlotFeatures; ++f) {
      out.add(slot[f],
              [&] { return fmt::format("{}{}.buf{}.{}", prefix, index, b, kSlotNames[f]); });
    }
  }
}

template <typename Sink>
void emit_context(const ProgramStats& s, Sink& out) {
  emit_globals(s, out);
  int n = static_cast<int>(s.main_path.size());
  for (int i = 0; i < kContextLoops; ++i) {
    const LoopStats* l = i < n ? &s.loops[s.main_path[n - 1 - i]] : nullptr;
    emit_loop(l, i, out);
  }
}

constexpr const char* kAxisNames[kRelationAxes] = {
    "log_extent",   "log_inner_product", "log_outer_product", "log_bytes",
    "log_accesses", "log_max_reuse",     "log_max_stride"};

std::array<float, kRelationAxes> relation_axes(const LoopStats& l) {
  double bytes = 0, count = 0, reuse = 0, stride = 0;
  for (const BufferTouch& t : l.touches) {
    bytes += t.bytes;
    count += t.count;
    if (t.elements > 0) reuse = std::max(reuse, t.count / t.elements);
    stride = std::max(stride, t.stride);
  }
  return {lg(double(l.extent)),
          lg(l.inner_product),
          lg(l.outer_product),
          lg(bytes),
          lg(count),
          lg(reuse),
          lg(stride)};
}

template <typename Sink>
void emit_relation(const ProgramStats& s, Sink& out) {
  emit_globals(s, out);
  std::vector<std::array<float, kRelationAxes>> z;
  z.reserve(s.loops.size());
  for (const LoopStats& l : s.loops) z.push_back(relation_axes(l));

  // Maxima per loop kind: where the annotations sit relative to sizes and memory.
  static constexpr const char* kGroups[] = {"all", "parallel", "vectorized", "unrolled"};
  for (int g = 0; g < 4; ++g) {
    std::array<float, kRelationAxes> m{};
    for (size_t k = 0; k < z.size(); ++k) {
      ForKind kind = s.loops[k].kind;
      bool in = g == 0 || (g == 1 && kind == ForKind::kParallel) ||
                (g == 2 && kind == ForKind::kVectorized) || (g == 3 && kind == ForKind::kUnrolled);
      if (!in) continue;
      for (int a = 0; a < kRelationAxes; ++a) m[a] = std::max(m[a], z[k][a]);
    }
    for (int a = 0; a < kRelationAxes; ++a) {
      out.add(m[a], [&] { return fmt::format("max.{}.{}", kGroups[g], kAxisNames[a]); });
    }
  }

  // R(a, b)_t = max over loops k with z[k][b] < beta_t of z[k][a] (0 when there is none).
  for (int a = 0; a < kRelationAxes; ++a) {
    for (int b = 0; b < kRelationAxes; ++b) {
      if (a == b) continue;
      float r[kThresholds] = {};
      for (const auto& zk : z) {
        // Thresholds rise, so loop k counts from the first t with beta_t > z[k][b] on.
        int first = static_cast<int>(std::floor(zk[b] / kThresholdStep));
        for (int t = std::max(first, 0); t < kThresholds; ++t) r[t] = std::max(r[t], zk[a]);
      }
      for (int t = 0; t < kThresholds; ++t) {
        out.add(r[t], [&] {
          return fmt::format("rel.{}|{}<2^{:g}", kAxisNames[a], kAxisNames[b],
                             kThresholdStep * (t + 1));
        });
      }
    }
  }
}

// The loops kTree keeps, in slot order: the main nest first (where the time goes when there are
// more loops than slots), every nest in pre-order so that a parent's slot precedes its children's.
std::vector<int> tree_slots(const ProgramStats& s) {
  int n = static_cast<int>(s.loops.size());
  std::vector<int> nest(n, -1);
  for (int k = 0; k < n; ++k) nest[k] = s.loops[k].parent < 0 ? k : nest[s.loops[k].parent];
  int main_nest = s.main_path.empty() ? -1 : nest[s.main_path.front()];
  std::vector<int> order;
  for (int k = 0; k < n; ++k)
    if (nest[k] == main_nest) order.push_back(k);
  for (int k = 0; k < n; ++k)
    if (nest[k] != main_nest) order.push_back(k);
  if (static_cast<int>(order.size()) > kTreeNodes) order.resize(kTreeNodes);
  return order;
}

template <typename Sink>
void emit_tree(const ProgramStats& s, Sink& out) {
  emit_globals(s, out);
  std::vector<int> order = tree_slots(s);
  std::vector<int> slot_of(s.loops.size(), -1);
  for (size_t i = 0; i < order.size(); ++i) slot_of[order[i]] = static_cast<int>(i);
  for (int i = 0; i < kTreeNodes; ++i) {
    const LoopStats* l = i < static_cast<int>(order.size()) ? &s.loops[order[i]] : nullptr;
    out.add(l ? 1.0f : 0.0f, [&] { return fmt::format("node{}.present", i); });
    float parent = l && l->parent >= 0 ? static_cast<float>(slot_of[l->parent] + 1) : 0.0f;
    out.add(parent, [&] { return fmt::format("node{}.parent", i); });
    emit_loop(l, i, out, "node");
  }
}

template <typename Sink>
void emit(const ProgramStats& s, FeatureKind kind, Sink& out) {
  switch (kind) {
    case FeatureKind::kContext:
      emit_context(s, out);
      break;
    case FeatureKind::kTree:
      emit_tree(s, out);
      break;
    case FeatureKind::kRelation:
      emit_relation(s, out);
      break;
  }
}

}  // namespace

const char* feature_kind_name(FeatureKind kind) {
  switch (kind) {
    case FeatureKind::kContext:
      return "context";
    case FeatureKind::kTree:
      return "tree";
    case FeatureKind::kRelation:
      break;
  }
  return "relation";
}

FeatureKind parse_feature_kind(const std::string& name) {
  for (FeatureKind kind : {FeatureKind::kRelation, FeatureKind::kContext, FeatureKind::kTree}) {
    if (name == feature_kind_name(kind)) return kind;
  }
  throw_error("unknown loop-program features '{}' (relation, context, tree)", name);
}

TreeLayout tree_layout() {
  // Counted once: the TreeGRU asks for the layout at every prediction.
  static const size_t globals = [] {
    std::vector<std::string> names;
    NameSink sink{&names};
    emit_globals(ProgramStats{}, sink);
    return names.size();
  }();
  return {globals, kTreeNodes, 2 + kLoopScalars + kBufferSlots * kSlotFeatures};
}

std::vector<std::string> feature_names(FeatureKind kind) {
  std::vector<std::string> names;
  NameSink sink{&names};
  emit(ProgramStats{}, kind, sink);
  return names;
}

size_t feature_length(FeatureKind kind) {
  static const size_t relation = feature_names(FeatureKind::kRelation).size();
  static const size_t context = feature_names(FeatureKind::kContext).size();
  static const size_t tree = feature_names(FeatureKind::kTree).size();
  switch (kind) {
    case FeatureKind::kContext:
      return context;
    case FeatureKind::kTree:
      return tree;
    case FeatureKind::kRelation:
      break;
  }
  return relation;
}

std::vector<float> extract_features(const Program& p, FeatureKind kind) {
  std::vector<float> v;
  v.reserve(feature_length(kind));
  ValueSink sink{&v};
  emit(analyze_loops(p), kind, sink);
  return v;
}

std::vector<std::vector<float>> extract_features(const std::vector<Program>& programs,
                                                 FeatureKind kind, int num_threads) {
  std::vector<std::vector<float>> out(programs.size());
  feature_length(kind);  // initialize the static lengths outside the parallel region
  int threads = num_threads > 0 ? num_threads : omp_get_max_threads();
  std::exception_ptr error;
  int64_t n = static_cast<int64_t>(programs.size());
#pragma omp parallel for schedule(dynamic, 4) num_threads(threads)
  for (int64_t i = 0; i < n; ++i) {
    try {
      out[i] = extract_features(programs[i], kind);
    } catch (...) {
#pragma omp critical(tessera_feature_error)
      if (!error) error = std::current_exception();
    }
  }
  if (error) std::rethrow_exception(error);
  return out;
}

}  // namespace tessera
