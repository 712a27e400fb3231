// tessera_worker: runs candidate kernels for a Runner (src/measure/runner.h), one request at a
// time, on the socket the runner passes as a file descriptor. A kernel that crashes or hangs
// takes only this process down; the runner records it and starts a fresh worker.
//
//   tessera_worker --fd N [--threads N] [--memory-limit BYTES] [--cpus 0,1,...]
#include <omp.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "measure/worker_session.h"
#include "runtime/sanitizer.h"
#include "te/error.h"

namespace {

bool write_line(int fd, std::string line) {
  line += '\n';
  size_t off = 0;
  while (off < line.size()) {
    ssize_t n = ::write(fd, line.data() + off, line.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    off += static_cast<size_t>(n);
  }
  return true;
}

// Reads one '\n'-terminated line; false at end of input.
bool read_line(int fd, std::string& buffer, std::string& line) {
  for (;;) {
    size_t nl = buffer.find('\n');
    if (nl != std::string::npos) {
      line = buffer.substr(0, nl);
      buffer.erase(0, nl + 1);
      return true;
    }
    char chunk[4096];
    ssize_t n = ::read(fd, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    buffer.append(chunk, static_cast<size_t>(n));
  }
}

int usage(const char* why) {
  std::fprintf(stderr,
               "tessera_worker: %s\nusage: tessera_worker --fd N [--threads N] "
               "[--memory-limit BYTES] [--cpus 0,1,...]\n",
               why);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  int fd = -1, threads = 0;
  long long memory_limit = 0;
  std::vector<int> cpus;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--fd")
      fd = std::atoi(value.c_str());
    else if (flag == "--threads")
      threads = std::atoi(value.c_str());
    else if (flag == "--memory-limit")
      memory_limit = std::atoll(value.c_str());
    else if (flag == "--cpus") {
      for (size_t pos = 0; pos < value.size();) {
        size_t comma = value.find(',', pos);
        cpus.push_back(std::atoi(value.substr(pos, comma - pos).c_str()));
        pos = comma == std::string::npos ? value.size() : comma + 1;
      }
    } else {
      return usage("unknown option");
    }
  }
  if (fd < 0) return usage("--fd is required");

  // Die with the runner, even if it is killed; the runner's parent check covers the race.
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() == 1) return 0;
  // A crashing kernel must not write a core file; a runaway one must not take the machine.
  rlimit no_core{0, 0};
  setrlimit(RLIMIT_CORE, &no_core);
  // ASan maps terabytes of shadow memory up front: under it an address-space limit would stop
  // the worker before it ran anything.
  if (memory_limit > 0 && !tessera::kAddressSanitizer) {
    rlimit as{static_cast<rlim_t>(memory_limit), static_cast<rlim_t>(memory_limit)};
    setrlimit(RLIMIT_AS, &as);
  }
  if (!cpus.empty()) {
    cpu_set_t set;
    CPU_ZERO(&set);
    for (int c : cpus) CPU_SET(c, &set);
    sched_setaffinity(0, sizeof set, &set);
  }
  if (threads > 0) omp_set_num_threads(threads);

  tessera::WorkerSession session;
  std::string buffer, line;
  while (read_line(fd, buffer, line)) {
    tessera::RunResult result;
    try {
      tessera::RunRequest request = tessera::decode_request(line);
      result = session.handle(request, [&] { write_line(fd, tessera::encode_prepared()); });
    } catch (const std::exception& e) {
      result.error = tessera::ErrorKind::kUnknown;
      result.message = e.what();
    }
    if (!write_line(fd, tessera::encode_result(result))) return 1;
  }
  return 0;
}
