#include "runtime/parallel_jobs.h"

#include <algorithm>
#include <atomic>
#include <thread>
#include <vector>

namespace tessera {

void run_parallel_jobs(size_t count, int threads, const std::function<void(size_t)>& job) {
  size_t n = threads > 0 ? static_cast<size_t>(threads)
                         : std::max(1u, std::thread::hardware_concurrency());
  std::atomic<size_t> next{0};
  std::vector<std::thread> pool;
  for (size_t t = 0; t < std::min(n, count); ++t)
    pool.emplace_back([&] {
      for (size_t i = next++; i < count; i = next++) job(i);
    });
  for (std::thread& t : pool) t.join();
}

}  // namespace tessera
