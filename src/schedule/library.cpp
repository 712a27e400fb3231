#include "schedule/library.h"

#include <fmt/format.h>

namespace tessera {

ProgramStrategy named(const std::string& text, const ProgramStrategy& body) {
  return ProgramStrategy(
      text, ProgramStrategy::ComposedFn(
                [body](const Program& p, RewriteStats* stats) { return body(p, stats); }));
}

ProgramStrategy tile(const std::string& x, const std::string& y, int64_t fx, int64_t fy) {
  return named(fmt::format("tile({}, {}, {}, {})", x, y, fx, fy),
               split(x, fx) >> split(y, fy) >>
                   reorder({x + ".outer", y + ".outer", x + ".inner", y + ".inner"}));
}

ProgramStrategy tile_nd(const std::vector<std::string>& loops, const std::vector<int64_t>& sizes) {
  std::string text = fmt::format("tile_nd({}, {})", fmt::join(loops, ", "), fmt::join(sizes, ", "));
  if (loops.size() != sizes.size() || loops.empty()) {
    return ProgramStrategy(text, [text](const Program&) {
      return RewriteResult<Program>::not_applicable(text, "needs one size per loop");
    });
  }
  std::vector<ProgramStrategy> steps;
  std::vector<std::string> outers, inners;
  for (size_t i = 0; i < loops.size(); ++i) {
    steps.push_back(split(loops[i], sizes[i]));
    outers.push_back(loops[i] + ".outer");
    inners.push_back(loops[i] + ".inner");
  }
  outers.insert(outers.end(), inners.begin(), inners.end());
  steps.push_back(reorder(outers));
  return named(text, seq_all(steps));
}

ProgramStrategy permute(const std::vector<int64_t>& permutation) {
  std::vector<std::string> refs;
  for (int64_t p : permutation) refs.push_back(fmt::format("@loop({})", p));
  return reorder(refs);
}

// Each version is the previous one followed by the step the tutorial adds.

ProgramStrategy gemm_baseline() {
  return id<Program>();
}

ProgramStrategy gemm_blocking(int64_t bn, int64_t kfactor) {
  return tile("i", "j", bn, bn) >> split("k", kfactor) >>
         reorder({"i.outer", "j.outer", "k.outer", "k.inner", "i.inner", "j.inner"});
}

ProgramStrategy gemm_vectorization(int64_t bn, int64_t kfactor) {
  return gemm_blocking(bn, kfactor) >> vectorize("j.inner");
}

ProgramStrategy gemm_loop_permutation(int64_t bn, int64_t kfactor) {
  return gemm_vectorization(bn, kfactor) >>
         reorder({"i.outer", "j.outer", "k.outer", "i.inner", "k.inner", "j.inner"});
}

ProgramStrategy gemm_array_packing(int64_t bn, int64_t kfactor) {
  return gemm_loop_permutation(bn, kfactor) >> pack("B", 1, bn);
}

ProgramStrategy gemm_write_cache(int64_t bn, int64_t kfactor) {
  return gemm_array_packing(bn, kfactor) >> cache_write("C", "j.outer") >> unroll("k.inner");
}

ProgramStrategy gemm_parallel(int64_t bn, int64_t kfactor) {
  return gemm_write_cache(bn, kfactor) >> parallel("i.outer") >> parallel("i.init") >>
         parallel("B.pack.0");
}

std::vector<NamedStrategy> gemm_versions(int64_t bn, int64_t kfactor) {
  return {{"baseline", gemm_baseline()},
          {"blocking", gemm_blocking(bn, kfactor)},
          {"vectorization", gemm_vectorization(bn, kfactor)},
          {"loop permutation", gemm_loop_permutation(bn, kfactor)},
          {"array packing", gemm_array_packing(bn, kfactor)},
          {"write cache", gemm_write_cache(bn, kfactor)},
          {"parallel", gemm_parallel(bn, kfactor)}};
}

}  // namespace tessera
