// Where planned values live: every value gets an array (NCHW or channel blocks, converted once
// where layouts meet), and a blocked Concat's inputs are written into its output in place.
#include <algorithm>
#include <optional>

#include "graph/kernels.h"
#include "graph/passes.h"
#include "graph/planner.h"
#include "graph/weight_layouts.h"
#include "te/error.h"

namespace tessera::graph {

size_t Planner::new_array(const std::vector<int64_t>& shape) {
  ex_.arrays_.push_back(NDArray::empty(shape, DType::kFloat32));
  ex_.constant_.push_back(false);
  ex_.part_of_.push_back(std::nullopt);
  return ex_.arrays_.size() - 1;
}

size_t Planner::constant_array(const HostTensor& t) {
  ex_.arrays_.push_back(to_ndarray(t));
  ex_.constant_.push_back(true);
  ex_.part_of_.push_back(std::nullopt);
  return ex_.arrays_.size() - 1;
}

size_t Planner::part_array(size_t of, int64_t start, const std::vector<int64_t>& shape) {
  if (start < 0 ||
      static_cast<size_t>(start + num_elements(shape)) > ex_.arrays_[of].num_elements())
    throw_internal("part [{}, +{}) of an array of {} elements", start, num_elements(shape),
                   ex_.arrays_[of].num_elements());
  Executor::SubArray part{of, static_cast<size_t>(start) * sizeof(float)};
  if (const auto& outer = ex_.part_of_[of]) part = {outer->of, outer->bytes + part.bytes};
  // A placeholder until compile() points it into the arena or the weights.
  ex_.arrays_.push_back(NDArray::view(ex_.arrays_[of].data(), shape, DType::kFloat32));
  ex_.constant_.push_back(ex_.constant_[of]);
  ex_.part_of_.push_back(part);
  return ex_.arrays_.size() - 1;
}

size_t Planner::slot(const std::string& value) {
  auto it = slots_.find(value);
  if (it != slots_.end()) return it->second;
  auto b = produced_block_.find(value);
  if (b != produced_block_.end()) {
    const std::vector<int64_t>& shape = g_.shape(value);
    size_t plain = slots_[value] = new_array(shape);
    te_step(from_blocked_kernel(shape, b->second), {blocked_slots_.at({value, b->second}), plain});
    return plain;
  }
  auto c = g_.constants.find(value);
  if (c == g_.constants.end()) throw_internal("value '{}' has no slot", value);
  return slots_[value] = constant_array(c->second);
}

size_t Planner::output_slot(const Node& n) {
  return slots_[n.outputs[0]] = new_array(g_.shape(n.outputs[0]));
}

size_t Planner::blocked_slot(const std::string& value, int64_t block) {
  auto it = blocked_slots_.find({value, block});
  if (it != blocked_slots_.end()) return it->second;
  const std::vector<int64_t>& shape = g_.shape(value);
  size_t plain = slot(value);
  // Blocks of one channel are NCHW's own bytes.
  if (block == 1) return blocked_slots_[{value, block}] = plain;
  size_t out = blocked_slots_[{value, block}] = new_array(blocked_shape(shape, block));
  te_step(to_blocked_kernel(shape, block), {plain, out});
  return out;
}

size_t Planner::blocked_output_slot(const Node& n, int64_t block) {
  const std::string& v = n.outputs[0];
  produced_block_[v] = block;
  return blocked_slots_[{v, block}] = home_array(v, block);
}

size_t Planner::home_array(const std::string& v, int64_t block) {
  auto p = placed_.find(v);
  if (p == placed_.end()) {
    auto early = blocked_slots_.find({v, block});
    if (early != blocked_slots_.end()) return early->second;
    return new_array(blocked_shape(g_.shape(v), block));
  }
  size_t root = blocked_slots_[{p->second.root, block}] = home_array(p->second.root, block);
  return part_array(root, p->second.offset, blocked_shape(g_.shape(v), block));
}

void Planner::place_concat_inputs() {
  for (size_t i = g_.nodes.size(); i-- > 0;) {
    const Node& n = g_.nodes[i];
    const int64_t block = n.attr_int(kBlockAttr, 0);
    const std::vector<int64_t>& out = g_.shape(n.outputs[0]);
    if (n.op != "Concat" || block == 0 || out.size() != 4 || out[0] != 1) continue;
    // Inputs already in one array, one after another (torch's DenseNet joins the same features
    // again at every layer, each Concat one input longer): the output is that run of it.
    if (!placed_.count(n.outputs[0]) && placeable(n.outputs[0], block)) {
      std::optional<Placement> run;
      int64_t next = 0;
      for (const std::string& v : n.inputs) {
        auto p = placed_.find(v);
        if (p == placed_.end() ||
            (run && (p->second.root != run->root || p->second.offset != next))) {
          run.reset();
          break;
        }
        if (!run) run = p->second;
        next = p->second.offset + num_elements(g_.shape(v));
      }
      if (run) placed_[n.outputs[0]] = *run;
    }
    Placement home{n.outputs[0], 0};
    if (auto p = placed_.find(n.outputs[0]); p != placed_.end()) home = p->second;
    int64_t offset = home.offset;
    for (const std::string& v : n.inputs) {
      const std::vector<int64_t>& shape = g_.shape(v);
      Placement want{home.root, offset};
      offset += num_elements(shape);
      if (placed_.count(v) || !placeable(v, block) ||
          std::count(n.inputs.begin(), n.inputs.end(), v) != 1)
        continue;
      placed_[v] = want;
    }
  }
}

bool Planner::placeable(const std::string& v, int64_t block) const {
  if (g_.is_constant(v) || g_.is_output(v)) return false;
  auto p = producer_.find(v);
  if (p == producer_.end()) return false;  // a model input
  const Node& producer = g_.nodes[p->second];
  return producer.attr_int(kBlockAttr, 0) == block && producer.op != "GlobalAveragePool" &&
         g_.shape(v).size() == 4;
}

size_t Planner::transposed(const std::string& value) {
  if (g_.is_constant(value)) return constant_array(transposed_2d(g_.constants.at(value)));
  std::vector<int64_t> s = g_.shape(value);
  size_t out = new_array({s[1], s[0]});
  te_step(transpose_kernel(s, {1, 0}), {slot(value), out});
  return out;
}

}  // namespace tessera::graph
