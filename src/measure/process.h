/// Child processes without fork(): posix_spawn with file actions, waits with a deadline, kills
/// that reach the whole process group, and exit statuses in words.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "runtime/text_file.h"

namespace tessera {

struct SpawnSpec {
  std::vector<std::string> argv;  // argv[0] is looked up in PATH when it has no '/'
  /// The child's environment; empty: inherit ours.
  std::vector<std::string> env;
  /// (child fd, parent fd): the parent fd is dup2'ed onto the child fd. Fds 0-2 not named here
  /// are /dev/null for stdin and inherited for stdout and stderr.
  std::vector<std::pair<int, int>> fds;
  /// Where stdout and stderr go (created, truncated); empty: inherited (or as `fds` says).
  std::string output_path;
  /// The child leads a new process group, so kill_group() also reaches its children.
  bool new_process_group = true;
};

/// Starts the process; throws tessera::Error when it cannot be started. Signal mask and the
/// dispositions of SIGPIPE, SIGINT, SIGTERM and SIGCHLD are reset to the defaults in the child.
pid_t spawn_process(const SpawnSpec& spec);

/// Waits for `pid` to exit for at most timeout_s seconds (<= 0: no limit). Returns the wait
/// status, or nothing if the process still runs at the deadline.
std::optional<int> wait_process(pid_t pid, double timeout_s);

/// SIGKILL to the process group of `pid` (and to pid itself), then reaps pid.
void kill_group(pid_t pid);

/// True while the child `pid` runs; reaps it when it has exited.
bool process_running(pid_t pid);

/// "exit status 1", "signal SIGSEGV (Segmentation fault)".
std::string describe_wait_status(int status);
/// "SIGSEGV"; "signal 42" for one without a name.
std::string signal_name(int sig);

}  // namespace tessera
