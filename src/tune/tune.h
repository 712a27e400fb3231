/// The tuning loop: propose a batch, measure it in isolated workers, record it, learn, repeat.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "measure/measure.h"
#include "tune/tuner.h"

namespace tessera {

struct TuneProgress {
  int trials_done = 0;
  int trials_total = 0;
  int errors = 0;
  double best_gflops = 0;
  double elapsed_s = 0;
  double eta_s = 0;
};
using TuneProgressFn = std::function<void(const TuneProgress&)>;

struct TuneResult {
  std::string workload;
  int trials = 0;   // measured in this run
  int resumed = 0;  // records of earlier runs the tuner started from
  int errors = 0;
  double best_gflops = 0;  // over this run and the resumed records
  std::string best_strategy;
  std::string best_config;         // knob values
  std::vector<double> best_curve;  // best GFLOP/s after each trial of this run
  double seconds = 0;
  double tuner_seconds = 0;    // model fitting and search
  double measure_seconds = 0;  // building and running candidates
};

/// Tunes `workload` for `params.trials` trials. With a non-empty `db_path`, records of the same
/// workload and machine are loaded first (the run resumes from them) and every batch is appended
/// as soon as it is measured.
TuneResult tune(const std::string& workload, const TuneParams& params, const MeasureParams& measure,
                const std::string& db_path, const TuneProgressFn& progress = nullptr);

}  // namespace tessera
