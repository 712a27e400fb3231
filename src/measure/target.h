/// The machine a measurement was taken on: a fingerprint of CPU, ISA, cores, compiler and flags.
/// Records from different targets are never compared.
#pragma once

#include <string>
#include <vector>

#include "runtime/module.h"

namespace tessera {

struct Target {
  std::string cpu_model;         // "model name" of /proc/cpuinfo
  std::vector<std::string> isa;  // vector/FMA extensions present, e.g. {"avx2", "avx512f", "fma"}
  int cores = 0;                 // logical CPUs
  std::string compiler;          // first line of `cc --version`
  std::string flags;             // the kernel compile flags, space-separated
  // "in-model" for records timed as the kernel runs in a model (MeasureParams::as_in_model),
  // "" for kernels timed alone: the two kinds of record are never compared.
  std::string timing;

  /// Stable hash of every field: the key the records DB files a target under.
  std::string key() const;
  /// "Intel(R) Xeon(R) ... | 16 cores | avx2 avx512f fma | gcc (Debian 12.2.0) 12.2.0 | -O3 ...".
  std::string summary() const;
  /// This target's records timed as in a model.
  Target in_model() const;
};

/// Fingerprints this machine for kernels compiled with `opts` (runs the compiler once per
/// compiler path; the result is cached).
Target detect_target(const CompileOptions& opts = {});

}  // namespace tessera
