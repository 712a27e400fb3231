// Tests of the runtime: compiling and loading C (no codegen involved), NDArray, compare, timing.

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <thread>

#include "runtime/module.h"
#include "runtime/ndarray.h"
#include "runtime/timer.h"
#include "te/error.h"

namespace tessera {
namespace {

const char* kAddKernel = R"(
#include <stdint.h>
void tsr_main(void* const* args) {
  const float* a = (const float*)args[0];
  const float* b = (const float*)args[1];
  float* c = (float*)args[2];
  for (int32_t i = 0; i < 8; ++i) c[i] = a[i] + b[i];
}
)";

TEST(RuntimeModule, CompilesLoadsAndRuns) {
  Module mod = Module::compile(kAddKernel);
  ASSERT_TRUE(mod.loaded());
  NDArray a = NDArray::empty({8}, DType::kFloat32), b = NDArray::empty({8}, DType::kFloat32);
  NDArray c = NDArray::empty({8}, DType::kFloat32);
  a.fill_random(1);
  b.fill_random(2);
  mod.run({&a, &b, &c});
  for (size_t i = 0; i < 8; ++i) EXPECT_EQ(c.get(i), float(float(a.get(i)) + float(b.get(i))));
  c.fill(0);
  mod.run(std::vector<void*>{a.data(), b.data(), c.data()});
  EXPECT_EQ(c.get(3), float(float(a.get(3)) + float(b.get(3))));
}

TEST(RuntimeModule, MoveTransfersTheKernel) {
  Module a = Module::compile(kAddKernel);
  Module b = std::move(a);
  EXPECT_FALSE(a.loaded());  // NOLINT: moved-from state is specified
  EXPECT_TRUE(b.loaded());
  Module c;
  c = std::move(b);
  EXPECT_TRUE(c.loaded());
  EXPECT_THROW(b.run(std::vector<void*>{}), Error);  // NOLINT
}

TEST(RuntimeModule, CompileErrorThrowsWithCompilerMessage) {
  try {
    Module::compile("void tsr_main(void* const* args) { int x = ; }\n");
    FAIL() << "broken C compiled";
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("failed (exit status"), std::string::npos) << msg;
    EXPECT_NE(msg.find("error:"), std::string::npos) << msg;
    EXPECT_NE(msg.find("kernel.c:1"), std::string::npos) << msg;
  }
}

TEST(RuntimeModule, MissingEntryPointThrows) {
  CompileOptions opts;
  opts.entry = "not_there";
  try {
    Module::compile(kAddKernel, opts);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'not_there'"), std::string::npos) << e.what();
  }
}

TEST(RuntimeModule, MissingCompilerThrows) {
  CompileOptions opts;
  opts.compiler = "/nonexistent/tessera-cc";
  EXPECT_THROW(Module::compile(kAddKernel, opts), Error);
}

// Stand-in compilers (shell scripts): one that never finishes, one that runs out of memory as
// cc1 does. Both end as CompilerLimitError, the input's fault, not a failed build.
std::string fake_compiler(const std::string& name, const std::string& body) {
  std::string path = ::testing::TempDir() + "/" + name;
  {
    std::ofstream out(path);
    out << "#!/bin/sh\n" << body << "\n";
  }
  std::filesystem::permissions(path, std::filesystem::perms::owner_all);
  return path;
}

TEST(RuntimeModule, CompilerPastItsTimeIsKilled) {
  CompileOptions opts;
  opts.compiler = fake_compiler("tessera-slow-cc", "exec sleep 60");
  opts.timeout_s = 0.5;
  try {
    Module::compile(kAddKernel, opts);
    FAIL() << "expected CompilerLimitError";
  } catch (const CompilerLimitError& e) {
    EXPECT_NE(std::string(e.what()).find("ran past 0.5 s"), std::string::npos) << e.what();
  }
}

// Every process of a compile runs under a CPU-time limit (twice its wall-time limit), so that
// one left behind (its tessera killed with SIGKILL, which leaves no one to kill the compiler's
// group) still ends: here a stand-in compiler leaves a busy loop running and exits. (The limits
// are set just after the start, as a real driver is still reading its arguments: the stand-in
// waits that long.)
TEST(RuntimeModule, ACompilersLeftoverProcessEndsAtItsCpuLimit) {
  const std::string pid_file = ::testing::TempDir() + "/tessera-leftover.pid";
  std::filesystem::remove(pid_file);
  CompileOptions opts;
  opts.compiler =
      fake_compiler("tessera-leaving-cc",
                    "sleep 0.1\nsh -c 'while :; do :; done' &\necho $! > " + pid_file + "\nexit 1");
  opts.timeout_s = 0.5;
  EXPECT_THROW(Module::compile(kAddKernel, opts), Error);
  int pid = 0;
  std::ifstream(pid_file) >> pid;
  ASSERT_GT(pid, 0);
  // Gone, or a zombie its new parent has not reaped yet.
  auto running = [pid] {
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string line;
    if (!std::getline(stat, line)) return false;
    size_t paren = line.rfind(')');
    return paren != std::string::npos && paren + 2 < line.size() && line[paren + 2] != 'Z';
  };
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (running() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(running()) << "the busy loop outlived 1 s of CPU time";
  if (running()) ::kill(pid, SIGKILL);
}

TEST(RuntimeModule, CompilerOutOfMemoryIsALimitNotABuildFailure) {
  CompileOptions opts;
  opts.compiler = fake_compiler("tessera-oom-cc",
                                "echo 'cc1: out of memory allocating 65536 bytes' >&2; exit 1");
  try {
    Module::compile(kAddKernel, opts);
    FAIL() << "expected CompilerLimitError";
  } catch (const CompilerLimitError& e) {
    EXPECT_NE(std::string(e.what()).find("ran out of its 8 GiB"), std::string::npos) << e.what();
  }
  opts.compiler = fake_compiler("tessera-failing-cc", "echo 'kernel.c:1: error: no' >&2; exit 1");
  try {
    Module::compile(kAddKernel, opts);
    FAIL() << "expected Error";
  } catch (const CompilerLimitError& e) {
    FAIL() << "an ordinary compile error is no limit: " << e.what();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("error: no"), std::string::npos) << e.what();
  }
}

TEST(RuntimeModule, LeavesNoTemporaryFiles) {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / "tessera-runtime-test-tmp";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const char* old = std::getenv("TMPDIR");
  std::string saved = old ? old : "";
  setenv("TMPDIR", dir.c_str(), 1);
  Module mod = Module::compile(kAddKernel);
  EXPECT_THROW(Module::compile("syntax error", {}), Error);
  std::string assembly = compile_to_assembly(kAddKernel);
  if (old) {
    setenv("TMPDIR", saved.c_str(), 1);
  } else {
    unsetenv("TMPDIR");
  }
  EXPECT_TRUE(fs::is_empty(dir));
  fs::remove_all(dir);
  EXPECT_NE(assembly.find("tsr_main"), std::string::npos);
}

TEST(RuntimeModule, KernelsShareTheThreadCount) {
  Module mod = Module::compile(R"(
#include <omp.h>
void tsr_main(void* const* args) {
  int* out = (int*)args[0];
  #pragma omp parallel
  {
    #pragma omp single
    out[0] = omp_get_num_threads();
  }
}
)");
  const int before = num_threads();
  NDArray out = NDArray::empty({1}, DType::kInt32);
  set_num_threads(2);
  mod.run({&out});
  EXPECT_EQ(out.get(0), 2);
  set_num_threads(1);
  mod.run({&out});
  EXPECT_EQ(out.get(0), 1);
  set_num_threads(before);
}

TEST(NDArray, EmptyIsAlignedZeroedAndSized) {
  NDArray a = NDArray::empty({3, 5}, DType::kFloat64);
  EXPECT_EQ(a.num_elements(), 15u);
  EXPECT_EQ(a.bytes(), 120u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a.data()) % 64, 0u);
  EXPECT_EQ(a.shape(), (std::vector<int64_t>{3, 5}));
  for (double v : a.to_doubles()) EXPECT_EQ(v, 0.0);
  EXPECT_THROW(NDArray::empty({2, 0}, DType::kFloat32), Error);
}

TEST(NDArray, FillRandomIsDeterministicAndInRange) {
  NDArray a = NDArray::empty({1000}, DType::kFloat32), b = NDArray::empty({1000}, DType::kFloat32);
  a.fill_random(42, -2, 3);
  b.fill_random(42, -2, 3);
  EXPECT_EQ(a.to_doubles(), b.to_doubles());
  double lo = 1e9, hi = -1e9;
  for (double v : a.to_doubles()) lo = std::min(lo, v), hi = std::max(hi, v);
  EXPECT_GE(lo, -2);
  EXPECT_LT(hi, 3);
  EXPECT_LT(lo, -1.9);
  EXPECT_GT(hi, 2.9);
  b.fill_random(43, -2, 3);
  EXPECT_NE(a.to_doubles(), b.to_doubles());

  NDArray ints = NDArray::empty({1000}, DType::kInt32);
  ints.fill_random(7, -3, 3);
  std::vector<int> seen(7, 0);
  for (double v : ints.to_doubles()) {
    ASSERT_EQ(v, std::floor(v));
    ASSERT_GE(v, -3);
    ASSERT_LE(v, 3);
    seen[static_cast<int>(v) + 3]++;
  }
  for (int s : seen) EXPECT_GT(s, 0);
}

TEST(NDArray, DoublesRoundTripAndCopy) {
  NDArray a = NDArray::empty({2, 2}, DType::kInt32);
  a.from_doubles({1, -2, 3, 2147483647});
  EXPECT_EQ(a.data_as<int32_t>()[3], 2147483647);
  NDArray b = a.copy();
  a.fill(0);
  EXPECT_EQ(b.to_doubles(), (std::vector<double>{1, -2, 3, 2147483647}));
  EXPECT_THROW(a.from_doubles({1, 2}), Error);
  NDArray c = std::move(b);
  EXPECT_EQ(c.get(1), -2);
}

TEST(NDArray, CompareWithinAndOutsideTolerance) {
  NDArray e = NDArray::empty({2, 3}, DType::kFloat32);
  e.from_doubles({1, 2, 3, 4, 5, 100});
  NDArray a = e.copy();
  a.set(5, 100.005);  // relative error 5e-5
  CompareResult ok = compare(a, e);
  EXPECT_TRUE(ok.ok) << ok.message;
  EXPECT_EQ(ok.first_bad, 6u);
  EXPECT_NEAR(ok.max_abs_err, 0.005, 1e-5);

  a.set(4, 5.01);
  CompareResult bad = compare(a, e);
  EXPECT_FALSE(bad.ok);
  EXPECT_EQ(bad.first_bad, 4u);
  EXPECT_NE(bad.message.find("1 of 6 elements differ"), std::string::npos) << bad.message;
  EXPECT_NE(bad.message.find("[1, 1]"), std::string::npos) << bad.message;
  EXPECT_TRUE(compare(a, e, 1e-2, 0).ok);
}

TEST(NDArray, CompareSpecialValuesAndExactInts) {
  NDArray e = NDArray::empty({3}, DType::kFloat64);
  e.from_doubles({NAN, INFINITY, 1.0});
  NDArray a = e.copy();
  EXPECT_TRUE(compare(a, e).ok);
  a.set(1, -INFINITY);
  EXPECT_FALSE(compare(a, e).ok);
  a.set(1, INFINITY);
  a.set(0, 0);
  EXPECT_FALSE(compare(a, e).ok);

  NDArray ie = NDArray::empty({2}, DType::kInt32), ia = NDArray::empty({2}, DType::kInt32);
  ie.from_doubles({5, 6});
  ia.from_doubles({5, 7});
  EXPECT_FALSE(compare(ia, ie).ok);

  NDArray other = NDArray::empty({3}, DType::kFloat32);
  CompareResult r = compare(other, e);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.message.find("mismatched"), std::string::npos);
}

TEST(NDArray, DefaultToleranceGrowsWithReductionLength) {
  EXPECT_EQ(default_tolerance(DType::kFloat32).rtol, 1e-4);
  EXPECT_EQ(default_tolerance(DType::kFloat64).atol, 1e-9);
  EXPECT_EQ(default_tolerance(DType::kInt32).atol, 0);
  EXPECT_DOUBLE_EQ(default_tolerance(DType::kFloat32, 4096).atol, 8e-4);
  EXPECT_EQ(default_tolerance(DType::kFloat32, 16).atol, 1e-4);
}

TEST(RuntimeTimer, CalibratesRepeats) {
  int calls = 0;
  volatile double sink = 0;
  Timing t = time_function(
      [&] {
        ++calls;
        for (int i = 0; i < 1000; ++i) sink = sink + i;
      },
      3, 5);
  ASSERT_EQ(t.seconds_per_run.size(), 3u);
  EXPECT_GT(t.min, 0);
  EXPECT_LE(t.min, t.median);
  EXPECT_GE(t.mean, t.min);
  // Each repeat lasts >= 5 ms, so a ~1 us call runs many times per repeat.
  EXPECT_GT(calls, 100);
}

}  // namespace
}  // namespace tessera
