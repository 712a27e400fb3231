/// Child processes without fork(): posix_spawn with file actions and resource limits, waits with
/// a deadline, kills that reach the whole process group, and exit statuses in words. The C
/// compilers (runtime/module.h, the tuner's builders) and the measurement workers run through it.
#pragma once

#include <sys/types.h>

#include <cstdint>
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
  /// Address space (RLIMIT_AS) of the child, and of what it starts after the limit is set; 0:
  /// ours.
  int64_t memory_limit_bytes = 0;
  /// CPU seconds (RLIMIT_CPU) of the child and of each process it starts; 0: ours. The bound on a
  /// compiler whose tessera was killed with SIGKILL, which no kill of its group can reach then.
  double cpu_limit_s = 0;
};

/// Starts the process; throws tessera::Error when it cannot be started. Signal mask and the
/// dispositions of SIGPIPE, SIGINT, SIGTERM and SIGCHLD are reset to the defaults in the child.
/// The limits are set from outside right after the start (posix_spawn takes none): a compiler
/// driver is still parsing its arguments then, far from starting cc1; a child that starts
/// processes within microseconds of its own start could pass them on unlimited.
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
