#include "ops/workload.h"

#include <fmt/format.h>

#include <cctype>
#include <set>

#include "te/error.h"
#include "tir/stmt_functor.h"

namespace tessera {

namespace {

std::vector<Buffer> allocations(const Stmt& body) {
  struct Collect : StmtVisitor {
    std::vector<Buffer> buffers;
    void visit_(const AllocateNode& n, const Stmt& self) override {
      buffers.push_back(n.buffer);
      StmtVisitor::visit_(n, self);
    }
    using StmtVisitor::visit_;
  };
  Collect c;
  c.visit(body);
  return c.buffers;
}

}  // namespace

int64_t Workload::get(const std::string& key) const {
  for (const auto& [k, v] : params) {
    if (k == key) return v;
  }
  throw_error("workload {} has no key {}", text(), key);
}

int64_t Workload::get_or(const std::string& key, int64_t fallback) const {
  for (const auto& [k, v] : params) {
    if (k == key) return v;
  }
  return fallback;
}

int64_t Workload::positive(const std::string& key) const {
  int64_t v = get(key);
  if (v <= 0) throw_error("{}: {} must be positive, got {}", op, key, v);
  if (v > kMaxWorkloadKey) throw_error("{}: {}={} is too large", op, key, v);
  return v;
}

int64_t Workload::kernel_width() const {
  return get_or("KW", 0) > 0 ? get("KW") : get("K");
}

int64_t Workload::width_padding() const {
  return get_or("PW", -1) >= 0 ? get("PW") : get("P");
}

std::string Workload::text() const {
  std::vector<std::string> kv;
  for (const auto& [k, v] : params) kv.push_back(fmt::format("{}={}", k, v));
  return fmt::format("{}:{}", op, fmt::join(kv, ","));
}

Workload parse_workload(std::string_view text) {
  auto bad = [&](const std::string& why) -> Error {
    return Error(fmt::format("malformed workload '{}': {} (expected op:key=value,...)", text, why));
  };
  size_t colon = text.find(':');
  if (colon == std::string_view::npos) throw bad("missing ':'");
  Workload w;
  w.op = std::string(text.substr(0, colon));
  if (w.op.empty()) throw bad("empty operator name");
  for (char c : w.op) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_')
      throw bad("invalid operator name");
  }
  std::string_view rest = text.substr(colon + 1);
  if (rest.empty()) throw bad("no parameters");
  std::set<std::string> seen;
  while (!rest.empty()) {
    size_t comma = rest.find(',');
    std::string_view item = rest.substr(0, comma);
    size_t eq = item.find('=');
    if (eq == std::string_view::npos || eq == 0)
      throw bad(fmt::format("'{}' is not key=value", item));
    std::string key(item.substr(0, eq));
    std::string value(item.substr(eq + 1));
    if (!seen.insert(key).second) throw bad("key " + key + " given twice");
    size_t used = 0;
    int64_t v = 0;
    try {
      v = std::stoll(value, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (value.empty() || used != value.size())
      throw bad(fmt::format("value of {} is not an integer", key));
    w.params.emplace_back(key, v);
    if (comma == std::string_view::npos) break;
    rest = rest.substr(comma + 1);
    if (rest.empty()) throw bad("trailing ','");
  }
  return canonical(w);
}

OpInstance instantiate(const Workload& w) {
  for (const OpDef& def : op_registry()) {
    if (def.name != w.op) continue;
    std::vector<std::string> allowed = def.keys;
    for (const auto& [k, v] : def.optional) allowed.push_back(k);
    for (const auto& [k, v] : w.params) {
      if (std::find(allowed.begin(), allowed.end(), k) == allowed.end()) {
        throw_error("{} has no key {} (keys: {})", w.op, k, fmt::join(allowed, ", "));
      }
      // Every key, not only the sizes the operators check: the shape arithmetic on a padding or
      // a block of 2^62 overflowed (found by fuzz/workload_fuzzer.cpp).
      if (v < -kMaxWorkloadKey || v > kMaxWorkloadKey)
        throw_error("{}: {}={} is too large (at most 2^20 either way)", w.op, k, v);
    }
    for (const std::string& k : def.keys) {
      bool present = false;
      for (const auto& kv : w.params) present |= kv.first == k;
      if (!present) throw_error("{} needs key {} (keys: {})", w.op, k, fmt::join(def.keys, ", "));
    }
    OpInstance op = def.build(w);
    // Each key is capped, their products are not: generated kernels index with 32-bit integers,
    // and a product past int64 wrapped into a small allocation that the kernel overran.
    // The intermediate buffers count too (a convolution's padded input, found by
    // fuzz/workload_fuzzer.cpp: 2^34 elements of padding around a 5x2 image).
    std::vector<std::pair<std::string, std::vector<int64_t>>> buffers;
    for (const Tensor& t : op.args) buffers.emplace_back(t->name, t->shape);
    for (const Buffer& b : allocations(op.program.body)) buffers.emplace_back(b->name, b->shape);
    for (const auto& [name, shape] : buffers) {
      int64_t elements = 1;
      for (int64_t d : shape)
        if (__builtin_mul_overflow(elements, d, &elements) || elements > kMaxTensorElements)
          throw_error("{}: tensor {} of shape [{}] has more than {} elements", w.op, name,
                      fmt::join(shape, ", "), kMaxTensorElements);
    }
    return op;
  }
  std::vector<std::string> names;
  for (const OpDef& def : op_registry()) names.push_back(def.name);
  throw_error("unknown op '{}' (known: {})", w.op, fmt::join(names, ", "));
}

Workload canonical(const Workload& w) {
  for (const OpDef& def : op_registry()) {
    if (def.name != w.op) continue;
    Workload out{w.op, {}};
    for (const auto& [k, v] : w.params) {
      bool at_default = false;
      for (const auto& [ok, fallback] : def.optional) at_default |= ok == k && v == fallback;
      if (!at_default) out.params.emplace_back(k, v);
    }
    return out;
  }
  return w;
}

std::string canonical_workload(const std::string& text) {
  Workload w = parse_workload(text);
  const OpDef* def = nullptr;
  for (const OpDef& d : op_registry()) {
    if (d.name == w.op) def = &d;
  }
  if (!def) {
    instantiate(w);  // the registry's own message for an unknown op
    throw_error("unknown op '{}'", w.op);
  }
  // The operator's keys in the registry's order, then its optional ones (parse_workload has
  // dropped those at their defaults) in the registry's order.
  Workload canonical{w.op, {}};
  std::vector<std::string> order = def->keys;
  for (const auto& [key, fallback] : def->optional) order.push_back(key);
  for (const std::string& key : order) {
    for (const auto& [k, v] : w.params) {
      if (k == key) canonical.params.emplace_back(k, v);
    }
  }
  instantiate(w);  // the registry's message for a missing or unknown key
  instantiate(canonical);
  return canonical.text();
}

}  // namespace tessera
