/// Compiles generated C into a shared object, loads it and calls its entry point.
#pragma once

#include <initializer_list>
#include <string>
#include <vector>

#include "runtime/ndarray.h"
#include "te/error.h"

namespace tessera {

/// The C compiler CMake found when tessera was built ("cc" if unknown).
std::string default_c_compiler();

/// The flags a kernel is compiled with by default:
///   -O3                       full optimization, including the loop vectorizer for `omp simd`;
///   -march=native             use every ISA extension of this machine (AVX-512, FMA); kernels
///                             run where they are compiled;
///   -fopenmp                  honour `omp parallel for` / `omp simd`; links the same libgomp
///                             tessera uses, so set_num_threads() applies to kernels;
///   -ffp-contract=fast        fuse `c + a * b` into FMA instructions;
///   the ISA's flags          (runtime/isa.h) on AVX-512: -mprefer-vector-width=512, so the
///                             auto-vectorizer uses zmm registers (gcc defaults to 256); with
///                             TESSERA_ISA=avx2 on an AVX-512 CPU: -mno-avx512f;
///   -fPIC -shared             build a loadable shared object;
///   -std=gnu11                C11 plus the GNU vector extensions the codegen emits.
std::vector<std::string> default_compile_flags();

/// The environment a C compiler runs in: ours, with TMPDIR set to `scratch_dir` (a folder
/// tessera removes), so that a compiler killed at its limit or by a signal leaves no cc*.s in
/// $TMPDIR.
std::vector<std::string> compiler_environment(const std::string& scratch_dir);

/// The CPU seconds each process of a compile may use, for a compile of `timeout_s` wall seconds:
/// its time limit, again (a compiler's cc1 runs on one core). tessera kills a compile at its
/// time limit; this bounds one that outlives a tessera killed with SIGKILL.
double compiler_cpu_limit(double timeout_s);

/// The C compiler stopped at its time or memory limit: the kernel asked too much of it (a
/// strategy's unrolling), not a tessera bug.
class CompilerLimitError : public Error {
 public:
  using Error::Error;
};

struct CompileOptions {
  std::string compiler = default_c_compiler();
  std::vector<std::string> flags = default_compile_flags();
  /// The symbol Module::compile looks up (CodegenOptions::entry of the generated code).
  std::string entry = "tsr_main";
  /// Limits of each compiler process: past them it is killed (CompilerLimitError). A strategy
  /// that unrolls 128^3 statements grew the compiler to 7 GB with no end.
  double timeout_s = 120;
  int64_t memory_limit_bytes = int64_t{8} << 30;
};

/// A loaded kernel: owns the dlopen handle (closed on destruction). Movable, not copyable.
class Module {
 public:
  using EntryFn = void (*)(void* const* args);

  Module() = default;
  Module(Module&& other) noexcept;
  Module& operator=(Module&& other) noexcept;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;
  ~Module();

  /// Compiles `c_code` in a fresh private temporary directory (under $TMPDIR or /tmp) without a
  /// shell, loads the result and finds the entry point; the temporary files are removed. Throws
  /// tessera::Error with the start of the compiler's output when compilation fails. Thread-safe.
  static Module compile(const std::string& c_code, const CompileOptions& opts = {});

  bool loaded() const { return entry_ != nullptr; }
  /// Calls the entry point with args[i] = data pointer of kernel argument i.
  void run(const std::vector<void*>& args) const;
  void run(const std::vector<NDArray*>& arrays) const;
  void run(std::initializer_list<NDArray*> arrays) const;

 private:
  Module(void* handle, EntryFn entry) : handle_(handle), entry_(entry) {}
  void* handle_ = nullptr;
  EntryFn entry_ = nullptr;
};

/// The assembly gcc generates for `c_code` with opts.flags (minus -shared), for inspecting
/// the machine code of a kernel (are there FMAs on zmm registers?).
std::string compile_to_assembly(const std::string& c_code, const CompileOptions& opts = {});

/// The number of OpenMP threads parallel loops use, in tessera and in every loaded kernel.
void set_num_threads(int n);
int num_threads();

}  // namespace tessera
