/// `tessera compile`: an ONNX model's distinct library operators tuned as one task list.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <optional>
#include <string>

#include "cli/tune_all_command.h"

namespace tessera {

struct CompileArgs {
  std::string model;
  TuneAllArgs tune;  // tune-all's options; its file and model stay empty
  bool list_tasks = false;
  std::string output;                   // -o model.so; empty: tune only
  std::string layout = "nchwc";         // nchwc: channel blocks between convolutions; nchw: none
  std::string conv_algorithm = "auto";  // auto: Winograd where it pays; direct: never
  // -o: keep defaults that run faster in the model than tuned kernels, per kernel and whole (off:
  // --no-model-check)
  bool no_model_check = false;
};

struct CompileCommand {
  CLI::App* app = nullptr;
  std::shared_ptr<CompileArgs> args = std::make_shared<CompileArgs>();
};

CompileCommand add_compile_command(CLI::App& app);
/// The exit code when `compile` was given.
std::optional<int> run_compile_command(const CompileCommand& command);

}  // namespace tessera
