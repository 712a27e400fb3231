/// Row-wise softmax: its te definition, the `softmax:M=..,N=..` workload and its search space.
#pragma once

#include <string>

#include "ops/workload.h"
#include "space/config_space.h"
#include "te/tensor.h"

namespace tessera {

/// softmax[i, j] = exp(x[i, j] - row_max[i]) / exp_sum[i] over a float tensor x[M, N], in three
/// stages: row_max[i] = max_j x[i, j]; exp_sum[i] = sum_j exp(x[i, j] - row_max[i]); then the
/// quotient. Subtracting the row maximum keeps exp from overflowing (x ~ 100 in float32) without
/// changing the result. Loops: `i` per stage (qualified `row_max.i`, `exp_sum.i`, `softmax.i`),
/// reduce axes `k` (`row_max.k`, `exp_sum.k`), column `j`; init loops `row_max.i.init`,
/// `exp_sum.i.init`. The row stages are always named row_max and exp_sum, so a program holds one
/// softmax (lower refuses two tensors of one name).
Tensor softmax_rows(const Tensor& x, const std::string& name = "softmax");

/// The operator for workload `softmax:M=..,N=..` (float32): args {x, softmax}. flops counts 5 per
/// element (compare for the max, subtract, exp, add for the sum, divide; exp as one operation,
/// the second subtract and exp that the last stage recomputes are not counted); the reduction
/// length is N. The reference computes in double with the same max subtraction.
OpInstance build_softmax(const Workload& w);

/// The search space of softmax: split of the softmax nest's row loop (`tile_row`), the vector
/// width of its column loop (`vector_j`; 1 keeps it scalar), the row stages vectorized across 8
/// rows (`row_stages=vector_rows`: their column loop carries the reduction, so the row loop moves
/// inside it) or along the row after `rfactor` into 16 partial results per row
/// (`row_stages=rfactor`), a 4-way unrolled column loop in the row stages (`unroll_k`) and
/// parallel rows in every stage (`parallel`). The row stages are reductions, which compute_at
/// refuses, so they stay root nests (three passes over x).
ConfigSpace softmax_space(const Workload& w);

}  // namespace tessera
