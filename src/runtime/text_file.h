/// Small file helpers shared by the compiler driver and the measurement layer.
#pragma once

#include <string>

namespace tessera {

/// Writes `text` to `path`; throws tessera::Error when it cannot.
void write_text_file(const std::string& path, const std::string& text);
/// The whole file; empty when it cannot be read (a missing log is not an error).
std::string read_text_file(const std::string& path);
/// Throws tessera::Error unless `path` names a regular file (after symlinks): `what` and the path
/// and what it is instead. Opening a FIFO blocks forever and a device such as /dev/zero reads
/// without end, so every input file is checked before it is opened.
void require_regular_file(const std::string& path, const std::string& what);
/// The first `n` lines of `text`, with "[...]" when more followed.
std::string first_lines(const std::string& text, int n);

}  // namespace tessera
