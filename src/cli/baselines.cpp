#include "cli/baselines.h"

#include <oneapi/dnnl/dnnl.h>

#include <cstring>
#include <oneapi/dnnl/dnnl.hpp>
#include <optional>
#include <unordered_map>

#include "bench/openblas_env.h"
#include "runtime/module.h"
#include "runtime/ndarray.h"
#include "runtime/timer.h"

namespace tessera {

namespace {

using dnnl::memory;
using Tag = memory::format_tag;

memory::desc md(const memory::dims& d, Tag tag) {
  return memory::desc(d, memory::data_type::f32, tag);
}

// Allocates (zeroed) memory for every argument the primitive descriptor asks for and times it.
template <typename PrimitiveDesc, typename Primitive>
double time_primitive(const dnnl::engine& engine, const PrimitiveDesc& pd,
                      const std::vector<std::pair<int, memory::desc>>& args, int repeat) {
  dnnl::stream stream(engine);
  std::unordered_map<int, memory> mems;
  for (const auto& [arg, desc] : args) {
    memory m(desc, engine);
    std::memset(m.get_data_handle(), 0, desc.get_size());
    mems.emplace(arg, m);
  }
  Primitive prim(pd);
  Timing t = time_function(
      [&] {
        prim.execute(stream, mems);
        stream.wait();
      },
      repeat);
  return t.median;
}

struct ConvParams {
  int64_t n, c, h, w, o, k, s, p, d, g, oh, ow;
  int64_t kw, pw;  // the window's width and W's padding (conv2d_nchwc's KW, PW), else k and p
};

ConvParams conv_params(const Workload& w, bool depthwise) {
  ConvParams c{};
  c.n = w.get("N");
  c.c = w.get("C");
  c.h = w.get("H");
  c.w = w.get("W");
  c.o = depthwise ? c.c : w.get("O");
  c.k = w.get("K");
  c.s = w.get("S");
  c.p = w.get("P");
  c.d = depthwise ? 1 : w.get_or("D", 1);
  c.g = depthwise ? c.c : w.get_or("G", 1);
  c.kw = w.kernel_width();
  c.pw = w.width_padding();
  int64_t span = (c.k - 1) * c.d + 1, span_w = (c.kw - 1) * c.d + 1;
  c.oh = (c.h + 2 * c.p - span) / c.s + 1;
  c.ow = (c.w + 2 * c.pw - span_w) / c.s + 1;
  return c;
}

// oneDNN's convolution: `plain` fixes NCHW data and OIHW weights (tessera's layout, the library
// choosing its best implementation for it); otherwise the layouts are oneDNN's own choice (usually
// channel-blocked), with data and weights already converted, as a framework keeps them.
Baseline onednn_conv(const OpInstance& op, const ConvParams& c, bool bias_relu, bool plain,
                     int repeat) {
  dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  memory::dims weights = c.g == 1 ? memory::dims{c.o, c.c, c.k, c.kw}
                                  : memory::dims{c.g, c.o / c.g, c.c / c.g, c.k, c.kw};
  Tag data_tag = plain ? Tag::nchw : Tag::any;
  Tag weight_tag = plain ? (c.g == 1 ? Tag::oihw : Tag::goihw) : Tag::any;
  memory::desc src = md({c.n, c.c, c.h, c.w}, data_tag), wei = md(weights, weight_tag),
               dst = md({c.n, c.o, c.oh, c.ow}, data_tag), bias = md({c.o}, Tag::x);
  memory::dims strides{c.s, c.s}, dilates{c.d - 1, c.d - 1}, pad{c.p, c.pw};
  auto desc = bias_relu
                  ? dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference,
                                                    dnnl::algorithm::convolution_direct, src, wei,
                                                    bias, dst, strides, dilates, pad, pad)
                  : dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference,
                                                    dnnl::algorithm::convolution_direct, src, wei,
                                                    dst, strides, dilates, pad, pad);
  dnnl::primitive_attr attr;
  if (bias_relu) {
    dnnl::post_ops ops;
    ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
    attr.set_post_ops(ops);
  }
  dnnl::convolution_forward::primitive_desc pd(desc, attr, engine);
  std::vector<std::pair<int, memory::desc>> args{{DNNL_ARG_SRC, pd.src_desc()},
                                                 {DNNL_ARG_WEIGHTS, pd.weights_desc()},
                                                 {DNNL_ARG_DST, pd.dst_desc()}};
  if (bias_relu) args.emplace_back(DNNL_ARG_BIAS, pd.bias_desc());
  double seconds =
      time_primitive<dnnl::convolution_forward::primitive_desc, dnnl::convolution_forward>(
          engine, pd, args, repeat);
  std::string what = plain ? "NCHW in and out" : "its own blocked layouts, data pre-converted";
  return {"oneDNN convolution (" + std::string(pd.impl_info_str()) + ", " + what + ")",
          op.flops / seconds * 1e-9, plain, !plain};
}

// oneDNN's convolution with every layout fixed (the kernel's, so that nothing is reordered), or
// nullopt where oneDNN has only its reference kernel for them: timing that would compare against
// a kernel nobody would run.
std::optional<Baseline> onednn_conv_in_layouts(const OpInstance& op, const ConvParams& c,
                                               Tag data_tag, const memory::dims& weight_dims,
                                               Tag weight_tag, Tag out_tag, int repeat) {
  dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  memory::desc src = md({c.n, c.c, c.h, c.w}, data_tag), wei = md(weight_dims, weight_tag),
               dst = md({c.n, c.o, c.oh, c.ow}, out_tag);
  memory::dims strides{c.s, c.s}, dilates{c.d - 1, c.d - 1}, pad{c.p, c.pw};
  dnnl::convolution_forward::desc desc(dnnl::prop_kind::forward_inference,
                                       dnnl::algorithm::convolution_direct, src, wei, dst, strides,
                                       dilates, pad, pad);
  dnnl::convolution_forward::primitive_desc pd(desc, engine);
  if (std::string(pd.impl_info_str()).rfind("ref", 0) == 0) return std::nullopt;
  double seconds =
      time_primitive<dnnl::convolution_forward::primitive_desc, dnnl::convolution_forward>(
          engine, pd,
          {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, pd.weights_desc()}, {DNNL_ARG_DST, dst}},
          repeat);
  return Baseline{
      "oneDNN convolution (" + std::string(pd.impl_info_str()) + ", the kernel's blocked layouts)",
      op.flops / seconds * 1e-9, true};
}

// conv2d_nchwc's layouts: data in blocks of 16 or 8 channels (or, with fewer channels than a
// block, [N][1][H][W][C], which is NHWC), weights OIhw16i16o (Ohwi16o for such an input), output
// nChw16c; nullopt for other blocks, which have no oneDNN format tag. (C1's NHWC input with a
// blocked output has only the reference kernel.)
std::optional<Baseline> onednn_conv_nchwc(const OpInstance& op, const ConvParams& c, int64_t cb,
                                          int repeat) {
  if (cb != 16 && cb != 8) return std::nullopt;
  bool wide = cb == 16, whole_input = c.c % cb != 0;
  if (c.g > 1) {
    // Groups of whole blocks (G=): the same blocks inside each group's weights.
    Tag blocked = wide ? Tag::nChw16c : Tag::nChw8c;
    return onednn_conv_in_layouts(op, c, blocked, {c.g, c.o / c.g, c.c / c.g, c.k, c.kw},
                                  wide ? Tag::gOIhw16i16o : Tag::gOIhw8i8o, blocked, repeat);
  }
  Tag data_tag = whole_input ? Tag::nhwc : wide ? Tag::nChw16c : Tag::nChw8c;
  Tag weight_tag =
      whole_input ? (wide ? Tag::Ohwi16o : Tag::Ohwi8o) : (wide ? Tag::OIhw16i16o : Tag::OIhw8i8o);
  return onednn_conv_in_layouts(op, c, data_tag, {c.o, c.c, c.k, c.kw}, weight_tag,
                                wide ? Tag::nChw16c : Tag::nChw8c, repeat);
}

// depthwise_conv2d_nchwc's layouts: nChw16c (8c) data and output, Goihw16g (8g) weights; nullopt
// for other blocks.
std::optional<Baseline> onednn_depthwise_nchwc(const OpInstance& op, const ConvParams& c,
                                               int64_t cb, int repeat) {
  if (cb != 16 && cb != 8) return std::nullopt;
  Tag blocked = cb == 16 ? Tag::nChw16c : Tag::nChw8c;
  return onednn_conv_in_layouts(op, c, blocked, {c.g, 1, 1, c.k, c.k},
                                cb == 16 ? Tag::Goihw16g : Tag::Goihw8g, blocked, repeat);
}

Baseline onednn_pool(const OpInstance& op, const Workload& w, bool is_max, int repeat) {
  ConvParams c = conv_params(w, true);
  dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  dnnl::pooling_forward::desc desc(
      dnnl::prop_kind::forward_inference,
      is_max ? dnnl::algorithm::pooling_max : dnnl::algorithm::pooling_avg_include_padding,
      md({c.n, c.c, c.h, c.w}, Tag::nchw), md({c.n, c.c, c.oh, c.ow}, Tag::nchw), {c.s, c.s},
      {c.k, c.k}, {c.p, c.p}, {c.p, c.p});
  dnnl::pooling_forward::primitive_desc pd(desc, engine);
  double seconds = time_primitive<dnnl::pooling_forward::primitive_desc, dnnl::pooling_forward>(
      engine, pd, {{DNNL_ARG_SRC, pd.src_desc()}, {DNNL_ARG_DST, pd.dst_desc()}}, repeat);
  return {"oneDNN pooling (" + std::string(pd.impl_info_str()) + ", NCHW)",
          op.flops / seconds * 1e-9, true};
}

Baseline onednn_matmul(const OpInstance& op, int64_t batch, int64_t m, int64_t n, int64_t k,
                       int repeat) {
  dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  dnnl::matmul::desc desc(md({batch, m, k}, Tag::abc), md({batch, k, n}, Tag::abc),
                          md({batch, m, n}, Tag::abc));
  dnnl::matmul::primitive_desc pd(desc, engine);
  double seconds = time_primitive<dnnl::matmul::primitive_desc, dnnl::matmul>(
      engine, pd,
      {{DNNL_ARG_SRC, pd.src_desc()},
       {DNNL_ARG_WEIGHTS, pd.weights_desc()},
       {DNNL_ARG_DST, pd.dst_desc()}},
      repeat);
  return {"oneDNN matmul (" + std::string(pd.impl_info_str()) + ")", op.flops / seconds * 1e-9,
          true};
}

Baseline onednn_elementwise(const OpInstance& op, const Workload& w, int repeat) {
  dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  int64_t m = w.get("M"), n = w.get("N");
  memory::desc a = md({m, n}, Tag::ab);
  if (w.op == "relu") {
    dnnl::eltwise_forward::desc desc(dnnl::prop_kind::forward_inference,
                                     dnnl::algorithm::eltwise_relu, a, 0.0f, 0.0f);
    dnnl::eltwise_forward::primitive_desc pd(desc, engine);
    double seconds = time_primitive<dnnl::eltwise_forward::primitive_desc, dnnl::eltwise_forward>(
        engine, pd, {{DNNL_ARG_SRC, a}, {DNNL_ARG_DST, a}}, repeat);
    return {"oneDNN eltwise relu", op.flops / seconds * 1e-9, true};
  }
  memory::desc b = w.op == "bias_add" ? md({1, n}, Tag::ab) : a;
  dnnl::binary::desc desc(dnnl::algorithm::binary_add, a, b, a);
  dnnl::binary::primitive_desc pd(desc, engine);
  double seconds = time_primitive<dnnl::binary::primitive_desc, dnnl::binary>(
      engine, pd, {{DNNL_ARG_SRC_0, a}, {DNNL_ARG_SRC_1, b}, {DNNL_ARG_DST, a}}, repeat);
  return {"oneDNN binary add", op.flops / seconds * 1e-9, true};
}

Baseline onednn_softmax(const OpInstance& op, const Workload& w, int repeat) {
  dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  memory::desc x = md({w.get("M"), w.get("N")}, Tag::ab);
  dnnl::softmax_forward::desc desc(dnnl::prop_kind::forward_inference, x, 1);
  dnnl::softmax_forward::primitive_desc pd(desc, engine);
  double seconds = time_primitive<dnnl::softmax_forward::primitive_desc, dnnl::softmax_forward>(
      engine, pd, {{DNNL_ARG_SRC, x}, {DNNL_ARG_DST, x}}, repeat);
  return {"oneDNN softmax (" + std::string(pd.impl_info_str()) + ")", op.flops / seconds * 1e-9,
          true};
}

// softmax(Q Kt + bias) V as oneDNN runs it: this version has no attention primitive, so a batched
// matmul into the scores (the bias, expanded to every head, added by a binary post-op), a
// softmax along the keys and a batched matmul with V, the scores in memory between them: what an
// unfused graph does.
Baseline onednn_attention(const OpInstance& op, const Workload& w, int repeat) {
  dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  dnnl::stream stream(engine);
  const int64_t b = w.get("B"), m = w.get("M"), n = w.get("N"), d = w.get("D"), dv = w.get("DV");
  const int64_t heads = w.get_or("BB", 0);
  const memory::desc q = md({b, m, d}, Tag::abc), kt = md({b, d, n}, Tag::abc),
                     v = md({b, n, dv}, Tag::abc), scores = md({b, m, n}, Tag::abc),
                     out = md({b, m, dv}, Tag::abc), rows = md({b * m, n}, Tag::ab);
  // A bias for every head: a broadcast one runs oneDNN's reference matmul (0.19 GFLOP/s).
  const memory::desc bias = md({b, m, n}, Tag::abc);
  dnnl::primitive_attr attr;
  if (heads > 0) {
    dnnl::post_ops post;
    post.append_binary(dnnl::algorithm::binary_add, bias);
    attr.set_post_ops(post);
  }
  dnnl::matmul score_product(
      dnnl::matmul::primitive_desc(dnnl::matmul::desc(q, kt, scores), attr, engine));
  dnnl::softmax_forward softmax(dnnl::softmax_forward::primitive_desc(
      dnnl::softmax_forward::desc(dnnl::prop_kind::forward_inference, rows, 1), engine));
  dnnl::matmul value_product(
      dnnl::matmul::primitive_desc(dnnl::matmul::desc(scores, v, out), engine));
  // Random operands (the exponentials' cost does not depend on them; a zero input would make
  // every score equal), oneDNN memory over tessera's arrays.
  std::vector<NDArray> arrays;
  std::vector<memory> mems;
  for (const memory::desc& desc : {q, kt, v, scores, out, bias}) {
    const memory::dims& dims = desc.dims();
    arrays.push_back(
        NDArray::empty(std::vector<int64_t>(dims.begin(), dims.end()), DType::kFloat32));
    arrays.back().fill_random(arrays.size());
    mems.emplace_back(desc, engine, arrays.back().data_as<float>());
  }
  memory score_rows(rows, engine, mems[3].get_data_handle());
  std::unordered_map<int, memory> first{
      {DNNL_ARG_SRC, mems[0]}, {DNNL_ARG_WEIGHTS, mems[1]}, {DNNL_ARG_DST, mems[3]}};
  if (heads > 0) first.emplace(DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1, mems[5]);
  Timing t = time_function(
      [&] {
        score_product.execute(stream, first);
        softmax.execute(stream, {{DNNL_ARG_SRC, score_rows}, {DNNL_ARG_DST, score_rows}});
        value_product.execute(
            stream,
            {{DNNL_ARG_SRC, mems[3]}, {DNNL_ARG_WEIGHTS, mems[2]}, {DNNL_ARG_DST, mems[4]}});
        stream.wait();
      },
      repeat);
  return {"oneDNN matmul + softmax + matmul (no fused attention primitive; the scores in memory)",
          op.flops / t.median * 1e-9, true};
}

Baseline openblas(const OpInstance& op, int64_t batch, int64_t m, int64_t n, int64_t k,
                  bool transpose_b, int repeat) {
  double seconds =
      bench::time_openblas_sgemm_batched(batch, m, n, k, transpose_b, num_threads(), repeat);
  return {std::string("OpenBLAS cblas_sgemm") + (batch > 1 ? " per batch" : "") + " (" +
              bench::openblas_core_description() + ")",
          op.flops / seconds * 1e-9, true};
}

Baseline onednn_sgemm(const OpInstance& op, int64_t m, int64_t n, int64_t k, bool transpose_b,
                      int repeat) {
  NDArray a = NDArray::empty({m, k}, DType::kFloat32), b = NDArray::empty({k, n}, DType::kFloat32),
          c = NDArray::empty({m, n}, DType::kFloat32);
  a.fill_random(1);
  b.fill_random(2);
  Timing t = time_function(
      [&] {
        dnnl_sgemm('N', transpose_b ? 'T' : 'N', m, n, k, 1.0f, a.data_as<float>(), k,
                   b.data_as<float>(), transpose_b ? k : n, 0.0f, c.data_as<float>(), n);
      },
      repeat);
  return {"oneDNN dnnl_sgemm", op.flops / t.median * 1e-9, true};
}

}  // namespace

std::vector<Baseline> library_baselines(const OpInstance& op, const Workload& w, int repeat) {
  const std::string& kind = w.op;
  if (kind == "matmul" || kind == "dense") {
    bool dense = kind == "dense";
    int64_t m = dense ? w.get("B") : w.get("M"), n = dense ? w.get("O") : w.get("N"),
            k = dense ? w.get("I") : w.get("K");
    return {openblas(op, 1, m, n, k, dense, repeat), onednn_sgemm(op, m, n, k, dense, repeat)};
  }
  if (kind == "batch_matmul") {
    int64_t b = w.get("B"), m = w.get("M"), n = w.get("N"), k = w.get("K");
    return {openblas(op, b, m, n, k, false, repeat), onednn_matmul(op, b, m, n, k, repeat)};
  }
  if (kind == "conv2d" || kind == "conv2d_bias_relu" || kind == "depthwise_conv2d") {
    ConvParams c = conv_params(w, kind == "depthwise_conv2d");
    bool fused = kind == "conv2d_bias_relu";
    return {onednn_conv(op, c, fused, true, repeat), onednn_conv(op, c, fused, false, repeat)};
  }
  if (kind == "conv2d_nchwc" || kind == "depthwise_conv2d_nchwc") {
    bool depthwise = kind == "depthwise_conv2d_nchwc";
    ConvParams c = conv_params(w, depthwise);
    Baseline own = onednn_conv(op, c, false, false, repeat);
    int64_t cb = w.get_or("CB", 16);
    std::optional<Baseline> same = depthwise ? onednn_depthwise_nchwc(op, c, cb, repeat)
                                             : onednn_conv_nchwc(op, c, cb, repeat);
    if (same) return {*same, own};
    // No optimized oneDNN kernel in the kernel's layouts: compare with its own choice instead.
    own.same_layout = true;
    own.name += " (no optimized kernel in the kernel's layouts)";
    return {own};
  }
  if (kind == "max_pool2d" || kind == "avg_pool2d")
    return {onednn_pool(op, w, kind == "max_pool2d", repeat)};
  if (kind == "softmax") return {onednn_softmax(op, w, repeat)};
  if (kind == "attention") return {onednn_attention(op, w, repeat)};
  if (kind == "add" || kind == "relu" || kind == "bias_add")
    return {onednn_elementwise(op, w, repeat)};
  return {};
}

const Baseline* primary_baseline(const std::vector<Baseline>& baselines) {
  const Baseline* best = nullptr;
  for (const Baseline& b : baselines) {
    if (b.same_layout && (!best || b.gflops > best->gflops)) best = &b;
  }
  return best;
}

}  // namespace tessera
