#include "measure/runner.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>

#include "runtime/cleanup.h"
#include "runtime/process.h"
#include "runtime/sanitizer.h"
#include "te/error.h"

extern char** environ;

namespace tessera {

namespace fs = std::filesystem;

namespace {

int64_t default_memory_limit() {
  const int64_t physical =
      static_cast<int64_t>(sysconf(_SC_PHYS_PAGES)) * static_cast<int64_t>(sysconf(_SC_PAGESIZE));
  return std::max<int64_t>(physical / 2, int64_t{2} << 30);
}

// Our environment, with the OpenMP settings the worker must have replaced.
std::vector<std::string> worker_environment(const RunParams& p) {
  std::vector<std::string> env;
  auto ours = [](const char* e) {
    for (const char* k :
         {"OMP_NUM_THREADS=", "OMP_PLACES=", "OMP_PROC_BIND=", "GOMP_CPU_AFFINITY="}) {
      if (std::strncmp(e, k, std::strlen(k)) == 0) return true;
    }
    return kAddressSanitizer && std::strncmp(e, "ASAN_OPTIONS=", 13) == 0;
  };
  for (char** e = environ; *e; ++e) {
    if (!ours(*e)) env.emplace_back(*e);
  }
  const int threads = p.threads > 0 ? p.threads : static_cast<int>(p.cpus.size());
  if (threads > 0) env.push_back("OMP_NUM_THREADS=" + std::to_string(threads));
  if (!p.cpus.empty()) {
    std::string places;
    for (int c : p.cpus) places += (places.empty() ? "{" : ",{") + std::to_string(c) + "}";
    env.push_back("OMP_PLACES=" + places);
    env.push_back("OMP_PROC_BIND=close");
  }
  env.push_back("TESSERA_WORKER=1");  // marks the process in `ps`; read by nobody
  // Under ASan (scripts/sanitize.sh) a crashing candidate dies of its own signal, as it does in a
  // normal build, instead of ASan reporting it: the kernels are not instrumented anyway.
  if (kAddressSanitizer) {
    const char* given = std::getenv("ASAN_OPTIONS");
    env.push_back(std::string("ASAN_OPTIONS=") + (given ? given : "") + ":handle_segv=0");
  }
  return env;
}

}  // namespace

std::string default_worker_path() {
  std::error_code ec;
  fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    fs::path sibling = self.parent_path() / "tessera_worker";
    if (fs::exists(sibling, ec)) return sibling.string();
  }
#ifdef TESSERA_WORKER_PATH
  return TESSERA_WORKER_PATH;
#else
  return "tessera_worker";
#endif
}

Runner::Runner(RunParams params) : params_(std::move(params)) {
  if (params_.worker_path.empty()) params_.worker_path = default_worker_path();
  if (params_.memory_limit_bytes == 0) params_.memory_limit_bytes = default_memory_limit();
  dir_ = make_tracked_temp_dir("tessera-run-");
}

Runner::~Runner() {
  stop();
  std::error_code ec;
  fs::remove_all(dir_, ec);
  untrack_temp_dir(dir_);
}

void Runner::start() {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
    throw_error("cannot create a socket pair for a worker: {}", std::strerror(errno));
  }
  SpawnSpec spec;
  spec.argv = {params_.worker_path, "--fd", "3"};
  if (params_.threads > 0)
    spec.argv.insert(spec.argv.end(), {"--threads", std::to_string(params_.threads)});
  if (params_.memory_limit_bytes > 0) {
    spec.argv.insert(spec.argv.end(),
                     {"--memory-limit", std::to_string(params_.memory_limit_bytes)});
  }
  if (!params_.cpus.empty()) {
    std::string list;
    for (int c : params_.cpus) list += (list.empty() ? "" : ",") + std::to_string(c);
    spec.argv.insert(spec.argv.end(), {"--cpus", list});
  }
  spec.env = worker_environment(params_);
  spec.fds = {{3, sv[1]}};
  spec.output_path = dir_ + "/worker.log";
  try {
    pid_ = spawn_process(spec);
  } catch (...) {
    ::close(sv[0]);
    ::close(sv[1]);
    throw;
  }
  ::close(sv[1]);
  fd_ = sv[0];
  buffer_.clear();
  ++started_;
}

int Runner::end_worker(bool kill_now) {
  if (pid_ == 0) return 0;
  if (fd_ >= 0) ::close(fd_);  // a healthy worker exits at end of input
  fd_ = -1;
  std::optional<int> status;
  if (!kill_now) status = wait_process(pid_, 1.0);
  if (!status) {
    ::kill(-pid_, SIGKILL);
    ::kill(pid_, SIGKILL);
    status = wait_process(pid_, 0);
  }
  pid_ = 0;
  return *status;
}

void Runner::stop() {
  end_worker(/*kill_now=*/false);
}

bool Runner::send(const std::string& line) {
  const std::string msg = line + "\n";
  size_t off = 0;
  while (off < msg.size()) {
    // MSG_NOSIGNAL: a dead worker is an error code here, not a SIGPIPE for the tuner.
    ssize_t n = ::send(fd_, msg.data() + off, msg.size() - off, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    off += static_cast<size_t>(n);
  }
  return true;
}

Runner::Read Runner::read_line(double timeout_s, std::string& line) {
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + std::chrono::duration<double>(timeout_s);
  for (;;) {
    size_t nl = buffer_.find('\n');
    if (nl != std::string::npos) {
      line = buffer_.substr(0, nl);
      buffer_.erase(0, nl + 1);
      return Read::kLine;
    }
    const double left = std::chrono::duration<double>(deadline - Clock::now()).count();
    if (left <= 0) return Read::kTimeout;
    pollfd pfd{fd_, POLLIN, 0};
    int r = ::poll(&pfd, 1, static_cast<int>(std::ceil(left * 1000)));
    if (r < 0 && errno == EINTR) continue;
    if (r == 0) continue;  // the deadline check above decides
    char chunk[4096];
    ssize_t n = ::read(fd_, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Read::kClosed;
    buffer_.append(chunk, static_cast<size_t>(n));
  }
}

std::string Runner::log_tail() {
  std::string log = read_text_file(dir_ + "/worker.log");
  while (!log.empty() && (log.back() == '\n' || log.back() == ' ')) log.pop_back();
  if (log.empty()) return "";
  size_t start = log.size() > 300 ? log.size() - 300 : 0;
  std::string tail = log.substr(start);
  for (char& c : tail) {
    if (c == '\n') c = ' ';
  }
  return "; its last output: " + tail;
}

RunResult Runner::run(const RunInput& input) {
  using Clock = std::chrono::steady_clock;
  const auto start_time = Clock::now();
  RunResult r;
  auto finish = [&]() -> RunResult {
    r.seconds = std::chrono::duration<double>(Clock::now() - start_time).count();
    return r;
  };
  RunRequest req;
  req.workload = input.workload;
  req.library = input.library;
  req.entry = input.entry;
  req.check = params_.check;
  req.seed = params_.seed;
  req.timing = params_.timing;
  const std::string line = encode_request(req);

  // A worker that died between candidates (or whose spawning thread ended, see PDEATHSIG in
  // worker/main.cpp) is replaced without blaming the candidate.
  if (pid_ != 0 && !process_running(pid_)) {
    ::close(fd_);
    fd_ = -1;
    pid_ = 0;
  }
  try {
    if (pid_ == 0) start();
    if (!send(line)) {
      end_worker(true);
      start();
      if (!send(line)) throw_error("cannot send a request to the worker");
    }
  } catch (const Error& e) {
    end_worker(true);
    r.error = ErrorKind::kUnknown;
    r.message = e.what();
    return finish();
  }
  // Truncating the log (opened O_APPEND by the worker) keeps only this candidate's output.
  if (::truncate((dir_ + "/worker.log").c_str(), 0) != 0) {
    // Not fatal: crash messages then also show older output.
  }

  bool prepared = false;
  std::string reply;
  for (;;) {
    Read got = read_line(prepared ? params_.timeout_s : params_.prepare_timeout_s, reply);
    if (got == Read::kTimeout) {
      end_worker(true);
      r.error = prepared ? ErrorKind::kRunTimeout : ErrorKind::kUnknown;
      r.message = prepared ? fmt::format("the kernel ran longer than {} s and was killed",
                                         params_.timeout_s)
                           : fmt::format(
                                 "preparing the inputs and reference of {} took longer "
                                 "than {} s",
                                 input.workload, params_.prepare_timeout_s);
      return finish();
    }
    if (got == Read::kClosed) {
      const std::string tail = log_tail();
      const int status = end_worker(false);
      r.error = prepared ? ErrorKind::kRuntimeError : ErrorKind::kUnknown;
      if (WIFSIGNALED(status)) {
        r.message = fmt::format("{} killed by {}{}", prepared ? "the kernel was" : "the worker was",
                                describe_wait_status(status), tail);
      } else {
        r.message =
            fmt::format("the worker ended ({}) {}{}", describe_wait_status(status),
                        prepared ? "while running the kernel" : "before running the kernel", tail);
      }
      return finish();
    }
    try {
      bool is_prepared = false;
      decode_reply(reply, is_prepared, r);
      if (is_prepared) {
        prepared = true;
        continue;
      }
      return finish();
    } catch (const Error& e) {
      end_worker(true);
      r = RunResult{};
      r.error = ErrorKind::kUnknown;
      r.message = e.what();
      return finish();
    }
  }
}

std::vector<RunResult> Runner::run_batch(const std::vector<RunInput>& inputs,
                                         const ProgressFn& progress) {
  std::vector<RunResult> results;
  for (size_t i = 0; i < inputs.size(); ++i) {
    results.push_back(run(inputs[i]));
    if (progress) progress("run", i + 1, inputs.size());
  }
  return results;
}

}  // namespace tessera
