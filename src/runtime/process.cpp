#include "runtime/process.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "runtime/cleanup.h"
#include "te/error.h"

extern char** environ;

namespace tessera {

pid_t spawn_process(const SpawnSpec& spec) {
  if (spec.argv.empty()) throw_internal("spawn_process without a command");
  int out_fd = -1;
  if (!spec.output_path.empty()) {
    out_fd =
        ::open(spec.output_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0600);
    if (out_fd < 0) throw_error("cannot create {}: {}", spec.output_path, std::strerror(errno));
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  if (out_fd >= 0) {
    posix_spawn_file_actions_adddup2(&actions, out_fd, 1);
    posix_spawn_file_actions_adddup2(&actions, out_fd, 2);
  }
  for (const auto& [child_fd, parent_fd] : spec.fds) {
    posix_spawn_file_actions_adddup2(&actions, parent_fd, child_fd);
  }

  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  short flags = POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF;
  if (spec.new_process_group) {
    flags |= POSIX_SPAWN_SETPGROUP;
    posix_spawnattr_setpgroup(&attr, 0);
  }
  posix_spawnattr_setflags(&attr, flags);
  sigset_t empty, defaults;
  sigemptyset(&empty);
  posix_spawnattr_setsigmask(&attr, &empty);
  sigemptyset(&defaults);
  for (int s : {SIGPIPE, SIGINT, SIGTERM, SIGCHLD}) sigaddset(&defaults, s);
  posix_spawnattr_setsigdefault(&attr, &defaults);

  std::vector<char*> argv;
  for (const std::string& a : spec.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<char*> envp;
  for (const std::string& e : spec.env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);

  pid_t pid = 0;
  int err = posix_spawnp(&pid, argv[0], &actions, &attr, argv.data(),
                         spec.env.empty() ? environ : envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (out_fd >= 0) ::close(out_fd);
  if (err != 0) throw_error("cannot run '{}': {}", spec.argv[0], std::strerror(err));
  track_child(pid);
  if (spec.memory_limit_bytes > 0) {
    const auto bytes = static_cast<rlim_t>(spec.memory_limit_bytes);
    const rlimit memory{bytes, bytes};
    prlimit(pid, RLIMIT_AS, &memory, nullptr);
  }
  if (spec.cpu_limit_s > 0) {
    // SIGXCPU at the soft limit, SIGKILL a second later for a process that catches it.
    const auto seconds = static_cast<rlim_t>(std::ceil(spec.cpu_limit_s));
    const rlimit cpu{seconds, seconds + 1};
    prlimit(pid, RLIMIT_CPU, &cpu, nullptr);
  }
  return pid;
}

std::optional<int> wait_process(pid_t pid, double timeout_s) {
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + std::chrono::duration<double>(timeout_s);
  // Poll with a growing sleep: quick for short compiles, cheap for long ones.
  auto nap = std::chrono::microseconds(200);
  for (;;) {
    int status = 0;
    pid_t r = waitpid(pid, &status, timeout_s > 0 ? WNOHANG : 0);
    if (r == pid) {
      untrack_child(pid);
      return status;
    }
    if (r < 0 && errno != EINTR) throw_internal("waitpid({}): {}", pid, std::strerror(errno));
    if (timeout_s > 0) {
      if (Clock::now() >= deadline) return std::nullopt;
      std::this_thread::sleep_for(nap);
      nap = std::min(nap * 2, std::chrono::microseconds(10000));
    }
  }
}

void kill_group(pid_t pid) {
  ::kill(-pid, SIGKILL);  // fails harmlessly when pid leads no group
  ::kill(pid, SIGKILL);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  untrack_child(pid);
}

bool process_running(pid_t pid) {
  int status = 0;
  pid_t r = waitpid(pid, &status, WNOHANG);
  if (r == pid) untrack_child(pid);
  return r == 0;
}

std::string signal_name(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  return abbrev ? std::string("SIG") + abbrev : "signal " + std::to_string(sig);
}

std::string describe_wait_status(int status) {
  if (WIFEXITED(status)) return "exit status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    const char* what = sigdescr_np(sig);
    return "signal " + signal_name(sig) + (what ? std::string(" (") + what + ")" : "");
  }
  return "status " + std::to_string(status);
}

}  // namespace tessera
