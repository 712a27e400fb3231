// What the graph pass tests share: a graph run through the reference path and through the
// executor, and nodes counted by op.
#pragma once

#include <string>
#include <vector>

#include "graph/executor.h"
#include "graph/graph.h"
#include "graph/reference.h"

namespace tessera::testing {

inline graph::HostTensor run(const graph::Graph& g, const graph::HostTensor& x) {
  return graph::run_reference(g, {{g.inputs[0], x}}).at(0);
}

// The graph as the executor compiles it (after the passes already run on it), two threads; with
// `kernels`, the workloads of its kernels too.
inline graph::HostTensor run_compiled(const graph::Graph& g, const graph::HostTensor& x,
                                      std::vector<std::string>* kernels = nullptr) {
  graph::ExecutorParams params;
  params.threads = 2;
  graph::Executor ex = graph::Executor::compile(g, params);
  ex.input(0).from_doubles(x.data);
  ex.run();
  if (kernels)
    for (const graph::KernelInfo& k : ex.kernels()) kernels->push_back(k.workload);
  return ex.output(0);
}

inline int count_op(const graph::Graph& g, const std::string& op) {
  int n = 0;
  for (const graph::Node& node : g.nodes) n += node.op == op;
  return n;
}

}  // namespace tessera::testing
