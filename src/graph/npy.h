/// NumPy .npy files of float32 (read: also float64) in C order, for model inputs and outputs.
#pragma once

#include <string>
#include <string_view>

#include "graph/graph.h"

namespace tessera::graph {

/// Reads a .npy file; throws tessera::Error in one line for a missing file, a bad header, an
/// element type other than little-endian float32/float64, Fortran order, or truncated data.
HostTensor read_npy(const std::string& path);
/// The same from the bytes of a .npy file; the message does not name a file.
HostTensor parse_npy(std::string_view bytes);
/// Writes `t` as float32, format version 1.0.
void write_npy(const std::string& path, const HostTensor& t);

}  // namespace tessera::graph
