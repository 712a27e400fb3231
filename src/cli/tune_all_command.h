/// `tessera tune-all`: many workloads, one trial budget, the gradient task scheduler.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tune/tune_all.h"

namespace tessera {

struct TuneAllArgs {
  std::string file;   // task list, or empty with --model
  std::string model;  // resnet18-convs
  TuneAllParams params;
  std::string db = "tessera.db";
  std::string scheduler = "predicted";  // parsed by parse_scheduler_policy
  int threads = 0;
  // "in-model": candidates timed as they run in a model (MeasureParams::as_in_model), under
  // their own target key; "alone": back to back with their operands in cache.
  std::string timing = "alone";
  bool json = false;
};

struct TuneAllCommand {
  CLI::App* app = nullptr;
  std::shared_ptr<TuneAllArgs> args = std::make_shared<TuneAllArgs>();
};

TuneAllCommand add_tune_all_command(CLI::App& app);
/// The options of tune-all after its task list (trials, tuner, transfer, re-timing, DB,
/// threads, seed, JSON), for commands that tune a task list of their own.
void add_tune_all_options(CLI::App* app, TuneAllArgs& args, bool allow_zero_trials = false);
/// Tunes `specs` as tune-all does, with its progress on stderr and its table (or JSON) on stdout.
/// The exit code: 0, 1 when a task found no working kernel, 2 on bad input.
int tune_task_list(const std::vector<TaskSpec>& specs, const TuneAllArgs& args);
/// The exit code when `tune-all` was given.
std::optional<int> run_tune_all_command(const TuneAllCommand& command);

}  // namespace tessera
