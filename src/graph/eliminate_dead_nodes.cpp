#include <set>

#include "graph/passes.h"
#include "runtime/isa.h"

namespace tessera::graph {

int eliminate_dead_nodes(Graph& g) {
  std::set<std::string> live(g.outputs.begin(), g.outputs.end());
  std::vector<bool> keep(g.nodes.size(), false);
  int removed = 0;
  // Nodes are in topological order, so one backward sweep sees every reader before its producer.
  for (size_t i = g.nodes.size(); i-- > 0;) {
    const Node& n = g.nodes[i];
    for (const std::string& o : n.outputs) keep[i] = keep[i] || live.count(o) > 0;
    if (!keep[i]) {
      ++removed;
      continue;
    }
    live.insert(n.inputs.begin(), n.inputs.end());
  }
  std::vector<Node> kept;
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (keep[i]) kept.push_back(std::move(g.nodes[i]));
  g.nodes = std::move(kept);
  for (auto it = g.constants.begin(); it != g.constants.end();) {
    if (live.count(it->first)) {
      ++it;
      continue;
    }
    g.shapes.erase(it->first);
    it = g.constants.erase(it);
  }
  return removed;
}

std::vector<PassLog> run_default_passes(Graph& g, const PassOptions& options) {
  std::vector<PassLog> log;
  log.push_back({"fold_constants", fold_constants(g)});
  log.push_back({"pool_reductions", pool_reductions(g)});
  log.push_back({"lower_einsum", lower_einsum(g)});
  log.push_back({"lower_conv_transpose", lower_conv_transpose(g)});
  log.push_back({"trim_padding_taps", trim_padding_taps(g)});
  log.push_back({"fold_batch_norm", fold_batch_norm(g)});
  log.push_back({"fuse_epilogues", fuse_epilogues(g)});
  log.push_back({"split_by_live_taps", split_by_live_taps(g)});
  log.push_back({"gather_channels", gather_channels(g)});
  log.push_back({"fold_copies", fold_copies(g)});
  log.push_back({"fuse_attention", fuse_attention(g)});
  if (options.blocked_layout)
    log.push_back({"pad_channels", pad_channels(g, target_isa().f32_lanes)});
  log.push_back({"eliminate_dead_nodes", eliminate_dead_nodes(g)});
  if (options.blocked_layout) {
    log.push_back({"choose_layouts", choose_layouts(g, channel_block(g, target_isa().f32_lanes))});
    log.push_back({"fold_channel_scales", fold_channel_scales(g)});
    if (options.winograd) log.push_back({"choose_conv_algorithms", choose_conv_algorithms(g)});
  }
  return log;
}

}  // namespace tessera::graph
