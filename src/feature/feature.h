/// Fixed-length feature vectors of loop programs for the cost model (AutoTVM's loop context and
/// context-relation features); the exact layout is in docs/cost-model.md.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "tir/program.h"

namespace tessera {

enum class FeatureKind {
  /// Context-relation features: program totals, per-kind maxima of the per-loop features, and
  /// for pairs (a, b) of per-loop features and log2-spaced thresholds t, max a over loops with
  /// b < t. Invariant to the loop structure (the default for the tuner).
  kRelation,
  /// Program totals plus the flattened loop-context vectors of the main nest, innermost loop
  /// first, padded or truncated to a fixed number of loops.
  kContext,
  /// The loop tree itself, for models that read structure (the TreeGRU): program totals, then a
  /// fixed number of node slots, each a loop's presence, its parent's slot and its loop-context
  /// vector. Loops of the nest with the most float operations come first, each nest in pre-order
  /// (parents before children); loops past the last slot are left out.
  kTree,
};

/// Where the parts of a kTree row are: `globals` program totals, then `nodes` slots of
/// `node_width` floats: [present (0/1), parent (its slot + 1; 0: none), loop context...].
struct TreeLayout {
  size_t globals;
  size_t nodes;
  size_t node_width;
};
TreeLayout tree_layout();

/// "relation", "context" or "tree".
const char* feature_kind_name(FeatureKind kind);

/// The kind a name names; throws tessera::Error for another name.
FeatureKind parse_feature_kind(const std::string& name);

/// The number of floats extract_features returns for `kind`, whatever the program.
size_t feature_length(FeatureKind kind);

/// One name per feature (e.g. `ctx0.buf1.log_stride`), in layout order.
std::vector<std::string> feature_names(FeatureKind kind);

/// The features of one (lowered, rewritten) loop program. Deterministic; never throws on a
/// well-formed program; always feature_length(kind) finite values.
std::vector<float> extract_features(const Program& p, FeatureKind kind);

/// Features of many programs, extracted on `num_threads` OpenMP threads (0: OpenMP's default).
std::vector<std::vector<float>> extract_features(const std::vector<Program>& programs,
                                                 FeatureKind kind, int num_threads = 0);

}  // namespace tessera
