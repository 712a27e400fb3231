/// `tessera run-model`: an ONNX model imported, rewritten by the graph passes, compiled and run.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <optional>
#include <string>

namespace tessera {

struct RunModelArgs {
  std::string model;
  std::string input;   // .npy; empty: seeded random input
  std::string output;  // .npy of the first output; empty: not written
  std::string db;      // records DB; empty: default configurations
  int threads = 0;
  int repeat = 10;
  uint64_t seed = 42;
  bool check = false;    // compare with the graph's reference path
  bool profile = false;  // time each kernel
  bool json = false;
  bool fixed_threads = false;  // model.so: no fewer threads on a busy machine
  std::string layout;          // nchwc (the default) or nchw; model.onnx only
  std::string conv_algorithm;  // auto (the default) or direct; model.onnx only
};

struct RunModelCommand {
  CLI::App* app = nullptr;
  std::shared_ptr<RunModelArgs> args = std::make_shared<RunModelArgs>();
};

RunModelCommand add_run_model_command(CLI::App& app);
/// The exit code when `run-model` was given.
std::optional<int> run_run_model_command(const RunModelCommand& command);

}  // namespace tessera
