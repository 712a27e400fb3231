// The operator table's Einsum row (explicit or implicit output, any number of operands, a
// letter repeated within an operand reads its diagonal) with a te kernel of its own, and the
// pass that turns the two-operand contractions exporters write (MaxViT's attention:
// `BGHID,BGHJD->BGHIJ`) into a batched MatMul between Transposes and Reshapes, so they run as
// the library's tuned batch_matmul.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <numeric>
#include <string>

#include "graph/op_rows.h"
#include "graph/passes.h"
#include "te/error.h"
#include "te/tensor.h"

namespace tessera::graph {

using namespace rows;

namespace {

struct EinsumSpec {
  std::vector<std::string> operands;  // one letter per axis
  std::string output;
  std::map<char, int64_t> sizes;
  std::string reduced;  // letters summed over, in first appearance
};

EinsumSpec einsum_spec(const Node& n, const Graph& g) {
  std::string eq;
  for (char c : n.attr_string("equation", "")) {
    if (c != ' ') eq += c;
  }
  if (eq.find("...") != std::string::npos)
    throw_error("{}: an ellipsis in equation '{}' is not supported", n.where(), eq);
  EinsumSpec s;
  const size_t arrow = eq.find("->");
  const std::string lhs = eq.substr(0, arrow);
  for (size_t start = 0;;) {
    size_t comma = lhs.find(',', start);
    s.operands.push_back(lhs.substr(start, comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  size_t count = 0;
  for (const std::string& v : n.inputs) count += !v.empty();
  if (s.operands.size() != count)
    throw_error("{}: equation '{}' names {} operands, the node has {} inputs", n.where(), eq,
                s.operands.size(), count);
  std::map<char, int> uses;
  for (size_t i = 0; i < s.operands.size(); ++i) {
    const std::vector<int64_t>& shape = input_shape(n, g, i);
    if (s.operands[i].size() != shape.size())
      throw_error("{}: operand {} is '{}' in the equation but has shape {}", n.where(), i,
                  s.operands[i], shape_text(shape));
    for (size_t a = 0; a < shape.size(); ++a) {
      const char c = s.operands[i][a];
      if (!std::isalpha(static_cast<unsigned char>(c)))
        throw_error("{}: '{}' in equation '{}' is not a letter", n.where(), c, eq);
      auto [it, fresh] = s.sizes.emplace(c, shape[a]);
      if (!fresh && it->second != shape[a])
        throw_error("{}: letter '{}' is {} in one place and {} in another", n.where(), c,
                    it->second, shape[a]);
      ++uses[c];
    }
  }
  if (arrow == std::string::npos) {
    // Implicit output: the letters used once, in alphabetical order.
    for (const auto& [c, k] : uses)
      if (k == 1) s.output += c;
  } else {
    s.output = eq.substr(arrow + 2);
    for (char c : s.output)
      if (!s.sizes.count(c) || std::count(s.output.begin(), s.output.end(), c) > 1)
        throw_error("{}: output letter '{}' of '{}' is not an input letter used once", n.where(), c,
                    eq);
  }
  if (s.output.empty())
    throw_error("{}: equation '{}' sums to a scalar (not supported)", n.where(), eq);
  for (const std::string& op : s.operands)
    for (char c : op)
      if (s.output.find(c) == std::string::npos && s.reduced.find(c) == std::string::npos)
        s.reduced += c;
  return s;
}

std::vector<int64_t> sizes_of(const EinsumSpec& s, const std::string& letters) {
  std::vector<int64_t> out;
  for (char c : letters) out.push_back(s.sizes.at(c));
  return out;
}

OpDef einsum() {
  OpDef d;
  d.name = "Einsum";
  d.attributes = {"equation"};
  d.lowering = Lowering::kKernel;
  d.infer = [](const Node& n, const Graph& g) {
    EinsumSpec s = einsum_spec(n, g);
    return sizes_of(s, s.output);
  };
  d.reference = [](const Node& n, const Graph& g, const std::vector<const HostTensor*>& in) {
    const EinsumSpec s = einsum_spec(n, g);
    const std::string letters = s.output + s.reduced;
    const std::vector<int64_t> all = sizes_of(s, letters);
    HostTensor out{sizes_of(s, s.output), {}, false};
    out.data.assign(num_elements(out.shape), 0.0);
    const int64_t reduced = num_elements(sizes_of(s, s.reduced));
    for (int64_t i = 0; i < num_elements(all); ++i) {
      const std::vector<int64_t> at = unravel(i, all);
      double product = 1;
      for (size_t k = 0; k < s.operands.size(); ++k) {
        std::vector<int64_t> idx;
        for (char c : s.operands[k]) idx.push_back(at[letters.find(c)]);
        product *= in[k]->data[ravel(idx, in[k]->shape)];
      }
      out.data[i / reduced] += product;
    }
    return out;
  };
  d.kernel = [](const Node& n, const Graph& g) {
    const EinsumSpec s = einsum_spec(n, g);
    std::vector<Tensor> args;
    for (size_t k = 0; k < s.operands.size(); ++k)
      args.push_back(placeholder(input_shape(n, g, k), DType::kFloat32, fmt::format("in{}", k)));
    std::vector<IterVar> axes;
    for (char c : s.reduced) axes.push_back(reduce_axis(s.sizes.at(c), fmt::format("r{}", c)));
    Tensor out = compute(
        sizes_of(s, s.output),
        [&](const std::vector<Var>& at) {
          auto var_of = [&](char c) {
            size_t o = s.output.find(c);
            return o != std::string::npos ? Expr(at[o]) : Expr(axes[s.reduced.find(c)].var);
          };
          Expr product;
          for (size_t k = 0; k < s.operands.size(); ++k) {
            std::vector<Expr> idx;
            for (char c : s.operands[k]) idx.push_back(var_of(c));
            product = k == 0 ? args[k](idx) : product * args[k](idx);
          }
          return axes.empty() ? product : sum(product, axes);
        },
        "out", axis_names(s.output.size()));
    args.push_back(out);
    return finish_kernel("einsum", std::move(args));
  };
  return d;
}

// The pieces of a two-operand contraction: letters in both operands and the output (batch), in
// one operand and the output (free), in both operands only (contracted).
struct Contraction {
  std::string batch, free_a, free_b, contracted;
};

std::optional<Contraction> as_contraction(const EinsumSpec& s) {
  if (s.operands.size() != 2) return std::nullopt;
  const std::string &a = s.operands[0], &b = s.operands[1];
  auto has = [](const std::string& str, char c) { return str.find(c) != std::string::npos; };
  for (const std::string& op : s.operands)
    for (char c : op)
      if (std::count(op.begin(), op.end(), c) > 1) return std::nullopt;  // a diagonal
  Contraction c;
  for (char x : s.output) {
    if (has(a, x) && has(b, x))
      c.batch += x;
    else if (has(a, x))
      c.free_a += x;
    else
      c.free_b += x;
  }
  for (char x : a) {
    if (has(s.output, x)) continue;
    if (!has(b, x)) return std::nullopt;  // summed within one operand
    c.contracted += x;
  }
  for (char x : b)
    if (!has(s.output, x) && !has(a, x)) return std::nullopt;
  return c;
}

// Emits nodes that take `value` (axes `letters`) to axes `order` then to shape `shape`; returns
// the result.
std::string permute_and_reshape(Graph& g, std::vector<Node>& nodes, const std::string& prefix,
                                const std::string& value, const std::string& letters,
                                const std::string& order, const std::vector<int64_t>& shape) {
  std::string v = value;
  if (letters != order) {
    Node t;
    t.op = "Transpose";
    t.name = prefix + "_transpose";
    std::vector<int64_t> perm;
    std::vector<int64_t> permuted;
    for (char c : order) {
      perm.push_back(static_cast<int64_t>(letters.find(c)));
      permuted.push_back(g.shape(value)[perm.back()]);
    }
    t.attrs["perm"] = perm;
    t.inputs = {v};
    t.outputs = {prefix + "_transposed"};
    g.shapes[t.outputs[0]] = permuted;
    v = t.outputs[0];
    nodes.push_back(std::move(t));
  }
  if (g.shape(v) != shape) {
    Node r;
    r.op = "Reshape";
    r.name = prefix + "_reshape";
    const std::string target = prefix + "_shape";
    g.constants[target] =
        HostTensor{{std::ssize(shape)}, std::vector<double>(shape.begin(), shape.end()), true};
    g.shapes[target] = {std::ssize(shape)};
    r.inputs = {v, target};
    r.outputs = {prefix + "_reshaped"};
    g.shapes[r.outputs[0]] = shape;
    v = r.outputs[0];
    nodes.push_back(std::move(r));
  }
  return v;
}

}  // namespace

int lower_einsum(Graph& g) {
  int lowered = 0;
  std::vector<Node> nodes;
  for (Node& n : g.nodes) {
    std::optional<Contraction> c;
    EinsumSpec s;
    if (n.op == "Einsum") {
      s = einsum_spec(n, g);
      c = as_contraction(s);
    }
    if (!c) {
      nodes.push_back(std::move(n));
      continue;
    }
    const std::vector<int64_t> batch = sizes_of(s, c->batch);
    const int64_t rows = num_elements(sizes_of(s, c->free_a));
    const int64_t cols = num_elements(sizes_of(s, c->free_b));
    const int64_t depth = num_elements(sizes_of(s, c->contracted));
    auto with_batch = [&](std::vector<int64_t> tail) {
      std::vector<int64_t> shape = batch;
      shape.insert(shape.end(), tail.begin(), tail.end());
      return shape;
    };
    // Names under tessera., made from the Einsum's output (unique in a model).
    const std::string prefix = "tessera.einsum." + n.outputs.at(0);
    std::string a =
        permute_and_reshape(g, nodes, prefix + "_a", n.inputs[0], s.operands[0],
                            c->batch + c->free_a + c->contracted, with_batch({rows, depth}));
    std::string b =
        permute_and_reshape(g, nodes, prefix + "_b", n.inputs[1], s.operands[1],
                            c->batch + c->contracted + c->free_b, with_batch({depth, cols}));
    Node m;
    m.op = "MatMul";
    m.name = n.name;
    m.inputs = {a, b};
    m.outputs = {prefix + "_product"};
    g.shapes[m.outputs[0]] = with_batch({rows, cols});
    const std::string product = m.outputs[0];
    nodes.push_back(std::move(m));
    const std::string letters = c->batch + c->free_a + c->free_b;
    std::string result = permute_and_reshape(g, nodes, prefix + "_out", product, letters, letters,
                                             sizes_of(s, letters));
    result = permute_and_reshape(g, nodes, prefix + "_out", result, letters, s.output,
                                 sizes_of(s, s.output));
    // The last node writes the Einsum's own output value.
    g.shapes.erase(nodes.back().outputs[0]);
    nodes.back().outputs[0] = n.outputs[0];
    ++lowered;
  }
  g.nodes = std::move(nodes);
  return lowered;
}

void add_einsum_rows(std::vector<OpDef>& t) {
  t.push_back(einsum());
}

}  // namespace tessera::graph
