/// Attention as one operator: softmax(Q K) V per batch, the scores of a tile of query rows
/// computed, normalized and consumed while they are in cache. Its te definition, the
/// `attention:B=..,M=..,N=..,D=..,DV=..` workload and its search space.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "ops/workload.h"
#include "space/config_space.h"
#include "te/tensor.h"

namespace tessera {

/// out[b, i, :] = softmax_j(score[b, i, j]) V[b, j, :] with score = Q[b] Kt[b] over float tensors
/// Q[B, M, D], Kt[B, D, N] (the keys already transposed, as a transformer's graph computes them)
/// and V[B, N, DV], each score plus bias[b mod BB, i, j] where a bias [BB, M, N] is given (a
/// causal mask, a relative position bias shared by BB heads). Six stages: score (loops b, i, j;
/// reduce k), row_max, row_exp (the shifted exponential, no denormals), exp_sum, attend (the
/// unnormalized product with V: loops b, i, j; reduce k) and the result, attend scaled by 1 /
/// exp_sum per row (loops `name`.b, .i, .j).
Tensor attention(const Tensor& q, const Tensor& kt, const Tensor& v,
                 const std::optional<Tensor>& bias = std::nullopt,
                 const std::string& name = "attention");

/// The sizes of one attention: B heads of M queries, N keys, D-wide queries and keys, DV-wide
/// values; BB heads of bias (0: none).
struct AttentionSizes {
  int64_t b = 1, m = 0, n = 0, d = 0, dv = 0, bb = 0;
};

/// attention() in doubles over row-major arrays (the reference of the operator and of the graph
/// layer's tessera.Attention): q [B][M][D], kt [B][D][N], v [B][N][DV], bias [BB][M][N] (read only
/// with BB > 0), out [B][M][DV].
void attention_reference(const AttentionSizes& s, const double* q, const double* kt,
                         const double* v, const double* bias, double* out);

/// The operator for workload `attention:B=..,M=..,N=..,D=..,DV=..[,BB=..]` (float32): args {Q,
/// Kt, V, out}, or {Q, Kt, V, bias, out} with BB > 0. flops: both products (2 per multiply-add) and
/// 5 per score for the softmax; the reduction length is the longer of D and N. The reference
/// computes in doubles.
OpInstance build_attention(const Workload& w);

/// The search space: every stage computed at a tile of query rows of the result (`tile_rows`),
/// so that a tile's scores (tile_rows x N) are written, normalized and read from cache rather
/// than memory; register tiles for both products (`score_tile`: rows x vectors of the ISA's lanes
/// along the keys; `attend_rows`: rows x every vector of DV), the row stages as one or four vectors
/// of partial results along the row (`row_vectors`), the operands' blocks read per strip of rows or
/// shared by a tile's strips (`blocks`: Kt's column block, slices of V's rows), and
/// threads over heads or over tiles (`parallel`).
ConfigSpace attention_space(const Workload& w);

}  // namespace tessera
