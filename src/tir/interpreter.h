/// The reference interpreter: runs a loop program directly, for checking rewrites and kernels.
#pragma once

#include <cstdint>
#include <vector>

#include "tir/program.h"

namespace tessera {

/// Runs `p` on `args` (one row-major array per buffer of p.args(), elements held as doubles and
/// rounded to the buffer's type on every store). Intermediate buffers start as NaN so that a read
/// before a write shows up in the result; an out-of-bounds access throws tessera::Error.
void interpret(const Program& p, std::vector<std::vector<double>>& args);

/// Arguments for interpret(): inputs random in [-1, 1] (integers in [-5, 5]), rounded to float32
/// where the buffer is; outputs NaN, so that an output the program never writes shows.
std::vector<std::vector<double>> random_args(const Program& p, uint64_t seed);

}  // namespace tessera
