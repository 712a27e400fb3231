#include "schedule/location.h"

#include <fmt/format.h>

#include <optional>
#include <vector>

#include "te/error.h"
#include "tir/stmt_functor.h"

namespace tessera {

namespace {

// Top-level loop nests in program order: the For statements not inside another For.
class NestCollector : public StmtVisitor {
 public:
  std::vector<const ForNode*> nests;

 protected:
  void visit_(const ForNode& n, const Stmt&) override { nests.push_back(&n); }
  using StmtVisitor::visit_;
};

class StoreFinder : public StmtVisitor {
 public:
  explicit StoreFinder(const std::string& b) : buffer(b) {}
  const std::string& buffer;
  bool found = false;

 protected:
  void visit_(const StoreNode& n, const Stmt& self) override {
    found |= n.buffer->name == buffer;
    StmtVisitor::visit_(n, self);
  }
  using StmtVisitor::visit_;
};

// The loops of a nest from the outermost down, through guards, while a body is a single loop.
std::vector<const ForNode*> nest_chain(const ForNode* top) {
  std::vector<const ForNode*> chain{top};
  Stmt cur = top->body;
  while (true) {
    while (const auto* g = cur.as<IfThenElseNode>()) {
      if (g->else_case.defined()) break;
      cur = g->then_case;
    }
    const auto* f = cur.as<ForNode>();
    if (!f) break;
    chain.push_back(f);
    cur = f->body;
  }
  return chain;
}

struct RefSyntax {
  std::string kind;   // outermost, innermost, loop
  std::string stage;  // empty: last nest
  int64_t index = 0;
};

std::optional<RefSyntax> parse_ref(const std::string& ref) {
  RefSyntax r;
  size_t open = ref.find('(');
  r.kind = ref.substr(1, open == std::string::npos ? std::string::npos : open - 1);
  if (open == std::string::npos) return r.kind == "loop" ? std::nullopt : std::optional(r);
  if (ref.back() != ')') return std::nullopt;
  std::string args = ref.substr(open + 1, ref.size() - open - 2);
  size_t comma = args.find(',');
  std::string first = args.substr(0, comma);
  auto trim = [](std::string s) {
    while (!s.empty() && s.front() == ' ') s.erase(s.begin());
    while (!s.empty() && s.back() == ' ') s.pop_back();
    return s;
  };
  first = trim(first);
  if (r.kind == "loop") {
    std::string num = comma == std::string::npos ? first : trim(args.substr(comma + 1));
    if (comma != std::string::npos) r.stage = first;
    try {
      r.index = std::stoll(num);
    } catch (const std::exception&) {
      return std::nullopt;
    }
    return r;
  }
  if (comma != std::string::npos) return std::nullopt;
  r.stage = first;
  return r;
}

}  // namespace

Resolved resolve_loop(const Program& p, const std::string& ref) {
  if (ref.empty() || ref[0] != '@') return {ref, ""};
  std::optional<RefSyntax> syntax = parse_ref(ref);
  if (!syntax ||
      (syntax->kind != "outermost" && syntax->kind != "innermost" && syntax->kind != "loop")) {
    return {"", "unknown location " + ref};
  }
  NestCollector nests;
  nests.visit(p.body);
  const ForNode* top = nullptr;
  for (const ForNode* n : nests.nests) {
    if (syntax->stage.empty()) {
      top = n;
      continue;
    }
    StoreFinder f(syntax->stage);
    f.visit(n->body);
    if (f.found) top = n;
  }
  if (!top) {
    return {"", syntax->stage.empty() ? "the program has no loops"
                                      : "no loop nest writes a buffer named " + syntax->stage};
  }
  std::vector<const ForNode*> chain = nest_chain(top);
  if (syntax->kind == "outermost") return {chain.front()->var.name(), ""};
  if (syntax->kind == "innermost") return {chain.back()->var.name(), ""};
  if (syntax->index < 0 || syntax->index >= static_cast<int64_t>(chain.size())) {
    return {"", fmt::format("{}: the nest has {} loops", ref, chain.size())};
  }
  return {chain[static_cast<size_t>(syntax->index)]->var.name(), ""};
}

}  // namespace tessera
