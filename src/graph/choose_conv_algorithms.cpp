// Algorithm choice for convolutions: which blocked 3x3 stride-1 convolutions run as Winograd
// F(4x4, 3x3) (graph/winograd.h) instead of the direct blocked kernel.
#include "graph/op_attrs.h"
#include "graph/passes.h"
#include "graph/winograd.h"
#include "runtime/isa.h"
#include "te/error.h"

namespace tessera::graph {

int64_t winograd_min_tiles() {
  // AVX2: ResNet-18's 14x14 layers of 256 channels (16 tiles) ran 4.75 ms direct against 3.7 as
  // Winograd, whose product took 1.0 ms a layer in the model (0.46 alone: its 9.4 MB of weights
  // come from memory), and ResNet-50 went from 52.9 to 51.2 ms (AMD EPYC, Zen 2, 2 threads);
  // with the next panel of weights hinted (ops/in_model.cpp) the product is faster still. On
  // AVX-512 (AMD EPYC, Zen 5, 2 threads), with the transforms in two passes and the product's
  // hints, the 14x14 layers' 16 tiles pay too: ResNet-50 0.952, ResNet-18 0.906, DenseNet-121
  // 0.965 against 49 tiles as the floor (interleaved), while 4 tiles (7x7) lost (ResNet-18 1.18).
  // The floor of 49 came from the Xeon on 2026-12-03, before both, and was not measured again.
  return 16;
}

bool winograd_applies(const Graph& g, const Node& n) {
  int64_t block = n.attr_int(kBlockAttr, 0);
  if (n.op != "Conv" || block <= 0 || !g.is_constant(n.inputs[1])) return false;
  Window2d w = read_window(n, g.shape(n.inputs[0]), &g.shape(n.inputs[1]));
  if (!w.is_square_symmetric() || w.kh != 3 || w.sh != 1 || w.dh != 1 || w.pt != 1 ||
      w.group != 1 || w.c % block != 0)
    return false;
  // The transformed weights are 4x the direct ones and every tile reads all of them: with few
  // tiles the product is bound by reading them (ResNet-18's 7x7x512 layers: 4 tiles, 37.7 MB of
  // weights for 0.23 GFLOP of Winograd work).
  auto [th, tw] = winograd_tiles(w.oh, w.ow);
  if (th * tw < winograd_min_tiles()) return false;
  // AVX-512: a reduction of one channel block leaves the product too little to do for the
  // transforms' traffic. SqueezeNet's 55x55 layers (16 input channels) ran 0.20 ms a layer as
  // Winograd against 0.13 direct; its 27x27 ones (32) 0.11 against 0.12 (AMD EPYC, Zen 5, 2
  // threads).
  if (target_isa().vector_registers >= 32) return w.c >= 32;
  // AVX2, where the direct kernel and Winograd run closer: a short reduction leaves the product
  // writing more than it multiplies, and the transforms' work grows with the tiles' padding.
  // SqueezeNet's 55x55 layers (16 input channels) ran 0.55 ms a layer as Winograd against 0.37
  // direct, its 27x27 ones (32) 0.37 against 0.35, its 13x13 ones with 64 (their 16 tiles two
  // thirds output) 0.36 against 0.31; DenseNet-121's layers of 128 input channels 2.0-4.1 against
  // 2.5-8.1 (six to 24 layers each size), ResNet's of 64 and more won as above (Zen 2, 2 threads).
  const int64_t covered = w.oh * w.ow, computed = th * tw * kWinogradTile * kWinogradTile;
  return w.c >= 64 && 4 * covered >= 3 * computed;
}

int choose_conv_algorithms(Graph& g) {
  int changed = 0;
  for (Node& n : g.nodes) {
    n.attrs.erase(kWinogradAttr);
    if (!winograd_applies(g, n)) continue;
    n.attrs[kWinogradAttr] = int64_t{1};
    ++changed;
  }
  return changed;
}

}  // namespace tessera::graph
