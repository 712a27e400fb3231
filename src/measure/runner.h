/// Runs built kernels in worker processes owned by tessera, never in the caller's process: a
/// kernel that crashes, hangs or allocates without bound ends as an error record and a fresh
/// worker. Workers are started with posix_spawn (no fork of a threaded process).
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "measure/builder.h"
#include "measure/timing.h"
#include "measure/worker_protocol.h"

namespace tessera {

struct RunParams {
  TimingParams timing;
  /// Per candidate: loading, the check against the reference and the timing protocol. Past it
  /// the worker is killed and the candidate recorded as run_timeout.
  double timeout_s = 10;
  /// Per workload and worker: building random inputs and running the naive reference, which
  /// for large workloads takes longer than any kernel. Not counted in timeout_s.
  double prepare_timeout_s = 600;
  /// OpenMP threads for the kernel; 0: all cores (OpenMP's default).
  int threads = 0;
  /// CPUs the worker and its OpenMP threads are pinned to (one thread per listed CPU, in
  /// order); empty: no pinning.
  std::vector<int> cpus;
  uint64_t seed = 42;  // random inputs
  bool check = true;   // compare with the reference before timing
  /// Address-space limit of a worker (RLIMIT_AS). 0: half the physical memory, at least 2 GiB;
  /// negative: none.
  int64_t memory_limit_bytes = 0;
  /// The tessera_worker executable; empty: default_worker_path().
  std::string worker_path;
};

struct RunInput {
  std::string workload;  // `op:key=value,...`: the reference the output is checked against
  std::string library;   // the kernel's shared object (BuildResult::library)
  std::string entry = "tsr_main";
};

/// `tessera_worker` next to the running executable when there is one, else the one built with
/// tessera (TESSERA_WORKER_PATH).
std::string default_worker_path();

class Runner {
 public:
  explicit Runner(RunParams params = {});
  /// Ends the worker: nothing is left running.
  ~Runner();
  Runner(const Runner&) = delete;
  Runner& operator=(const Runner&) = delete;

  /// Runs one candidate; every failure is in the result. Not thread-safe: one candidate at a
  /// time, so that candidates never compete for the cores while timed.
  RunResult run(const RunInput& input);
  std::vector<RunResult> run_batch(const std::vector<RunInput>& inputs,
                                   const ProgressFn& progress = nullptr);

  const RunParams& params() const { return params_; }
  /// The current worker's process id; 0 when none runs.
  pid_t worker_pid() const { return pid_; }
  /// Workers started so far (1 + the number of replacements).
  int workers_started() const { return started_; }
  /// Ends the current worker (the next run starts a fresh one).
  void stop();

 private:
  void start();
  bool send(const std::string& line);
  enum class Read { kLine, kTimeout, kClosed };
  Read read_line(double timeout_s, std::string& line);
  /// Kills and reaps the worker; returns its wait status.
  int end_worker(bool kill_now);
  std::string log_tail();

  RunParams params_;
  std::string dir_;  // private directory holding the worker's stderr log
  pid_t pid_ = 0;
  int fd_ = -1;
  std::string buffer_;
  int started_ = 0;
};

}  // namespace tessera
