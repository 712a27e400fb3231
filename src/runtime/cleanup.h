/// What a SIGINT or SIGTERM must not leave behind: the C compilers and measurement workers this
/// process started (terminated with their process groups) and its private temporary folders (their
/// files removed, then the folder). Without it a killed `tessera tune` left compilers running
/// and tessera-* folders in /tmp. The records are fixed, lock-free slots the handler can read.
#pragma once

#include <sys/types.h>

#include <string>

namespace tessera {

void track_child(pid_t pid);
/// Once the child is reaped: its pid may be reused by an unrelated process.
void untrack_child(pid_t pid);
void track_temp_dir(const std::string& path);
/// A new private (0700) folder `$TMPDIR/<prefix>XXXXXX`, tracked before it exists: a signal
/// between mkdtemp and tracking left it behind. Throws tessera::Error when it cannot be made.
std::string make_tracked_temp_dir(const std::string& prefix);
void untrack_temp_dir(const std::string& path);

/// Installs the handler of SIGINT and SIGTERM (the CLI's main does, once): it kills the tracked
/// children, removes the tracked folders, then dies of the signal as it would have.
void clean_up_on_termination_signals();

}  // namespace tessera
