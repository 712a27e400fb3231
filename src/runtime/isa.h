/// The vector ISA kernels are generated and compiled for: what the CPU has, or less when
/// TESSERA_ISA asks for it (so an AVX-512 machine can also check and tune the AVX2 path).
#pragma once

#include <string>
#include <vector>

namespace tessera {

enum class IsaKind { kSse, kAvx2, kAvx512 };

struct Isa {
  IsaKind kind = IsaKind::kSse;
  std::string name;           // "avx512", "avx2", "sse"
  int f32_lanes = 4;          // floats in one vector register
  int vector_registers = 16;  // architectural vector registers
  /// Added to the kernel compile flags: what -march=native alone would not say.
  std::vector<std::string> compile_flags;
  /// True when TESSERA_ISA chose a narrower ISA than the CPU has.
  bool overridden = false;
};

/// The best ISA of a CPU whose /proc/cpuinfo flags line is `cpu_flags` (space-separated).
IsaKind detect_isa_kind(const std::string& cpu_flags);

/// The ISA for `host` narrowed to `requested` ("avx512", "avx2", "sse", or "" / "native" for the
/// host's own). Throws tessera::Error when `requested` is unknown or wider than the host.
Isa make_isa(IsaKind host, const std::string& requested);

/// This machine's ISA (from /proc/cpuinfo) narrowed by $TESSERA_ISA; computed once.
const Isa& target_isa();

/// The CPU's own best ISA, whatever TESSERA_ISA says.
IsaKind host_isa_kind();

}  // namespace tessera
