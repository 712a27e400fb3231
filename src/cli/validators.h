/// Number checks for the command line whose messages say what is wrong in one short line
/// (CLI11's own name a range up to the largest double, 300 digits long).
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

namespace tessera {

/// An integer or real number above zero.
CLI::Validator positive_number();
/// An integer or real number of zero or more.
CLI::Validator non_negative_number();
/// A whole number in [0, `max`], digits only: CLI11 takes "-1" for an unsigned option as its
/// wrapped value and a number past the type's range without a word.
CLI::Validator whole_number(uint64_t max, std::string what);
/// A seed: any 64-bit unsigned number.
CLI::Validator seed_number();
/// A thread count: 0 (all cores, OpenMP's default) or more.
CLI::Validator thread_count();
/// A CPU this process may run on (its affinity mask): pinning to another would fail or be ignored.
CLI::Validator cpu_id();

/// An output path: not empty (an empty one would silently write nothing).
CLI::Validator nonempty_path();

/// A records DB path that keeps what is written: not empty, not SQLite's `:memory:` or a URI.
CLI::Validator db_path();

/// `--layout nchwc|nchw` of the model commands: channel blocks between convolutions (the
/// default) or the model's own NCHW everywhere, for comparisons.
void add_layout_option(CLI::App* app, std::string& layout);
/// `--conv-algorithm auto|direct`: Winograd for the blocked 3x3 convolutions it pays for (the
/// default) or the direct kernel everywhere, for comparisons.
void add_conv_algorithm_option(CLI::App* app, std::string& algorithm);

}  // namespace tessera
