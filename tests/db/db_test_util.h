/// Helpers for the records DB tests: temporary paths, synthetic records, file bytes.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "db/record_db.h"

namespace tessera::testing {

/// A fresh directory under the test temp dir, removed on destruction.
class ScratchDir {
 public:
  ScratchDir() {
    static int counter = 0;
    path_ = ::testing::TempDir() + "/tessera-db-test-" + std::to_string(getpid()) + "-" +
            std::to_string(counter++);
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~ScratchDir() { std::filesystem::remove_all(path_); }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

inline Target test_target(const std::string& cpu = "Test CPU") {
  Target t;
  t.cpu_model = cpu;
  t.isa = {"avx2", "fma"};
  t.cores = 2;
  t.compiler = "cc (Test) 1.0";
  t.flags = "-O3 -march=native";
  return t;
}

/// An ok result with the given median (three repeats around it) or an error result.
inline MeasureResult test_result(const std::string& workload, const std::string& strategy,
                                 double median, ErrorKind error = ErrorKind::kOk,
                                 int64_t timestamp = 1700000000000) {
  MeasureResult r;
  r.workload = workload;
  r.strategy = strategy;
  r.dtype = "float32";
  r.flops = 2.0 * 64 * 64 * 64;
  r.error = error;
  r.timestamp_ms = timestamp;
  r.build_seconds = 0.125;
  r.run_seconds = 0.25;
  if (error == ErrorKind::kOk) {
    r.timing = summarize_repeats({median * 1.1, median, median * 0.9}, 10);
  } else {
    r.message = std::string(error_kind_name(error)) + " in " + strategy;
  }
  return r;
}

inline std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
}

}  // namespace tessera::testing
