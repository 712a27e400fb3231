/// Derived strategies, built only from rules and combinators: tiling, and TVM's "how to optimize
/// GEMM on CPU" schedules as values, each version extending the one before (as Elevate writes
/// them).
#pragma once

#include <string>
#include <vector>

#include "schedule/rules.h"

namespace tessera {

/// Gives a composed strategy its own name in the text form (it still runs the composition).
ProgramStrategy named(const std::string& text, const ProgramStrategy& body);

/// tile(x, y, fx, fy) = split(x, fx) ; split(y, fy) ; reorder(x.outer, y.outer, x.inner, y.inner)
ProgramStrategy tile(const std::string& x, const std::string& y, int64_t fx, int64_t fy);
/// tile_nd over any number of loops: split each, then all outer loops before all inner ones.
ProgramStrategy tile_nd(const std::vector<std::string>& loops, const std::vector<int64_t>& sizes);
/// Reorders the loops of the last nest by position: permute({1, 0}) swaps its two outer loops.
ProgramStrategy permute(const std::vector<int64_t>& permutation);

// The seven GEMM versions, for `matmul` (loops i, j, k; buffers A, B, C), block size bn.
ProgramStrategy gemm_baseline();
ProgramStrategy gemm_blocking(int64_t bn = 32, int64_t kfactor = 4);
ProgramStrategy gemm_vectorization(int64_t bn = 32, int64_t kfactor = 4);
ProgramStrategy gemm_loop_permutation(int64_t bn = 32, int64_t kfactor = 4);
ProgramStrategy gemm_array_packing(int64_t bn = 32, int64_t kfactor = 4);
ProgramStrategy gemm_write_cache(int64_t bn = 32, int64_t kfactor = 4);
ProgramStrategy gemm_parallel(int64_t bn = 32, int64_t kfactor = 4);

struct NamedStrategy {
  std::string name;
  ProgramStrategy strategy;
};
/// The seven versions in order, as the benchmark reports them.
std::vector<NamedStrategy> gemm_versions(int64_t bn = 32, int64_t kfactor = 4);

}  // namespace tessera
