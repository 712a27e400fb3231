#include "measure/target.h"

#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

#include "measure/hash.h"
#include "runtime/isa.h"
#include "runtime/process.h"

namespace tessera {

namespace {

// The extensions that change what code runs fastest; the rest of /proc/cpuinfo's flags would
// make the fingerprint differ between machines that run kernels identically.
constexpr const char* kIsaFlags[] = {
    "sse4_2",   "avx",      "avx2",     "fma",         "avx512f",     "avx512dq",
    "avx512bw", "avx512vl", "avx512cd", "avx512_vnni", "avx512_bf16", "avx512_fp16",
    "amx_tile", "amx_bf16", "amx_int8", "asimd",       "sve",         "sve2"};

std::string compiler_version(const std::string& compiler) {
  static std::mutex mu;
  static std::map<std::string, std::string> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(compiler);
  if (it != cache.end()) return it->second;
  std::string version = compiler + " (version unknown)";
  char path[] = "/tmp/tessera-cc-version-XXXXXX";
  int fd = mkstemp(path);
  if (fd >= 0) {
    ::close(fd);
    try {
      SpawnSpec spec;
      spec.argv = {compiler, "--version"};
      spec.output_path = path;
      std::optional<int> status = wait_process(spawn_process(spec), 0);
      std::string out = read_text_file(path);
      if (status && WIFEXITED(*status) && WEXITSTATUS(*status) == 0 && !out.empty()) {
        version = out.substr(0, out.find('\n'));
      }
    } catch (const std::exception&) {
    }
    std::filesystem::remove(path);
  }
  cache[compiler] = version;
  return version;
}

}  // namespace

std::string Target::key() const {
  const std::string isa_list = fmt::format("{}", fmt::join(isa, " "));
  const std::string cores_text = std::to_string(cores);
  // Records of kernels timed alone keep the keys they had before in-model timing existed.
  if (timing.empty()) return stable_hash({cpu_model, isa_list, cores_text, compiler, flags});
  return stable_hash({cpu_model, isa_list, cores_text, compiler, flags, "timing " + timing});
}

Target Target::in_model() const {
  Target t = *this;
  t.timing = "in-model";
  return t;
}

std::string Target::summary() const {
  return fmt::format("{} | {} cores | {} | {} | {}{}", cpu_model, cores, fmt::join(isa, " "),
                     compiler, flags, timing.empty() ? "" : " | timed " + timing);
}

Target detect_target(const CompileOptions& opts) {
  Target t;
  std::ifstream in("/proc/cpuinfo");
  std::string line, flags;
  while (std::getline(in, line)) {
    auto value = [&] {
      size_t colon = line.find(':');
      std::string v = colon == std::string::npos ? "" : line.substr(colon + 1);
      v.erase(0, v.find_first_not_of(" \t"));
      return v;
    };
    if (t.cpu_model.empty() && (line.rfind("model name", 0) == 0 || line.rfind("Model", 0) == 0)) {
      t.cpu_model = value();
    }
    if (flags.empty() && (line.rfind("flags", 0) == 0 || line.rfind("Features", 0) == 0)) {
      flags = " " + value() + " ";
    }
  }
  if (t.cpu_model.empty()) t.cpu_model = "unknown CPU";
  // Under TESSERA_ISA the kernels use only part of the CPU: the fingerprint lists that part.
  const IsaKind kind = target_isa().kind;
  for (const char* f : kIsaFlags) {
    if (flags.find(std::string(" ") + f + " ") == std::string::npos) continue;
    const std::string name = f;
    bool avx512_part = name.rfind("avx512", 0) == 0 || name.rfind("amx", 0) == 0;
    bool avx_part = name == "avx" || name == "avx2" || name == "fma";
    if (avx512_part && kind < IsaKind::kAvx512) continue;
    if (avx_part && kind < IsaKind::kAvx2) continue;
    t.isa.push_back(f);
  }
  t.cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  t.compiler = compiler_version(opts.compiler);
  t.flags = fmt::format("{}", fmt::join(opts.flags, " "));
  return t;
}

}  // namespace tessera
