#include "tune/tune.h"

#include <chrono>
#include <unordered_map>

#include "db/record_db.h"
#include "ops/templates.h"
#include "te/error.h"

namespace tessera {

TuneResult tune(const std::string& workload_text, const TuneParams& params,
                const MeasureParams& measure_params, const std::string& db_path,
                const TuneProgressFn& progress) {
  auto start = std::chrono::steady_clock::now();
  auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  Workload workload = parse_workload(workload_text);
  OpInstance op = instantiate(workload);
  ConfigSpace space = space_for(workload);
  std::unique_ptr<Tuner> tuner = make_tuner(space, op, params);
  Measurer measurer(measure_params);

  TuneResult result;
  result.workload = workload.text();
  std::optional<RecordDb> db;
  if (!db_path.empty()) db.emplace(RecordDb::open(db_path, RecordDb::Mode::kReadWrite));

  // Resume: configurations already measured on this machine are learned from, not re-measured.
  if (db) {
    RecordQuery q;
    q.workload = result.workload;
    q.target_key = measurer.target().key();
    std::vector<Record> old = db->records(q);
    if (!old.empty() && space.size() <= 2'000'000) {
      std::unordered_map<std::string, uint64_t> by_text;
      for (uint64_t i = 0; i < space.size(); ++i)
        by_text.emplace(space.instantiate(space.from_index(i)).text(), i);
      std::vector<Config> configs;
      std::vector<double> gflops;
      for (const Record& r : old) {
        auto it = by_text.find(r.result.strategy);
        if (it == by_text.end()) continue;
        configs.push_back(space.from_index(it->second));
        gflops.push_back(r.result.error == ErrorKind::kOk ? r.result.gflops() : 0.0);
        if (gflops.back() > result.best_gflops) {
          result.best_gflops = gflops.back();
          result.best_strategy = r.result.strategy;
          result.best_config = space.describe(configs.back());
        }
      }
      result.resumed = static_cast<int>(configs.size());
      if (!configs.empty()) tuner->observe(configs, gflops);
    }
  }

  while (result.trials < params.trials) {
    int n = std::min(params.batch_size, params.trials - result.trials);
    std::vector<Config> batch = tuner->propose(n);
    if (batch.empty()) break;  // the space is exhausted
    std::vector<MeasureInput> inputs;
    for (const Config& c : batch)
      inputs.push_back({result.workload, space.instantiate(c).text(), std::nullopt});
    auto measure_start = std::chrono::steady_clock::now();
    std::vector<MeasureResult> measured = measurer.measure(inputs);
    result.measure_seconds +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - measure_start).count();
    if (db) db->append(measurer.target(), measured);
    std::vector<double> gflops;
    for (size_t i = 0; i < measured.size(); ++i) {
      bool ok = measured[i].error == ErrorKind::kOk;
      gflops.push_back(ok ? measured[i].gflops() : 0.0);
      result.errors += !ok;
      if (gflops.back() > result.best_gflops) {
        result.best_gflops = gflops.back();
        result.best_strategy = measured[i].strategy;
        result.best_config = space.describe(batch[i]);
      }
      ++result.trials;
      result.best_curve.push_back(result.best_gflops);
    }
    tuner->observe(batch, gflops);
    if (progress) {
      TuneProgress p{result.trials, params.trials, result.errors, result.best_gflops, elapsed(), 0};
      p.eta_s = p.elapsed_s / p.trials_done * (p.trials_total - p.trials_done);
      progress(p);
    }
  }
  result.seconds = elapsed();
  result.tuner_seconds = tuner->overhead_seconds();
  return result;
}

}  // namespace tessera
