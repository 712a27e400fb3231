// The records DB: creation on first use, batches, best, resume, duplicates, schema checks, and
// corrupt or foreign files that are reported in one line and left exactly as they were.
#include "db/record_db.h"

#include <gtest/gtest.h>

#include "db/sqlite.h"
#include "db_test_util.h"
#include "te/error.h"

namespace tessera {
namespace {

using testing::file_bytes;
using testing::ScratchDir;
using testing::test_result;
using testing::test_target;
using testing::write_bytes;

const std::string kMatmul = "matmul:M=64,N=64,K=64";

TEST(RecordDb, CreatedOnFirstUseWithWalAndSchemaVersion) {
  ScratchDir dir;
  const std::string path = dir.file("new.db");
  {
    RecordDb db = RecordDb::open(path, RecordDb::Mode::kReadWrite);
    DbStats st = db.stats();
    EXPECT_EQ(st.schema_version, current_schema_version());
    EXPECT_EQ(st.results, 0);
    EXPECT_TRUE(db.records().empty());  // resuming from an empty DB is fine
  }
  SqliteConnection conn(path, true);
  EXPECT_EQ(conn.query_text("PRAGMA journal_mode"), "wal");
  EXPECT_EQ(conn.query_int("PRAGMA application_id"), kApplicationId);
  EXPECT_EQ(conn.query_int("PRAGMA user_version"), current_schema_version());
}

// Rows another program wrote or the disk damaged are passed over and counted: a malformed
// repeats list aborted `tune` with an uncaught parse error, and a successful run with a zero
// median ranked first (infinite GFLOP/s).
TEST(RecordDb, DamagedRowsArePassedOverAndCounted) {
  ScratchDir dir;
  const std::string path = dir.file("damaged.db");
  const Target here = test_target();
  {
    RecordDb db = RecordDb::open(path, RecordDb::Mode::kReadWrite);
    db.append(here, {test_result(kMatmul, "id", 3e-3), test_result(kMatmul, "split(i, 8)", 1e-3),
                     test_result(kMatmul, "split(i, 4)", 2e-3)});
  }
  {
    SqliteConnection conn(path, false);
    conn.exec("UPDATE results SET repeats = '[1e-3, oops' WHERE median = 1e-3");
    conn.exec("UPDATE results SET median = 0 WHERE median = 2e-3");
  }
  RecordDb db = RecordDb::open(path, RecordDb::Mode::kReadOnly);
  std::optional<Record> best = db.best(kMatmul, here.key());
  ASSERT_TRUE(best);
  EXPECT_EQ(best->result.strategy, "id");
  const size_t after_best = db.skipped_rows();
  EXPECT_GE(after_best, 2u);
  RecordQuery q;
  q.workload = kMatmul;
  EXPECT_EQ(db.records(q).size(), 1u);
  EXPECT_EQ(db.skipped_rows(), after_best + 2);
}

TEST(RecordDb, AppendsBestAndResume) {
  ScratchDir dir;
  RecordDb db = RecordDb::open(dir.file("r.db"), RecordDb::Mode::kReadWrite);
  const Target here = test_target(), there = test_target("Other CPU");
  EXPECT_EQ(
      db.append(here, {test_result(kMatmul, "id", 3e-3), test_result(kMatmul, "split(i, 8)", 1e-3),
                       test_result(kMatmul, "split(i, 4)", 0, ErrorKind::kRuntimeError),
                       test_result("add:M=4,N=4", "id", 1e-6)}),
      4u);
  EXPECT_EQ(db.append(there, {test_result(kMatmul, "split(j, 8)", 0.5e-3)}), 1u);

  std::optional<Record> best = db.best(kMatmul, here.key());
  ASSERT_TRUE(best);
  EXPECT_EQ(best->result.strategy, "split(i, 8)");
  EXPECT_DOUBLE_EQ(best->result.timing.median, 1e-3);
  EXPECT_EQ(best->result.timing.repeats.size(), 3u);
  EXPECT_EQ(best->target.key(), here.key());
  EXPECT_EQ(db.best(kMatmul, there.key())->result.strategy, "split(j, 8)");
  EXPECT_EQ(db.best(kMatmul, "")->result.strategy, "split(j, 8)");  // any target
  EXPECT_FALSE(db.best("matmul:M=1,N=1,K=1", here.key()));

  // Resume: everything measured for a workload on this target, failures included.
  RecordQuery q;
  q.workload = kMatmul;
  q.target_key = here.key();
  std::vector<Record> mine = db.records(q);
  ASSERT_EQ(mine.size(), 3u);
  EXPECT_EQ(mine[2].result.error, ErrorKind::kRuntimeError);
  EXPECT_EQ(mine[2].result.message, "runtime_error in split(i, 4)");
  q.only_ok = true;
  EXPECT_EQ(db.records(q).size(), 2u);
  RecordQuery recent;
  recent.limit = 1;
  ASSERT_EQ(db.records(recent).size(), 1u);
  EXPECT_EQ(db.records(recent)[0].result.strategy, "split(j, 8)");

  DbStats st = db.stats();
  EXPECT_EQ(st.workloads, 2);
  EXPECT_EQ(st.targets, 2);
  EXPECT_EQ(st.configs, 5);
  EXPECT_EQ(st.results, 5);
  EXPECT_EQ(st.results_by_error["ok"], 4);
  EXPECT_EQ(st.results_by_error["runtime_error"], 1);
  EXPECT_EQ(db.targets().size(), 2u);
}

Pick test_pick(const std::string& strategy, double median, int64_t at_ms,
               const std::vector<std::string>& candidates) {
  Pick p;
  p.workload = kMatmul;
  p.strategy = strategy;
  p.target = test_target();
  p.median = median;
  p.rounds = 3;
  p.picked_at_ms = at_ms;
  for (const std::string& c : candidates) p.candidates.push_back({c, 1e-3, {median}, median});
  return p;
}

TEST(RecordDb, BestHonoursTheLatestPickUntilALaterRecordBeatsItsMedian) {
  ScratchDir dir;
  RecordDb db = RecordDb::open(dir.file("p.db"), RecordDb::Mode::kReadWrite);
  const Target here = test_target();
  const int64_t t0 = 1700000000000;
  db.append(here, {test_result(kMatmul, "split(i, 8)", 1.0e-3, ErrorKind::kOk, t0),
                   test_result(kMatmul, "split(i, 4)", 1.2e-3, ErrorKind::kOk, t0)});
  EXPECT_FALSE(db.latest_pick(kMatmul, here.key()));
  EXPECT_EQ(db.best(kMatmul, here.key())->result.strategy, "split(i, 8)");

  // Re-timed together, the configuration that measured slower once is the faster one.
  db.add_pick(test_pick("split(i, 4)", 1.1e-3, t0 + 10, {"split(i, 8)", "split(i, 4)"}));
  std::optional<Pick> pick = db.latest_pick(kMatmul, here.key());
  ASSERT_TRUE(pick);
  EXPECT_EQ(pick->strategy, "split(i, 4)");
  EXPECT_DOUBLE_EQ(pick->median, 1.1e-3);
  EXPECT_EQ(pick->rounds, 3);
  ASSERT_EQ(pick->candidates.size(), 2u);
  EXPECT_EQ(pick->candidates[0].strategy, "split(i, 8)");
  EXPECT_EQ(pick->candidates[1].round_medians, std::vector<double>{1.1e-3});
  EXPECT_EQ(pick->target.key(), here.key());
  EXPECT_EQ(db.best(kMatmul, here.key())->result.strategy, "split(i, 4)");
  EXPECT_EQ(db.best(kMatmul, "")->result.strategy, "split(i, 4)");
  EXPECT_FALSE(db.latest_pick(kMatmul, test_target("Other CPU").key()));
  EXPECT_EQ(db.stats().picks, 1);

  EXPECT_EQ(db.current_pick(kMatmul, here.key())->strategy, "split(i, 4)");
  // A later record slower than the pick's median leaves it standing; a faster one supersedes it,
  // and then it, not the record the re-timing ranked below the pick, is the best.
  db.append(here, {test_result(kMatmul, "split(j, 8)", 1.15e-3, ErrorKind::kOk, t0 + 20)});
  EXPECT_EQ(db.best(kMatmul, here.key())->result.strategy, "split(i, 4)");
  db.append(here, {test_result(kMatmul, "split(j, 2)", 1.05e-3, ErrorKind::kOk, t0 + 25)});
  EXPECT_EQ(db.best(kMatmul, here.key())->result.strategy, "split(j, 2)");
  EXPECT_FALSE(db.current_pick(kMatmul, here.key()));
  EXPECT_TRUE(db.latest_pick(kMatmul, here.key()));
  db.append(here, {test_result(kMatmul, "split(j, 4)", 0.9e-3, ErrorKind::kOk, t0 + 30)});
  EXPECT_EQ(db.best(kMatmul, here.key())->result.strategy, "split(j, 4)");
  // The next pick counts again.
  db.add_pick(test_pick("split(i, 8)", 0.95e-3, t0 + 40, {"split(j, 4)", "split(i, 8)"}));
  EXPECT_EQ(db.best(kMatmul, here.key())->result.strategy, "split(i, 8)");
  EXPECT_EQ(db.current_pick(kMatmul, "")->strategy, "split(i, 8)");

  // A pick needs records of its configurations; a failed add writes nothing.
  EXPECT_THROW(db.add_pick(test_pick("split(k, 2)", 1e-3, t0 + 50, {"split(k, 2)"})), Error);
  EXPECT_THROW(db.add_pick(test_pick("split(i, 8)", 1e-3, t0 + 50, {"split(k, 2)"})), Error);
  EXPECT_EQ(db.stats().picks, 2);
  EXPECT_EQ(db.latest_pick(kMatmul, here.key())->picked_at_ms, t0 + 40);
}

TEST(RecordDb, AFileOfSchemaOneIsReadWithoutPicksAndMigratedOnWrite) {
  ScratchDir dir;
  const std::string path = dir.file("v1.db");
  {
    RecordDb db = RecordDb::open(path, RecordDb::Mode::kReadWrite);
    db.append(test_target(), {test_result(kMatmul, "id", 1e-3)});
  }
  {
    // What tessera before the picks table wrote: schema 1, no picks.
    SqliteConnection conn(path, false);
    conn.exec("DROP TABLE picks");
    conn.exec("PRAGMA user_version = 1");
  }
  {
    RecordDb db = RecordDb::open(path, RecordDb::Mode::kReadOnly);
    EXPECT_EQ(db.best(kMatmul, test_target().key())->result.strategy, "id");
    EXPECT_FALSE(db.latest_pick(kMatmul, ""));
    EXPECT_EQ(db.stats().picks, 0);
    EXPECT_EQ(db.stats().schema_version, 1);
  }
  RecordDb db = RecordDb::open(path, RecordDb::Mode::kReadWrite);
  EXPECT_EQ(db.stats().schema_version, current_schema_version());
  db.add_pick(test_pick("id", 1e-3, 1700000000001, {"id"}));
  EXPECT_EQ(db.stats().picks, 1);
  EXPECT_EQ(db.records().size(), 1u);
}

TEST(RecordDb, DuplicatesAreRecognizedAndRepeatMeasurementsKept) {
  ScratchDir dir;
  RecordDb db = RecordDb::open(dir.file("d.db"), RecordDb::Mode::kReadWrite);
  MeasureResult r = test_result(kMatmul, "id", 1e-3);
  EXPECT_EQ(db.append(test_target(), {r}), 1u);
  EXPECT_EQ(db.append(test_target(), {r, r}), 0u);
  r.timestamp_ms += 1;  // the same configuration measured again is a new result
  EXPECT_EQ(db.append(test_target(), {r}), 1u);
  EXPECT_EQ(db.stats().results, 2);
  EXPECT_EQ(db.stats().configs, 1);
}

TEST(RecordDb, ReopensAndKeepsRecordsReadOnlyNeverWrites) {
  ScratchDir dir;
  const std::string path = dir.file("keep.db");
  {
    RecordDb db = RecordDb::open(path, RecordDb::Mode::kReadWrite);
    db.append(test_target(), {test_result(kMatmul, "id", 1e-3)});
  }
  const std::string bytes = file_bytes(path);
  {
    RecordDb db = RecordDb::open(path, RecordDb::Mode::kReadOnly);
    EXPECT_EQ(db.records().size(), 1u);
    EXPECT_THROW(db.append(test_target(), {test_result(kMatmul, "id", 2e-3)}), Error);
  }
  EXPECT_EQ(file_bytes(path), bytes);
  EXPECT_THROW(RecordDb::open(dir.file("absent.db"), RecordDb::Mode::kReadOnly), Error);
}

// Opening `path` (in both modes) fails with a one-line message containing `expect`, and the
// file's bytes do not change.
void expect_refused(const std::string& path, const std::string& expect) {
  const std::string bytes = file_bytes(path);
  for (RecordDb::Mode mode : {RecordDb::Mode::kReadOnly, RecordDb::Mode::kReadWrite}) {
    try {
      RecordDb::open(path, mode);
      ADD_FAILURE() << path << " opened";
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find(expect), std::string::npos) << msg;
      EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    }
    EXPECT_EQ(file_bytes(path), bytes);
  }
}

TEST(RecordDb, CorruptTruncatedForeignAndNewerFilesAreRefusedUntouched) {
  ScratchDir dir;
  const std::string good = dir.file("good.db");
  {
    RecordDb db = RecordDb::open(good, RecordDb::Mode::kReadWrite);
    std::vector<MeasureResult> batch;
    for (int i = 0; i < 300; ++i) {
      batch.push_back(test_result(kMatmul, "split(i, " + std::to_string(i + 1) + ")", 1e-3 + i));
    }
    db.append(test_target(), batch);
    SqliteConnection(good, false).exec("PRAGMA wal_checkpoint(TRUNCATE)");
  }
  const std::string bytes = file_bytes(good);
  ASSERT_GT(bytes.size(), 8192u);

  const std::string garbage = dir.file("garbage.db");
  write_bytes(garbage, std::string(5000, 'x'));
  expect_refused(garbage, "not an SQLite file");

  const std::string truncated = dir.file("truncated.db");
  write_bytes(truncated, bytes.substr(0, bytes.size() / 2 + 100));
  expect_refused(truncated, "truncated.db is corrupt");

  const std::string scribbled = dir.file("scribbled.db");
  std::string s = bytes;
  for (size_t i = 4096 + 200; i < s.size(); i += 1024) s[i] = static_cast<char>(0xA5);
  write_bytes(scribbled, s);
  expect_refused(scribbled, "scribbled.db is corrupt");

  const std::string foreign = dir.file("foreign.db");
  SqliteConnection(foreign, false).exec("CREATE TABLE t(x); INSERT INTO t VALUES (1)");
  expect_refused(foreign, "not a tessera records database");

  const std::string newer = dir.file("newer.db");
  write_bytes(newer, bytes);
  SqliteConnection(newer, false).exec("PRAGMA user_version = 999");
  expect_refused(newer, "newer than this tessera");
}

}  // namespace
}  // namespace tessera
