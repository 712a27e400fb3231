/// Small file helpers shared by the compiler driver and the measurement layer.
#pragma once

#include <string>

namespace tessera {

/// Writes `text` to `path`; throws tessera::Error when it cannot.
void write_text_file(const std::string& path, const std::string& text);
/// The whole file; empty when it cannot be read (a missing log is not an error).
std::string read_text_file(const std::string& path);
/// The first `n` lines of `text`, with "[...]" when more followed.
std::string first_lines(const std::string& text, int n);

}  // namespace tessera
