/// Graph passes. Each rewrites the graph in place, keeps what it computes (up to float rounding),
/// and returns how many nodes it changed, for the log of `tessera run-model`.
#pragma once

#include <string>
#include <vector>

#include "graph/graph.h"

namespace tessera::graph {

/// Nodes whose inputs are all constants (a Reshape's shape, a Transpose of weights) are evaluated
/// with the reference path and become constants.
int fold_constants(Graph& g);
/// A BatchNormalization whose input is a Conv's output read by nothing else, with constant
/// weights and statistics, is folded into the Conv: w' = w * s, b' = (b - mean) * s + beta with
/// s = scale / sqrt(var + eps) per output channel.
int fold_batch_norm(Graph& g);
/// Elementwise consumers of a Conv, Gemm or MatMul output read by nothing else (Relu, Clip with
/// constant bounds, Add of a tensor that broadcasts to the output, such as a residual or a bias)
/// join the producer's epilogue list, repeatedly, so the chain becomes one fused node.
int fuse_epilogues(Graph& g);
/// Nodes none of whose outputs reach a graph output, and constants nothing reads, are removed.
int eliminate_dead_nodes(Graph& g);

struct PassLog {
  std::string pass;
  int changed = 0;
};
/// fold_constants, fold_batch_norm, fuse_epilogues, eliminate_dead_nodes, in that order.
std::vector<PassLog> run_default_passes(Graph& g);

}  // namespace tessera::graph
