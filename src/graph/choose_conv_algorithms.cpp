// Algorithm choice for convolutions: which blocked 3x3 stride-1 convolutions run as Winograd
// F(4x4, 3x3) (graph/winograd.h) instead of the direct blocked kernel.
#include "graph/op_attrs.h"
#include "graph/passes.h"
#include "graph/winograd.h"
#include "te/error.h"

namespace tessera::graph {

bool winograd_applies(const Graph& g, const Node& n) {
  int64_t block = n.attr_int(kBlockAttr, 0);
  if (n.op != "Conv" || block <= 0) return false;
  Window2d w = read_window(n, g.shape(n.inputs[0]), &g.shape(n.inputs[1]));
  if (w.kh != 3 || w.sh != 1 || w.dh != 1 || w.pt != 1 || w.group != 1 || w.c % block != 0)
    return false;
  // The transformed weights are 4x the direct ones and every tile reads all of them: with few
  // tiles the product is bound by reading them (ResNet-18's 7x7x512 layers: 4 tiles, 37.7 MB of
  // weights for 0.23 GFLOP of Winograd work).
  auto [th, tw] = winograd_tiles(w.oh, w.ow);
  return th * tw >= kWinogradMinTiles;
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
