// Private to the graph layer's planning: the Planner behind Executor::compile and
// Executor::library_workloads, declared once for the files that define its members by concept.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "codegen/codegen_c.h"
#include "graph/choose_schedule.h"
#include "graph/executor.h"
#include "graph/graph.h"
#include "graph/kernels.h"
#include "graph/op_attrs.h"
#include "ops/nn.h"

namespace tessera::graph {

// Maps every node of a graph to kernel steps over the value slots of an Executor (whose private
// members it fills as its friend), then builds them.
class Planner {
 public:
  // With `collect` set the planner only lists the library workloads it meets, in order.
  Planner(const Graph& g, const ExecutorParams& p, Executor& ex,
          std::vector<PlannedWorkload>* collect = nullptr)
      : g_(g), params_(p), ex_(ex), collect_(collect), chooser_(collect ? ExecutorParams{} : p) {}

  // Maps every node to steps over value slots.
  void plan();
  // Compiles every distinct kernel and lays the values out in one arena.
  void compile();

 private:
  // Arrays and value slots (plan_values.cpp).

  size_t new_array(const std::vector<int64_t>& shape);
  size_t constant_array(const HostTensor& t);

  // Elements [start, start + size of `shape`) of array `of`, as an array of `shape`: no copy.
  size_t part_array(size_t of, int64_t start, const std::vector<int64_t>& shape);
  std::optional<int64_t> gather_view_start(const Node& n) const;

  // The slot holding a value in NCHW: a runtime input, a node output, or a constant uploaded
  // once; a value produced in channel blocks is converted back here, once.
  size_t slot(const std::string& value);

  size_t output_slot(const Node& n);

  // The slot holding a 4-D value in channel blocks of `block`, converted from NCHW once.
  size_t blocked_slot(const std::string& value, int64_t block);

  size_t blocked_output_slot(const Node& n, int64_t block);

  // The array a blocked value is written to: its own, or its channels' part of the output of the
  // Concat that joins it (place_concat_inputs), created with the first of its parts.
  size_t home_array(const std::string& v, int64_t block);

  // Where a Concat of channel blocks (one image: each block of channels one contiguous run) can
  // cost no copy, its inputs are written in place, each by its producer into its part of the
  // Concat's output. DenseNet joins every layer's features with all before them, in the same
  // order, so each Concat is the first part of the next one's output and the whole dense block
  // is one array: its Concats (8 ms of 51, AVX2) copy nothing. A value joined at two different
  // places keeps its own array where the second one would need it, and is copied there.
  void place_concat_inputs();

  // A value its producer writes through blocked_output_slot, once, that no one reads from
  // outside the model.
  bool placeable(const std::string& v, int64_t block) const;

  size_t transposed(const std::string& value);

  // Steps, kernels and the dispatch of a node by its operator table row (executor.cpp).

  void add_step(int kernel, std::vector<size_t> args);

  // A library operator under the schedule the chooser picks (graph/choose_schedule.h); with
  // `reversed`, a second kernel of it whose rows run in the opposite order (reversed_order).
  void library_step(const std::string& text, std::vector<size_t> args, bool reversed = false);

  // Every kernel gets its own entry point name, so that all of them can link into one library.
  CodegenOptions entry_options() const;

  void te_step(const TeKernel& k, std::vector<size_t> args);
  void add_kernel(const std::string& key, KernelInfo info, std::string code,
                  std::vector<size_t> args);
  void plan_node(const Node& n);

  // Convolutions, products, pooling, blocked nodes, batch norm (plan_nn.cpp).

  void plan_conv(const Node& n);

  void plan_gemm(const Node& n);

  // Constant dense weights [out][in] for a product of `batch` rows, packed here, once, into blocks
  // of the output channels the kernel's vectors read (WB) where the outputs fill whole blocks,
  // so that the kernel packs nothing (it copied all the weights every run: 7 MB for each of
  // BERT's 768 x 2304 projections). Small batches keep [out][in] for the dot form, which reads
  // the rows in place: the LSTM LM's per-step 1 x 650 x 2600 products took 10.4 ms over 70
  // steps prepacked, 6.4 as dot products, while its batch of 35 took 2.4 prepacked and 4.3 not
  // (AMD EPYC, AVX2, 2 threads).
  struct DenseWeights {
    size_t slot = 0;
    int64_t in = 0, out = 0, block = 0;  // block 0: [out][in] as they are
  };
  DenseWeights dense_weights(const HostTensor& weights, int64_t batch);

  // What a dense kernel applies as it writes (workload keys BIAS, RES, ACT).
  struct DenseEpilogue {
    std::optional<size_t> bias, residual;
    int act = 0;
  };

  // `n`'s epilogue, after `c` (a Gemm's C times `beta`, or "" for none), as a dense kernel's:
  // constants along the columns (or scalars) summed into one bias, at most one residual of the
  // result's shape, then at most one activation. Nothing when it does not take that form, so
  // that a bias after an activation, say, keeps the pass of its own.
  std::optional<DenseEpilogue> dense_epilogue(const Node& n, const std::vector<int64_t>& out_shape,
                                              const std::string& c, double beta);

  // y = x W^T over the rows of x, then `e`; `reversed` runs W's rows in the opposite order.
  void dense_step(size_t x, const DenseWeights& w, size_t y, const DenseEpilogue& e,
                  bool reversed = false);
  void dense_step(size_t x, const DenseWeights& w, size_t y, bool reversed = false);

  void plan_matmul(const Node& n);

  // tessera.Attention as the library's attention over its batch of heads.
  void plan_attention(const Node& n);

  void plan_pool(const Node& n);

  // A Conv in channel blocks (graph/passes.h choose_layouts): conv2d_nchwc or
  // depthwise_conv2d_nchwc with its bias (the Conv's own plus per-channel constant adds),
  // residual and activation run by the kernel as it writes each block.
  void plan_blocked_conv(const Node& n, int64_t block);

  // Winograd F(4x4, 3x3) (graph/winograd.h): the input transformed per tile (padded as read), 36
  // products over the channels by the library's batch_matmul (a tuning task of the model), and
  // the output transform with the convolution's epilogue writing the blocked result.
  void plan_winograd_conv(const Node& n, const Window2d& w, int64_t block, size_t x,
                          std::optional<size_t> bias, std::optional<size_t> residual,
                          Activation act);

  // A node choose_layouts left in channel blocks: its blocked input read as it is, its result
  // written blocked.
  void plan_blocked(const Node& n, int64_t block);

  // A BatchNormalization no Conv absorbed: y = x * s + t per channel, s and t computed once.
  void plan_batch_norm(const Node& n);

  // Recurrent layers (plan_recurrent.cpp).

  // LSTM and GRU: the input projection of every time step at once (one dense, a tuning task),
  // then per step a dense of the previous state (another) and the cell's te kernels. Steps read
  // and write the sequence output in place through parts of it, so each step's kernels are the
  // same compiled code.
  void plan_recurrent(const Node& n);

  // Elementwise kernels: epilogues and chains of elementwise nodes (plan_elementwise.cpp).

  // `src` (the producer's raw result, shape `shape`) through `extra` operands then the node's
  // epilogue into the node's output.
  void epilogue_step(const Node& n, size_t src, const std::vector<int64_t>& shape,
                     std::vector<std::pair<size_t, std::vector<int64_t>>> extra);

  // The one elementwise step of a node: Add, Mul (of input 1), Relu, Clip, or an elementwise row
  // of the operator table (of inputs 1..).
  ElementwiseStep elementwise_step(const Node& n) const;

  // Add, Mul, Relu, Clip with constant bounds, and the operator table's scalar rows: what one
  // step of an elementwise kernel computes.
  bool is_elementwise_step(const Node& n) const;

  // The elementwise nodes after the head (the node being planned) that its kernel computes too,
  // in order: each the only reader of the value so far (which no one else sees), of its shape
  // and layout, with every other operand ready before the head runs. One pass over memory then
  // does a chain such as GELU's Div, Erf, Add, Mul, Mul (five kernels in BERT's legacy export).
  std::vector<size_t> elementwise_chain() const;

  // The step of chained node `n` whose value so far is its operand `at`, its other operands
  // being kernel inputs `others`.
  ElementwiseStep chained_step(const Node& n, size_t at, const std::vector<int>& others) const;

  // One kernel for `head` and the nodes of `chain` after it; with `block`, in channel blocks:
  // full-shape operands blocked, per-channel values as [1][C/b][1][1][b] (the same memory as
  // [C]: a constant, or a squeeze-excite scale of one image), scalars as they are.
  void plan_elementwise_chain(const Node& head, const std::vector<size_t>& chain, int64_t block);

  const Graph& g_;
  const ExecutorParams& params_;
  Executor& ex_;
  std::vector<PlannedWorkload>* collect_;
  const Node* node_ = nullptr;
  size_t head_ = 0;                         // the index of the node being planned
  std::map<std::string, size_t> producer_;  // value -> the index of the node computing it
  std::vector<bool> chained_;  // nodes computed by an earlier node's elementwise kernel
  struct Placement {
    std::string root;    // the value whose array holds it
    int64_t offset = 0;  // in elements
    bool operator==(const Placement&) const = default;
  };
  std::map<std::string, Placement> placed_;  // blocked values written into a Concat's output
  ScheduleChooser chooser_;
  std::map<std::string, size_t> slots_;  // values in NCHW (or their own shape)
  std::map<std::pair<std::string, int64_t>, size_t> blocked_slots_;  // (value, block) -> slot
  std::map<std::string, int64_t> produced_block_;  // values a blocked node wrote: their block
  std::map<std::string, int> kernel_index_;
};

}  // namespace tessera::graph
