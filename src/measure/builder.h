/// Builds candidate kernels: C source to shared object, many at once, each with a time limit,
/// identical code built once.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "measure/error_kind.h"
#include "runtime/module.h"

namespace tessera {

struct BuildParams {
  /// Compiles at once; 0: one per core.
  int jobs = 0;
  /// Per candidate; the compiler's whole process group is killed past it.
  double timeout_s = 30;
  /// Compiler and flags (the defaults of runtime/module.h, which `tessera run` also uses).
  CompileOptions compile;
  /// Where shared objects are kept, named by the hash of code, compiler and flags, and found
  /// again by later builders (and processes) using the same directory. Empty: a private
  /// temporary directory removed with the Builder.
  std::string cache_dir;
};

struct BuildResult {
  ErrorKind error = ErrorKind::kOk;  // kOk, kCompileError or kCompileTimeout
  std::string message;               // the first lines of the compiler's output on error
  std::string library;               // path of the shared object when ok
  std::string key;                   // hash of code, compiler and flags
  double seconds = 0;                // wall time of this build (0 when cached)
  bool cached = false;               // found in the cache instead of compiled
};

using ProgressFn = std::function<void(const char* stage, size_t done, size_t total)>;

class Builder {
 public:
  explicit Builder(BuildParams params = {});
  ~Builder();
  Builder(const Builder&) = delete;
  Builder& operator=(const Builder&) = delete;

  /// Builds every source (`params.jobs` at a time); results in input order. Never throws for a
  /// candidate's failure: that is its BuildResult. Shared objects live until the Builder ends
  /// (or in cache_dir). Thread-safe.
  std::vector<BuildResult> build(const std::vector<std::string>& sources,
                                 const ProgressFn& progress = nullptr);
  BuildResult build_one(const std::string& source);

  const BuildParams& params() const { return params_; }
  /// Compiler invocations so far (cache hits do not count).
  int compiles() const;

 private:
  BuildResult compile(const std::string& source, const std::string& key);

  BuildParams params_;
  std::string dir_;
  bool own_dir_ = false;
  mutable std::mutex mu_;
  std::map<std::string, BuildResult> cache_;  // by key; compile errors too, not timeouts
  int compiles_ = 0;
};

}  // namespace tessera
