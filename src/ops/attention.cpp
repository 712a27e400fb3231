#include "ops/attention.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <optional>

#include "lower/lower.h"
#include "ops/softmax.h"
#include "runtime/isa.h"
#include "schedule/rules.h"
#include "te/error.h"

namespace tessera {

Tensor attention(const Tensor& q, const Tensor& kt, const Tensor& v,
                 const std::optional<Tensor>& bias, const std::string& name) {
  if (q.ndim() != 3 || kt.ndim() != 3 || v.ndim() != 3 || q->shape[0] != kt->shape[0] ||
      q->shape[0] != v->shape[0] || q->shape[2] != kt->shape[1] || kt->shape[2] != v->shape[1])
    throw_error("attention needs Q[B, M, D], Kt[B, D, N] and V[B, N, DV]");
  const int64_t b = q->shape[0], m = q->shape[1], n = kt->shape[2], dv = v->shape[2];
  if (bias && ((*bias).ndim() != 3 || b % (*bias)->shape[0] != 0 || (*bias)->shape[1] != m ||
               (*bias)->shape[2] != n))
    throw_error("attention: the bias must be [BB, M, N] with BB dividing B");
  IterVar d = reduce_axis(q->shape[2], "k");
  Tensor score = compute(
      {b, m, n}, [&](Var h, Var i, Var j) { return sum(q(h, i, d.var) * kt(h, d.var, j), {d}); },
      "score", {"b", "i", "j"});
  // The bias is read where the scores are (no stage of its own): head h adds bias h mod BB.
  auto logit = [&](Var h, Var i, Var j) -> Expr {
    if (!bias) return score(h, i, j);
    const int64_t heads = (*bias)->shape[0];
    Expr at = heads == 1 ? Expr(0) : heads == b ? Expr(h) : Expr(h) % static_cast<int>(heads);
    return score(h, i, j) + (*bias)({at, Expr(i), Expr(j)});
  };
  IterVar k_max = reduce_axis(n, "k");
  Tensor row_max =
      compute({b, m}, [&](Var h, Var i) { return max(logit(h, i, k_max.var), {k_max}); }, "row_max",
              {"b", "i"});
  Tensor row_exp = compute(
      {b, m, n},
      [&](Var h, Var i, Var j) { return exp_without_denormals(logit(h, i, j) - row_max(h, i)); },
      "row_exp", {"b", "i", "j"});
  IterVar k_sum = reduce_axis(n, "k");
  Tensor exp_sum =
      compute({b, m}, [&](Var h, Var i) { return sum(row_exp(h, i, k_sum.var), {k_sum}); },
              "exp_sum", {"b", "i"});
  IterVar k_v = reduce_axis(n, "k");
  // The product with V before the normalization: one multiply per output instead of one per
  // score.
  Tensor attend = compute(
      {b, m, dv},
      [&](Var h, Var i, Var j) { return sum(row_exp(h, i, k_v.var) * v(h, k_v.var, j), {k_v}); },
      "attend", {"b", "i", "j"});
  return compute({b, m, dv},
                 [&](Var h, Var i, Var j) { return attend(h, i, j) * (Expr(1.0) / exp_sum(h, i)); },
                 name, {"b", "i", "j"});
}

void attention_reference(const AttentionSizes& s, const double* q, const double* kt,
                         const double* v, const double* bias, double* out) {
  std::vector<double> row(static_cast<size_t>(s.n));
  for (int64_t h = 0; h < s.b; ++h) {
    for (int64_t i = 0; i < s.m; ++i) {
      for (int64_t j = 0; j < s.n; ++j) {
        double acc = 0;
        for (int64_t k = 0; k < s.d; ++k)
          acc += q[(h * s.m + i) * s.d + k] * kt[(h * s.d + k) * s.n + j];
        row[j] = s.bb > 0 ? acc + bias[((h % s.bb) * s.m + i) * s.n + j] : acc;
      }
      const double top = *std::max_element(row.begin(), row.end());
      double total = 0;
      for (double& x : row) total += x = std::exp(x - top);
      for (int64_t c = 0; c < s.dv; ++c) {
        double acc = 0;
        for (int64_t j = 0; j < s.n; ++j) acc += row[j] * v[(h * s.n + j) * s.dv + c];
        out[(h * s.m + i) * s.dv + c] = acc / total;
      }
    }
  }
}

OpInstance build_attention(const Workload& w) {
  const int64_t b = w.positive("B"), m = w.positive("M"), n = w.positive("N"), d = w.positive("D"),
                dv = w.positive("DV"), bb = w.get_or("BB", 0);
  if (bb < 0 || (bb > 0 && b % bb != 0))
    throw_error("attention: BB={} must be 0 (no bias) or divide B={}", bb, b);
  Tensor q = placeholder({b, m, d}, DType::kFloat32, "Q");
  Tensor kt = placeholder({b, d, n}, DType::kFloat32, "Kt");
  Tensor v = placeholder({b, n, dv}, DType::kFloat32, "V");
  std::vector<Tensor> args{q, kt, v};
  std::optional<Tensor> bias;
  if (bb > 0) {
    bias = placeholder({bb, m, n}, DType::kFloat32, "bias");
    args.push_back(*bias);
  }
  args.push_back(attention(q, kt, v, bias));
  const double scores = static_cast<double>(b) * m * n;
  OpInstance op{args, lower("attention", args), scores * (2.0 * d + 2.0 * dv + 5.0), std::max(d, n),
                nullptr};
  op.reference = [=](std::vector<std::vector<double>>& a) {
    attention_reference({b, m, n, d, dv, bb}, a[0].data(), a[1].data(), a[2].data(),
                        bb > 0 ? a[3].data() : nullptr, a.back().data());
  };
  return op;
}

namespace {

// Rows of V per slice when the strips share them: 128 x 64 floats, 32 KB, in L1 beside the rest.
constexpr int64_t kSharedSlice = 128;

// A register tile of `rows` x `vectors` accumulators of `lanes` for stage `s` (loops s.i, s.j and
// its reduction s.k): the reduction outside the tile, the tile unrolled, vectors along j, the
// accumulators in a write cache. With `depth` 0 the strips of rows run outermost and each tile's
// accumulators stay in registers over the whole reduction; otherwise the reduction runs in
// slices of `depth` outermost (the whole of it where `depth` covers it), each block of the
// operand read along k then used by every strip of the tile from L1, the accumulators loaded and
// stored once per slice.
std::vector<ProgramStrategy> register_tile(const std::string& s, int64_t rows, int64_t vectors,
                                           int64_t lanes, int64_t depth) {
  const std::string i = s + ".i", j = s + ".j", k = s + ".k";
  std::vector<ProgramStrategy> steps{split(i, rows), split(j, vectors * lanes),
                                     split(j + ".inner", lanes)};
  const std::vector<std::string> tile{i + ".inner", j + ".inner.outer", j + ".inner.inner"};
  std::vector<std::string> order;
  std::string cached_at = j + ".outer";
  if (depth == 0) {
    order = {i + ".outer", j + ".outer", k};
  } else if (depth < 0) {
    // The columns' blocks outside the strips, the whole reduction inside (a short one: the
    // scores' D).
    order = {j + ".outer", i + ".outer", k};
    cached_at = i + ".outer";
  } else {
    steps.push_back(split(k, depth));
    order = {k + ".outer", i + ".outer", j + ".outer", k + ".inner"};
  }
  order.insert(order.end(), tile.begin(), tile.end());
  steps.insert(steps.end(),
               {reorder(order), vectorize(j + ".inner.inner"), unroll(j + ".inner.outer"),
                unroll(i + ".inner"), cache_write(s, cached_at)});
  return steps;
}

// A row reduction of a tile as `vectors` x `lanes` partial results along the row, combined after
// it: several vectors of partials are independent chains, where one waits on the previous add.
std::vector<ProgramStrategy> row_vectors(const std::string& s, int64_t vectors, int64_t lanes) {
  const std::string k = s + ".k";
  std::vector<ProgramStrategy> steps{split(k, vectors * lanes), rfactor(s, k + ".inner")};
  if (vectors == 1) {
    steps.push_back(vectorize(k + ".inner"));
  } else {
    steps.insert(steps.end(), {split(k + ".inner", lanes), vectorize(k + ".inner.inner"),
                               unroll(k + ".inner.outer")});
  }
  return steps;
}

std::vector<ProgramStrategy> vector_columns(const std::string& s, int64_t lanes) {
  return {split(s + ".j", lanes), vectorize(s + ".j.inner")};
}

}  // namespace

// Per tile of query rows the scores live in two tile_rows x N buffers (the scores and their
// exponentials) instead of B x M x N in memory: Whisper-tiny's encoder wrote, softmaxed and read
// 54 MB of scores per layer unfused. The tile's rows run each product as a register tile, so the
// scores cost what a batched product with a short reduction costs, and the softmax reads them
// from L2.
ConfigSpace attention_space(const Workload& w) {
  const int64_t m = w.positive("M"), n = w.positive("N"), dv = w.positive("DV");
  w.positive("B");
  w.positive("D");
  const Isa& isa = target_isa();
  const int64_t lanes = isa.f32_lanes;
  // Accumulators beside the operands' registers: a broadcast and a vector or two per step.
  const int64_t registers = isa.vector_registers - 4;
  Knob score_tile{"score_tile", {}, {}};
  for (int64_t rows : {1, 2, 4, 6, 8}) {
    for (int64_t vectors : {1, 2, 4}) {
      if (rows > m || (vectors > 1 && vectors * lanes > n) || rows * vectors > registers) continue;
      score_tile.values.push_back({rows, vectors});
    }
  }
  const int64_t dv_vectors = (dv + lanes - 1) / lanes;
  std::vector<int64_t> attend_rows;
  for (int64_t rows : {1, 2, 4, 6, 8})
    if (rows <= m && rows * dv_vectors <= registers) attend_rows.push_back(rows);
  // Values wider than the registers hold (DV of 512) still get a tile of one row, which spills.
  if (attend_rows.empty()) attend_rows.push_back(1);
  std::vector<Knob> knobs{
      split_knob_from("tile_rows", m, {{4}, {8}, {12}, {16}, {24}, {32}, {48}, {64}}),
      std::move(score_tile),
      int_knob("attend_rows", attend_rows),
      int_knob("row_vectors", {1, 4}),
      choice_knob("blocks", {"per_strip", "shared"}),
      choice_knob("parallel", {"off", "heads", "tiles"}),
  };
  auto instantiate = [lanes, dv_vectors](const ConfigSpace& s, const Config& c) {
    const std::vector<int64_t>& score_tile = s.value(c, "score_tile");
    std::vector<ProgramStrategy> steps{split("attention.i", s.value(c, "tile_rows")[1])};
    // Consumers first, so that each producer's box covers what the stages already there read.
    for (const char* stage : {"attend", "exp_sum", "row_exp", "row_max", "score"})
      steps.push_back(compute_at(stage, "attention.i.outer"));
    auto append = [&steps](std::vector<ProgramStrategy> more) {
      steps.insert(steps.end(), more.begin(), more.end());
    };
    // Shared: Kt's column block and slices of V's rows are read by every strip of the tile.
    const bool shared = s.label(c, "blocks") == "shared";
    append(register_tile("score", score_tile[0], score_tile[1], lanes, shared ? -1 : 0));
    const int64_t row_vecs = s.value0(c, "row_vectors");
    append(row_vectors("row_max", row_vecs, lanes));
    append(vector_columns("row_exp", lanes));
    append(row_vectors("exp_sum", row_vecs, lanes));
    append(register_tile("attend", s.value0(c, "attend_rows"), dv_vectors, lanes,
                         shared ? kSharedSlice : 0));
    append(vector_columns("attention", lanes));
    const std::string& par = s.label(c, "parallel");
    if (par == "heads") steps.push_back(parallel("attention.b"));
    if (par == "tiles") steps.push_back(parallel("attention.i.outer"));
    return seq_all(steps);
  };
  return ConfigSpace(w.text(), std::move(knobs), instantiate);
}

}  // namespace tessera
