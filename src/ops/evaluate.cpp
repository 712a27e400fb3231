#include "ops/evaluate.h"

#include "codegen/codegen_c.h"
#include "runtime/module.h"
#include "runtime/ndarray.h"

namespace tessera {

Evaluation evaluate(const OpInstance& op, const Program& program, const EvaluateParams& params) {
  Evaluation ev;
  ev.code = codegen_c(program);
  Module module = Module::compile(ev.code);
  if (params.threads > 0) set_num_threads(params.threads);
  ev.threads = num_threads();

  std::vector<NDArray> arrays;
  std::vector<void*> ptrs;
  uint64_t seed = params.seed;
  for (const Buffer& b : program.args()) {
    arrays.push_back(NDArray::empty(b->shape, b->dtype));
    arrays.back().fill_random(seed++);
  }
  for (NDArray& a : arrays) ptrs.push_back(a.data());
  module.run(ptrs);

  if (params.check) {
    std::vector<std::vector<double>> ref;
    for (const NDArray& a : arrays) ref.push_back(a.to_doubles());
    op.reference(ref);
    ev.checked = true;
    ev.correct = true;
    size_t first_output = program.inputs.size();
    for (size_t i = first_output; i < arrays.size(); ++i) {
      NDArray expected = NDArray::empty(arrays[i].shape(), arrays[i].dtype());
      expected.from_doubles(ref[i]);
      CompareResult cr =
          compare(arrays[i], expected, default_tolerance(expected.dtype(), op.reduction_length));
      ev.max_abs_err = std::max(ev.max_abs_err, cr.max_abs_err);
      if (!cr.ok && ev.correct) {
        ev.correct = false;
        ev.mismatch = program.args()[i]->name + ": " + cr.message;
      }
    }
  }
  if (params.time) {
    ev.timing = time_function([&] { module.run(ptrs); }, params.repeat, params.min_repeat_ms);
    ev.gflops = ev.timing.median > 0 ? op.flops / ev.timing.median * 1e-9 : 0;
  }
  return ev;
}

}  // namespace tessera
