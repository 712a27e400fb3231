#include <fmt/format.h>
#include <fmt/ranges.h>

#include <optional>

#include "schedule/location.h"
#include "schedule/loop_tools.h"
#include "schedule/rules.h"
#include "schedule/stage_tools.h"
#include "tir/simplify.h"
#include "tir/stmt_functor.h"

namespace tessera {

namespace {

// A nest over the box copying between the buffer and its cache, guarded to the buffer's bounds.
// Its loops follow the local layout, so the copy walks the cache contiguously.
Stmt copy_nest(const Buffer& global, const Buffer& local, const std::vector<Expr>& offset,
               const std::vector<size_t>& order, bool into_local, const std::string& loop_prefix) {
  std::vector<Var> vars;
  std::vector<Expr> local_idx, global_idx(offset.size());
  for (size_t d = 0; d < local->shape.size(); ++d) {
    vars.emplace_back(fmt::format("{}.{}", loop_prefix, d));
    local_idx.push_back(vars.back());
    global_idx[order[d]] = offset[order[d]] + vars.back();
  }
  Stmt body = into_local ? make_store(local, local_idx, make_load(global, global_idx))
                         : make_store(global, global_idx, make_load(local, local_idx));
  body = make_if(in_bounds(global, global_idx), body);
  for (size_t d = vars.size(); d-- > 0;) {
    body = make_for(vars[d], make_int(0), local->shape[d], ForKind::kSerial, body);
  }
  return body;
}

// A nest setting every element of the cache to `value`.
Stmt fill_nest(const Buffer& local, const Expr& value, const std::string& loop_prefix) {
  std::vector<Var> vars;
  std::vector<Expr> idx;
  for (size_t d = 0; d < local->shape.size(); ++d) {
    vars.emplace_back(fmt::format("{}.{}", loop_prefix, d));
    idx.push_back(vars.back());
  }
  Stmt body = make_store(local, idx, value);
  for (size_t d = vars.size(); d-- > 0;) {
    body = make_for(vars[d], make_int(0), local->shape[d], ForKind::kSerial, body);
  }
  return body;
}

// The loops enclosing `target` (outermost first) and every store to `buffer` outside it.
class WriteSites : public StmtVisitor {
 public:
  WriteSites(const ForNode* target, const Buffer& buffer) : target_(target), buffer_(buffer) {}
  std::vector<const ForNode*> enclosing;
  std::vector<const StoreNode*> outside_stores;

 protected:
  void visit_(const ForNode& n, const Stmt& self) override {
    if (&n == target_) {
      enclosing = path_;
      return;
    }
    path_.push_back(&n);
    StmtVisitor::visit_(n, self);
    path_.pop_back();
  }
  void visit_(const StoreNode& n, const Stmt& self) override {
    if (n.buffer == buffer_) outside_stores.push_back(&n);
    StmtVisitor::visit_(n, self);
  }
  using StmtVisitor::visit_;

 private:
  const ForNode* target_;
  const Buffer& buffer_;
  std::vector<const ForNode*> path_;
};

// A reduction's block can start from the reduction's initial value instead of a copy of the
// buffer when that is provably what the copy would read: every other store to the buffer writes
// that one constant (lowering's init nest, which runs first), and each element is updated in one
// iteration of the cached loop and of every loop around it, so no earlier block has touched it.
// This saves the transposed gather of each block (the copy-back stays).
std::optional<Expr> initial_value(const Program& p, const ForNode& at, const Buffer& buffer) {
  WriteSites sites(&at, buffer);
  sites.visit(p.body);
  std::optional<Expr> value;
  for (const StoreNode* st : sites.outside_stores) {
    bool constant = is_constant(st->value);
    if (!constant || (value && !same_expr(*value, st->value))) return std::nullopt;
    value = st->value;
  }
  if (!value) return std::nullopt;
  if (iteration_conflict(at)) return std::nullopt;
  for (const ForNode* loop : sites.enclosing) {
    if (iteration_conflict(*loop)) return std::nullopt;
  }
  return value;
}

}  // namespace

RewriteResult<Program> cache_box(const Program& p, const std::string& text,
                                 const std::string& stage, const std::string& loop_ref, bool write,
                                 const std::vector<int64_t>& order) {
  auto fail = [&](const std::string& why) {
    return RewriteResult<Program>::not_applicable(text, why);
  };
  Resolved ref = resolve_loop(p, loop_ref);
  if (!ref.ok()) return fail(ref.error);
  Buffer buffer = find_buffer(p, stage);
  if (!buffer) return fail("no buffer named " + stage);
  const ForNode* at = find_loop(p, ref.name);
  if (!at) return fail("no loop named " + ref.name);
  if (allocated_inside(at->body, buffer))
    return fail(fmt::format("{} is allocated inside {}", stage, ref.name));
  auto box_or = access_box(*at, buffer, true, write);
  if (auto* why = std::get_if<std::string>(&box_or)) return fail(*why);
  const AccessBox& box = std::get<AccessBox>(box_or);
  if (write && box.stores == 0)
    return fail(fmt::format("the body of {} does not write {}", ref.name, stage));
  if (!write && box.stores > 0)
    return fail(fmt::format("the body of {} writes {}; use cache_write", ref.name, stage));
  std::string local_name = stage + ".local";
  if (find_buffer(p, local_name)) return fail("a buffer named " + local_name + " exists already");

  size_t rank = buffer->shape.size();
  std::vector<size_t> layout(rank);
  if (order.empty()) {
    for (size_t d = 0; d < rank; ++d) layout[d] = d;
  } else {
    std::vector<bool> seen(rank, false);
    bool permutation = order.size() == rank;
    for (size_t d = 0; permutation && d < rank; ++d) {
      permutation = order[d] >= 0 && order[d] < static_cast<int64_t>(rank) && !seen[order[d]];
      if (!permutation) break;
      seen[order[d]] = true;
      layout[d] = static_cast<size_t>(order[d]);
    }
    if (!permutation)
      return fail(
          fmt::format("the layout must be a permutation of the {} dimensions of {}", rank, stage));
  }
  std::vector<int64_t> extent;
  for (size_t d : layout) extent.push_back(box.extent[d]);
  Buffer local = make_buffer(local_name, buffer->dtype, extent);
  std::vector<Expr> offset;
  for (size_t d = 0; d < box.base.size(); ++d)
    offset.push_back(simplify(box.base[d] + make_int(box.lo[d])));
  std::vector<Stmt> parts;
  std::optional<Expr> init = write ? initial_value(p, *at, buffer) : std::nullopt;
  if (init) {
    parts.push_back(fill_nest(local, *init, stage + ".load"));
  } else {
    parts.push_back(copy_nest(buffer, local, offset, layout, true, stage + ".load"));
  }
  parts.push_back(redirect_buffer(at->body, buffer, local, offset,
                                  order.empty() ? std::vector<size_t>{} : layout));
  if (write) parts.push_back(copy_nest(buffer, local, offset, layout, false, stage + ".store"));
  Stmt new_body = make_allocate(local, make_seq(parts));

  // `at` is the first loop of that name, the one rewrite_loop replaces; only its body changed.
  return rewrite_loop(p, text, ref.name,
                      [&](const LoopSite& site) -> std::variant<Stmt, std::string> {
                        const ForNode& n = *site.loop;
                        return make_for(n.var, n.min, n.extent, n.for_kind, new_body);
                      });
}

ProgramStrategy cache_write(const std::string& stage, const std::string& loop_ref,
                            const std::vector<int64_t>& layout) {
  std::string text = layout.empty() ? fmt::format("cache_write({}, {})", stage, loop_ref)
                                    : fmt::format("cache_write({}, {}, {})", stage, loop_ref,
                                                  fmt::join(layout, ", "));
  return ProgramStrategy(
      text, [=](const Program& p) { return cache_box(p, text, stage, loop_ref, true, layout); });
}

}  // namespace tessera
