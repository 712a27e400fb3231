/// `tessera tune-all`: many workloads, one trial budget, the gradient task scheduler.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <optional>
#include <string>

#include "tune/tune_all.h"

namespace tessera {

struct TuneAllArgs {
  std::string file;   // task list, or empty with --model
  std::string model;  // resnet18-convs
  TuneAllParams params;
  std::string db = "tessera.db";
  int threads = 0;
  bool json = false;
};

struct TuneAllCommand {
  CLI::App* app = nullptr;
  std::shared_ptr<TuneAllArgs> args = std::make_shared<TuneAllArgs>();
};

TuneAllCommand add_tune_all_command(CLI::App& app);
/// The exit code when `tune-all` was given.
std::optional<int> run_tune_all_command(const TuneAllCommand& command);

}  // namespace tessera
