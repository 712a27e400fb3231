#include "runtime/module.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <omp.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "runtime/cleanup.h"
#include "runtime/isa.h"
#include "runtime/parallel_jobs.h"
#include "runtime/process.h"
#include "runtime/shared_library.h"
#include "runtime/text_file.h"
#include "te/error.h"

extern char** environ;

namespace tessera {

std::string default_c_compiler() {
#ifdef TESSERA_C_COMPILER
  return TESSERA_C_COMPILER;
#else
  return "cc";
#endif
}

std::vector<std::string> default_compile_flags() {
  std::vector<std::string> flags{"-O3", "-march=native", "-fopenmp", "-ffp-contract=fast"};
  const Isa& isa = target_isa();
  flags.insert(flags.end(), isa.compile_flags.begin(), isa.compile_flags.end());
  flags.insert(flags.end(), {"-fPIC", "-shared", "-std=gnu11"});
  return flags;
}

double compiler_cpu_limit(double timeout_s) {
  return timeout_s > 0 ? 2 * timeout_s : 0;
}

std::vector<std::string> compiler_environment(const std::string& scratch_dir) {
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e)
    if (std::strncmp(*e, "TMPDIR=", 7) != 0) env.emplace_back(*e);
  env.push_back("TMPDIR=" + scratch_dir);
  return env;
}

namespace {

// A private directory (mkdtemp makes it mode 0700), removed with its contents on destruction.
class TempDir {
 public:
  TempDir() : path_(make_tracked_temp_dir("tessera-")) {}
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
    untrack_temp_dir(path_);
  }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// Runs argv (argv[0] looked up in PATH) with stdout and stderr going to log_path. No shell is
// involved, so paths and flags need no quoting. Throws unless the process exits with status 0.
void run_compiler(const std::vector<std::string>& argv, const std::string& log_path,
                  const CompileOptions& opts) {
  SpawnSpec spec;
  spec.argv = argv;
  spec.output_path = log_path;
  // Its temporary files go to the folder of its log, which tessera removes.
  spec.env = compiler_environment(std::filesystem::path(log_path).parent_path().string());
  // The limits of the tuner's builders, for every other compile (run, measure, graph kernels, a
  // model library): a strategy that unrolls 128^3 statements grew the compiler to 7 GB with no
  // end.
  spec.memory_limit_bytes = opts.memory_limit_bytes;
  spec.cpu_limit_s = compiler_cpu_limit(opts.timeout_s);
  pid_t pid = 0;
  try {
    pid = spawn_process(spec);
  } catch (const Error& e) {
    throw_error("cannot run the C compiler: {}", e.what());
  }
  std::optional<int> waited = wait_process(pid, opts.timeout_s);
  if (!waited) {
    kill_group(pid);  // its own process group: the cc1 and ld the driver runs, not only it
    throw CompilerLimitError(
        fmt::format("the C compiler ran past {:g} s and was killed (a kernel too large to "
                    "compile: too much unrolling?)",
                    opts.timeout_s));
  }
  const int status = *waited;
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return;
  const std::string log = read_text_file(log_path);
  if (log.find("out of memory") != std::string::npos ||
      log.find("virtual memory exhausted") != std::string::npos)
    throw CompilerLimitError(fmt::format(
        "the C compiler ran out of its {:g} GiB of memory (a kernel too large to compile: too much "
        "unrolling?)",
        static_cast<double>(opts.memory_limit_bytes) / (1 << 30)));
  throw_error("C compiler '{}' failed ({}):\n{}", argv[0], describe_wait_status(status),
              first_lines(log, 20));
}

std::vector<std::string> compiler_command(const CompileOptions& opts, bool keep_shared) {
  std::vector<std::string> argv{opts.compiler};
  for (const std::string& f : opts.flags) {
    if (keep_shared || f != "-shared") argv.push_back(f);
  }
  return argv;
}

}  // namespace

Module::Module(Module&& other) noexcept : handle_(other.handle_), entry_(other.entry_) {
  other.handle_ = nullptr;
  other.entry_ = nullptr;
}

Module& Module::operator=(Module&& other) noexcept {
  if (this != &other) {
    if (handle_) dlclose(handle_);
    handle_ = other.handle_;
    entry_ = other.entry_;
    other.handle_ = nullptr;
    other.entry_ = nullptr;
  }
  return *this;
}

Module::~Module() {
  if (handle_) dlclose(handle_);
}

Module Module::compile(const std::string& c_code, const CompileOptions& opts) {
  TempDir dir;
  const std::string source = dir.file("kernel.c");
  const std::string object = dir.file("kernel.so");
  write_text_file(source, c_code);
  std::vector<std::string> argv = compiler_command(opts, /*keep_shared=*/true);
  argv.insert(argv.end(), {"-o", object, source});
  run_compiler(argv, dir.file("compiler.log"), opts);
  // The mapping stays valid after the directory is removed.
  void* handle = dlopen(object.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) throw_error("cannot load the compiled kernel: {}", dlerror());
  void* sym = dlsym(handle, opts.entry.c_str());
  if (!sym) {
    dlclose(handle);
    throw_error("the compiled kernel has no entry point '{}'", opts.entry);
  }
  return Module(handle, reinterpret_cast<EntryFn>(sym));
}

void Module::run(const std::vector<void*>& args) const {
  if (!entry_) throw_error("Module::run on a module that holds no kernel");
  entry_(args.data());
}

void Module::run(const std::vector<NDArray*>& arrays) const {
  std::vector<void*> args;
  for (NDArray* a : arrays) {
    if (!a || !a->data()) throw_error("Module::run: argument {} has no data", args.size());
    args.push_back(a->data());
  }
  run(args);
}

void Module::run(std::initializer_list<NDArray*> arrays) const {
  run(std::vector<NDArray*>(arrays));
}

std::string compile_to_assembly(const std::string& c_code, const CompileOptions& opts) {
  TempDir dir;
  const std::string source = dir.file("kernel.c");
  const std::string assembly = dir.file("kernel.s");
  write_text_file(source, c_code);
  std::vector<std::string> argv = compiler_command(opts, /*keep_shared=*/false);
  argv.insert(argv.end(), {"-S", "-o", assembly, source});
  run_compiler(argv, dir.file("compiler.log"), opts);
  return read_text_file(assembly);
}

struct SharedLibraryBuilder::Impl {
  TempDir dir;
  std::vector<std::string> sources;  // file names inside dir
};

SharedLibraryBuilder::SharedLibraryBuilder() : impl_(std::make_unique<Impl>()) {}
SharedLibraryBuilder::~SharedLibraryBuilder() = default;

std::string SharedLibraryBuilder::path(const std::string& name) const {
  return impl_->dir.file(name);
}

void SharedLibraryBuilder::add_source(const std::string& name, std::string text) {
  if (!name.ends_with(".c") && !name.ends_with(".S"))
    throw_error("SharedLibraryBuilder: source '{}' is neither .c nor .S", name);
  write_text_file(path(name), text);
  impl_->sources.push_back(name);
}

void SharedLibraryBuilder::add_data(const std::string& name, const void* data, size_t bytes) {
  std::ofstream out(path(name), std::ios::binary);
  out.write(static_cast<const char*>(data), static_cast<std::streamsize>(bytes));
  if (!out) throw_error("cannot write {}: {}", path(name), std::strerror(errno));
}

void SharedLibraryBuilder::link(const std::string& output, const CompileOptions& opts, int jobs,
                                const std::function<void(const std::string&)>& finish) const {
  const std::vector<std::string>& sources = impl_->sources;
  std::vector<std::string> errors(sources.size());
  run_parallel_jobs(sources.size(), jobs, [&](size_t i) {
    std::vector<std::string> argv = compiler_command(opts, /*keep_shared=*/false);
    if (sources[i].ends_with(".c")) argv.push_back("-fvisibility=hidden");
    argv.insert(argv.end(), {"-c", "-o", path(sources[i] + ".o"), path(sources[i])});
    try {
      run_compiler(argv, path(sources[i] + ".log"), opts);
    } catch (const Error& e) {
      errors[i] = fmt::format("{}: {}", sources[i], e.what());
    }
  });
  for (const std::string& e : errors)
    if (!e.empty()) throw_error("{}", e);

  // Linked next to the destination, then renamed over it: a process that has the old library
  // loaded keeps its mapping, and a failed link leaves the old file in place.
  std::string partial = output + ".partial";
  // Where the linker cannot write, it says so in lines of its own: say it in one.
  int probe = ::open(partial.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (probe < 0) throw_error("cannot write {}: {}", output, std::strerror(errno));
  ::close(probe);
  std::vector<std::string> argv = compiler_command(opts, /*keep_shared=*/true);
  argv.insert(argv.end(), {"-Wl,-z,noexecstack", "-o", partial});
  for (const std::string& s : sources) argv.push_back(path(s + ".o"));
  try {
    run_compiler(argv, path("link.log"), opts);
    if (finish) finish(partial);
  } catch (...) {
    std::error_code ignored;
    std::filesystem::remove(partial, ignored);
    throw;
  }
  std::error_code ec;
  std::filesystem::rename(partial, output, ec);
  if (ec) {
    std::error_code ignored;
    std::filesystem::remove(partial, ignored);
    throw_error("cannot write {}: {}", output, ec.message());
  }
}

void set_num_threads(int n) {
  omp_set_num_threads(n);
}
int num_threads() {
  return omp_get_max_threads();
}

}  // namespace tessera
