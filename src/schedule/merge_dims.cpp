#include <fmt/format.h>

#include "schedule/rules.h"
#include "schedule/stage_tools.h"
#include "tir/simplify.h"

namespace tessera {

namespace {

RewriteResult<Program> merge_buffer_dims(const Program& p, const std::string& text,
                                         const std::string& name, int64_t dim) {
  auto fail = [&](const std::string& why) {
    return RewriteResult<Program>::not_applicable(text, why);
  };
  Buffer buffer = find_buffer(p, name);
  if (!buffer) return fail("no buffer named " + name);
  int64_t rank = static_cast<int64_t>(buffer->shape.size());
  if (dim < 0 || dim + 1 >= rank) {
    return fail(fmt::format("{} has {} dimensions: there is no pair {}, {} to merge", name, rank,
                            dim, dim + 1));
  }
  auto d = static_cast<size_t>(dim);
  std::vector<int64_t> shape = buffer->shape;
  int64_t inner = shape[d + 1];
  shape[d] *= inner;
  shape.erase(shape.begin() + dim + 1);
  Buffer merged = make_buffer(buffer->name, buffer->dtype, shape);
  // Row-major storage makes this exact for any index, in bounds or not: the flat offset
  // i_d * stride_d + i_{d+1} * stride_{d+1} is (i_d * extent_{d+1} + i_{d+1}) * stride_{d+1}.
  auto map = [&](const std::vector<Expr>& idx) {
    std::vector<Expr> out;
    for (size_t k = 0; k < idx.size(); ++k) {
      if (k == d) {
        out.push_back(simplify(idx[k] * make_int(inner) + idx[k + 1]));
        ++k;
      } else {
        out.push_back(idx[k]);
      }
    }
    return out;
  };
  Program out = p;
  out.body = simplify(reindex_buffer(p.body, buffer, merged, map));
  for (std::vector<Buffer>* args : {&out.inputs, &out.outputs}) {
    for (Buffer& b : *args) {
      if (b == buffer) b = merged;
    }
  }
  return RewriteResult<Program>::success(std::move(out));
}

}  // namespace

ProgramStrategy merge_dims(const std::string& buffer, int64_t dim) {
  std::string text = fmt::format("merge_dims({}, {})", buffer, dim);
  return ProgramStrategy(text,
                         [=](const Program& p) { return merge_buffer_dims(p, text, buffer, dim); });
}

}  // namespace tessera
