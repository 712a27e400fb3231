/// Builds one shared object out of several generated sources: C translation units compiled in
/// parallel, assembly that embeds data files (`.incbin`), linked together with `-shared`.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "runtime/module.h"

namespace tessera {

class SharedLibraryBuilder {
 public:
  /// Creates a private temporary directory (removed on destruction) for the build's files.
  SharedLibraryBuilder();
  ~SharedLibraryBuilder();
  SharedLibraryBuilder(const SharedLibraryBuilder&) = delete;
  SharedLibraryBuilder& operator=(const SharedLibraryBuilder&) = delete;

  /// Where a file named `name` of this build lives (for `.incbin "..."` in an assembly source).
  std::string path(const std::string& name) const;
  /// A source compiled into the library: `name` ends in `.c` (C, opts.flags) or `.S` (assembly
  /// through the C preprocessor). C sources get -fvisibility=hidden: only symbols marked
  /// `__attribute__((visibility("default")))` are exported.
  void add_source(const std::string& name, std::string text);
  /// A file written as is and not compiled, for an assembly source to embed.
  void add_data(const std::string& name, const void* data, size_t bytes);

  /// Compiles every source (`jobs` compilers at once; 0: one per core) and links them into
  /// `output`, which is replaced atomically (a failed build leaves an existing file alone).
  /// Throws tessera::Error with the compiler's output when a step fails.
  /// `finish`, when given, runs on the linked file before it replaces `output` (to append to it).
  void link(const std::string& output, const CompileOptions& opts = {}, int jobs = 0,
            const std::function<void(const std::string& linked)>& finish = {}) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tessera
