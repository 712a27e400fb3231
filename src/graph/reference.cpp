// Naive loops, written for obviousness: they are the ground truth for the passes and kernels.
#include "graph/reference.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "graph/op_attrs.h"
#include "graph/op_table.h"
#include "ops/nn.h"
#include "te/error.h"

namespace tessera::graph {

namespace {

std::vector<int64_t> strides_of(const std::vector<int64_t>& shape) {
  std::vector<int64_t> s(shape.size(), 1);
  for (int64_t i = static_cast<int64_t>(shape.size()) - 2; i >= 0; --i)
    s[i] = s[i + 1] * shape[i + 1];
  return s;
}

HostTensor binary(const HostTensor& a, const HostTensor& b, bool mul) {
  HostTensor out;
  out.shape = broadcast_shapes(a.shape, b.shape);
  out.data.resize(out.num_elements());
  for (int64_t i = 0; i < out.num_elements(); ++i) {
    double x = a.data[broadcast_index(i, out.shape, a.shape)];
    double y = b.data[broadcast_index(i, out.shape, b.shape)];
    out.data[i] = mul ? x * y : x + y;
  }
  out.is_int = a.is_int && b.is_int;
  return out;
}

HostTensor conv(const Node& n, const HostTensor& x, const HostTensor& wt, const HostTensor* bias) {
  Window2d w = read_window(n, x.shape, &wt.shape);
  HostTensor out{{w.n, w.out_channels, w.oh, w.ow}, {}, false};
  out.data.assign(out.num_elements(), 0.0);
  int64_t cg = w.c / w.group, og = w.out_channels / w.group;
  for (int64_t b = 0; b < w.n; ++b)
    for (int64_t o = 0; o < w.out_channels; ++o)
      for (int64_t y = 0; y < w.oh; ++y)
        for (int64_t xx = 0; xx < w.ow; ++xx) {
          double acc = bias ? bias->data[o] : 0.0;
          for (int64_t c = 0; c < cg; ++c)
            for (int64_t ky = 0; ky < w.kh; ++ky)
              for (int64_t kx = 0; kx < w.kw; ++kx) {
                int64_t iy = y * w.sh + ky * w.dh - w.pt, ix = xx * w.sw + kx * w.dw - w.pl;
                if (iy < 0 || iy >= w.h || ix < 0 || ix >= w.w) continue;
                acc += x.data[((b * w.c + o / og * cg + c) * w.h + iy) * w.w + ix] *
                       wt.data[((o * cg + c) * w.kh + ky) * w.kw + kx];
              }
          out.data[((b * w.out_channels + o) * w.oh + y) * w.ow + xx] = acc;
        }
  return out;
}

HostTensor pool(const Node& n, const HostTensor& x, bool is_max) {
  Window2d w = read_window(n, x.shape, nullptr);
  HostTensor out{{w.n, w.c, w.oh, w.ow}, {}, false};
  out.data.resize(out.num_elements());
  for (int64_t p = 0; p < w.n * w.c; ++p)
    for (int64_t y = 0; y < w.oh; ++y)
      for (int64_t xx = 0; xx < w.ow; ++xx) {
        double acc = is_max ? -std::numeric_limits<double>::infinity() : 0.0;
        int64_t count = 0;
        for (int64_t ky = 0; ky < w.kh; ++ky)
          for (int64_t kx = 0; kx < w.kw; ++kx) {
            int64_t iy = y * w.sh + ky * w.dh - w.pt, ix = xx * w.sw + kx * w.dw - w.pl;
            if (iy < 0 || iy >= w.h || ix < 0 || ix >= w.w) continue;
            double v = x.data[(p * w.h + iy) * w.w + ix];
            acc = is_max ? std::max(acc, v) : acc + v;
            ++count;
          }
        if (!is_max && w.count_include_pad) {
          // Counted pads stop at the padded input's edge (a ceil_mode window may reach past it).
          auto span = [](int64_t start, int64_t len, int64_t lo, int64_t hi) {
            return std::min(start + len, hi) - std::max(start, lo);
          };
          count = span(y * w.sh - w.pt, w.kh, -w.pt, w.h + w.pb) *
                  span(xx * w.sw - w.pl, w.kw, -w.pl, w.w + w.pr);
        }
        if (!is_max) acc /= double(count);
        out.data[(p * w.oh + y) * w.ow + xx] = acc;
      }
  return out;
}

// C[b][i][j] = sum_k A[b][i][k] * B[b or 0][k][j], A and B given as row-major matrices.
HostTensor matmul(const HostTensor& a, const HostTensor& b) {
  const int64_t m = a.shape[a.shape.size() - 2], k = a.shape.back(), nn = b.shape.back();
  const std::vector<int64_t> batch_a(a.shape.begin(), a.shape.end() - 2);
  const std::vector<int64_t> batch_b(b.shape.begin(), b.shape.end() - 2);
  const std::vector<int64_t> batch = broadcast_shapes(batch_a, batch_b);
  HostTensor out;
  out.shape = batch;
  out.shape.insert(out.shape.end(), {m, nn});
  out.data.assign(out.num_elements(), 0.0);
  for (int64_t q = 0; q < num_elements(batch); ++q) {
    const int64_t qa = broadcast_index(q, batch, batch_a), qb = broadcast_index(q, batch, batch_b);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t kk = 0; kk < k; ++kk) {
        double av = a.data[(qa * m + i) * k + kk];
        for (int64_t j = 0; j < nn; ++j)
          out.data[(q * m + i) * nn + j] += av * b.data[(qb * k + kk) * nn + j];
      }
  }
  return out;
}

HostTensor transpose(const HostTensor& x, const std::vector<int64_t>& perm) {
  HostTensor out;
  for (int64_t p : perm) out.shape.push_back(x.shape[p]);
  out.data.resize(x.data.size());
  out.is_int = x.is_int;
  std::vector<int64_t> in_strides = strides_of(x.shape);
  for (int64_t i = 0; i < out.num_elements(); ++i) {
    int64_t rest = i, src = 0;
    for (int64_t d = static_cast<int64_t>(out.shape.size()) - 1; d >= 0; --d) {
      src += rest % out.shape[d] * in_strides[perm[d]];
      rest /= out.shape[d];
    }
    out.data[i] = x.data[src];
  }
  return out;
}

HostTensor gemm(const Node& n, const HostTensor& a, const HostTensor& b, const HostTensor* c) {
  GemmAttrs ga = read_gemm(n, a.shape, b.shape);
  HostTensor at = ga.trans_a ? transpose(a, {1, 0}) : a;
  HostTensor bt = ga.trans_b ? transpose(b, {1, 0}) : b;
  HostTensor y = matmul(at, bt);
  for (double& v : y.data) v *= ga.alpha;
  if (c) {
    HostTensor scaled = *c;
    for (double& v : scaled.data) v *= ga.beta;
    y = binary(y, scaled, false);
  }
  return y;
}

HostTensor softmax(const Node& n, const Graph& g, const HostTensor& x) {
  auto rank = static_cast<int64_t>(x.shape.size());
  int64_t axis = normalize_axis(n, n.attr_int("axis", g.opset >= 13 ? -1 : 1), rank);
  return softmax_reference(x, axis, g.opset < 13, false);
}

HostTensor concat(const Node& n, const std::vector<const HostTensor*>& in) {
  HostTensor out;
  out.shape = in[0]->shape;
  auto axis = normalize_axis(n, n.attr_int("axis", 0), static_cast<int64_t>(out.shape.size()));
  out.shape[axis] = 0;
  for (const HostTensor* t : in) out.shape[axis] += t->shape[axis];
  int64_t outer = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= out.shape[d];
  out.is_int = in[0]->is_int;
  for (int64_t o = 0; o < outer; ++o)
    for (const HostTensor* t : in) {
      int64_t chunk = t->num_elements() / outer;
      out.data.insert(out.data.end(), t->data.begin() + o * chunk,
                      t->data.begin() + (o + 1) * chunk);
    }
  return out;
}

}  // namespace

HostTensor reference_builtin(const Node& n, const Graph& g,
                             const std::vector<const HostTensor*>& in) {
  auto arg = [&](size_t i) -> const HostTensor& {
    if (i >= in.size() || !in[i]) throw_error("{}: input {} is missing", n.where(), i);
    return *in[i];
  };
  auto optional = [&](size_t i) { return i < in.size() ? in[i] : nullptr; };
  const std::string& op = n.op;
  if (op == "Conv") return conv(n, arg(0), arg(1), optional(2));
  if (op == "MaxPool" || op == "AveragePool") return pool(n, arg(0), op == "MaxPool");
  if (op == "GlobalAveragePool") {
    const HostTensor& x = arg(0);
    HostTensor out{{x.shape[0], x.shape[1], 1, 1}, {}, false};
    int64_t plane = x.shape[2] * x.shape[3];
    for (int64_t p = 0; p < x.shape[0] * x.shape[1]; ++p) {
      double s = 0;
      for (int64_t i = 0; i < plane; ++i) s += x.data[p * plane + i];
      out.data.push_back(s / double(plane));
    }
    return out;
  }
  if (op == "BatchNormalization") {
    const HostTensor& x = arg(0);
    double eps = n.attr_float("epsilon", 1e-5);
    HostTensor out = x;
    int64_t c = x.shape[1], inner = x.num_elements() / (x.shape[0] * c);
    for (int64_t i = 0; i < x.num_elements(); ++i) {
      int64_t ch = i / inner % c;
      out.data[i] =
          (x.data[i] - arg(3).data[ch]) / std::sqrt(arg(4).data[ch] + eps) * arg(1).data[ch] +
          arg(2).data[ch];
    }
    return out;
  }
  if (op == "Relu") {
    HostTensor out = arg(0);
    for (double& v : out.data) v = std::max(v, 0.0);
    return out;
  }
  if (op == "Clip") {
    auto [lo, hi] = clip_bounds(n, g);
    HostTensor out = arg(0);
    for (double& v : out.data) v = std::min(std::max(v, lo), hi);
    return out;
  }
  if (op == "Add" || op == "Mul") return binary(arg(0), arg(1), op == "Mul");
  if (op == "Identity" || op == "Dropout") return arg(0);
  if (op == "Flatten" || op == "Reshape") {
    HostTensor out = arg(0);
    out.shape = g.shape(n.outputs[0]);
    return out;
  }
  if (op == "Gemm") return gemm(n, arg(0), arg(1), optional(2));
  if (op == "MatMul") return matmul(arg(0), arg(1));
  if (op == "Softmax") return softmax(n, g, arg(0));
  if (op == "Concat") return concat(n, in);
  if (op == "Transpose")
    return transpose(arg(0), transpose_perm(n, static_cast<int64_t>(arg(0).shape.size())));
  throw_internal("{}: not a builtin operator", n.where());
}

HostTensor evaluate_node(const Node& n, const Graph& g, const std::vector<const HostTensor*>& in,
                         bool as_float32) {
  const OpDef* op = find_op(n.op);
  if (!op) throw_error("{}: unsupported operator", n.where());
  HostTensor out = op->reference(n, g, in);
  for (const Epilogue& e : n.epilogue) {
    switch (e.kind) {
      case Epilogue::Kind::kAdd: {
        const HostTensor* other = in.at(e.input);
        for (int64_t i = 0; i < out.num_elements(); ++i)
          out.data[i] += other->data[broadcast_index(i, out.shape, other->shape)];
        break;
      }
      case Epilogue::Kind::kRelu:
        for (double& v : out.data) v = std::max(v, 0.0);
        break;
      case Epilogue::Kind::kClip:
        for (double& v : out.data) v = std::min(std::max(v, e.lo), e.hi);
        break;
      case Epilogue::Kind::kHardSwish:
      case Epilogue::Kind::kSilu:
      case Epilogue::Kind::kGelu:
      case Epilogue::Kind::kTanh: {
        const Activation act = fused_activation(e.kind);
        for (double& v : out.data) v = activate(act, v);
        break;
      }
    }
  }
  if (as_float32 && !out.is_int)
    for (double& v : out.data) v = static_cast<float>(v);
  return out;
}

std::vector<HostTensor> run_reference(const Graph& g,
                                      const std::map<std::string, HostTensor>& inputs) {
  std::map<std::string, HostTensor> values = g.constants;
  for (const std::string& name : g.inputs) {
    auto it = inputs.find(name);
    if (it == inputs.end()) throw_error("no value given for input '{}'", name);
    if (it->second.shape != g.shape(name))
      throw_error("input '{}' has shape {}, the model expects {}", name,
                  shape_text(it->second.shape), shape_text(g.shape(name)));
    values[name] = it->second;
  }
  for (const Node& n : g.nodes) {
    std::vector<const HostTensor*> in;
    for (const std::string& v : n.inputs) in.push_back(v.empty() ? nullptr : &values.at(v));
    values[n.outputs[0]] = evaluate_node(n, g, in);
  }
  std::vector<HostTensor> out;
  for (const std::string& name : g.outputs) out.push_back(values.at(name));
  return out;
}

}  // namespace tessera::graph
