// LSTM and GRU as steps over time: their dense products are library workloads (tuning tasks),
// their cells te kernels that each time step reuses.
#include <algorithm>
#include <optional>

#include "graph/kernels.h"
#include "graph/op_table.h"
#include "graph/planner.h"
#include "graph/weight_layouts.h"
#include "te/error.h"

namespace tessera::graph {

void Planner::plan_recurrent(const Node& n) {
  const RecurrentSpec s = recurrent_spec(n, g_);
  const int64_t H = s.hidden, G = s.gates * H, B = s.batch;
  // Weights computed at run time (not folded to constants) would need a dense of two inputs.
  for (size_t i : {1, 2, 3})
    if (n.inputs.size() > i && !n.inputs[i].empty() && !g_.is_constant(n.inputs[i]))
      throw_error("{}: input {} ('{}') is not a constant", n.where(), i, n.inputs[i]);
  const HostTensor& w = g_.constants.at(n.inputs[1]);
  const HostTensor& r = g_.constants.at(n.inputs[2]);
  auto has = [&](size_t i) { return n.inputs.size() > i && !n.inputs[i].empty(); };
  const std::vector<int64_t> state{B, H};
  const std::vector<int64_t> sequence{s.seq, s.directions, B, H};
  size_t y = s.output == 0 ? output_slot(n) : new_array(sequence);
  size_t last = s.output == 0 ? 0 : output_slot(n);
  size_t x = slot(n.inputs[0]);
  std::optional<size_t> zeros;
  auto zero_state = [&] {
    if (!zeros) zeros = constant_array({state, std::vector<double>(B * H, 0.0), false});
    return *zeros;
  };
  auto at_step = [&](int64_t t, int64_t d) { return ((t * s.directions) + d) * B * H; };
  for (int64_t d = 0; d < s.directions; ++d) {
    const bool reverse = s.reverse_first || d == 1;
    size_t xw = new_array({s.seq * B, G});
    dense_step(x, dense_weights(constant_rows(w, d, 0, G), s.seq * B), xw);
    HostTensor bias_x{{G}, std::vector<double>(G, 0.0), false}, bias_h = bias_x;
    if (has(3)) {
      const HostTensor& b = g_.constants.at(n.inputs[3]);
      std::copy_n(b.data.begin() + d * 2 * G, G, bias_x.data.begin());
      std::copy_n(b.data.begin() + d * 2 * G + G, G, bias_h.data.begin());
    }
    // An LSTM adds both biases to every gate: one vector, the other zero.
    if (!s.gru)
      for (int64_t k = 0; k < G; ++k) bias_x.data[k] += bias_h.data[k], bias_h.data[k] = 0;
    size_t bx = constant_array(bias_x), bh = constant_array(bias_h);
    // GRU without linear_before_reset: the state's dense covers z and r, R_h runs after reset.
    const int64_t state_gates = s.gru && !s.linear_before_reset ? 2 : s.gates;
    const DenseWeights rd = dense_weights(constant_rows(r, d, 0, state_gates * H), B);
    std::optional<DenseWeights> r_h;
    if (state_gates == 2) r_h = dense_weights(constant_rows(r, d, 2 * H, H), B);
    size_t hr = new_array({B, state_gates * H});
    size_t h = has(5) ? part_array(slot(n.inputs[5]), d * B * H, state) : zero_state();
    size_t c = has(6) ? part_array(slot(n.inputs[6]), d * B * H, state) : zero_state();
    size_t cells[2] = {0, 0};
    if (!s.gru) cells[0] = new_array(state), cells[1] = new_array(state);
    for (int64_t step = 0; step < s.seq; ++step) {
      const int64_t t = reverse ? s.seq - 1 - step : step;
      size_t xw_t = part_array(xw, t * B * G, {B, G});
      size_t h_next = part_array(y, at_step(t, d), state);
      // Every other step reads the recurrent weights backwards, so that it starts on the rows
      // the step before read last, still in L2: the same order each step found none of a 6.8 MB
      // matrix there (70 steps of 650 x 2600: 7.6 -> 4.6 ms, Xeon AVX-512, 2 threads).
      dense_step(h, rd, hr, step % 2 == 1);
      if (!s.gru) {
        size_t c_next = cells[step % 2];
        te_step(lstm_cell_kernel(B, H), {xw_t, hr, bx, bh, c, c_next});
        te_step(lstm_hidden_kernel(B, H), {xw_t, hr, bx, bh, c_next, h_next});
        c = c_next;
      } else if (s.linear_before_reset) {
        te_step(gru_cell_kernel(B, H, true), {xw_t, hr, bx, bh, h, h_next});
      } else {
        size_t reset_h = new_array(state), reset_term = new_array(state);
        te_step(gru_reset_kernel(B, H), {xw_t, hr, bx, bh, h, reset_h});
        dense_step(reset_h, *r_h, reset_term, step % 2 == 1);
        te_step(gru_cell_kernel(B, H, false), {xw_t, hr, bx, bh, reset_term, h, h_next});
      }
      h = h_next;
    }
    if (s.output != 0)
      te_step(elementwise_kernel(state, {state}, {}),
              {s.output == 1 ? h : c, part_array(last, d * B * H, state)});
  }
}

}  // namespace tessera::graph
