// `tessera db ...` and `tessera measure` through the real binary: results, exit codes, and
// corrupt files reported in one line and left exactly as they were.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "cli_util.h"
#include "db_test_util.h"

namespace tessera {
namespace {

using testing::file_bytes;
using testing::ScratchDir;
using testing::write_bytes;

using Outcome = tessera::testing::CliOutcome;
using tessera::testing::run_cli;

int lines(const std::string& s) {
  int n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

const char* kWork = "matmul:M=16,N=16,K=16";
const char* kFast = "--repeat 3 --min-repeat-ms 1 --threads 1";

TEST(DbCli, MeasureRecordsThenListBestExportImportStats) {
  ScratchDir dir;
  const std::string db = "--db " + dir.file("t.db");
  Outcome m = run_cli(fmt::format("measure {} -s 'split(i, 4)' {} {}", kWork, kFast, db));
  ASSERT_EQ(m.exit_code, 0) << m.out;
  EXPECT_TRUE(contains(m.out, "result    ok")) << m.out;
  Outcome na = run_cli(fmt::format("measure {} -s 'split(q, 4)' {} {}", kWork, kFast, db));
  EXPECT_EQ(na.exit_code, 2) << na.out;  // not applicable: recorded, and bad input
  EXPECT_TRUE(contains(na.out, "no loop named q")) << na.out;

  Outcome list = run_cli("db list " + db);
  EXPECT_EQ(list.exit_code, 0) << list.out;
  EXPECT_TRUE(contains(list.out, "split(i, 4)")) << list.out;
  EXPECT_TRUE(contains(list.out, "instantiation")) << list.out;
  EXPECT_TRUE(contains(list.out, "2 of 2 records")) << list.out;

  Outcome best = run_cli(fmt::format("db best {} --strategy-only {}", kWork, db));
  EXPECT_EQ(best.exit_code, 0) << best.out;
  EXPECT_EQ(best.out, "split(i, 4)\n");
  Outcome none = run_cli("db best matmul:M=2,N=2,K=2 " + db);
  EXPECT_EQ(none.exit_code, 1) << none.out;
  EXPECT_EQ(lines(none.out), 1) << none.out;

  const std::string jsonl = dir.file("out.jsonl");
  Outcome ex = run_cli(fmt::format("db export {} {}", jsonl, db));
  EXPECT_EQ(ex.exit_code, 0) << ex.out;
  EXPECT_EQ(lines(file_bytes(jsonl)), 2);
  const std::string other = "--db " + dir.file("other.db");
  Outcome im = run_cli(fmt::format("db import {} {}", jsonl, other));
  EXPECT_EQ(im.exit_code, 0) << im.out;
  EXPECT_TRUE(contains(im.out, "imported 2 new records")) << im.out;
  im = run_cli(fmt::format("db import {} {}", jsonl, other));
  EXPECT_TRUE(contains(im.out, "imported 0 new records")) << im.out;
  EXPECT_TRUE(contains(im.out, "2 already there")) << im.out;

  Outcome st = run_cli("db stats " + other);
  EXPECT_EQ(st.exit_code, 0) << st.out;
  EXPECT_TRUE(contains(st.out, "results         2")) << st.out;
  EXPECT_TRUE(contains(st.out, "instantiation 1")) << st.out;
}

TEST(DbCli, CorruptDbIsOneLineNonZeroAndUntouched) {
  ScratchDir dir;
  const std::string path = dir.file("corrupt.db");
  std::string bytes = "SQLite format 3";
  bytes.push_back('\0');
  bytes += std::string(3000, '\x7f');
  write_bytes(path, bytes);
  const std::string jsonl = dir.file("empty.jsonl");
  write_bytes(jsonl, "");
  const std::string commands[] = {
      "db list",
      "db stats",
      "db export",
      std::string("db best ") + kWork,
      "db import " + jsonl,
      std::string("measure ") + kWork + " " + kFast,
  };
  for (const std::string& cmd : commands) {
    SCOPED_TRACE(cmd);
    Outcome o = run_cli(cmd + " --db " + path);
    EXPECT_NE(o.exit_code, 0);
    EXPECT_EQ(lines(o.out), 1) << o.out;
    EXPECT_TRUE(contains(o.out, "corrupt.db is corrupt")) << o.out;
    EXPECT_EQ(file_bytes(path), bytes);
  }
  EXPECT_FALSE(std::filesystem::exists(path + "-wal"));
}

TEST(DbCli, MalformedJsonImportsNothingAndNamesTheLine) {
  ScratchDir dir;
  const std::string db = dir.file("t.db");
  ASSERT_EQ(run_cli(fmt::format("measure {} {} --db {}", kWork, kFast, db)).exit_code, 0);
  const std::string jsonl = dir.file("r.jsonl");
  ASSERT_EQ(run_cli(fmt::format("db export {} --db {}", jsonl, db)).exit_code, 0);
  std::string good = file_bytes(jsonl);
  // A truncated export: a second record cut in the middle.
  const std::string truncated = good + good.substr(0, good.size() / 2);
  write_bytes(jsonl, truncated);
  const std::string fresh = dir.file("fresh.db");
  Outcome o = run_cli(fmt::format("db import {} --db {}", jsonl, fresh));
  EXPECT_EQ(o.exit_code, 2) << o.out;
  EXPECT_EQ(lines(o.out), 1) << o.out;
  EXPECT_TRUE(contains(o.out, "r.jsonl:2:")) << o.out;
  EXPECT_FALSE(std::filesystem::exists(fresh));  // not even created
  EXPECT_EQ(file_bytes(jsonl), truncated);
  // Well-formed JSON that says nonsense: a median of 0 or -1, an op tessera does not have.
  const std::string one = good.substr(0, good.find('\n') + 1);
  auto with = [&](const std::string& from, const std::string& to) {
    std::string line = one;
    size_t at = line.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return at == std::string::npos ? line : line.replace(at, from.size(), to);
  };
  const std::string median_key = "\"median\":";
  size_t m = one.find(median_key);
  ASSERT_NE(m, std::string::npos) << one;
  size_t m_end = one.find_first_of(",}", m);
  const std::string median = one.substr(m, m_end - m);
  for (const auto& [bad, message] : std::vector<std::pair<std::string, std::string>>{
           {with(median, median_key + "0"), "not a positive time"},
           {with(median, median_key + "-1.0"), "not a positive time"},
           {with("\"workload\":\"matmul:", "\"workload\":\"nosuchop:"), "unknown op"}}) {
    SCOPED_TRACE(message);
    write_bytes(jsonl, bad);
    Outcome r = run_cli(fmt::format("db import {} --db {}", jsonl, fresh));
    EXPECT_EQ(r.exit_code, 2) << r.out;
    EXPECT_EQ(lines(r.out), 1) << r.out;
    EXPECT_TRUE(contains(r.out, message)) << r.out;
    EXPECT_FALSE(std::filesystem::exists(fresh));
  }
  Outcome missing = run_cli("db list --db " + dir.file("absent.db"));
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_TRUE(contains(missing.out, "no such records database")) << missing.out;
}

}  // namespace
}  // namespace tessera
