#include "ops/softmax.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "lower/lower.h"
#include "schedule/rules.h"
#include "te/error.h"

namespace tessera {

Expr exp_without_denormals(const Expr& shifted) {
  // ln(FLT_MIN): e^x is a normal float32 from here up.
  constexpr double kLogFloatMin = -87.33654475;
  return select(shifted < make_float(kLogFloatMin, shifted.dtype()),
                make_float(0.0, shifted.dtype()), exp(shifted));
}

Tensor softmax_rows(const Tensor& x, const std::string& name) {
  if (x.ndim() != 2) throw_error("softmax_rows: x must be 2-D, got {} dimensions", x.ndim());
  if (!is_float(x->dtype))
    throw_error("softmax_rows: x must be float, not {}", dtype_name(x->dtype));
  const int64_t m = x->shape[0], n = x->shape[1];
  IterVar k_max = reduce_axis(n, "k");
  Tensor row_max =
      compute({m}, [&](Var i) { return max(x(i, k_max.var), {k_max}); }, "row_max", {"i"});
  // Swin's masked attention ran its P V product at 5.9 GFLOP/s in the model with denormal
  // probabilities, 350 without (Xeon, Emerald Rapids).
  Tensor row_exp =
      compute({m, n}, [&](Var i, Var j) { return exp_without_denormals(x(i, j) - row_max(i)); },
              "row_exp", {"i", "j"});
  IterVar k_sum = reduce_axis(n, "k");
  Tensor exp_sum =
      compute({m}, [&](Var i) { return sum(row_exp(i, k_sum.var), {k_sum}); }, "exp_sum", {"i"});
  // One reciprocal per row instead of a division per element: a vector division costs as much
  // as the whole exp polynomial on this CPU.
  return compute({m, n}, [&](Var i, Var j) { return row_exp(i, j) * (Expr(1.0) / exp_sum(i)); },
                 name, {"i", "j"});
}

namespace {

constexpr int64_t kRowLanes = 8;  // rows per vector in the row stages
constexpr int64_t kUnrollK = 4;   // columns per unrolled step of the row stages
constexpr int64_t kRfLanes = 16;  // partial results per row when the row stages are rfactored

}  // namespace

OpInstance build_softmax(const Workload& w) {
  const int64_t m = w.positive("M"), n = w.positive("N");
  Tensor x = placeholder({m, n}, DType::kFloat32, "x");
  Tensor y = softmax_rows(x, "softmax");
  OpInstance op{{x, y}, lower("softmax", {x, y}), 5.0 * m * n, n, nullptr};
  op.reference = [m, n](std::vector<std::vector<double>>& a) {
    const std::vector<double>& in = a[0];
    std::vector<double>& out = a[1];
    for (int64_t i = 0; i < m; ++i) {
      const double* row = &in[i * n];
      double mx = *std::max_element(row, row + n);
      double total = 0;
      for (int64_t j = 0; j < n; ++j) total += std::exp(row[j] - mx);
      for (int64_t j = 0; j < n; ++j) out[i * n + j] = std::exp(row[j] - mx) / total;
    }
  };
  return op;
}

// The row stages are reductions (an init and an update nest each), which compute_at refuses
// (docs/strategies.md), so they stay root nests before the softmax nest. What the rules allow on
// them: vectorizing across rows (the row loop moved inside the column loop; the column loop of a
// reduction carries a dependence and vectorize refuses it), or along the row after rfactor
// (16 partial results per row), unrolling the column loop, parallel rows. row_exp is read by two
// stages, so it is either inlined into both (exp computed twice, no M x N buffer) or stored. With
// `fuse`, every stage is computed at the softmax nest's row tile: one pass over x instead of three
// or four, and row_exp needs storage for one tile only.
ConfigSpace softmax_space(const Workload& w) {
  const int64_t m = w.positive("M"), n = w.positive("N");
  std::vector<Knob> knobs{
      split_knob_from("tile_row", m, {{1}, {2}, {4}, {8}}),
      int_knob("vector_j", {1, 4, 8, 16}),
      choice_knob("row_stages", {"scalar", "vector_rows", "rfactor"}),
      choice_knob("unroll_k", {"off", "on"}),
      choice_knob("parallel", {"off", "rows"}),
      choice_knob("exp", {"inline", "stored"}),
      choice_knob("fuse", {"off", "row_tile"}),
  };
  auto instantiate = [](const ConfigSpace& s, const Config& c) {
    const int64_t vector_j = s.value0(c, "vector_j");
    const bool vector_rows = s.value0(c, "row_stages") == 1;
    const bool rfactored = s.value0(c, "row_stages") == 2;
    const bool unroll_k = s.value0(c, "unroll_k") == 1;
    const bool par = s.value0(c, "parallel") == 1;
    const bool exp_stored = s.value0(c, "exp") == 1;
    const bool fused = s.value0(c, "fuse") == 1;
    std::vector<ProgramStrategy> steps;
    if (!exp_stored) steps.push_back(compute_inline("row_exp"));
    steps.push_back(split("softmax.i", s.value(c, "tile_row")[1]));
    if (fused) {
      // One pass over x per tile of rows, each stage computed at the tile while its rows are in
      // cache; consumers first, so that each producer moves in front of its readers.
      for (const char* stage : {"exp_sum", "row_exp", "row_max"}) {
        if (!exp_stored && std::string(stage) == "row_exp") continue;
        steps.push_back(compute_at(stage, "softmax.i.outer"));
      }
    }
    // Inside a fused tile only the tile loop runs on threads.
    const bool par_stages = par && !fused;
    // The column loops of the elementwise nests: softmax, and row_exp when it is stored.
    for (const char* stage : {"softmax", "row_exp"}) {
      if (!exp_stored && std::string(stage) == "row_exp") continue;
      const std::string j = std::string(stage) + ".j";
      if (vector_j > 1) {
        steps.push_back(split(j, vector_j));
        steps.push_back(vectorize(j + ".inner"));
      }
    }
    if (exp_stored && par_stages) steps.push_back(parallel("row_exp.i"));
    for (const char* stage : {"row_max", "exp_sum"}) {
      const std::string i = std::string(stage) + ".i", k = std::string(stage) + ".k";
      if (rfactored) {
        // Vectors along the row: kRfLanes partial results per row, combined after the row.
        const std::string rf = std::string(stage) + ".rf";
        steps.insert(steps.end(),
                     {split(k, kRfLanes), rfactor(stage, k + ".inner"), vectorize(k + ".inner")});
        if (par_stages) {
          steps.insert(steps.end(), {parallel(i + ".init"), parallel(i), parallel(rf + ".init.0"),
                                     parallel(rf + ".0")});
        }
        continue;
      }
      if (vector_rows) steps.push_back(split(i, kRowLanes));
      if (unroll_k) steps.push_back(split(k, kUnrollK));
      if (vector_rows) {
        std::vector<std::string> order{i + ".outer"};
        if (unroll_k) {
          order.insert(order.end(), {k + ".outer", k + ".inner"});
        } else {
          order.push_back(k);
        }
        order.push_back(i + ".inner");
        steps.push_back(reorder(order));
        steps.push_back(vectorize(i + ".inner"));
      }
      if (unroll_k) steps.push_back(unroll(k + ".inner"));
      if (par_stages) {
        steps.push_back(parallel(i + ".init"));
        steps.push_back(parallel(vector_rows ? i + ".outer" : i));
      }
    }
    if (par) steps.push_back(parallel("softmax.i.outer"));
    return seq_all(steps);
  };
  return ConfigSpace(fmt::format("softmax:M={},N={}", m, n), std::move(knobs), instantiate);
}

}  // namespace tessera
