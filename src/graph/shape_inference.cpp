// Static shapes through the graph: the rules of the executor's builtin operators (the other
// operators' are their rows in op_elementwise.cpp, op_nn.cpp and op_data.cpp), and the walk that
// applies every row's rule and folds shape arithmetic as it goes.
#include <algorithm>
#include <limits>
#include <numeric>
#include <unordered_map>

#include "graph/graph.h"
#include "graph/op_attrs.h"
#include "graph/op_table.h"
#include "graph/reference.h"
#include "te/error.h"

namespace tessera::graph {

Window2d read_window(const Node& n, const std::vector<int64_t>& input,
                     const std::vector<int64_t>* weight) {
  if (input.size() != 4)
    throw_error("{}: needs a 4-D NCHW input, got {}", n.where(), shape_text(input));
  Window2d w;
  w.n = input[0], w.c = input[1], w.h = input[2], w.w = input[3];
  std::vector<int64_t> kernel = n.attr_ints("kernel_shape", {});
  if (weight) {
    if (weight->size() != 4)
      throw_error("{}: needs 4-D weights, got {}", n.where(), shape_text(*weight));
    w.group = n.attr_int("group", 1);
    w.out_channels = (*weight)[0];
    if (w.group <= 0 || w.c % w.group != 0 || w.out_channels % w.group != 0 ||
        (*weight)[1] * w.group != w.c)
      throw_error("{}: weights {} do not fit {} input channels in {} groups", n.where(),
                  shape_text(*weight), w.c, w.group);
    if (kernel.empty()) kernel = {(*weight)[2], (*weight)[3]};
    if (kernel.size() != 2 || kernel[0] != (*weight)[2] || kernel[1] != (*weight)[3])
      throw_error("{}: kernel_shape disagrees with the weights", n.where());
  }
  if (kernel.size() != 2) throw_error("{}: needs a 2-D kernel_shape", n.where());
  w.kh = kernel[0], w.kw = kernel[1];
  std::vector<int64_t> strides = n.attr_ints("strides", {1, 1});
  std::vector<int64_t> dilations = n.attr_ints("dilations", {1, 1});
  std::vector<int64_t> pads = n.attr_ints("pads", {0, 0, 0, 0});
  if (strides.size() != 2 || dilations.size() != 2 || pads.size() != 4)
    throw_error("{}: strides, dilations and pads must be 2-D", n.where());
  std::string auto_pad = n.attr_string("auto_pad", "NOTSET");
  if (auto_pad != "NOTSET" && auto_pad != "VALID" && auto_pad != "SAME_UPPER" &&
      auto_pad != "SAME_LOWER")
    throw_error("{}: auto_pad={} (NOTSET, VALID, SAME_UPPER or SAME_LOWER)", n.where(), auto_pad);
  if (auto_pad == "VALID") pads = {0, 0, 0, 0};
  w.sh = strides[0], w.sw = strides[1], w.dh = dilations[0], w.dw = dilations[1];
  w.pt = pads[0], w.pl = pads[1], w.pb = pads[2], w.pr = pads[3];
  w.count_include_pad = n.attr_int("count_include_pad", 0) != 0;
  if (w.sh <= 0 || w.sw <= 0 || w.dh <= 0 || w.dw <= 0 || w.pt < 0 || w.pl < 0 || w.pb < 0 ||
      w.pr < 0)
    throw_error("{}: strides and dilations must be positive and pads not negative", n.where());
  int64_t span_h = (w.kh - 1) * w.dh + 1, span_w = (w.kw - 1) * w.dw + 1;
  if (auto_pad.starts_with("SAME")) {
    // Output ceil(in / stride); the odd pixel of padding goes after (UPPER) or before (LOWER).
    auto same = [&](int64_t in, int64_t span, int64_t stride, int64_t& lead, int64_t& trail) {
      int64_t total = std::max<int64_t>(((in + stride - 1) / stride - 1) * stride + span - in, 0);
      lead = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      trail = total - lead;
    };
    same(w.h, span_h, w.sh, w.pt, w.pb);
    same(w.w, span_w, w.sw, w.pl, w.pr);
  }
  if (span_h > w.h + w.pt + w.pb || span_w > w.w + w.pl + w.pr)
    throw_error("{}: window {}x{} is larger than the padded input", n.where(), span_h, span_w);
  // ceil_mode rounds the output up, but (as ONNX and PyTorch) the last window must start inside
  // the input or its leading pad.
  const bool ceil = n.attr_int("ceil_mode", 0) != 0;
  auto out_dim = [ceil](int64_t in, int64_t lead, int64_t trail, int64_t span, int64_t stride) {
    int64_t room = in + lead + trail - span;
    int64_t o = (ceil ? (room + stride - 1) / stride : room / stride) + 1;
    if (ceil && (o - 1) * stride >= in + lead) --o;
    return o;
  };
  w.oh = out_dim(w.h, w.pt, w.pb, span_h, w.sh);
  w.ow = out_dim(w.w, w.pl, w.pr, span_w, w.sw);
  w.overhang = w.oh != (w.h + w.pt + w.pb - span_h) / w.sh + 1 ||
               w.ow != (w.w + w.pl + w.pr - span_w) / w.sw + 1;
  return w;
}

int64_t normalize_axis(const Node& n, int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= std::max<int64_t>(rank, 1))
    throw_error("{}: axis {} is out of range for rank {}", n.where(), axis, rank);
  return axis < 0 ? axis + rank : axis;
}

std::vector<int64_t> transpose_perm(const Node& n, int64_t rank) {
  std::vector<int64_t> perm = n.attr_ints("perm", {});
  if (perm.empty())
    for (int64_t i = rank - 1; i >= 0; --i) perm.push_back(i);
  std::vector<int64_t> sorted = perm;
  std::sort(sorted.begin(), sorted.end());
  for (int64_t i = 0; i < static_cast<int64_t>(sorted.size()); ++i)
    if (sorted[i] != i || static_cast<int64_t>(perm.size()) != rank)
      throw_error("{}: perm is not a permutation of {} dimensions", n.where(), rank);
  return perm;
}

GemmAttrs read_gemm(const Node& n, const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  if (a.size() != 2 || b.size() != 2)
    throw_error("{}: needs 2-D operands, got {} and {}", n.where(), shape_text(a), shape_text(b));
  GemmAttrs g;
  g.trans_a = n.attr_int("transA", 0) != 0;
  g.trans_b = n.attr_int("transB", 0) != 0;
  g.alpha = n.attr_float("alpha", 1.0);
  g.beta = n.attr_float("beta", 1.0);
  g.m = g.trans_a ? a[1] : a[0];
  g.k = g.trans_a ? a[0] : a[1];
  int64_t kb = g.trans_b ? b[1] : b[0];
  g.n = g.trans_b ? b[0] : b[1];
  if (kb != g.k) throw_error("{}: inner dimensions {} and {} differ", n.where(), g.k, kb);
  return g;
}

DepthToSpace read_depth_to_space(const Node& n, const std::vector<int64_t>& x) {
  if (x.size() != 4) throw_error("{}: needs a 4-D NCHW input", n.where());
  DepthToSpace d;
  if (n.op == "DepthToSpace") {
    d.bh = d.bw = n.attr_int("blocksize", 0);
    std::string mode = n.attr_string("mode", "DCR");
    if (mode != "DCR" && mode != "CRD")
      throw_error("{}: mode '{}' is neither DCR nor CRD", n.where(), mode);
    d.dcr = mode == "DCR";
    if (d.bh <= 0) throw_error("{}: blocksize must be positive", n.where());
    d.oh = x[2] * d.bh, d.ow = x[3] * d.bw;
  } else {  // tessera.PixelShuffle (lower_conv_transpose): a window of the result
    std::string mode = n.attr_string("mode", "CRD");
    if (mode != "DCR" && mode != "CRD")
      throw_error("{}: mode '{}' is neither DCR nor CRD", n.where(), mode);
    d.dcr = mode == "DCR";
    std::vector<int64_t> blocks = n.attr_ints("blocks", {}), offsets = n.attr_ints("offsets", {});
    std::vector<int64_t> sizes = n.attr_ints("sizes", {});
    if (blocks.size() != 2 || offsets.size() != 2 || sizes.size() != 2)
      throw_error("{}: blocks, offsets and sizes must be 2-D", n.where());
    d.bh = blocks[0], d.bw = blocks[1], d.top = offsets[0], d.left = offsets[1];
    d.oh = sizes[0], d.ow = sizes[1];
    if (d.bh <= 0 || d.bw <= 0 || d.top < 0 || d.left < 0 || d.oh <= 0 || d.ow <= 0 ||
        d.top + d.oh > x[2] * d.bh || d.left + d.ow > x[3] * d.bw)
      throw_error("{}: the window {}x{} at ({}, {}) does not fit the {}x{} blocks of {}", n.where(),
                  d.oh, d.ow, d.top, d.left, d.bh, d.bw, shape_text(x));
  }
  if (x[1] % (d.bh * d.bw) != 0)
    throw_error("{}: {} channels do not split into {}x{} blocks", n.where(), x[1], d.bh, d.bw);
  return d;
}

bool is_per_channel(const std::vector<int64_t>& s, int64_t channels) {
  return (s.size() == 3 && s[0] == channels && s[1] == 1 && s[2] == 1) ||
         (s.size() == 4 && s[0] == 1 && s[1] == channels && s[2] == 1 && s[3] == 1);
}

std::pair<double, double> clip_bounds(const Node& n, const Graph& g) {
  double lo = -std::numeric_limits<double>::infinity();
  double hi = std::numeric_limits<double>::infinity();
  lo = n.attr_float("min", lo);
  hi = n.attr_float("max", hi);
  for (size_t i = 1; i < 3 && i < n.inputs.size(); ++i) {
    const std::string& v = n.inputs[i];
    if (v.empty()) continue;
    auto it = g.constants.find(v);
    if (it == g.constants.end() || it->second.data.size() != 1)
      throw_error("{}: bound '{}' must be a constant scalar", n.where(), v);
    (i == 1 ? lo : hi) = it->second.data[0];
  }
  return {lo, hi};
}

std::vector<int64_t> reshape_target(const Node& n, const Graph& g) {
  if (n.inputs.size() < 2) throw_error("{}: needs a shape input", n.where());
  auto it = g.constants.find(n.inputs[1]);
  if (it == g.constants.end())
    throw_error("{}: the shape input '{}' is not a constant (dynamic shapes are not supported)",
                n.where(), n.inputs[1]);
  const std::vector<int64_t>& in = g.shape(n.inputs[0]);
  std::vector<int64_t> out;
  int64_t known = 1, infer = -1;
  for (size_t i = 0; i < it->second.data.size(); ++i) {
    int64_t d = saturated_int(it->second.data[i]);
    if (d == 0 && n.attr_int("allowzero", 0) == 0) {
      if (i >= in.size()) throw_error("{}: shape copies a missing dimension {}", n.where(), i);
      d = in[i];
    }
    if (d == -1) {
      if (infer >= 0) throw_error("{}: shape has two -1 dimensions", n.where());
      infer = static_cast<int64_t>(i);
    } else {
      if (d < 0) throw_error("{}: negative dimension {} in the shape", n.where(), d);
      if (__builtin_mul_overflow(known, d, &known))
        throw_error("{}: the shape {} has too many elements", n.where(),
                    shape_text(it->second.shape));
    }
    out.push_back(d);
  }
  int64_t total = num_elements(in);
  if (infer >= 0) {
    if (known == 0 || total % known != 0)
      throw_error("{}: cannot reshape {} into {}", n.where(), shape_text(in), shape_text(out));
    out[infer] = total / known;
  }
  if (num_elements(out) != total)
    throw_error("{}: cannot reshape {} into {}", n.where(), shape_text(in), shape_text(out));
  return out;
}

std::vector<int64_t> infer_builtin(const Node& n, const Graph& g) {
  auto in = [&](size_t i) -> const std::vector<int64_t>& {
    if (i >= n.inputs.size() || n.inputs[i].empty())
      throw_error("{}: input {} is missing", n.where(), i);
    return g.shape(n.inputs[i]);
  };
  const std::string& op = n.op;
  if (op == "Conv") {
    Window2d w = read_window(n, in(0), &in(1));
    if (n.inputs.size() > 2 && !n.inputs[2].empty() &&
        in(2) != std::vector<int64_t>{w.out_channels})
      throw_error("{}: bias {} does not match {} output channels", n.where(), shape_text(in(2)),
                  w.out_channels);
    return {w.n, w.out_channels, w.oh, w.ow};
  }
  if (op == "MaxPool" || op == "AveragePool") {
    if (n.outputs.size() > 1) throw_error("{}: the Indices output is not supported", n.where());
    Window2d w = read_window(n, in(0), nullptr);
    return {w.n, w.c, w.oh, w.ow};
  }
  if (op == "GlobalAveragePool") {
    const auto& x = in(0);
    if (x.size() != 4) throw_error("{}: needs a 4-D NCHW input", n.where());
    return {x[0], x[1], 1, 1};
  }
  if (op == "BatchNormalization") {
    if (n.outputs.size() > 1 || n.attr_int("training_mode", 0) != 0)
      throw_error("{}: only inference mode (one output) is supported", n.where());
    const auto& x = in(0);
    if (x.size() < 2) throw_error("{}: needs an input with channels", n.where());
    for (size_t i = 1; i <= 4; ++i)
      if (in(i) != std::vector<int64_t>{x[1]})
        throw_error("{}: parameter {} must have {} elements", n.where(), i, x[1]);
    return x;
  }
  if (op == "Relu" || op == "Clip" || op == "Identity" || op == "Dropout") return in(0);
  if (op == "Softmax") {
    normalize_axis(n, n.attr_int("axis", g.opset >= 13 ? -1 : 1),
                   static_cast<int64_t>(in(0).size()));
    return in(0);
  }
  if (op == "Add" || op == "Mul") {
    try {
      return broadcast_shapes(in(0), in(1));
    } catch (const Error& e) {
      throw_error("{}: {}", n.where(), e.what());
    }
  }
  if (op == "Flatten") {
    const auto& x = in(0);
    int64_t axis = normalize_axis(n, n.attr_int("axis", 1), static_cast<int64_t>(x.size()) + 1);
    int64_t outer = 1, inner = 1;
    for (int64_t i = 0; i < static_cast<int64_t>(x.size()); ++i) (i < axis ? outer : inner) *= x[i];
    return {outer, inner};
  }
  if (op == "Reshape") return reshape_target(n, g);
  if (op == "Gemm") {
    GemmAttrs a = read_gemm(n, in(0), in(1));
    if (n.inputs.size() > 2 && !n.inputs[2].empty()) {
      std::vector<int64_t> y{a.m, a.n};
      bool fits = false;
      try {
        fits = broadcast_shapes(y, in(2)) == y;
      } catch (const Error&) {
      }
      if (!fits)
        throw_error("{}: C {} does not broadcast to {}", n.where(), shape_text(in(2)),
                    shape_text(y));
    }
    return {a.m, a.n};
  }
  if (op == "MatMul") {
    const auto& a = in(0);
    const auto& b = in(1);
    if (a.size() < 2 || b.size() < 2) throw_error("{}: 1-D operands are not supported", n.where());
    if (a.back() != b[b.size() - 2])
      throw_error("{}: inner dimensions {} and {} differ", n.where(), shape_text(a), shape_text(b));
    // Batch dimensions broadcast as numpy's do; a 2-D B multiplies every row of A.
    std::vector<int64_t> out = broadcast_shapes({a.begin(), a.end() - 2}, {b.begin(), b.end() - 2});
    out.insert(out.end(), {a[a.size() - 2], b.back()});
    return out;
  }
  if (op == "Concat") {
    std::vector<int64_t> out = in(0);
    int64_t axis = normalize_axis(n, n.attr_int("axis", 0), static_cast<int64_t>(out.size()));
    for (size_t i = 1; i < n.inputs.size(); ++i) {
      const auto& s = in(i);
      for (size_t d = 0; d < out.size(); ++d)
        if (s.size() != out.size() || (static_cast<int64_t>(d) != axis && s[d] != out[d]))
          throw_error("{}: input {} {} does not fit {} along axis {}", n.where(), i, shape_text(s),
                      shape_text(in(0)), axis);
      out[axis] += s[axis];
    }
    return out;
  }
  if (op == "Transpose") {
    const auto& x = in(0);
    std::vector<int64_t> perm = transpose_perm(n, static_cast<int64_t>(x.size()));
    std::vector<int64_t> out;
    for (int64_t p : perm) out.push_back(x[p]);
    return out;
  }
  throw_internal("{}: not a builtin operator", n.where());
}

namespace {

// Shape arithmetic (Shape, Gather of it, Concat into a Reshape's shape) is evaluated as soon as
// its inputs are known, so the rules after it see constants: static shapes need nothing more.
// Only small values fold here; weights fold in the fold_constants pass.
constexpr int64_t kFoldAtImportElements = 4096;

void fold_shape_arithmetic(const Node& n, const OpDef& op, Graph& g) {
  const std::string& out = n.outputs[0];
  if (g.is_output(out) || g.is_constant(out)) return;
  if (op.fold) {
    g.constants[out] = op.fold(n, g);
    return;
  }
  // A folded row has no kernel: it is evaluated whatever its size.
  const bool small = op.lowering != Lowering::kFolded;
  std::vector<const HostTensor*> in;
  for (const std::string& v : n.inputs) {
    if (v.empty()) {
      in.push_back(nullptr);
      continue;
    }
    auto it = g.constants.find(v);
    if (it == g.constants.end() || (small && it->second.num_elements() > kFoldAtImportElements))
      return;
    in.push_back(&it->second);
  }
  if (in.empty() || (small && num_elements(g.shape(out)) > kFoldAtImportElements)) return;
  g.constants[out] = evaluate_node(n, g, in, true);
}

// A value computed from constants alone, whatever its size: what a folded row (ScatterND into
// Swin's attention masks) needs before the fold_constants pass. Returns whether it is constant.
bool fold_cone(const std::string& v, Graph& g,
               const std::unordered_map<std::string, const Node*>& producers) {
  if (v.empty() || g.is_constant(v)) return true;
  auto it = producers.find(v);
  if (it == producers.end() || g.is_output(v)) return false;
  const Node& n = *it->second;
  const OpDef* op = find_op(n.op);
  std::vector<const HostTensor*> in;
  for (const std::string& i : n.inputs) {
    if (!fold_cone(i, g, producers)) return false;
    in.push_back(i.empty() ? nullptr : &g.constants.at(i));
  }
  if (!op || in.empty()) return false;
  g.constants[v] = evaluate_node(n, g, in, true);
  return true;
}

// Kernels index with 32-bit integers, and a product of dimensions can wrap even int64 (a
// Reshape to [2^40, 2^40]): every value is checked as it gets its shape.
void check_size(const std::vector<int64_t>& shape, const std::string& what) {
  int64_t elements = 1;
  for (int64_t d : shape)
    if (__builtin_mul_overflow(elements, d, &elements) || elements > (int64_t{1} << 31) - 1)
      throw_error("{}: shape {} has more than 2^31 - 1 elements", what, shape_text(shape));
}

}  // namespace

void infer_shapes(Graph& g) {
  for (const std::string& v : g.inputs) check_size(g.shape(v), fmt::format("input '{}'", v));
  for (const auto& [name, c] : g.constants) g.shapes[name] = c.shape;
  std::unordered_map<std::string, const Node*> producers;
  for (const Node& n : g.nodes) {
    for (const std::string& v : n.outputs) producers[v] = &n;
  }
  for (Node& n : g.nodes) {
    // The planner's global pool is NCHW's; over one or three spatial axes it is a mean.
    if (n.op == "GlobalAveragePool" && n.inputs.size() == 1 && g.shapes.count(n.inputs[0]) &&
        g.shape(n.inputs[0]).size() != 4 && g.shape(n.inputs[0]).size() >= 3) {
      std::vector<int64_t> axes(g.shape(n.inputs[0]).size() - 2);
      std::iota(axes.begin(), axes.end(), 2);
      n.op = "ReduceMean";
      n.attrs["axes"] = axes;
      n.attrs["keepdims"] = int64_t{1};
    }
    if (n.outputs.size() != 1)
      throw_error("{}: {} outputs (one is supported)", n.where(), n.outputs.size());
    for (const std::string& v : n.inputs)
      if (!v.empty() && !g.shapes.count(v))
        throw_error("{}: input '{}' has no static shape", n.where(), v);
    const OpDef* op = find_op(n.op);
    if (!op) throw_error("{}: unsupported operator", n.where());
    std::vector<int64_t> s = op->infer(n, g);
    for (int64_t d : s)
      if (d < 0) throw_error("{}: inferred a negative dimension {}", n.where(), shape_text(s));
    check_size(s, n.where());
    g.shapes[n.outputs[0]] = s;
    if (op->lowering == Lowering::kFolded) {
      for (const std::string& v : n.inputs) fold_cone(v, g, producers);
    }
    fold_shape_arithmetic(n, *op, g);
    // An empty value is fine in shape arithmetic folded away (a Slice of a shape), not at run
    // time.
    if (num_elements(s) == 0 && !g.is_constant(n.outputs[0]))
      throw_error("{}: inferred an empty shape {}", n.where(), shape_text(s));
    if (op->lowering == Lowering::kFolded && !g.is_constant(n.outputs[0])) {
      std::string runtime;
      for (const std::string& v : n.inputs)
        if (!v.empty() && !g.is_constant(v)) runtime = v;
      throw_error(
          "{}: {} is evaluated at import only, and its input '{}' is known only at run time "
          "(dynamic shapes and values are not supported)",
          n.where(), n.op, runtime);
    }
  }
}

}  // namespace tessera::graph
