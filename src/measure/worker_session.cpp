#include "measure/worker_session.h"

#include <dlfcn.h>

#include <cmath>
#include <new>

#include "ops/workload.h"
#include "te/error.h"

namespace tessera {

struct WorkerSession::Prepared {
  std::string error;  // why the workload could not be prepared, if it could not
  int64_t reduction_length = 1;
  size_t num_inputs = 0;
  std::vector<std::string> names;
  std::vector<NDArray> args;  // inputs (random), then expected outputs (reference)
};

WorkerSession::WorkerSession() = default;
WorkerSession::~WorkerSession() = default;

const WorkerSession::Prepared& WorkerSession::prepare(const std::string& workload, uint64_t seed) {
  const std::string key = workload + "#" + std::to_string(seed);
  auto it = prepared_.find(key);
  if (it != prepared_.end()) return *it->second;
  auto p = std::make_unique<Prepared>();
  try {
    OpInstance op = instantiate(parse_workload(workload));
    const std::vector<Buffer> bufs = op.program.args();
    p->reduction_length = op.reduction_length;
    p->num_inputs = op.program.inputs.size();
    std::vector<std::vector<double>> ref;
    for (size_t i = 0; i < bufs.size(); ++i) {
      NDArray a = NDArray::empty(bufs[i]->shape, bufs[i]->dtype);
      if (i < p->num_inputs) a.fill_random(seed + i);
      ref.push_back(a.to_doubles());
      p->names.push_back(bufs[i]->name);
      p->args.push_back(std::move(a));
    }
    op.reference(ref);
    for (size_t i = p->num_inputs; i < bufs.size(); ++i) p->args[i].from_doubles(ref[i]);
  } catch (const std::bad_alloc&) {
    throw;  // the memory limit, not the workload: reported as a runtime error, not cached
  } catch (const std::exception& e) {
    p->error = e.what();
  }
  return *prepared_.emplace(key, std::move(p)).first->second;
}

namespace {

// Closes the kernel's shared object when the request is done.
struct Library {
  void* handle = nullptr;
  ~Library() {
    if (handle) dlclose(handle);
  }
};

// Outputs start as NaN (or a pattern for integers) so that a kernel that skips elements fails.
void poison(NDArray& a) {
  if (is_float(a.dtype()))
    a.fill(std::nan(""));
  else
    a.fill_random(0x5eed, -100, 100);
}

}  // namespace

RunResult WorkerSession::handle(const RunRequest& request, const std::function<void()>& prepared) {
  RunResult r;
  try {
    const Prepared& p = prepare(request.workload, request.seed);
    if (prepared) prepared();
    if (!p.error.empty()) {
      r.error = ErrorKind::kInstantiation;
      r.message = p.error;
      return r;
    }
    Library lib;
    lib.handle = dlopen(request.library.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!lib.handle) {
      r.error = ErrorKind::kRuntimeError;
      r.message = std::string("cannot load the kernel: ") + dlerror();
      return r;
    }
    using EntryFn = void (*)(void* const*);
    auto entry = reinterpret_cast<EntryFn>(dlsym(lib.handle, request.entry.c_str()));
    if (!entry) {
      r.error = ErrorKind::kRuntimeError;
      r.message = "the kernel has no entry point '" + request.entry + "'";
      return r;
    }
    std::vector<NDArray> args;
    std::vector<void*> ptrs;
    for (size_t i = 0; i < p.args.size(); ++i) {
      args.push_back(p.args[i].copy());
      if (i >= p.num_inputs) poison(args.back());
      ptrs.push_back(args.back().data());
    }
    if (request.check) {
      entry(ptrs.data());
      for (size_t i = p.num_inputs; i < args.size(); ++i) {
        const NDArray& expected = p.args[i];
        CompareResult c =
            compare(args[i], expected, default_tolerance(expected.dtype(), p.reduction_length));
        r.max_abs_error = std::max(r.max_abs_error, c.max_abs_err);
        if (!c.ok && r.error == ErrorKind::kOk) {
          r.error = ErrorKind::kWrongAnswer;
          r.message = p.names[i] + ": " + c.message;
        }
      }
      if (r.error != ErrorKind::kOk) return r;
    }
    r.timing = time_kernel([&] { entry(ptrs.data()); },
                           [&] {
                             for (size_t i = request.timing.keep_first_cached; i < args.size(); ++i)
                               flush_from_caches(args[i].data(), args[i].bytes());
                           },
                           request.timing);
  } catch (const std::bad_alloc&) {
    r.error = ErrorKind::kRuntimeError;
    r.message = "out of memory (the worker's memory limit)";
  } catch (const std::exception& e) {
    r.error = ErrorKind::kUnknown;
    r.message = e.what();
  }
  return r;
}

}  // namespace tessera
