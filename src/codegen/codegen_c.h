/// C code generation: a loop program becomes one C11 file with OpenMP pragmas and GCC vector types.
#pragma once

#include <string>

#include "tir/program.h"

namespace tessera {

struct CodegenOptions {
  /// Name of the generated entry point `void entry(void* const* args)`.
  std::string entry = "tsr_main";
};

/// Generates a C11 (gnu11) translation unit for `p`.
///
/// The entry point takes `args[i]` = the data pointer of `p.args()[i]` (inputs, then outputs),
/// each a dense row-major array of the buffer's dtype; the arrays must not overlap.
/// Loop kinds map to: serial -> `for`; parallel -> `#pragma omp parallel for` (serial when
/// nested in another parallel loop); unrolled -> `#pragma GCC unroll <extent>`; vectorized ->
/// GCC vector extensions when the body is straight-line stores of arithmetic (see
/// codegen_c_vector.cpp), else a `#pragma omp simd` loop. Throws tessera::Error for programs
/// that are not lowered (te nodes) or use variables outside their loop.
std::string codegen_c(const Program& p, const CodegenOptions& opts = {});

}  // namespace tessera
