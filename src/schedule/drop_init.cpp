#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <variant>

#include "schedule/rules.h"
#include "schedule/stage_tools.h"
#include "tir/printer.h"
#include "tir/simplify.h"
#include "tir/stmt_functor.h"

namespace tessera {

namespace {

void conjuncts(const Expr& e, std::vector<Expr>& out) {
  if (const auto* a = e.as<AndNode>()) {
    conjuncts(a->a, out);
    conjuncts(a->b, out);
  } else {
    out.push_back(e);
  }
}

// Why the store, over all iterations of its loops, may miss an element of `buffer` (nullopt when
// it provably writes every one). Each index must be a sum of loop variables times positive
// coefficients, each loop starting at 0 and indexing one dimension, whose digits, smallest
// coefficient first, leave no gap: coefficient ≤ 1 + the largest value the smaller digits reach.
// The only guards allowed are the buffer's own bounds (a partial tile's), which drop no element.
std::optional<std::string> coverage_gap(const BufferSites::Store& site, const Buffer& buffer) {
  const StoreNode& store = *site.store;
  std::vector<int> dim_of(site.loops.size(), -1);
  for (size_t d = 0; d < store.indices.size(); ++d) {
    const Expr& index = store.indices[d];
    std::vector<std::pair<int64_t, int64_t>> digits;  // (coefficient, extent)
    Expr linear = make_int(0);
    for (size_t k = 0; k < site.loops.size(); ++k) {
      const ForNode& loop = *site.loops[k];
      std::optional<int64_t> c = affine_coefficient(index, loop.var.get());
      if (!c)
        return fmt::format("index {} is not affine in {}", print_expr(index), loop.var.name());
      if (*c == 0) continue;
      const int64_t* min = as_const_int(loop.min);
      if (*c < 0 || !min || *min != 0 || dim_of[k] >= 0) {
        return fmt::format("loop {} does not count one dimension up from 0", loop.var.name());
      }
      dim_of[k] = static_cast<int>(d);
      digits.emplace_back(*c, loop.extent);
      linear = linear + loop.var * make_int(*c);
    }
    const Expr difference = simplify(index - linear);
    const int64_t* offset = as_const_int(difference);
    if (!offset || *offset != 0)
      return fmt::format("index {} does not start at 0", print_expr(index));
    std::sort(digits.begin(), digits.end());
    int64_t reach = 0;
    for (const auto& [coeff, extent] : digits) {
      if (coeff > reach + 1)
        return fmt::format("index {} skips values after {}", print_expr(index), reach);
      reach += coeff * (extent - 1);
    }
    if (reach < buffer->shape[d] - 1) {
      return fmt::format("index {} reaches {}, not {}", print_expr(index), reach,
                         buffer->shape[d] - 1);
    }
  }
  for (const Expr& guard : site.guards) {
    std::vector<Expr> parts;
    conjuncts(guard, parts);
    for (const Expr& part : parts) {
      const auto* lt = part.as<LTNode>();
      const int64_t* bound = lt ? as_const_int(lt->b) : nullptr;
      bool bounds_check = false;
      for (size_t d = 0; bound && d < store.indices.size() && !bounds_check; ++d) {
        bounds_check = *bound == buffer->shape[d] && same_expr(lt->a, store.indices[d]);
      }
      if (!bounds_check) return fmt::format("it is guarded by {}", print_expr(part));
    }
  }
  return std::nullopt;
}

// `s` without the init nest of `buffer`: the first nest writing it, found through the
// allocations and sequences around the stages' nests. Or why not.
std::variant<Stmt, std::string> without_init(const Stmt& s, const Buffer& buffer) {
  const std::string& name = buffer->name;
  if (const auto* a = s.as<AllocateNode>()) {
    auto body = without_init(a->body, buffer);
    if (const Stmt* b = std::get_if<Stmt>(&body)) return make_allocate(a->buffer, *b);
    return body;
  }
  const auto* seq = s.as<SeqNode>();
  if (!seq) return "no init nest comes before the nest computing " + name;
  size_t first = seq->stmts.size();
  for (size_t i = 0; i < seq->stmts.size() && first == seq->stmts.size(); ++i) {
    if (!buffer_sites(seq->stmts[i], buffer).stores.empty()) first = i;
  }
  if (first == seq->stmts.size()) return "nothing writes " + name;
  std::vector<Stmt> stmts = seq->stmts;
  const Stmt& init = stmts[first];
  BufferSites init_sites = buffer_sites(init, buffer);
  bool constant_only = count_stores(init) == static_cast<int>(init_sites.stores.size());
  for (const BufferSites::Store& st : init_sites.stores) {
    constant_only = constant_only && is_constant(st.store->value) &&
                    same_expr(st.store->value, init_sites.stores.front().store->value);
  }
  if (!constant_only) {
    if (init.as<AllocateNode>() || init.as<SeqNode>()) {
      auto inner = without_init(init, buffer);
      if (const Stmt* b = std::get_if<Stmt>(&inner)) stmts[first] = *b;
      if (std::holds_alternative<Stmt>(inner)) return make_seq(std::move(stmts));
      return inner;
    }
    return fmt::format("the first nest writing {} does more than set it to one constant", name);
  }
  std::string gap = "no later nest writes " + name;
  for (size_t i = first + 1; i < stmts.size(); ++i) {
    for (const BufferSites::Store& st : buffer_sites(stmts[i], buffer).stores) {
      std::optional<std::string> why = coverage_gap(st, buffer);
      if (!why) {
        stmts.erase(stmts.begin() + static_cast<long>(first));
        return make_seq(std::move(stmts));
      }
      gap = fmt::format("no later store provably writes every element of {} ({})", name, *why);
    }
  }
  return gap;
}

RewriteResult<Program> drop_stage_init(const Program& p, const std::string& text,
                                       const std::string& name) {
  Buffer buffer = find_buffer(p, name);
  if (!buffer) return RewriteResult<Program>::not_applicable(text, "no buffer named " + name);
  if (!buffer_sites(p.body, buffer).loads.empty()) {
    return RewriteResult<Program>::not_applicable(
        text, name + " is read, so its initial values could be seen");
  }
  auto body = without_init(p.body, buffer);
  if (const auto* why = std::get_if<std::string>(&body))
    return RewriteResult<Program>::not_applicable(text, *why);
  Program out = p;
  out.body = std::get<Stmt>(body);
  return RewriteResult<Program>::success(std::move(out));
}

}  // namespace

ProgramStrategy drop_init(const std::string& stage) {
  std::string text = fmt::format("drop_init({})", stage);
  return ProgramStrategy(text, [=](const Program& p) { return drop_stage_init(p, text, stage); });
}

}  // namespace tessera
