/// The `tessera db ...` commands (records: list, best, export, import, stats) and
/// `tessera measure` (one candidate through builder, runner and into the records DB).
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <optional>

namespace tessera {

struct DbCommands;

/// Adds the `db` and `measure` subcommands to `app`. Keep the result until after parsing.
std::shared_ptr<DbCommands> add_db_commands(CLI::App& app);

/// Runs whichever of them was parsed and returns its exit code (0 ok, 1 failure, 2 bad input);
/// nothing when neither was on the command line.
std::optional<int> run_db_commands(const DbCommands& commands);

}  // namespace tessera
