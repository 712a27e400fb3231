/// Runs a graph with compiled tessera kernels: each (fused) node becomes library operators
/// (conv2d, depthwise_conv2d, dense, matmul, pooling, softmax, add, relu, bias_add) under the best
/// recorded configuration or the template's default one, plus graph te kernels for the rest.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "runtime/module.h"
#include "runtime/ndarray.h"
#include "te/error.h"

namespace tessera::graph {

/// A kernel the C compiler rejected: a tessera bug or a broken toolchain, not bad input.
class KernelBuildError : public Error {
 public:
  using Error::Error;
};

struct ExecutorParams {
  std::string db;  // records DB for best configurations; empty: default configurations only
  /// Workloads that run their default configuration although the DB has records for them (the
  /// compile command's in-model check found the default faster inside the model).
  std::set<std::string> skip_records;
  /// Workloads that run this strategy instead of the DB's best (the compile command's in-model
  /// choice among a workload's re-timed candidates).
  std::map<std::string, std::string> strategies;
  int threads = 0;       // 0: OpenMP's default
  int compile_jobs = 0;  // parallel C compiler processes; 0: one per core
};

/// What `Executor::export_library` writes into the shared object besides the kernels.
struct ExportOptions {
  std::string model;     // the source model's path, recorded in the library's description
  int compile_jobs = 0;  // parallel C compiler processes; 0: one per core
};

/// The entry point name of kernel `index` (every kernel has its own, so all link into one
/// library).
std::string kernel_entry(size_t index);

/// One distinct compiled kernel and where its schedule came from.
struct KernelInfo {
  std::string workload;  // `conv2d:N=1,...` for a library operator, `graph:<name>` for a te one
  /// "db": the best recorded configuration; "default": the template's default configuration (no
  /// records); "fixed": a graph te kernel with the graph layer's fixed schedule; "plain": the
  /// library operator's unscheduled loop nest (its default configuration did not apply).
  std::string schedule;
  std::string strategy;  // the recorded or default strategy (what tuning chose)
  int uses = 0;          // how many steps run it
  /// Applied after `strategy` for the model's sake (weights prefetched); empty if none.
  std::string in_model;
};

/// A library operator a node runs as: a tuning task of the model.
struct PlannedWorkload {
  std::string workload;  // canonical text
  std::string node;      // the node it runs for
};

class Executor {
 public:
  /// The library operators compile() would build for `g`, one entry per step in execution order
  /// (a workload that several steps run appears once for each), from the same planning code and
  /// without generating or compiling anything. Throws like compile() for what it cannot map.
  static std::vector<PlannedWorkload> library_workloads(const Graph& g);

  /// Plans every node, compiles each distinct kernel once (in parallel) and allocates every
  /// value. Throws tessera::Error naming the node for what it cannot map to kernels.
  static Executor compile(const Graph& g, const ExecutorParams& params = {});

  size_t num_inputs() const { return input_slots_.size(); }
  /// The array of input i (the graph's shape); fill it before run(). An integer input's array
  /// holds its ids as float32 (run() writes it from `input_ids`).
  NDArray& input(size_t i) { return arrays_[input_slots_.at(i)]; }
  /// Whether input i takes integer ids (Graph::int_inputs).
  bool input_is_int(size_t i) const { return input_ids_.at(i).has_value(); }
  /// Integer input i's ids (the graph's shape, row-major); fill them before run().
  std::vector<int64_t>& input_ids(size_t i);
  /// Integer input i's ids are read in [0, bound) (the smallest table its Gathers index;
  /// negative ids count from its end, others are clamped); 0 for a float input.
  int64_t input_id_bound(size_t i) const { return input_id_bound_.at(i); }
  /// Fills input i from a host tensor of its shape, ids or floats as the input takes.
  void set_input(size_t i, const HostTensor& value);
  void run();
  /// Milliseconds each kernel takes per run (the sum over its steps, each step's median over
  /// `repeat` runs of the whole model, timed one by one), in kernels() order.
  std::vector<double> profile(int repeat) const;
  size_t num_outputs() const { return output_slots_.size(); }
  /// Output i as a host tensor with the graph's output shape.
  HostTensor output(size_t i) const;
  const float* output_data(size_t i) const { return arrays_[output_slots_.at(i)].data_as<float>(); }
  /// Output i's shape as the graph gives it (output_data holds it row-major).
  const std::vector<int64_t>& output_shape(size_t i) const { return output_shapes_.at(i); }
  const std::vector<KernelInfo>& kernels() const { return kernels_; }
  int steps() const { return static_cast<int>(steps_.size()); }

  /// Bytes of intermediate values: every value its own buffer, and packed by lifetime into one
  /// arena (as run() and export_library() lay them out).
  struct MemoryPlan {
    size_t separate_bytes = 0;
    size_t arena_bytes = 0;
    std::vector<size_t> offsets;  // per array: arena offset (intermediates and inputs)
    std::vector<bool> in_arena;   // per array: placed in the arena (not a weight, and used)
  };
  MemoryPlan plan_memory() const;

  /// Writes the model as one shared object (graph/compiled_model.h loads it): every kernel,
  /// the weights embedded read-only, the step list, and intermediate values packed into one
  /// arena where their lifetimes do not overlap. Its C interface is `tessera_model_*`
  /// (graph/model_abi.h). Returns the arena layout it wrote. Throws KernelBuildError when the C
  /// compiler fails.
  MemoryPlan export_library(const std::string& path, const ExportOptions& options = {}) const;

 private:
  struct Step {
    int kernel = -1;            // index into modules_
    std::vector<size_t> slots;  // arrays_ index of each argument
    std::vector<void*> args;
  };
  /// A part of another array (a recurrent layer's state at one time step): no storage of its
  /// own, alive as long as the array it is part of.
  struct SubArray {
    size_t of = 0;     // an array that is no part itself
    size_t bytes = 0;  // where the part starts in it
  };
  friend class Planner;
  std::vector<NDArray> arrays_;  // weights own their memory; every other used value views arena_
  NDArray arena_;
  std::vector<bool> constant_;                                  // per array: a weight, read only
  std::vector<std::optional<SubArray>> part_of_;                // per array
  std::vector<std::optional<std::vector<int64_t>>> input_ids_;  // per input: ids if integer
  std::vector<int64_t> input_id_bound_;                         // per input
  std::vector<std::string> codes_;  // per kernel: its C source (entry kernel_entry(i))
  std::vector<std::string> input_names_, output_names_;
  std::vector<std::shared_ptr<Module>> modules_;
  std::vector<KernelInfo> kernels_;
  std::vector<Step> steps_;
  std::vector<size_t> input_slots_, output_slots_;
  std::vector<std::vector<int64_t>> output_shapes_;
};

/// HostTensor <-> float32 NDArray of the same shape.
NDArray to_ndarray(const HostTensor& t);
HostTensor to_host(const NDArray& a, const std::vector<int64_t>& shape);

}  // namespace tessera::graph
