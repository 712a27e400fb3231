#include "bench/openblas_env.h"

#include <cblas.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>

namespace tessera::bench {

namespace {
constexpr const char* kForcedMarker = "TESSERA_BENCH_OPENBLAS_DETECTED";

[[noreturn]] void reexec(char** argv) {
  execv("/proc/self/exe", argv);
  perror("re-exec of the benchmark failed");
  std::exit(1);
}
}  // namespace

void use_openblas_at_its_best(char** argv) {
  if (std::getenv(kForcedMarker)) return;
  if (std::getenv("OPENBLAS_CORETYPE") || std::getenv("OPENBLAS_L2_SIZE")) {
    unsetenv("OPENBLAS_CORETYPE");
    unsetenv("OPENBLAS_L2_SIZE");
    reexec(argv);
  }
  std::string core = openblas_get_corename();
  bool avx512_core = core.find("Skylake") != std::string::npos ||
                     core.find("Cooperlake") != std::string::npos ||
                     core.find("SapphireRapids") != std::string::npos;
  __builtin_cpu_init();
  if (avx512_core || !__builtin_cpu_supports("avx512f")) return;
  std::cerr << "OpenBLAS picked " << core
            << " kernels on an AVX-512 CPU; re-running with SkylakeX kernels" << std::endl;
  setenv("OPENBLAS_CORETYPE", "SkylakeX", 1);
  setenv(kForcedMarker, core.c_str(), 1);
  reexec(argv);
}

std::string openblas_core_description() {
  std::string core = openblas_get_corename();
  if (const char* detected = std::getenv(kForcedMarker))
    core += std::string(" (OpenBLAS itself detected ") + detected + ")";
  return core;
}

}  // namespace tessera::bench
