/// Number checks for the command line whose messages say what is wrong in one short line
/// (CLI11's own name a range up to the largest double, 300 digits long).
#pragma once

#include <CLI/CLI.hpp>
#include <string>

namespace tessera {

/// An integer or real number above zero.
CLI::Validator positive_number();
/// An integer or real number of zero or more.
CLI::Validator non_negative_number();
/// A thread count: 0 (all cores, OpenMP's default) or more.
CLI::Validator thread_count();
/// A CPU this process may run on (its affinity mask): pinning to another would fail or be ignored.
CLI::Validator cpu_id();

/// A records DB path that keeps what is written: not empty, not SQLite's `:memory:` or a URI.
CLI::Validator db_path();

/// `--layout nchwc|nchw` of the model commands: channel blocks between convolutions (the
/// default) or the model's own NCHW everywhere, for comparisons.
void add_layout_option(CLI::App* app, std::string& layout);
/// `--conv-algorithm auto|direct`: Winograd for the blocked 3x3 convolutions it pays for (the
/// default) or the direct kernel everywhere, for comparisons.
void add_conv_algorithm_option(CLI::App* app, std::string& algorithm);

}  // namespace tessera
