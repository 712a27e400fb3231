/// Making OpenBLAS run its best kernels in a benchmark process (and only there).
#pragma once

#include <cstdint>
#include <string>

namespace tessera::bench {

/// The machines set OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE, which pin OpenBLAS to AVX2 kernels;
/// OpenBLAS reads them when it loads, so this re-executes the process without them. OpenBLAS
/// 0.3.21 also fails to recognise some AVX-512 CPUs and falls back to its SSE3 "Prescott" kernels,
/// about 5x slower here; on such a CPU this re-executes once more naming the SkylakeX kernels.
/// Under TESSERA_ISA=avx2 (runtime/isa.h) it names the Haswell kernels and holds oneDNN to AVX2
/// (ONEDNN_MAX_CPU_ISA), so both libraries run what an AVX2 machine runs.
/// Call first thing in main().
void use_openblas_at_its_best(char** argv);

/// Median seconds of one row-major C = A x B (M x K times K x N, float32) by cblas_sgemm, on
/// seeded random inputs, with OpenBLAS set to `threads` threads.
double time_openblas_sgemm(int64_t m, int64_t n, int64_t k, int threads, int repeat);

/// Median seconds of one row-major sgemm with B transposed or not, repeated over `batch`
/// independent products (batch_matmul), with OpenBLAS set to `threads` threads.
double time_openblas_sgemm_batched(int64_t batch, int64_t m, int64_t n, int64_t k, bool transpose_b,
                                   int threads, int repeat);

/// openblas_get_corename(), and what OpenBLAS had detected by itself when it was overridden.
std::string openblas_core_description();

}  // namespace tessera::bench
