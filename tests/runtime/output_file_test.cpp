// Outputs go through a temporary file renamed into place and never replace an input, a device
// or a file of another kind.
#include "runtime/output_file.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "te/error.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

fs::path fresh_dir(const std::string& name) {
  fs::path dir = fs::path(::testing::TempDir()) / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

TEST(OutputFile, WritesThroughATemporaryFileAndLeavesNothingElse) {
  fs::path dir = fresh_dir("output_file_write");
  std::string path = (dir / "out.txt").string();
  write_file_atomically(path, [](std::ostream& out) { out << "first"; });
  EXPECT_EQ(read_all(path), "first");
  write_file_atomically(path, [](std::ostream& out) { out << "second"; });
  EXPECT_EQ(read_all(path), "second");
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 1);
}

TEST(OutputFile, AFailedWriteKeepsTheOldFileWhole) {
  fs::path dir = fresh_dir("output_file_fail");
  std::string path = (dir / "out.txt").string();
  write_file_atomically(path, [](std::ostream& out) { out << "kept"; });
  EXPECT_THROW(write_file_atomically(path,
                                     [](std::ostream& out) {
                                       out << "half";
                                       throw std::runtime_error("interrupted");
                                     }),
               std::runtime_error);
  EXPECT_EQ(read_all(path), "kept");
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 1)
      << "the temporary file is removed";
  // A folder that does not exist: the error is reported, nothing appears.
  EXPECT_THROW(write_file_atomically((dir / "missing" / "x").string(),
                                     [](std::ostream& out) { out << "x"; }),
               Error);
}

TEST(OutputFile, KindsAreToldByTheirFirstBytes) {
  fs::path dir = fresh_dir("output_file_kinds");
  auto make = [&](const std::string& name, const std::string& bytes) {
    std::string path = (dir / name).string();
    std::ofstream(path, std::ios::binary) << bytes;
    return path;
  };
  EXPECT_EQ(file_kind(make("db", std::string("SQLite format 3\0rest", 20))), FileKind::kRecordsDb);
  EXPECT_EQ(file_kind(make("so",
                           "\x7f"
                           "ELF\x02\x01")),
            FileKind::kSharedLibrary);
  EXPECT_EQ(file_kind(make("npy", "\x93NUMPY\x01\x00")), FileKind::kNpy);
  EXPECT_EQ(file_kind(make("jsonl", "{\"a\": 1}\n")), FileKind::kJsonl);
  EXPECT_EQ(file_kind(make("onnx", "\x08\x08\x12\x07pytorch")), FileKind::kOther);
  EXPECT_EQ(file_kind(make("empty", "")), FileKind::kEmpty);
  EXPECT_EQ(file_kind((dir / "absent").string()), FileKind::kMissing);
  EXPECT_EQ(file_kind(dir.string()), FileKind::kNotRegular);
}

TEST(OutputFile, RefusesInputsDevicesFoldersAndOtherKinds) {
  fs::path dir = fresh_dir("output_file_refuse");
  std::string model = (dir / "m.onnx").string();
  std::ofstream(model, std::ios::binary) << "\x08\x08";
  std::string npy = (dir / "y.npy").string();
  std::ofstream(npy, std::ios::binary) << "\x93NUMPY";
  // The same file under another spelling is still the input.
  std::string other_name = (dir / "." / "m.onnx").string();
  EXPECT_THROW(check_output_path(other_name, FileKind::kSharedLibrary, {model}), Error);
  EXPECT_THROW(check_output_path(model, FileKind::kNpy, {}), Error);
  EXPECT_THROW(check_output_path(dir.string(), FileKind::kNpy, {}), Error);
  if (fs::exists("/dev/null")) {
    EXPECT_THROW(check_output_path("/dev/null", FileKind::kNpy, {}), Error);
  }
  EXPECT_THROW(check_output_path("", FileKind::kNpy, {}), Error);
  EXPECT_NO_THROW(check_output_path(npy, FileKind::kNpy, {model, ""}));
  EXPECT_NO_THROW(check_output_path((dir / "new.so").string(), FileKind::kSharedLibrary, {model}));
}

}  // namespace
}  // namespace tessera
