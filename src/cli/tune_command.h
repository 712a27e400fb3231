/// `tessera tune` (search a workload's space, recording every measurement) and `tessera bench`
/// (the best recorded configuration against the library a user would pick instead).
#pragma once

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "tune/tune.h"

namespace tessera {

struct TuneArgs {
  std::string workload;
  TuneParams params;
  std::string db = "tessera.db";
  int threads = 0;
  std::string timing = "alone";  // or "in-model": MeasureParams::as_in_model
  bool json = false;
};

struct BenchArgs {
  std::string workload;
  std::string db = "tessera.db";
  int threads = 0;
  int repeat = 10;
  int rounds = 3;  // tessera and the libraries timed alternately, so drift hits both alike
  bool json = false;
};

struct TuneCommands {
  CLI::App* tune = nullptr;
  CLI::App* bench = nullptr;
  std::shared_ptr<TuneArgs> tune_args = std::make_shared<TuneArgs>();
  std::shared_ptr<BenchArgs> bench_args = std::make_shared<BenchArgs>();
};

TuneCommands add_tune_commands(CLI::App& app);
/// "transfer on (N records of M workloads)" or "transfer off", for progress lines.
std::string transfer_text(const TransferInfo& t);
/// The transfer part of --json output: used, records, workloads, rebuilt, model (, reason).
nlohmann::json transfer_json(const TransferInfo& t);
/// --retime and --retime-rounds, for tune and tune-all.
void add_retime_options(CLI::App* command, TuneParams& params);
/// The re-timing part of --json output: rounds, picked, seconds, candidates (null when the run
/// was not re-timed).
nlohmann::json retime_json(const TuneResult& r);
/// The exit code when one of these commands was given.
std::optional<int> run_tune_commands(const TuneCommands& commands);

}  // namespace tessera
