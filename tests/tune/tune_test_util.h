/// Records DBs for tuning tests: temporary files and synthetic records (no measuring).
#pragma once

#include <unistd.h>

#include <filesystem>
#include <string>

#include "db/record_db.h"
#include "ops/templates.h"

namespace tessera::testing {

/// A DB path in the temporary directory, removed with its WAL and global-model files.
struct TempDb {
  std::string path;
  explicit TempDb(const std::string& name)
      : path((std::filesystem::temp_directory_path() /
              ("tessera_" + name + "_" + std::to_string(getpid()) + ".db"))
                 .string()) {
    remove_all();
  }
  ~TempDb() { remove_all(); }
  void remove_all() const {
    std::filesystem::path p(path);
    for (const auto& entry : std::filesystem::directory_iterator(p.parent_path())) {
      std::string name = entry.path().filename().string();
      if (name.rfind(p.filename().string(), 0) == 0) std::filesystem::remove(entry.path());
    }
  }
};

/// A made-up machine, so that synthetic records never mix with measured ones.
inline Target fake_target() {
  Target t;
  t.cpu_model = "synthetic";
  t.cores = 2;
  t.compiler = "cc";
  t.flags = "-O3";
  return t;
}

/// Throughput of a configuration as a known function of its knob values (GFLOP/s > 0), with a
/// failure for every seventh one.
inline double synthetic_gflops(const ConfigSpace& space, const Config& c, double scale) {
  std::vector<float> f = space.knob_features(c);
  double g = 1;
  for (size_t i = 0; i < f.size(); ++i) g += (i % 3 == 0 ? 2.0 : 0.5) * f[i];
  return scale * g;
}

/// Appends n records of distinct configurations of `workload` (seeded) on `target`.
inline void add_synthetic_records(RecordDb& db, const Target& target, const std::string& workload,
                                  int n, uint64_t seed, double scale = 1) {
  Workload w = parse_workload(workload);
  ConfigSpace space = space_for(w);
  double flops = instantiate(w).flops;
  std::mt19937_64 rng(seed);
  std::vector<MeasureResult> batch;
  std::set<uint64_t> used;
  for (int i = 0; static_cast<int>(batch.size()) < n && i < 100 * n; ++i) {
    Config c = space.sample(rng);
    if (!used.insert(space.to_index(c)).second) continue;
    MeasureResult r;
    r.workload = w.text();
    r.strategy = space.instantiate(c).text();
    r.dtype = "float32";
    r.flops = flops;
    r.timestamp_ms = 1000 + static_cast<int64_t>(batch.size());
    if (used.size() % 7 == 0) {
      r.error = ErrorKind::kRuntimeError;
      r.message = "synthetic failure";
    } else {
      double seconds = flops / (synthetic_gflops(space, c, scale) * 1e9);
      r.timing.repeats = {seconds};
      r.timing.median = r.timing.mean = seconds;
      r.timing.number = 1;
    }
    batch.push_back(r);
  }
  db.append(target, batch);
}

}  // namespace tessera::testing
