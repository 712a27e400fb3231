// Builder, runner and the whole measurement pipeline, with candidates that crash, hang, compute
// the wrong thing, do not compile or do not apply: each ends as a record of its kind.
#include "measure/measure.h"

#include <dirent.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "measure/worker_protocol.h"
#include "ops/in_model.h"
#include "ops/templates.h"
#include "ops/workload.h"
#include "runtime/process.h"
#include "runtime/sanitizer.h"
#include "schedule/strategy_parser.h"
#include "space/config_space.h"

namespace tessera {
namespace {

const char* kWorkload = "matmul:M=8,N=8,K=8";

// Hand-written kernels for kWorkload (A: 8x8, B: 8x8, C: 8x8, float32), differing in `body`.
std::string kernel(const std::string& body, const std::string& includes = "") {
  return includes + R"c(
void tsr_main(void* const* args) {
  const float* A = (const float*)args[0];
  const float* B = (const float*)args[1];
  float* C = (float*)args[2];
)c" + body +
         "\n}\n";
}

const std::string kCorrect = R"c(
  for (int i = 0; i < 8; ++i)
    for (int j = 0; j < 8; ++j) {
      float s = 0;
      for (int k = 0; k < 8; ++k) s += A[i * 8 + k] * B[k * 8 + j];
      C[i * 8 + j] = s;
    })c";

// Processes whose parent is this process (zombies included), from /proc.
std::set<pid_t> child_processes() {
  std::set<pid_t> kids;
  DIR* d = opendir("/proc");
  while (dirent* e = d ? readdir(d) : nullptr) {
    const pid_t pid = std::atoi(e->d_name);
    if (pid <= 0) continue;
    std::ifstream stat(std::string("/proc/") + e->d_name + "/stat");
    std::string line;
    std::getline(stat, line);
    const size_t close = line.rfind(')');
    if (close == std::string::npos) continue;
    char state = 0;
    int ppid = 0;
    if (sscanf(line.c_str() + close + 1, " %c %d", &state, &ppid) == 2 && ppid == getpid()) {
      kids.insert(pid);
    }
  }
  if (d) closedir(d);
  return kids;
}

bool process_exists(pid_t pid) {
  return kill(pid, 0) == 0;
}

MeasureParams small_params() {
  MeasureParams p;
  p.build.jobs = 2;
  p.run.timeout_s = 1.0;
  p.run.threads = 1;
  p.run.memory_limit_bytes = int64_t{1} << 30;
  p.run.timing.repeat = 3;
  p.run.timing.min_repeat_ms = 1;
  return p;
}

TEST(Measure, MixedBatchRecordsEveryOutcomeAndLeavesNothingRunning) {
  const std::set<pid_t> before = child_processes();
  std::set<pid_t> workers;
  std::vector<MeasureResult> results;
  {
    Measurer m(small_params());
    const std::vector<MeasureInput> batch = {
        {kWorkload, "id", std::nullopt},                                         // 0 good
        {kWorkload, "split(i, 4) ; parallel(i.outer)", std::nullopt},            // 1 good
        {kWorkload, "id", kernel("*(volatile int*)0 = 1;")},                     // 2 segfault
        {kWorkload, "id", kernel("for (volatile int x = 0;; ++x) {}")},          // 3 hangs
        {kWorkload, "id", kernel("for (int i = 0; i < 64; ++i) C[i] = A[i];")},  // 4 wrong
        {kWorkload, "id", kernel("int x = ;")},                                  // 5 no compile
        {kWorkload, "split(q, 2)", std::nullopt},                                // 6 n/a
        {kWorkload, "id", kernel("abort();", "#include <stdlib.h>\n")},          // 7 abort
        // 8: runaway allocation; without the worker's memory limit it would run into the timeout.
        {kWorkload, "id",
         kernel("for (;;) if (!malloc(1 << 26)) abort();", "#include <stdlib.h>\n")},
        {kWorkload, "id", kernel(kCorrect)},     // 9 good, by hand
        {"matmul:M=8,N=x", "id", std::nullopt},  // 10 bad workload
    };
    std::vector<std::string> stages;
    results = m.measure(batch, [&](const char* stage, size_t done, size_t total) {
      stages.push_back(fmt::format("{} {}/{}", stage, done, total));
      if (m.runner().worker_pid() != 0) workers.insert(m.runner().worker_pid());
    });
    ASSERT_EQ(results.size(), batch.size());
    EXPECT_EQ(stages.back(), "run 8/8");  // 11 candidates - 2 not applicable - 1 compile error
    EXPECT_NE(std::find(stages.begin(), stages.end(), "build 9/9"), stages.end());
    // Crashes and the timeout each cost a worker; the good ones after them got a fresh one.
    EXPECT_GE(m.runner().workers_started(), 5);
  }
  auto kind = [&](size_t i) { return std::string(error_kind_name(results[i].error)); };
  for (size_t i : {0, 1, 9}) {
    SCOPED_TRACE(i);
    EXPECT_EQ(kind(i), "ok") << results[i].message;
    EXPECT_EQ(results[i].timing.repeats.size(), 3u);
    EXPECT_GT(results[i].timing.median, 0);
    EXPECT_GT(results[i].gflops(), 0);
    EXPECT_GT(results[i].timestamp_ms, 0);
  }
  EXPECT_EQ(results[1].strategy, "split(i, 4) ; parallel(i.outer)");
  EXPECT_EQ(kind(2), "runtime_error");
  EXPECT_NE(results[2].message.find("SIGSEGV"), std::string::npos) << results[2].message;
  EXPECT_EQ(kind(3), "run_timeout");
  EXPECT_EQ(kind(4), "wrong_answer");
  EXPECT_NE(results[4].message.find("C"), std::string::npos);
  EXPECT_EQ(kind(5), "compile_error");
  EXPECT_NE(results[5].message.find("error"), std::string::npos) << results[5].message;
  EXPECT_EQ(kind(6), "instantiation");
  EXPECT_NE(results[6].message.find("no loop named q"), std::string::npos) << results[6].message;
  EXPECT_EQ(kind(7), "runtime_error");
  EXPECT_NE(results[7].message.find("SIGABRT"), std::string::npos) << results[7].message;
  if (!kAddressSanitizer) {
    EXPECT_EQ(kind(8), "runtime_error");
    EXPECT_NE(results[8].message.find("SIGABRT"), std::string::npos) << results[8].message;
  } else {  // ASan's shadow memory rules out the worker's address-space limit (worker/main.cpp)
    EXPECT_EQ(kind(8), "run_timeout");
  }
  EXPECT_EQ(kind(10), "instantiation");
  for (size_t i : {2, 3, 4, 5, 6, 7, 8, 10}) EXPECT_TRUE(results[i].timing.repeats.empty()) << i;

  EXPECT_FALSE(workers.empty());
  for (pid_t w : workers) EXPECT_FALSE(process_exists(w)) << "worker " << w << " still exists";
  EXPECT_EQ(child_processes(), before);
}

TEST(Builder, BuildsInParallelOncePerDistinctCode) {
  BuildParams p;
  p.jobs = 2;
  Builder b(p);
  const std::string a = kernel(kCorrect), c = kernel("for (int i = 0; i < 64; ++i) C[i] = 0;");
  std::vector<BuildResult> r = b.build({a, c, a, a});
  ASSERT_EQ(r.size(), 4u);
  EXPECT_EQ(b.compiles(), 2);
  for (const BuildResult& x : r) EXPECT_EQ(x.error, ErrorKind::kOk) << x.message;
  EXPECT_EQ(r[0].library, r[2].library);
  EXPECT_NE(r[0].library, r[1].library);
  EXPECT_FALSE(r[0].cached);
  EXPECT_TRUE(r[2].cached);
  EXPECT_TRUE(std::filesystem::exists(r[0].library));
  // A second batch finds them in the cache.
  EXPECT_TRUE(b.build_one(c).cached);
  EXPECT_EQ(b.compiles(), 2);
}

TEST(Builder, OnDiskCacheIsSharedBetweenBuilders) {
  const std::string dir = ::testing::TempDir() + "/tessera-cache-" + std::to_string(getpid());
  std::filesystem::remove_all(dir);
  BuildParams p;
  p.cache_dir = dir;
  {
    Builder first(p);
    EXPECT_FALSE(first.build_one(kernel(kCorrect)).cached);
  }
  Builder second(p);
  BuildResult r = second.build_one(kernel(kCorrect));
  EXPECT_TRUE(r.cached);
  EXPECT_EQ(second.compiles(), 0);
  EXPECT_TRUE(std::filesystem::exists(r.library));
  std::filesystem::remove_all(dir);
}

TEST(Builder, CompileErrorShowsTheCompilersMessage) {
  Builder b;
  BuildResult r = b.build_one("int f( { return 1; }\n");
  EXPECT_EQ(r.error, ErrorKind::kCompileError);
  EXPECT_NE(r.message.find("error"), std::string::npos) << r.message;
  EXPECT_TRUE(r.library.empty());
}

TEST(Builder, CompileTimeoutKillsTheCompiler) {
  // Each macro level doubles the tokens: 2^24 terms keep the preprocessor busy for seconds.
  std::string src = "#define X0 1\n";
  for (int i = 1; i <= 24; ++i) src += fmt::format("#define X{} X{}+X{}\n", i, i - 1, i - 1);
  src += "int f(void) { return X24; }\n";
  BuildParams p;
  p.timeout_s = 0.3;
  Builder b(p);
  const std::set<pid_t> before = child_processes();
  const auto start = std::chrono::steady_clock::now();
  BuildResult r = b.build_one(src);
  const double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(r.error, ErrorKind::kCompileTimeout) << r.message;
  EXPECT_LT(took, 3.0);
  EXPECT_EQ(child_processes(), before);
}

TEST(Runner, WorkerSurvivesBetweenGoodCandidatesAndIsReplacedAfterACrash) {
  Builder b;
  RunParams p = small_params().run;
  Runner runner(p);
  BuildResult good = b.build_one(kernel(kCorrect));
  BuildResult bad = b.build_one(kernel("__builtin_trap();"));
  ASSERT_EQ(good.error, ErrorKind::kOk);
  ASSERT_EQ(bad.error, ErrorKind::kOk);
  EXPECT_EQ(runner.run({kWorkload, good.library}).error, ErrorKind::kOk);
  const pid_t first = runner.worker_pid();
  EXPECT_EQ(runner.run({kWorkload, good.library}).error, ErrorKind::kOk);
  EXPECT_EQ(runner.worker_pid(), first);  // reused: the reference is cached there
  RunResult trap = runner.run({kWorkload, bad.library});
  EXPECT_EQ(trap.error, ErrorKind::kRuntimeError);
  EXPECT_NE(trap.message.find("SIGILL"), std::string::npos) << trap.message;
  EXPECT_FALSE(process_exists(first));
  RunResult again = runner.run({kWorkload, good.library});
  EXPECT_EQ(again.error, ErrorKind::kOk) << again.message;
  EXPECT_NE(runner.worker_pid(), first);
  EXPECT_EQ(runner.workers_started(), 2);
  // A missing library is the candidate's failure, not the worker's.
  EXPECT_EQ(runner.run({kWorkload, "/nonexistent.so"}).error, ErrorKind::kRuntimeError);
  const pid_t last = runner.worker_pid();
  runner.stop();
  EXPECT_FALSE(process_exists(last));
}

TEST(Runner, MissingWorkerExecutableIsAnUnknownError) {
  RunParams p;
  p.worker_path = "/nonexistent/tessera_worker";
  Runner runner(p);
  RunResult r = runner.run({kWorkload, "/nonexistent.so"});
  EXPECT_EQ(r.error, ErrorKind::kUnknown);
  EXPECT_NE(r.message.find("/nonexistent/tessera_worker"), std::string::npos) << r.message;
}

TEST(Measure, ErrorKindNamesRoundTrip) {
  for (ErrorKind k : {ErrorKind::kOk, ErrorKind::kInstantiation, ErrorKind::kCompileError,
                      ErrorKind::kCompileTimeout, ErrorKind::kRuntimeError, ErrorKind::kRunTimeout,
                      ErrorKind::kWrongAnswer, ErrorKind::kUnknown}) {
    EXPECT_EQ(parse_error_kind(error_kind_name(k)), k);
  }
  EXPECT_FALSE(parse_error_kind("segfault"));
}

// Timed as in a model: the kernel with the model's cache hints, one run per repeat after its
// weights and output are flushed, the input kept (the worker is told so), and the records filed
// under a target of their own.
TEST(Measure, InModelTimingRunsOncePerFlushUnderItsOwnTarget) {
  const std::string workload = "batch_matmul:B=16,M=54,N=128,K=128";
  Workload w = parse_workload(workload);
  ConfigSpace space = space_for(w);
  const std::string strategy = space.instantiate(default_config(space, w, 2)).text();
  std::string hint;
  with_in_model_hints(w, instantiate(w).program, &hint);
  EXPECT_EQ(hint, "");  // the plain program has no j.outer to hint across
  RewriteResult<Program> tiled = parse_strategy(strategy)(instantiate(w).program);
  ASSERT_TRUE(tiled.ok());
  with_in_model_hints(w, tiled.program(), &hint);
  EXPECT_EQ(hint, "prefetch_next(B, j.outer, k.outer)");

  MeasureParams p = small_params();
  p.run.timeout_s = 10;
  p.as_in_model = true;
  Measurer m(p);
  EXPECT_EQ(m.target().key(), detect_target().in_model().key());
  EXPECT_NE(m.target().key(), detect_target().key());
  EXPECT_NE(m.target().summary().find("timed in-model"), std::string::npos);
  std::vector<MeasureResult> r = m.measure({{workload, strategy, std::nullopt}});
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].error, ErrorKind::kOk) << r[0].message;
  EXPECT_EQ(r[0].timing.number, 1);
  EXPECT_EQ(r[0].timing.repeats.size(), 15u);
  EXPECT_EQ(r[0].strategy, strategy);  // the hint is how it runs, not part of the record

  RunRequest request;
  request.workload = workload;
  request.timing.keep_first_cached = true;
  EXPECT_TRUE(decode_request(encode_request(request)).timing.keep_first_cached);
  nlohmann::json older = nlohmann::json::parse(encode_request(request));
  older["timing"].erase("keep_first_cached");
  EXPECT_FALSE(decode_request(older.dump()).timing.keep_first_cached);
}

TEST(Measure, TargetFingerprintIsStable) {
  Target a = detect_target();
  Target b = detect_target();
  EXPECT_EQ(a.key(), b.key());
  EXPECT_GT(a.cores, 0);
  EXPECT_FALSE(a.compiler.empty());
  CompileOptions other;
  other.flags.push_back("-fno-tree-vectorize");
  EXPECT_NE(detect_target(other).key(), a.key());
}

}  // namespace
}  // namespace tessera
