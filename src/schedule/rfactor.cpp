#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <limits>
#include <optional>

#include "schedule/location.h"
#include "schedule/rules.h"
#include "schedule/stage_tools.h"
#include "te/expr_functor.h"
#include "tir/printer.h"
#include "tir/simplify.h"
#include "tir/stmt_functor.h"
#include "tir/structural_equal.h"

namespace tessera {

namespace {

// The combiner of an update `S[idx] = S[idx] op f`: op applied to two expressions, or null when
// the value has another form.
using Combiner = Expr (*)(Expr, Expr);
Combiner combiner_of(const Expr& value, const StoreNode& store, Expr* f) {
  auto reads_self = [&](const Expr& e) {
    const auto* load = e.as<LoadNode>();
    if (!load || load->buffer != store.buffer || load->indices.size() != store.indices.size())
      return false;
    for (size_t d = 0; d < store.indices.size(); ++d) {
      if (!structural_equal(load->indices[d], store.indices[d])) return false;
    }
    return true;
  };
  auto match = [&](const Expr& a, const Expr& b) {
    if (reads_self(a)) {
      *f = b;
      return true;
    }
    if (reads_self(b)) {
      *f = a;
      return true;
    }
    return false;
  };
  if (const auto* n = value.as<AddNode>(); n && match(n->a, n->b))
    return [](Expr a, Expr b) { return a + b; };
  if (const auto* n = value.as<MulNode>(); n && match(n->a, n->b))
    return [](Expr a, Expr b) { return a * b; };
  if (const auto* n = value.as<MaxNode>(); n && match(n->a, n->b))
    return [](Expr a, Expr b) { return max(a, b); };
  if (const auto* n = value.as<MinNode>(); n && match(n->a, n->b))
    return [](Expr a, Expr b) { return min(a, b); };
  return nullptr;
}

// Whether the init constant is the identity of the update's operation (0 for +, 1 for *, the
// lowest value for max, the highest for min).
bool init_is_identity(const Expr& update, const Expr& init) {
  double v = 0;
  if (const auto* f = init.as<FloatImmNode>()) v = f->value;
  if (const auto* i = init.as<IntImmNode>()) v = static_cast<double>(i->value);
  DType t = init.dtype();
  if (update.as<AddNode>()) return v == 0;
  if (update.as<MulNode>()) return v == 1;
  double lowest = t == DType::kInt32     ? std::numeric_limits<int32_t>::lowest()
                  : t == DType::kFloat32 ? std::numeric_limits<float>::lowest()
                                         : std::numeric_limits<double>::lowest();
  if (update.as<MaxNode>()) return v <= lowest;
  if (update.as<MinNode>()) return v >= -lowest;
  return false;
}

int count_loads(const Expr& e, const Buffer& b) {
  class Count : public ExprVisitor {
   public:
    explicit Count(const Buffer& b) : b_(b) {}
    int n = 0;

   protected:
    using ExprVisitor::visit_;
    void visit_(const LoadNode& l, const Expr& self) override {
      n += l.buffer == b_;
      ExprVisitor::visit_(l, self);
    }

   private:
    const Buffer& b_;
  };
  Count c(b);
  c.visit(e);
  return c.n;
}

// Replaces the update store and wraps the nest at `root` as alloc rf { init ; nest ; combine }.
class Rewrite : public StmtMutator {
 public:
  Rewrite(const StoreNode* update, Stmt new_update, const ForNode* root, const Buffer& rf,
          Stmt init, Stmt combine)
      : update_(update),
        new_update_(std::move(new_update)),
        root_(root),
        rf_(rf),
        init_(std::move(init)),
        combine_(std::move(combine)) {}

 protected:
  Stmt visit_(const StoreNode& n, const Stmt& self) override {
    if (&n == update_) return new_update_;
    return StmtMutator::visit_(n, self);
  }
  Stmt visit_(const ForNode& n, const Stmt& self) override {
    Stmt s = StmtMutator::visit_(n, self);
    if (&n != root_) return s;
    return make_allocate(rf_, make_seq({init_, s, combine_}));
  }
  using StmtMutator::visit_;

 private:
  const StoreNode* update_;
  Stmt new_update_;
  const ForNode* root_;
  const Buffer& rf_;
  Stmt init_, combine_;
};

// A nest over `shape` with loops `<prefix>.<d>`, around what `body` makes of their variables.
Stmt nest_over(const std::vector<int64_t>& shape, const std::string& prefix,
               const std::function<Stmt(const std::vector<Expr>&)>& body) {
  std::vector<Var> vars;
  for (size_t d = 0; d < shape.size(); ++d) vars.emplace_back(fmt::format("{}.{}", prefix, d));
  Stmt s = body(std::vector<Expr>(vars.begin(), vars.end()));
  for (size_t d = shape.size(); d-- > 0;)
    s = make_for(vars[d], make_int(0), shape[d], ForKind::kSerial, s);
  return s;
}

}  // namespace

// TVM's and Halide's rfactor: the reduction loop `loop` of stage S becomes a data dimension of
// partial results, `S.rf[..][l]`, each reduced over the remaining reduction loops; a final nest
// combines the partials into S. The iterations of `loop` then write different elements, so it can
// be vectorized (a row sum along a contiguous row becomes one vector accumulator). Reassociating
// the reduction changes float rounding, as every vectorized sum does.
ProgramStrategy rfactor(const std::string& stage, const std::string& loop_ref) {
  std::string text = fmt::format("rfactor({}, {})", stage, loop_ref);
  return ProgramStrategy(text, [=](const Program& p) {
    auto fail = [&](const std::string& why) {
      return RewriteResult<Program>::not_applicable(text, why);
    };
    Resolved ref = resolve_loop(p, loop_ref);
    if (!ref.ok()) return fail(ref.error);
    Buffer buffer = find_buffer(p, stage);
    if (!buffer) return fail("no buffer named " + stage);
    const ForNode* loop = find_loop(p, ref.name);
    if (!loop) return fail("no loop named " + ref.name);
    if (find_buffer(p, stage + ".rf"))
      return fail("a buffer named " + stage + ".rf exists already");

    // The stage is a reduction: constant init stores and one update S[idx] = S[idx] op f.
    BufferSites sites = buffer_sites(p.body, buffer);
    const BufferSites::Store* update = nullptr;
    std::optional<Expr> init;
    for (const BufferSites::Store& s : sites.stores) {
      if (is_constant(s.store->value)) {
        if (init && !structural_equal(*init, s.store->value))
          return fail(stage + " is initialized to more than one value");
        init = s.store->value;
        continue;
      }
      if (update) return fail(stage + " is updated by more than one statement");
      update = &s;
    }
    if (!update || !init) return fail(stage + " is not a reduction (an init and an update)");
    Expr f;
    Combiner combine = combiner_of(update->store->value, *update->store, &f);
    if (!combine)
      return fail(
          fmt::format("the update of {} is not {}[..] = {}[..] op value with op one of "
                      "+ * max min",
                      stage, stage, stage));
    if (!init_is_identity(update->store->value, *init))
      return fail(
          fmt::format("{} starts from {}, not the identity of its reduction: each partial "
                      "result would add it again",
                      stage, print_expr(*init)));
    // The partials are combined after the nest holding the update: the outermost loop around the
    // update that S exists around (S computed at a loop is allocated inside it). Nothing else in
    // that nest may read or write S.
    size_t root_depth = 0;
    while (root_depth < update->loops.size() &&
           allocated_inside(loop_statement(p.body, update->loops[root_depth]), buffer))
      ++root_depth;
    if (root_depth == update->loops.size())
      return fail(
          fmt::format("{} is allocated inside {}", stage, update->loops.back()->var.name()));
    const ForNode* root_loop = update->loops[root_depth];
    Stmt root = loop_statement(p.body, root_loop);
    BufferSites in_root = buffer_sites(root, buffer);
    if (in_root.loads.size() != 1 || count_loads(f, buffer) != 0)
      return fail(fmt::format("{} is read in its loop nest other than by its update", stage));
    if (in_root.stores.size() != 1)
      return fail(fmt::format("{} is written in its loop nest other than by its update", stage));
    if (std::find(update->loops.begin(), update->loops.end(), loop) == update->loops.end())
      return fail(fmt::format("loop {} is not around the update of {}", ref.name, stage));
    if (std::find(update->loops.begin(), update->loops.begin() + root_depth, loop) !=
        update->loops.begin() + root_depth)
      return fail(fmt::format("loop {} is around the allocation of {}", ref.name, stage));
    for (const Expr& index : update->store->indices) {
      if (uses_var(index, loop->var.get()))
        return fail(fmt::format("loop {} indexes {}: it is not a reduction loop", ref.name, stage));
    }
    if (!as_const_int(loop->min)) return fail("loop " + ref.name + " has a variable start");

    std::vector<int64_t> shape = buffer->shape;
    shape.push_back(loop->extent);
    Buffer rf = make_buffer(stage + ".rf", buffer->dtype, shape);
    std::vector<Expr> rf_index = update->store->indices;
    rf_index.push_back(Expr(loop->var) - loop->min);
    Stmt new_update = make_store(rf, rf_index, combine(make_load(rf, rf_index), f));
    Expr init_value = *init;
    Stmt rf_init = nest_over(shape, stage + ".rf.init", [&](const std::vector<Expr>& v) {
      return make_store(rf, v, init_value);
    });
    Stmt rf_combine = nest_over(shape, stage + ".rf", [&](const std::vector<Expr>& v) {
      std::vector<Expr> out(v.begin(), v.end() - 1);
      return make_store(buffer, out, combine(make_load(buffer, out), make_load(rf, v)));
    });
    Rewrite rewrite(update->store, new_update, root_loop, rf, rf_init, rf_combine);
    Program out = p;
    out.body = simplify(rewrite.visit(p.body));
    return RewriteResult<Program>::success(std::move(out));
  });
}

}  // namespace tessera
