// The operator table's Resize and Upsample rows: nearest and (multi)linear interpolation over
// any axes, with ONNX's coordinate transformations and rounding modes. The source coordinate is
// computed in float32 by the same operations as onnxruntime's, in the kernel and in the
// reference alike, so that a nearest pick that falls on a tie (a source coordinate of k + 0.5)
// rounds the same way in all three.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <type_traits>

#include "graph/op_rows.h"
#include "te/error.h"
#include "te/tensor.h"

namespace tessera::graph {

using namespace rows;

namespace {

enum class Interpolation { kNearest, kLinear };

struct ResizeSpec {
  Interpolation mode = Interpolation::kNearest;
  std::string coordinates;  // the coordinate_transformation_mode
  std::string rounding;     // the nearest_mode; "simple" before opset 11 (and for Upsample)
  std::vector<int64_t> in, out;
  std::vector<float> scales;
};

const std::vector<std::string> kCoordinateModes{"half_pixel", "pytorch_half_pixel", "align_corners",
                                                "asymmetric", "tf_half_pixel_for_nn"};
const std::vector<std::string> kRoundingModes{"round_prefer_floor", "round_prefer_ceil", "floor",
                                              "ceil"};

bool contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

// A constant float input (scales): empty when the input is omitted or an empty tensor.
std::vector<float> constant_floats(const Node& n, const Graph& g, size_t i, const char* what) {
  if (!has_input(n, i)) return {};
  auto it = g.constants.find(n.inputs[i]);
  if (it == g.constants.end())
    throw_error("{}: {} '{}' is not a constant (dynamic shapes are not supported)", n.where(), what,
                n.inputs[i]);
  std::vector<float> out;
  for (double d : it->second.data) out.push_back(static_cast<float>(d));
  return out;
}

// Values given for `axes` only (opset 18) spread over every dimension, `fill` elsewhere.
template <typename T>
std::vector<T> over_all_axes(const Node& n, std::vector<T> given, const std::vector<int64_t>& axes,
                             size_t rank, T fill, const char* what) {
  if (axes.empty()) {
    if (given.size() != rank)
      throw_error("{}: {} {} for a rank-{} input", n.where(), given.size(), what, rank);
    return given;
  }
  if (given.size() != axes.size())
    throw_error("{}: {} {} for {} axes", n.where(), given.size(), what, axes.size());
  std::vector<T> all(rank, fill);
  for (size_t i = 0; i < axes.size(); ++i) all[axes[i]] = given[i];
  return all;
}

ResizeSpec resize_spec(const Node& n, const Graph& g) {
  ResizeSpec s;
  s.in = input_shape(n, g, 0);
  const size_t rank = s.in.size();
  const bool upsample = n.op == "Upsample";
  // Before opset 11 Resize had no coordinate or rounding modes: Upsample's behaviour.
  const bool legacy = upsample || g.opset <= 10;
  const std::string mode = n.attr_string("mode", "nearest");
  if (mode == "linear" || mode == "bilinear") {
    s.mode = Interpolation::kLinear;
  } else if (mode != "nearest") {
    throw_error("{}: mode '{}' is not supported (nearest and linear are)", n.where(), mode);
  }
  if (n.attr_int("antialias", 0) != 0) throw_error("{}: antialias=1 is not supported", n.where());
  if (n.attr_int("exclude_outside", 0) != 0)
    throw_error("{}: exclude_outside=1 is not supported (it applies to cubic mode)", n.where());
  s.coordinates =
      legacy ? "asymmetric" : n.attr_string("coordinate_transformation_mode", "half_pixel");
  if (!contains(kCoordinateModes, s.coordinates))
    throw_error("{}: coordinate_transformation_mode '{}' is not supported ({} are)", n.where(),
                s.coordinates, fmt::join(kCoordinateModes, ", "));
  s.rounding = legacy ? "simple" : n.attr_string("nearest_mode", "round_prefer_floor");
  if (!legacy && !contains(kRoundingModes, s.rounding))
    throw_error("{}: nearest_mode '{}' is not one of {}", n.where(), s.rounding,
                fmt::join(kRoundingModes, ", "));
  std::vector<int64_t> axes;
  if (n.attrs.count("axes")) axes = normalized_axes(n, n.attr_ints("axes", {}), rank);

  std::vector<float> scales;
  std::vector<int64_t> sizes;
  if (upsample) {
    scales = has_input(n, 1) ? constant_floats(n, g, 1, "scales") : std::vector<float>{};
    if (scales.empty())
      for (double d : n.attr_floats("scales", {})) scales.push_back(static_cast<float>(d));
  } else if (legacy) {
    scales = constant_floats(n, g, 1, "scales");
  } else {
    scales = constant_floats(n, g, 2, "scales");
    if (has_input(n, 3) && num_elements(input_shape(n, g, 3)) > 0)
      sizes = constant_ints(n, g, 3, "sizes");
  }
  if (scales.empty() == sizes.empty())
    throw_error("{}: needs exactly one of scales and sizes", n.where());

  if (!scales.empty()) {
    s.scales = over_all_axes(n, scales, axes, rank, 1.0f, "scales");
    for (size_t d = 0; d < rank; ++d) {
      if (!(s.scales[d] > 0) || !std::isfinite(s.scales[d]))
        throw_error("{}: scale {} of dimension {} is not positive", n.where(), s.scales[d], d);
      if (upsample && s.scales[d] < 1)
        throw_error("{}: Upsample's scales must be at least 1, got {}", n.where(), s.scales[d]);
      // float x int64 in float, truncated: onnxruntime's output size.
      float size = s.scales[d] * static_cast<float>(s.in[d]);
      if (size >= static_cast<float>(int64_t{1} << 31))
        throw_error("{}: scale {} makes dimension {} too large", n.where(), s.scales[d], d);
      s.out.push_back(static_cast<int64_t>(size));
    }
  } else {
    s.out = over_all_axes(n, sizes, axes, rank, int64_t{-1}, "sizes");
    for (size_t d = 0; d < rank; ++d)
      if (s.out[d] < 0) s.out[d] = s.in[d];
    for (size_t d = 0; d < rank; ++d)
      s.scales.push_back(static_cast<float>(s.out[d]) / static_cast<float>(s.in[d]));
    const std::string policy = n.attr_string("keep_aspect_ratio_policy", "stretch");
    if (policy == "not_larger" || policy == "not_smaller") {
      // One scale for every resized axis: the smallest (largest) of theirs.
      float one = policy == "not_larger" ? std::numeric_limits<float>::max() : 0.0f;
      for (size_t d = 0; d < rank; ++d) {
        bool resized = axes.empty() || std::find(axes.begin(), axes.end(), d) != axes.end();
        if (resized)
          one = policy == "not_larger" ? std::min(one, s.scales[d]) : std::max(one, s.scales[d]);
      }
      for (size_t d = 0; d < rank; ++d) {
        bool resized = axes.empty() || std::find(axes.begin(), axes.end(), d) != axes.end();
        s.scales[d] = resized ? one : 1.0f;
        s.out[d] =
            resized ? static_cast<int64_t>(std::round(one * static_cast<float>(s.in[d]))) : s.in[d];
      }
    } else if (policy != "stretch") {
      throw_error(
          "{}: keep_aspect_ratio_policy '{}' is not one of stretch, not_larger, "
          "not_smaller",
          n.where(), policy);
    }
  }
  for (size_t d = 0; d < rank; ++d) {
    if (s.in[d] == 0 || s.out[d] <= 0)
      throw_error("{}: dimension {} resized from {} to {}: empty tensors are not supported",
                  n.where(), d, s.in[d], s.out[d]);
  }
  return s;
}

// The source coordinate of output index y along dimension d, in float32 as onnxruntime
// computes it; T is float on the host and Expr in the kernel, so both run the same operations.
template <typename T>
T source_coordinate(const ResizeSpec& s, size_t d, T y) {
  const float scale = s.scales[d];
  const float in = static_cast<float>(s.in[d]), out = static_cast<float>(s.out[d]);
  const std::string& m = s.coordinates;
  auto c = [](float v) {
    if constexpr (std::is_same_v<T, float>) {
      return v;
    } else {
      return f32(v);
    }
  };
  if (m == "asymmetric") return y / c(scale);
  if (m == "tf_half_pixel_for_nn") return (y + c(0.5f)) / c(scale);
  if (m == "align_corners") return out == 1 ? c(0.0f) : y * c(in - 1) / c(out - 1);
  if (m == "pytorch_half_pixel" && out <= 1) return c(0.0f);
  return (y + c(0.5f)) / c(scale) - c(0.5f);  // half_pixel, pytorch_half_pixel
}

// One tap of the interpolation along a dimension: the source index and its weight.
struct Tap {
  int64_t index;
  float weight;
};

// The taps of output index y along dimension d (one for nearest, two for linear), computed on
// the host exactly as the kernel does. The coordinate is clamped into the input first: every
// rounding mode commutes with that clamp, and linear interpolation clamps there too.
std::vector<Tap> taps(const ResizeSpec& s, size_t d, int64_t y) {
  const float last = static_cast<float>(s.in[d] - 1);
  float c = std::min(std::max(source_coordinate(s, d, static_cast<float>(y)), 0.0f), last);
  int64_t t = static_cast<int64_t>(c);
  float frac = c - static_cast<float>(t);
  if (s.mode == Interpolation::kLinear) {
    int64_t next = std::min(t + 1, s.in[d] - 1);
    return {{t, 1.0f - frac}, {next, frac}};
  }
  bool up = false;
  if (s.rounding == "simple") up = s.scales[d] < 1 && frac > 0;  // ceil when downsampling
  if (s.rounding == "ceil") up = frac > 0;
  if (s.rounding == "round_prefer_floor") up = frac > 0.5f;
  if (s.rounding == "round_prefer_ceil") up = frac >= 0.5f;
  return {{t + up, 1.0f}};
}

// Whether dimension d maps every output index to itself with full weight (no resize). A scale
// of 1 is one even where the coordinate mode shifts (tf_half_pixel_for_nn rounding up), as
// onnxruntime leaves such dimensions alone.
bool identity(const ResizeSpec& s, size_t d) {
  if (s.in[d] != s.out[d]) return false;
  if (s.scales[d] == 1.0f) return true;
  for (int64_t y = 0; y < s.out[d]; ++y) {
    std::vector<Tap> t = taps(s, d, y);
    if (t[0].index != y || t[0].weight != 1.0f) return false;
  }
  return true;
}

OpDef resize_row(std::string name, std::vector<std::string> attributes) {
  OpDef d;
  d.name = std::move(name);
  d.attributes = std::move(attributes);
  d.lowering = Lowering::kKernel;
  d.kernel_inputs = {0};
  d.infer = [](const Node& n, const Graph& g) { return resize_spec(n, g).out; };
  d.reference = [](const Node& n, const Graph& g, const std::vector<const HostTensor*>& in) {
    const HostTensor& x = *in.at(0);
    ResizeSpec s = resize_spec(n, g);
    const size_t rank = s.in.size();
    std::vector<std::vector<std::vector<Tap>>> table(rank);
    for (size_t k = 0; k < rank; ++k) {
      const bool same = identity(s, k);
      for (int64_t y = 0; y < s.out[k]; ++y)
        table[k].push_back(same ? std::vector<Tap>{{y, 1.0f}} : taps(s, k, y));
    }
    HostTensor out{s.out, {}, x.is_int};
    out.data.reserve(num_elements(s.out));
    for (int64_t i = 0; i < num_elements(s.out); ++i) {
      std::vector<int64_t> at = unravel(i, s.out), src(rank);
      // Every combination of one tap per dimension, weighted by their product.
      double sum = 0;
      std::function<void(size_t, double)> visit = [&](size_t k, double weight) {
        if (k == rank) {
          sum += weight * x.data[ravel(src, s.in)];
          return;
        }
        for (const Tap& t : table[k][at[k]]) {
          src[k] = t.index;
          visit(k + 1, weight * t.weight);
        }
      };
      visit(0, 1.0);
      out.data.push_back(sum);
    }
    return out;
  };
  d.kernel = [](const Node& n, const Graph& g) {
    ResizeSpec s = resize_spec(n, g);
    const size_t rank = s.in.size();
    // One pass per resized dimension, innermost first: every pass but the first reads whole
    // rows at an index fixed per row, which the C compiler vectorizes, and the first (the only
    // one that gathers) runs on the smaller tensor when upsampling. 21 classes upsampled from
    // 14x14 to 224x224 in one pass of four gathers per output: 1.48 ms.
    std::vector<size_t> passes;
    for (size_t k = rank; k-- > 0;)
      if (!identity(s, k)) passes.push_back(k);
    Tensor in = placeholder(s.in, DType::kFloat32, "in");
    Tensor cur = in;
    std::vector<int64_t> shape = s.in;
    std::string threads;  // the passes before the last share the cores as the last does
    for (size_t p = 0; p < passes.size(); ++p) {
      const size_t k = passes[p];
      const bool last = p + 1 == passes.size();
      shape[k] = s.out[k];
      std::vector<std::string> names = axis_names(rank);
      if (!last)
        for (std::string& name : names) name = fmt::format("p{}_{}", p, name);
      // The taps of each output index along k, in tables of out[k] entries computed first: the
      // C compiler left the same arithmetic inside the row loop when it was written there, which
      // ran 21 classes' 224 x 224 rows at a third of the speed (Xeon, AVX-512).
      auto table = [&](const char* what, const std::function<Expr(Expr, Expr)>& of) {
        return compute({s.out[k]},
                       [&](const std::vector<Var>& y) {
                         Expr c = source_coordinate(s, k, cast(DType::kFloat32, Expr(y[0])));
                         c = min(max(c, f32(0.0)), f32(static_cast<double>(s.in[k] - 1)));
                         Expr t = cast(DType::kInt32, c);
                         return of(t, c - cast(DType::kFloat32, t));
                       },
                       fmt::format("pass{}_{}", p, what), {fmt::format("t{}_{}", p, what)});
      };
      Tensor lo, hi, weight;
      if (s.mode == Interpolation::kLinear) {
        lo = table("lo", [](Expr t, Expr) { return t; });
        hi = table("hi",
                   [&](Expr t, Expr) { return min(t + 1, Expr(static_cast<int>(s.in[k] - 1))); });
        weight = table("weight", [](Expr, Expr frac) { return frac; });
      } else {
        lo = table("index", [&](Expr t, Expr frac) {
          Expr up;
          if (s.rounding == "simple" && s.scales[k] < 1) up = frac > f32(0.0);
          if (s.rounding == "ceil") up = frac > f32(0.0);
          if (s.rounding == "round_prefer_floor") up = frac > f32(0.5);
          if (s.rounding == "round_prefer_ceil") up = frac >= f32(0.5);
          return up.defined() ? t + select(up, Expr(1), Expr(0)) : t;
        });
      }
      cur = compute(
          shape,
          [&](const std::vector<Var>& at) {
            std::vector<Expr> src(at.begin(), at.end());
            src[k] = lo(std::vector<Expr>{Expr(at[k])});
            if (s.mode != Interpolation::kLinear) return cur(src);
            Expr frac = weight(std::vector<Expr>{Expr(at[k])});
            Expr low = cur(src);
            src[k] = hi(std::vector<Expr>{Expr(at[k])});
            return low * (f32(1.0) - frac) + cur(src) * frac;
          },
          last ? "out" : fmt::format("pass{}", p), names);
      if (!last && rank >= 2 && num_elements(shape) >= kParallelElements) {
        threads +=
            fmt::format("{}fuse({}, {}) ; parallel({}.{}.fused)", threads.empty() ? "" : " ; ",
                        names[0], names[1], names[0], names[1]);
      }
    }
    if (passes.empty()) {
      cur = compute(
          shape,
          [&](const std::vector<Var>& at) { return in(std::vector<Expr>(at.begin(), at.end())); },
          "out", axis_names(rank));
    }
    return finish_kernel("resize", {in, cur}, threads);
  };
  return d;
}

}  // namespace

void add_resize_rows(std::vector<OpDef>& t) {
  t.push_back(resize_row("Resize", {"mode", "coordinate_transformation_mode", "nearest_mode",
                                    "cubic_coeff_a", "exclude_outside", "extrapolation_value",
                                    "antialias", "axes", "keep_aspect_ratio_policy"}));
  t.push_back(resize_row("Upsample", {"mode", "scales"}));
}

}  // namespace tessera::graph
