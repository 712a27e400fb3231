// The operator table's recurrent layers, LSTM and GRU: shape rule, reference and the te kernels
// of one time step's cell. The executor plans them (Planner::plan_recurrent): the input
// projection of every step as one dense, then per step a dense of the state and the cell.
#include <fmt/format.h>

#include <cmath>

#include "graph/op_rows.h"
#include "runtime/isa.h"
#include "te/error.h"
#include "te/tensor.h"

namespace tessera::graph {

using namespace rows;

RecurrentSpec recurrent_spec(const Node& n, const Graph& g) {
  RecurrentSpec s;
  s.gru = n.op == "GRU";
  s.gates = s.gru ? 3 : 4;
  const std::vector<int64_t>& x = input_shape(n, g, 0);
  if (x.size() != 3) throw_error("{}: X has shape {} (3-D is needed)", n.where(), shape_text(x));
  if (n.attr_int("layout", 0) != 0)
    throw_error("{}: layout=1 (batch first) is not supported", n.where());
  if (n.attr_int("input_forget", 0) != 0)
    throw_error("{}: input_forget=1 is not supported", n.where());
  s.seq = x[0], s.batch = x[1], s.input = x[2];
  const std::string direction = n.attr_string("direction", "forward");
  if (direction != "forward" && direction != "reverse" && direction != "bidirectional")
    throw_error("{}: direction '{}' (forward, reverse or bidirectional)", n.where(), direction);
  s.directions = direction == "bidirectional" ? 2 : 1;
  s.reverse_first = direction == "reverse";
  const std::vector<int64_t>& w = input_shape(n, g, 1);
  const std::vector<int64_t>& r = input_shape(n, g, 2);
  if (w.size() != 3 || w[0] != s.directions || w[1] % s.gates != 0 || w[2] != s.input)
    throw_error("{}: W has shape {}, X {} and {} directions need [{}, {}*hidden, {}]", n.where(),
                shape_text(w), shape_text(x), s.directions, s.directions, s.gates, s.input);
  s.hidden = w[1] / s.gates;
  if (n.attr_int("hidden_size", s.hidden) != s.hidden)
    throw_error("{}: hidden_size={} but W holds {}", n.where(), n.attr_int("hidden_size", 0),
                s.hidden);
  if (r != std::vector<int64_t>{s.directions, s.gates * s.hidden, s.hidden})
    throw_error("{}: R has shape {} (expected [{}, {}, {}])", n.where(), shape_text(r),
                s.directions, s.gates * s.hidden, s.hidden);
  if (has_input(n, 3)) {
    if (input_shape(n, g, 3) != std::vector<int64_t>{s.directions, 2 * s.gates * s.hidden})
      throw_error("{}: B has shape {}", n.where(), shape_text(input_shape(n, g, 3)));
  }
  if (has_input(n, 4))
    throw_error("{}: sequence_lens is not supported (every sequence runs {} steps)", n.where(),
                s.seq);
  const std::vector<int64_t> state{s.directions, s.batch, s.hidden};
  for (size_t i : {5, 6})
    if (has_input(n, i) && input_shape(n, g, i) != state)
      throw_error("{}: initial state {} has shape {} (expected {})", n.where(), n.inputs[i],
                  shape_text(input_shape(n, g, i)), shape_text(state));
  if (s.gru && has_input(n, 6)) throw_error("{}: a GRU has no initial_c", n.where());
  s.linear_before_reset = n.attr_int("linear_before_reset", 0) != 0;
  s.output = static_cast<int>(n.attr_int("tessera.output", 0));
  if (s.output < 0 || s.output > (s.gru ? 1 : 2))
    throw_error("{}: output {} does not exist", n.where(), s.output);
  return s;
}

namespace {

double logistic(double x) {
  return 1.0 / (1.0 + std::exp(-x));
}

// Naive doubles: the ground truth of the tests and of `run-model --check`.
HostTensor recurrent_reference(const Node& n, const Graph& g,
                               const std::vector<const HostTensor*>& in) {
  const RecurrentSpec s = recurrent_spec(n, g);
  const int64_t H = s.hidden, G = s.gates * H, B = s.batch;
  const HostTensor& x = *in.at(0);
  const HostTensor& w = *in.at(1);
  const HostTensor& r = *in.at(2);
  auto input = [&](size_t i) { return i < in.size() ? in[i] : nullptr; };
  HostTensor y{
      {s.seq, s.directions, B, H}, std::vector<double>(s.seq * s.directions * B * H), false};
  HostTensor last_h{{s.directions, B, H}, std::vector<double>(s.directions * B * H), false};
  HostTensor last_c = last_h;
  for (int64_t d = 0; d < s.directions; ++d) {
    const bool reverse = s.reverse_first || d == 1;
    auto bias = [&](int64_t k) { return input(3) ? input(3)->data[d * 2 * G + k] : 0.0; };
    std::vector<double> h(B * H, 0.0), c(B * H, 0.0);
    if (input(5)) std::copy_n(input(5)->data.begin() + d * B * H, B * H, h.begin());
    if (input(6)) std::copy_n(input(6)->data.begin() + d * B * H, B * H, c.begin());
    for (int64_t step = 0; step < s.seq; ++step) {
      const int64_t t = reverse ? s.seq - 1 - step : step;
      std::vector<double> gx(B * G), gh(B * G);
      for (int64_t b = 0; b < B; ++b)
        for (int64_t j = 0; j < G; ++j) {
          double ax = bias(j), ah = bias(G + j);
          for (int64_t k = 0; k < s.input; ++k)
            ax += x.data[(t * B + b) * s.input + k] * w.data[(d * G + j) * s.input + k];
          for (int64_t k = 0; k < H; ++k) ah += h[b * H + k] * r.data[(d * G + j) * H + k];
          gx[b * G + j] = ax, gh[b * G + j] = ah;
        }
      std::vector<double> next(B * H);
      for (int64_t b = 0; b < B; ++b)
        for (int64_t j = 0; j < H; ++j) {
          auto at = [&](const std::vector<double>& v, int64_t gate) {
            return v[b * G + gate * H + j];
          };
          if (!s.gru) {  // gates i, o, f, c
            const double i = logistic(at(gx, 0) + at(gh, 0)), o = logistic(at(gx, 1) + at(gh, 1));
            const double f = logistic(at(gx, 2) + at(gh, 2)),
                         cand = std::tanh(at(gx, 3) + at(gh, 3));
            c[b * H + j] = f * c[b * H + j] + i * cand;
            next[b * H + j] = o * std::tanh(c[b * H + j]);
            continue;
          }
          // gates z, r, h
          const double z = logistic(at(gx, 0) + at(gh, 0)), rg = logistic(at(gx, 1) + at(gh, 1));
          double hh = at(gx, 2);
          if (s.linear_before_reset) {
            hh += rg * at(gh, 2);
          } else {
            double a = bias(G + 2 * H + j);
            for (int64_t k = 0; k < H; ++k) {
              const double rk = logistic(gx[b * G + H + k] + gh[b * G + H + k]);
              a += rk * h[b * H + k] * r.data[(d * G + 2 * H + j) * H + k];
            }
            hh += a;
          }
          next[b * H + j] = (1 - z) * std::tanh(hh) + z * h[b * H + j];
        }
      h = next;
      std::copy(h.begin(), h.end(), y.data.begin() + (t * s.directions + d) * B * H);
    }
    std::copy(h.begin(), h.end(), last_h.data.begin() + d * B * H);
    std::copy(c.begin(), c.end(), last_c.data.begin() + d * B * H);
  }
  return s.output == 0 ? y : s.output == 1 ? last_h : last_c;
}

OpDef recurrent(std::string name, std::vector<std::string> attributes) {
  OpDef d;
  d.name = std::move(name);
  d.attributes = std::move(attributes);
  d.lowering = Lowering::kPlanner;
  d.infer = [](const Node& n, const Graph& g) {
    RecurrentSpec s = recurrent_spec(n, g);
    if (s.output == 0) return std::vector<int64_t>{s.seq, s.directions, s.batch, s.hidden};
    return std::vector<int64_t>{s.directions, s.batch, s.hidden};
  };
  d.reference = recurrent_reference;
  return d;
}

// Both through sigmoid, which the vector code computes on whole vectors (tanh would be a libm
// call lane by lane: 33 us of a 650-unit LSTM cell's 34, Zen AVX2). tanh x = 2 sigmoid(2x) - 1
// keeps an absolute error of a few float32 ulps of 1, what the gates need.
Expr vector_sigmoid(const Expr& x) {
  return sigmoid(x);
}

Expr vector_tanh(const Expr& x) {
  return f32(2.0) * sigmoid(f32(2.0) * x) - f32(1.0);
}

// Every unit in vectors, the tail guarded; threads are not worth a step of a few microseconds.
TeKernel finish_cell(std::string name, std::vector<Tensor> args) {
  return finish_kernel(std::move(name), std::move(args),
                       fmt::format("split(j, {}) ; vectorize(j.inner)", target_isa().f32_lanes),
                       false);
}

// Gate `gate` of unit j of image b: the step's input projection, the state's, and the biases.
struct GateInputs {
  Tensor xw, hr, bias_x, bias_h;
  int64_t hidden = 0;
  Expr operator()(int gate, const Var& b, const Var& j, bool with_state = true) const {
    Expr unit = Expr(j) + static_cast<int>(gate * hidden);
    Expr sum = xw(b, unit) + bias_x(unit);
    return with_state ? sum + hr(b, unit) + bias_h(unit) : sum;
  }
};

GateInputs gate_inputs(int64_t batch, int64_t hidden, int64_t gates, int64_t state_gates) {
  return {placeholder({batch, gates * hidden}, DType::kFloat32, "xw"),
          placeholder({batch, state_gates * hidden}, DType::kFloat32, "hr"),
          placeholder({gates * hidden}, DType::kFloat32, "bias_x"),
          placeholder({gates * hidden}, DType::kFloat32, "bias_h"), hidden};
}

}  // namespace

TeKernel lstm_cell_kernel(int64_t batch, int64_t hidden) {
  GateInputs gate = gate_inputs(batch, hidden, 4, 4);
  Tensor c = placeholder({batch, hidden}, DType::kFloat32, "c");
  Tensor next = compute({batch, hidden},
                        [&](const std::vector<Var>& at) {
                          const Var &b = at[0], &j = at[1];
                          return vector_sigmoid(gate(2, b, j)) * c(b, j) +
                                 vector_sigmoid(gate(0, b, j)) * vector_tanh(gate(3, b, j));
                        },
                        "c_next", {"b", "j"});
  return finish_cell("lstm_cell", {gate.xw, gate.hr, gate.bias_x, gate.bias_h, c, next});
}

TeKernel lstm_hidden_kernel(int64_t batch, int64_t hidden) {
  GateInputs gate = gate_inputs(batch, hidden, 4, 4);
  Tensor c = placeholder({batch, hidden}, DType::kFloat32, "c_next");
  Tensor h = compute({batch, hidden},
                     [&](const std::vector<Var>& at) {
                       const Var &b = at[0], &j = at[1];
                       return vector_sigmoid(gate(1, b, j)) * vector_tanh(c(b, j));
                     },
                     "h", {"b", "j"});
  return finish_cell("lstm_hidden", {gate.xw, gate.hr, gate.bias_x, gate.bias_h, c, h});
}

TeKernel gru_reset_kernel(int64_t batch, int64_t hidden) {
  GateInputs gate = gate_inputs(batch, hidden, 3, 2);
  Tensor h = placeholder({batch, hidden}, DType::kFloat32, "h");
  Tensor reset = compute({batch, hidden},
                         [&](const std::vector<Var>& at) {
                           return vector_sigmoid(gate(1, at[0], at[1])) * h(at[0], at[1]);
                         },
                         "reset_h", {"b", "j"});
  return finish_cell("gru_reset", {gate.xw, gate.hr, gate.bias_x, gate.bias_h, h, reset});
}

TeKernel gru_cell_kernel(int64_t batch, int64_t hidden, bool linear_before_reset) {
  GateInputs gate = gate_inputs(batch, hidden, 3, linear_before_reset ? 3 : 2);
  // Without linear_before_reset the candidate's state term is (r * h) R_h, computed beforehand.
  Tensor reset_term = placeholder({batch, hidden}, DType::kFloat32, "reset_term");
  Tensor h = placeholder({batch, hidden}, DType::kFloat32, "h");
  Tensor next = compute({batch, hidden},
                        [&](const std::vector<Var>& at) {
                          const Var &b = at[0], &j = at[1];
                          Expr z = vector_sigmoid(gate(0, b, j));
                          Expr unit = Expr(j) + static_cast<int>(2 * hidden);
                          Expr state = linear_before_reset
                                           ? vector_sigmoid(gate(1, b, j)) *
                                                 (gate.hr(b, unit) + gate.bias_h(unit))
                                           : reset_term(b, j) + gate.bias_h(unit);
                          Expr candidate = vector_tanh(gate(2, b, j, false) + state);
                          return (f32(1.0) - z) * candidate + z * h(b, j);
                        },
                        "h_next", {"b", "j"});
  std::vector<Tensor> args{gate.xw, gate.hr, gate.bias_x, gate.bias_h};
  if (!linear_before_reset) args.push_back(reset_term);
  args.push_back(h);
  args.push_back(next);
  return finish_cell("gru_cell", std::move(args));
}

void add_recurrent_rows(std::vector<OpDef>& table) {
  table.push_back(
      recurrent("LSTM", {"hidden_size", "direction", "layout", "input_forget", "tessera.output"}));
  table.push_back(recurrent(
      "GRU", {"hidden_size", "direction", "layout", "linear_before_reset", "tessera.output"}));
}

}  // namespace tessera::graph
