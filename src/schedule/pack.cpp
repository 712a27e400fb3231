#include <fmt/format.h>

#include "schedule/rules.h"
#include "schedule/stage_tools.h"
#include "te/expr_functor.h"
#include "tir/simplify.h"
#include "tir/stmt_functor.h"

namespace tessera {

namespace {

class PackedLoads : public StmtMutator {
 public:
  PackedLoads(const Buffer& from, const Buffer& to, size_t dim, int64_t factor)
      : from_(from), to_(to), dim_(dim), factor_(factor) {}

 protected:
  class Loads : public ExprMutator {
   public:
    explicit Loads(const PackedLoads& r) : r_(r) {}

   protected:
    using ExprMutator::visit_;
    Expr visit_(const LoadNode& n, const Expr& self) override {
      Expr e = ExprMutator::visit_(n, self);
      const auto* load = e.as<LoadNode>();
      if (load->buffer != r_.from_) return e;
      Expr split_index = load->indices[r_.dim_];
      std::vector<Expr> idx{split_index / make_int(r_.factor_)};
      for (size_t d = 0; d < load->indices.size(); ++d) {
        if (d != r_.dim_) idx.push_back(load->indices[d]);
      }
      idx.push_back(split_index % make_int(r_.factor_));
      return make_load(r_.to_, std::move(idx));
    }

   private:
    const PackedLoads& r_;
  };
  Expr mutate_expr(const Expr& e) override {
    Loads l(*this);
    return l.visit(e);
  }

 private:
  const Buffer& from_;
  const Buffer& to_;
  size_t dim_;
  int64_t factor_;
};

}  // namespace

ProgramStrategy pack(const std::string& buffer_name, int64_t dim, int64_t factor) {
  std::string text = fmt::format("pack({}, {}, {})", buffer_name, dim, factor);
  return ProgramStrategy(text, [=](const Program& p) {
    auto fail = [&](const std::string& why) {
      return RewriteResult<Program>::not_applicable(text, why);
    };
    Buffer buffer = find_buffer(p, buffer_name);
    if (!buffer) return fail("no buffer named " + buffer_name);
    bool input = false;
    for (const Buffer& b : p.inputs) input |= b == buffer;
    if (!input) return fail(buffer_name + " is not an input of the program");
    if (dim < 0 || dim >= static_cast<int64_t>(buffer->shape.size())) {
      return fail(fmt::format("{} has no dimension {}", buffer_name, dim));
    }
    if (factor <= 0) return fail(fmt::format("factor {} is not positive", factor));
    auto d = static_cast<size_t>(dim);
    std::string packed_name = buffer_name + ".packed";
    if (find_buffer(p, packed_name)) return fail(packed_name + " exists already");

    // packed[a, <other dims>, b] = buffer[..., a*factor + b, ...], zero past the end of a
    // partial block. The block index goes innermost so that a loop vectorized over it reads
    // contiguous lanes (weights [O][C][KH][KW] by dim 0 -> [O/f][C][KH][KW][f]).
    int64_t extent = buffer->shape[d];
    std::vector<int64_t> shape{(extent + factor - 1) / factor};
    for (size_t i = 0; i < buffer->shape.size(); ++i)
      if (i != d) shape.push_back(buffer->shape[i]);
    shape.push_back(factor);
    // Padding to a huge factor allocates past what 32-bit indices reach (pack(B, 1, 2^30)).
    int64_t elements = 1;
    for (int64_t e : shape)
      if (__builtin_mul_overflow(elements, e, &elements) || elements > (int64_t{1} << 31) - 1)
        return fail(fmt::format("the packed buffer [{}] would have more than 2^31 - 1 elements",
                                fmt::join(shape, ", ")));
    Buffer packed = make_buffer(packed_name, buffer->dtype, shape);
    std::vector<Var> vars;
    std::vector<Expr> packed_idx, source_idx;
    for (size_t i = 0; i < shape.size(); ++i) {
      vars.emplace_back(fmt::format("{}.pack.{}", buffer_name, i));
      packed_idx.push_back(vars.back());
    }
    Expr source_pos = Expr(vars[0]) * make_int(factor) + vars.back();
    for (size_t i = 0, other = 1; i < buffer->shape.size(); ++i)
      source_idx.push_back(i == d ? source_pos : Expr(vars[other++]));
    Expr value = make_load(buffer, source_idx);
    if (extent % factor != 0) {
      // A guarded read keeps the load in bounds: select evaluates only the chosen branch.
      value = select(source_pos < make_int(extent), value, make_int(0, buffer->dtype));
    }
    Stmt nest = make_store(packed, packed_idx, value);
    for (size_t i = vars.size(); i-- > 0;)
      nest = make_for(vars[i], make_int(0), shape[i], ForKind::kSerial, nest);

    PackedLoads rewrite(buffer, packed, d, factor);
    Program out = p;
    out.body = simplify(make_allocate(packed, make_seq({nest, rewrite.visit(p.body)})));
    return RewriteResult<Program>::success(std::move(out));
  });
}

}  // namespace tessera
