/// The plain reference path: every operator (and fused epilogue) as a naive loop over doubles.
/// Tests compare the executor and the passes with it; constant folding evaluates nodes with it.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "graph/graph.h"

namespace tessera::graph {

/// Evaluates one node on its inputs (nullptr for an omitted optional input), then its epilogue,
/// in doubles (the reference path's ground truth), or with the result rounded to float32 where
/// `as_float32`: constant folding, at import and by fold_constants, stores what a float32 runtime
/// would (in doubles throughout, T5's relative-position buckets, a Log divided by a float32
/// constant then truncated, fell on the other side of an integer).
HostTensor evaluate_node(const Node& n, const Graph& g, const std::vector<const HostTensor*>& in,
                         bool as_float32 = false);

/// Runs the whole graph on the given runtime inputs (by name); returns the graph outputs in order.
std::vector<HostTensor> run_reference(const Graph& g,
                                      const std::map<std::string, HostTensor>& inputs);

}  // namespace tessera::graph
