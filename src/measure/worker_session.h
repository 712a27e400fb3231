/// The work a worker process does for one request: load the kernel, check it against the
/// operator's reference, time it. Runs inside the worker (src/measure/worker/main.cpp), never in
/// the tuner's process; a kernel that crashes takes only the worker down.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "measure/worker_protocol.h"
#include "runtime/ndarray.h"

namespace tessera {

class WorkerSession {
 public:
  WorkerSession();
  ~WorkerSession();
  WorkerSession(const WorkerSession&) = delete;
  WorkerSession& operator=(const WorkerSession&) = delete;

  /// Prepares the workload's inputs and reference outputs (cached per workload and seed), calls
  /// prepared(), then loads, checks and times the kernel. Failures are results, not exceptions.
  RunResult handle(const RunRequest& request, const std::function<void()>& prepared);

 private:
  struct Prepared;
  const Prepared& prepare(const std::string& workload, uint64_t seed);
  std::map<std::string, std::unique_ptr<Prepared>> prepared_;
};

}  // namespace tessera
