#include "measure/builder.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include "measure/hash.h"
#include "runtime/cleanup.h"
#include "runtime/process.h"
#include "te/error.h"

namespace tessera {

namespace fs = std::filesystem;

namespace {

std::string make_private_dir() {
  return make_tracked_temp_dir("tessera-build-");
}

int default_jobs() {
  const unsigned n = std::thread::hardware_concurrency();
  return n > 0 ? static_cast<int>(n) : 1;
}

}  // namespace

Builder::Builder(BuildParams params) : params_(std::move(params)) {
  if (params_.jobs <= 0) params_.jobs = default_jobs();
  if (params_.cache_dir.empty()) {
    dir_ = make_private_dir();
    own_dir_ = true;
  } else {
    std::error_code ec;
    fs::create_directories(params_.cache_dir, ec);
    if (ec) throw_error("cannot create the build cache {}: {}", params_.cache_dir, ec.message());
    dir_ = params_.cache_dir;
  }
}

Builder::~Builder() {
  if (own_dir_) {
    std::error_code ec;
    fs::remove_all(dir_, ec);
    untrack_temp_dir(dir_);
  }
}

int Builder::compiles() const {
  std::lock_guard<std::mutex> lock(mu_);
  return compiles_;
}

BuildResult Builder::compile(const std::string& source, const std::string& key) {
  BuildResult r;
  r.key = key;
  const std::string library = dir_ + "/" + key + ".so";
  if (fs::exists(library)) {  // built earlier by another Builder sharing cache_dir
    r.library = library;
    r.cached = true;
    return r;
  }
  // Unique scratch names per thread and process; the final rename is atomic, so concurrent
  // builders sharing a cache directory never see a half-written object.
  static std::atomic<uint64_t> counter{0};
  const std::string stem =
      fmt::format("{}/{}.{}.{}", dir_, key, static_cast<long>(getpid()), counter++);
  const std::string c_path = stem + ".c", tmp_so = stem + ".so", log = stem + ".log";
  {
    std::ofstream out(c_path, std::ios::binary);
    out << source;
    if (!out.good()) throw_error("cannot write {}", c_path);
  }
  SpawnSpec spec;
  spec.argv.push_back(params_.compile.compiler);
  for (const std::string& f : params_.compile.flags) spec.argv.push_back(f);
  spec.argv.insert(spec.argv.end(), {"-o", tmp_so, c_path});
  spec.output_path = log;
  spec.env = compiler_environment(dir_);
  // The memory limit of every other compile (runtime/module.h): a candidate that unrolls too much
  // grew the compiler to gigabytes for the whole time limit.
  spec.memory_limit_bytes = params_.compile.memory_limit_bytes;
  spec.cpu_limit_s = compiler_cpu_limit(params_.timeout_s);

  const auto start = std::chrono::steady_clock::now();
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++compiles_;
  }
  std::error_code ec;
  try {
    const pid_t pid = spawn_process(spec);
    std::optional<int> status = wait_process(pid, params_.timeout_s);
    if (!status) {
      kill_group(pid);
      r.error = ErrorKind::kCompileTimeout;
      r.message =
          fmt::format("the C compiler ran longer than {} s and was killed", params_.timeout_s);
    } else if (!(WIFEXITED(*status) && WEXITSTATUS(*status) == 0)) {
      r.error = ErrorKind::kCompileError;
      r.message = fmt::format("C compiler failed ({}):\n{}", describe_wait_status(*status),
                              first_lines(read_text_file(log), 20));
    } else {
      fs::rename(tmp_so, library, ec);
      if (ec) {
        r.error = ErrorKind::kUnknown;
        r.message = fmt::format("cannot move the built kernel to {}: {}", library, ec.message());
      } else {
        r.library = library;
      }
    }
  } catch (const Error& e) {  // the compiler could not be started
    r.error = ErrorKind::kCompileError;
    r.message = e.what();
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (const std::string& p : {c_path, tmp_so, log}) fs::remove(p, ec);
  return r;
}

std::vector<BuildResult> Builder::build(const std::vector<std::string>& sources,
                                        const ProgressFn& progress) {
  std::string flags_text;
  for (const std::string& f : params_.compile.flags) flags_text += f + '\n';
  std::vector<std::string> keys;
  for (const std::string& s : sources) {
    keys.push_back(stable_hash({s, params_.compile.compiler, flags_text}));
  }
  // Distinct keys not in the cache are compiled, each once, by the first candidate having it.
  std::vector<size_t> todo;
  std::map<std::string, size_t> slot_of_key;  // key -> index into todo / built
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (size_t i = 0; i < sources.size(); ++i) {
      if (!cache_.count(keys[i]) && !slot_of_key.count(keys[i])) {
        slot_of_key[keys[i]] = todo.size();
        todo.push_back(i);
      }
    }
  }
  std::vector<BuildResult> built(todo.size());
  std::atomic<size_t> next{0};
  size_t done = sources.size() - todo.size();
  std::mutex progress_mu;
  auto work = [&] {
    for (size_t t = next++; t < todo.size(); t = next++) {
      built[t] = compile(sources[todo[t]], keys[todo[t]]);
      std::lock_guard<std::mutex> lock(progress_mu);
      ++done;
      if (progress) progress("build", done, sources.size());
    }
  };
  const size_t threads = std::min<size_t>(static_cast<size_t>(params_.jobs), todo.size());
  std::vector<std::thread> pool;
  for (size_t t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (std::thread& th : pool) th.join();

  std::lock_guard<std::mutex> lock(mu_);
  for (const BuildResult& r : built) {
    // A timeout may be the machine's load rather than the code: it is tried again next time.
    if (r.error != ErrorKind::kCompileTimeout) cache_[r.key] = r;
  }
  std::vector<BuildResult> results;
  for (size_t i = 0; i < sources.size(); ++i) {
    auto s = slot_of_key.find(keys[i]);
    BuildResult r = s != slot_of_key.end() ? built[s->second] : cache_.at(keys[i]);
    if (s == slot_of_key.end() || todo[s->second] != i) {
      r.cached = true;
      r.seconds = 0;
    }
    results.push_back(std::move(r));
  }
  return results;
}

BuildResult Builder::build_one(const std::string& source) {
  return build({source}).front();
}

}  // namespace tessera
