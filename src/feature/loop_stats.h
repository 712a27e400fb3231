/// The per-loop analysis behind the features: extents, kinds, operation counts and buffer touches.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tir/program.h"

namespace tessera {

/// What one loop's full execution (one entry into the loop) does to one buffer.
struct BufferTouch {
  const BufferNode* buffer = nullptr;
  double count = 0;     // dynamic accesses (loads and stores)
  double elements = 0;  // distinct elements touched (a box estimate, max over accesses)
  double bytes = 0;     // elements * element size
  double stride = 0;    // |coefficient of this loop's variable in the flattened index|, max
  bool read = false;
  bool write = false;
};

/// Dynamic operation counts.
struct OpCounts {
  double float_add = 0;    // float + and -
  double float_mul = 0;    // float *
  double fma = 0;          // float + or - with a * operand
  double float_other = 0;  // float /, min, max, select, casts to float, comparisons of floats,
                           // intrinsic calls (exp, log, sqrt, tanh, sigmoid), one each
  double int_ops = 0;      // integer arithmetic in indices, guards and values
  double float_ops() const { return float_add + float_mul + float_other; }
};

struct LoopStats {
  std::string name;
  int parent = -1;  // index into ProgramStats::loops; -1 at the top of a nest
  int depth = 0;    // nest level: 0 for a loop with no loop around it
  int64_t extent = 1;
  ForKind kind = ForKind::kSerial;
  double outer_product = 1;  // product of the extents of the enclosing loops
  double inner_product = 0;  // store executions in one full execution of this loop
  bool innermost = true;     // no loop inside
  OpCounts ops;              // in one full execution of this loop
  /// Sorted: most accesses first, then most bytes, then buffer name.
  std::vector<BufferTouch> touches;
};

/// The analysis of a whole program; loops are in pre-order (parents before children).
struct ProgramStats {
  std::vector<LoopStats> loops;
  /// Loops around the store that does the most float operations (ties: the first), outermost
  /// first. Empty when the program has no loop around any store.
  std::vector<int> main_path;
  OpCounts total_ops;
  double main_float_ops = 0;  // float ops of the main store in the whole program
  double store_executions = 0;
  double guarded_store_executions = 0;
  double bytes_accessed = 0;  // dynamic, loads and stores
  int num_nests = 0;          // loops with no loop around them
  int num_allocations = 0;
  double allocated_bytes = 0;
  double max_parallel_extent = 0;
  double max_vector_extent = 0;
  double max_unrolled_product = 0;  // product of the unrolled loops around one store, max
  double float_ops_parallel = 0;    // float ops under a parallel loop
  double float_ops_vectorized = 0;  // float ops under a vectorized loop
};

/// Walks the program once and summarizes every loop. Deterministic; linear in program size
/// times nest depth.
ProgramStats analyze_loops(const Program& p);

}  // namespace tessera
