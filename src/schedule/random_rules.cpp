#include "schedule/random_rules.h"

#include "schedule/loop_tools.h"
#include "tir/stmt_functor.h"

namespace tessera {

namespace {

class AllocatedBuffers : public StmtVisitor {
 public:
  std::vector<std::string> names;

 protected:
  void visit_(const AllocateNode& n, const Stmt& self) override {
    names.push_back(n.buffer->name);
    StmtVisitor::visit_(n, self);
  }
  using StmtVisitor::visit_;
};

}  // namespace

ProgramStrategy random_rule(const Program& p, std::mt19937& rng) {
  std::vector<std::string> loops = loop_names(p);
  if (loops.empty()) return fail<Program>();
  std::vector<std::string> inputs, buffers;
  for (const Buffer& b : p.inputs) inputs.push_back(b->name);
  for (const Buffer& b : p.args()) buffers.push_back(b->name);
  AllocatedBuffers allocated;
  allocated.visit(p.body);
  buffers.insert(buffers.end(), allocated.names.begin(), allocated.names.end());
  auto pick = [&](const std::vector<std::string>& v) { return v[rng() % v.size()]; };
  auto stage = [&] { return allocated.names.empty() ? pick(buffers) : pick(allocated.names); };
  auto factor = [&] { return static_cast<int64_t>(1 + rng() % 8); };
  switch (rng() % 20) {
    case 0:
      return split(pick(loops), factor());
    case 1:
      return reorder({pick(loops), pick(loops)});
    case 2:
      return fuse(pick(loops), pick(loops));
    case 3:
      return vectorize(pick(loops));
    case 4:
      return unroll(pick(loops));
    case 5:
      return parallel(pick(loops));
    case 6:
      return compute_at(stage(), pick(loops));
    case 7:
      return compute_inline(stage());
    case 8:
      return cache_write(pick(buffers), pick(loops));
    case 9:
      return cache_read(pick(inputs), pick(loops));
    case 10: {
      std::string b = pick(inputs);
      return pack(b, static_cast<int64_t>(rng() % 3), factor());
    }
    case 11:
      return reverse_compute_at(pick(buffers), pick(loops));
    case 12:
      return rfactor(stage(), pick(loops));
    case 13:
      return merge_dims(pick(buffers), static_cast<int64_t>(rng() % 4));
    case 14:
      return drop_init(pick(buffers));
    case 15: {
      std::vector<std::string> by;
      for (size_t n = 1 + rng() % 3; by.size() < n;) by.push_back(pick(loops));
      return gather(pick(inputs), by);
    }
    case 16:
      return fuse_write_back(stage());
    case 17:
      return prefetch(pick(inputs), pick(loops), static_cast<int64_t>(1 + rng() % 4));
    case 18:
      return prefetch_next(pick(inputs), pick(loops), pick(loops));
    case 19:
      return reverse(pick(loops));
    default:
      return split(pick(loops), factor());
  }
}

}  // namespace tessera
