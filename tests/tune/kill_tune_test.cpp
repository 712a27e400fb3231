// A tuning run killed with SIGKILL in the middle of a batch keeps every trial measured before the
// kill: records are committed one trial at a time, not once per batch.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "db/record_db.h"
#include "runtime/process.h"
#include "te/error.h"

namespace tessera {
namespace {

size_t records_in(const std::string& path) {
  if (!std::filesystem::exists(path)) return 0;
  try {
    RecordDb db = RecordDb::open(path, RecordDb::Mode::kReadOnly);
    return db.records().size();
  } catch (const Error&) {
    return 0;  // not created yet, or its schema not yet written
  }
}

TEST(TuneKill, AKilledRunKeepsTheTrialsMeasuredBeforeTheKill) {
  const std::string dir =
      (std::filesystem::temp_directory_path() / ("tessera_kill_tune_" + std::to_string(getpid())))
          .string();
  std::filesystem::create_directories(dir);
  const std::string db = dir + "/t.db";
  // One batch of 12 trials, each timed for at least 5 repeats of 20 ms: the batch runs on for
  // more than a second after its first trial lands.
  SpawnSpec spec;
  spec.argv = {TESSERA_CLI_PATH,
               "tune",
               "matmul:M=128,N=128,K=128",
               "--trials",
               "12",
               "--batch",
               "12",
               "--tuner",
               "random",
               "--threads",
               "1",
               "--retime",
               "0",
               "--db",
               db};
  spec.output_path = dir + "/tune.log";
  const pid_t pid = spawn_process(spec);
  size_t seen = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while ((seen = records_in(db)) == 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  kill(pid, SIGKILL);
  std::optional<int> status = wait_process(pid, 0);
  ASSERT_GT(seen, 0u) << "no trial was recorded within two minutes";
  ASSERT_TRUE(status && WIFSIGNALED(*status)) << "the run ended before the kill";
  // Committed per batch, the first record would have come with all twelve.
  size_t kept = records_in(db);
  EXPECT_GE(kept, seen);
  EXPECT_LT(kept, 12u);
  std::filesystem::remove_all(dir);
}

// SIGTERM (a terminal's Ctrl-C is SIGINT, handled the same) mid-run: the compilers and the
// measurement worker are terminated with the command, and its temporary folders are removed
// (they stayed behind in /tmp).
TEST(TuneKill, TerminatedRunLeavesNoTemporaryFolders) {
  namespace fs = std::filesystem;
  const std::string dir =
      (fs::temp_directory_path() / ("tessera_term_tune_" + std::to_string(getpid()))).string();
  const std::string tmp = dir + "/tmp";
  fs::create_directories(tmp);
  SpawnSpec spec;
  spec.argv = {TESSERA_CLI_PATH, "tune",       "matmul:M=128,N=128,K=128",
               "--trials",       "200",        "--tuner",
               "random",         "--threads",  "1",
               "--db",           dir + "/t.db"};
  for (char** e = environ; *e; ++e)
    if (std::string(*e).rfind("TMPDIR=", 0) != 0) spec.env.push_back(*e);
  spec.env.push_back("TMPDIR=" + tmp);
  spec.output_path = dir + "/tune.log";
  const pid_t pid = spawn_process(spec);
  auto folders = [&] {
    int n = 0;
    for (const auto& e : fs::directory_iterator(tmp))
      n += e.path().filename().string().rfind("tessera-", 0) == 0;
    return n;
  };
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (folders() < 2 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ASSERT_GE(folders(), 2) << "the build and run folders did not appear within a minute";
  kill(pid, SIGTERM);
  std::optional<int> status = wait_process(pid, 0);
  ASSERT_TRUE(status && WIFSIGNALED(*status) && WTERMSIG(*status) == SIGTERM)
      << "it should die of the signal it was sent";
  EXPECT_EQ(folders(), 0);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace tessera
