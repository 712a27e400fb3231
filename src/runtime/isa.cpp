#include "runtime/isa.h"

#include <cstdlib>
#include <fstream>

#include "te/error.h"

namespace tessera {

namespace {

bool has_flag(const std::string& flags, const char* flag) {
  return (" " + flags + " ").find(std::string(" ") + flag + " ") != std::string::npos;
}

std::string cpuinfo_flags() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("flags", 0) != 0) continue;
    size_t colon = line.find(':');
    return colon == std::string::npos ? "" : line.substr(colon + 1);
  }
  return "";
}

const char* kind_name(IsaKind k) {
  switch (k) {
    case IsaKind::kAvx512:
      return "avx512";
    case IsaKind::kAvx2:
      return "avx2";
    case IsaKind::kSse:
      break;
  }
  return "sse";
}

}  // namespace

IsaKind detect_isa_kind(const std::string& cpu_flags) {
  if (has_flag(cpu_flags, "avx512f")) return IsaKind::kAvx512;
  if (has_flag(cpu_flags, "avx2") && has_flag(cpu_flags, "fma")) return IsaKind::kAvx2;
  return IsaKind::kSse;
}

Isa make_isa(IsaKind host, const std::string& requested) {
  IsaKind kind = host;
  if (!requested.empty() && requested != "native") {
    if (requested == "avx512") {
      kind = IsaKind::kAvx512;
    } else if (requested == "avx2") {
      kind = IsaKind::kAvx2;
    } else if (requested == "sse") {
      kind = IsaKind::kSse;
    } else {
      throw_error("TESSERA_ISA={} is not an ISA (avx512, avx2, sse or native)", requested);
    }
    if (kind > host) {
      throw_error("TESSERA_ISA={} asks for more than this CPU has ({})", requested,
                  kind_name(host));
    }
  }
  Isa isa;
  isa.kind = kind;
  isa.name = kind_name(kind);
  isa.overridden = kind != host;
  switch (kind) {
    case IsaKind::kAvx512:
      isa.f32_lanes = 16;
      isa.vector_registers = 32;
      // gcc keeps to 256-bit vectors unless told otherwise, even with AVX-512 present.
      isa.compile_flags = {"-mprefer-vector-width=512"};
      break;
    case IsaKind::kAvx2:
      isa.f32_lanes = 8;
      isa.vector_registers = 16;
      // -mno-avx512f turns off every AVX-512 subset, so -march=native on an AVX-512 CPU
      // compiles exactly what an AVX2 CPU runs.
      if (isa.overridden) isa.compile_flags = {"-mno-avx512f"};
      break;
    case IsaKind::kSse:
      isa.f32_lanes = 4;
      isa.vector_registers = 16;
      if (isa.overridden) isa.compile_flags = {"-mno-avx"};
      break;
  }
  return isa;
}

IsaKind host_isa_kind() {
  static const IsaKind kind = detect_isa_kind(cpuinfo_flags());
  return kind;
}

const Isa& target_isa() {
  static const Isa isa = [] {
    const char* requested = std::getenv("TESSERA_ISA");
    return make_isa(host_isa_kind(), requested ? requested : "");
  }();
  return isa;
}

}  // namespace tessera
