/// A small pool for independent jobs that each start a process (a C compiler): threads take the
/// next index until none is left.
#pragma once

#include <cstddef>
#include <functional>

namespace tessera {

/// Calls job(i) for every i in [0, count) on `threads` threads (0: one per core) and returns
/// when all are done. `job` must not throw: it keeps its own errors per index.
void run_parallel_jobs(size_t count, int threads, const std::function<void(size_t)>& job);

}  // namespace tessera
