// JSON-lines export and import: round trip, merge without overwriting, duplicates, and a
// malformed line that names its line number and imports nothing of the file.
#include "db/jsonl.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "db_test_util.h"
#include "te/error.h"

namespace tessera {
namespace {

using testing::file_bytes;
using testing::ScratchDir;
using testing::test_result;
using testing::test_target;
using testing::write_bytes;

void fill(RecordDb& db) {
  MeasureResult odd = test_result("matmul:M=64,N=64,K=64", "split(i, 3) <+ id", 1.0 / 3);
  odd.message = "quotes \" and\nnewlines";
  odd.timing.repeats = {0.1, 1e-300, 12345.678901234567};
  db.append(test_target(), {test_result("matmul:M=64,N=64,K=64", "id", 2e-3),
                            test_result("add:M=4,N=4", "id", 0, ErrorKind::kWrongAnswer), odd});
  db.append(test_target("Other"), {test_result("add:M=4,N=4", "id", 1e-6)});
}

TEST(Jsonl, ExportImportRoundTripIsExactAndReimportAddsNothing) {
  ScratchDir dir;
  RecordDb a = RecordDb::open(dir.file("a.db"), RecordDb::Mode::kReadWrite);
  fill(a);
  const std::string file = dir.file("a.jsonl");
  {
    std::ofstream out(file);
    EXPECT_EQ(export_jsonl(a, out), 4u);
  }
  RecordDb b = RecordDb::open(dir.file("b.db"), RecordDb::Mode::kReadWrite);
  ImportStats st = import_jsonl(b, file);
  EXPECT_EQ(st.records, 4u);
  EXPECT_EQ(st.added, 4u);
  EXPECT_EQ(st.duplicates, 0u);

  std::vector<Record> ra = a.records(), rb = b.records();
  ASSERT_EQ(ra.size(), rb.size());
  for (size_t i = 0; i < ra.size(); ++i) {
    EXPECT_EQ(ra[i].key(), rb[i].key());
    EXPECT_EQ(record_to_json(ra[i]), record_to_json(rb[i]));
  }
  EXPECT_EQ(rb[2].result.message, "quotes \" and\nnewlines");
  EXPECT_EQ(rb[2].result.timing.repeats, (std::vector<double>{0.1, 1e-300, 12345.678901234567}));

  // Import merges: the same file again, or into the DB it came from, adds nothing.
  EXPECT_EQ(import_jsonl(b, file).duplicates, 4u);
  EXPECT_EQ(import_jsonl(a, file).added, 0u);
  // A second export of b is the same text as a's.
  std::ostringstream again;
  export_jsonl(b, again);
  EXPECT_EQ(again.str(), file_bytes(file));
}

// Records timed in-model are filed under their own key, read back with their timing, and keep
// both through an export and an import: never merged into the records timed alone.
TEST(Jsonl, RecordsTimedInModelKeepTheirTargetThroughTheDbAndAnExport) {
  ScratchDir dir;
  const std::string w = "matmul:M=64,N=64,K=64";
  const Target alone = test_target(), in_model = test_target().in_model();
  RecordDb a = RecordDb::open(dir.file("a.db"), RecordDb::Mode::kReadWrite);
  a.append(in_model, {test_result(w, "id", 2e-3)});
  a.append(alone, {test_result(w, "id", 1e-3)});
  std::vector<Record> read = a.records();
  ASSERT_EQ(read.size(), 2u);
  EXPECT_EQ(read[0].target.timing, "in-model");
  EXPECT_EQ(read[0].target.key(), in_model.key());
  EXPECT_EQ(read[1].target.timing, "");
  EXPECT_EQ(a.targets().size(), 2u);
  EXPECT_EQ(a.targets().at(in_model.key()).timing, "in-model");
  const std::string file = dir.file("a.jsonl");
  {
    std::ofstream out(file);
    EXPECT_EQ(export_jsonl(a, out), 2u);
  }
  RecordDb b = RecordDb::open(dir.file("b.db"), RecordDb::Mode::kReadWrite);
  EXPECT_EQ(import_jsonl(b, file).added, 2u);
  ASSERT_TRUE(b.best(w, in_model.key()));
  EXPECT_DOUBLE_EQ(b.best(w, in_model.key())->result.timing.median, 2e-3);
  EXPECT_DOUBLE_EQ(b.best(w, alone.key())->result.timing.median, 1e-3);
}

TEST(Jsonl, ImportMergesNewRecordsNextToExistingOnes) {
  ScratchDir dir;
  RecordDb a = RecordDb::open(dir.file("a.db"), RecordDb::Mode::kReadWrite);
  fill(a);
  RecordDb b = RecordDb::open(dir.file("b.db"), RecordDb::Mode::kReadWrite);
  b.append(test_target(), {test_result("relu:M=8,N=8", "id", 1e-7)});
  std::ostringstream out;
  export_jsonl(a, out);
  write_bytes(dir.file("a.jsonl"), out.str());
  EXPECT_EQ(import_jsonl(b, dir.file("a.jsonl")).added, 4u);
  EXPECT_EQ(b.stats().results, 5);
  EXPECT_EQ(b.best("relu:M=8,N=8", test_target().key())->result.timing.median, 1e-7);
}

TEST(Jsonl, MalformedLineNamesItsNumberAndImportsNothing) {
  ScratchDir dir;
  RecordDb a = RecordDb::open(dir.file("a.db"), RecordDb::Mode::kReadWrite);
  fill(a);
  std::ostringstream out;
  export_jsonl(a, out);
  std::string text = out.str();
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  ASSERT_EQ(lines.size(), 4u);

  std::string unknown_kind = lines[2];
  unknown_kind.replace(unknown_kind.find("\"error\":\"ok\""), 12, "\"error\":\"segv\"");
  RecordDb b = RecordDb::open(dir.file("b.db"), RecordDb::Mode::kReadWrite);
  const std::pair<std::string, std::string> cases[] = {
      {lines[2].substr(0, lines[2].size() / 2), ":3: not JSON"},  // truncated line
      {"[1, 2]", ":3: not a JSON object"},
      {R"({"workload": "add:M=4,N=4"})", ":3: missing field 'strategy'"},
      {unknown_kind, ":3: unknown error kind 'segv'"},
  };
  for (const auto& [bad, expect] : cases) {
    SCOPED_TRACE(bad);
    const std::string path = dir.file("bad.jsonl");
    const std::string content = lines[0] + "\n\n" + bad + "\n" + lines[3] + "\n";
    // Line 2 is blank (skipped), so the bad one is line 3.
    write_bytes(path, content);
    try {
      import_jsonl(b, path);
      ADD_FAILURE() << "imported";
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find(path + expect), std::string::npos) << msg;
      EXPECT_NE(msg.find("nothing was imported"), std::string::npos) << msg;
      EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    }
    EXPECT_EQ(b.stats().results, 0);
    EXPECT_EQ(file_bytes(path), content);
  }
}

TEST(Jsonl, WrongTypesAndUnknownErrorKindsAreRejected) {
  ScratchDir dir;
  RecordDb a = RecordDb::open(dir.file("a.db"), RecordDb::Mode::kReadWrite);
  fill(a);
  const std::string line = record_to_json(a.records()[0]);
  std::string wrong_kind = line;
  wrong_kind.replace(wrong_kind.find("\"error\":\"ok\""), 12, "\"error\":\"segv\"");
  EXPECT_THROW(record_from_json(wrong_kind), Error);
  std::string wrong_type = line;
  wrong_type.replace(wrong_type.find("\"cores\":2"), 9, "\"cores\":\"two\"");
  try {
    record_from_json(wrong_type);
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'cores' has the wrong type"), std::string::npos)
        << e.what();
  }
  // Found by fuzz/record_fuzzer.cpp: a float or a number out of range in a whole-number field
  // was converted unchecked (undefined behaviour).
  for (const char* cores : {"2.5", "1e25", "-3000000000", "18446744073709551615"}) {
    std::string out_of_range = line;
    out_of_range.replace(out_of_range.find("\"cores\":2"), 9, std::string("\"cores\":") + cores);
    try {
      record_from_json(out_of_range);
      ADD_FAILURE() << cores;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("'cores' is not a whole number in range"),
                std::string::npos)
          << e.what();
    }
  }
  EXPECT_EQ(record_from_json(line).key(), a.records()[0].key());
}

}  // namespace
}  // namespace tessera
