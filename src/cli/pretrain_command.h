/// `tessera pretrain`: a cost model trained on the records of many workloads, before any tuning
/// of the workloads it will serve (`--pretrained` on tune, tune-all and compile).
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace tessera {

struct PretrainArgs {
  std::vector<std::string> dbs;
  std::string output;
  std::string features = "relation";
  std::string tuner = "xgb";
  int steps = 600;  // a TreeGRU's training steps
  uint64_t seed = 0;
};

struct PretrainCommand {
  CLI::App* app = nullptr;
  std::shared_ptr<PretrainArgs> args = std::make_shared<PretrainArgs>();
};

PretrainCommand add_pretrain_command(CLI::App& app);
/// The exit code when `pretrain` was given.
std::optional<int> run_pretrain_command(const PretrainCommand& command);

}  // namespace tessera
