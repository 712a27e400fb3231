#include "runtime/cleanup.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <random>

#include "te/error.h"

namespace tessera {

namespace {

constexpr int kChildSlots = 256, kDirSlots = 64, kPathBytes = 512;

std::atomic<pid_t> children[kChildSlots];
// A folder slot is free (0), being written (1) or holds a path (2).
std::atomic<int> dir_state[kDirSlots];
char dirs[kDirSlots][kPathBytes];

// Empties and removes a folder with only async-signal-safe calls, at most `depth` levels deep.
void remove_tree(int parent, const char* name, int depth) {
  int fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return;
  char buffer[4096];
  for (;;) {
    long n = syscall(SYS_getdents64, fd, buffer, sizeof buffer);
    if (n <= 0) break;
    for (long at = 0; at < n;) {
      struct Entry {
        ino64_t ino;
        off64_t off;
        unsigned short reclen;
        unsigned char type;
        char name[1];
      };
      const auto* e = reinterpret_cast<const Entry*>(buffer + at);
      at += e->reclen;
      if (std::strcmp(e->name, ".") == 0 || std::strcmp(e->name, "..") == 0) continue;
      if (unlinkat(fd, e->name, 0) != 0 && depth > 0) remove_tree(fd, e->name, depth - 1);
    }
  }
  close(fd);
  unlinkat(parent, name, AT_REMOVEDIR);
}

void on_termination(int sig) {
  // Other threads run on while this one cleans: a compiler they start or a file they write
  // after a pass is caught by the next.
  for (int pass = 0; pass < 3; ++pass) {
    for (std::atomic<pid_t>& c : children) {
      pid_t pid = c.load();
      if (pid <= 0) continue;
      // SIGTERM, not SIGKILL: the compiler driver then removes its own temporary files.
      kill(-pid, SIGTERM);  // a worker leads its own group; fails harmlessly otherwise
      kill(pid, SIGTERM);
    }
    for (int i = 0; i < kDirSlots; ++i)
      if (dir_state[i].load() == 2) remove_tree(AT_FDCWD, dirs[i], 4);
  }
  signal(sig, SIG_DFL);
  raise(sig);
}

}  // namespace

void track_child(pid_t pid) {
  for (std::atomic<pid_t>& c : children) {
    pid_t free = 0;
    if (c.compare_exchange_strong(free, pid)) return;
  }
}

void untrack_child(pid_t pid) {
  for (std::atomic<pid_t>& c : children) {
    pid_t was = pid;
    if (c.compare_exchange_strong(was, 0)) return;
  }
}

void track_temp_dir(const std::string& path) {
  if (path.size() >= kPathBytes) return;
  for (int i = 0; i < kDirSlots; ++i) {
    int free = 0;
    if (!dir_state[i].compare_exchange_strong(free, 1)) continue;
    std::memcpy(dirs[i], path.c_str(), path.size() + 1);
    dir_state[i].store(2);
    return;
  }
}

void untrack_temp_dir(const std::string& path) {
  for (int i = 0; i < kDirSlots; ++i) {
    if (dir_state[i].load() != 2 || path != dirs[i]) continue;
    int ready = 2;
    if (dir_state[i].compare_exchange_strong(ready, 1)) {
      dirs[i][0] = '\0';
      dir_state[i].store(0);
      return;
    }
  }
}

std::string make_tracked_temp_dir(const std::string& prefix) {
  const char* tmp = std::getenv("TMPDIR");
  const std::string base = std::string(tmp && *tmp ? tmp : "/tmp") + "/" + prefix;
  static const char kLetters[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  thread_local std::mt19937_64 rng(std::random_device{}() ^ static_cast<uint64_t>(getpid()));
  for (int attempt = 0; attempt < 100; ++attempt) {
    std::string path = base;
    for (int i = 0; i < 6; ++i) path += kLetters[rng() % (sizeof kLetters - 1)];
    track_temp_dir(path);
    if (mkdir(path.c_str(), 0700) == 0) return path;
    const int err = errno;
    untrack_temp_dir(path);
    if (err != EEXIST)
      throw_error("cannot create a temporary directory {}: {}", path, std::strerror(err));
  }
  throw_error("cannot create a temporary directory {}XXXXXX: every name taken", base);
}

void clean_up_on_termination_signals() {
  struct sigaction sa {};
  sa.sa_handler = on_termination;
  sigemptyset(&sa.sa_mask);
  sigaddset(&sa.sa_mask, SIGINT);
  sigaddset(&sa.sa_mask, SIGTERM);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

}  // namespace tessera
