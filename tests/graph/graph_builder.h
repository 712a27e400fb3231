/// Hand-built graphs for the graph layer's tests: seeded random weights, inferred shapes.
#pragma once

#include <cmath>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "graph/executor.h"
#include "graph/graph.h"
#include "graph/passes.h"
#include "graph/reference.h"

namespace tessera::testing {

class GraphBuilder {
 public:
  explicit GraphBuilder(uint64_t seed) : rng_(seed) {}

  std::string input(const std::vector<int64_t>& shape) {
    std::string name = "x" + std::to_string(g_.inputs.size());
    g_.inputs.push_back(name);
    g_.shapes[name] = shape;
    return name;
  }
  std::string constant(graph::HostTensor t) {
    std::string name = "c" + std::to_string(next_++);
    g_.constants[name] = std::move(t);
    return name;
  }
  std::string random(const std::vector<int64_t>& shape, double lo = -1, double hi = 1) {
    return constant(random_tensor(shape, lo, hi));
  }
  graph::HostTensor random_tensor(const std::vector<int64_t>& shape, double lo = -1,
                                  double hi = 1) {
    std::uniform_real_distribution<double> d(lo, hi);
    graph::HostTensor t{shape, {}, false};
    for (int64_t i = 0; i < graph::num_elements(shape); ++i)
      t.data.push_back(static_cast<float>(d(rng_)));
    return t;
  }
  std::string node(const std::string& op, std::vector<std::string> inputs,
                   std::map<std::string, graph::AttrValue> attrs = {}) {
    graph::Node n;
    n.op = op;
    n.name = op + std::to_string(next_++);
    n.inputs = std::move(inputs);
    n.outputs = {n.name + "_out"};
    n.attrs = std::move(attrs);
    g_.nodes.push_back(n);
    return n.outputs[0];
  }
  std::string conv(const std::string& x, int64_t c_in, int64_t c_out, int64_t k, int64_t stride,
                   int64_t pad, int64_t group = 1, bool bias = true) {
    std::vector<std::string> in{x, random({c_out, c_in / group, k, k}, -0.5, 0.5)};
    if (bias) in.push_back(random({c_out}));
    return node("Conv", in,
                {{"strides", std::vector<int64_t>{stride, stride}},
                 {"pads", std::vector<int64_t>{pad, pad, pad, pad}},
                 {"group", group}});
  }
  std::string batch_norm(const std::string& x, int64_t c) {
    return node("BatchNormalization",
                {x, random({c}, 0.5, 1.5), random({c}), random({c}), random({c}, 0.5, 1.5)},
                {{"epsilon", 1e-5}});
  }
  /// The graph with `out` as its output, sorted and with inferred shapes.
  graph::Graph finish(const std::string& out) {
    g_.outputs = {out};
    graph::Graph g = g_;
    graph::sort_topologically(g);
    graph::infer_shapes(g);
    return g;
  }
  std::mt19937_64& rng() { return rng_; }

 private:
  graph::Graph g_;
  std::mt19937_64 rng_;
  int next_ = 0;
};

/// max |a - b| / max |b|.
inline double max_relative_error(const graph::HostTensor& a, const graph::HostTensor& b) {
  double diff = 0, scale = 0;
  for (size_t i = 0; i < a.data.size() && i < b.data.size(); ++i) {
    diff = std::max(diff, std::abs(a.data[i] - b.data[i]));
    scale = std::max(scale, std::abs(b.data[i]));
  }
  return a.data.size() == b.data.size() ? diff / std::max(scale, 1e-30) : 1e30;
}

/// The graph's output for one random input in [lo, hi], run by the reference path (on the graph
/// as given, so that the passes are checked too) and by the executor (two threads) after the
/// default passes, which `after` may inspect: their largest relative difference. With `out` the
/// executor is kept there.
inline double executor_error(graph::Graph g, GraphBuilder& b, double lo, double hi,
                             graph::Executor* out = nullptr,
                             const std::function<void(const graph::Graph&)>& after = {}) {
  graph::HostTensor x = b.random_tensor(g.shape(g.inputs[0]), lo, hi);
  graph::HostTensor expected = graph::run_reference(g, {{g.inputs[0], x}}).at(0);
  graph::run_default_passes(g);
  if (after) after(g);
  graph::ExecutorParams params;
  params.threads = 2;
  graph::Executor ex = graph::Executor::compile(g, params);
  ex.input(0).from_doubles(x.data);
  ex.run();
  graph::HostTensor got = ex.output(0);
  if (got.shape != expected.shape) return 1e30;
  if (out) *out = std::move(ex);
  return max_relative_error(got, expected);
}

}  // namespace tessera::testing
