// Kernel taps that read padding contribute nothing. Two passes drop them, both from the bands of
// output positions within which the same taps reach the image:
// - trim_padding_taps: taps no output position reads inside the input leave the kernel. DeepLab's
//   atrous pyramid at dilation 24 and 36 on a 14x14 map: only the centre tap reaches the image,
//   so the 3x3 convolution over 960 channels is a 1x1 one, a ninth of the work.
// - split_by_live_taps: at dilation 12 on the same map every tap reaches the image somewhere, but
//   the outer ones only for the two outermost rows and columns of the output, and 82% of the
//   products read zeros. The output is cut into bands of rows and of columns within which the
//   same taps are live, one convolution per band pair runs just those taps on just the input it
//   reads, and Concats put the pieces back together.
#include <fmt/format.h>

#include <limits>

#include "graph/op_attrs.h"
#include "graph/passes.h"

namespace tessera::graph {

namespace {

// Output positions [begin, end) whose live taps are [first, last].
struct Band {
  int64_t begin, end, first, last;
};

// The bands of one dimension, in order.
std::vector<Band> bands(int64_t in, int64_t kernel, int64_t stride, int64_t dilation,
                        int64_t lead_pad, int64_t out) {
  std::vector<Band> result;
  for (int64_t y = 0; y < out; ++y) {
    int64_t first = kernel, last = -1;
    for (int64_t k = 0; k < kernel; ++k) {
      int64_t at = y * stride + k * dilation - lead_pad;
      if (at >= 0 && at < in) {
        first = std::min(first, k);
        last = std::max(last, k);
      }
    }
    if (!result.empty() && result.back().first == first && result.back().last == last) {
      result.back().end = y + 1;
    } else {
      result.push_back({y, y + 1, first, last});
    }
  }
  return result;
}

// Taps run summed over the bands, against taps x positions without the split.
double live_share(const std::vector<Band>& b, int64_t kernel, int64_t out) {
  double live = 0;
  for (const Band& band : b) live += double(band.end - band.begin) * (band.last - band.first + 1);
  return live / (double(kernel) * out);
}

// Whether every Add of the epilogue is a per-channel or scalar constant: the pieces can each
// apply it. A residual would have to be cut into the same pieces.
bool per_channel_epilogue(const Graph& g, const Node& conv, int64_t channels) {
  for (const Epilogue& e : conv.epilogue)
    if (e.kind == Epilogue::Kind::kAdd && num_elements(g.shape(conv.inputs.at(e.input))) > channels)
      return false;
  return true;
}

// Where one band of output positions reads the input: the slice [begin, end) of it and the pads
// before and after that slice, for taps [first, last].
struct Reach {
  int64_t begin, end, lead, trail;
};
Reach reach(const Band& b, int64_t in, int64_t stride, int64_t dilation, int64_t lead_pad) {
  const int64_t from = b.begin * stride + b.first * dilation - lead_pad;
  const int64_t to = (b.end - 1) * stride + b.last * dilation - lead_pad;  // inclusive
  return {std::max<int64_t>(from, 0), std::min(to + 1, in), std::max<int64_t>(-from, 0),
          std::max<int64_t>(to - (in - 1), 0)};
}

// Weights [O][C/g][kh][kw] restricted to kernel rows [top, bottom] and columns [left, right].
HostTensor kernel_window(const HostTensor& weight, int64_t top, int64_t bottom, int64_t left,
                         int64_t right) {
  const int64_t kh = weight.shape[2], kw = weight.shape[3];
  HostTensor taps{
      {weight.shape[0], weight.shape[1], bottom - top + 1, right - left + 1}, {}, false};
  taps.data.reserve(num_elements(taps.shape));
  for (int64_t o = 0; o < weight.shape[0] * weight.shape[1]; ++o)
    for (int64_t ky = top; ky <= bottom; ++ky)
      for (int64_t kx = left; kx <= right; ++kx)
        taps.data.push_back(weight.data[(o * kh + ky) * kw + kx]);
  return taps;
}

// The first and last kernel index of any band: the taps some output position reads inside the
// input (first > last when none does).
std::pair<int64_t, int64_t> live_taps(const std::vector<Band>& bands) {
  int64_t first = std::numeric_limits<int64_t>::max(), last = -1;
  for (const Band& b : bands) {
    if (b.first > b.last) continue;
    first = std::min(first, b.first);
    last = std::max(last, b.last);
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
    auto [top, bottom] = live_taps(bands(w.h, w.kh, w.sh, w.dh, w.pt, w.oh));
    auto [left, right] = live_taps(bands(w.w, w.kw, w.sw, w.dw, w.pl, w.ow));
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

    HostTensor taps = kernel_window(weight, top, bottom, left, right);
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

int split_by_live_taps(Graph& g) {
  int split = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node conv = g.nodes[i];
    if (conv.op != "Conv" || conv.inputs.size() < 2 || !g.is_constant(conv.inputs[1])) continue;
    const HostTensor& weight = g.constants.at(conv.inputs[1]);
    const Window2d w = read_window(conv, g.shape(conv.inputs[0]), &weight.shape);
    // The pieces are square (below), which needs one stride and one dilation.
    if (w.kh != w.kw || w.sh != w.sw || w.dh != w.dw) continue;
    const std::vector<Band> rows = bands(w.h, w.kh, w.sh, w.dh, w.pt, w.oh);
    const std::vector<Band> cols = bands(w.w, w.kw, w.sw, w.dw, w.pl, w.ow);
    if (rows.size() * cols.size() < 2 || rows.size() > 3 || cols.size() > 3) continue;
    bool empty_band = false;
    for (const std::vector<Band>* dim : {&rows, &cols})
      for (const Band& b : *dim) empty_band = empty_band || b.first > b.last;
    if (empty_band) continue;  // positions of bias alone: rare enough to leave
    // Worth the extra kernels only where most of the products read padding.
    if (live_share(rows, w.kh, w.oh) * live_share(cols, w.kw, w.ow) > 0.5) continue;
    if (!per_channel_epilogue(g, conv, w.out_channels)) continue;

    // Each piece takes a square kernel, the blocked kernels' form: the shorter of its two tap
    // ranges grows to the longer, by taps that read only padding there (the edges' 2x1 pieces ran
    // the generic NCHW convolution otherwise).
    auto square = [&](Band rb, Band cb) {
      const int64_t k = std::max(rb.last - rb.first, cb.last - cb.first) + 1;
      for (Band* b : {&rb, &cb}) {
        b->first = std::min(b->first, w.kh - k);
        b->last = b->first + k - 1;
      }
      return std::pair{rb, cb};
    };
    std::vector<Node> added;
    std::vector<std::string> row_pieces;
    for (size_t r = 0; r < rows.size(); ++r) {
      std::vector<std::string> pieces;
      for (size_t c = 0; c < cols.size(); ++c) {
        const auto [rb, cb] = square(rows[r], cols[c]);
        const Reach ry = reach(rb, w.h, w.sh, w.dh, w.pt);
        const Reach rx = reach(cb, w.w, w.sw, w.dw, w.pl);
        const std::string piece = fmt::format("{}.band{}{}", conv.name, r, c);
        // The input it reads, where that is not all of it.
        std::string x = conv.inputs[0];
        if (ry.begin > 0 || ry.end < w.h || rx.begin > 0 || rx.end < w.w) {
          Node slice;
          slice.name = piece + ".input";
          slice.op = "Slice";
          slice.inputs = {x};
          slice.outputs = {slice.name};
          slice.attrs["starts"] = std::vector<int64_t>{ry.begin, rx.begin};
          slice.attrs["ends"] = std::vector<int64_t>{ry.end, rx.end};
          slice.attrs["axes"] = std::vector<int64_t>{2, 3};
          g.shapes[slice.name] = {w.n, w.c, ry.end - ry.begin, rx.end - rx.begin};
          x = slice.name;
          added.push_back(std::move(slice));
        }
        const int64_t kh = rb.last - rb.first + 1, kw = cb.last - cb.first + 1;
        HostTensor taps = kernel_window(weight, rb.first, rb.last, cb.first, cb.last);
        const std::string weights = piece + ".weight";
        g.shapes[weights] = taps.shape;
        g.constants[weights] = std::move(taps);
        Node part = conv;
        part.name = piece;
        part.inputs[0] = x;
        part.inputs[1] = weights;
        part.outputs = {piece};
        part.attrs.erase("auto_pad");
        part.attrs["kernel_shape"] = std::vector<int64_t>{kh, kw};
        part.attrs["dilations"] = std::vector<int64_t>{kh == 1 ? 1 : w.dh, kw == 1 ? 1 : w.dw};
        part.attrs["pads"] = std::vector<int64_t>{ry.lead, rx.lead, ry.trail, rx.trail};
        g.shapes[piece] = {w.n, w.out_channels, rb.end - rb.begin, cb.end - cb.begin};
        added.push_back(std::move(part));
        pieces.push_back(piece);
      }
      if (pieces.size() == 1) {
        row_pieces.push_back(pieces[0]);
        continue;
      }
      Node row;
      row.name = fmt::format("{}.row{}", conv.name, r);
      row.op = "Concat";
      row.inputs = pieces;
      row.outputs = {row.name};
      row.attrs["axis"] = int64_t{3};
      g.shapes[row.name] = {w.n, w.out_channels, rows[r].end - rows[r].begin, w.ow};
      added.push_back(std::move(row));
      row_pieces.push_back(added.back().name);
    }
    if (row_pieces.size() == 1) {
      // One row band: its concatenation (or its one piece) writes the output itself.
      added.back().outputs[0] = conv.outputs[0];
    } else {
      Node all;
      all.name = conv.name + ".rows";
      all.op = "Concat";
      all.inputs = row_pieces;
      all.outputs = {conv.outputs[0]};
      all.attrs["axis"] = int64_t{2};
      added.push_back(std::move(all));
    }
    g.nodes.erase(g.nodes.begin() + static_cast<std::ptrdiff_t>(i));
    g.nodes.insert(g.nodes.begin() + static_cast<std::ptrdiff_t>(i), added.begin(), added.end());
    i += added.size() - 1;
    ++split;
  }
  return split;
}

}  // namespace tessera::graph
