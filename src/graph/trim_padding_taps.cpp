// Kernel taps that only ever read padding contribute nothing: a Conv loses the leading and
// trailing rows and columns of its kernel that no output position reads inside the input.
// DeepLab's atrous pyramid is the case in point: at dilation 24 and 36 on a 14x14 map only the
// centre tap reaches the image, so the 3x3 convolution over 960 channels is a 1x1 one, a ninth
// of the work and no padded copy.
#include "graph/op_attrs.h"
#include "graph/passes.h"

namespace tessera::graph {

namespace {

// The first and last kernel index along one dimension whose tap reads inside the input for some
// output position; first > last when none does.
std::pair<int64_t, int64_t> live_taps(int64_t in, int64_t kernel, int64_t stride, int64_t dilation,
                                      int64_t lead_pad, int64_t out) {
  int64_t first = kernel, last = -1;
  for (int64_t k = 0; k < kernel; ++k) {
    for (int64_t y = 0; y < out; ++y) {
      int64_t at = y * stride + k * dilation - lead_pad;
      if (at >= 0 && at < in) {
        first = std::min(first, k);
        last = std::max(last, k);
        break;
      }
    }
  }
  return {first, last};
}

// Trailing pad that keeps `out` positions for the trimmed kernel, or -1 when none does.
int64_t trailing_pad(int64_t in, int64_t span, int64_t stride, int64_t lead_pad, int64_t out) {
  int64_t pad = std::max<int64_t>((out - 1) * stride + span - in - lead_pad, 0);
  return (in + lead_pad + pad - span) / stride + 1 == out ? pad : -1;
}

}  // namespace

int trim_padding_taps(Graph& g) {
  int trimmed = 0;
  for (Node& conv : g.nodes) {
    if (conv.op != "Conv" || conv.inputs.size() < 2 || !g.is_constant(conv.inputs[1])) continue;
    const HostTensor& weight = g.constants.at(conv.inputs[1]);
    const Window2d w = read_window(conv, g.shape(conv.inputs[0]), &weight.shape);
    auto [top, bottom] = live_taps(w.h, w.kh, w.sh, w.dh, w.pt, w.oh);
    auto [left, right] = live_taps(w.w, w.kw, w.sw, w.dw, w.pl, w.ow);
    // Nothing to drop, or nothing left (an output of bias alone: rare enough to leave).
    if (top > bottom || left > right) continue;
    if (top == 0 && bottom == w.kh - 1 && left == 0 && right == w.kw - 1) continue;
    const int64_t kh = bottom - top + 1, kw = right - left + 1;
    const int64_t dh = kh == 1 ? 1 : w.dh, dw = kw == 1 ? 1 : w.dw;
    const int64_t pt = w.pt - top * w.dh, pl = w.pl - left * w.dw;
    if (pt < 0 || pl < 0) continue;  // the trimmed window would start inside: no ONNX pad says so
    const int64_t pb = trailing_pad(w.h, (kh - 1) * dh + 1, w.sh, pt, w.oh);
    const int64_t pr = trailing_pad(w.w, (kw - 1) * dw + 1, w.sw, pl, w.ow);
    if (pb < 0 || pr < 0) continue;

    const int64_t outer = weight.shape[0] * weight.shape[1];
    HostTensor taps{{weight.shape[0], weight.shape[1], kh, kw}, {}, false};
    taps.data.reserve(outer * kh * kw);
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t ky = top; ky <= bottom; ++ky)
        for (int64_t kx = left; kx <= right; ++kx)
          taps.data.push_back(weight.data[(o * w.kh + ky) * w.kw + kx]);
    // A new name: the original weights may be shared with another node.
    const std::string name = conv.name + ".weight_taps";
    g.shapes[name] = taps.shape;
    g.constants[name] = std::move(taps);
    conv.inputs[1] = name;
    conv.attrs.erase("auto_pad");
    conv.attrs["kernel_shape"] = std::vector<int64_t>{kh, kw};
    conv.attrs["dilations"] = std::vector<int64_t>{dh, dw};
    conv.attrs["pads"] = std::vector<int64_t>{pt, pl, pb, pr};
    ++trimmed;
  }
  return trimmed;
}

}  // namespace tessera::graph
