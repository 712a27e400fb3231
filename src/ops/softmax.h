/// Row-wise softmax: its te definition, the `softmax:M=..,N=..` workload and its search space.
#pragma once

#include <string>

#include "ops/workload.h"
#include "space/config_space.h"
#include "te/tensor.h"

namespace tessera {

/// softmax[i, j] = row_exp[i, j] * (1 / exp_sum[i]) over a float tensor x[M, N], in four stages:
/// row_max[i] = max_j x[i, j]; row_exp[i, j] = exp(x[i, j] - row_max[i]); exp_sum[i] =
/// sum_j row_exp[i, j]; then the scaled row. Subtracting the row maximum keeps exp from
/// overflowing (x ~ 100 in float32) without changing the result. Loops: `i` and `j` per stage
/// (qualified `row_max.i`, `row_exp.j`, `softmax.j`, ...), reduce axes `k` (`row_max.k`,
/// `exp_sum.k`); init loops `row_max.i.init`, `exp_sum.i.init`. The stages are always named
/// row_max, row_exp and exp_sum, so a program holds one softmax (lower refuses two tensors of one
/// name).
Tensor softmax_rows(const Tensor& x, const std::string& name = "softmax");

/// e^x of a shifted score (x <= 0), 0 below FLT_MIN rather than a denormal: a masked score
/// (Swin's -100) would otherwise make every product with its probability a microcode assist. The
/// change is below 1.2e-38 in a probability of at most 1.
Expr exp_without_denormals(const Expr& shifted);

/// The operator for workload `softmax:M=..,N=..` (float32): args {x, softmax}. flops counts 5 per
/// element (compare for the max, subtract, exp, add for the sum, scale; exp as one operation, the
/// per-row reciprocal not counted); the reduction length is N. The reference computes in double
/// with the same max subtraction.
OpInstance build_softmax(const Workload& w);

/// The search space of softmax: row_exp inlined into both readers (exp computed twice, no M x N
/// buffer) or stored (`exp`), split of the softmax nest's row loop (`tile_row`), the vector width
/// of the elementwise nests' column loops (`vector_j`; 1 keeps them scalar), the row stages
/// vectorized across 8 rows (`row_stages=vector_rows`: their column loop carries the reduction, so
/// the row loop moves inside it) or along the row after `rfactor` into 16 partial results per row
/// (`row_stages=rfactor`), a 4-way unrolled column loop in the row stages (`unroll_k`),
/// parallel rows (`parallel`), and every stage computed at the softmax nest's row tile
/// (`fuse=row_tile`: one pass over x, row_exp stored for one tile) or each in a nest of its own.
ConfigSpace softmax_space(const Workload& w);

}  // namespace tessera
