// The tessera.Attention row and the pass that makes it: MatMul(Q, Kt), a Softmax along the keys
// and MatMul(P, V) become one node, planned as the library's `attention` operator, which keeps
// each tile of query rows' scores in cache instead of writing all of them to memory.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>

#include "graph/op_rows.h"
#include "graph/passes.h"
#include "ops/attention.h"
#include "te/error.h"

namespace tessera::graph {

namespace {

// Q [..., M, D], Kt [..., D, N], V [..., N, DV] with the same leading (batch) dimensions.
struct AttentionShape {
  int64_t batch = 1, m = 0, d = 0, n = 0, dv = 0;
  int64_t bias_heads = 0;  // 0: no bias
};

std::optional<AttentionShape> attention_shape(const std::vector<int64_t>& q,
                                              const std::vector<int64_t>& kt,
                                              const std::vector<int64_t>& v) {
  const size_t rank = q.size();
  if (rank < 2 || kt.size() != rank || v.size() != rank) return std::nullopt;
  if (!std::equal(q.begin(), q.end() - 2, kt.begin()) ||
      !std::equal(q.begin(), q.end() - 2, v.begin()))
    return std::nullopt;
  AttentionShape s;
  s.m = q[rank - 2];
  s.d = q[rank - 1];
  s.n = kt[rank - 1];
  s.dv = v[rank - 1];
  if (kt[rank - 2] != s.d || v[rank - 2] != s.n) return std::nullopt;
  for (size_t i = 0; i + 2 < rank; ++i) s.batch *= q[i];
  return s;
}

// How many heads a bias of shape `bias` added to scores of shape `scores` ([..., M, N]) holds, as
// the operator reads it (head h adds bias h mod BB): its last two dimensions M and N, its leading
// ones (broadcast) 1 up to a suffix of the scores' leading dimensions. A mask over the keys alone
// ([1, 1, 1, N]) is not such a bias.
std::optional<int64_t> bias_heads(const std::vector<int64_t>& bias,
                                  const std::vector<int64_t>& scores) {
  const size_t rank = scores.size();
  if (bias.size() < 2 || bias.size() > rank || bias[bias.size() - 2] != scores[rank - 2] ||
      bias.back() != scores.back())
    return std::nullopt;
  size_t first = 0;
  while (first + 2 < bias.size() && bias[first] == 1) ++first;
  int64_t heads = 1;
  for (size_t d = first; d + 2 < bias.size(); ++d) {
    if (bias[d] != scores[rank - bias.size() + d]) return std::nullopt;
    heads *= bias[d];
  }
  return heads;
}

AttentionShape read_attention(const Node& n, const Graph& g) {
  std::optional<AttentionShape> s =
      attention_shape(g.shape(n.inputs.at(0)), g.shape(n.inputs.at(1)), g.shape(n.inputs.at(2)));
  if (!s) throw_error("{}: needs Q [..., M, D], Kt [..., D, N] and V [..., N, DV]", n.where());
  if (n.attr_int("tessera.bias", 0) != 0) {
    std::vector<int64_t> scores = g.shape(n.inputs[0]);
    scores.back() = s->n;
    std::optional<int64_t> heads = bias_heads(g.shape(n.inputs[3]), scores);
    if (!heads) throw_error("{}: the bias does not broadcast over the scores' heads", n.where());
    s->bias_heads = *heads;
  }
  return *s;
}

// The only reader of `value` (not a model output), or nullptr.
const Node* only_reader(const Graph& g, const std::vector<Node>& nodes, const std::string& value) {
  if (g.is_output(value)) return nullptr;
  std::vector<size_t> readers = g.consumers(value);
  if (readers.size() != 1) return nullptr;
  return &nodes[readers[0]];
}

}  // namespace

void add_attention_rows(std::vector<OpDef>& table) {
  OpDef d;
  d.name = kAttention;
  d.infer = [](const Node& n, const Graph& g) {
    std::vector<int64_t> out = g.shape(n.inputs.at(0));
    out.back() = read_attention(n, g).dv;
    return out;
  };
  d.reference = [](const Node& n, const Graph& g, const std::vector<const HostTensor*>& in) {
    const AttentionShape s = read_attention(n, g);
    std::vector<int64_t> shape = g.shape(n.inputs[0]);
    shape.back() = s.dv;
    HostTensor out{shape, std::vector<double>(static_cast<size_t>(s.batch * s.m * s.dv)), false};
    attention_reference({s.batch, s.m, s.n, s.d, s.dv, s.bias_heads}, in.at(0)->data.data(),
                        in.at(1)->data.data(), in.at(2)->data.data(),
                        s.bias_heads > 0 ? in.at(3)->data.data() : nullptr, out.data.data());
    return out;
  };
  table.push_back(std::move(d));
}

int fuse_attention(Graph& g, int64_t min_scores) {
  int fused = 0;
  std::vector<bool> drop(g.nodes.size(), false);
  // Nodes to run just before a fused one (the query scaled), by the fused node's index.
  std::map<size_t, Node> before;
  auto index_of = [&](const Node* n) { return static_cast<size_t>(n - g.nodes.data()); };
  for (size_t at = 0; at < g.nodes.size(); ++at) {
    const Node& scores = g.nodes[at];
    if (scores.op != "MatMul" || scores.epilogue.size() > 1) continue;
    const std::vector<int64_t>& score_shape = g.shape(scores.outputs[0]);
    std::vector<size_t> chain{at};  // the nodes the fused one replaces, but the product
    // A bias added to the scores (fuse_epilogues put it there): a mask, a position bias.
    std::string bias;
    if (!scores.epilogue.empty()) {
      const Epilogue& e = scores.epilogue[0];
      if (e.kind != Epilogue::Kind::kAdd) continue;
      bias = scores.inputs.at(static_cast<size_t>(e.input));
      if (!bias_heads(g.shape(bias), score_shape)) continue;
    }
    std::string value = scores.outputs[0];
    const Node* next = only_reader(g, g.nodes, value);
    // The scores scaled by a constant (BERT's 1 / sqrt(d) after the product), before any bias.
    std::optional<double> scale;
    // The constant's side: either for Mul, the divisor for Div; it must not broadcast the
    // scores up a rank.
    auto scalar_side = [&](const Node& n) -> std::optional<size_t> {
      if (n.inputs.size() != 2 || g.shape(n.outputs[0]) != score_shape) return std::nullopt;
      for (size_t side : {size_t{1}, size_t{0}}) {
        if (n.inputs[1 - side] != value || !g.is_constant(n.inputs[side])) continue;
        const HostTensor& c = g.constants.at(n.inputs[side]);
        if (c.num_elements() == 1 && !c.is_int && (n.op == "Mul" || side == 1)) return side;
      }
      return std::nullopt;
    };
    std::optional<size_t> side;
    if (next && bias.empty() && (next->op == "Mul" || next->op == "Div") &&
        (side = scalar_side(*next))) {
      const double c = g.constants.at(next->inputs[*side]).data[0];
      scale = next->op == "Mul" ? c : 1.0 / c;
      chain.push_back(index_of(next));
      value = next->outputs[0];
      next = only_reader(g, g.nodes, value);
    }
    // Or a bias added by a node of its own (after a scale, or where nothing fused it).
    if (next && bias.empty() && next->op == "Add" && next->inputs.size() == 2 &&
        g.shape(next->outputs[0]) == score_shape) {
      const std::string& other = next->inputs[0] == value ? next->inputs[1] : next->inputs[0];
      if (other != value && bias_heads(g.shape(other), score_shape)) {
        bias = other;
        chain.push_back(index_of(next));
        value = next->outputs[0];
        next = only_reader(g, g.nodes, value);
      }
    }
    const Node* softmax = next;
    if (!softmax || softmax->op != "Softmax") continue;
    const auto rank = static_cast<int64_t>(g.shape(softmax->outputs[0]).size());
    // Before opset 13 the axis flattens what follows it: the keys alone only from the last one.
    if (normalize_axis(*softmax, softmax->attr_int("axis", g.opset >= 13 ? -1 : 1), rank) !=
        rank - 1)
      continue;
    chain.push_back(index_of(softmax));
    const Node* product = only_reader(g, g.nodes, softmax->outputs[0]);
    // The probabilities read once, as the product's left operand (not also by its epilogue).
    if (!product || product->op != "MatMul" || product->inputs[0] != softmax->outputs[0] ||
        std::count(product->inputs.begin(), product->inputs.end(), softmax->outputs[0]) != 1)
      continue;
    if (!attention_shape(g.shape(scores.inputs[0]), g.shape(scores.inputs[1]),
                         g.shape(product->inputs[1])) ||
        num_elements(score_shape) < min_scores)
      continue;
    const size_t product_at = index_of(product);
    Node fused_node;
    fused_node.name = product->name;
    fused_node.op = kAttention;
    fused_node.inputs = {scores.inputs[0], scores.inputs[1], product->inputs[1]};
    if (scale) {
      // (s Q) Kt: the query is B x M x D, the scores B x M x N.
      const std::string prefix = "tessera.attention." + product->outputs[0];
      g.constants[prefix + ".scale"] = HostTensor{{}, {*scale}, false};
      g.shapes[prefix + ".scale"] = {};
      Node mul;
      mul.name = prefix + ".scale_query";
      mul.op = "Mul";
      mul.inputs = {scores.inputs[0], prefix + ".scale"};
      mul.outputs = {prefix + ".query"};
      g.shapes[mul.outputs[0]] = g.shape(scores.inputs[0]);
      fused_node.inputs[0] = mul.outputs[0];
      before[product_at] = std::move(mul);
    }
    if (!bias.empty()) {
      fused_node.inputs.push_back(bias);
      fused_node.attrs["tessera.bias"] = int64_t{1};
    }
    // The product's own epilogue (a residual, an activation) stays on the result, what it adds
    // read after the operands.
    fused_node.epilogue = product->epilogue;
    for (Epilogue& e : fused_node.epilogue) {
      if (e.kind != Epilogue::Kind::kAdd) continue;
      fused_node.inputs.push_back(product->inputs.at(static_cast<size_t>(e.input)));
      e.input = static_cast<int>(fused_node.inputs.size() - 1);
    }
    fused_node.outputs = product->outputs;
    for (size_t i : chain) {
      g.shapes.erase(g.nodes[i].outputs[0]);
      drop[i] = true;
    }
    // At the product's place: V may be computed between the scores and the product.
    g.nodes[product_at] = std::move(fused_node);
    ++fused;
  }
  std::vector<Node> kept;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (auto it = before.find(i); it != before.end()) kept.push_back(std::move(it->second));
    if (!drop[i]) kept.push_back(std::move(g.nodes[i]));
  }
  g.nodes = std::move(kept);
  return fused;
}

}  // namespace tessera::graph
