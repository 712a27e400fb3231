#include "graph/weight_layouts.h"

namespace tessera::graph {

HostTensor packed_weights(const HostTensor& t, int64_t block) {
  const int64_t o = t.shape[0], inner = t.num_elements() / o;
  const int64_t blocks = (o + block - 1) / block;  // the last zero-padded
  std::vector<int64_t> shape{blocks};
  shape.insert(shape.end(), t.shape.begin() + 1, t.shape.end());
  shape.push_back(block);
  HostTensor out{std::move(shape), std::vector<double>(blocks * inner * block, 0.0), false};
  for (int64_t oc = 0; oc < o; ++oc)
    for (int64_t i = 0; i < inner; ++i)
      out.data[((oc / block) * inner + i) * block + oc % block] = t.data[oc * inner + i];
  return out;
}

HostTensor blocked_conv_weights(const HostTensor& t, int64_t block, int64_t ib) {
  const int64_t o = t.shape[0], c = t.shape[1], kh = t.shape[2], kw = t.shape[3];
  HostTensor out{{o / block, c / ib, kh, kw, ib, block}, std::vector<double>(t.data.size()), false};
  for (int64_t oc = 0; oc < o; ++oc)
    for (int64_t ic = 0; ic < c; ++ic)
      for (int64_t ky = 0; ky < kh; ++ky)
        for (int64_t kx = 0; kx < kw; ++kx)
          out.data[(((((oc / block) * (c / ib) + ic / ib) * kh + ky) * kw + kx) * ib + ic % ib) *
                       block +
                   oc % block] = t.data[((oc * c + ic) * kh + ky) * kw + kx];
  return out;
}

HostTensor blocked_depthwise_weights(const HostTensor& t, int64_t block) {
  const int64_t c = t.shape[0], k = t.shape[2];
  HostTensor out{{c / block, k, k, block}, std::vector<double>(t.data.size()), false};
  for (int64_t ch = 0; ch < c; ++ch)
    for (int64_t i = 0; i < k * k; ++i)
      out.data[((ch / block) * k * k + i) * block + ch % block] = t.data[ch * k * k + i];
  return out;
}

std::vector<int64_t> blocked_shape(const std::vector<int64_t>& nchw, int64_t block) {
  return {nchw[0], nchw[1] / block, nchw[2], nchw[3], block};
}

HostTensor transposed_2d(const HostTensor& t) {
  HostTensor out{{t.shape[1], t.shape[0]}, std::vector<double>(t.data.size()), false};
  for (int64_t i = 0; i < t.shape[0]; ++i)
    for (int64_t j = 0; j < t.shape[1]; ++j)
      out.data[j * t.shape[0] + i] = t.data[i * t.shape[1] + j];
  return out;
}

HostTensor constant_rows(const HostTensor& t, int64_t d, int64_t first, int64_t count) {
  const int64_t rows = t.shape[1], cols = t.num_elements() / (t.shape[0] * rows);
  auto begin = t.data.begin() + (d * rows + first) * cols;
  return {{count, cols}, std::vector<double>(begin, begin + count * cols), false};
}

}  // namespace tessera::graph
